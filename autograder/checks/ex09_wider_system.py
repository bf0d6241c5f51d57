"""Checks for exercise 09: name the failure mode behind a training trace, the review numbers, multiple choice.

Each ``check_*`` function is one test cell's whole body. Without ``seed`` it runs the public cases a learner sees;
the hidden test cells pass ``seed=grading_seed()`` and get fresh random cases.

The traces are real: :func:`training_trace` trains a tiny seeded model with the named bug (or none) and records
what a careful training loop would log. Their fields are documented in the exercise notebook and in
:func:`training_trace`.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from ..checking import GradingFailure, Misconception, as_answer, call_learner, expect_close, fmt
from ..oracles import autograd_gradient, central_difference
from ..seeding import choice, generator, uniform
from . import ex01_chain_rule as chain_rule
from .cases import randint

LABELS = ("missing zero_grad", "vanishing gradients", "exploding gradients", "broadcasting bug",
          "in-place on a leaf", "healthy")

# ---------------------------------------------------------------------------------------------------- traces


@dataclass(frozen=True)
class Run:
    """One training run: the network, the data and the loop settings, all drawn from a generator."""

    widths: list[int]
    activation: type[nn.Module] | None
    gain: float  # weights ~ N(0, gain² / fan_in); biases 0
    last_gain: float  # the same for the last layer
    offset: float  # the targets' mean
    lr: float
    steps: int
    samples: int


def _between(gen: torch.Generator, low: float, high: float) -> float:
    return float(uniform(gen, (), low, high))


def _run_for(mode: str, gen: torch.Generator) -> Run:
    """Sizes and settings that make ``mode``'s signature unmistakable, whatever the draw."""
    d = randint(gen, 2, 4)
    if mode == "vanishing gradients":  # 12-16 tanh layers with small weights: each layer shrinks the gradient
        width = randint(gen, 6, 12)
        return Run([d] + [width] * randint(gen, 12, 16) + [1], nn.Tanh, _between(gen, 0.25, 0.4),
                   _between(gen, 0.25, 0.4), 0.0, _between(gen, 0.05, 0.2), 12, randint(gen, 64, 128))
    if mode == "exploding gradients":  # 10-14 linear layers with large weights: each layer multiplies it
        width, gain = randint(gen, 6, 12), _between(gen, 3.0, 4.0)
        return Run([d] + [width] * randint(gen, 10, 14) + [1], None, gain, gain, 0.0,
                   _between(gen, 0.01, 0.05), 10, randint(gen, 64, 128))
    # The other modes share one small, well-conditioned regression: d inputs -> width tanh units -> 1 output.
    width = randint(gen, 4, 8)
    lr = _between(gen, 0.05, 0.15) if mode == "missing zero_grad" else _between(gen, 0.5, 1.0) / (width + 2)
    return Run([d, width, 1], nn.Tanh, 1.0, 0.1, _between(gen, 3.0, 5.0) * choice(gen, [-1.0, 1.0]), lr, 60,
               randint(gen, 64, 128))


def _network(run: Run, gen: torch.Generator) -> nn.Sequential:
    layers: list[nn.Module] = []
    last = len(run.widths) - 2
    for k, (n_in, n_out) in enumerate(zip(run.widths, run.widths[1:])):
        layer = nn.Linear(n_in, n_out, dtype=torch.float64)
        with torch.no_grad():
            gain = run.last_gain if k == last else run.gain
            layer.weight.copy_(torch.randn(n_out, n_in, generator=gen, dtype=torch.float64) * gain / math.sqrt(n_in))
            layer.bias.zero_()
        layers.append(layer)
        if run.activation is not None and k < last:
            layers.append(run.activation())
    return nn.Sequential(*layers)


