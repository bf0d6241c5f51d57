"""Exercise 03's named mistakes, one place for the three parts (what each check recognises them by is in its part's
module). A learner reads a mistake's question while working; its explanation comes with graded feedback."""

from __future__ import annotations

from ...checking import Misconception

EARLY_HINT = ("A node may run only once every node that consumes it has delivered its share, otherwise its gradient "
              "is still incomplete when it passes it on. Visiting a node the first time you meet it (breadth-first, "
              "or depth-first preorder) breaks this when a node is reached by paths of different lengths. Count, for "
              "every node, the edges that will deliver to it (and one for a root's seed), and run a node only when "
              "its count reaches 0.")
COUNT_QUESTION = "How many deliveries must a node have received before it may run?"

# ------------------------------------------------------------------------------------------ Part A: the order

NO_VISITED_SET = Misconception(
    "no visited set", "A node reached by two paths must still run once: run a node when its count reaches 0, which "
    "happens once, or skip a node you have already placed.",
    "How many times may one node run in one backward pass?")
UNREACHABLE = Misconception(
    "included nodes the output does not depend on", "Start from the roots and follow inputs only: a graph may hold "
    "branches no root uses, and they get no place in the order (and no gradient).",
    "Which nodes does a backward pass from these roots ever reach?")
FORWARD_ORDER = Misconception(
    "forward order", "Your order is valid read backwards: you listed inputs before their consumers, which is the "
    "order of the forward pass. Backward runs a node only after every consumer has delivered to it.",
    "Which comes first in backward: a node, or its inputs?")
INPUT_BEFORE_CONSUMER = Misconception("input visited before its consumer", EARLY_HINT, COUNT_QUESTION)
BREADTH_FIRST = Misconception(
    "breadth-first order", "A breadth-first walk from the output takes the nodes level by level, but a node reached "
    "by a short path and by a longer one is still waiting for the longer path's share when its level comes up, so it "
    "passes on an incomplete gradient. A node may run only after every node that uses it: reverse a depth-first "
    "postorder, or count each node's consumers and run it when the count reaches 0.")
PREORDER = Misconception(
    "depth-first preorder", "A depth-first walk that takes a node the first time it meets it (preorder) reaches a "
    "shared node through one consumer while another consumer has not run yet. Append a node after everything below it "
    "(postorder) and reverse that list, or count each node's consumers and run it when the count reaches 0.")
KEY_ORDER = Misconception(
    "followed the order of the graph's keys",
    "The keys of the dict come in any order: the order in which a graph is written down says nothing about which "
    "node consumes which. Derive the order from the edges alone: count the deliveries each node waits for and run "
    "a node when its count reaches 0.",
    "What does the order of the dict's keys tell you about the edges?")
WHOLE_GRAPH_COUNTS = Misconception(
    "counted consumers the output does not depend on",
    "Count only the edges that come from nodes the roots depend on. A consumer on another branch never runs in this "
    "backward pass, so a node that waits for it waits for ever and never runs: first find the nodes reachable from "
    "the roots, then count consumers among those only.",
    "Does every consumer you counted run in this backward pass?")
DEPTH_FIRST_SORT = Misconception(
    "a depth-first sort, not the engine's ready queue",
    "Your order is valid, and it is the order of a depth-first sort (exercise 02's backward): consumers before "
    "inputs, but not the order PyTorch's engine runs. The engine sorts nothing: it counts the deliveries each node "
    "waits for, and among the nodes whose count has reached 0 it runs the one with the highest sequence number.",
    "When several nodes are ready at once, which one does PyTorch's engine run, and does your walk ever ask?")
LOWEST_FIRST = Misconception(
    "ran the lowest sequence number first",
    "PyTorch's ready queue is keyed on the sequence number and runs the HIGHEST first (the node created last, and a "
    "leaf as soon as it is ready); yours takes the lowest.",
    "Which end of the sequence numbers does PyTorch's ready queue take first?")
