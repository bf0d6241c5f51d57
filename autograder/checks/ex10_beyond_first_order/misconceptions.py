"""Exercise 10's named mistakes, one place for every part (what each check recognises them by is in its part's
module)."""

from __future__ import annotations

from ...checking import Misconception

NO_GRAPH = Misconception(
    "first gradient without a graph (create_graph forgotten, or detached)",
    "The second derivative differentiates the first one, so the first torch.autograd.grad call must record its own "
    "graph: pass create_graph=True, and never .detach() (or .item()) the gradient you differentiate again. "
    "Without it the gradient is a constant: the second call fails, or the penalty's own gradient is silently lost.",
    question="Does the first gradient you differentiate again have a grad_fn, and which switch makes the first call "
    "record its own work?"
)
NO_LEAF = Misconception(
    "differentiated with respect to a tensor that does not require grad",
    "autograd only records operations on tensors that require grad, and x arrives without it. Make your own leaf, "
    "leaf = x.detach().requires_grad_(True), evaluate f at it and differentiate with respect to it (the caller's x "
    "stays as it was).",
    question='Which tensor did you ask autograd to differentiate with respect to, and does it require grad?'
)
FULL_HESSIAN = Misconception(
    "built the full Hessian instead of Hessian-vector products",
    "H·v needs two reverse passes whatever the size of x: differentiate ⟨∇f(x), v⟩ once more. The full Hessian "
    "costs one backward pass per element of x (and n² memory), which is what the product avoids.",
    question='How many backward passes did your function run, and how many does one product H·v need?'
)
FINITE_DIFFERENCES = Misconception(
    "finite differences of gradients where the part asks for autograd's exact products",
    "(∇f(x + εv) − ∇f(x − εv)) / 2ε is the check, not the method: it carries an O(ε²) error and evaluates f away "
    "from x. Differentiate the first gradient with autograd instead (create_graph=True).",
    question='Where did your function evaluate f, and is a difference quotient the method or the check?'
)
TORCH_FUNC_HVP = Misconception(
    "used torch.func where the part asks for torch.autograd's own passes",
    "Parts A and B are about torch.autograd.grad with create_graph=True: "
    "compute the gradient with a graph, then differentiate its product with a vector.",
    question='Which machinery does this part ask for: torch.func, or a gradient of a gradient with torch.autograd?'
)
KEPT_GRAPH = Misconception(
    "returned a result that still carries a graph",
    "The result is a number to use, not to differentiate again: the last torch.autograd.grad call needs no "
    "create_graph, or detach() the result, so that the graphs are freed.",
    question='Does the tensor you return still carry a grad_fn, and does anyone need to differentiate it again?'
)
FORGOT_V = Misconception(
    "differentiated the sum of the gradient instead of its product with v",
    "grad(∇f(x).sum(), x) is H·1, the Hessian times a vector of ones. Differentiate (∇f(x) * v).sum() "
    "(or pass grad_outputs=v).",
    question="Where does v enter your computation: is the scalar you differentiate the second time the gradient's "
    "sum or its product with v?"
)
V_AFTER = Misconception(
    "multiplied by v after the second differentiation",
    "(H·1) ⊙ v is not H·v: H mixes the entries of v (row i of H·v is Σ_j H_ij v_j), so v must enter before the "
    "second differentiation, inside the scalar ⟨∇f(x), v⟩, not be multiplied onto its result.",
    question='Row i of H·v mixes every entry of v: can multiplying by v after the second differentiation do that?'
)
RETURNED_GRADIENT = Misconception(
    "returned the first derivative", "That is ∇f(x); the part asks for H·v, the derivative of ⟨∇f(x), v⟩.",
    question='Is what you returned the first derivative of f, or the derivative of its product with v?'
)
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
    "one scalar Σ_j ⟨∇_j f, v_j⟩ with respect to every tensor at once.",
    question='Entry i of H·v sums over which tensors j: only x_i itself, or all of them?'
)
OUTER_NO_GRAPH = Misconception(
    "H·v without a graph where the caller's tensors require grad",
    "A curvature penalty (λ vᵀHv, ‖Hv‖²) or a meta-learning step differentiates H·v once more, with respect to the "
    "tensors it was taken at (third derivatives of f), and with respect to a direction that depends on them. Without "
    "a record of the second pass H·v is a constant to autograd and the penalty never trains: when a tensor of xs or "
    "vs requires grad, the second torch.autograd.grad call needs create_graph=True too.",
    question="The test differentiates the sum of c_i · (Hv)_i with respect to the tensors of xs and vs that require "
    "grad: does the H·v you returned have anything for that derivative to go through, and which of your passes "
    "recorded its work?")
