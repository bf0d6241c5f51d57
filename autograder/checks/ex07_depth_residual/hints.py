"""Exercise 07's hint book: for each part a question, then a check value or a smaller case, then the approach in
words (:mod:`autograder.hints`)."""

from __future__ import annotations

from ...hints import HintBook, PartHints

hint = HintBook({
    "A": PartHints(texts=(
        "For numbers, the size of a product is the product of the sizes, so the lesson added logarithms. For "
        r"matrices, is $\lVert J_1^\top J_2^\top v\rVert$ equal to $\lVert J_1\rVert\,\lVert J_2\rVert\,\lVert v"
        r"\rVert$? And if not, what can you carry from layer to layer that float64 can hold however deep the chain "
        "is?",
        r"A smaller case to test against: $x = 0$ and zero biases make every $\tanh'$ exactly 1, so the chain is "
        r"linear. Two plain layers, $W_1 = \begin{pmatrix}1 & 2\\ 0 & 1\end{pmatrix}$, $W_2 = \begin{pmatrix}0.5 & "
        r"0\\ 1 & -1\end{pmatrix}$, upstream $(1, 0)$: the gradient at $h_1$ is $(0.5, 0)$ and at $h_0$ it is "
        r"$(0.5, 1)$, so the profile is $[0.0485, -0.3010, 0]$. Adding the log10 of the two matrices' sizes (2.414 "
        "and 1.460) would say 0.547 at $h_0$.",
        "Run the forward pass once, keeping every layer's pre-activation. Then start from the upstream gradient and "
        "walk down: at each layer multiply by the slopes of its tanh, carry the vector through the transposed "
        "weights, add the vector itself back for a residual layer. After each layer, add the log10 of the vector's "
        "length to a running total and divide the vector by that length, so it never leaves float64's range. The "
        "running totals, read from the input end, are the profile."),
        checks=("check_log10_gradient_profile",), cells=("gradient_profile",)),
    "B": PartHints(texts=(
        "Try your function on `model.parameters()` twice in a row, and on a list. Does a second loop over the same "
        "argument see anything?",
        "Check values: gradients $(3, 4)$ and $(12)$ with `max_norm` 1 have total norm 13 and become $(3, 4)/13$ "
        "and $(12)/13$, and 13 is returned; with `max_norm` 20 nothing changes. With every gradient zero the total "
        "is 0, nothing changes and 0 is returned, without a division by zero.",
        "Turn the parameters into a list first and keep those whose gradient exists. Compute one total from all of "
        "their entries, then one factor from it, and multiply each existing gradient tensor by that factor where it "
        "lies in memory. Return the total you measured before scaling."),
        checks=("check_clip_grad_norm",), cells=("clip_grad_norm",)),
    "C": PartHints(texts=(
        "A layer that runs twice produces two outputs. How many gradients does backward deliver for it, how many "
        "times does your hook run, and what does your code do with the second one?",
        "A smaller case: one `nn.Linear(1, 1)` with weight 2 and bias 0 applied twice, out = lin(lin(x)), x = 1, "
        r"loss = out. The gradient at the second output is 1 and at the first output 2 (the weight), so the layer's "
        r"entry is $\sqrt{1^2 + 2^2} = \sqrt 5 \approx 2.236$: not 1, not 2, not 3.",
        "Find the Linear layers with `model.modules()` and give each one a running sum of squares. Register a hook "
        "that adds the squared norm of every gradient arriving at that layer's outputs to its sum; run forward and "
        "backward once; take the square roots at the end. Keep every handle, and remove them all whatever happens in "
        "between."),
        checks=("check_layer_grad_norms",), cells=("layer_grad_norms",)),
})