NUMBERS_IGNORED = Misconception(
    "ready nodes taken in the order they became ready",
    "Your counting is right, but your ready queue is a plain queue (first in, first out) or a stack: PyTorch's is a "
    "priority queue that runs, among the ready nodes, the one with the highest sequence number.",
    "Among the nodes that are ready at the same time, which runs first, and what decides it?")
SORTED_BY_NUMBER = Misconception(
    "sorted by sequence number without waiting for the counts",
    "The sequence number only breaks ties among nodes that are READY (every consumer has delivered); a node with a "
    "high number still waits for its consumers. Sorting all nodes by number runs some of them before their "
    "consumers, as soon as the numbers do not follow the graph (a leaf's number is the largest of all).",
    "May a node with the highest number run before the nodes that consume it?")
ROOTS_AT_START = Misconception(
    "every root ready from the start",
    "A root that another root consumes receives two things: its seed and its consumer's share. It must wait for "
    "both: count the seed as one more delivery for every root, deliver the seeds first, and put a root on the ready "
    "queue only when its count reaches 0, like any other node.",
    "A root that another root consumes: is it ready before that consumer has run?")
FIRST_ROOT_ONLY = Misconception(
    "started from the first root only",
    "Every root receives its seed: the backward pass covers everything any root depends on, so the counting and the "
    "run start from all of them.",
    "Which nodes does backward from several roots have to reach?")
COUNTS_NEVER_ZERO = Misconception(
    "counts that never reach 0",
    "A node becomes ready when its LAST delivery arrives: its count starts at the number of deliveries it will get "
    "(one per edge from a node the roots depend on, plus one for a root's seed) and is tested for 0 right after "
    "each delivery is subtracted. Counts one too high, or a test made before the subtraction, never reach 0, so "
    "nothing beyond the roots ever runs.",
    "After a node's last delivery, is its count exactly 0, and do you test it after subtracting?")
PER_ROOT_COUNTS = Misconception(
    "a node that several roots reach counted once per root",
    "Counting the deliveries from each root on its own and adding the counts counts every edge into a node that two "
    "roots reach once per root: a root that another root consumes, and everything below it. Such a node waits for "
    "deliveries that never come, so it never runs, nor does anything only it delivers to. Each edge delivers once "
    "in a backward pass, whichever roots reach it: count it once, among the nodes any root depends on.",
    "A node that two roots reach: how many edges actually arrive at it, and how many did you count?")
ONE_RUN_PER_OUTPUT = Misconception(
    "a node with several outputs ran once per output",
    "The outputs of split or unbind share ONE node (out[0].grad_fn is out[1].grad_fn): the engine keeps one buffer "
    "for it with a slot per output, waits until every delivery to any of its slots has arrived, and runs it once.",
    "How many grad_fn objects does a split with three outputs make, and how many times does its pre-hook fire?")
COUNTED_CONSUMERS = Misconception(
    "counted consumers instead of edges",
    "A consumer that uses two outputs of one node (or one tensor twice, as a * a does) has two edges to it and "
    "delivers twice; counting it once lets the node's count reach 0 while another consumer has not delivered yet.",
    "A consumer with two edges to the same node: how many deliveries does that node receive from it?")
WHOLE_GRAPH_SLOTS = Misconception(
    "an output's slot counted as filled because something in the graph consumes it",
    "A slot is filled by a delivery in THIS backward pass: an output whose only consumers are on a branch no root "
    "depends on receives nothing, because those consumers never run; its slot stays empty (the pre-hook sees None "
    "there, and the node's backward works with zeros).",
    "An output consumed only by a node the roots do not depend on: who delivers to its slot in this pass?")
SEED_SLOT_FORGOTTEN = Misconception(
    "a root's own slot left out",
    "A root that is output k of a node receives its seed in slot k, before anything runs: that slot is filled even "
    "when no consumer delivers to it.",
    "Where does the seed of a root that is output k of a split go?")