OUTER_COPIES = Misconception(
    "H·v taken at detached copies of tensors that require grad",
    "x.detach() starts a new graph: a derivative of H·v then stops at the copy and never reaches the caller's x (or "
    "v), although the result has a grad_fn. Differentiate with respect to the caller's own tensors where they "
    "require grad (autograd.grad accepts a tensor from the middle of a graph as an input), use the directions as "
    "they come, and make leaves of your own for the frozen tensors only.",
    question="Your H·v has a graph, but where does it lead: to the caller's tensors, or to copies that nobody else "
    "holds?")
LEAKED_GRAPH = Misconception(
    "a graph on H·v although no tensor of xs or vs requires grad",
    "When nothing the caller holds requires grad, nobody can differentiate the result with respect to anything: a "
    "graph on it only keeps your copies and the first gradient's graph alive as long as the result lives. Record "
    "the second pass only when a tensor of xs or vs requires grad.",
    question="When no tensor of xs or vs requires grad, who could ever differentiate your result, and what does the "
    "graph you returned keep alive meanwhile?")
GRAPH_FREED = Misconception(
    "reused the first gradient after its graph was freed (retain_graph forgotten)",
    "One gradient g with a graph serves every probe, but each backward pass through ⟨g, z⟩ frees that graph unless "
    "you pass retain_graph=True; or take a fresh gradient for every probe (two passes each).",
    question="After the first backward pass through the graph of your gradient, is that graph still there for the "
    "next probe?"
)
NOT_AVERAGED = Misconception(
    "added the probes' estimates instead of averaging them",
    "Each probe gives an unbiased estimate z ⊙ Hz of the diagonal; their mean is the estimate, so divide the sum by "
    "the number of probes (the rows of probes).",
    question='Your estimate grows with the number of probes: is it their sum or their mean?'
)
DIVIDED_BY_DIMENSION = Misconception(
    "divided by the number of entries of x instead of the number of probes",
    "The average runs over the probes: divide the sum of z ⊙ Hz by probes.shape[0], the number of rows, not by "
    "the length of x.",
    question='What did you divide by: the number of probes (rows) or the length of x?'
)
FORGOT_PROBE = Misconception(
    "averaged H·z without multiplying by z",
    "The estimate of H_ii is z_i (Hz)_i: without the factor z_i the terms H_ij z_j of every column keep their signs "
    "at random and the diagonal term is not singled out. Multiply each H·z elementwise by its own z.",
    question='Entry i of the estimate is z_i times (Hz)_i: where is the factor z_i in yours?'
)
PASS_PER_PROBE = Misconception(
    "one backward pass per probe where one batched pass serves them all",
    "Every probe is differentiated through the same first gradient, only the vector changes: the engine can take all "
    "k vectors at once, one per row of a batch of output gradients, and walk that graph a single time (vmap runs "
    "under the hood). k walks of one graph cost k times the engine's overhead and k Python round trips.",
    question="How many times did your function walk the same graph backward, and does the engine need one walk per "
    "vector?")
NOISE_WITH_DIAGONAL = Misconception(
    "counted the diagonal in the estimator's noise",
    "Of z_i (Hz)_i = H_ii z_i² + Σ_{j≠i} H_ij z_i z_j, the first term is H_ii in every draw (z_i² = 1): only the "
    "off-diagonal terms vary. One probe's expected squared error is Σ_i Σ_{j≠i} H_ij² = ‖H‖_F² − ‖diag H‖², not "
    "‖H‖_F².",
    question="Which terms of z_i (Hz)_i change from one draw to the next, and which is the same in every draw?")
GAUSSIAN_VARIANCE = Misconception(
    "the noise of Gaussian probes, not of random signs",
    "For Gaussian entries z_i² varies too (its variance is 2), which adds 2 H_ii² to each entry's expected squared "
    "error; a Rademacher sign has z_i² = 1 exactly, so only the off-diagonal terms Σ_{j≠i} H_ij² remain.",
    question="What is z_i² for a sign ±1, and does it vary from one draw to the next?")
PAIRS_ONCE = Misconception(
    "counted each off-diagonal pair once",
    "H_ij and H_ji are both entries of H, and the pair adds noise to entry i (through H_ij z_i z_j) and to entry j "
    "(through H_ji z_j z_i): the sum runs over all ordered pairs i ≠ j, twice the sum over i < j.",
    question="In how many entries of z ⊙ Hz does the pair of positions (i, j) add noise?")
ERROR_NOT_SQUARED = Misconception(
    "compared the mean squared error with rel_error instead of rel_error²",
    "The bound is on the root of the mean squared error: E‖d̂_k − diag H‖² ≤ rel_error² ‖diag H‖², so k ≥ S / "
    "(rel_error² ‖diag H‖²).",
    question="The bound is on a root mean square: which side of the inequality did you square?")
