"""Checks for exercise 06, in-place operations and leaf tensors: a manual SGD step, a manual training loop, and
sorting snippets into "raises" / "silently wrong" / "fine".

Each ``check_*`` function is one test cell's whole body. Without ``seed`` it runs the public cases a learner sees;
the hidden test cells pass ``seed=grading_seed()`` and get fresh random cases.

Two decisions the exercise states to learners:

* a reset gradient is ``None`` (what ``optimizer.zero_grad()`` does since PyTorch 2.0) or all zeros: both pass;
* an update through ``p.data`` gives the same numbers as one under ``torch.no_grad()``, so it passes Parts A and B.
  Where ``.data`` really is wrong — an intermediate that backward needs, overwritten behind the version counter's
  back — is what Part C asks about.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch.optim.sgd import sgd

from ..checking import GradingFailure, Misconception, call_learner, expect_close, fmt
from ..oracles import autograd_gradient, central_difference
from ..seeding import choice, generator, uniform

Tensor = torch.Tensor
VERDICTS = ("raises", "silently wrong", "fine")


# ---------------------------------------------------------------------------------------------------------------
# Calling learner code: an exception's message is matched against known mistakes.

NO_GRAD_HINT = ("While autograd records, PyTorch refuses an in-place write into a leaf that requires grad. Do the "
                "update inside `with torch.no_grad():`, where nothing is recorded.")

STEP_ERRORS = {
    "leaf Variable that requires grad": Misconception("in-place update outside torch.no_grad()", NO_GRAD_HINT),
    "NoneType": Misconception("a parameter without a gradient", "A parameter that took no part in the loss has "
                              ".grad None. Skip it (`if p.grad is None: continue`), as torch.optim.SGD does."),
}
LOOP_ERRORS = {
    **STEP_ERRORS,
    "second time": Misconception("the loss computed once, outside the loop", "backward() frees the graph it "
                                 "walks, and the weights change every step: call loss_fn() anew in every step."),
    "modified by an inplace operation": Misconception("the loss computed once, outside the loop", "The graph of an "
                                                      "old loss saved the weights you have since updated: call "
                                                      "loss_fn() anew in every step."),
}


def _call(fn: Callable, *args, what: str, errors: dict[str, Misconception]):
    """call_learner, naming the mistake when the learner's exception message matches a known one."""
    __tracebackhide__ = True
    try:
        return call_learner(fn, *args, what=what, may_change=True)
    except GradingFailure as failure:
        message = str(failure)
        for fragment, mistake in errors.items():
            if fragment in message:
                message += f"\nLikely misconception: {mistake.name}. {mistake.hint}"
                break
        raise GradingFailure(message) from None


def _plain(value) -> bool:
    """A real tensor, not a subclass whose methods would run learner code (__torch_function__)."""
    return type(value) in (torch.Tensor, torch.nn.Parameter)


def _grad_is_reset(p: Tensor) -> bool:
    return p.grad is None or (_plain(p.grad) and not bool(p.grad.detach().abs().max() > 0))


def _describe(names: Sequence[str], tensors: Sequence[Tensor]) -> str:
    return "[" + ", ".join(f"{n} {tuple(t.shape)}" for n, t in zip(names, tensors)) + "]"


# ---------------------------------------------------------------------------------------------------------------
# Part A: sgd_step(params, lr)

@dataclass
class StepCase:
    """Parameters (by name), a loss of those that require a step, and one that takes no part in the loss."""

    description: str
    names: list[str]
    start: list[Tensor]
    loss: Callable[..., Tensor]
    lr: float
    frozen: Tensor | None = None  # a parameter whose .grad stays None


def _linear_case(gen: torch.Generator, n: int, d_in: int, d_out: int, lr: float) -> StepCase:
    x, y = uniform(gen, (n, d_in)), uniform(gen, (n, d_out))
    weight, bias = 0.5 * uniform(gen, (d_in, d_out)), uniform(gen, (d_out,))
    return StepCase(f"loss = mean((x @ W + b - y)**2), x of shape {(n, d_in)}", ["W", "b"], [weight, bias],
                    lambda w, b: ((x @ w + b - y) ** 2).mean(), lr, frozen=uniform(gen, (d_out,)))


