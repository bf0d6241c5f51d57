"""Part B2: ``predicted_bytes(model, n)`` predicts, without running anything, the bytes a recording forward pass of
``model`` on a fresh batch of ``n`` examples keeps for backward, from what each layer saves; the check measures them
(:func:`measured_bytes`, lesson 09's count) and compares. :class:`Residual` and :func:`saved_by` are the notebook's
tools: a residual block, and what one layer saves."""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ...checking import CourseBug, Misconception, call_learner, check, expect_close, proven_failure, trial
from ...contracts import counting_saved
from ...misconceptions import armed
from ...routes import watch_calls
from ...seeding import uniform
from ..cases import case_stream, randint
from .misconceptions import (
    DROPOUT_IN_EVAL,
    FOUR_BYTES,
    INPLACE_LIKE_OUT_OF_PLACE,
    INPUTS_MISSED,
    LAYERNORM_STATS_FULL,
    LAYERNORM_STATS_MISSED,
    LINEAR_INPUTS_ONLY,
    LINEAR_SAVES_OUTPUT,
    MASK_MISSED,
    MASK_ONE_BYTE,
    NOT_A_NUMBER,
    OUTPUT_COUNTED,
    PARAMETERS_COUNTED,
    RAN_THE_MODEL,
    RESIDUAL_ADD_SAVES,
    SAVES_OUTPUT_LIKE_RELU,
)
from .traces import ATTEMPTS


class Residual(nn.Module):
    """A residual block: ``x + block(x)``."""

    def __init__(self, block: nn.Module):
        super().__init__()
        self.block = block

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


def _saved(model: nn.Module, inputs: torch.Tensor) -> list[torch.Tensor]:
    """Every tensor autograd saves during one recording forward pass of ``model`` on ``inputs``, with its output."""
    saved: list[torch.Tensor] = []

    def pack(tensor):
        saved.append(tensor)
        return tensor

    with torch.enable_grad(), torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        output = model(inputs)
    return [*saved, output]


def measured_bytes(model: nn.Module, inputs: torch.Tensor) -> int:
    """Bytes of the distinct storages, parameters left out, that autograd saves in one recording forward pass of
    ``model`` on ``inputs``: lesson 09's ``graph_memory``, measured."""
    parameters = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept = {}
    for tensor in _saved(model, inputs)[:-1]:
        storage = tensor.untyped_storage()
        if storage.data_ptr() not in parameters:
            kept[storage.data_ptr()] = storage.nbytes()
    return sum(kept.values())


def saved_by(module: nn.Module, inputs: torch.Tensor) -> list[str]:
    """What one forward pass of ``module`` on ``inputs`` saves for backward, one line per saved tensor: whether it is
    the input, the output, a parameter or another tensor, with its shape, dtype and bytes."""
    inputs = inputs.detach().clone().requires_grad_().clone()  # requires grad, and an in-place layer may change it
    *saved, output = _saved(module, inputs)
    parameters = {p.untyped_storage().data_ptr(): name for name, p in module.named_parameters()}
    lines = []
    for tensor in saved:
        pointer = tensor.untyped_storage().data_ptr()
        is_input = pointer == inputs.untyped_storage().data_ptr()
        is_output = pointer == output.untyped_storage().data_ptr()
        role = ("the output, written over the input (in place)" if is_input and is_output else
                "the input" if is_input else "the output" if is_output else
                f"the parameter {parameters[pointer]}" if pointer in parameters else "another tensor")
        lines.append(f"{role}: shape {tuple(tensor.shape)}, {str(tensor.dtype).replace('torch.', '')}, "
                     f"{tensor.untyped_storage().nbytes()} bytes")
    return lines


# --------------------------------------------------------------------------------------------- the prediction

SAVES_OUTPUT = (nn.ReLU, nn.Tanh, nn.Sigmoid)  # LeakyReLU too, in place; GELU and LeakyReLU save their input


def _saves_output(module: nn.Module, mistakes: frozenset[Misconception]) -> tuple[bool, bool]:
    """(whether the activation ``module`` saves its output rather than its input, whether it works in place), as an
    answer making ``mistakes`` sees it."""
    inplace = bool(getattr(module, "inplace", False))
    output = isinstance(module, SAVES_OUTPUT) or isinstance(module, nn.LeakyReLU) and inplace
    if INPLACE_LIKE_OUT_OF_PLACE in mistakes and isinstance(module, nn.LeakyReLU) and inplace:
        output, inplace = False, False
    return output or SAVES_OUTPUT_LIKE_RELU in mistakes, inplace


