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
        "Lesson 04 wrote a Linear layer's weight gradient as dW = dYᵀX, a sum over the rows of the batch. Which term "
        "of that sum belongs to example n alone, which two vectors is it made of, and what is the norm of a matrix "
        "made that way?",
        "Check values. The notebook's hand example: the norms returned are (2, 200), and .grad is 3.5 (clipping the "
        "batch's mean gradient would give 5). A smaller case for one layer: nn.Linear(2, 2) whose input for example "
        "n is a = (3, 4) and whose output gradient for that example is g = (1, 2). Example n's weight gradient then "
        "has norm √125 ≈ 11.180, its bias gradient √5 ≈ 2.236, so its norm over the layer is √130 ≈ 11.402. And the "
        "bound: on the tests' 26-parameter MLP with a batch of 4, holding every example's gradient takes 104 numbers "
        "against a bound of 26.",
        "Everything example i's gradient is made of sits in two places after one forward and one backward of the "
        "batch: each Linear's input (row i) and the gradient at that Linear's output (row i, which is example i's "
        "own because the examples do not mix). Hooks (Part C's kind) or a gradient taken with respect to the outputs "
        "you kept will give you both. The norm then needs only those rows, layer by layer; the clipped mean is again "
        "a sum over the batch's rows, like lesson 04's dYᵀX, once you know what each row should be multiplied by. "
        "Check your norms against a backward pass per example run outside your function, as the notebook's try-it "
        "cell does."),
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