def _step_cases(seed: int | None) -> list[StepCase]:
    if seed is None:
        lesson = StepCase("loss = (2w - 10)**2 (lesson 05's loop)", ["w"], [torch.tensor(0.5, dtype=torch.float64)],
                          lambda w: (2 * w - 10.0) ** 2, 0.01)
        return [lesson, _linear_case(torch.Generator().manual_seed(6), 4, 3, 2, 0.1)]
    gen = generator("06/sgd_step", seed)
    return [_linear_case(gen, choice(gen, [3, 4, 5]), choice(gen, [2, 3, 4]), choice(gen, [1, 2, 3]),
                         round(float(uniform(gen, (), 0.05, 0.3)), 3)) for _ in range(2)]


def _step_mistakes(before: Tensor, grad: Tensor, lr: float, p: Tensor) -> list[Misconception]:
    return [
        Misconception("gradient reset before the update", "You cleared .grad first and then stepped by a zero "
                      "gradient. Update with the gradient, then reset it.",
                      legacy_when=lambda got: _grad_is_reset(p) and torch.equal(got, before)),
        Misconception("rebinding (w = w - lr * w.grad)", "`p = p - lr * p.grad` builds a new tensor and binds it to "
                      "a local name: the caller's parameter never changes. Update in place: "
                      "`with torch.no_grad(): p -= lr * p.grad`.", value=before),
        Misconception("moved uphill", "Gradient descent subtracts lr * grad.", value=before + lr * grad),
        Misconception("learning rate ignored", "Scale the gradient by lr.", value=before - grad),
    ]


def _expect_parameters(params: list[Tensor], originals: list[Tensor], names: list[str], what: str) -> None:
    """The caller's list still holds the same leaf tensors, each still requiring grad."""
    __tracebackhide__ = True
    for name, held, original in zip(names, params, originals):
        if held is not original:
            raise GradingFailure(
                f"{what}: params now holds a different {type(held).__name__} for {name}. The model still "
                f"uses the old one.\nLikely misconception: w stops being a leaf. `params[i] = p - lr * p.grad` "
                "replaces the parameter by the output of a subtraction; update the same tensor in place instead.")
        if not (original.is_leaf and original.requires_grad):
            raise GradingFailure(f"{what}: afterwards {name} has is_leaf={original.is_leaf}, requires_grad="
                                 f"{original.requires_grad}; a parameter must stay a leaf that requires grad.")


def _step_and_compare(sgd_step, case: StepCase, params: list[Tensor], names: list[str], used: list[Tensor],
                      point: list[Tensor], what: str) -> list[Tensor]:
    """Run one learner step from ``point`` (the current values) and compare with both oracles; return new values."""
    __tracebackhide__ = True
    grads = autograd_gradient(case.loss, *point)
    fd_grads = central_difference(case.loss, *point)
    arg = list(params)
    _call(sgd_step, arg, case.lr, what=what, errors=STEP_ERRORS)
    _expect_parameters(arg, params, names, what)
    for name, p, before, grad, fd in zip(case.names, used, point, grads, fd_grads):
        expect_close(p.detach(), before - case.lr * grad, what=f"{what}: new {name}", fd=before - case.lr * fd,
                     misconceptions=_step_mistakes(before, grad, case.lr, p),
                     extra=f"  {name} before the step: {fmt(before)}; its gradient: {fmt(grad)}")
    return [p.detach().clone() for p in used]


def _expect_reset(case: StepCase, used: list[Tensor], what: str) -> None:
    __tracebackhide__ = True
    for name, p in zip(case.names, used):
        if not _grad_is_reset(p):
            raise GradingFailure(
                f"{what}: afterwards {name}.grad still holds {fmt(p.grad)}.\nLikely misconception: gradient not "
                "reset. backward() adds into .grad, so the next step would use the sum of both gradients. Set "
                "p.grad = None (or p.grad.zero_()) after the update.")