def predicted(model: nn.Sequential, n: int, mistakes: frozenset[Misconception] = frozenset()) -> int:
    """The bytes ``model``'s forward pass on a fresh (n, d) batch saves, by the rules of each layer; with
    ``mistakes``, what an answer making those mistakes predicts (the check's symptoms)."""
    size = 4 if FOUR_BYTES in mistakes else next(model.parameters()).element_size()
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    if LINEAR_INPUTS_ONLY in mistakes:  # lesson 09's count: the batch and one activation per Linear layer
        return n * size * sum(linear.in_features for linear in linears)
    total = 0

    def keep(count: int, each: int = size) -> None:
        nonlocal total
        total += count * each

    def run(modules, width: int, kept: bool) -> tuple[int, bool]:
        """Walk ``modules`` from an input of ``width`` features (``kept``: its storage is saved already); return the
        output's width and whether its storage is saved."""
        for module in modules:
            if isinstance(module, nn.Linear):  # saves its input
                if not kept and not (module is linears[0] and INPUTS_MISSED in mistakes):
                    keep(n * width)
                width, kept = module.out_features, LINEAR_SAVES_OUTPUT in mistakes
                if kept:
                    keep(n * width)
            elif isinstance(module, (*SAVES_OUTPUT, nn.LeakyReLU, nn.GELU)):
                output, inplace = _saves_output(module, mistakes)
                if not (kept and (inplace or not output)):  # a new storage, or the input's, not saved yet
                    keep(n * width)
                kept = output
            elif isinstance(module, nn.Dropout):  # in training, saves its scaled mask; in evaluation, the identity
                if module.training or DROPOUT_IN_EVAL in mistakes:
                    if MASK_MISSED not in mistakes:
                        keep(n * width, 1 if MASK_ONE_BYTE in mistakes else size)
                    kept = False
            elif isinstance(module, nn.LayerNorm):  # saves its input, and a mean and a 1/std per example
                if not kept:
                    keep(n * width)
                if LAYERNORM_STATS_MISSED not in mistakes:
                    keep(2 * n * (width if LAYERNORM_STATS_FULL in mistakes else 1))
                kept = False
            elif isinstance(module, Residual):  # the sum saves nothing
                inner, inner_kept = run(module.block, width, kept)
                if RESIDUAL_ADD_SAVES in mistakes and not inner_kept:
                    keep(n * inner)
                kept = False
            else:
                raise CourseBug(f"predicted() meets a layer it does not know: {module!r}.")
        return width, kept

    width, kept = run(model, linears[0].in_features, False)
    if OUTPUT_COUNTED in mistakes and not kept:
        keep(n * width)
    if PARAMETERS_COUNTED in mistakes:
        total += sum(p.numel() * p.element_size() for p in model.parameters())
    return total


MISTAKES = (PARAMETERS_COUNTED, FOUR_BYTES, INPUTS_MISSED, OUTPUT_COUNTED, LINEAR_SAVES_OUTPUT, SAVES_OUTPUT_LIKE_RELU,
            INPLACE_LIKE_OUT_OF_PLACE, MASK_MISSED, MASK_ONE_BYTE, DROPOUT_IN_EVAL, RESIDUAL_ADD_SAVES,
            LAYERNORM_STATS_MISSED, LAYERNORM_STATS_FULL, LINEAR_INPUTS_ONLY)


def symptoms(model: nn.Sequential, n: int) -> list:
    """Each mistake's prediction for ``model`` on n examples, as symptoms."""
    return [mistake.looks_like(predicted(model, n, frozenset({mistake})), rtol=0, atol=0.5) for mistake in MISTAKES]


# --------------------------------------------------------------------------------------------- the cases

ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {
    "relu": nn.ReLU, "relu_": functools.partial(nn.ReLU, inplace=True), "tanh": nn.Tanh, "gelu": nn.GELU,
    "leaky": nn.LeakyReLU, "leaky_": functools.partial(nn.LeakyReLU, inplace=True)}


@dataclass(frozen=True)
class BytesCase:
    """One fixed architecture of Part B2 (widths, batch size and values are drawn): ``layers`` between the first
    Linear and the last, each a name of :data:`ACTIVATIONS`, "dropout", "norm" (LayerNorm), "linear" (another
    Linear, width to width) or "residual:ACTIVATION" (a residual block Linear, activation, Linear); ``last`` False
    ends the model with its last layer (no Linear after it)."""

    layers: tuple[str, ...]
    dtype: torch.dtype
    training: bool
    shows: tuple[Misconception, ...]  # the mistakes this case tells apart (sizes are drawn again until it does)
    last: bool = True
    n: int | None = None  # batch size (None: 3 to 12, drawn)


