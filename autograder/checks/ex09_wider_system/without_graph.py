"""Part B: evaluate and measure without a graph: B1 ``held_out_loss`` (a number, no graph recorded, the model's mode
kept), B2 ``graph_bytes`` (the bytes a forward pass saves for backward)."""

from __future__ import annotations

import contextlib
import numbers
from dataclasses import dataclass

import torch
from torch import nn

from ...checking import CourseBug, Misconception, call_learner, check, expect_close, proven_failure, trial
from ...contracts import counting_saved
from ...misconceptions import armed
from ...seeding import generator, uniform
from ..cases import randint, random_mlp
from .misconceptions import (
    BROADCAST_LOSS,
    DOUBLE_COUNTED,
    EVAL_MODE_LEFT,
    FOUR_BYTES,
    GRAD_MODE_IGNORED,
    GRAD_MODE_LEFT,
    NOT_A_NUMBER,
    PARAMETERS_COUNTED,
    RECORDED_GRAPH,
    ROOT_MEAN,
    SQUEEZED_AGAINST_COLUMN,
    SUM_NOT_MEAN,
    TENSOR_NOT_STORAGE,
    TRAIN_MODE_FORCED,
)
from .traces import ATTEMPTS

#: The fixed shapes of Part B1's cases, in order: (batch size or None to draw it, targets shaped (n,) rather than
#: (n, 1), the model in training mode). The first two are corners that run at every seed: a batch of one, with (1,)
#: targets (where the broadcast (1, 1) - (1,) happens to give the right answer) and with (1, 1) ones, the second's
#: model put in evaluation mode by its caller (no dropout: the same predictions); sizes and values of the others are
#: drawn.
LOSS_CASES = ((1, True, True), (1, False, False), (None, True, True), (None, False, True), (None, True, True),
              (None, False, True))


def _loss_cases(grading_seed: int | None):
    """(model, inputs, targets) for every entry of :data:`LOSS_CASES`."""
    gen = torch.Generator().manual_seed(909) if grading_seed is None else generator("09/held_out_loss", grading_seed)
    for n, flat, training in LOSS_CASES:
        d, width, n = randint(gen, 1, 4), randint(gen, 3, 6), n or randint(gen, 6, 12)
        model = random_mlp(gen, (d, width, 1)).train(training)
        inputs = uniform(gen, (n, d))
        targets = uniform(gen, (n,) if flat else (n, 1))
        yield model, inputs, targets


@check
def check_held_out_loss(held_out_loss, grading_seed: int | None = None) -> None:
    """Part B1: held_out_loss(model, inputs, targets) is the mean squared error of model(inputs) against targets
    ((n,) or (n, 1)), as a Python float, computed without recording a graph and without changing its arguments.

    Domain: ``model`` a float64 MLP (Linear, Tanh, Linear) from d inputs to one output, with parameters that require
    grad; ``inputs`` float64 of shape (n, d), 1 <= d <= 4, values in [-2, 2); ``targets`` float64 of shape (n,) or
    (n, 1), values in [-2, 2); n = 1 (pinned, both target shapes) or 6 to 12. Called with recording on.
    Contracts checked: a Python float (a tensor, even 0-d, is named); no tensor saved for backward while it runs
    (saved-tensor hooks); the arguments unchanged (values, requires_grad, .grad, versions: call_learner; the model's
    training flag: checked here, the models come in training mode, one pinned case in evaluation mode); recording on
    again when it returns. Both broadcasts are named where they differ from
    the answer: (n, 1) predictions against (n,) targets and (n,) predictions against (n, 1) targets (n >= 6)."""
    __tracebackhide__ = True
    for model, inputs, targets in _loss_cases(grading_seed):
        with trial():
            n, d = inputs.shape
            mode = "" if model.training else ", model in evaluation mode"
            what = f"held_out_loss(model, inputs of shape {(n, d)}, targets of shape {tuple(targets.shape)}{mode})"
            saved: list = []
            training = model.training
            try:
                answer = call_learner(counting_saved(held_out_loss, saved), model, inputs, targets, what=what)
            finally:
                recording = torch.is_grad_enabled()
                torch.set_grad_enabled(True)
            if not recording:
                raise proven_failure(f"{what} returned with autograd's recording switched off (it was on when "
                                     "called).", GRAD_MODE_LEFT)
            if model.training != training:
                raise proven_failure(f"{what} left model.training {model.training} (it was {training}): the caller's "
                                     "model is no longer in the mode it was in.",
                                     EVAL_MODE_LEFT if training else TRAIN_MODE_FORCED)
            if saved:
                raise proven_failure(f"{what} recorded a graph: autograd saved {len(saved)} tensor(s) for backward "
                                     "while it ran.", RECORDED_GRAPH)
            if isinstance(answer, torch.Tensor) or not isinstance(answer, float):
                raise proven_failure(f"{what} returned {type(answer).__name__} {answer!r:.60}; expected a Python "
                                     "float.", NOT_A_NUMBER)
            with torch.no_grad():
                predictions = model(inputs)
            errors = (predictions.reshape(-1) - targets.reshape(-1)) ** 2
            symptoms = [SUM_NOT_MEAN.looks_like(errors.sum()), ROOT_MEAN.looks_like(errors.mean().sqrt())]
            pairwise = ((predictions - targets.reshape(1, -1)) ** 2).mean()  # every prediction minus every target
            # the pairwise mean can lie within 1e-4 of the answer: told apart at the check's own tolerance
            symptoms.append((BROADCAST_LOSS if targets.dim() == 1 else SQUEEZED_AGAINST_COLUMN).looks_like(
                pairwise, rtol=1e-8, atol=1e-12))
            expect_close(answer, errors.mean(), what=what, source="expected", rtol=1e-9, atol=1e-12,
                         symptoms=symptoms)