def _regression(run: Run, gen: torch.Generator):
    """Training and held-out data for y = x·w + offset + noise, with targets shaped (n, 1)."""
    d = run.widths[0]
    w = torch.randn(d, 1, generator=gen, dtype=torch.float64)
    w = w / w.norm() * _between(gen, 1.0, 2.0)
    x = torch.randn(2 * run.samples, d, generator=gen, dtype=torch.float64)
    y = x @ w + run.offset + 0.05 * torch.randn(2 * run.samples, 1, generator=gen, dtype=torch.float64)
    return x[:run.samples], y[:run.samples], x[run.samples:], y[run.samples:]


def _output_gradient_norms(model: nn.Sequential) -> tuple[list[float], list]:
    """Hooks that record ‖∂loss/∂(output of each Linear)‖ during the next backward (exercise 07, Part C)."""
    linears = [m for m in model if isinstance(m, nn.Linear)]
    norms = [math.nan] * len(linears)

    def record_at(index):
        def forward_hook(module, inputs, output):  # returns None: the output itself is left alone
            output.register_hook(lambda grad: norms.__setitem__(index, grad.norm().item()))
        return forward_hook

    return norms, [layer.register_forward_hook(record_at(k)) for k, layer in enumerate(linears)]


@contextlib.contextmanager
def _one_thread():
    """Tiny tensors: a second thread only adds synchronisation (and on a busy machine, a lot of it)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def training_trace(mode: str, seed: torch.Generator | int = 0) -> dict:
    """Train a tiny model with the bug ``mode`` (one of :data:`LABELS`) and return what the loop logged.

    ``seed`` is an integer, or a torch.Generator to draw the run's sizes, settings, weights and data from.

    Fields: ``loss`` (training loss per step, as the training code computed it), ``grad_norm`` (global L2 norm of all
    parameters' ``.grad`` when the update was applied), ``val_loss`` (held-out mean squared error per step, computed
    separately with matching shapes), ``baseline_loss`` (the held-out error of always predicting the mean training
    target), ``layer_grad_norms`` (‖∂loss/∂(output of each Linear)‖ at the first step, first layer to last) and
    ``raised`` (``None``, or ``"ExceptionType: message"`` if training stopped with an exception).
    """
    if mode not in LABELS:
        raise ValueError(f"unknown mode {mode!r}; one of {LABELS}")
    if isinstance(seed, int):
        return copy.deepcopy(_seeded_trace(mode, seed))
    with _one_thread():
        return _train(mode, _run_for(mode, seed), seed)


@functools.lru_cache(maxsize=64)
def _seeded_trace(mode: str, seed: int) -> dict:
    """Runs from an integer seed are deterministic: train each once (the notebook and the public test reuse them)."""
    return training_trace(mode, torch.Generator().manual_seed(seed))


def _train(mode: str, run: Run, gen: torch.Generator) -> dict:
    model = _network(run, gen)
    x, y, x_val, y_val = _regression(run, gen)
    if mode == "broadcasting bug":
        y = y.reshape(-1)  # targets (n,) against predictions (n, 1): (prediction - y) broadcasts to (n, n)
    params = list(model.parameters())
    norms, hooks = _output_gradient_norms(model)
    trace = {"loss": [], "grad_norm": [], "val_loss": [], "layer_grad_norms": norms,
             "baseline_loss": F.mse_loss(torch.full_like(y_val, y.mean().item()), y_val).item(), "raised": None}
    for _ in range(run.steps):
        if mode != "missing zero_grad":
            for p in params:
                p.grad = None
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        for hook in hooks:  # the per-layer norms are recorded at the first step only
            hook.remove()
        hooks = []
        trace["loss"].append(loss.item())
        trace["grad_norm"].append(torch.sqrt(sum((p.grad ** 2).sum() for p in params)).item())
        with torch.no_grad():
            trace["val_loss"].append(F.mse_loss(model(x_val), y_val).item())
        try:
            _sgd_step(params, run.lr, careless=mode == "in-place on a leaf")
        except RuntimeError as error:
            trace["raised"] = f"{type(error).__name__}: {error}"
            break
    return trace


def _sgd_step(params: list[torch.Tensor], lr: float, careless: bool) -> None:
    """p -= lr·grad for every parameter; the careless version forgets torch.no_grad() (and so raises)."""
    with contextlib.nullcontext() if careless else torch.no_grad():
        for p in params:
            p -= lr * p.grad


def _summary(trace: dict) -> str:
    """The facts a learner needs to see why a trace has its label, on a few lines."""
    loss, grad, layers = trace["loss"], trace["grad_norm"], trace["layer_grad_norms"]
    best = min(range(len(loss)), key=lambda t: loss[t] if math.isfinite(loss[t]) else math.inf)
    ratio = layers[0] / layers[-1] if layers[-1] else math.nan
    return "\n".join([
        f"  steps logged:       {len(loss)}; raised: {trace['raised']}",
        f"  loss:               {fmt(loss[0])} at the start, best {fmt(loss[best])} (step {best}), "
        f"{fmt(loss[-1])} at the end",
        f"  grad_norm:          {fmt(grad[0])} at the start, {fmt(grad[-1])} at the end",
        f"  val_loss:           {fmt(trace['val_loss'][-1])} at the end; baseline_loss {fmt(trace['baseline_loss'])}",
        f"  layer_grad_norms:   first {fmt(layers[0])}, last {fmt(layers[-1])} (first / last = {fmt(ratio)})"])


# (true label, your label) -> (name of the mistake, what to look at instead)
LABEL_MISTAKES = {
    ("vanishing gradients", "exploding gradients"): (
        "vanishing and exploding swapped", "layer_grad_norms runs from the FIRST layer (input side) to the LAST. "
        "Here the first layer's gradient is orders of magnitude SMALLER than the last one's: it shrank on its way "
        "back, which is vanishing."),
    ("exploding gradients", "vanishing gradients"): (
        "vanishing and exploding swapped", "layer_grad_norms runs from the FIRST layer (input side) to the LAST. "
        "Here the first layer's gradient is orders of magnitude LARGER than the last one's (and the loss turns "
        "inf/nan): it grew on its way back, which is exploding."),
    ("missing zero_grad", "exploding gradients"): (
        "a missing zero_grad called 'exploding'", "The loss bounces back up, but everything stays finite and the "
        "per-layer norms are ordinary: nothing is multiplied through depth. The step grows because .grad keeps "
        "the SUM of all earlier gradients — accumulation, not explosion."),
    ("broadcasting bug", "healthy"): (
        "trusted the falling training loss", "The training loss falls smoothly, but val_loss ends near "
        "baseline_loss: the model learned no more than the mean of the targets. It optimised a different loss "
        "than intended — (n, 1) predictions minus (n,) targets broadcast to an (n, n) matrix."),
    ("vanishing gradients", "broadcasting bug"): (
        "stopped at the loss", "Both runs end at the baseline, but here layer_grad_norms shows the first layer "
        "receiving almost no gradient: look at the per-layer profile before blaming the loss."),
    ("broadcasting bug", "vanishing gradients"): (
        "stopped at the loss", "Both runs end at the baseline, but here the per-layer gradient norms are all of "
        "ordinary size: nothing vanished. The loss itself is wrong."),
}


def _label_hint(expected: str, got: str) -> str:
    if (expected, got) in LABEL_MISTAKES:
        name, hint = LABEL_MISTAKES[expected, got]
        return f"\nLikely misconception: {name}. {hint}"
    if expected == "in-place on a leaf":
        return "\nThe loudest symptom of all: training stopped with an exception. Read trace['raised'] first."
    if expected == "healthy":
        return "\nNothing went wrong in this run: check which of your rules fired, and whether its threshold is loose."
    return ""


def check_diagnose(diagnose, seed: int | None = None) -> None:
    """Part A: diagnose(trace) names the failure mode of a real training trace (one of LABELS)."""
    __tracebackhide__ = True
    if seed is None:
        runs = [(mode, 900 + number) for number, mode in enumerate(LABELS)]
    else:
        gen = generator("09/diagnose", seed)
        runs = [(LABELS[i], gen) for i in torch.randperm(len(LABELS), generator=gen).tolist()]
    for number, (mode, source) in enumerate(runs, start=1):
        trace = training_trace(mode, source)
        what = f"diagnose(trace) for trace {number} of {len(runs)}"
        label = call_learner(diagnose, copy.deepcopy(trace), what=what)
        if not isinstance(label, str) or label.strip() not in LABELS:
            raise GradingFailure(f"{what} returned {label!r:.80}; expected one of the labels {LABELS}.")
        if label.strip() != mode:
            raise GradingFailure(f"{what} returned {label.strip()!r}, but this run was trained with: {mode!r}.\n"
                                 f"{_summary(trace)}{_label_hint(mode, label.strip())}")


# ---------------------------------------------------------------------------------------------------- Part B


def check_chain_rule_example(chain_rule_example, seed: int | None = None) -> None:
    """Part B1: the review's chain-rule numbers, exactly as exercise 01 checks them (y = 3x + 1, z = y²)."""
    __tracebackhide__ = True
    chain_rule.check_chain_rule_example(chain_rule_example, seed=seed)