def _run_sgd_step(sgd_step, case: StepCase) -> None:
    __tracebackhide__ = True
    used = [t.clone().requires_grad_(True) for t in case.start]
    frozen = [case.frozen.clone().requires_grad_(True)] if case.frozen is not None else []
    params = used[:1] + frozen + used[1:]  # a parameter without gradient in the middle of the list
    names = case.names[:1] + ["frozen"] * len(frozen) + case.names[1:]
    what = f"sgd_step(params={_describe(names, params)}, lr={case.lr:g}) after backward of {case.description}"
    case.loss(*used).backward()
    point = _step_and_compare(sgd_step, case, params, names, used, [t.clone() for t in case.start], what)
    for f in frozen:
        if not (_grad_is_reset(f) and torch.equal(f.detach(), case.frozen)):
            raise GradingFailure(f"{what}: the parameter whose .grad was None changed (to {fmt(f)}, .grad "
                                 f"{fmt(f.grad) if f.grad is not None else None}); leave it alone.")
    _expect_reset(case, used, what)
    # The next iteration of a training loop must work on the same parameters.
    what_next = f"a second sgd_step after a fresh forward and backward ({case.description})"
    _call(lambda: case.loss(*used).backward(), what="After your sgd_step, the next forward/backward", errors={})
    _step_and_compare(sgd_step, case, params, names, used, point, what_next)


def check_sgd_step(sgd_step, seed: int | None = None) -> None:
    """Part A: sgd_step(params, lr) updates every parameter with a gradient in place and resets its gradient."""
    __tracebackhide__ = True
    for case in _step_cases(seed):
        _run_sgd_step(sgd_step, case)


# ---------------------------------------------------------------------------------------------------------------
# Part B: train_manually(params, loss_fn, lr, steps)

@dataclass
class Regression:
    x: Tensor
    y: Tensor
    start: tuple[Tensor, Tensor]
    lr: float
    steps: int

    def loss(self, w: Tensor, b: Tensor) -> Tensor:
        return ((self.x @ w + b - self.y) ** 2).mean()


def _regression(seed: int | None) -> Regression:
    if seed is None:
        gen = torch.Generator().manual_seed(6)
        n, d, lr, steps = 6, 2, 0.1, 5
    else:
        gen = generator("06/train_manually", seed)
        n, d = choice(gen, [5, 6, 7, 8]), choice(gen, [1, 2, 3])
        lr, steps = round(float(uniform(gen, (), 0.05, 0.15)), 3), choice(gen, [3, 4, 5])
    x = uniform(gen, (n, d), -1.0, 1.0)
    y = x @ uniform(gen, (d,), -2.0, 2.0) + 0.5 + 0.1 * uniform(gen, (n,))
    return Regression(x, y, (0.1 * uniform(gen, (d,)), 0.1 * uniform(gen, (1,))), lr, steps)


def _trajectory(problem: Regression, gradient: Callable, reset: bool = True) -> tuple[list[float], list[Tensor]]:
    """Losses before each step and the final parameters of plain gradient descent (or of a loop without reset)."""
    params = [t.clone() for t in problem.start]
    total = [torch.zeros_like(t) for t in params]
    losses = []
    for _ in range(problem.steps):
        losses.append(float(problem.loss(*params)))
        grads = gradient(problem.loss, *params)
        total = list(grads) if reset else [a + g for a, g in zip(total, grads)]
        params = [p - problem.lr * g for p, g in zip(params, total)]
    return losses, params


def _optimizer_trajectory(problem: Regression) -> tuple[list[float], list[Tensor]]:
    """The same loop driven by torch.optim's SGD: the reference the learner's loop must reproduce.

    It calls ``torch.optim.sgd.sgd``, the function ``torch.optim.SGD.step`` runs, because constructing the
    ``torch.optim.SGD`` object imports torch._dynamo: seconds on a busy machine, for the same arithmetic.
    """
    params = [t.clone().requires_grad_(True) for t in problem.start]
    losses = []
    for _ in range(problem.steps):
        loss = problem.loss(*params)
        grads = torch.autograd.grad(loss, params)
        with torch.no_grad():
            sgd(params, list(grads), [None] * len(params), weight_decay=0.0, momentum=0.0, lr=problem.lr,
                dampening=0.0, nesterov=False, maximize=False)
        losses.append(loss.item())
    return losses, [p.detach() for p in params]