ERROR_AS_ONE_OVER_K = Misconception(
    "assumed the error itself falls as 1/k",
    "The mean of k independent estimates has 1/k of one estimate's variance: the mean SQUARED error falls as 1/k, "
    "the RMS error as 1/√k. Halving the error costs four times the probes.",
    question="When you average k independent estimates, what falls as 1/k: the error, or its square?")
ROUNDED_TO_NEAREST = Misconception(
    "rounded the number of probes to the nearest whole number instead of up",
    "The smallest k that meets the bound is the ceiling of S / (rel_error² ‖diag H‖²): any fewer probes and the "
    "error is above rel_error.",
    question="At the k you returned, is the error at most rel_error, or just above it?")
PER_ENTRY_ERROR = Misconception(
    "bounded every entry's relative error instead of the whole vector's",
    "The part's error is the norm of the error vector relative to the norm of diag H, one number for all entries; "
    "bounding every entry against its own H_ii asks for far more probes where a diagonal entry is small.",
    question="Is rel_error a bound on each entry's error relative to its own H_ii, or on one norm relative to "
    "another?")
NO_PROBE_FOR_DIAGONAL = Misconception(
    "zero probes for a diagonal Hessian",
    "With a diagonal Hessian one probe gives diag H exactly, but an estimate still needs that one probe: k ≥ 1.",
    question="Where the error is zero for any number of probes, how many does an estimate still need?")
PROBES_BELOW_ONE = Misconception(
    "fewer than one probe",
    "The smallest k is a whole number of at least 1: the ceiling of S / (rel_error² ‖diag H‖²), and 1 when that is "
    "below 1.",
    question="Is a number of probes below 1 an estimate at all?")
TRACE_ESTIMATE = Misconception(
    "estimated the trace (one number) instead of the diagonal",
    "zᵀHz averages to the trace, the sum of the diagonal; the part asks for the diagonal itself, one number per "
    "entry of x: the elementwise product z ⊙ Hz, averaged over the probes.",
    question='Does the part ask for one number, or for one number per entry of x?'
)
PENALTY_AS_NUMBER = Misconception(
    "returned a number instead of a penalty tensor with its graph",
    "A penalty is added to the critic's loss and trained: return the 0-d tensor itself, not .item() or a detached "
    "copy, so that backward reaches the critic's parameters through the gradient inside it.",
    question='Can the critic be trained on what you returned, or is it a plain number without a graph?'
)
PARAMS_DETACHED = Misconception(
    "the critic ran on detached copies of its parameters",
    "The penalty trains the critic, so its graph must reach the critic's own parameters: call critic(x̂) itself (or "
    "functional_call with the parameters as they are), not a copy made of p.detach() or built under torch.no_grad().",
    question="Does the graph of your penalty reach the critic's own parameters, or copies of them?"
)
R1_FORM = Misconception(
    "penalised the squared norm (R1) instead of (‖∇‖ − 1)²",
    "WGAN-GP pulls every gradient norm towards 1, it does not push it to 0: each example contributes "
    "(‖∇_x̂ critic(x̂)‖ − 1)², the norm itself (a square root) minus one, then squared.",
    question='Does your penalty pull every gradient norm towards 1, or push it towards 0?'
)
SQUARED_NORM_MINUS_ONE = Misconception(
    "(‖∇‖² − 1)² instead of (‖∇‖ − 1)²",
    "The distance to 1 is taken on the norm, the square root of the sum of squares, not on the sum of squares.",
    question='Is the distance to 1 taken on the norm, or on the sum of squares?'
)
ONE_NORM_FOR_BATCH = Misconception(
    "one norm over the whole batch instead of one per example",
    "Each interpolate x̂_i has its own gradient row ∇_x̂_i critic(x̂)_i; take the norm of every row (over the "
    "features, dim=1), then average (‖·‖ − 1)² over the rows.",
    question='How many norms does your penalty take: one per example, or one for the whole batch?'
)
NORM_OVER_BATCH_AXIS = Misconception(
    "norms down the batch instead of one per example",
    "The gradient has one row per example and one column per feature; the norm of an example's gradient runs over "
    "its own row (dim=1), not down a column across examples.",
    question="Along which axis does your norm run: over an example's features, or down the batch?"
)
NORM_OVER_LAST_AXIS = Misconception(
    "one norm per image row (over the last axis only) instead of over the whole example",
    "A norm over the last axis, the right one for (B, D) vectors, gives for a (B, C, H, W) batch one number per "
    "channel and row of pixels, B·C·H of them, and the mean then runs over those: each example's gradient is one "
    "vector of C·H·W entries, and its norm runs over all of them.",
    question="For an image, how many norms does your penalty average: one per example, or one per row of pixels?")