FIRST_OUTPUT_ONLY = Misconception(
    "every node reported with output 0 only",
    "A node with several outputs has one slot per output, and the engine fills the slots that receive something: "
    "the edges (node, k) that deliver in this pass, and the roots' seeds, say which.",
    "Which slots of a split's buffer did PyTorch's pre-hook see filled?")
CHANGED_DICTS = Misconception(
    "changed the arguments it was given",
    "The test hands you its own dicts and compares them afterwards: build new lists and dicts of your own. Never "
    "pop from or append to graph[node], add or delete keys, or remove entries from local_grads; if your algorithm "
    "consumes edges, work on a copy first ({node: list(inputs) for node, inputs in graph.items()}).",
    "Are the dicts you were given the same after your function has run?")
AUTOGRAD_IN_BOOKKEEPING = Misconception(
    "ran autograd in a plain-Python part", "Parts A and B are the engine's bookkeeping done by hand on the numbers "
    "you are given: walk the dict and propagate the numbers yourself with Python arithmetic (+= and *) along the "
    "edges. No tensors, backward() or torch.autograd.grad inside them.")

# ------------------------------------------------------------------------------------------ Part B: grad(inputs=)

SEEDS_AS_ONE = Misconception(
    "every root started at 1.0 instead of its seed",
    "A root's gradient starts at the seed it is given (the grad_outputs of torch.autograd.grad), not at 1.0.",
    "What does seeds[root] say a root holds before anything runs?")
MISSING_UPSTREAM = Misconception(
    "missing the upstream gradient", "Each edge sends local derivative × the consumer's gradient, not the local "
    "derivative alone.", "What does an edge send: its local derivative alone, or multiplied by something?")
FULL_RUN = Misconception(
    "ran every node the roots depend on",
    "torch.autograd.grad(roots, inputs) runs only the nodes whose gradient is needed on the way to a requested "
    "input: a node with no requested input below it sends nothing anyone asked for, so the engine never runs it "
    "(its pre-hook never fires). Find, for every node, whether a requested input lies below it, and run only those.",
    "Which nodes' gradients does a requested input's gradient depend on, and which nodes can the engine skip?")
INPUTS_RAN = Misconception(
    "ran the requested inputs themselves",
    "A requested input's gradient is complete in its buffer once every consumer has delivered: the engine captures "
    "it there and does not run the input's own node, unless another requested input lies below it (a requested "
    "leaf never runs, which is also why torch.autograd.grad leaves .grad alone).",
    "Once a requested input's buffer is complete, what would running its own node add to the answer?")
STOPPED_AT_INPUT = Misconception(
    "a requested input above another one did not run",
    "A requested input that lies on a path to another requested input must still run: the lower one's gradient "
    "includes the paths through it. Capture its gradient, and run it as well when a requested input lies below it.",
    "A requested input that consumes (perhaps indirectly) another requested input: does the lower one need it to "
    "run?")
OVERWROTE = Misconception(
    "overwrote instead of summing at a branch point", "A node used by several consumers gets one contribution from "
    "each; add them (+=), do not replace (=).", "A node with two consumers: what happens to the first one's share "
    "when the second one delivers?")

SUMMED = Misconception(
    "summed instead of averaging", "all_reduce returns the SUM over the replicas (like torch.distributed's default "
    "operation): divide it by the number of replicas. The mean loss over the full batch is the average of the shard "
    "losses, so its gradient is the average of the shard gradients.")
ONLY_FIRED = Misconception(
    "only updated the replica that fired", "The hook that completes a bucket must write the average into .grad of "
    "EVERY replica, not only of the one whose backward is running.")
NO_AVERAGING = Misconception(
    "no averaging happened", "all_reduce was never called and every replica kept its own shard's gradient: your "
    "hooks never found a bucket complete. A bucket is complete once every replica's gradient of every one of its "
    "parameters has arrived: hook every parameter of every replica, count those arrivals per bucket, and let the "
    "hook that completes the count call all_reduce.",
    question="Did any bucket ever look complete to your hooks? Count what arrives per bucket in a backward pass.")
