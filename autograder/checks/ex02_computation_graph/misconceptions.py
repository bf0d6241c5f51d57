"""The named mistakes of exercise 02."""


from __future__ import annotations

from ...checking import (
    Misconception,
)

# Named mistakes

OVERWRITE = Misconception("overwrote the gradient (= instead of +=)",
                    "A node can get gradient from several places (x * x, or x used by two later nodes), and "
                    "may already hold some; each _backward must add its share with +=, never replace it with =.")
ONE_SHARE = Misconception(
    "the same node on both sides kept only one of its two shares",
    "When one node is both operands (a - a, a * a, a / a, a.maximum(a)), the operation's rule hands it two shares, "
    "one per side, and both must reach its .grad: a rule that reads both old gradients before it writes (a tuple "
    "assignment), or keeps the shares in a dict keyed by node, lets the second share replace the first.",
    question="With a as both operands, how many times does your rule add to a.grad, and does the second addition "
             "see the first one's result?")
NO_UPSTREAM = Misconception("missing the upstream gradient (out.grad)",
                      "The chain rule multiplies each local derivative by the gradient arriving from above: "
                      "self.grad += local_derivative * out.grad.")
OVERWRITE_NO_UPSTREAM = Misconception("overwrote the gradient (= instead of +=) and missing the upstream gradient "
                                      "(out.grad)",
                                "Write self.grad += local_derivative * out.grad in every _backward.")
SIGN = Misconception("sign error in the local derivative",
               "Your gradient has the right size but the wrong sign: d(a - b)/db = -1, d(a / b)/db = -a / b**2.")
NO_RULE = Misconception("no gradient arrived (the local rule is missing)",
                  "The input's .grad did not change: set out._backward to a function that adds local derivative "
                  "× out.grad to the input's .grad.")
NOT_RECORDED = Misconception("result does not record its inputs",
                       "Create the result as Value(data, (self, other)) (or (self,)) so that the graph, and "
                       "backward, can find the nodes it came from.")
RSUB = Misconception("reflected subtraction flipped (c - a computed as a - c)",
               "c - a with a number c calls a.__rsub__(c), where self is a and other is c: return other - self "
               "(e.g. as_value(other) - self), not self - other.")
RDIV = Misconception("reflected division flipped (c / a computed as a / c)",
               "c / a with a number c calls a.__rtruediv__(c), where self is a and other is c: return "
               "other / self, whose derivative with respect to a is -c / a**2.")
INPLACE = Misconception("in-place operator changed its operand",
                  "Without an __iadd__, Python runs a += b as a = a + b: a new node, and the old a stays as it was "
                  "for the other nodes that use it. Delete your in-place method (or make it return a new node).")
RETURNED_SELF = Misconception(
    "returned its input instead of a new node",
    "Every operation must create a new Value, even when its number equals an input's (relu of a positive x, x * 1): "
    "out = Value(result, (self,), op) records the operation and gets a .grad of its own. Returned as it is, the input "
    "and the output are one node, so the graph loses the operation and the output's gradient lands straight in the "
    "input's .grad.")
REFLECTED_LOOP = Misconception(
    "a reflected operator that calls itself",
    "2 + a runs a.__radd__(2). If __radd__ returns other + self, Python tries int.__add__(2, a), which gives up, and "
    "then a.__radd__(2) again: the calls never end. Put the Value first: return self + other (addition and "
    "multiplication commute); for __rsub__ and __rtruediv__, as_value(other) - self and as_value(other) / self.")
PART_B_IN_A = Misconception(
    "Part A built on Part B's operations",
    "Part A may use only + - * / and negation: ** and exp come from Part B's cell, which Part A's test hides (and "
    "which has not run yet when the notebook is graded top to bottom). Give / its own local rule: ∂(a/b)/∂a = 1/b, "
    "∂(a/b)/∂b = -a/b².")
TANH_OVERFLOW = Misconception(
    "a tanh derivative that overflows where tanh saturates",
    "For a large |x|, tanh(x) is an ordinary ±1.0 and its derivative a tiny float (or 0), but a form built on cosh(x) "
    "or exp(2x) computes a number too large for a float on the way: math.cosh overflows past |x| ≈ 710, its square "
    "past 355. An accurate form must stay accurate there without a huge intermediate.",
    "Which quantity in your derivative's formula stops being a finite float at x = 800, although tanh(800) itself is "
    "an ordinary 1.0?")
TANH_CANCELS = Misconception(
    "tanh's derivative as 1 - tanh², which cancels where tanh saturates",
    "1 - t² is right on paper, but t = tanh(x) is rounded to within 1.1e-16 of ±1, so for |x| above a few units 1 - t² "
    "keeps mostly rounding error, and from |x| ≈ 19.1 on it is exactly 0, while the true derivative stays a positive "
    "float up to |x| ≈ 354. Autograd and central differences in float64 make the same loss (torch's tanh backward is "
    "1 - t² too): only a reference computed in higher precision shows it. Choose among the algebraically equal forms "
    "by measuring their relative error against one.",
    "At the x of the case shown, how many of the digits of t = tanh(x) survive in 1 - t², and what does your rule "
    "give against the exact derivative there?")
