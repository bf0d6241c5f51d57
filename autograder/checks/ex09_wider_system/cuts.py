"""Part C1: ``distillation_loss(student, teacher, temperature, inputs)`` is the notebook's buggy loss with its cuts
found and fixed: the value it had, autograd's gradients for the student and the temperature equal to central
differences of the intended loss, and the teacher, the one intended stop-gradient, neither trained nor recorded."""

from __future__ import annotations

import torch

from ...checking import GradingFailure, call_learner, check, expect_close, proven_failure, trial
from ...oracles import autograd_gradient, central_difference
from ...seeding import uniform
from ..cases import case_stream, randint, random_mlp
from .misconceptions import (
    INFERENCE_SAVED,
    SCALE_CONSTANT,
    STUDENT_CONSTANT,
    TEACHER_RECORDED,
    TEACHER_TRAINED,
    TEMPERATURE_CONSTANT,
)

CASES = 3


def standardised(values: torch.Tensor) -> torch.Tensor:
    """Zero mean and unit spread over all the values (torch's unbiased std), as the notebook's standardise."""
    return (values - values.mean()) / values.std()


def intended_loss(student: torch.nn.Module, target: torch.Tensor, inputs: torch.Tensor, *, constant_scale=False):
    """The loss the notebook's team meant, as a function of the student's parameters and the temperature (the
    teacher's standardised predictions ``target`` a constant); with ``constant_scale``, what an answer that kept the
    scale a number computes."""
    names = [name for name, _ in student.named_parameters()]

    def loss(*values):
        *parameters, temperature = values
        prediction = standardised(torch.func.functional_call(student, dict(zip(names, parameters)), (inputs,)))
        scale = prediction.abs().max()
        return ((prediction / (scale.detach() if constant_scale else scale) - temperature * target) ** 2).mean()

    return loss


def _cases(grading_seed: int | None):
    """(student, teacher, temperature, inputs) for each case: float64 MLPs d -> w -> 1 with tanh."""
    gen = case_stream("09/distillation", grading_seed)
    for _ in range(CASES):
        d, width, n = randint(gen, 2, 4), randint(gen, 4, 8), randint(gen, 5, 10)
        student, teacher = random_mlp(gen, (d, width, 1)), random_mlp(gen, (d, width, 1))
        temperature = uniform(gen, (), 0.5, 2.0).requires_grad_()
        yield student, teacher, temperature, uniform(gen, (n, d))


def _teacher_watch(teacher: torch.nn.Module) -> tuple[list[bool], object]:
    """A hook noting whether each forward pass of the teacher was recorded."""
    recorded: list[bool] = []
    return recorded, teacher.register_forward_hook(lambda module, args, output: recorded.append(output.requires_grad))


def _call(distillation_loss, student, teacher, temperature, inputs, what: str):
    __tracebackhide__ = True
    recorded, hook = _teacher_watch(teacher)
    try:
        loss = call_learner(distillation_loss, student, teacher, temperature, inputs, what=what)
    except GradingFailure as failure:
        if "Inference tensors cannot be saved for backward" in failure.message:
            raise proven_failure(failure.message, INFERENCE_SAVED) from None
        raise
    finally:
        hook.remove()
    if not isinstance(loss, torch.Tensor) or loss.numel() != 1:
        raise GradingFailure(f"{what} returned {type(loss).__name__} {loss!r:.60}; expected the loss, a tensor "
                             "holding one number.")
    return loss.reshape(()), any(recorded)


@check
def check_distillation_loss(distillation_loss, grading_seed: int | None = None) -> None:
    """Part C1: distillation_loss(student, teacher, temperature, inputs) returns the intended loss
    mean((s(p) / max|s(p)| - temperature * s(q))^2), s standardising with torch's unbiased std, p the student's and q
    the teacher's predictions, as a tensor whose graph gives the student's parameters and the temperature autograd
    gradients equal to central differences of that loss in float64, while the teacher runs unrecorded and gets no
    gradient.

    Domain: ``student`` and ``teacher`` float64 MLPs (Linear, Tanh, Linear) from d to 1, 2 <= d <= 4, hidden width 4 to
    8, weights in [-1, 1), parameters requiring grad; ``temperature`` a 0-d float64 leaf requiring grad in [0.5, 2);
    ``inputs`` float64 (n, d), 5 <= n <= 10, values in [-2, 2). Three cases, drawn (a fixed stream for the visible
    test). Contracts checked: a one-number tensor; the teacher's forward pass not recorded (a forward hook) and no
    gradient reaching its parameters; a gradient reaching the temperature and the student; the value (rtol 1e-10) and
    the gradients (against autograd and central differences of the intended loss, rtol 1e-6); the arguments unchanged
    (call_learner: no backward inside, no .grad written)."""
    __tracebackhide__ = True
    for number, (student, teacher, temperature, inputs) in enumerate(_cases(grading_seed), start=1):
        with trial():
            n, d = inputs.shape
            what = f"distillation_loss(student, teacher, temperature, inputs) for case {number} (inputs {n}x{d})"
            loss, teacher_recorded = _call(distillation_loss, student, teacher, temperature, inputs, what)
            students, teachers = list(student.parameters()), list(teacher.parameters())
            if not loss.requires_grad:
                raise proven_failure(f"{what} returned a loss that records no graph: no gradient can reach the student "
                                     "or the temperature.", STUDENT_CONSTANT)
            grads = torch.autograd.grad(loss, [*students, temperature, *teachers], allow_unused=True)
            if any(g is not None for g in grads[len(students) + 1:]):
                raise proven_failure(f"{what}: the loss's gradient reaches the teacher's parameters.", TEACHER_TRAINED)
            if teacher_recorded:
                raise proven_failure(f"{what} ran the teacher with recording on (its output requires grad), then cut "
                                     "it off: its graph was built for nothing.", TEACHER_RECORDED)
            if all(g is None for g in grads[:len(students)]):
                raise proven_failure(f"{what}: no gradient reaches the student's parameters.", STUDENT_CONSTANT)
            if grads[len(students)] is None:
                raise proven_failure(f"{what}: no gradient reaches the temperature.", TEMPERATURE_CONSTANT)
            with torch.no_grad():
                target = standardised(teacher(inputs))
            values = [p.detach() for p in students] + [temperature.detach()]
            intended = intended_loss(student, target, inputs)
            with torch.no_grad():
                value = intended(*values)
            expect_close(loss.detach(), value, what=f"{what}, its value", source="expected", rtol=1e-10, atol=1e-12)
            flat = lambda gradients: torch.cat([g.reshape(-1) for g in gradients])  # noqa: E731
            got = flat([torch.zeros_like(p) if g is None else g for p, g in zip(values, grads)])
            constant_scale = intended_loss(student, target, inputs, constant_scale=True)
            expect_close(got, flat(autograd_gradient(intended, *values)), what=f"{what}, d loss / d (student's "
                         "parameters, temperature)", fd=flat(central_difference(intended, *values)), rtol=1e-6,
                         atol=1e-9, symptoms=[SCALE_CONSTANT.looks_like(flat(autograd_gradient(constant_scale,
                                                                                               *values)))])