#: The fixed architectures of Part B2, at every seed. Each mistake of :data:`MISTAKES` shows, with a value of its own,
#: in at least two of them (tests/test_ex09_parts.py proves it): an in-place ReLU before dropout; LeakyReLU out of
#: place and in place; GELU before dropout in training and in evaluation mode; ReLU before dropout; a residual block
#: between two Linear layers, one after LayerNorm, and one that ends the model; a batch of one.
BYTES_CASES = (
    BytesCase(("relu_", "dropout"), torch.float32, True,
              (PARAMETERS_COUNTED, INPUTS_MISSED, MASK_MISSED, MASK_ONE_BYTE, LINEAR_INPUTS_ONLY)),
    BytesCase(("leaky", "linear", "leaky_"), torch.float64, True,
              (FOUR_BYTES, INPLACE_LIKE_OUT_OF_PLACE, INPUTS_MISSED, PARAMETERS_COUNTED)),
    BytesCase(("gelu", "dropout"), torch.float64, True, (FOUR_BYTES, MASK_ONE_BYTE, MASK_MISSED, LINEAR_INPUTS_ONLY)),
    BytesCase(("gelu", "dropout"), torch.float32, False, (DROPOUT_IN_EVAL, PARAMETERS_COUNTED)),
    BytesCase(("relu", "dropout", "linear", "leaky_"), torch.float32, True,
              (LINEAR_SAVES_OUTPUT, OUTPUT_COUNTED, MASK_MISSED, MASK_ONE_BYTE, INPLACE_LIKE_OUT_OF_PLACE,
               LINEAR_INPUTS_ONLY)),
    BytesCase(("residual:relu",), torch.float64, True,
              (RESIDUAL_ADD_SAVES, FOUR_BYTES, LINEAR_SAVES_OUTPUT, OUTPUT_COUNTED)),
    BytesCase(("norm", "tanh", "residual:gelu"), torch.float32, False,
              (LAYERNORM_STATS_MISSED, LAYERNORM_STATS_FULL, RESIDUAL_ADD_SAVES, LINEAR_SAVES_OUTPUT,
               SAVES_OUTPUT_LIKE_RELU, OUTPUT_COUNTED)),
    BytesCase(("norm", "gelu", "dropout"), torch.float64, False,
              (LAYERNORM_STATS_MISSED, LAYERNORM_STATS_FULL, DROPOUT_IN_EVAL, SAVES_OUTPUT_LIKE_RELU, FOUR_BYTES), n=1),
    BytesCase(("residual:relu",), torch.float32, True, (LINEAR_SAVES_OUTPUT, INPUTS_MISSED), last=False),
    BytesCase(("tanh", "norm", "leaky"), torch.float64, False,
              (LAYERNORM_STATS_MISSED, LAYERNORM_STATS_FULL, SAVES_OUTPUT_LIKE_RELU, LINEAR_SAVES_OUTPUT)),
)


def _layer(name: str, width: int, dtype: torch.dtype) -> nn.Module:
    if name == "dropout":
        return nn.Dropout(0.5)
    if name == "norm":
        return nn.LayerNorm(width, dtype=dtype)
    if name == "linear":
        return nn.Linear(width, width, dtype=dtype)
    if name.startswith("residual:"):
        return Residual(nn.Sequential(nn.Linear(width, width, dtype=dtype), ACTIVATIONS[name.split(":")[1]](),
                                      nn.Linear(width, width, dtype=dtype)))
    return ACTIVATIONS[name]()


def _bytes_case(case: BytesCase, gen: torch.Generator) -> tuple[nn.Sequential, int, str]:
    """One draw of ``case``: (model, batch size, description)."""
    d, width, out, n = randint(gen, 2, 9), randint(gen, 3, 12), randint(gen, 1, 4), case.n or randint(gen, 3, 12)
    layers = [nn.Linear(d, width, dtype=case.dtype), *(_layer(name, width, case.dtype) for name in case.layers)]
    if case.last:
        layers.append(nn.Linear(width, out, dtype=case.dtype))
    model = nn.Sequential(*layers).train(case.training)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(uniform(gen, tuple(p.shape), -1.0, 1.0))
    described = " -> ".join(_name(m) for m in model)
    return model, n, (f"{described} ({str(case.dtype).replace('torch.', '')}, in "
                      f"{'training' if case.training else 'evaluation'} mode), n = {n}")