TANH_ZEROED = Misconception(
    "tanh's derivative taken as 0 where it is tiny but still a float",
    "Beyond |x| ≈ 19 the derivative of tanh, sech²(x) ≈ 4e^(-2|x|), is tiny but far from 0 as a float: about 3.5e-26 "
    "at 30, 5.5e-87 at 100, 4.5e-278 at 320, and above 1e-300 up to |x| ≈ 346. A rule that returns 0 there (a "
    "cut-off, or 1 - t² once t rounds to ±1) is 100 % wrong, although the number is small. Keep a form that stays "
    "accurate over the whole range: no cancellation and no overflow.",
    "Over which range of x does your rule return exactly 0, and is the exact derivative 0 anywhere in that range?")
RELU = Misconception("relu gradient on the wrong side",
               "relu lets the gradient through where its input was positive and blocks it where it was negative: "
               "self.grad += (1.0 if self.data > 0 else 0.0) * out.grad.")
TANH = Misconception("tanh derivative as 1 - tanh instead of 1 - tanh²",
               "d tanh(x)/dx = 1 - tanh(x)**2: square the output t = tanh(x) before subtracting it from 1.")
TANH_INPUT = Misconception("tanh derivative from the input (1 - x² instead of 1 - tanh²)",
                     "d tanh(x)/dx = 1 - t**2 with t = tanh(x), the output, not the input x.")
POW = Misconception("power rule missing the exponent",
              "d(x**k)/dx = k * x**(k - 1): the exponent comes down as a factor.")
NO_VISITED = Misconception("no visited set (double counting)",
                     "A node reachable by two routes had its _backward run more than once. Put each node in the "
                     "topological order only once (keep a visited set), so that its _backward runs once, with its "
                     "complete gradient.")
WRONG_ORDER = Misconception("traversed in topological order instead of reversed",
                      "A node's _backward ran before every node that uses it had sent its gradient back. Walk the "
                      "topological order in reverse: the output first, the inputs last.")
NOT_SEEDED = Misconception("output gradient not seeded with 1.0",
                     "Set self.grad = 1.0 (d out/d out) before the traversal; starting from 0.0, every gradient "
                     "stays 0.")
UNREACHABLE_RAN = Misconception(
    "ran the rule of a node the output does not depend on",
    "backward() must run the _backward of the nodes out was computed from, found from self through _prev, and no "
    "others: a node made elsewhere (still holding .grad from an earlier backward, say) adds its stale gradient into "
    "nodes it shares with out. Build the order from self, not from a list of every node ever made.")
DIVIDES_BY_OPERAND = Misconception(
    "a local rule that divides by an operand",
    "A local derivative written as out.data / self.data (for a·b, or k·x**k / x for a power) raises when that operand "
    "is 0, and 0 is a value like any other. Use the rule itself: d(a·b)/da = b.data, d(a/b)/da = 1 / b.data, "
    "d(x**k)/dx = k * x.data ** (k - 1).")
POW_ABS = Misconception(
    "power rule through |x|",
    "d(x**k)/dx = k * x**(k - 1) with x itself, not |x|: for a negative x and an even k (2, -2, ...) |x|**(k - 1) "
    "has the wrong sign. Python computes x**(k - 1) for a negative x whenever k is an integer.")
MAX_TIE = Misconception(
    "a tie of maximum not split (all, both or none)",
    "Where a.data == b.data, maximum(a, b) has a kink: nudged up, either input moves it; nudged down, neither does. "
    "Central differences average the two sides, half the upstream gradient to each input, as torch.maximum does.",
    "At a tie, what do central differences give each input of the maximum, and what does torch.maximum give?")
MAX_LOSER = Misconception("maximum's gradient sent to the smaller input", "Max routes (lesson 02): the input that "
                          "won, the larger one, gets the whole upstream gradient.")
DEEP_RECURSION = Misconception(
    "a traversal that recurses once per node of a path",
    "A walk that calls itself for each node it descends into needs one Python frame per node of the longest path, and "
    "Python stops at sys.getrecursionlimit() frames (1000 by default): a training loop `s = s + w * x` over 5000 data "
    "points makes a path of 5000 nodes. Keep the nodes still to visit in a list of your own.",
    "How many nested calls does your traversal make on a chain of 5000 additions, and how many does Python allow?")
RAISED_LIMIT = Misconception(
    "raised Python's recursion limit instead of removing the recursion",
    "A larger sys.setrecursionlimit only moves the wall: the next, longer graph (or a thread with a smaller stack) "
    "crashes the interpreter. The part asks for a traversal whose depth does not grow with the graph.",
    "What is sys.getrecursionlimit() while your backward() runs, and what was it before?")
NOT_ALL = Misconception("not every node's _backward ran",
                  "backward() must call _backward() on every node the output was computed from, found from the output "
                  "through _prev (a topological sort), not only on the output itself.")


