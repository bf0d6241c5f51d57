"""Exercise 03's hint book: for each part a question, then a check value or a smaller case, then a worked trace to
turn into an algorithm (:mod:`autograder.hints`)."""

from __future__ import annotations

from ...hints import HintBook, PartHints

hint = HintBook({
    "A": PartHints(checks=("check_backward_order",), cells=("backward_order",), texts=(
        "The three outputs of an unbind share one node: how many times does its pre-hook fire, and may it fire while "
        "a consumer of one of its outputs has not run yet? And which of its slots can anything reach in this pass, "
        "when the only consumer of an output is a node no root depends on?",
        "Check values on a graph that is not one of the tests': `{\"out\": [(\"t\", 0), \"b\"], \"b\": "
        "[(\"t\", 1)], \"t\": [\"a\"], \"dead\": [(\"t\", 2)], \"a\": []}` numbered out 1, b 2, t 3, dead "
        "4, a 9. From [\"out\"]: out [0], b [0], t [0, 1], a [0]. From [(\"t\", 2), \"out\"]: the same order, "
        "t [0, 1, 2]. From [\"b\"]: b [0], t [1], a [0].",
        "A trace of hint 2's graph from [(\"t\", 2), \"out\"]. Deliveries each node waits for: out 1 (its seed), "
        "b 1, t 3 (out, b and a seed), a 1; dead is never counted. The seeds arrive: t's reaches its slot 2 (t "
        "waits for 2 more), out's makes out ready. out runs: t's slot 0 (1 more), b is ready. b runs: t's slot 1, "
        "t is ready. t runs, then a. Run the same trace from [\"out\"] alone: which slot of t does nothing reach, and "
        "would PyTorch's pre-hook on t see a tensor there?")),
    "B": PartHints(checks=("check_accumulate_gradients",), cells=("accumulate_gradients",), texts=(
        "Request only p in the lesson's graph: which nodes' work ends up in p's gradient, and which nodes send "
        "their shares only to nodes nobody asked about? Once p's buffer is complete, what would running p add?",
        "Check values. `{\"out\": [\"a\", \"b\"], \"b\": [\"a\"], \"a\": []}` with 2.0 on (out, a), 3.0 "
        "on (out, b), 4.0 on (b, a), seeds {\"out\": 1.0}, numbered out 1, b 2, a 5: requesting [\"b\"] gives "
        "b 3.0 and runs out only; requesting [\"a\", \"b\"] gives a 14.0, b 3.0 and runs out, b. The lesson's "
        "graph with seeds {\"L\": 1.0}: requesting [\"r\"] gives 1.0 and runs L only; [\"p\", \"x\"] gives "
        "5.0 and 39.0 and runs L, r, q, p.",
        "A trace, the lesson's graph with seeds r -0.5 and L 2.0, requesting [\"p\", \"x\"]. A requested input "
        "below each node: L (p, x), r (p, x), q (x), p (x), x (none). After the seeds: L 2, r -0.5. L runs: r 1.5, "
        "p 2. r runs: q 9, p 8. q runs: x 36. p runs: x 60. x's buffer is complete, and nothing needs its work. "
        "Now request [\"p\"] alone: which of these steps still change a buffer that p's gradient depends on?")),
    "C": PartHints(checks=("check_attach_allreduce_hooks",), cells=("attach_allreduce_hooks",), texts=(
        "When is a bucket complete: how many gradients must arrive for it, from how many replicas? Which hook sees it?",
        "For the text's model, `bucket_size=11` gives [2.bias, 2.weight, 0.bias] (14 numbers) and [0.weight] (12). "
        "3 replicas running backward in the order 2, 0, 1 with `bucket_size=10`: the first call comes as replica "
        "1's 2.weight arrives, the 6th gradient of its bucket.",
        "A trace, the text's model with `bucket_size=10` and 3 replicas running backward in the order 2, 0, 1: "
        "buckets B1 = [2.bias, 2.weight] and B2 = [0.bias, 0.weight], 3 × 2 = 6 arrivals each. Arrivals counted "
        "after replica 2's backward: B1 2, B2 2; after replica 0's: B1 4, B2 4. During replica 1's: B1 5, then 6 "
        "(that hook sends B1, and every replica's 2.bias and 2.weight get the average), then B2 5, then 6 (B2 "
        "sent). Round 2 starts from B1 0, B2 0. What must each hook know to keep these counts?")),
})
