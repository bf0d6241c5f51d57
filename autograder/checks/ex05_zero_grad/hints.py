"""The hint book of exercise 05 (``checks.hint("A")`` in the notebook): later hints open once the part's test failed."""

from __future__ import annotations

from ...hints import HintBook, PartHints

hint = HintBook({
    "A": PartHints(texts=(
        "The lesson weighted micro-batch j by $c_j / C$, its counted tokens over the group's. When micro-batch j's "
        "backward must run, has the loader shown you the rest of the group, so that you know $C$? And the gradient "
        "is linear in the loss: what could you backpropagate that needs no $C$, and fix once $C$ is known?",
        "A smaller case to test against, with `k = 2`: a group of two micro-batches holding 1 and 3 counted tokens, "
        "whose token losses are 2.0 and 1.0. The group's loss is $(1 \\cdot 2.0 + 3 \\cdot 1.0)/4 = 1.25$. Weighting "
        "each by the tokens seen so far gives $1 \\cdot 2.0 + \\tfrac34 \\cdot 1.0 = 2.75$, and halving each gives "
        "1.5. With `k = 3`, a stream of four micro-batches makes two updates; you learn the second group is "
        "short only when the loader runs out. `pad_together` builds a group's single batch, to compare with.",
        "Reset once before everything. For each micro-batch from the loader, count its counted tokens; if it has "
        "any, backpropagate its token loss times that count (the sum over its tokens, not their mean) and add the "
        "same sum, as a float, to the group's running loss and the count to the group's count. When the group is "
        "complete, or the loader has run out with micro-batches still pending, divide every parameter's gradient "
        "and the running loss by the group's count, step, and reset."),
        checks=("check_train",), cells=("train",)),
    "B": PartHints(texts=(
        "The log holds weights, not `.grad`. What did `step()` apply in iteration $t$, in terms of `weights[t]`, "
        "`weights[t+1]` and `lr`, and how exactly can a float32 number store it?",
        "Measure before you choose a tolerance: `torch.nextafter(torch.tensor(300.0), torch.tensor(400.0)) - 300` "
        "is the gap between float32 numbers near 300; compare it with the gap near 1. In log #2 of the visible "
        "test every iteration was the lesson's loop: log a run of your own like it (float32, lr = 0.01) and print, "
        "weight by weight, how far `(weights[t] - weights[t+1]) / lr` is from `fresh[t]`, next to your tolerance.",
        "For each iteration: if the weights did not change at all, the answer is None. Otherwise compute what the "
        "step applied, in float64, and a round-off bound for each weight that follows the size of the weights "
        "divided by lr; then try every first iteration s from t down to 0, summing fresh gradients, and keep the s "
        "whose sum is within the bound in every weight."),
        checks=("check_read_weight_log",), cells=("read_weight_log",)),
    "C": PartHints(texts=(
        "One backward pass of $L_C$ through the shared forward writes into both models' `.grad`. Which of the two is "
        "already what its step needs? For the other one, compare what $L_C$'s and $L_G$'s backward passes would each "
        "send back from the fake scores: how do the two differ, sample by sample?",
        "Check values, with σ the sigmoid. One fake sample scored $s = 0.5$: the slope of $L_C$ there is "
        "$\\sigma(0.5) \\approx 0.6225$, that of $L_G$ is $-\\sigma(-0.5) \\approx -0.3775$, so minus $L_C$'s "
        "gradient is not $L_G$'s. Two fake samples scored 0.5 and -1.0 ($n = 2$): the slopes are (0.3112, 0.1345) "
        "for $L_C$ and (-0.1888, -0.3655) for $L_G$, a ratio of -0.607 for one sample and -2.718 for the other. For "
        "the error of the obvious version: print the critic's last weight's `._version` before and after "
        "the critic's step, next to the shape the error names. Then compare your `.grad` with the try-it cell's "
        "slow autograd answer.",
        "Trace the smallest case: one fake sample $x$ and a linear critic $s = w \\cdot x + b$. A backward pass that "
        "starts with slope $g$ at the score gives the critic $g\\,x$ (and $g$) and sends $g\\,w$ back to $x$, and "
        "from there into the generator. $L_C$'s pass starts with $g_C$, $L_G$'s would start with $g_G$: the critic "
        "needs what $g_C$ gives it, so what must reach $x$ for the generator? A deeper critic replaces $w$ by the "
        "score's gradient with respect to its input, still one per sample and untouched by the other samples. "
        "Lesson 02 (a backward that is handed the gradient to start from) and lesson 03 (a hook on a tensor) each "
        "give you a place to make that change. Whichever you choose, both resets come before the one backward, both "
        "steps after it."),
        checks=("check_adversarial_step",), cells=("adversarial_step",)),
})