ACTIVATIONS: dict[str, type[nn.Module]] = {"ReLU": nn.ReLU, "Tanh": nn.Tanh, "Sigmoid": nn.Sigmoid, "GELU": nn.GELU}


@dataclass(frozen=True)
class SavedTensor:
    storage: int  # data_ptr of its storage
    storage_bytes: int
    pointer: int  # data_ptr of the tensor itself
    tensor_bytes: int
    element_size: int
    parameter: bool


def saved_tensors(model: nn.Module, inputs: torch.Tensor) -> list[SavedTensor]:
    """Every tensor autograd saves during one recording forward pass of ``model`` on ``inputs``."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved: list[SavedTensor] = []

    def pack(tensor):
        storage = tensor.untyped_storage()
        saved.append(SavedTensor(storage.data_ptr(), storage.nbytes(), tensor.data_ptr(),
                                 tensor.numel() * tensor.element_size(), tensor.element_size(),
                                 storage.data_ptr() in parameters))
        return tensor

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        model(inputs)
    return saved


def _distinct(saved: list[SavedTensor], key: str) -> list[SavedTensor]:
    return list({getattr(s, key): s for s in reversed(saved)}.values())


def graph_bytes_reference(model: nn.Module, inputs: torch.Tensor) -> int:
    """Bytes of the distinct non-parameter storages autograd saves in model(inputs): the memory the graph keeps."""
    return sum(s.storage_bytes for s in _distinct([s for s in saved_tensors(model, inputs) if not s.parameter],
                                                   "storage"))


def _graph_bytes_symptoms(saved: list[SavedTensor], no_grad: bool) -> list:
    """What each mistake of Part B2 returns for a forward pass that saved ``saved`` (called under no_grad or not)."""
    own = [s for s in saved if not s.parameter]
    values = {DOUBLE_COUNTED: sum(s.storage_bytes for s in own),
              PARAMETERS_COUNTED: sum(s.storage_bytes for s in _distinct(saved, "storage")),
              TENSOR_NOT_STORAGE: sum(s.tensor_bytes for s in _distinct(own, "pointer")),
              FOUR_BYTES: sum(s.tensor_bytes // s.element_size * 4 for s in _distinct(own, "pointer"))}
    if no_grad:  # measured in the caller's grad mode, a forward pass under no_grad saves nothing
        values[GRAD_MODE_IGNORED] = 0
    return [mistake.looks_like(value, rtol=0, atol=0.5) for mistake, value in values.items()]


@dataclass(frozen=True)
class BytesCase:
    """One fixed case of Part B2: what is pinned at every seed (the rest is drawn)."""

    dtype: torch.dtype
    view: bool  # inputs are the first n rows of a 2n-row batch
    no_grad: bool  # the check calls graph_bytes inside torch.no_grad()
    shows: tuple[Misconception, ...]  # the mistakes this case tells apart (sizes are drawn again until it does)
    hidden: int | None = None  # hidden layers (None: 1 to 3, drawn)
    n: int | None = None  # batch size (None: 4 to 16, drawn)


#: The fixed cases of Part B2. Each mistake shows, with a value of its own, in at least two of them at every seed
#: (tests/test_ex09_traces.py proves it): the view's own bytes in the two float64 views (in a float32 view they are
#: what "four bytes per number" gives); four bytes per number in the three float64 cases; the caller's no_grad in the
#: two cases called under it; a shared storage counted twice and the parameters counted wherever there is a hidden
#: layer (except a shared storage under GELU, which saves its input rather than its output, so no storage is saved
#: twice). The last two are corners: a single Linear (only the inputs are saved) and a batch of one.
BYTES_CASES = (
    BytesCase(torch.float64, view=True, no_grad=False,
              shows=(DOUBLE_COUNTED, PARAMETERS_COUNTED, TENSOR_NOT_STORAGE, FOUR_BYTES)),
    BytesCase(torch.float32, view=False, no_grad=True, shows=(DOUBLE_COUNTED, PARAMETERS_COUNTED, GRAD_MODE_IGNORED)),
    BytesCase(torch.float64, view=True, no_grad=True,
              shows=(DOUBLE_COUNTED, PARAMETERS_COUNTED, TENSOR_NOT_STORAGE, FOUR_BYTES, GRAD_MODE_IGNORED)),
    BytesCase(torch.float32, view=True, no_grad=False, shows=(), hidden=0),
    BytesCase(torch.float64, view=False, no_grad=False, shows=(DOUBLE_COUNTED, PARAMETERS_COUNTED, FOUR_BYTES), n=1))


def _bytes_case(case: BytesCase, activation: str, gen: torch.Generator):
    """One draw of ``case``: (model, inputs, description)."""
    d, n = randint(gen, 3, 8), case.n or randint(gen, 4, 16)
    hidden = randint(gen, 1, 3) if case.hidden is None else case.hidden
    widths = [d] + [randint(gen, 4, 12) for _ in range(hidden)] + [randint(gen, 1, 4)]
    layers: list[nn.Module] = []
    for k, (n_in, n_out) in enumerate(zip(widths, widths[1:])):
        layers += [ACTIVATIONS[activation]()] if k else []
        layers.append(nn.Linear(n_in, n_out, dtype=case.dtype))
    model = nn.Sequential(*layers)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(uniform(gen, tuple(p.shape), -1.0, 1.0))
    batch = uniform(gen, (2 * n if case.view else n, d)).to(case.dtype)
    inputs = batch[:n] if case.view else batch
    shown = f"the first {n} row(s) of a {2 * n}-row batch" if case.view else f"of shape {(n, d)}"
    kind = f"with {activation}" if hidden else "(a single Linear)"
    return model, inputs, f"an MLP {widths} {kind}, {str(case.dtype).replace('torch.', '')}, inputs {shown}"


def _bytes_cases(grading_seed: int | None):
    """(model, inputs, description, called under no_grad) for every entry of :data:`BYTES_CASES`: activations,
    widths, sizes and values are drawn, and drawn again until the case tells its mistakes apart."""
    gen = torch.Generator().manual_seed(919) if grading_seed is None else generator("09/graph_bytes", grading_seed)
    names = list(ACTIVATIONS)
    order = torch.randperm(len(names), generator=gen).tolist()
    for number, case in enumerate(BYTES_CASES):
        activation = names[order[number % len(names)]]
        needed = {m for m in case.shows if not (m is DOUBLE_COUNTED and activation == "GELU")}
        for _ in range(ATTEMPTS):
            model, inputs, described = _bytes_case(case, activation, gen)
            expected = torch.tensor(float(graph_bytes_reference(model, inputs)), dtype=torch.float64)
            symptoms = _graph_bytes_symptoms(saved_tensors(model, inputs), case.no_grad)
            if needed <= {s.misconception for s in armed(symptoms, expected, rtol=0.0, atol=0.5)}:
                break
        else:
            raise CourseBug(f"no draw of Part B2's case {number + 1} told its mistakes apart.")
        yield model, inputs, described, case.no_grad


@check
def check_graph_bytes(graph_bytes, grading_seed: int | None = None) -> None:
    """Part B2: graph_bytes(model, inputs) is the number of bytes of the distinct storages, parameters excluded,
    that autograd saves during a recording forward pass of model(inputs): a Python int, measured even when the caller
    switched recording off, without changing the model or the inputs.

    Domain: ``model`` an nn.Sequential of Linear layers with ReLU, Tanh, Sigmoid or GELU between them (0 to 3 hidden
    layers of width 4 to 12, 1 to 4 outputs), all float32 or all float64, parameters requiring grad; ``inputs`` of
    shape (n, d), 3 <= d <= 8, n = 1 (pinned) or 4 to 16, the model's dtype, either a whole tensor or the first n rows
    of a 2n-row batch (a view). Called with recording on, or inside torch.no_grad() (see :data:`BYTES_CASES`).
    Contracts checked: a Python int (a float or a tensor is named); the byte count measured, so equal to the storages
    autograd saves (their whole size, each once, parameters left out); the model and inputs unchanged (no backward,
    no .grad: call_learner)."""
    __tracebackhide__ = True
    for model, inputs, described, no_grad in _bytes_cases(grading_seed):
        with trial():
            what = f"graph_bytes(model, inputs) for {described}{', called inside torch.no_grad()' if no_grad else ''}"
            with torch.no_grad() if no_grad else contextlib.nullcontext():
                answer = call_learner(graph_bytes, model, inputs, what=what)
            if isinstance(answer, (torch.Tensor, bool)) or not isinstance(answer, numbers.Integral):
                raise proven_failure(f"{what} returned {type(answer).__name__} {answer!r:.60}; expected a Python int.",
                                     NOT_A_NUMBER)
            saved = saved_tensors(model, inputs)
            expected = graph_bytes_reference(model, inputs)
            if expected <= 0:
                raise CourseBug(f"the forward pass of {described} saved nothing for backward.")
            expect_close(int(answer), expected, what=what, source="measured", rtol=0.0, atol=0.5,
                         symptoms=_graph_bytes_symptoms(saved, no_grad))
