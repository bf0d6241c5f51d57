"""Part D: per-example gradient clipping (the DP-SGD step) for a model with frozen parameters and BatchNorm layers in
eval mode (running statistics), without ever holding the examples' gradients (never N copies of a weight matrix),
against a loop of per-example backward passes."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import torch
from torch import nn
from torch.nn import functional as F

from ...checking import CourseBug, GradingFailure, Routes, call_learner, check, expect_close, fmt, trial
from ...checking import proven_failure as _proven
from ...routes import LargestTensor
from ...seeding import uniform
from ..cases import case_stream, randint, random_mlp
from .misconceptions import (
    BUFFERS_DIFFERENTIATED,
    CHANGED_MODE,
    CLIP_FACTOR_SWAPPED,
    CLIPPED_EACH_TENSOR,
    CLIPPED_SUM,
    CLIPPED_THE_MEAN,
    DIVIDED_BY_BATCH,
    FROZEN_IN_NORM,
    FROZEN_IN_RESULT,
    LOOPED,
    NORM_AS_SUM_OF_NORMS,
    NORM_WITHOUT_BIASES,
    NORM_WITHOUT_ROOT,
    NORMALISED_EVERY_EXAMPLE,
    NOT_CLIPPED,
    PER_EXAMPLE_GRADIENTS,
)

Tensor = torch.Tensor

def trainable_names(model: nn.Module) -> list[str]:
    return [name for name, p in model.named_parameters() if p.requires_grad]


def frozen_names(model: nn.Module) -> list[str]:
    return [name for name, p in model.named_parameters() if not p.requires_grad]


def statistic_names(model: nn.Module) -> list[str]:
    """The floating-point buffers (running means and variances)."""
    return [name for name, b in model.named_buffers() if b.is_floating_point()]


def per_example_gradients(model: nn.Module, inputs: Tensor, targets: Tensor,
                          names: list[str] | None = None) -> dict[str, Tensor]:
    """The oracle: one backward pass per example (the loop the part replaces); {name: (N, *shape)} for the named
    tensors of the model (parameters or buffers; default: the trainable parameters), the others as they are."""
    names = trainable_names(model) if names is None else names
    if not names:
        return {}
    tensors = dict(model.named_parameters()) | dict(model.named_buffers())
    leaves = [tensors[name].detach().clone().requires_grad_(True) for name in names]
    rows = []
    for x, y in zip(inputs, targets):
        out = torch.func.functional_call(model, dict(zip(names, leaves)), (x[None],))
        rows.append(torch.autograd.grad(F.cross_entropy(out, y[None]), leaves))
    return {name: torch.stack([row[k] for row in rows]) for k, name in enumerate(names)}


#: Backward passes the part allows, whatever the batch (one to reach every layer's output, one more if wanted).
MAX_BACKWARD = 2


def needed(model: nn.Module, inputs: Tensor) -> int:
    """The most entries a tensor of the step needs without the examples' gradients: a parameter of the model, a batch
    of one layer's inputs or outputs, an N × N matrix."""
    n = len(inputs)
    widths = [m.in_features for m in model if isinstance(m, nn.Linear)] + [
        m.out_features for m in model if isinstance(m, nn.Linear)]
    return max([p.numel() for p in model.parameters()] + [n * w for w in widths] + [n * n])


def watched(model: nn.Module, inputs: Tensor) -> bool:
    """Whether N copies of the largest trainable weight matrix outnumber every tensor the step needs (the size watch
    can tell the examples' gradients apart from the step's own tensors)."""
    largest = max(p.numel() for p in model.parameters() if p.requires_grad and p.dim() == 2)
    return len(inputs) * largest > needed(model, inputs)


def _norms(grads: dict[str, Tensor], keep: Callable[[str], bool] = lambda name: True) -> Tensor:
    """(N,) global norms over the kept parameters."""
    return torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for name, g in grads.items() if keep(name)))


def _scaled_mean(grads: dict[str, Tensor], factors: Tensor, *, total: bool = False) -> dict[str, Tensor]:
    out = {name: (g * factors.reshape(-1, *[1] * (g.dim() - 1))) for name, g in grads.items()}
    return {name: g.sum(0) if total else g.mean(0) for name, g in out.items()}