NORM_OVER_ONE_AXIS = Misconception(
    "one norm per example over a single axis of an image instead of all of them",
    "An example's gradient is a whole (C, H, W) tensor: its norm runs over every one of its entries (flatten all "
    "axes but the batch, then take the norm per row); a norm over the channels alone gives one number per pixel.",
    question="When an example is an image, over which of its axes does the norm of its gradient run?")
SUMMED_SCORES_MIXED = Misconception(
    "took each example's gradient from the summed scores where the examples interact",
    "The gradient of the summed scores with respect to example i is the sum over j of the derivative of score j "
    "with respect to example i. It is example i's own gradient only when no other score depends on example i. A "
    "BatchNorm on the batch's statistics makes every score depend on every example, so the cross terms stay in "
    "(for a critic without an activation after the norm, they cancel the whole gradient to 0).",
    question="With a BatchNorm on the batch's statistics, does score j depend on example i, and what does the "
             "gradient of the summed scores then add to example i's own gradient?")
SCORED_ALONE = Misconception(
    "scored each example in a batch of its own, where the critic's BatchNorm needs the whole batch",
    "A BatchNorm on the batch's statistics normalises every example with the mean and variance of the batch it "
    "arrives in: example i's score is the one it gets beside the others. Run alone (a batch of one, or a vmap over "
    "the examples) the critic computes another function, and in training mode it refuses a batch of one.",
    question="Which mean and variance does the critic's BatchNorm use when it sees one example, and is that the "
             "score the penalty is about?")
PENALTY_SUMMED = Misconception(
    "summed the examples' penalties instead of averaging them",
    "The penalty is weight times the MEAN over the batch of (‖∇‖ − 1)², so that it does not grow with the batch.",
    question='Does your penalty grow with the batch size, and should it?'
)
WEIGHT_SQUARED = Misconception(
    "put the weight inside the square",
    "weight · (‖∇‖ − 1)² multiplies the square; (weight · (‖∇‖ − 1))² squares the weight too.",
    question='Is the weight multiplying the square, or inside it?'
)
ALPHA_ON_FEATURES = Misconception(
    "mixing weights broadcast along the features instead of the examples",
    "alpha has one entry per example (shape (B,)); alpha * real lines it up with the LAST axis, the features. Give it "
    "a trailing axis, alpha[:, None] (shape (B, 1)), so that row i is alpha_i real_i + (1 − alpha_i) fake_i. With "
    "B ≠ D the shapes clash and PyTorch complains; with B = D it runs and is silently wrong.",
    question='alpha has one entry per example: which axis of real does broadcasting pair it with?'
)
ALPHA_VECTOR_SHAPED = Misconception(
    "mixing weights shaped for vectors only on a batch of images",
    "alpha[:, None] has shape (B, 1): against a batch of shape (B, C, H, W) broadcasting lines its two axes up with "
    "the LAST two, H and W, so alpha_i scales row i of every image instead of image i. alpha needs a trailing "
    "axis of size 1 for every axis of real after the first. With B ≠ H the shapes clash; with "
    "B = H it runs and is silently wrong.",
    question="alpha[:, None] has two axes and a batch of images has four: which two axes of real does broadcasting "
    "pair them with?")
