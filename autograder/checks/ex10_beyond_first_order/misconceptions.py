"""Exercise 10's named mistakes, one place for every part (what each check recognises them by is in its part's
module)."""

from __future__ import annotations

from ...checking import Misconception

NO_GRAPH = Misconception(
    "first gradient without a graph (create_graph forgotten, or detached)",
    "The second derivative differentiates the first one, so the first torch.autograd.grad call must record its own "
    "graph: pass create_graph=True, and never .detach() (or .item()) the gradient you differentiate again. "
    "Without it the gradient is a constant: the second call fails, or the penalty's own gradient is silently lost.")
NO_LEAF = Misconception(
    "differentiated with respect to a tensor that does not require grad",
    "autograd only records operations on tensors that require grad, and x arrives without it. Make your own leaf, "
    "leaf = x.detach().requires_grad_(True), evaluate f at it and differentiate with respect to it (the caller's x "
    "stays as it was).")
FULL_HESSIAN = Misconception(
    "built the full Hessian instead of Hessian-vector products",
    "H·v needs two reverse passes whatever the size of x: differentiate ⟨∇f(x), v⟩ once more. The full Hessian "
    "costs one backward pass per element of x (and n² memory), which is what the product avoids.")
FINITE_DIFFERENCES = Misconception(
    "finite differences of gradients where the part asks for double backward",
    "(∇f(x + εv) − ∇f(x − εv)) / 2ε is the check, not the method: it carries an O(ε²) error and evaluates f away "
    "from x. Differentiate the first gradient with autograd instead (create_graph=True).")
TORCH_FUNC_HVP = Misconception(
    "used torch.func where the part asks for double backward",
    "Parts A and B are about torch.autograd.grad with create_graph=True (Part D is where torch.func belongs): "
    "compute the gradient with a graph, then differentiate its product with a vector.")
KEPT_GRAPH = Misconception(
    "returned a result that still carries a graph",
    "The result is a number to use, not to differentiate again: the last torch.autograd.grad call needs no "
    "create_graph, or detach() the result, so that the graphs are freed.")
FORGOT_V = Misconception(
    "differentiated the sum of the gradient instead of its product with v",
    "grad(∇f(x).sum(), x) is H·1, the Hessian times a vector of ones. Differentiate (∇f(x) * v).sum() "
    "(or pass grad_outputs=v).")
V_AFTER = Misconception(
    "multiplied by v after the second differentiation",
    "(H·1) ⊙ v is not H·v: H mixes the entries of v (row i of H·v is Σ_j H_ij v_j), so v must enter before the "
    "second differentiation, inside the scalar ⟨∇f(x), v⟩, not be multiplied onto its result.")
RETURNED_GRADIENT = Misconception(
    "returned the first derivative", "That is ∇f(x); the part asks for H·v, the derivative of ⟨∇f(x), v⟩.")
ZERO_BLOCKS = Misconception(
    "no zeros where f is linear (None or an autograd error instead)",
    "Where f is linear in a tensor, with no cross terms, or does not use it, ⟨∇f, v⟩ does not depend on it and its "
    "part of H·v is zero; where f is linear in all of them, ∇f is a constant with no grad_fn and H·v is all zeros. "
    "autograd reports both as errors unless you ask otherwise: read what allow_unused and materialize_grads of "
    "torch.autograd.grad do, and look at requires_grad before you differentiate a second time.",
    question="What should H·v hold for a tensor f does not use, or uses only linearly, and what does autograd give "
    "you there?")
OWN_BLOCKS_ONLY = Misconception(
    "left out the cross terms between the tensors",
    "Entry i of H·v is Σ_j (∂²f/∂x_i∂x_j) v_j over ALL the tensors j, not only (∂²f/∂x_i²) v_i: differentiate the "
    "one scalar Σ_j ⟨∇_j f, v_j⟩ with respect to every tensor at once.")
GRAPH_FREED = Misconception(
    "reused the first gradient after its graph was freed (retain_graph forgotten)",
    "One gradient g with a graph serves every probe, but each backward pass through ⟨g, z⟩ frees that graph unless "
    "you pass retain_graph=True; or take a fresh gradient for every probe (two passes each).")
PROBES_NOT_SIGNS = Misconception(
    "probes whose entries are not all ±1",
    "Hutchinson's estimate relies on z_i² = 1 for every entry and E[z_i z_j] = 0: then z ⊙ Hz holds H_ii exactly and "
    "only the off-diagonal terms average out. An entry 0 drops H_ii from its own estimate (z_i² = 0), so 0/1 coins "
    "or draws from {−1, 0, 1} shrink the diagonal, and Gaussian entries add noise to every term. Every entry must be "
    "−1 or +1: a fair coin c in {0, 1} becomes a sign as 2c − 1.")
NOT_FROM_GENERATOR = Misconception(
    "probes not drawn from the generator passed in",
    "Every random call must take generator=generator (torch.randint, torch.rand, torch.bernoulli... all accept it), "
    "the generator itself, not a copy: then the same generator state gives the same probes, the global random state "
    "is left alone, and the generator advances, so that the next call gets fresh probes. A new torch.Generator "
    "seeded with generator.initial_seed() starts from the same place on every call and repeats its probes.")