def clipped_mean(grads: dict[str, Tensor], max_norm: float) -> dict[str, Tensor]:
    """The mean over the examples of g_i · min(1, C / ‖g_i‖) (‖g_i‖ over every parameter)."""
    return _scaled_mean(grads, torch.clamp(max_norm / _norms(grads), max=1.0))


def _clipping_symptoms(grads: dict[str, Tensor], max_norm: float, others: dict[str, Tensor]) -> dict[str, list]:
    """{parameter name: the symptoms of that entry}; ``others``: the per-example gradients of the frozen parameters,
    for the mistake that counts them in the norm."""
    n = next(iter(grads.values())).shape[0]
    norms = _norms(grads)
    mean = {name: g.mean(0) for name, g in grads.items()}
    mean_norm = _norms({name: g[None] for name, g in mean.items()})
    small = {name: g / n for name, g in grads.items()}
    values = {
        NOT_CLIPPED: mean,
        CLIPPED_THE_MEAN: {name: g * min(1.0, max_norm / float(mean_norm)) for name, g in mean.items()},
        CLIPPED_EACH_TENSOR: {name: (g * torch.clamp(max_norm / _norms({name: g}), max=1.0).reshape(
            -1, *[1] * (g.dim() - 1))).mean(0) for name, g in grads.items()},
        NORMALISED_EVERY_EXAMPLE: _scaled_mean(grads, max_norm / norms),
        CLIP_FACTOR_SWAPPED: _scaled_mean(grads, torch.clamp(max_norm / norms, min=1.0)),
        CLIPPED_SUM: _scaled_mean(grads, torch.clamp(max_norm / norms, max=1.0), total=True),
        DIVIDED_BY_BATCH: clipped_mean(small, max_norm),
        NORM_WITHOUT_ROOT: _scaled_mean(grads, torch.clamp(max_norm / norms**2, max=1.0)),
        NORM_AS_SUM_OF_NORMS: _scaled_mean(grads, torch.clamp(
            max_norm / sum(g.flatten(1).norm(dim=1) for g in grads.values()), max=1.0)),
        NORM_WITHOUT_BIASES: _scaled_mean(grads, torch.clamp(
            max_norm / _norms(grads, lambda name: not name.endswith("bias")), max=1.0)),
    }
    if others:
        values[FROZEN_IN_NORM] = _scaled_mean(grads, torch.clamp(max_norm / _norms(grads | others), max=1.0))
    return {name: [mistake.looks_like(value[name]) for mistake, value in values.items()] for name in grads}


def _clipping_cases(grading_seed: int | None):
    """(model, inputs, targets, sizes, where): ``where`` puts C above every example's norm ("none": nothing is
    clipped), below every one ("all"), between them ("some"), or between the smallest norm and the norm of the mean
    gradient ("aligned"). The corners (every seed): a batch of one (clipped); a model of one Linear layer (no hidden
    layer); a batch whose two first examples are equal; C above every norm; C below every norm; two batches of one
    example three times and a fourth with a shorter gradient, C between the two norms and below the mean gradient's
    norm (only there do no clipping, clipping the mean and a swapped min/max all give different numbers). Then drawn
    MLPs D → H → C (Tanh) and batches with C between the norms (public: fixed shapes)."""
    fixed = torch.Generator().manual_seed(1010)
    model = random_mlp(fixed, (3, 5, 2))
    yield model, uniform(fixed, (1, 3)), torch.tensor([1]), "all"
    model = random_mlp(fixed, (4, 3))
    yield model, uniform(fixed, (3, 4)), torch.tensor([0, 2, 1]), "some"
    model = random_mlp(fixed, (2, 4, 3))
    x = uniform(fixed, (1, 2))
    yield model, torch.cat([x, x, uniform(fixed, (2, 2))]), torch.tensor([2, 2, 0, 1]), "some"
    model = random_mlp(fixed, (3, 4, 2))
    yield model, uniform(fixed, (4, 3)), torch.tensor([0, 1, 1, 0]), "none"
    model = random_mlp(fixed, (2, 3, 3))
    yield model, uniform(fixed, (3, 2)), torch.tensor([2, 0, 1]), "all"
    for start, sizes in ((1016, (3, 4, 2)), (1018, (4, 3))):  # start: a stream where the fourth norm is the shorter
        aligned = torch.Generator().manual_seed(start)
        model = random_mlp(aligned, sizes)
        x, other = uniform(aligned, (1, sizes[0])), uniform(aligned, (1, sizes[0]))
        yield model, torch.cat([x, x, x, other]), torch.tensor([0, 0, 0, 1]), "aligned"
    yield from _frozen_corners()
    gen = case_stream("10/clipping", grading_seed)
    shapes = [(5, (3, 4, 3)), (4, (2, 5, 4))] if grading_seed is None else \
        [(randint(gen, 3, 7), (randint(gen, 2, 5), randint(gen, 3, 6), randint(gen, 2, 4))) for _ in range(2)]
    for k, (n, sizes) in enumerate(shapes):
        model = dp_model(gen, sizes, batchnorm=True, frozen=FREEZES[k if grading_seed is None else
                                                                    randint(gen, 0, len(FREEZES) - 1)])
        yield model, uniform(gen, (n, sizes[0])), torch.randint(sizes[-1], (n,), generator=gen), "some"


