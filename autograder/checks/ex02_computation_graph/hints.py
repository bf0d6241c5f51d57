"""The hint book of exercise 02."""


from __future__ import annotations

from ...hints import HintBook, PartHints

# Hints

hint = HintBook({
    "A": PartHints(checks=("check_arithmetic",), cells=("Value",), texts=(
        "At a tie, `a.data == b.data`, how far does the maximum move when `a` is nudged up by h, and when it is "
        "nudged down? What do central differences make of the two sides? And after `out = a * a`, how many "
        "contributions reach `a.grad`?",
        "Check values: `a = Value(3.0)`, `out` made from it, `out.grad = 2.0` and `a.grad = 0.25`, then the rules run "
        "(`out._backward()` for one operation). `a.grad` after: 12.25 for `a * a`, -1.75 for `4 - a`, about -0.19444 "
        "for `2 / a`, 0.25 for `a.maximum(4)`. For a tie (`a.maximum(a)`, or two `Value(1.5)`) the check values are "
        "yours to measure: central differences of the maximum and torch.maximum's gradient in float64.",
        "A trace, `a = Value(3.0)`, `b = Value(-2.0)`, `u = a * b`, `v = 2 - u`, `out = v / a` (8/3), `out.grad = 1`. "
        "out's rule: v 1/3, a -8/9 ($-v/a^2$). v's rule: u -1/3. u's rule: a 2/3 more, -2/9 in all (right: $-2/a^2$); "
        "b -1. A tie at a = b = 1.5: nudged up by h the maximum moves by h, nudged down it stays, so a's central "
        "difference is (h - 0) / 2h, and b's too. Which of a's two contributions would `=` lose, and what if `b` is "
        "`a` itself?")),
    "B": PartHints(checks=("check_functions",), cells=("nonlinearities",), texts=(
        "In the measuring cell, at which x does each candidate form of tanh's derivative first miss the exact value "
        "by more than 1e-9, relatively, and at which x does it stop returning a number at all? Could one form be "
        "rewritten so that none of its intermediate numbers is close to 1 - 1 or beyond a float's range?",
        "Check values of tanh's derivative: exact, about 1.5100538e-10 at x = 12, 1.2556531e-16 at 19, 1.6993417e-17 at"
        " 20, 3.5026043e-26 at 30, 4.5039294e-278 at 320, and 0.0 (below the smallest float) at 400 and 800. 1 - t² "
        "gives about 1.5100543e-10, 2.2204460e-16, 0.0 and 0.0 at the first four; `1 / math.cosh(x) ** 2` raises "
        "OverflowError at 400. Other functions, the new node's gradient 1.0 and the input's 0 before `out._backward()`:"
        " exp at 0.5 about 1.64872; log at 4 0.25; `Value(4.0) ** 0.5` 0.25, `Value(2.0) ** -1` -0.25, `Value(-2.0) ** "
        "3` 12.0, `Value(0.0) ** 3` 0.0; relu at -1 0.0, at 2 1.0.",
        "Where tanh saturates, t is 1 minus a tiny amount that rounding has already lost, so any form that subtracts "
        "from 1 keeps only rounding error; cosh and eˣ, on the other hand, grow past the largest float. Start from "
        "the exact 4 / (eˣ + e⁻ˣ)², which is even in x, and multiply its top and bottom by the square of e raised "
        "to minus |x|: what remains holds only one exponential, of a number ≤ 0, which lies in (0, 1], and no "
        "subtraction. Measure it in the same cell at x = 0.5 ... 800 before you rely on it.")),
    "C": PartHints(checks=("check_backward",), cells=("backward",), texts=(
        "How many calls are nested at once when a recursive walk reaches the first `s` of the 5000-step training "
        "loop, and what does `sys.getrecursionlimit()` say? In lesson 02's $u = ab$, $v = u + b$, $L = uv$, may "
        "$u$'s rule run before $v$'s has added its share to `u.grad`?",
        "Check values at $a = 2$, $b = 3$ in lesson 02's graph: $L = 54$, `u.grad` 15, `v.grad` 6, `a.grad` 45 and "
        "`b.grad` 36. If `a.grad` is 27 and `b.grad` 24, $u$'s rule ran before $v$'s and passed on 9 of its 15. "
        "The try-it loop over `math.sin(k)`, k = 1 ... 5000, with `w = Value(0.5)` gives `w.grad` ≈ 0.2797013322. A "
        "smaller chain first: 2000 steps already exceed the default limit for a walk that recurses once per node.",
        "The order can come without any recursion, as PyTorch's engine makes it: first walk the graph from the "
        "output with a list of nodes still to visit, counting for every node how many nodes use it (u: 2, L and v; "
        "b: 2, u and v; v: 1; a: 1). Then keep a list of nodes ready to run, the output alone at first: run one, "
        "and for each of its inputs take 1 off the count; an input whose count reaches 0 is ready. On lesson 02's "
        "graph: L (u 1, v 0: v ready), v (u 0, b 1: u ready), u (a 0, b 0). Which nodes ever enter the first list?")),
    "D": PartHints(checks=("check_engine", "check_bug_hunt"), cells=("bug_hunt",), texts=(
        "For which helper do `engine_gradient` and `numeric_gradient` disagree at the same numbers? And for each "
        "helper, would its value change, to first order, if the number it reads from `.data` were a little different?",
        "Measure a smaller case first: at [1.0, 3.0], central differences give about (0.8808, -0.8808) for "
        "log_softmax_first, (-1.0, 1.0) for variance and (0.0, 0.0) for third_moment; compare each with "
        "engine_gradient. End to end: at $(x, y) = (0.5, -1.5)$ the try-it expression gives out ≈ 3.4932342623, dx ≈ "
        "1.7760542730, dy ≈ -1.3244673993, as PyTorch does.",
        "A trace of a harmless cut, variance at [1.0, 3.0]: mean 2, deviations -1 and 1. With the mean a constant, "
        "each input gets 2 × deviation / 2: (-1, 1). The route through the mean would add (1/2) × (-2 × sum of "
        "deviations / 2) = 0 to each: nothing is lost. Do the same for the helper whose gap is not 0: what does its "
        "mean's route carry, and is it your gap? In the fix, compute every part of the value from the Values.")),
})