def _pair(value, *, what: str, names: str) -> tuple:
    __tracebackhide__ = True
    if not isinstance(value, (tuple, list)) or len(value) != len(names.split(", ")):
        raise GradingFailure(f"{what} returned {value!r:.80}; expected a tuple ({names}).")
    return tuple(as_answer(v, what=what, shape=()) for v in value)


def check_residual_gradient(residual_gradient, seed: int | None = None) -> None:
    """Part B2: residual_gradient(upstream, branch_derivative) = (identity route's share of dL/dx, dL/dx)."""
    __tracebackhide__ = True
    if seed is None:
        cases = [(1.5, 0.2), (2.0, -0.5)]
    else:
        gen = generator("09/residual_gradient", seed)
        # |F'| <= 0.8 keeps 1 + F' away from 0, where "averaged the routes" would coincide with the answer.
        cases = [(round(_between(gen, 0.5, 3.0) * choice(gen, [-1.0, 1.0]), 3),
                  round(_between(gen, 0.1, 0.8) * choice(gen, [-1.0, 1.0]), 3)) for _ in range(3)]
    for g, slope in cases:
        what = f"residual_gradient(upstream={g:g}, branch_derivative={slope:g})"
        identity, total = _pair(call_learner(residual_gradient, g, slope, what=what), what=what,
                                names="identity_part, total")
        loss = lambda x, g=g, slope=slope: g * (x + slope * x)  # noqa: E731 - L = g·y with y = x + F(x), F'(x) = slope
        expect_close(identity, g, what=f"{what}: the identity route's share", source="expected", rtol=1e-9,
                     atol=1e-12, misconceptions=[
            Misconception("identity route scaled by F′", "The identity route y = x has derivative 1: it passes "
                          "the upstream gradient on unchanged.", value=g * slope),
            Misconception("returned the total", "The first value is the identity route's share alone.",
                          value=g * (1 + slope))])
        expect_close(total, autograd_gradient(loss, 0.7)[0], what=f"{what}: dL/dx", fd=central_difference(loss, 0.7)[0],
                     rtol=1e-9, atol=1e-12, misconceptions=[
            Misconception("residual derivative F′ instead of 1 + F′", "dL/dx = upstream·(1 + F′): the identity "
                          "route adds the upstream gradient itself.", value=g * slope),
            Misconception("averaged the routes", "Gradients arriving by two routes add up; they are never "
                          "averaged: upstream·1 + upstream·F′.", value=g * (1 + slope) / 2),
            Misconception("added 1 instead of the upstream gradient", "The identity route contributes upstream·1, "
                          "not 1.", value=1 + g * slope)])