def _read_losses(losses, steps: int, what: str) -> list[float]:
    """The learner's losses as floats: a list of ``steps`` Python numbers (one-element detached tensors pass too)."""
    __tracebackhide__ = True
    if type(losses) not in (list, tuple) or len(losses) != steps:
        size = f" of length {len(losses)}" if type(losses) in (list, tuple) else ""
        raise GradingFailure(f"{what} returned {type(losses).__name__}{size}; expected a list of {steps} losses, "
                             "one per step.")
    for value in losses:
        if _plain(value) and value.requires_grad:
            raise GradingFailure(
                f"{what} returned losses that are tensors attached to a graph "
                f"(grad_fn={type(value.grad_fn).__name__}).\nLikely misconception: kept the graph. Each stored loss "
                "tensor keeps its whole computation graph alive for as long as the list lives; store the number: "
                "losses.append(loss.item()).")
        if not (type(value) in (int, float) or (_plain(value) and value.numel() == 1)):
            raise GradingFailure(f"{what} returned a loss of type {type(value).__name__}; expected Python floats "
                                 "(loss.item()).")
    return [float(v) for v in losses]


def _loop_mistakes(problem: Regression, ref_losses: list[float], ref_params: list[Tensor]) -> dict[str, list]:
    """The known wrong loops, as the losses and final parameters each produces."""
    acc_losses, acc_params = _trajectory(problem, autograd_gradient, reset=False)
    accumulated = ("gradients accumulated across steps", "backward() adds into .grad; reset it after every update, "
                   "or each step uses the sum of all gradients so far.")
    rebound = ("the parameters never moved", "The loss stayed at its first value: your updates never reached the "
               "tensors loss_fn() uses. Typical causes: rebinding (`w = w - lr * w.grad` builds a new tensor) or "
               "clearing .grad before the update. Update in place under torch.no_grad(), then reset .grad.")
    after = ("loss recorded after the step", "Record each step's loss before updating, as an optimizer loop does "
             "(the loss that backward() differentiated).")
    unchanged = [float(problem.loss(*problem.start))] * problem.steps
    return {
        "losses": [Misconception(*rebound, value=unchanged), Misconception(*accumulated, value=acc_losses),
                   Misconception(*after, value=ref_losses[1:] + [float(problem.loss(*ref_params))])],
        **{name: [Misconception(*accumulated, value=acc), Misconception(*rebound, value=start)]
           for name, acc, start in zip("wb", acc_params, problem.start)},
    }


def check_train_manually(train_manually, seed: int | None = None) -> None:
    """Part B: train_manually(params, loss_fn, lr, steps) reproduces torch.optim.SGD's losses and final weights."""
    __tracebackhide__ = True
    problem = _regression(seed)
    w, b = (t.clone().requires_grad_(True) for t in problem.start)
    what = (f"train_manually([w, b], loss_fn, lr={problem.lr:g}, steps={problem.steps}) for loss_fn() = "
            f"mean((x @ w + b - y)**2), x of shape {tuple(problem.x.shape)}, starting at w = {fmt(w)}, b = {fmt(b)}")
    returned = _call(train_manually, [w, b], lambda: problem.loss(w, b), problem.lr, problem.steps, what=what,
                     errors=LOOP_ERRORS)
    losses = torch.tensor(_read_losses(returned, problem.steps, what), dtype=torch.float64)
    ref_losses, ref_params = _optimizer_trajectory(problem)
    fd_losses, fd_params = _trajectory(problem, central_difference)
    mistakes = _loop_mistakes(problem, ref_losses, ref_params)
    expect_close(losses, ref_losses, what=f"{what}: the returned list of losses", fd=fd_losses,
                 source="torch.optim.SGD", misconceptions=mistakes["losses"])
    _expect_parameters([w, b], [w, b], ["w", "b"], what)
    for name, got, ref, fd in zip("wb", (w, b), ref_params, fd_params):
        expect_close(got.detach(), ref, what=f"{what}: the final {name}", fd=fd, source="torch.optim.SGD",
                     misconceptions=mistakes[name])


# ---------------------------------------------------------------------------------------------------------------
# Part C: raises / silently wrong / fine, measured by running each snippet