def _name(module: nn.Module) -> str:
    if isinstance(module, Residual):
        return f"Residual({' -> '.join(_name(m) for m in module.block)})"
    if isinstance(module, nn.Linear):
        return f"Linear({module.in_features}, {module.out_features})"
    if isinstance(module, nn.LayerNorm):
        return f"LayerNorm({module.normalized_shape[0]})"
    inplace = "(inplace=True)" if getattr(module, "inplace", False) else "()"
    return f"{type(module).__name__}{'(0.5)' if isinstance(module, nn.Dropout) else inplace}"


def _bytes_cases(grading_seed: int | None):
    """(model, n, description) for every entry of :data:`BYTES_CASES`, sizes drawn again until the case tells its
    mistakes apart."""
    gen = case_stream("09/graph_bytes", grading_seed)
    for number, case in enumerate(BYTES_CASES):
        for _ in range(ATTEMPTS):
            model, n, described = _bytes_case(case, gen)
            expected = torch.tensor(float(predicted(model, n)), dtype=torch.float64)
            if set(case.shows) <= {s.misconception for s in armed(symptoms(model, n), expected, rtol=0.0, atol=0.5)}:
                break
        else:
            raise CourseBug(f"no draw of Part B2's case {number + 1} told its mistakes apart.")
        yield model, n, described


def _ran(model: nn.Module) -> tuple[list[str], list]:
    """Hooks that note every layer of ``model`` that runs."""
    ran: list[str] = []
    hooks = [module.register_forward_pre_hook(lambda module, args: ran.append(type(module).__name__))
             for module in model.modules()]
    return ran, hooks


@check
def check_predicted_bytes(predicted_bytes, grading_seed: int | None = None) -> None:
    """Part B2: predicted_bytes(model, n) predicts, without running the model or autograd, the bytes of the distinct
    storages (parameters left out) that one recording forward pass of ``model`` on a fresh (n, d) batch of its dtype
    saves; the check measures them (:func:`measured_bytes`) and compares, exactly.

    Domain: ``model`` an nn.Sequential starting with a Linear(d, w), then the layers of one of :data:`BYTES_CASES`
    (ReLU or LeakyReLU in place or not, Tanh, GELU, Dropout(0.5), LayerNorm(w), Linear(w, w), :class:`Residual` blocks
    Linear-activation-Linear), usually ending with a Linear(w, 1 to 4); 2 <= d <= 9, 3 <= w <= 12; all float32 or all
    float64; in training or evaluation mode. ``n`` 1 (pinned) or 3 to 12. Corners at every seed: every architecture of
    :data:`BYTES_CASES`. Contracts checked: a Python int (a float or a tensor is named); nothing run while it predicts
    (no layer of the model runs: forward pre-hooks; no torch.nn.functional.linear call; no tensor saved for backward);
    the model unchanged (call_learner)."""
    __tracebackhide__ = True
    for model, n, described in _bytes_cases(grading_seed):
        with trial():
            what = f"predicted_bytes(model, n) for {described}"
            saved: list = []
            ran, hooks = _ran(model)
            try:
                with watch_calls([F.linear]) as linear:
                    answer = call_learner(counting_saved(predicted_bytes, saved), model, n, what=what)
            finally:
                for hook in hooks:
                    hook.remove()
            if ran or linear.used or saved:
                seen = ", ".join(dict.fromkeys(ran)) or ("a Linear's forward" if linear.used else "a recorded forward")
                raise proven_failure(f"{what} ran {seen} while it predicted: the prediction must come from what each "
                                     "layer saves, before anything runs.", RAN_THE_MODEL)
            if isinstance(answer, (torch.Tensor, bool)) or not isinstance(answer, numbers.Integral):
                raise proven_failure(f"{what} returned {type(answer).__name__} {answer!r:.60}; expected a Python int.",
                                     NOT_A_NUMBER)
            inputs = uniform(torch.Generator().manual_seed(n), (n, model[0].in_features)).to(model[0].weight.dtype)
            expected = measured_bytes(model, inputs)
            if expected != predicted(model, n):
                raise CourseBug(f"the course's prediction for {described} ({predicted(model, n)} bytes) differs from "
                                f"the measurement ({expected}).")
            expect_close(int(answer), expected, what=what, source="measured", rtol=0.0, atol=0.5,
                         symptoms=symptoms(model, n))