def check_gradient_cost(gradient_cost, seed: int | None = None) -> None:
    """Part B3: gradient_cost(n) = (central-difference passes, forward-difference passes, backward passes)."""
    __tracebackhide__ = True
    gen = generator("09/gradient_cost", seed) if seed is not None else None
    sizes = [1, 1000] if gen is None else [randint(gen, 2, 10**6) for _ in range(2)]
    for n in sizes:
        what = f"gradient_cost({n})"
        central, forward, backward = _pair(call_learner(gradient_cost, n, what=what), what=what,
                                           names="central, forward, backward")
        expect_close(central, 2 * n, what=f"{what}: forward passes for central differences", source="expected",
                     rtol=0.0, atol=0.0, misconceptions=[
            Misconception("one pass per input", "Central differences evaluate f twice per input, at x + h and at "
                          "x - h.", value=n),
            Misconception("forward-difference count", "n + 1 is the forward difference (f(x) once, then "
                          "f(x + h) per input); the central one needs 2n.", value=n + 1)])
        expect_close(forward, n + 1, what=f"{what}: forward passes for forward differences", source="expected",
                     rtol=0.0, atol=0.0, misconceptions=[
            Misconception("forgot the shared f(x)", "f(x) is evaluated once and reused: n + 1.", value=n)])
        expect_close(backward, 1, what=f"{what}: backward passes for reverse-mode autodiff", source="expected",
                     rtol=0.0, atol=0.0, misconceptions=[
            Misconception("one backward pass per parameter", "One backward pass of a scalar loss yields the "
                          "partial derivatives for ALL inputs at once: that is why training uses reverse mode.",
                          value=n)])


