"""Checks for exercise 10, beyond first order, one module per part: a Hessian-vector product for a function of
several tensors that stays differentiable with respect to those that require grad (:mod:`.hvp`), the Gauss-Newton
product Jᵀ H_ℓ J v of a network and a loss (:mod:`.gauss_newton`, which holds Part A.1's check) and the largest
eigenvalue of the Hessian at a saddle (:mod:`.sharpness`); Hutchinson's estimate of the Hessian's diagonal, every H·z
in one batched pass, and the number of probes a given accuracy needs (:mod:`.hutchinson`), and the fewest probes that
make it exact for a banded Hessian (:mod:`.probing`); the WGAN-GP gradient penalty at interpolates, for critics that
mix their batch too (:mod:`.penalty`); the DP-SGD step for a model with frozen parameters and running statistics,
never holding the examples' gradients (:mod:`.clipping`); activation checkpointing of the fewest blocks a memory
budget allows (:mod:`.checkpoint`); :mod:`.misconceptions` holds every mistake they name; the hint book
(:data:`hint`) is here.

Every check first runs its corner cases (the edges of the domain its docstring states), the same at every seed, then
the cases it draws. Oracles: the full Hessian by autograd and finite differences of gradients (Parts A, B.1), and for
hvp's graph f's third derivatives by autograd and by central differences of H·v; the full Jacobian and the loss's
Hessian with finite differences of the network and of the loss's gradient (A.1's gnvp), the Hessian's eigenvalues
(A.2), the means of the probes' products (B.1), the exact expected error and a measurement of drawn probes (B.2), a
loop of per-example backward passes (Part D), central differences of the penalty, each example's gradient taken with
the others held fixed (Part C), a plain forward from the same random state and the check's own measurement of each
block's saved bytes (Part E).
"""

from ...hints import HintBook, PartHints
from .checkpoint import check_budgeted_forward
from .clipping import check_clipped_mean_gradient
from .gauss_newton import check_hvp
from .hutchinson import check_hessian_diagonal, check_probes_needed
from .penalty import check_gradient_penalty
from .probing import check_exact_probes
from .sharpness import check_sharpness

__all__ = ["check_budgeted_forward", "check_clipped_mean_gradient", "check_exact_probes", "check_gradient_penalty",
           "check_hessian_diagonal", "check_hvp", "check_probes_needed", "check_sharpness",
           "hint"]