BYPASSED_ALL_REDUCE = Misconception(
    "averaged without all_reduce", "The .grad values are right, but the replicas stand for processes on different "
    "machines: their gradients may be combined only through the all_reduce the test hands you, once per bucket per "
    "round. Send each bucket through it and write back what it returns, divided by the number of replicas.")
FIRST_ROUND_ONLY = Misconception(
    "only the first round was right", "Your hooks work in a first round but not in the next: whatever they record "
    "during a round (arrival counts, sets, stashed gradients) must be reset once its bucket has been reduced, so "
    "that every backward round starts from an empty record.")
AVERAGED_EARLY = Misconception(
    "reduced a bucket before all of its gradients had arrived",
    "A bucket is complete only when every replica's gradient of every one of its parameters has arrived: count "
    "one arrival per (replica, parameter) and reduce when the count reaches replicas × parameters in the bucket, "
    "whatever order the replicas run in. Common causes: counting replicas instead of (replica, parameter) pairs, "
    "one record shared by all buckets, a hard-coded number of replicas, or a hook defined in a loop that sees the "
    "loop's LAST bucket (bind it: def hook(param, bucket=bucket, record=record)).",
    question="When is a bucket complete? Which record and which bucket does each of your hooks see when it runs?")
TENSOR_HOOK_READS_GRAD = Misconception(
    "read .grad in a hook that runs before .grad is written", "Tensor.register_hook calls fn(grad) BEFORE this "
    "backward's gradient reaches param.grad, so inside it param.grad is still None (or an old value). Use the grad "
    "argument such a hook receives, or register_post_accumulate_grad_hook, which runs after .grad is written.")
STRICT_BOUNDARY = Misconception(
    "closed a bucket only once it held MORE than bucket_size numbers",
    "A bucket is complete as soon as it holds AT LEAST bucket_size numbers: one that reaches exactly bucket_size is "
    "closed there, and the next parameter starts the next bucket.",
    "A bucket that holds exactly bucket_size numbers: is it full?")
SHARED_GRAD = Misconception(
    "replicas share one .grad tensor", "Every replica's .grad is the same tensor object, so the next in-place "
    "accumulation into one replica's .grad (a second micro-batch, a gradient clip) changes all of them. Give each "
    "replica its own copy: .clone() the averaged piece once per replica.")
CHANGED_PARAMETERS = Misconception(
    "hooks changed the parameters", "An all-reduce hook only writes .grad; the parameters change in the optimizer "
    "step, never inside backward.")
PER_PARAMETER = Misconception(
    "one all_reduce per parameter instead of per bucket", "Buckets exist to send fewer, larger messages: group the "
    "parameters (in reverse order of model.parameters()) until a bucket holds at least bucket_size numbers, and "
    "call all_reduce once per bucket with the bucket's gradients concatenated.")
ONE_BUCKET = Misconception(
    "one all_reduce for the whole model", "One message at the end cannot overlap with backward: split the "
    "parameters into buckets of at least bucket_size numbers (in reverse order of model.parameters()) and send each "
    "bucket as soon as it is complete.")
FORWARD_BUCKETS = Misconception(
    "filled the buckets in the order of model.parameters()", "Backward produces the last layer's gradients first, "
    "so the buckets are filled in the REVERSE order of model.parameters(): the first bucket is complete (and sent) "
    "while the earlier layers' gradients are still being computed.")
LATE_ALL_REDUCE = Misconception(
    "sent a bucket only after later gradients had arrived", "Call all_reduce from the hook whose gradient completes "
    "the bucket: that is what lets DDP's communication overlap the rest of backward. Waiting for more gradients (or "
    "for the end of backward) gives the right numbers but no overlap.")
TENSOR_TRUTH_VALUE = Misconception(
    "asked a tensor for a single True/False", "A tensor with more than one element has no truth value: list.index(p), "
    "p in some_list, p == q and if p.grad: all ask for one. Find a parameter by identity (is, or a dict keyed by "
    "id(p)), and test p.grad is None.")