SWAPPED_MIX = Misconception(
    "swapped real and fake in the interpolation",
    "x̂_i = alpha_i real_i + (1 − alpha_i) fake_i: alpha weighs the REAL example (alpha_i = 1 gives the real one).",
    question='With alpha_i = 1, is your interpolate the real example or the fake one?'
)
PENALTY_AT_REAL = Misconception(
    "penalised the gradient at the real examples instead of at the interpolates",
    "That is where R1 looks; WGAN-GP evaluates the critic's gradient at points x̂ between real and fake examples.",
    question="At which points does your penalty evaluate the critic's gradient: the real examples, or the points "
    "between real and fake?"
)
NAN_AT_ZERO_NORM = Misconception(
    "the norm's derivative at a zero gradient is NaN (sqrt of a sum of squares)",
    "d√s/ds = 1/(2√s) is infinite at s = 0, and autograd multiplies it by the zero derivative of s = Σ g²: 0 · ∞ is "
    "NaN (lesson 10, section 6). Where the critic's gradient is exactly 0 the norm has a kink; "
    "torch.linalg.vector_norm (or .norm()) returns the subgradient 0 there instead.",
    question="What is the derivative of a square root at 0, and what does autograd multiply it by where the "
    "critic's gradient is exactly 0?"
)
LOOPED = Misconception(
    "looped over the examples, a backward pass each",
    "One backward pass per example is what this part replaces: in eval mode the examples do not interact, so one "
    "backward pass of the summed losses already reaches every example's own share of every layer's output.",
    question='How many backward passes did your function run for the batch, and what does one pass of the summed '
             'losses already hold for each example?'
)
PER_EXAMPLE_GRADIENTS = Misconception(
    "held every example's whole gradient where only its norm and a weighted sum are needed",
    "The lesson's per-example gradients (a vmap of grad, or a batched backward pass) cost N copies of the model. "
    "DP-SGD needs only each example's norm, for its clip factor, and the clipped mean: a weighted sum over the "
    "examples. A Linear layer's gradient for one example is built from that example's input to the layer and its "
    "output gradient, both of which the forward and backward passes of the whole batch hold.",
    question="Which one number of example i's gradient does its clip factor need, and what is the norm of a Linear "
             "weight's gradient for one example, in terms of the two vectors it is built from?"
)
NOT_CLIPPED = Misconception(
    "averaged the per-example gradients without clipping them",
    "DP-SGD bounds what any one example can contribute: scale example i's gradient by min(1, C / ‖g_i‖) before the "
    "mean, so that no example weighs more than a gradient of norm C.",
    question='Where in your computation is an example whose gradient is longer than C shortened?'
)
CLIPPED_THE_MEAN = Misconception(
    "clipped the mean gradient instead of each example's",
    "Clipping the batch mean bounds the batch, not the examples: one outlier still dominates the mean. Clip every "
    "example's gradient to norm C first, then average.",
    question="Which gradients does your clipping bound: each example's, or the batch's mean?"
)
CLIPPED_EACH_TENSOR = Misconception(
    "clipped each parameter tensor on its own",
    "The norm that DP-SGD clips is the global norm of an example's gradient, over all the parameter tensors at once: "
    "one factor min(1, C / ‖g_i‖) per example, applied to all its tensors alike.",
    question='How many clip factors does one example get: one for all its tensors, or one per tensor?'
)
NORMALISED_EVERY_EXAMPLE = Misconception(
    "scaled every example's gradient to norm C",
    "Clipping only shrinks: a gradient already shorter than C is left as it is. The factor is min(1, C / ‖g_i‖), not "
    "C / ‖g_i‖.",
    question='What happens in your code to an example whose gradient is already shorter than C?'
)
CLIP_FACTOR_SWAPPED = Misconception(
    "a clip factor that lets long gradients through and blows short ones up",
    "Clipping caps the long gradients and leaves the short ones alone: the factor is min(1, C / ‖g_i‖), "
    "torch.clamp(C / norms, max=1.0). With min=1.0 it becomes max(1, C / ‖g_i‖): the long gradients pass unclipped "
    "and every short one is blown up to norm C.",
    question='What does your factor do to a gradient longer than C, and to one shorter than C?'
)
CLIPPED_SUM = Misconception(
    "summed the clipped gradients instead of averaging them",
    "The part asks for the mean over the N examples of the clipped per-example gradients: divide the sum by N.",
    question='Is your result the sum of the clipped gradients, or their mean?'
)
DIVIDED_BY_BATCH = Misconception(
    "per-example gradients divided by the batch size",
    "Your norms are N times too small: the loss of one example is its own cross-entropy, not 1/N of it. Compute it "
    "on a batch of one (x[None], y[None]).",
    question="Your norms are N times too small: is one example's loss its own cross-entropy, or 1/N of it?"
)
NORM_WITHOUT_ROOT = Misconception(
    "clipped by the sum of squares instead of the norm",
    "‖g‖ is the square root of Σ g² over every parameter; min(1, C / Σ g²) clips against the squared norm, which "
    "is not what C bounds.",
    question='Is what you compare with C the norm, or its square?'
)
NORM_AS_SUM_OF_NORMS = Misconception(
    "clipped by the sum of the per-parameter norms",
    "An example's global norm is sqrt(Σ over all parameters of Σ g²): one norm over everything, not the sum of the "
    "norms of each parameter tensor (that sum is larger, so it clips too much).",
    question="Is an example's norm one norm over all its tensors, or the sum of their norms?"
)
NORM_WITHOUT_BIASES = Misconception(
    "left the biases out of the clipping norm",
    "Every parameter of the model counts in an example's norm, the biases too.",
    question="Which of the model's parameters did your norm leave out?"
)
FROZEN_IN_RESULT = Misconception(
    "returned gradients for frozen parameters",
    "A parameter with requires_grad=False is frozen: no optimiser updates it, and DP-SGD neither clips nor reports "
    "it. Differentiate only the trainable tensors (a dict of them for functional_call; the module supplies the "
    "rest) and return entries for those alone.",
    question="Which of the model's tensors will an optimiser step, and which one is frozen?")