#: The eps of every BatchNorm of Part D's models (the module's own, model[k].eps; not torch's default 1e-5).
BN_EPS = 0.1
#: What a case freezes: nothing, the first Linear layer (a pretrained feature layer), the BatchNorm's affine
#: parameters, everything but the last layer (fine-tuning a head).
FREEZES = ("nothing", "first", "batchnorm", "all but last")


def dp_model(gen: torch.Generator, sizes: tuple[int, ...], *, batchnorm: bool, frozen: str) -> nn.Sequential:
    """A float64 MLP (Linear, [BatchNorm1d,] Tanh, ..., Linear) in eval mode: weights uniform in [-1, 1), every
    BatchNorm with an affine transform, eps :data:`BN_EPS` and running statistics of its own (means in [-1, 1),
    variances in [0.5, 2), 7 batches tracked); ``frozen`` (one of :data:`FREEZES`) says which parameters have
    requires_grad=False."""
    mlp = random_mlp(gen, sizes)
    layers: list[nn.Module] = []
    for layer in mlp:
        if isinstance(layer, nn.Tanh) and batchnorm:
            # eps far from the default 1e-5: a normalisation without it, or with 1e-5 typed in, is off by percents
            norm = nn.BatchNorm1d(layers[-1].out_features, eps=BN_EPS, dtype=torch.float64)
            with torch.no_grad():
                norm.weight.copy_(uniform(gen, tuple(norm.weight.shape), 0.5, 1.5))
                norm.bias.copy_(uniform(gen, tuple(norm.bias.shape), -0.5, 0.5))
                norm.running_mean.copy_(uniform(gen, tuple(norm.running_mean.shape), -1.0, 1.0))
                norm.running_var.copy_(uniform(gen, tuple(norm.running_var.shape), 0.5, 2.0))
                norm.num_batches_tracked.fill_(7)
            layers.append(norm)
        layers.append(layer)
    model = nn.Sequential(*layers).eval()
    linears = [m for m in model if isinstance(m, nn.Linear)]
    if frozen == "first":
        linears[0].requires_grad_(False)
    elif frozen == "batchnorm":
        for m in model:
            if isinstance(m, nn.BatchNorm1d):
                m.requires_grad_(False)
    elif frozen == "all but last":
        for m in model[:-1]:
            m.requires_grad_(False)
    return model


def _frozen_corners():
    """Frozen parameters and running statistics (every seed): a frozen first layer with a BatchNorm (the lesson's
    code differentiates and clips the frozen layer too); a BatchNorm whose affine parameters are frozen; only the
    last layer trainable, two hidden layers, C between the norms; a frozen first layer without a BatchNorm, C below
    every norm."""
    fixed = torch.Generator().manual_seed(1013)
    for sizes, batchnorm, frozen, n, where in (((3, 5, 2), True, "first", 4, "some"),
                                               ((4, 3, 3), True, "batchnorm", 3, "some"),
                                               ((2, 4, 3, 3), True, "all but last", 5, "some"),
                                               ((3, 4, 2), False, "first", 3, "all")):
        model = dp_model(fixed, sizes, batchnorm=batchnorm, frozen=frozen)
        yield model, uniform(fixed, (n, sizes[0])), torch.randint(sizes[-1], (n,), generator=fixed), where