# ---------------------------------------------------------------------------------------------------- Part C


@dataclass(frozen=True)
class Question:
    """A multiple-choice item: the prompt, the correct option, and each distractor with the mistake it reveals."""

    prompt: str
    correct: str
    distractors: tuple[tuple[str, str, str], ...]  # (option text, name of the mistake, why it is wrong)
    position: int  # where the correct option sits in the notebook's order (0 = a)

    def options(self) -> list[str]:
        texts = [text for text, _, _ in self.distractors]
        texts.insert(self.position, self.correct)
        return texts


QUESTIONS = {
    "autograd_mechanism": Question(
        "How does PyTorch's autograd compute the gradient of a loss?",
        "It records the forward pass into a graph and applies each operation's local backward rule, from the loss "
        "back.",
        (("It nudges each parameter by a tiny step, re-runs the model and divides the change in the loss by the "
          "step.", "finite differences", "That is a finite difference — our oracle, not autograd: 2n forward passes "
          "for n parameters, and only approximate."),
         ("It derives one symbolic formula for the derivative of the whole model, simplifies it, then evaluates it.",
          "symbolic formula", "Autograd never builds a formula for the whole model; it only needs each primitive "
          "operation's local rule, applied along the recorded graph."),
         ("It computes the exact gradient of the last layer and adjusts the earlier layers in proportion to it.",
          "only the last layer", "The chain rule carries the gradient through every layer back to every "
          "parameter — exercise 07 measured it layer by layer.")),
        position=1),
    "what_backward_populates": Question(
        "What does loss.backward() leave behind?",
        "It adds the gradient of the loss into .grad of every leaf tensor that requires grad, such as the "
        "parameters.",
        (("It stores a .grad on every tensor of the graph, intermediate results included, and frees the graph.",
          "intermediates keep .grad", "Only leaves keep their .grad; an intermediate tensor keeps it only if you "
          "call retain_grad() on it."),
         ("It leaves the tensors alone and returns the gradients as a list, one entry per parameter of the model.",
          "backward returns the gradients", "backward() returns None; the gradients are stored in the leaves' "
          ".grad (torch.autograd.grad is the function that returns them)."),
         ("It subtracts the gradients from the parameters, so the weights are already updated when it returns.",
          "backward updates the weights", "backward() only computes gradients; the optimizer's step() (or your "
          "own update under no_grad) changes the weights.")),
        position=0),
    "why_zero_grad": Question(
        "Why does a training loop reset the gradients (optimizer.zero_grad()) once per step?",
        "Because backward adds into .grad instead of overwriting it, so steps would use the sum of old gradients.",
        (("To free the graph of the previous step, which would otherwise be kept and recorded a second time.",
          "zero_grad frees the graph", "The graph is freed by backward() itself; zero_grad only touches .grad."),
         ("Because backward() raises an error when a tensor's .grad already holds a value from the last step.",
          "backward refuses a filled .grad", "It raises nothing — it silently adds, which is exactly why forgetting "
          "the reset is dangerous."),
         ("To set the weights back to zero so that every batch starts training from the same initial point.",
          "zero_grad resets the weights", "zero_grad clears the gradients (sets .grad to None), never the "
          "weights.")),
        position=3),
    "autodiff_vs_finite_differences": Question(
        "Why is a network trained with reverse-mode autodiff rather than with finite differences?",
        "One backward pass gives the exact gradient for all parameters; central differences need 2n forward passes.",
        (("Finite differences give the exact gradient too, but reverse mode needs less memory to compute it.",
          "finite differences are exact", "Finite differences are approximate (truncation and round-off error, "
          "exercise 01); and reverse mode actually needs MORE memory, to keep the graph."),
         ("Reverse mode only approximates the gradient, but its approximation is cheaper than finite differences.",
          "autodiff is approximate", "Reverse mode is exact up to floating-point round-off: it applies exact local "
          "derivatives."),
         ("Finite differences only work for functions of a single input, and a network has millions of inputs.",
          "finite differences need one input", "They work for any number of inputs, one or two evaluations per "
          "input — that cost is the problem, not a limitation to one input.")),
        position=2),
}