FROZEN_IN_NORM = Misconception(
    "counted the frozen parameters in the clipping norm",
    "An example's norm runs over the gradients DP-SGD releases, the trainable parameters' only: the frozen ones' "
    "gradients make every norm larger and clip too much.",
    question="Which tensors' gradients make up an example's norm, when part of the model is frozen?")
BUFFERS_DIFFERENTIATED = Misconception(
    "differentiated the running statistics as if they were parameters",
    "A BatchNorm's running mean and variance are buffers: state the forward pass reads, not something an optimiser "
    "trains. Pass functional_call the trainable parameters only and let the module supply its buffers.",
    question="Is a BatchNorm's running mean something the optimiser trains?")
CHANGED_MODE = Misconception(
    "changed the model's training mode",
    "In training mode a BatchNorm normalises with the batch's statistics (so examples see each other) and updates "
    "its running statistics; the model arrives in eval mode and must leave in it.",
    question="What does a BatchNorm do differently in training mode, and who else relies on the model's mode?")
EVERY_BLOCK = Misconception(
    "checkpointed every block where the budget needs fewer",
    "Checkpointing every block (lesson 10's recipe) saves the most memory and reruns every block. Measure what each "
    "block saves and checkpoint only as many as the budget needs, the biggest savers first.",
    question="How many of these blocks does this budget actually need checkpointed?")
BY_POSITION = Misconception(
    "chose the blocks by position, not by what they save",
    "The first blocks are not the ones that save the most: measure each block's saved bytes plainly and "
    "checkpointed, and take the blocks with the largest difference first.",
    question="Do the first blocks give back the most bytes?")
BY_WIDTH = Misconception(
    "ranked the blocks by hidden width, not by the bytes they save",
    "What a block saves depends on its activation (GELU keeps its input and the next layer its output, Tanh and ReLU "
    "one tensor for both) and on dropout (its mask), not only on its width: measure the bytes.",
    question="Does a block's width alone tell what its activation and its dropout save?")
TOO_MANY_CHECKPOINTS = Misconception(
    "checkpointed more blocks than the budget needs",
    "Fewer blocks, chosen by what each gives back, bring the saved bytes under the budget: take them in the order "
    "of their savings and stop as soon as the total fits.",
    question="Could fewer blocks, chosen differently, bring the saved bytes under the budget?")
STRICT_BUDGET = Misconception(
    "kept strictly below the budget",
    "At most budget bytes includes exactly budget bytes: the checkpoint that takes the total from budget to below "
    "it is one rerun too many.",
    question="Is a graph that saves exactly budget bytes within the budget?")
OVER_BUDGET = Misconception(
    "the graph saves more than the budget",
    "Count what the forward pass keeps: every plain block's saved tensors, and the input each checkpoint keeps for "
    "its rerun; checkpoint more blocks until the total fits.",
    question="What does your count of the saved bytes leave out?")
FORGOT_CHECKPOINT_INPUT = Misconception(
    "counted a checkpointed block as saving nothing",
    "A checkpoint keeps its input for the rerun: checkpointing a block gives back its plain bytes minus that input, "
    "so the count stopped one checkpoint too early.",
    question="What does a checkpoint itself have to keep so that it can rerun its block?")
GROUPED_BLOCKS = Misconception(
    "put several blocks in one checkpoint",
    "The part asks for one block per checkpoint: a checkpoint around several blocks holds all their activations at "
    "once during its rerun (lesson 10), which the saved bytes of the forward pass do not show.",
    question="How many blocks does each of your checkpoints hold, and what does a checkpoint of two blocks hold "
    "during backward?")
MEASUREMENT_MOVED_RNG = Misconception(
    "measuring drew random numbers that the forward pass then missed",
    "Running a block with dropout draws a mask from the global random state, so a measurement run before the "
    "forward pass shifts every mask after it: the output is no longer the plain forward's. Put the random state back "
    "after measuring (torch.random.fork_rng, or get_rng_state and set_rng_state).",
    question="What else does running a block with dropout change, besides the bytes you count?")