@dataclass(frozen=True)
class Snippet:
    """A few lines of code; ``kind`` says what the code is meant to do and so how its verdict is measured.

    * "gradient": ``x`` is a leaf (float64, requires grad); the code computes ``loss`` and then ``loss.backward()``
      runs. Fine means x.grad equals the central finite difference of the same code.
    * "update": ``w`` is a model's parameter (a leaf), ``loss_of(w)`` a scalar loss, ``lr`` and ``steps`` numbers;
      the code means to do gradient descent on ``w`` (``steps`` times if it loops, else once). Fine means the
      parameter that was passed in holds what plain gradient descent gives.
    """

    id: str
    group: str
    kind: str
    source: str


def _bank(*entries: tuple[str, str, str]) -> list[Snippet]:
    return [Snippet(f"S{number:02d}", group, kind, source) for number, (group, kind, source) in
            enumerate(entries, start=1)]


SNIPPETS = _bank(
    ("saved", "gradient", "y = x.exp()\ny.mul_(2)\nloss = y.sum()"),
    ("harmless", "gradient", "y = x * 2\ny += 1\nloss = (y ** 2).sum()"),
    ("data_intermediate", "gradient", "y = torch.sigmoid(x)\ny.data.mul_(2)\nloss = y.sum()"),
    ("no_grad_update", "update", "for _ in range(steps):\n    loss_of(w).backward()\n    with torch.no_grad():\n"
                                 "        w -= lr * w.grad\n    w.grad = None"),
    ("leaf", "gradient", "x[0] = 5.0\nloss = (x ** 2).sum()"),
    ("detach_write", "gradient", "y = torch.sigmoid(x)\ny.detach().mul_(2)\nloss = y.sum()"),
    ("rebind_once", "update", "loss_of(w).backward()\nwith torch.no_grad():\n    w = w - lr * w.grad"),
    ("clone", "gradient", "y = torch.sigmoid(x)\nz = y.clone()\nz.mul_(2)\nloss = (y * z).sum()"),
    ("no_reset", "update", "for _ in range(steps):\n    loss_of(w).backward()\n    with torch.no_grad():\n"
                           "        w -= lr * w.grad"),
    ("data_update", "update", "for _ in range(steps):\n    loss_of(w).backward()\n    w.data -= lr * w.grad\n"
                              "    w.grad = None"),
    ("leaf", "update", "loss_of(w).backward()\nw -= lr * w.grad"),
    ("saved", "gradient", "y = torch.tanh(x)\ny += 1\nloss = y.sum()"),
    ("rebind_loop", "update", "for _ in range(steps):\n    loss_of(w).backward()\n    w = w - lr * w.grad"),
    ("harmless", "gradient", "y = x + 1\ny.mul_(3)\nloss = (y * x).sum()"),
    ("data_intermediate", "gradient", "y = x.exp()\ny.data /= y.data.sum()\nloss = -y[0].log()"),
    ("clone", "gradient", "y = x.exp()\nz = y.clone()\nz[0] = 0.0\nloss = (y + z).sum()"),
    ("no_grad_update", "update", "for _ in range(steps):\n    loss_of(w).backward()\n    with torch.no_grad():\n"
                                 "        w.sub_(lr * w.grad)\n        w.grad.zero_()"),
    ("detach_write", "gradient", "y = x.exp()\nz = y.detach()\nz += 1\nloss = (y * 2).sum()"),
)