LETTERS = "abcd"


def _shuffled(question: Question, gen: torch.Generator) -> list[str]:
    """The options in a random order in which the correct one never keeps its notebook letter."""
    texts = question.options()
    while True:
        order = torch.randperm(len(texts), generator=gen).tolist()
        if order.index(question.position) != question.position:
            return [texts[i] for i in order]


def _chosen(answer, options: dict[str, str], *, what: str) -> str:
    __tracebackhide__ = True
    letter = answer.strip().lower().strip("()") if isinstance(answer, str) else None
    if letter not in options:
        raise GradingFailure(f"{what} returned {answer!r:.60}; expected one of the letters {list(options)}.")
    return letter


def _explain_choice(name: str, question: Question, options: dict[str, str], letter: str, public: bool) -> str:
    what = f"{name}(options)"
    lines = [f"{what} chose ({letter}) \"{options[letter]}\" — that is not the right answer to: {question.prompt}"]
    if not public and question.options()[LETTERS.index(letter)] == question.correct:
        lines.append("Likely misconception: answered by position. In these options the letters are shuffled; "
                     "you returned the letter the right answer has in the notebook. Choose by content "
                     "(letter_of(options, phrase)), not by letter.")
    else:
        lines += [f"Likely misconception: {mistake}. {why}" for text, mistake, why in question.distractors
                  if options[letter] == text]
    return "\n".join(lines)


def check_multiple_choice(*answers, seed: int | None = None) -> None:
    """Part C: one function per question of QUESTIONS, in that order; each picks the correct option's letter.

    The public test offers the options in the notebook's order; the hidden test shuffles them so that the correct
    one never keeps its notebook letter: an answer must be chosen by content, not by position.
    """
    __tracebackhide__ = True
    gen = generator("09/multiple_choice", seed) if seed is not None else None
    for (name, question), answer in zip(QUESTIONS.items(), answers, strict=True):
        texts = question.options() if gen is None else _shuffled(question, gen)
        options = dict(zip(LETTERS, texts))
        what = f"{name}(options)"
        letter = _chosen(call_learner(answer, dict(options), what=what), options, what=what)
        if options[letter] != question.correct:
            raise GradingFailure(_explain_choice(name, question, options, letter, public=gen is None))


def question_markdown(name: str) -> str:
    """The question and its options as Markdown, in the notebook's order (used to write the notebook)."""
    question = QUESTIONS[name]
    options = "\n".join(f"- ({letter}) {text}" for letter, text in zip(LETTERS, question.options()))
    return f"**`{name}`** — {question.prompt}\n\n{options}"