LATE_BINDING = Misconception(
    "every checkpoint reran the same block (a closure read the loop variable late)",
    "checkpoint keeps the function you pass and calls it again during backward, long after your loop has finished. "
    "A lambda or inner function that reads the loop variable sees its LAST value then, so every checkpoint reruns "
    "the last one on its own input. Pass the block itself, functools.partial, or a default argument "
    "(lambda h, block=block: ...).",
    question='When backward reruns a checkpoint, long after your loop ended, which block does its function read?'
)
RNG_NOT_PRESERVED = Misconception(
    "checkpoint recomputes with a different random state (dropout)",
    "The recomputation in backward must draw the same dropout mask as the forward pass did; with "
    "preserve_rng_state=False it draws a new one, and the gradients belong to a network that never ran. Keep the "
    "default preserve_rng_state=True.",
    question="When a checkpoint reruns a block with dropout during backward, does it draw the same mask as the "
    "forward pass?"
)
SWITCHED_MODE = Misconception(
    "switched the blocks to eval mode",
    "The blocks are in training mode (dropout on) and must stay so: checkpointing must not change what the network "
    "computes. Leave .train()/.eval() alone.",
    question="Does checkpointing need dropout switched off, and who else relies on the blocks' mode?"
)
DETACHED_INPUT = Misconception(
    "cut the caller's x off the graph",
    "The output must depend on the x you were given, so that backward reaches it: x.detach() (or a new leaf) starts "
    "a graph of its own and x gets no gradient. Pass x itself to the first checkpoint.",
    question='Does your output depend on the x you were given, or on a copy cut off from it?'
)
LARGEST_MAGNITUDE = Misconception(
    "power iteration on H itself: it finds the eigenvalue of largest size, not the largest",
    "Multiplying by H again and again turns v towards the eigenvector whose eigenvalue is largest in absolute value. "
    "At a saddle that can be the most negative one. Iterate with an operator whose largest eigenvalue belongs to "
    "λmax of H: shifted by a constant that makes every eigenvalue non-negative (a bound on max |λ| gives one), and "
    "remove the shift from the answer.",
    question="Power iteration grows the component whose eigenvalue is largest in size: is that λmax when the most "
    "negative eigenvalue is bigger in size?"
)
SPECTRAL_RADIUS = Misconception(
    "returned the size of the dominant eigenvalue, without its sign",
    "‖Hv‖ for a unit v tends to max |λ|, a size: the eigenvalue itself has a sign, and the largest one need not be the "
    "one of largest size. Use it as a bound, not as the answer.",
    question="Is the number you returned an eigenvalue of H with its sign, or the size of the largest one?"
)
SHIFT_KEPT = Misconception(
    "kept the shift in the answer",
    "H + cI has the eigenvalues λ + c of H: the eigenvalue your iteration found belongs to H + cI, and λmax of H is "
    "that minus c.",
    question="Your iteration ran with a shifted operator: which eigenvalue of H corresponds to the one it found?"
)
SHIFT_TOO_SMALL = Misconception(
    "a shift too small for this spectrum (a fixed number?)",
    "Power iteration on H + cI finds the eigenvalue of H + cI largest in size: that is λmax + c only when "
    "c > (|λmin| − λmax) / 2. Any fixed c is too small for some f (scale f by 100 and it is): the shift has to come "
    "from the spectrum at hand, a bound on max |λ| learned from products.",
    question="Your answer here is λmin, far below −λmax: how large must a shift c be for λmax + c to be the "
    "largest in size, and can one fixed number be large enough for every f?"
)
ZERO_NORMALISED = Misconception(
    "divided by the norm of a zero vector (H = 0)",
    "Where f is linear, H·v is zero for every v, its norm is 0 and normalising gives 0/0 = nan. Every eigenvalue of "
    "H = 0 is 0: test for a zero product before you divide.",
    question="What is H·v, and its norm, when f is linear, and what does your normalisation do with it?"
)
FIXED_START = Misconception(
    "started the iteration from a fixed vector that was an eigenvector",
    "A start that happens to be an eigenvector (or orthogonal to the top one) never leaves that direction: power "
    "iteration can only grow components the start already has. Start from a random vector (seeded, to be repeatable).",
    question="Which components can power iteration grow that your starting vector did not already have?"
)
BUILT_MATRIX = Misconception(
    "built the full Hessian (an n × n matrix) to find one eigenvalue",
    "The point of H·v products is never to hold n² numbers: at n = 10⁷ the Hessian is 800 TB. Power iteration (or "
    "Lanczos) needs a few vectors of n entries and one product per step.",
    question="How many numbers does your method hold at once, and how many does one product H·v need?"
)
BAND_OFF_BY_ONE = Misconception(
    "probes that repeat too soon: neighbours at the band's edge share a pattern",
    "Entries i and j with |i − j| equal to the bandwidth still interact (H_ij may be nonzero), so their columns of "
    "the probes must average z_i z_j to 0 as well: a pattern may repeat only after bandwidth + 1 places.",
    question="At distance exactly bandwidth, can H_ij be nonzero, and what does your pattern give z_i z_j there?"
)
EVERY_ELEMENT = Misconception(
    "one probe per element (the full Hessian's count)",
    "n probes (one per element, as the identity's rows) are exact for any Hessian, but they cost n products, what "
    "the full Hessian costs. A band of width w lets elements far apart share a probe.",
    question="Which pairs of elements can share one probe without their H_ij leaking into each other's estimate?"
)
INDICATORS_UNSCALED = Misconception(
    "0/1 indicator probes without the scale the mean needs",
    "With k probes whose entries are 0 or 1, each entry is covered by one probe only, and the mean over the k probes "
    "divides its H_ii by k. The estimate is the MEAN of z ⊙ Hz: scale the probes so that the mean of z_i² is 1.",
    question="What is the mean over your probes of z_i², and what does it multiply H_ii by?"
)
RANDOM_PROBES = Misconception(
    "random sign probes where the structure allows exact ones",
    "Random signs average the noise Σ_{j≠i} H_ij z_i z_j down only as 1/k. When H is banded, probes designed so that "
    "z_i z_j averages to exactly 0 for every pair inside the band remove that noise with a handful of rows.",
    question="Which pairs (i, j) carry the noise in the estimate of H_ii, and can you choose the probes so that each "
    "of those pairs averages to exactly zero?"
)
SIGNS_ONLY = Misconception(
    "kept the probes to ±1 entries (signs need more rows than real numbers)",
    "Exactness needs each column to be orthogonal to its neighbours' within the band, with mean square 1. Three "
    "mutually orthogonal sign vectors need a length divisible by 4; real entries (zeros allowed, scaled) need only "
    "as many rows as there are columns to keep apart.",
    question="Must a probe's entries be ±1 for the mean of z ⊙ Hz to be exact, and how many rows do real entries "
    "need?"
)
WASTED_PROBES = Misconception(
    "rows that are zero (or repeat) and cost a product each",
    "A probe of zeros contributes nothing but still costs one product H·z (and changes the mean's divisor). When n is "
    "smaller than bandwidth + 1, every element needs its own pattern, and no more than n of them.",
    question="How many of your rows does the estimate need, when x has fewer elements than bandwidth + 1?"
)