#: What a wrong verdict on a snippet of each group most likely means.
GROUP_MISTAKES = {
    "leaf": Misconception(
        "a write into a leaf goes through", "Outside torch.no_grad(), an in-place write into a leaf that requires "
        "grad is refused on the spot: RuntimeError 'a leaf Variable that requires grad is being used in an "
        "in-place operation'."),
    "saved": Misconception(
        "overwriting a tensor that backward saved", "exp and tanh keep their output for backward; an in-place edit "
        "bumps its version counter, and backward() raises 'modified by an inplace operation'."),
    "harmless": Misconception(
        "every in-place operation is an error", "An in-place edit only matters when it overwrites a leaf or a tensor "
        "that a backward node saved. Adding or multiplying by a constant saves nothing, so editing y = x * 2 or "
        "x + 1 in place is fine."),
    "data_intermediate": Misconception(
        ".data makes an in-place edit safe", "Writes through .data skip the version counter: no error, but backward "
        "multiplies by the overwritten values. The gradient is wrong and only a finite-difference check shows it."),
    "detach_write": Misconception(
        "detach() gives an independent copy", "detach() shares memory and the version counter with the original: "
        "writing into it changes the saved tensor, and backward raises. Use clone() for a copy you may modify."),
    "clone": Misconception(
        "writing into a clone spoils the original", "clone() copies the memory: editing the copy leaves the original "
        "and everything backward saved from it alone, and gradients still flow through the clone."),
    "no_grad_update": Misconception(
        "an in-place update inside no_grad is an error", "Inside torch.no_grad() nothing is recorded, so the leaf "
        "guard allows the write; w stays the same leaf and, with .grad reset each step, this is exactly SGD."),
    "data_update": Misconception(
        "a weight update through .data gives wrong numbers", "For a plain step, w.data -= lr * w.grad writes the "
        "same memory as a no_grad update, so the numbers are right. Its danger is elsewhere: it hides the write "
        "from the version counter, so a graph that saved w would silently use the new value."),
    "rebind_once": Misconception(
        "w = w - lr * w.grad updates the parameter", "It builds a new tensor and binds the name w to it; the "
        "parameter that was passed in never changes, and nothing tells you."),
    "rebind_loop": Misconception(
        "rebinding w works step after step", "After w = w - lr * w.grad, w is no longer a leaf: the next backward "
        "leaves w.grad as None, and lr * None raises TypeError."),
    "no_reset": Misconception(
        "backward() overwrites .grad", "backward() adds into .grad. Without a reset, the second step uses the sum "
        "of both gradients: no error, wrong weights."),
}


@dataclass(frozen=True)
class SnippetInputs:
    x: Tensor        # for "gradient" snippets
    w: Tensor        # for "update" snippets: start value, and loss_of(w) = sum((w * a - b)**2)
    a: Tensor
    b: Tensor
    lr: float
    steps: int

    def describe(self, kind: str) -> str:
        if kind == "gradient":
            return f"x = {fmt(self.x)}"
        return f"w = {fmt(self.w)}, loss_of(w) = sum((w * {fmt(self.a)} - {fmt(self.b)})**2), lr = {self.lr:g}, " \
               f"steps = {self.steps}"


def _run_source(source: str, namespace: dict) -> dict:
    with warnings.catch_warnings():  # e.g. reading .grad of a non-leaf: part of what a snippet does, not news
        warnings.simplefilter("ignore")
        exec(compile(source, "<snippet>", "exec"), namespace)
    return namespace


def _first_line(error: Exception) -> str:
    message = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {message if len(message) <= 220 else message[:217] + '...'}"


def measure(snippet: Snippet, inputs: SnippetInputs) -> tuple[str, str]:
    """Run a snippet on the installed PyTorch: its verdict and the evidence for it."""
    if snippet.kind == "gradient":
        x = inputs.x.clone().requires_grad_(True)
        try:
            _run_source(snippet.source, {"torch": torch, "x": x})["loss"].backward()
        except Exception as error:  # noqa: BLE001 - any exception is the verdict "raises"
            return "raises", _first_line(error)
        (fd,) = central_difference(lambda v: _run_source(snippet.source, {"torch": torch, "x": v.clone()})["loss"],
                                   inputs.x)
        got, truth = x.grad, fd
        evidence = f"x.grad = {fmt(got)}, finite differences of the same code = {fmt(fd)}"
    else:
        w = inputs.w.clone().requires_grad_(True)

        def loss_of(v):
            return ((v * inputs.a - inputs.b) ** 2).sum()

        try:
            _run_source(snippet.source, {"torch": torch, "w": w, "loss_of": loss_of, "lr": inputs.lr,
                                         "steps": inputs.steps})
        except Exception as error:  # noqa: BLE001
            return "raises", _first_line(error)
        truth = inputs.w.clone()
        for _ in range(inputs.steps if "range(steps)" in snippet.source else 1):
            (grad,) = central_difference(loss_of, truth)
            truth = truth - inputs.lr * grad
        got = w.detach()
        evidence = f"the parameter passed in now holds {fmt(got)}; gradient descent gives {fmt(truth)}"
    fine = bool(torch.allclose(got.to(torch.float64), truth, rtol=1e-6, atol=1e-8))
    return ("fine" if fine else "silently wrong"), evidence