def _threshold(norms: Tensor, where: str, mean_norm: float) -> float:
    """A round C (3 significant digits) above, below or between the norms (or between the smallest and the mean
    gradient's norm ``mean_norm``), at least 5 % away from every one."""
    ordered = sorted(float(v) for v in norms)
    if where == "aligned":
        if not ordered[0] * 1.25 < mean_norm < ordered[-1]:
            raise CourseBug(f"an aligned clipping case has norms {ordered} and a mean gradient of norm {mean_norm}.")
        target = (ordered[0] * mean_norm) ** 0.5
    elif where == "none":
        target = 1.5 * ordered[-1]
    elif where == "all":
        target = 0.5 * ordered[0]
    else:
        gaps = [(b / a, (a * b) ** 0.5) for a, b in zip(ordered, ordered[1:]) if b > 1.12 * a]
        target = max(gaps)[1] if gaps else 1.5 * ordered[-1]
    c = float(f"{target:.3g}")
    if any(abs(c - v) < 0.05 * v for v in ordered):  # rounding landed too close to a norm: keep the exact target
        c = target
    return c


def _model_name(model: nn.Module) -> str:
    """'3 → 5 (frozen) → BatchNorm → Tanh → 2', the layers as a learner reads them."""
    parts = [str(model[0].in_features)]
    for layer in model:
        frozen = " (frozen)" if any(not p.requires_grad for p in layer.parameters()) else ""
        if isinstance(layer, nn.Linear):
            parts.append(f"Linear {layer.out_features}{frozen}")
        elif isinstance(layer, nn.BatchNorm1d):
            parts.append(f"BatchNorm{frozen}")
        else:
            parts.append(type(layer).__name__)
    return " → ".join(parts)


def _run_clipping(clipped_mean_gradient, model, inputs, targets, where: str) -> str | None:
    """Raises the case's failure; returns what the size watch saw where the values are right and the examples'
    gradients were built (None if they were not)."""
    __tracebackhide__ = True
    model.eval()  # every model arrives in eval mode, as the part says (and the message below)
    grads = per_example_gradients(model, inputs, targets)
    norms = _norms(grads)
    max_norm = _threshold(norms, where, float(_norms({name: g.mean(0)[None] for name, g in grads.items()})))
    what = (f"clipped_mean_gradient(model, inputs, targets, max_norm={max_norm!r}) for a model {_model_name(model)} "
            f"in eval mode and a batch of {len(inputs)} (the examples' gradient norms over the trainable parameters: "
            f"{fmt(norms, 4)})")
    modes = [m.training for m in model.modules()]
    routes, largest = Routes(), LargestTensor()
    try:
        with largest:
            answer = call_learner(clipped_mean_gradient, model, inputs, targets, max_norm, what=what, routes=routes)
    except GradingFailure as failure:  # autograd refuses to differentiate a BatchNorm's running statistics
        statistics = any(name.rsplit(".", 1)[-1] in failure.message for name in statistic_names(model)) or (
            "num_batches_tracked" in failure.message)
        raise GradingFailure(failure.message, proven=BUFFERS_DIFFERENTIATED if statistics else failure.proven,
                             suspects=failure.suspects) from None
    if [m.training for m in model.modules()] != modes:
        model.eval()
        raise _proven(f"{what} left the model with another training mode than it came in.", CHANGED_MODE)
    if routes.backward_runs > MAX_BACKWARD:
        raise _proven(f"{what} ran {routes.backward_runs} backward passes for {len(inputs)} examples; the part allows "
                      f"{MAX_BACKWARD}.", LOOPED)
    names = list(grads)
    keys = set(map(str, answer)) if type(answer) in (dict, OrderedDict) else set()
    if keys & set(frozen_names(model)):
        raise _proven(f"{what} returned entries for {', '.join(sorted(keys & set(frozen_names(model))))}, which "
                      "the model has frozen (requires_grad=False).", FROZEN_IN_RESULT)
    if keys & set(statistic_names(model)):
        raise _proven(f"{what} returned entries for {', '.join(sorted(keys & set(statistic_names(model))))}: "
                      "buffers of the model, not parameters.", BUFFERS_DIFFERENTIATED)
    if type(answer) not in (dict, OrderedDict):
        raise GradingFailure(f"{what} returned {type(answer).__name__}; expected a dict {{name: tensor}} with the "
                             f"names of the trainable parameters: {', '.join(names)}.")
    if sorted(map(str, answer)) != sorted(names):
        raise GradingFailure(f"{what} returned the keys {', '.join(map(str, answer))}; expected {', '.join(names)}, "
                             "the names of the trainable parameters in model.named_parameters().")
    expected = clipped_mean(grads, max_norm)
    others = per_example_gradients(model, inputs, targets, frozen_names(model))
    symptoms = _clipping_symptoms(grads, max_norm, others)
    # A mean of per-example terms can cancel down to tiny entries: the tolerance follows the terms' scale, so that a
    # factor computed as C / (‖g‖ + 1e-6), as DP libraries do, passes.
    scale = max(float(g.abs().max()) for g in grads.values())
    for name in names:
        got = answer[name]
        if not isinstance(got, Tensor) or type(got) not in (Tensor, nn.Parameter):
            raise GradingFailure(f"{what}: entry {name!r} is {type(got).__name__}; expected a tensor of shape "
                                 f"{tuple(expected[name].shape)}.")
        if tuple(got.shape) != tuple(expected[name].shape):
            raise GradingFailure(f"{what}: entry {name!r} has shape {tuple(got.shape)}; expected "
                                 f"{tuple(expected[name].shape)}, the shape of that parameter.")
        expect_close(got.detach(), expected[name], what=f"{what}: entry {name!r}", source="a loop", rtol=1e-5,
                     atol=1e-6 * scale, symptoms=symptoms[name])
    weight, size = max(((name, grads[name][0].numel()) for name in names if grads[name].dim() == 3),
                       key=lambda pair: pair[1])
    if watched(model, inputs) and largest.numel >= len(inputs) * size:
        return (f"{what} returned the right values, but made a tensor of shape {largest.shape} "
                f"({largest.numel:,} entries): as many as {len(inputs)} copies of the trainable {weight} "
                f"{tuple(grads[weight].shape[1:])}, while no tensor the step needs has more than "
                f"{needed(model, inputs):,}.")
    return None