# Part A.1, gnvp: the Gauss-Newton product Jᵀ H_ℓ J v
GN_IS_HESSIAN = Misconception(
    "returned the Hessian's product H·v instead of the Gauss-Newton product",
    "The Hessian of loss(net(xs)) is Jᵀ H_ℓ J plus a second term, the loss's gradient with respect to the outputs "
    "times the network's own second derivatives. The Gauss-Newton matrix keeps the first term only: push v through "
    "the network (J v), through the loss's curvature (H_ℓ J v), and back through the network (Jᵀ), never "
    "differentiating the network twice.",
    question="Which term of the Hessian of loss(net(xs)) involves the network's own second derivatives, and does "
    "your computation ever differentiate the network twice?")
GN_NO_LOSS_CURVATURE = Misconception(
    "left out the loss's curvature (Jᵀ J v)",
    "Jᵀ J v is the Gauss-Newton matrix of a loss whose Hessian in the outputs is the identity, half a summed squared "
    "error. A mean, a cross-entropy or any other loss has its own H_ℓ between J and Jᵀ: a Hessian-vector product of "
    "the loss with respect to its input z, in the direction J v.",
    question="What does the loss's own second derivative, with respect to the outputs z, contribute between J v and "
    "Jᵀ, and is it the identity for this loss?")
GN_LINEAR_LOSS = Misconception(
    "no zeros where the loss is linear in the outputs",
    "A loss linear in z has H_ℓ = 0, so G·v = Jᵀ H_ℓ J v is zero, whatever the network (its Hessian H·v is not). "
    "Its gradient with respect to z is then a constant without a graph, which autograd refuses to differentiate: "
    "look at requires_grad before you differentiate a second time.",
    question="What is the loss's Hessian with respect to z when the loss is linear in z, and what does autograd "
    "give you when you differentiate its gradient once more?")
GN_NET_DIFFERENCES = Misconception(
    "finite differences where the part asks for autograd products",
    "(net(x + εv) − net(x − εv)) / 2ε is the check, not the method: it carries an O(ε²) error and evaluates the "
    "network away from xs. J v is a Jacobian-vector product that autograd computes exactly at xs.",
    question="Where did your function evaluate net (or the loss), and can autograd give you J v at xs itself?")
GN_JACOBIAN = Misconception(
    "built the network's Jacobian (or a Hessian) instead of products",
    "J has one row per output and one column per number of xs: for a network that is far beyond memory, and row by "
    "row it costs one backward pass per output. G·v needs only products with vectors: J v, H_ℓ (J v), Jᵀ (H_ℓ J v).",
    question="How many outputs and numbers does the Jacobian have here, and which products of it with a vector does "
    "G·v need?")