#: For each part a question, then a check value or a smaller case, then the approach in words.
hint = HintBook({
    "A": PartHints(texts=(
        r"For hvp: which single scalar has every entry of $Hv$ as its gradient, cross terms included? And when a "
        r"tensor of xs (or of vs) arrives requiring grad, a penalty made of your $Hv$ is differentiated with respect "
        "to that very tensor: is there a path in the graph from your result back to it, or does it stop somewhere "
        r"on the way, and where? For gnvp: $Gv$ is three products in a row, $Jv$, then $H_\ell$ times it, then "
        r"$J^\top$ times that. Which of them does one reverse pass give you as it is, and which is a forward-mode "
        "product that torch.autograd, without torch.func, must give you some other way? For A.2: for "
        r"$H = \mathrm{diag}(1.5, -4)$, which eigenvalue does multiplying by $H$ again and again single out, and "
        "what could you change about the matrix you multiply by, keeping its eigenvectors, so that 1.5 wins "
        "instead?",
        r"hvp: the try-it cell's $f(a, s) = s \sum a^2$ gives $(Hv)_a = (8, 4)$ and $(Hv)_s = 2$. Then run your "
        r"function on $f(u, w) = \sum u^4/4 + 2\sum w$ (linear in $w$) and on $f(u, W) = 3\sum u - \sum W$ (linear "
        "in both): what does autograd say in each, and what does the mathematics say the answer is there? For the "
        r"graph, a smaller case: f(a) = sum(a**3)/3 at a = (1, −2), an nn.Parameter, with v = (1, 3): $Hv$ = (2, −12), "
        r"and the penalty $v^\top H v$ = −34 has the gradient (2, 18) with respect to a. Does yours, and does the same "
        "call still come back without a graph when a is a plain tensor? A.2: the "
        "try-it saddle has λmax = −1 + √6 ≈ 1.449490, while the eigenvalue of largest size is −1 − √6 ≈ −3.449490 "
        "(what the lesson's loop returns there). f(a, b) = 1.5 (a − b)**2 − (a + b)**2 has 6 along (1, −1) and −4 "
        "along (1, 1): does your start ever see the 6? For 3 sum(u) − sum(W) the answer is 0: what does your "
        "normalisation do with a zero product? gnvp, a smaller case: a network of one number with one output, "
        "net(a) = a**2, and loss(z) = (z − 1)**2, at a = 2 and v = 1: J = 4 and the loss's curvature is 2, so "
        "G·v = 32, while H·v of loss(net(a)) is 44. Which term of H makes the 12 between them, and why is it zero "
        "wherever the network is affine in all its tensors jointly?",
        "hvp in words: where the gradient does not depend on a tensor, autograd has nothing to differentiate: the "
        "docstring of torch.autograd.grad has two arguments about inputs that were not used, and whether the scalar "
        "you differentiate requires grad tells you, before the second call, if there is anything to differentiate "
        "at all. For the graph: a copy you detach, or a leaf you make yourself, is where a later derivative stops, "
        "while a tensor that already requires grad can be differentiated with respect to directly, wherever it sits "
        "in a graph (a result from the middle of one included). And your result keeps a record only of the passes "
        "that were told to record: which of yours must, and on what condition? gnvp: the last two products are the "
        "easy ones (the loss's curvature in the direction Jv is an hvp in z; a transposed product is what any "
        "reverse pass with chosen output gradients computes). For Jv: a "
        "reverse pass turns an output gradient u of your choice into Jᵀu. As a function of u, what kind of "
        "function is that, and what could differentiating it once more give you? torch.autograd's documentation "
        "of forward mode is another way in. Count your passes against the 5 allowed. A.2, traced: H = "
        "diag(1.5, −4) from v = (1, 1) gives (1.5, −4) after one product and (7.59, −1024) after five: the −4 "
        "wins. Add 4v to every product instead and trace again. Which eigenvalue of H does the winner give back, "
        "how large must the added multiple be at least, and where can your function learn a large enough one from "
        "products alone?"),
        checks=("check_hvp", "check_sharpness"), cells=("hvp", "gnvp", "sharpness")),
    "B": PartHints(texts=(
        "For hessian_diagonal: from one probe to the next, what changes in the computation of Hz and what stays "
        "exactly the same, and how many backward walks through the part that stays the same does that really call "
        r"for? For exact_probes: in the formula for the mean of $z_i (Hz)_i$, which means over the probes must be 1 "
        r"and which must be 0 for every $H$ of the bandwidth, and must a probe's entries be $\pm 1$ for that? For "
        r"B.2: of the terms of $z_i (Hz)_i$, which change from one draw of the signs to the next, and which are the "
        "same in every draw?",
        r"A smaller case for hessian_diagonal: in its try-it cell, $H = \begin{pmatrix}4 & 2\\ 2 & 12\end{pmatrix}$ "
        "at x = (1, 2). The probes (1, 1) and (1, −1) stacked as two rows have the products Hz = (6, 14) and "
        "(2, −10), the estimates (6, 14) and (2, 10), and the mean (4, 12); your function must get there with the "
        "engine run twice in all (once for a linear f). For exact_probes: with n = 4 and bandwidth 1, are the rows "
        "(1, 1, −1, −1) and (1, −1, −1, 1) exact (work out the mean of z_i z_j for every pair one apart)? They are, "
        "and no single row can be. For bandwidth 2, rows of signs need four: three mutually orthogonal sign vectors "
        "need a length divisible by 4. Check values for B.2: for a Hessian "
        r"$\begin{pmatrix}2 & 1\\ 1 & 2\end{pmatrix}$ a target of 0.2 needs 7 probes; for f(x) = log(1 + sum(x**2)) "
        "at x = (1, 2, 3) a target of 0.5 needs 7, 0.2 needs 44 and 0.1 needs 173; any f with a diagonal Hessian "
        "needs 1. Your formula must also agree with the try-it cell's measurement.",
        "In words, for hessian_diagonal: one first gradient that records its work; then a single call of "
        "torch.autograd.grad that receives all the probes at once, stacked as a batch of output gradients; each row "
        "of what comes back times its own probe, then the mean over the rows. For exact_probes, read the probes by "
        "columns: column i holds what entry i sees in the k probes. Exactness asks every column to have mean square 1 "
        "and to be orthogonal to the columns of the entries within the bandwidth of it. How many mutually orthogonal "
        "nonzero columns fit in k rows, which entries may reuse a column, and what scale gives the mean square 1? "
        "For B.2: write the expected squared error of one probe's estimate as a sum over entries of H (which entries "
        "enter it, and which never do?); the mean of k independent probes divides it by k; compare it with the "
        "bound, squared on both sides, and take the smallest whole k that keeps the bound."),
        checks=("check_hessian_diagonal", "check_exact_probes", "check_probes_needed"),
        cells=("hessian_diagonal", "exact_probes", "probes_needed")),
    "C": PartHints(texts=(
        "Autograd differentiates only with respect to a tensor that requires grad, and real and fake do not: which "
        "tensor is it here? And when a BatchNorm normalises with the batch's statistics, which scores move when you "
        "move example i, and what does the gradient of the summed scores then add up at example i?",
        "Check values: a linear critic with weight (3, 4) gives a penalty of 160 for weight 10, whatever alpha, and "
        "its weight's gradient (48, 64) (the try-it cell prints both). The try-it cell's BatchNorm critic without an "
        "activation gives 7.2841545 by the loop of one backward pass per example; the gradient of its summed scores "
        "is exactly 0 at every interpolate, so a penalty built on it is exactly the weight, 10. For B = 2, what "
        "does that critic's norm make of two examples, and which way must each one's score move?",
        "In words: Part B.1 sent a whole batch of output gradients through one call of torch.autograd.grad, and got "
        "one vector-Jacobian product per row. Here the scores form a vector of B numbers: which B output gradients "
        "make row k of that batch the gradient of score k alone, and which slice of row k is then example k's own "
        "gradient? Check the answer on the try-it cell's loop, then differentiate your penalty with respect to the "
        "critic's parameters, as the test does."),
        checks=("check_gradient_penalty",), cells=("gradient_penalty",)),
    "D": PartHints(texts=(
        "For one example, a Linear layer maps its input a to W a + b, and the backward pass hands the layer the "
        "gradient d of that example's loss with respect to the output: what is that example's gradient with respect "
        "to W, made of a and d, and what is its norm? And what does a BatchNorm's weight multiply in eval mode?",
        "A check value: for a = (1, 2, 2) and d = (3, 4), the example's weight gradient is a 2 × 3 matrix of norm "
        "15, without writing out its six entries. The try-it cell's loop prints the norms of its four examples, "
        "1.987, 0.742, 0.728 and 1.696 (over the BatchNorm and the last layer; the first layer is frozen): your "
        "norms must be those. Can one backward pass of the summed losses give you every example's own d at every "
        "layer, and why does that need the model in eval mode?",
        "In words: one forward pass that keeps each trainable layer's input and output; one backward pass from the "
        "sum of the examples' losses to those outputs, whose row i belongs to example i alone; each example's "
        "squared norm as a sum over the trainable parameters of what its gradient is made of; one clip factor per "
        "example. The clipped mean is then a weighted sum over the examples of those same pieces: which product of "
        "the stacked output gradients (each row scaled by its factor) and the stacked inputs sums the examples' "
        "weight gradients without building any of them?"),
        checks=("check_clipped_mean_gradient",), cells=("clipped_mean_gradient",)),
    "E": PartHints(texts=(
        "Every checkpoint costs the same, one rerun of its block, whatever the block: what differs from one block "
        "to the next that should decide which ones you take, and how can your function find it out before it runs "
        "the forward pass it returns?",
        "Check values: the try-it cell's plain forward saves 36,864 bytes, and a checkpoint of one block saves "
        "1,024 (its (16, 8) float64 input). There a budget of 30,000 needs 2 checkpoints and 20,000 needs 3, and the "
        "widest block (hidden 40, ReLU) is not among the best choices. If your output differs from the plain "
        "forward, what did your measuring draw from the random state?",
        "In words: measure each block once, plainly, on a leaf shaped like x (the bytes do not depend on the "
        "values), and put the global random state back afterwards; a checkpoint gives back a block's plain bytes "
        "minus the input it keeps; take the blocks in the order of what they give back until the total fits; then "
        "run the forward, each chosen block in its own checkpoint."),
        checks=("check_budgeted_forward",), cells=("budgeted_forward",)),
})
