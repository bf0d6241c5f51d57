"""Checks for exercise 05, Part C: one simultaneous update of two models, a generator and a critic, whose two
losses are read from one forward, with one backward pass through the critic; afterwards each model's .grad holds
exactly the gradient its own step used.

Decisions the exercise states to learners: the critic may run once on the fake samples and once on the real ones (or
once on both, at most 2n samples in all), and gradient may flow back through each of its runs once (counted at the
node of its first layer, the last a backward through the critic reaches); the generator runs once. The obvious order
(the lesson's loop once per model, sharing the forward) fails with autograd's version check: the critic's step
rewrote weights its forward saved; the check names that from the learner's exception object.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F

from ...checking import GradingFailure, Misconception, call_learner, check, expect_close, trial
from ...checking import proven_failure as _proven
from ...contracts import CHANGED_INPUT
from ..cases import case_stream, randint, random_mlp
from .loop import NOT_IN_PLACE, _flat, _layout, _recording_forwards, _storage, _with_stale

Tensor = torch.Tensor


def critic_loss(fake_scores: Tensor, real_scores: Tensor) -> Tensor:
    """The notebook's critic_loss: binary cross-entropy on the critic's scores (logits), fakes labelled 0 and real
    samples 1."""
    return F.softplus(fake_scores).mean() + F.softplus(-real_scores).mean()


def generator_loss(fake_scores: Tensor) -> Tensor:
    """The notebook's generator_loss (non-saturating): the cross-entropy of the fakes' scores labelled real."""
    return F.softplus(-fake_scores).mean()


CRITIC_STALE = Misconception(
    "the critic's stale .grad in its step",
    "The critic arrived with gradients in .grad, and its step applied them too: reset the critic's gradients before "
    "the backward that fills them.",
    "What did the critic's .grad hold before your backward()?")
GENERATOR_STALE = Misconception(
    "the generator's stale .grad in its step",
    "The generator arrived with gradients in .grad, and its step applied them too (or their negative): reset the "
    "generator's gradients before the backward that fills them.",
    "What did the generator's .grad hold before your backward()?")
CRITIC_LOSS_IN_GENERATOR = Misconception(
    "the critic loss's gradient in the generator's step",
    "A backward of L_C through fake = generator(noise) writes dL_C/dθ_G into the generator's .grad, and the "
    "generator stepped on it: it moved to help the critic. The generator's step needs dL_G/dθ_G.",
    "Which loss's gradient did your backward() leave in the generator's .grad?")
NEGATED_CRITIC_LOSS = Misconception(
    "the generator's gradient taken as minus the critic loss's",
    "-dL_C/dθ_G would be dL_G/dθ_G if, at every fake sample's score, the slope of L_G were minus the slope of L_C. "
    "For these two losses it is not: the slopes differ by a factor that changes from sample to sample, and the "
    "generator's gradient is a sum over the samples.",
    "At one fake sample's score s, what is the slope of L_C, and what is the slope of L_G?")
BOTH_LOSSES = Misconception(
    "one backward of L_C + L_G: each model's .grad holds both losses' gradients",
    "backward() of a sum writes the gradient of the sum into every leaf it reaches: the critic got dL_C/dθ_C + "
    "dL_G/dθ_C, the generator dL_C/dθ_G + dL_G/dθ_G. Each step must use its own loss's gradient only.",
    "Which of the two losses' gradients should reach the critic's .grad, and which the generator's?")
RESET_BEFORE_STEPS = Misconception(
    "a reset between the backward and the steps",
    "The critic never moved: its gradients were reset after the backward that filled them and before its step.",
    "What does the critic's .grad hold at the moment c_optimizer.step() reads it?")
GENERATOR_TWICE = Misconception(
    "the generator run more than once",
    "The part allows one generator forward per call: compute fake once and use it for both losses.",
    "How many times does your code call the generator?")
CRITIC_TWICE = Misconception(
    "the critic run on the fake samples more than once",
    "The part allows the critic one run over the fake samples and one over the real ones (or one over both): both "
    "losses must be read from the same scores.",
    "On how many samples in all did your code run the critic?")
TWO_PASSES = Misconception(
    "one backward pass through the critic per loss",
    "Gradient flowed back through the critic's run on the fake samples more than once (one backward, or "
    "autograd.grad, per loss). The part allows one pass: the critic's backward is the expensive part of the step, "
    "and one pass must serve both models.",
    "In a single backward pass through the critic, what arrives at fake, and what would L_G's backward have sent "
    "there instead?")
GRAPH_FREED = Misconception(
    "a second backward through a graph the first one freed",
    "backward() frees the graph it ran through. Your second backward() needed the critic's run on the fake samples "
    "again, and it was gone (retain_graph=True would keep it, but the part allows one backward pass through the "
    "critic anyway).",
    "How many backward passes through the critic's run on the fake samples does your step make?")
STEP_BEFORE_BACKWARD = Misconception(
    "a step before a backward that needed the weights it changed",
    "The critic's forward saved its weights for backward (to send the gradient back to fake). An optimizer step "
    "writes those weights in place and bumps their _version; a backward through that forward after the step "
    "refuses, rather than use weights the forward never saw.",
    "Which tensor does the error name (its shape), whose _version moved, and which of your lines moved it?")


@dataclass
class DuelCase:
    description: str
    generator: nn.Module
    critic: nn.Module
    real: Tensor
    noise: Tensor
    lr_g: float
    lr_c: float
    stale_g: list[Tensor] | None
    stale_c: list[Tensor] | None


def _duel_case(gen, g_sizes: tuple[int, ...], c_hidden: tuple[int, ...], n: int, stale: bool, lr_g: float = 0.1,
               lr_c: float = 0.2) -> DuelCase:
    generator, critic = random_mlp(gen, g_sizes), random_mlp(gen, (g_sizes[-1], *c_hidden, 1))

    def grads(model):
        return [torch.rand(tuple(p.shape), generator=gen, dtype=torch.float64) * 4 - 2
                for p in model.parameters()] if stale else None

    real = torch.rand((n, g_sizes[-1]), generator=gen, dtype=torch.float64) * 4 - 2
    noise = torch.rand((n, g_sizes[0]), generator=gen, dtype=torch.float64) * 4 - 2
    description = (f"a generator of widths {g_sizes}, a critic of widths {(g_sizes[-1], *c_hidden, 1)}, {n} "
                   f"sample(s), lr {lr_g:g} and {lr_c:g}" + ("" if stale else ", both arriving with .grad None"))
    return DuelCase(description, generator, critic, real, noise, lr_g, lr_c, grads(generator), grads(critic))


def _duel_cases(grading_seed: int | None):
    """The corners, the same at every seed: one sample with linear models and stale gradients; models without
    gradients; MLPs with stale gradients. Then one (public: fixed) or two (hidden: drawn) cases with stale
    gradients."""
    gen = case_stream("05/simultaneous/corners", None)
    yield _duel_case(gen, (2, 2), (), n=1, stale=True)
    yield _duel_case(gen, (2, 3), (3,), n=3, stale=False)
    yield _duel_case(gen, (3, 4, 2), (3,), n=4, stale=True, lr_g=0.05)
    gen = case_stream("05/simultaneous", grading_seed)
    for _ in range(1 if grading_seed is None else 2):
        z, d = randint(gen, 1, 3), randint(gen, 1, 3)
        yield _duel_case(gen, (z, randint(gen, 2, 4), d), (randint(gen, 2, 3),), n=randint(gen, 2, 5), stale=True,
                         lr_g=round(0.05 + 0.1 * float(torch.rand((), generator=gen)), 3), lr_c=0.1)


def _flat_grads(grads) -> Tensor:
    return torch.cat([g.reshape(-1) for g in grads])


def reference_duel(case: DuelCase) -> dict[str, Tensor]:
    """Everything at the weights the step starts from, flattened: the parameters ("g", "c"), each loss's gradient
    with respect to each model ("C_c" = dL_C/dθ_critic, "C_g", "G_c", "G_g"), the stale gradients ("S_c", "S_g",
    zeros for None) and the losses [L_C, L_G]."""
    generator, critic = _with_stale(case.generator, None), _with_stale(case.critic, None)
    g_params, c_params = list(generator.parameters()), list(critic.parameters())
    fake_scores = critic(generator(case.noise))
    losses = critic_loss(fake_scores, critic(case.real)), generator_loss(fake_scores)
    out = {"g": _flat(generator), "c": _flat(critic),
           "losses": torch.tensor([v.item() for v in losses], dtype=torch.float64)}
    for loss, key in zip(losses, "CG"):
        grads = torch.autograd.grad(loss, g_params + c_params, retain_graph=True, allow_unused=True)
        grads = [torch.zeros_like(p) if g is None else g for p, g in zip(g_params + c_params, grads)]
        out[f"{key}_g"], out[f"{key}_c"] = _flat_grads(grads[:len(g_params)]), _flat_grads(grads[len(g_params):])
    for key, stale, params in (("S_g", case.stale_g, g_params), ("S_c", case.stale_c, c_params)):
        out[key] = _flat_grads(stale or [torch.zeros_like(p) for p in params])
    return out


def _grads(model: nn.Module) -> Tensor:
    return torch.cat([torch.zeros_like(p).reshape(-1) if p.grad is None else p.grad.reshape(-1)
                      for p in model.parameters()])


@contextlib.contextmanager
def _critic_passes(critic: nn.Module):
    """[rows, passes] for every forward through ``critic`` while the block runs, seen at its first layer: how many
    samples it ran on, and how many backward passes ran through that layer's node since (through the whole
    critic: its first layer is the last node a backward through it reaches)."""
    runs: list[list[int]] = []

    def forward_hook(module, args, out):
        runs.append([args[0].shape[0] if args and isinstance(args[0], Tensor) and args[0].dim() else 1, 0])
        if isinstance(out, Tensor) and out.grad_fn is not None:
            out.grad_fn.register_hook(lambda grad_inputs, grad_outputs, run=runs[-1]: run.__setitem__(1, run[1] + 1))

    first = next(module for module in critic.modules() if not list(module.children()))
    handle = first.register_forward_hook(forward_hook)
    try:
        yield runs
    finally:
        handle.remove()


def _run_duel(step_fn, case: DuelCase) -> None:
    __tracebackhide__ = True
    generator, critic = _with_stale(case.generator, case.stale_g), _with_stale(case.critic, case.stale_c)
    g_optimizer = torch.optim.SGD(generator.parameters(), lr=case.lr_g)
    c_optimizer = torch.optim.SGD(critic.parameters(), lr=case.lr_c)
    what = f"adversarial_step(generator, critic, g_optimizer, c_optimizer, real, noise) for {case.description}"
    before = _storage(generator) + _storage(critic)
    with _recording_forwards(generator) as seen, _critic_passes(critic) as runs:
        try:
            losses = call_learner(step_fn, generator, critic, g_optimizer, c_optimizer, case.real, case.noise,
                                  what=what, may_change=[0, 1, 2, 3])  # models and optimizers, by position
        except GradingFailure as failure:
            raised = failure.raised if isinstance(failure.raised, RuntimeError) else None
            for words, mistake in (("a second time", GRAPH_FREED), ("modified by an inplace", STEP_BEFORE_BACKWARD)):
                if failure.proven is None and raised is not None and words in str(raised):
                    raise _proven(failure.message, mistake) from None
            raise
    if before != _storage(generator) + _storage(critic):
        raise _proven(f"{what} replaced parameter tensors of the models instead of updating them in place.",
                      NOT_IN_PLACE)
    if len(seen) != 1:
        raise _proven(f"{what} ran the generator {len(seen)} times.", GENERATOR_TWICE)
    n = case.real.shape[0]
    if sum(rows for rows, _ in runs) > 2 * n:
        raise _proven(f"{what} ran the critic on {sum(rows for rows, _ in runs)} samples in all (runs of "
                      f"{', '.join(str(rows) for rows, _ in runs)}): {n} fake and {n} real ones make {2 * n}.",
                      CRITIC_TWICE)
    if any(passes > 1 for _, passes in runs):
        raise _proven(f"{what} ran backward through the critic {max(passes for _, passes in runs)} times over one "
                      "of its forward runs.", TWO_PASSES)
    ref = reference_duel(case)
    right = {"c": ref["C_c"], "g": ref["G_g"]}
    variants = {
        "c": [(CRITIC_STALE, ref["C_c"] + ref["S_c"]), (RESET_BEFORE_STEPS, 0 * ref["C_c"]),
              (BOTH_LOSSES, ref["C_c"] + ref["G_c"])],
        "g": [(mistake, base + sign * ref["S_g"]) for sign in (0, 1, -1) for mistake, base in (
            (CRITIC_LOSS_IN_GENERATOR, ref["C_g"]), (NEGATED_CRITIC_LOSS, -ref["C_g"]),
            (BOTH_LOSSES, ref["C_g"] + ref["G_g"]))]
        + [(GENERATOR_STALE, ref["G_g"] + sign * ref["S_g"]) for sign in (1, -1)]}
    for key, name, model, lr in (("c", "critic", critic, case.lr_c), ("g", "generator", generator, case.lr_g)):
        symptoms = [mistake.looks_like(ref[key] - lr * used) for mistake, used in variants[key]]
        expect_close(_flat(model), ref[key] - lr * right[key], source="reference step", symptoms=symptoms,
                     what=f"{what}: the {name}'s parameter vector after the step",
                     extra=f"  parameters, flattened in this order: {_layout(model)}")
    if type(losses) not in (tuple, list) or len(losses) != 2 or not all(type(v) is float for v in losses):
        raise GradingFailure(f"{what} returned {losses!r:.120}; expected a pair of Python floats, (L_C, L_G).")
    expect_close(torch.tensor(losses, dtype=torch.float64), ref["losses"], source="reference step",
                 what=f"{what}: the returned (L_C, L_G)")
    frozen = [name for name, p in [*generator.named_parameters(), *critic.named_parameters()] if not p.requires_grad]
    if frozen:
        raise _proven(f"{what} left {', '.join(frozen)} with requires_grad False (switched off, never back on: the "
                      "next update would have nothing to differentiate).", CHANGED_INPUT)
    for key, name, model, symptoms in (
            ("c", "critic", critic, [BOTH_LOSSES.looks_like(ref["C_c"] + ref["G_c"])]),
            ("g", "generator", generator, [CRITIC_LOSS_IN_GENERATOR.looks_like(ref["C_g"]),
                                           NEGATED_CRITIC_LOSS.looks_like(-ref["C_g"])])):
        expect_close(_grads(model), right[key], source="reference step", symptoms=symptoms,
                     what=f"{what}: the {name}'s .grad afterwards (the gradient its step used)",
                     extra=f"  parameters, flattened in this order: {_layout(model)}")


@check
def check_adversarial_step(step_fn, grading_seed: int | None = None) -> None:
    """Part C: adversarial_step makes one simultaneous update: the critic steps on the gradient of
    L_C = critic_loss(critic(fake), critic(real)) alone, the generator on the gradient of L_G =
    generator_loss(critic(fake)) alone, both taken at the weights the call starts from, each with one step of its own
    optimizer; returns (L_C, L_G) as Python floats.

    Domain: generator and critic float64 MLPs (critic output (n, 1)), whose .grad is stale or None; g_optimizer and
    c_optimizer plain SGD over each model's own parameters; real (n, d) and noise (n, z), n >= 1. Corners at every
    seed (:func:`_duel_cases`): one sample, linear models, stale gradients; models without gradients; MLPs with stale
    gradients; then one (public: fixed) or two (hidden: drawn) cases with stale gradients.

    Contracts checked: real and noise unchanged, the parameters updated in place, one generator forward, the critic
    run on at most 2n samples, at most one backward pass through each of its runs, the losses as a pair of Python
    floats; afterwards each model's .grad holds the gradient its own step used and every parameter still requires
    grad."""
    __tracebackhide__ = True
    for case in _duel_cases(grading_seed):
        with trial():
            _run_duel(step_fn, case)