NOT_AVERAGED = Misconception(
    "added the probes' estimates instead of averaging them",
    "Each probe gives an unbiased estimate z ⊙ Hz of the diagonal; their mean is the estimate, so divide the sum by "
    "the number of probes (the rows of probes).")
DIVIDED_BY_DIMENSION = Misconception(
    "divided by the number of entries of x instead of the number of probes",
    "The average runs over the probes: divide the sum of z ⊙ Hz by probes.shape[0], the number of rows, not by "
    "the length of x.")
FORGOT_PROBE = Misconception(
    "averaged H·z without multiplying by z",
    "The estimate of H_ii is z_i (Hz)_i: without the factor z_i the terms H_ij z_j of every column keep their signs "
    "at random and the diagonal term is not singled out. Multiply each H·z elementwise by its own z.")
TRACE_ESTIMATE = Misconception(
    "estimated the trace (one number) instead of the diagonal",
    "zᵀHz averages to the trace, the sum of the diagonal; the part asks for the diagonal itself, one number per "
    "entry of x: the elementwise product z ⊙ Hz, averaged over the probes.")
PENALTY_AS_NUMBER = Misconception(
    "returned a number instead of a penalty tensor with its graph",
    "A penalty is added to the critic's loss and trained: return the 0-d tensor itself, not .item() or a detached "
    "copy, so that backward reaches the critic's parameters through the gradient inside it.")
PARAMS_DETACHED = Misconception(
    "the critic ran on detached copies of its parameters",
    "The penalty trains the critic, so its graph must reach the critic's own parameters: call critic(x̂) itself (or "
    "functional_call with the parameters as they are), not a copy made of p.detach() or built under torch.no_grad().")
R1_FORM = Misconception(
    "penalised the squared norm (R1) instead of (‖∇‖ − 1)²",
    "WGAN-GP pulls every gradient norm towards 1, it does not push it to 0: each example contributes "
    "(‖∇_x̂ critic(x̂)‖ − 1)², the norm itself (a square root) minus one, then squared.")
SQUARED_NORM_MINUS_ONE = Misconception(
    "(‖∇‖² − 1)² instead of (‖∇‖ − 1)²",
    "The distance to 1 is taken on the norm, the square root of the sum of squares, not on the sum of squares.")
ONE_NORM_FOR_BATCH = Misconception(
    "one norm over the whole batch instead of one per example",
    "Each interpolate x̂_i has its own gradient row ∇_x̂_i critic(x̂)_i; take the norm of every row (over the "
    "features, dim=1), then average (‖·‖ − 1)² over the rows.")
NORM_OVER_BATCH_AXIS = Misconception(
    "norms over the batch axis (dim=0) instead of per example",
    "The gradient has one row per example and one column per feature; the norm of an example's gradient runs over "
    "its own row (dim=1), not down a column across examples.")
PENALTY_SUMMED = Misconception(
    "summed the examples' penalties instead of averaging them",
    "The penalty is weight times the MEAN over the batch of (‖∇‖ − 1)², so that it does not grow with the batch.")
WEIGHT_SQUARED = Misconception(
    "put the weight inside the square",
    "weight · (‖∇‖ − 1)² multiplies the square; (weight · (‖∇‖ − 1))² squares the weight too.")
ALPHA_ON_FEATURES = Misconception(
    "mixing weights broadcast along the features instead of the examples",
    "alpha has one entry per example (shape (B,)); alpha * real lines it up with the LAST axis, the features. Give it "
    "a trailing axis, alpha[:, None] (shape (B, 1)), so that row i is alpha_i real_i + (1 − alpha_i) fake_i. With "
    "B ≠ D the shapes clash and PyTorch complains; with B = D it runs and is silently wrong.")
SWAPPED_MIX = Misconception(
    "swapped real and fake in the interpolation",
    "x̂_i = alpha_i real_i + (1 − alpha_i) fake_i: alpha weighs the REAL example (alpha_i = 1 gives the real one).")
PENALTY_AT_REAL = Misconception(
    "penalised the gradient at the real examples instead of at the interpolates",
    "That is where R1 looks; WGAN-GP evaluates the critic's gradient at points x̂ between real and fake examples.")
NAN_AT_ZERO_NORM = Misconception(
    "the norm's derivative at a zero gradient is NaN (sqrt of a sum of squares)",
    "d√s/ds = 1/(2√s) is infinite at s = 0, and autograd multiplies it by the zero derivative of s = Σ g²: 0 · ∞ is "
    "NaN (lesson 10, section 6). Where the critic's gradient is exactly 0 the norm has a kink; "
    "torch.linalg.vector_norm (or .norm()) returns the subgradient 0 there instead.")
LOOPED = Misconception(
    "looped over the examples where the part asks for vmap",
    "One backward pass per example is what torch.func.vmap replaces: write the loss of ONE example as a function "
    "of the parameters, take torch.func.grad of it, and vmap that over the batch (in_dims=(None, 0, 0)).")
