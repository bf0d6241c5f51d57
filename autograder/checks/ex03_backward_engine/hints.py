"""Exercise 03's hint book: for each part a question, then a check value or a smaller case, then a worked trace to
turn into an algorithm (:mod:`autograder.hints`)."""

from __future__ import annotations

from ...hints import HintBook, PartHints

hint = HintBook({
    "A": PartHints(checks=("check_backward_order",), cells=("backward_order",), texts=(
        "A root that another root consumes: what does it receive in this backward pass, from whom, and may it run "
        "before all of that has arrived? And among the nodes that may run at the same moment, which goes first?",
        "Check values. `{\"out\": [\"a\", \"b\"], \"b\": [\"a\"], \"a\": []}` numbered out 1, b 2, a 5, from "
        "[\"out\"]: out, b, a (a has the highest number, and still waits for b). The lesson's graph from roots "
        "[\"r\", \"L\"] numbered p 4, q 5, r 61, L 7, x 2**64 - 1: L, r, q, p, x; a depth-first sort gives L, r, "
        "p, q, x, and an order that starts with r runs r before L has delivered to it.",
        "A trace to turn into code, the lesson's graph from roots [\"r\", \"L\"] with the numbers of hint 2. "
        "Deliveries each node waits for: L 1, r 2, q 1, p 2, x 2. The seeds arrive: L 0 (may run), r 1. L runs: "
        "r 0, p 1; may run: r. r runs: q 0, p 0; may run: q (5), p (4). q runs: x 1. p runs: x 0. x runs. Which "
        "counts did you need before anything ran, and where did each number come from?")),
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