def _snippet_inputs(gen: torch.Generator | None) -> SnippetInputs:
    if gen is None:
        three = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64)
        return SnippetInputs(three, three.flip(0), torch.tensor([1.0, 2.0, -0.5], dtype=torch.float64),
                             torch.tensor([0.3, 1.0, 0.2], dtype=torch.float64), 0.1, 2)
    n = choice(gen, [3, 4, 5])
    return SnippetInputs(uniform(gen, (n,), -1.5, 1.5), uniform(gen, (n,)), uniform(gen, (n,), 0.5, 1.5),
                         uniform(gen, (n,)), round(float(uniform(gen, (), 0.05, 0.2)), 3), choice(gen, [2, 3]))


def _drawn_snippets(seed: int | None) -> list[tuple[Snippet, SnippetInputs]]:
    """Visible: the first snippet of every group. Hidden: a random snippet of every group, on random inputs."""
    groups: dict[str, list[Snippet]] = {}
    for snippet in SNIPPETS:
        groups.setdefault(snippet.group, []).append(snippet)
    if seed is None:
        return [(members[0], _snippet_inputs(None)) for members in groups.values()]
    gen = generator("06/classify_snippets", seed)
    drawn = [(choice(gen, members), _snippet_inputs(gen)) for members in groups.values()]
    return sorted(drawn, key=lambda pair: pair[0].id)


def _normalise(verdict) -> str | None:
    if type(verdict) is not str:
        return None
    verdict = " ".join(verdict.strip().lower().replace("_", " ").replace("-", " ").split())
    return verdict if verdict in VERDICTS else None


def _read_verdicts(answer, what: str) -> dict[str, str]:
    __tracebackhide__ = True
    if type(answer) is not dict:
        raise GradingFailure(f"{what} returned {type(answer).__name__}; expected a dict such as "
                             "{'S01': 'raises', 'S02': 'fine', ...}.")
    missing = [s.id for s in SNIPPETS if s.id not in answer]
    if missing:
        raise GradingFailure(f"{what} has no verdict for {', '.join(missing)}: give one for every snippet.")
    verdicts = {s.id: _normalise(answer[s.id]) for s in SNIPPETS}
    invalid = [f"{i}: {answer[i]!r:.40}" if type(answer[i]) is str else f"{i}: {type(answer[i]).__name__}"
               for i, v in verdicts.items() if v is None]
    if invalid:
        raise GradingFailure(f"{what}: each verdict must be one of {', '.join(map(repr, VERDICTS))}; "
                             f"got {'; '.join(invalid)}.")
    return verdicts


def check_classify_snippets(classify_snippets, seed: int | None = None) -> None:
    """Part C: classify_snippets() returns {snippet id: verdict}; each drawn snippet is run to find the truth."""
    __tracebackhide__ = True
    what = "classify_snippets()"
    verdicts = _read_verdicts(call_learner(classify_snippets, what=what), what)
    drawn = _drawn_snippets(seed)
    wrong = []
    for snippet, inputs in drawn:
        truth, evidence = measure(snippet, inputs)
        if verdicts[snippet.id] != truth:
            mistake = GROUP_MISTAKES[snippet.group]
            code = "\n".join("      " + line for line in snippet.source.splitlines())
            wrong.append(f"{snippet.id} ({snippet.kind} snippet, run with {inputs.describe(snippet.kind)}):\n{code}\n"
                         f"    you said {verdicts[snippet.id]!r}; running it: {truth!r} ({evidence}).\n"
                         f"    Likely misconception: {mistake.name}. {mistake.hint}")
    if wrong:
        verb = "has" if len(wrong) == 1 else "have"
        raise GradingFailure(f"{what}: {len(wrong)} of the {len(drawn)} snippets checked {verb} the wrong verdict.\n\n"
                             + "\n\n".join(wrong))


def show_snippets() -> None:
    """Display the bank of snippets (what is in scope for each kind, then every snippet's code)."""
    from IPython.display import Markdown, display

    lines = []
    for snippet in SNIPPETS:
        lines += [f"**{snippet.id}** — *{snippet.kind}*", "", "```python", snippet.source, "```", ""]
    display(Markdown("\n".join(lines)))