NOT_CLIPPED = Misconception(
    "averaged the per-example gradients without clipping them",
    "DP-SGD bounds what any one example can contribute: scale example i's gradient by min(1, C / ‖g_i‖) before the "
    "mean, so that no example weighs more than a gradient of norm C.")
CLIPPED_THE_MEAN = Misconception(
    "clipped the mean gradient instead of each example's",
    "Clipping the batch mean bounds the batch, not the examples: one outlier still dominates the mean. Clip every "
    "example's gradient to norm C first, then average.")
CLIPPED_EACH_TENSOR = Misconception(
    "clipped each parameter tensor on its own",
    "The norm that DP-SGD clips is the global norm of an example's gradient, over all the parameter tensors at once: "
    "one factor min(1, C / ‖g_i‖) per example, applied to all its tensors alike.")
NORMALISED_EVERY_EXAMPLE = Misconception(
    "scaled every example's gradient to norm C",
    "Clipping only shrinks: a gradient already shorter than C is left as it is. The factor is min(1, C / ‖g_i‖), not "
    "C / ‖g_i‖.")
CLIP_FACTOR_SWAPPED = Misconception(
    "clip factor max(1, C / ‖g_i‖) instead of min(1, C / ‖g_i‖) (min and max swapped)",
    "Clipping caps the long gradients and leaves the short ones alone: the factor is min(1, C / ‖g_i‖), "
    "torch.clamp(C / norms, max=1.0). With min=1.0 it becomes max(1, C / ‖g_i‖): the long gradients pass unclipped "
    "and every short one is blown up to norm C.")
CLIPPED_SUM = Misconception(
    "summed the clipped gradients instead of averaging them",
    "The part asks for the mean over the N examples of the clipped per-example gradients: divide the sum by N.")
DIVIDED_BY_BATCH = Misconception(
    "per-example gradients divided by the batch size",
    "Your norms are N times too small: the loss of one example is its own cross-entropy, not 1/N of it. Compute it "
    "on a batch of one (x[None], y[None]).")
NORM_WITHOUT_ROOT = Misconception(
    "clipped by the sum of squares instead of the norm",
    "‖g‖ is the square root of Σ g² over every parameter; min(1, C / Σ g²) clips against the squared norm, which "
    "is not what C bounds.")
NORM_AS_SUM_OF_NORMS = Misconception(
    "clipped by the sum of the per-parameter norms",
    "An example's global norm is sqrt(Σ over all parameters of Σ g²): one norm over everything, not the sum of the "
    "norms of each parameter tensor (that sum is larger, so it clips too much).")
NORM_WITHOUT_BIASES = Misconception(
    "left the biases out of the clipping norm",
    "Every parameter of the model counts in an example's norm, the biases too.")
NOT_CHECKPOINTED = Misconception(
    "no checkpoint: the graph keeps every activation",
    "torch.utils.checkpoint.checkpoint(function, h, use_reentrant=False) runs a function without saving its "
    "activations; backward then runs it again to get them. Without it the graph saves everything, as a plain forward "
    "does.")
OUTSIDE_CHECKPOINT = Misconception(
    "some blocks ran outside any checkpoint",
    "Every group of blocks goes through its own checkpoint call, the last one too (torch.utils.checkpoint."
    "checkpoint_sequential runs its last segment without a checkpoint, which is why this part asks for your own "
    "loop of checkpoint calls).")
GROUPS_NOT_K = Misconception(
    "checkpoints that do not hold k consecutive blocks each",
    "Cut the blocks into consecutive groups from the first: k blocks each, and the last group holds whatever is "
    "left (fewer than k when k does not divide the number of blocks). One checkpoint per group: it saves the group's "
    "input, and its backward reruns the group's k blocks.")
LATE_BINDING = Misconception(
    "every checkpoint reran the last group (a closure read the loop variable late)",
    "checkpoint keeps the function you pass and calls it again during backward, long after your loop has finished. "
    "A lambda or inner function that reads the loop variable sees its LAST value then, so every checkpoint reruns "
    "the last group on its own input. Pass a function that holds its own group: a module built from the group, "
    "functools.partial, or a default argument (lambda h, group=group: ...).")
RNG_NOT_PRESERVED = Misconception(
    "checkpoint recomputes with a different random state (dropout)",
    "The recomputation in backward must draw the same dropout mask as the forward pass did; with "
    "preserve_rng_state=False it draws a new one, and the gradients belong to a network that never ran. Keep the "
    "default preserve_rng_state=True.")
SWITCHED_MODE = Misconception(
    "switched the blocks to eval mode",
    "The blocks are in training mode (dropout on) and must stay so: checkpointing must not change what the network "
    "computes. Leave .train()/.eval() alone.")
DETACHED_INPUT = Misconception(
    "cut the caller's x off the graph",
    "The output must depend on the x you were given, so that backward reaches it: x.detach() (or a new leaf) starts "
    "a graph of its own and x gets no gradient. Pass x itself to the first checkpoint.")
