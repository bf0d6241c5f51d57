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
        "Suppose one example of the batch has a gradient a hundred times longer than the others'. Clipping the "
        "batch's mean gradient shortens the whole step: does it change how much that one example steers its "
        "direction? And whose gradient must be measured so that no single example can contribute more than "
        "max_norm?",
        "Check values, the notebook's hand example: one weight w = 1, inputs 1 and 10, targets 0, loss (w x − y)² "
        "per example. The examples' gradients are 2 and 200, so the norms returned are (2, 200); with max_norm 5 "
        "they clip to 2 and 5, and .grad is their mean, 3.5. Clipping the mean gradient 101 would give 5; clipping "
        "each example's share of the mean (1 and 100) would give 6.",
        "For each example on its own, get the gradient of that example's loss with respect to every parameter, "
        "without letting the examples add up in .grad (ask autograd for the gradients, keeping the graph for the "
        "next example). Its norm is taken over all the parameters together; scale all of its tensors by the one "
        "factor min(1, max_norm / (norm + 1e-6)) and add them to totals of your own. After the last example, "
        "divide the totals by the batch size and put them in .grad; return the norms you measured, in a tensor."),
        checks=("check_per_example_clip",), cells=("clip_grad_norm",)),
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