@check
def check_clipped_mean_gradient(clipped_mean_gradient, grading_seed: int | None = None) -> None:
    """Part D: clipped_mean_gradient(model, inputs, targets, max_norm) is the DP-SGD gradient without its noise: the
    mean over the examples of g_i · min(1, C / ‖g_i‖), g_i the gradient of example i's own loss, ‖g_i‖ its global norm
    over every parameter.

    Domain: ``model`` a float64 MLP (Linear layers, Tanh between them, one layer or more); ``inputs`` (N, D) float64,
    N >= 1; ``targets`` (N,) int64 in [0, C); ``max_norm`` a float > 0. Corners at every seed: N = 1, a single Linear
    layer, two equal examples, C above every example's norm (nothing clipped: the batch-mean gradient), C below every
    norm (all clipped), C between the norms and below the mean gradient's norm (one example three times and a
    shorter one, twice); otherwise C lies between the norms, 5 % or more away from each. Contract: a dict with exactly
    the names of model.named_parameters(), each a tensor of that parameter's shape (a graph on it is allowed, the
    test reads values); at most two backward passes for the whole batch; never a tensor as large as N copies of the
    largest trainable weight matrix (watched, forward and backward, wherever that is more than any tensor the step
    needs: see :func:`watched`), so never the examples' gradients themselves; the model (its parameters and their
    .grad, buffers, mode) and the batch unchanged.
    """
    __tracebackhide__ = True
    built, wrong = [], False
    for model, inputs, targets, where in _clipping_cases(grading_seed):
        count = len(built)
        with trial():
            built.append(_run_clipping(clipped_mean_gradient, model, inputs, targets, where))
        wrong = wrong or len(built) == count  # the case raised before returning
    # Memory last: an answer with a wrong value is shown that mistake first; one right everywhere but built on the
    # examples' gradients fails once, with the first case where the watch saw them.
    seen = [message for message in built if message is not None]
    if seen and not wrong:
        with trial():
            raise _proven(seen[0], PER_EXAMPLE_GRADIENTS)
