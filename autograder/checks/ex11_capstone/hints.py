"""Exercise 11's hint book: for each part a question, then a check value or a smaller case, then the approach in
words (:mod:`autograder.hints`). Every number is the reference's or a direct computation on a small case."""

from __future__ import annotations

from ...hints import HintBook, PartHints

hint = HintBook({
    "A": PartHints(texts=(
        "Your node makes two decisions: by what may you shift every input without changing the log of the sum of "
        "exps, so that no exponent is positive, and what is the derivative of that log with respect to one input, "
        "written with the node's own output?",
        "Check values, from the reference: logsumexp of 1, 2 and 3 is 3.4076, and each input's share (its local "
        "derivative) is 0.0900, 0.2447 and 0.6652, which add up to 1; behind a factor 2 further on, the gradients "
        "are 0.1800, 0.4894 and 1.3306. logsumexp of 1000 and 999 is 1000.3133. The same Value $x$ listed twice "
        "gives $x + 0.6931$ and a gradient of 1 per unit of the node's gradient, one half from each listing. A "
        "single Value gives itself back, with its whole gradient. If the three shares come out as 2.7183, "
        "7.3891 and 20.086, the local derivative lacks a division.",
        "Take the largest input's data as the shift, a plain number. The node's data is the shift plus the log of "
        "the sum of the exps of each input's data minus the shift. Create one Value of your engine with the given "
        "Values as its children. Its backward goes over the list and adds to each Value's gradient that Value's "
        "softmax weight, the exp of its data minus the node's data, times the node's own gradient: a Value listed "
        "twice gets two shares. The shift gets no gradient, since the function is the same whatever shift you "
        "pick."),
        checks=("check_logsumexp",), cells=("logsumexp",)),
    "B": PartHints(texts=(
        "The budget is 5,000 forward passes of one point: how will you split it between points per step and "
        "steps, which loss stops pushing the points already on their side with room to spare, and how would your "
        "loop notice that a run got stuck with the tip of a moon on the wrong side?",
        "A loss to test by hand, the hinge $\\max(0,\\ 1 - s\\cdot\\text{score})$ with the sign $s = +1$ for label "
        "1 and $-1$ for label 0: on four points with scores 0.3, 0.3, -2 and 1.5 and labels 1, 0, 0 and 1 it gives "
        "0.7, 1.3, 0 and 0, a mean of 0.5. Taking the label itself as the sign gives 0.7, 1, 1 and 0 instead, and a "
        "model trained on that calls every point class 1. What the reference recipe does, measured: on the visible "
        "test's draw (its start classifies 50 % of the held-out points right) it spends 2,500 forward passes, its "
        "loss falls from about 0.43 (mean of its first 25 steps) to about 0.007 (its last 25), and it ends at "
        "99.8 % held out; on the 10 draws of `checks.try_train_moons(train_moons, Value, draws=10)` it reaches "
        "98.0 % to 100 %. Compare your run with these numbers.",
        "Go round the training points in order, a small batch per step, the step's loss the mean of the batch's "
        "hinge losses; clear the gradients, backpropagate, and move every parameter against a velocity that keeps "
        "a decaying memory of past gradients: it averages out the noise of small batches. Let the learning rate "
        "fall over the run so that the last steps are small and the boundary settles. During the last pass over the "
        "data count the points your batches got wrong; when there are more than a few, train another round, with a "
        "fresh velocity and the rate high again, while the budget lasts. When a draw fails, plot its losses and its "
        "boundary (the try-it cell draws both): a loss stuck with a moon's tip on the wrong side needs that second "
        "round, a low but jittery loss smaller final steps."),
        checks=("check_train_moons",), cells=("train_moons",)),
    "C": PartHints(texts=(
        "Written with $x_i$ and the norm itself, what is $\\partial \\lVert x_i \\rVert / \\partial x_{ij}$, and what "
        "does that formula give on a row of zeros, or on a row whose squares float64 cannot hold? What may you "
        "divide a row by without changing the direction it points in?",
        "Check values, from the reference: x = [[3, 4], [0, 0]] and dy = [2, 1] give [[1.2, 1.6], [0, 0]], and a "
        "central difference measures the same 0 on the zero row. For the row [3e200, 4e200] the sum of squares is "
        "inf, and so is torch's own vector norm, yet the answer (dy = [1]) is [[0.6, 0.8]]; the row [3e-200, "
        "4e-200] has a sum of squares of exactly 0.0 and the same answer. x = [[1, 2, 2]] with dy = [3] gives "
        "[[1, 2, 2]]. If your zero row holds nan, a 0 / 0 was computed somewhere, even in a branch you then discard.",
        "The gradient of a row's norm is the row divided by its norm, a unit vector, times that row's dy (a column, "
        "one number per row). The norm is homogeneous: divide each row by its largest absolute entry first (leave a "
        "zero row alone, its largest entry is 0) and every scaled entry lies within [-1, 1], so no square over- or "
        "underflows; the scale cancels in the direction. A nonzero scaled row has a norm of at least 1, and the "
        "zero row needs a denominator that is not 0 and a result of 0: choose one that keeps both true, without "
        "producing a nan anywhere."),
        checks=("check_norm_backward",), cells=("norm_backward",)),
    "C2": PartHints(texts=(
        "$u\\,\\sigma(u)$ is a product of two functions of $u$: which two terms does the product rule give for "
        "SiLU? For the block: three $(N, H)$ tensors pass through the forward, the pre-activation, its sigmoid and "
        "SiLU's output; from which of them can the other two be computed again, elementwise, at every value, and "
        "which gradients need each of them?",
        "SiLU's derivative, from the reference: 0.5 at 0, 0.9277 at 1 and 1.0908 at 2 (above 1: SiLU overshoots), "
        "-0.0908 at -2 (negative), 1 at 40 and at 1000, 0 at -1000 (not nan); if you get 0.7311 at 1, the "
        "product rule lost a term. Two inputs, one output: SiLU gives -0.18877 at -0.5 and at -2.5088, where its "
        "derivatives are 0.2600 and -0.0993. The sigmoid is exactly 1.0 from 37 up in float64, so 37, 40 and 1000 "
        "share one sigmoid. "
        "A smaller case to test against, $D = H = 1$: $x$ = [[0.5]], W1 = [[2]], b1 = [0], W2 = [[-1]], "
        "b2 = [0.25] and dy = [[1]]. The pre-activation is 1, and the five gradients are dx = [[-0.8553]], "
        "dW1 = [[-0.4638]], db1 = [-0.9277], dW2 = [[0.7311]] and db2 = [1]. If you get dx = [[-1.8553]], one "
        "route is missing; dx = [[0.0689]] or db1 = [-0.4656] means a nonlinearity's rule other than SiLU's. "
        "With W2 and b2 at zero, dx equals dy and the first layer's two gradients are zero, whatever $x$ is. The "
        "try-it cell's block has a budget of 5 * 4 = 20 numbers of its own.",
        "Make a table with one row per gradient of the five and one per intermediate gradient (the one reaching "
        "SiLU's output, the one reaching its input), and write in each row the forward tensors it reads. Cross out "
        "the inputs: they are free. What is left are hidden-layer tensors; ask of each whether another one in the "
        "list determines it without a matrix product (the two inputs above with one output, and the sigmoid at 37 "
        "and at 40, are the cases to ask it with). Keep only that one, and rebuild the rest in the backward. "
        "Then trace your backward on the $D = H = 1$ case above at the pre-activations 40 and -40, by hand or "
        "with prints, and compare with autograd there before you run the test."),
        checks=("check_residual_backward",), cells=("silu_backward", "residual_backward")),
    "D": PartHints(texts=(
        "Three things the lesson did not show. With momentum=None, once this call is counted and the counter holds "
        "$t$, what share of the running value must this batch have for it to be the plain average over $t$ "
        "batches, and what then becomes of the initial values when the counter starts at 0? Whose tensor is the "
        "counter, and does your change to it reach the caller? When a batch of one is refused in training mode, "
        "what may have changed by then? And for eval_scale: once the same batch has been trained on again and again, "
        "which variance divides its output in training mode, which one at evaluation, and are they the same number?",
        "A smaller case, one feature: gamma [1], beta [0], momentum=None, a counter at 0, running mean [0] and "
        "running variance [1]. Batch [[1], [3]] and then batch [[2], [4], [9]]. After the first, the counter holds 1 "
        "and the running statistics are 2 and 2: the initial 0 and 1 are gone. After the second, the counter holds "
        "2 and the statistics are 3.5 and 7.5, the average of the two batches' means and of the variances the "
        "layer keeps for them; the five numbers together have mean 3.8 and variance 9.7, which is not what the "
        "layer keeps. "
        "Resumed from a counter at 3 with running statistics 2 and 2, the second batch alone leaves 4, 2.75 and "
        "4.75. For eval_scale, a case smaller than the test's: n = 3, batch_var 2, running_var 1, momentum 0.5. "
        "After 0, 1 and 2 calls the running variance is 1, 2 and 2.5, and r is 1.41421, 1.00000 and 0.894428; "
        "after a million calls it is 3 and r is 0.816497.",
        "Write the average of $t$ numbers in terms of the average of the first $t - 1$ and the $t$-th, on paper, "
        "for $t = 2$ and $t = 3$: compare its shape with the exponential update you already have, and read off "
        "what the counter must supply. Then run your function beside nn.BatchNorm1d(D, momentum=None) from the same "
        "state, on batches of 2, 7 and 3, and again from a counter you set above 0 (set the oracle's buffers to "
        "match), comparing the output and all three buffers after every call. For the batch of one, print the "
        "oracle's counter before and after it refuses, and decide where in your function the refusal must come so "
        "that none of your tensors moves. For eval_scale, write the running variance after one, two and three calls "
        "as a mix of its start and of what each call brings in, and look for the pattern in the start's share; with "
        "momentum=None count batches instead: how many does the average cover, and how many of them are this "
        "batch? Check your closed form against your own layer at a few dozen calls before you trust it at "
        "10^12 calls."),
        checks=("check_batchnorm_forward",), cells=("batchnorm_forward", "eval_scale")),
    "D2": PartHints(texts=(
        "$x$ reaches the output three ways: directly through $x - \\mu$, through $\\mu$ and through $\\sigma^2$. "
        "What does each route add to $dx$, and over which axis do $d\\gamma$ and $d\\beta$ sum?",
        "A smaller case, one feature: $x$ = [[1], [2], [4]], gamma [2], dout [[1], [0], [0]], the default eps. "
        "Then $\\hat x$ = [-1.0690, -0.2673, 1.3363], $dx$ = [0.4582, -0.6872, 0.2291], $d\\gamma$ = [-1.0690] "
        "and $d\\beta$ = [1]. Whatever dout is, $dx$ sums to 0 over the batch, feature by feature. With the direct "
        "route alone $dx$ would be [1.6036, 0, 0]; without the route through $\\sigma^2$, [1.0690, -0.5345, "
        "-0.5345]; without the one through $\\mu$, [0.9927, -0.1527, 0.7636]. A constant feature: $x$ = [[1, 3], "
        "[2, 3]], gamma [1, 1], dout [[1, 1], [0, 0]] gives $dx$ = ±158.11 in the constant column: $\\hat x$ is 0 "
        "there, and $1/\\sqrt{\\varepsilon}$ scales what reaches it.",
        "Write the forward as small stages, as an engine would record them: $\\mu$, $d = x - \\mu$, $\\sigma^2$, "
        "$r = (\\sigma^2 + \\varepsilon)^{-1/2}$, $\\hat x = d\\cdot r$, out. Go back one stage at a time and add up "
        "whatever reaches each quantity: $r$ is shared by the whole batch, so its gradient is a sum over the batch, "
        "and $d\\sigma^2$ follows by the power rule; of $d\\mu$'s contributions, one is zero for every batch "
        "(what is $\\sum_i d_i$?). Check each stage against autograd on a batch of 3. Once the staged version "
        "agrees, you may fold the three routes into one expression with $\\hat x$, $r$ and means over the batch, "
        "and the try-it cell tells you whether the folding is still right."),
        checks=("check_batchnorm_backward",), cells=("batchnorm_backward",)),
    "E": PartHints(texts=(
        "A gradient can only be wrong if a stage between its parameter and the loss is wrong: which of the five "
        "does a key-by-key comparison with autograd flag, which stages does it pass through that the right ones do "
        "not, and does its error grow or shrink when the batch gets smaller? Once you have the line: which number "
        "in it differs from the one the forward pass used, and by how much for a batch of n?",
        "Check values from the right backward, on the try-it cell's starting parameters (the same draw as "
        "`train_with`'s) and the first training digits. On 16 digits the loss is 2.7450 and the gradients' norms are "
        "1.5885 (W1), 0.2571 (gamma), 0.2265 (beta), 1.0045 (W2) and 0.2273 (b2); on 2 digits they are 47.285, "
        "0.5342, 0.5197, 2.4168 and 0.5830; on 64 digits 1.2582, 0.1860, 0.1486, 0.7956 and 0.1248. A right "
        "hand-derived gradient agrees with autograd to about $10^{-12}$ relative, so an error of a percent is a bug, "
        "even where the norms agree to two digits: compare the tensors, not only their norms. Inside BatchNorm, on "
        "those 16 digits, the gradient of the loss with respect to the batch variance of hidden unit 0 is -0.280604 "
        "by autograd and -0.254717 in the given backward (unit 1: 0.0540261 and 0.0490419); on 4 digits unit 0's "
        "are 0.410389 and 0.266585. Cases outside the notebook's, to test your `w1_errors`: at the try-it start on "
        "the first 3 digits the given backward's W1 gradient is 43.2 % off autograd's, while the difference of the "
        "two norms is only 10.1 % of autograd's norm; at `start_params(torch.Generator().manual_seed(1), 16)` on the "
        "first 3 and 8 digits it is 62.7 % and 12.4 % off (norms: 19.4 % and 0.50 %). If your numbers for this "
        "second start are the notebook's, does your function read the params it is given?",
        "A traced check you can run on your own finding: make each intermediate tensor of the forward pass, from the "
        "logits down to BatchNorm's statistics, a leaf in turn, and set autograd's gradient of it beside the given "
        "backward's; the first that disagrees, while everything it is computed from agrees, comes out of the buggy "
        "line. For the factor, the ratio of the two gradients of the variance is the same for every hidden unit "
        "whose variance is well above eps, and it moves with the batch size only: tabulate it at n = 4, 16 and 64, "
        "and ask which quantity in the line differs from the forward's by a factor that depends on n, and how the "
        "line's power turns that factor into yours. Your fix is right when all five keys agree with autograd at a "
        "batch of 2 and at one of 64."),
        checks=("check_bug_hunt",), cells=("wrong_gradient", "dvar_factor", "w1_errors", "mlp_gradients")),
    "F": PartHints(texts=(
        "Besides the step, your loop has three duties: which single number does global-norm clipping compare with "
        "`max_norm`, on which steps does the gate run and which gradients must it compare, and when do the running "
        "statistics get updated? And for your choices: what do the norms of a run without clipping look like, and "
        "how many steps may a wrong backward train before a gate hears of it?",
        "Clipping, a smaller case: gradients W1 = [[3, 0]] and b2 = [4] (the others zero) have a global norm of 5. "
        "At `max_norm` 1 every gradient is multiplied by the same 0.2: W1 becomes [[0.6, 0]] and b2 [0.8] (clipping "
        "each gradient by its own norm would give [[1, 0]] and [1]: wrong); at 10 or at `math.inf` nothing changes. "
        "The gate, with a period of 4, runs on steps 0, 4, 8...: a gradient function that goes wrong from step 5 on "
        "must make the run raise on step 8, not before. Tolerance, measured on the reference's starting parameters "
        "and 16 training digits: right gradients differ from autograd's by at most $7 \\cdot 10^{-16}$ relative, "
        "while the test's wrong ones are $10^{-3}$ off. Running statistics: the reference's trained network "
        "classifies 98.1 % of the held-out digits (seed 0) with its running statistics, and 78.3 % with the "
        "initial ones (zeros and ones): an accuracy near the latter means they were never updated.",
        "Seed your own generator and draw the initial weights from it, scaled by one over the square root of each "
        "layer's fan-in, and shuffle the examples with it. Each step: take the next batch; on a gate step, compare "
        "the given function's gradients of all five parameters, on a few examples, with autograd's gradient of "
        "`checks.mlp_loss` on copies of the parameters that require grad, and raise when any differs by more than "
        "round-off; update the running statistics with your `batchnorm_forward` in training mode on the batch's "
        "first-layer output; call `gradients`, record the loss and each norm as returned; compute one global norm "
        "of all five, scale them all by the same factor when it exceeds `max_norm`, and take a plain gradient step. "
        "If the accuracy falls short, read the loss curve before changing anything, one change at a time."),
        checks=("check_train_digits",), cells=("train_digits", "digits_choices")),
})
