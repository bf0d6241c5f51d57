"""The hint book of exercise 01: three hints per part, the later ones opened by a failed test."""

from ...hints import HintBook, PartHints

hint = HintBook({
    "A": PartHints(texts=(
        "One loop has to reach every element of a 0-d tensor, a vector and a 3-D tensor alike: what numbering of the "
        "elements works for every shape? Which tensors are yours to change while you step? And with no h given, "
        "what does 1e9 + 1e-6 come out as in float64?",
        "Check values, for `f = lambda t: (t**3).sum()` at `x = torch.tensor([[1.0, -2.0], [0.5, 3.0]])`: with "
        "`h=0.5` the answer is [[3.25, 12.25], [1.0, 27.25]] ($3x^2 + h^2$), with `h=1e-3` about [[3.0, 12.0], "
        "[0.75, 27.0]]; both float64 and of shape (2, 2), and `x` is still float32 and unchanged afterwards. A "
        "smaller case: a 0-d `torch.tensor(2.0)` with `f = lambda t: t**3` and `h=0.5` gives a 0-d tensor, 12.25.",
        "A trace, f(t) = t[0]·t[1] at the float32 x = [2, 3] with h = 0.5. Element 0: f at [2.5, 3] is 7.5, at "
        "[1.5, 3] it is 4.5, quotient (7.5 - 4.5) / 1 = 3. Element 1: f at [2, 3.5] is 7, at [2, 2.5] it is 5, "
        "quotient 2. Result: float64 [3, 2], and the caller's x still reads float32 [2, 3]. Now h = 1e-6: stepped in "
        "float32, 2 + 1e-6 is stored as 2.00000095, and element 0 comes out 2.861; stepped in float64, 2.99999999998. "
        "Note that f here returns t[0]·t[1], a new tensor; f(t) = t[1] would return an element of t itself. In your "
        "code, which tensors did f receive, and did any of them change after f had read it?"),
        checks=("check_central_difference",), cells=("central_difference",)),
    "B": PartHints(texts=(
        "Draw the graph with one arrow per use of a value: how many arrows leave $x$, how many leave $y$ and $u$, and "
        "which forward values does each arrow's local derivative need? For the chain with skip arrows: how many "
        "routes are there for n = 1, 2, 3 and 4, and do the routes of a longer chain contain a shorter chain's? And "
        "for an engine: at the moment u's "
        "rule runs, which shares has `u.grad` received so far, and with `=`, which of them are still there? At which "
        "points would two different sets of routes give the same sum?",
        "At $(x, y) = (1.2, 0.6)$, where $u = 0.72$ and $v \\approx 1.8594$, the six arrow labels are $0.6$, $1.2$, "
        "$\\approx 0.7518$, $1$, $\\approx 1.8594$ and $0.72$ (find which arrow carries which). A second point: at "
        "$(-1, 2)$ the shares of $x$'s routes are about $-3.8186$, $1.6646$ and $-2.0$, those of $y$'s about "
        "$1.9093$ and $-0.8323$. At $(2, 0)$ all three of $x$'s shares are 0, and $y$'s add up to 4. A small chain: "
        "main labels [1, 2, -1] and skip labels [3, 0.5] have three routes, with products -2, -3 and 0.5, so the sum "
        "is -4.5; with every label 1, n = 1, 2, 3, 4, 5 count 1, 2, 3, 5 and 8 routes, and n = 10 counts 89. Two "
        "engines at $(-1, 2)$: the order `(\"z\", \"u\", \"v\")` with `\"+=\"` reports about $(-5.8186, "
        "1.9093)$, the order `(\"z\", \"v\", \"u\")` with `\"=\"` about $(1.6646, -0.8323)$. For the "
        "measurement, an engine none of the twelve is: one that reports about $(1.6646, 1.0770)$ at $(-1, 2)$. "
        "There the eight sums of $x$'s shares are all different (the closest two about 0.154 apart), and its numbers "
        "fit one set only: x → u → v → z for $x$, both routes for $y$. At $(1, \\pi/2)$ the same engine reports "
        "about $(0, 2)$, which fits with or without x → u → v → z; at $(2, 0)$ every share of $x$ is 0, so x.grad "
        "is 0 whichever routes an engine keeps.",
        "A smaller system with the same shape, $a = x\\,y$, $b = a + x$, $z = a\\,b$, at $(x, y) = (2, 3)$: $a = 6$, "
        "$b = 8$; arrow labels $x \\to a$ 3, $y \\to a$ 2, $a \\to b$ 1, $x \\to b$ 1, $a \\to z$ 8, $b \\to z$ 6; "
        "the routes of $x$ carry 24, 18 and 6 ($dz/dx = 48$), those of $y$ 16 and 12. For the chain: no program "
        "lists $2.5 \\cdot 10^{12}$ routes, so write the sums for n = 2, 3 and 4 by hand, with letters for the "
        "labels, and look inside each for the sums of the smaller chains: which of them reappear, and multiplied by "
        "what? A check you can run on your own engine: each number it returns should be the sum of SOME of the "
        "routes' shares (or 0); for each share missing, can you name the rule that ran before that share arrived, "
        "or the write that replaced it? For `surviving_routes`: pick a point where no two sets of routes give the "
        "same sum, for $x$ and for $y$ (print all eight sums and look at the smallest gap), run the engine there "
        "once, and for each of its two numbers keep the one set whose shares add up to it, within the engine's "
        "round-off."),
        checks=("check_routes", "check_route_sum", "check_engine_reports", "check_surviving_routes"),
        cells=("worked_derivatives", "engine_reports", "surviving_routes")),
    "C": PartHints(texts=(
        "Where a RIGHT gradient is exactly 0 or about 1e-4, how large is |analytic - numerical|, and what must your "
        "error make of a difference that size, compared with a 60 % error at a gradient of 2e-4?",
        "Check values, from the measurement cell (a function of size 990): |a - n| is about 1.1e-7 at the first "
        "zero, exactly 0 at the other two, and 1.9e-8 at the tiny gradient (index 3). A denominator that may drop to "
        "1e-8 there reports 1.0 at the first zero, a false alarm; one that never drops below 1000 reports 1.8e-7 for "
        "the tiny gradient made 60 % wrong, a miss. Two smaller cases: [2.0, 0.0] against [-2.0, 6e-8] must fail "
        "at (0,); [303.0, 0.0] against [300.0, 6e-8] must report about 0.0099 at (0,).",
        "In words: where the gradient is large, divide the size of the difference by the size of the gradient (the "
        "larger of the two sides, so a zero on either side is covered); where it is small, divide by a fixed lower "
        "limit instead, which turns the error there into the absolute difference over that limit. The limit has two "
        "bounds you can compute: the round-off you measured over TOLERANCE (below it, round-off becomes an alarm) "
        "and the smallest error you must catch, 1e-4, over TOLERANCE (above it, that error passes). Between about 0.2 "
        "and 50, which value would you defend, and why? Then take the position of the largest error in the flat view "
        "and turn it into one index per dimension, as Python ints."),
        checks=("check_worst_relative_error",), cells=("worst_relative_error",)),
})
