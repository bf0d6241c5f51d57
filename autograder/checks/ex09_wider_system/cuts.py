"""Part C1: ``find_cuts(stages, inputs)`` locates, in a pipeline of opaque stages, the ones whose recorded gradient
disagrees with central differences of what they compute. Every kind of stage comes in a sound and a broken version
under the same name; the broken ones cut the gradient in ways the output does not show (a detached statistic, a
straight-through sort, a hook that zeroes the gradient, a hand-written backward with the wrong derivative, a
normalisation whose hand-written backward divides by n where the forward divided by n - 1, off by only a few per
cent along every weighting, a clamp whose hand-written backward is right inside its limits and wrong beyond them,
where only the stage before it sends values) or cut it altogether (a round trip through Python numbers, a stage run
under ``inference_mode``)."""

from __future__ import annotations

from collections.abc import Callable

import torch

from ...checking import GradingFailure, call_learner, check, proven_failure, trial
from ...oracles import central_difference
from ...seeding import generator, uniform
from ..cases import case_stream, randint
from .misconceptions import (
    CUT_CRASHED,
    CUT_EXACT,
    CUT_INFERENCE_LEAF,
    CUT_LOOSE,
    CUT_NO_GRAPH,
    CUT_PIPELINE_INPUT,
    CUT_PREFIX,
    CUT_SUFFIX,
    CUT_SUM_DIRECTION,
    CUT_TIGHT,
)

CASES = 5
#: A broken stage's gradient differs from central differences by more than this fraction of the gradient's largest
#: entry, a sound one by less than 1e-6 of it (float64, step 1e-6): checked on every drawn stage (a broken one along
#: DRAWS random directions, and along the all-ones direction too except for the straight-through sort and the
#: normalisation, which agree there); the normalisation by more than SLIGHT only.
MARGIN = 0.05
#: The broken normalisation's gradient is sqrt(N / (N - 1)) times the right one along every weighting, N = n·w from
#: 12 to 24 entries: off by 2.2 % to 4.5 %, so a tolerance of 5 % never sees it (central differences' own error on a
#: sound stage is below 1e-8 of the gradient's largest entry).
SLIGHT = 0.02
#: Kinds whose broken version agrees with central differences along the all-ones weighting.
ALONG_ONES = frozenset({"sort", "normalise"})
#: How many random directions a broken stage is drawn to keep MARGIN along.
DRAWS = 8

Stage = tuple[str, Callable[[torch.Tensor], torch.Tensor]]


class _WrongTanh(torch.autograd.Function):
    """tanh whose hand-written backward uses 1 - x² (the input) where 1 - tanh(x)² (the output) belongs."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return torch.tanh(x)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (1 - x * x)


class _PopulationNormalise(torch.autograd.Function):
    """(x - mean) / std over all entries (std with n - 1, torch's default) whose hand-written backward is that of
    the normalisation by the population std (n): sqrt(n / (n - 1)) times the right gradient, along every weighting."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x - x.mean()) / x.std()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        centred = x - x.mean()
        spread = centred.pow(2).mean().sqrt()
        z = centred / spread
        return (grad - grad.mean() - z * (grad * z).mean()) / spread


class _ThroughClamp(torch.autograd.Function):
    """clamp to [-LIMIT, LIMIT] whose hand-written backward passes the gradient through everywhere: right inside the
    limits, wrong beyond them (where the pipeline's inputs never go, and the stage before it may send values)."""

    @staticmethod
    def forward(ctx, x):
        return x.clamp(-LIMIT, LIMIT)

    @staticmethod
    def backward(ctx, grad):
        return grad


#: The clip stage's limits: the pipeline's inputs lie in [-LIMIT, LIMIT).
LIMIT = 2.0
#: A broken clip receives at least this many entries beyond its limits.
BEYOND = 3


def _make(kind: str, broken: bool, gen: torch.Generator, width: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """One stage of the given kind, sound or broken (the same name and the same value either way)."""
    if kind == "normalise":                                # broken: a hand-written backward, off by a few per cent
        return _PopulationNormalise.apply if broken else (lambda x: (x - x.mean()) / x.std())
    if kind == "rescale":                                  # each row by its largest magnitude, that detached
        if broken:
            return lambda x: x / x.abs().amax(1, keepdim=True).detach()
        return lambda x: x / x.abs().amax(1, keepdim=True)
    if kind == "log_softmax":                              # sound: a detached max cancels; broken: the normaliser
        if broken:
            return lambda x: x - torch.logsumexp(x, 1, keepdim=True).detach()

        def stable(x):
            top = x.amax(1, keepdim=True).detach()
            return x - top - (x - top).exp().sum(1, keepdim=True).log()
        return stable
    if kind == "sort":                                     # broken: the straight-through estimator
        if broken:
            return lambda x: x + (x.sort(1).values - x).detach()
        return lambda x: x.sort(1).values
    if kind == "cache":                                    # broken: a round trip through Python numbers
        if broken:
            return lambda x: torch.tensor(x.tolist(), dtype=x.dtype)
        return lambda x: x.clone()
    if kind == "serve":                                    # a fixed linear map; broken: run under inference_mode
        weight, bias = uniform(gen, (width, width), -1.0, 1.0), uniform(gen, (width,), -0.5, 0.5)
        if broken:
            def served(x):
                with torch.inference_mode():
                    return torch.nn.functional.linear(x, weight, bias)
            return served
        return lambda x: torch.nn.functional.linear(x, weight, bias)
    if kind == "monitor":                                  # a hook that logs the gradient; broken: it zeroes it
        norms: list[float] = []

        def monitored(x):
            y = x * 1.0
            if y.requires_grad:
                y.register_hook((lambda g: torch.zeros_like(g)) if broken else (lambda g: norms.append(g.norm())))
            return y
        return monitored
    if kind == "squash":                                   # broken: a hand-written backward
        return _WrongTanh.apply if broken else torch.tanh
    if kind == "clip":                                     # broken: a hand-written backward, wrong beyond the limits
        return _ThroughClamp.apply if broken else (lambda x: x.clamp(-LIMIT, LIMIT))
    raise ValueError(kind)


KINDS = ("normalise", "rescale", "log_softmax", "sort", "cache", "serve", "monitor", "squash", "clip")
#: Kinds whose broken version records no graph at all (the output of a leaf input does not require grad).
NO_GRAPH = frozenset({"cache", "serve"})


def stage_gradients(stage, x: torch.Tensor, direction: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(autograd, central differences) of sum(direction * stage(x)) with respect to x; autograd zero where no graph."""
    def projected(value):
        return (direction * stage(value)).sum()

    leaf = x.detach().clone().requires_grad_()
    out = projected(leaf)
    recorded = (torch.autograd.grad(out, leaf)[0] if out.requires_grad else torch.zeros_like(leaf))
    return recorded.detach(), central_difference(projected, x)[0]


def _disagreement(stage, x: torch.Tensor, direction: torch.Tensor) -> float:
    recorded, differences = stage_gradients(stage, x, direction)
    return ((recorded - differences).abs().max() / differences.abs().max().clamp_min(1e-12)).item()


#: A drawn pipeline of the tests (not the fixed TIE_KINDS one) is drawn again when a sound stage disagrees by more
#: than this along any of TIE_DRAWS further weightings: a tie (where central differences are off by up to 1e-6) is
#: shown in the fixed pipeline only, the same at every grading seed; elsewhere sound stages stay within 2e-9.
TIE_FREE = 1e-8
TIE_DRAWS = 4


def _pipeline(gen: torch.Generator, kinds, broken_kinds, n: int, width: int, tie_free: bool = False):
    """(stages, inputs, broken names), drawn again until every stage keeps its margin at the input it receives (and,
    if ``tie_free``, every sound stage agrees within TIE_FREE: no tie where central differences lose accuracy)."""
    while True:
        stages = [(kind, _make(kind, kind in broken_kinds, gen, width)) for kind in kinds]
        inputs = uniform(gen, (n, width))
        x, ok = inputs, True
        with torch.no_grad():
            xs = []
            for _, stage in stages:
                xs.append(x)
                x = stage(x).clone()
        if "clip" in broken_kinds and (xs[kinds.index("clip")].abs() > LIMIT).sum() < BEYOND:
            continue                                          # a broken clip must receive values beyond its limits
        for (kind, stage), x in zip(stages, xs):
            directions = [uniform(gen, tuple(stage(x).shape), -1.0, 1.0)
                          for _ in range(DRAWS if kind in broken_kinds else 1)]
            if kind not in ALONG_ONES and kind in broken_kinds:   # broken along the all-ones direction too
                directions.append(torch.ones_like(directions[0]))
            margin = SLIGHT if kind == "normalise" else MARGIN
            for direction in directions:
                gap = _disagreement(stage, x, direction)
                if (kind in broken_kinds and gap < margin) or (kind not in broken_kinds and gap > 1e-6):
                    ok = False
            if tie_free and ok and kind not in broken_kinds:   # further weightings, drawn apart from gen's stream
                others = torch.Generator().manual_seed(len(kinds))
                ok = all(_disagreement(stage, x, torch.rand(directions[0].shape, generator=others,
                                                            dtype=torch.float64) * 2 - 1) <= TIE_FREE
                         for _ in range(TIE_DRAWS))
        if ok:
            return stages, inputs, [kind for kind in kinds if kind in broken_kinds]


def _order(gen: torch.Generator, kinds) -> list[str]:
    return [kinds[i] for i in torch.randperm(len(kinds), generator=gen).tolist()]


def _clip_after_serve(kinds: list[str]) -> list[str]:
    """The same kinds with clip (if there) moved right after serve, the fixed linear map that sends values beyond the
    clip's limits; serve moved one place earlier first if it is last, so that clip is never last."""
    if "clip" not in kinds:
        return kinds
    kinds = [kind for kind in kinds if kind != "clip"]
    at = kinds.index("serve")
    if at == len(kinds) - 1:
        kinds[at - 1], kinds[at] = kinds[at], kinds[at - 1]
        at -= 1
    return [*kinds[:at + 1], "clip", *kinds[at + 1:]]


#: The fixed last pipeline of every test: serve sends values beyond clip's limits, so rows reach squash with two
#: entries at the limit and rescale (sound) receives rows whose largest magnitude is shared by two entries. There
#: central differences agree with its gradient only to the order of their step: 8e-8 to 7e-7 of the gradient's
#: largest entry along random weightings (tanh's own noise: about 1e-9); the broken stages are off by more than 5 %.
TIE_KINDS = ("monitor", "serve", "clip", "squash", "rescale", "cache", "log_softmax", "sort")
TIE_BROKEN = frozenset({"cache", "log_softmax"})
TIE_DRAW = 12


def _tie_case():
    return _pipeline(generator("09/cuts/tie", TIE_DRAW), list(TIE_KINDS), TIE_BROKEN, 6, 4)


def _cases(grading_seed: int | None):
    """(stages, inputs, broken names): two pipelines of every kind, broken in complementary halves (so each kind
    shows both ways, one that records no graph in each, clip right after serve); then two of five kinds drawn (clip
    not among them), two of them broken, one of those one that records no graph; last the fixed pipeline of
    TIE_KINDS, whose sound rescale receives ties. Every pipeline starts and ends with a sound stage."""
    gen = case_stream("09/cuts", grading_seed)
    half = set(_order(gen, [k for k in KINDS if k not in NO_GRAPH])[:3]) | {sorted(NO_GRAPH)[randint(gen, 0, 1)]}
    n, width = randint(gen, 4, 6), randint(gen, 3, 4)
    for broken in (half, set(KINDS) - half):
        sound = _order(gen, [k for k in KINDS if k not in broken])
        sound.sort(key=lambda kind: kind in ("serve", "clip"))             # neither of them first or last
        middle = _order(gen, [k for k in KINDS if k in broken] + sound[2:])
        kinds = _clip_after_serve([sound[0], *middle, sound[1]])            # a sound stage first and last
        yield _pipeline(gen, kinds, broken, n, width, tie_free=True)
    for _ in range(CASES - 3):                                              # then the tie pipeline
        others = _order(gen, [k for k in KINDS if k not in NO_GRAPH and k != "clip"])[:4]
        broken = {sorted(NO_GRAPH)[randint(gen, 0, 1)], others[randint(gen, 0, 3)]}
        sound = [k for k in others if k not in broken]
        kinds = [sound[0], *_order(gen, [*broken, sound[1]]), sound[2]]   # a sound stage first and last
        yield _pipeline(gen, kinds, broken, randint(gen, 4, 6), randint(gen, 3, 4), tie_free=True)
    yield _tie_case()


def _at_the_start(stages, inputs) -> list[str]:
    """The stages that disagree with central differences when each is measured at the pipeline's own inputs."""
    gen = torch.Generator().manual_seed(0)
    named = []
    for name, stage in stages:
        with torch.no_grad():
            shape = stage(inputs).shape
        directions = [torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1 for _ in range(2)]
        if max(_disagreement(stage, inputs, direction) for direction in directions) > 1e-3:
            named.append(name)
    return named


def _on_probe(find_cuts, probe: list[Stage], inputs: torch.Tensor) -> list[str] | None:
    """What find_cuts returns on a small probe pipeline (None if it raises or returns no list)."""
    try:
        found = call_learner(find_cuts, probe, inputs, what="find_cuts on a probe")
    except GradingFailure:
        return None
    return list(found) if isinstance(found, (list, tuple)) else None


def _probes() -> dict[str, tuple[list[Stage], torch.Tensor]]:
    """Four small pipelines, each telling one mistake from the others by its numbers. "start": a fixed map tripling
    values in [1, 1.8], then a broken clip: right at the pipeline's inputs, wrong at every entry it receives. "prefix":
    a broken squash between two sound stages. "sort": a straight-through sort given rows in reverse order, where its
    gradient is off by about its largest entry along almost any weighting, and agrees only along weightings equal
    within each row's reversed pairs (the all-ones one among them). "slight": tanh, then a broken normalisation of
    24 entries, 2.2 % off along every weighting (and right along the all-ones one). "exact": the same two the other
    way round, tanh (sound, within about 1e-9) last: only a locator that wants an exact match names it."""
    gen = generator("09/cuts/probe", 0)
    rows = torch.arange(24, dtype=torch.float64).flip(0).reshape(6, 4) / 6 - 2          # in [-2, 2), each row reversed
    return {
        "start": ([("serve", lambda x: 3 * x), ("clip", _make("clip", True, gen, 4))], rows.abs() / 2.5 + 1),
        "prefix": ([(kind, _make(kind, kind == "squash", gen, 4)) for kind in ("rescale", "squash", "log_softmax")],
                   rows),
        "sort": ([("squash", torch.tanh), ("sort", _make("sort", True, gen, 4))], rows),
        "slight": ([("squash", torch.tanh), ("normalise", _make("normalise", True, gen, 4))], rows),
        "exact": ([("normalise", _make("normalise", True, gen, 4)), ("squash", torch.tanh)], rows)}


def _gaps(stages, inputs, expected: list[str], missed: list[str]) -> str:
    """The evidence for a tolerance too loose: how far each missed stage and the sound stages are from central
    differences at their own inputs, along one random weighting."""
    gen, x, far, sound = torch.Generator().manual_seed(0), inputs, {}, 0.0
    for name, stage in stages:
        with torch.no_grad():
            output = stage(x)
        gap = _disagreement(stage, x, torch.rand(output.shape, generator=gen, dtype=torch.float64) * 2 - 1)
        if name in missed:
            far[name] = gap
        elif name not in expected:
            sound = max(sound, gap)
        x = output.clone()
    shown = ", ".join(f"{name} by {100 * gap:.2f} %" for name, gap in far.items())
    return (f" At the input each receives, along a random weighting, autograd and central differences (float64) "
            f"disagree for the stages you left out: {shown} of the gradient's largest entry; for the sound stages of "
            f"this pipeline by at most {sound:.1e} of it. On a two-stage probe (tanh, then a normalisation whose "
            "gradient is 2.2 % off along every weighting) your locator names nothing.")


def _stage_gaps(stages, inputs) -> dict[str, float]:
    """Each stage's largest disagreement with central differences at the input it receives, along three random
    weightings (a fraction of the gradient's largest entry)."""
    gen, x, gaps = torch.Generator().manual_seed(0), inputs, {}
    for name, stage in stages:
        with torch.no_grad():
            output = stage(x)
        gaps[name] = max(_disagreement(stage, x, torch.rand(output.shape, generator=gen, dtype=torch.float64) * 2 - 1)
                         for _ in range(3))
        x = output.clone()
    return gaps


def _tied_rows(stages, name: str, inputs) -> int:
    """How many rows of the input the named stage receives have their largest magnitude at two entries or more."""
    x = inputs
    with torch.no_grad():
        for other, stage in stages:
            if other == name:
                break
            x = stage(x)
    top = x.abs().amax(1, keepdim=True)
    return int(((x.abs() == top).sum(1) >= 2).sum())


def _sound_named(stages, inputs, expected: list[str], extra: list[str]) -> tuple[str, bool]:
    """The evidence for sound stages named: how far each is from central differences at its own input, against the
    other sound stages and the least broken one; and whether the names are exactly the sound stages farthest off
    (a line drawn inside the sound stages' own noise)."""
    gaps = _stage_gaps(stages, inputs)
    def shown(name):
        tied = _tied_rows(stages, name, inputs)
        return f"{name} by {gaps[name]:.1e}" + (f" (its input: {tied} row(s) whose largest magnitude is reached by "
                                                 "two entries)" if tied else "")
    others = [gaps[name] for name in gaps if name not in expected and name not in extra]
    least = min((gaps[name] for name in expected), default=None)
    text = (" At the input each receives, along three random weightings, autograd and central differences (float64) "
            f"disagree for the sound stages you named: {', '.join(shown(name) for name in extra)} of the gradient's "
            "largest entry" + (f"; for the other sound stages of this pipeline by at most {max(others):.1e}"
                               if others else "")
            + (f"; for the least broken stage by {100 * least:.2f} %." if least is not None else "."))
    return text, min(gaps[name] for name in extra) > max(others, default=0.0)


def _diagnose(found: list[str], expected: list[str], stages, inputs, what: str, find_cuts) -> GradingFailure:
    names = [name for name, _ in stages]
    extra = [name for name in found if name not in expected]
    missed = [name for name in expected if name not in found]
    message = (f"{what} returned {found}; the pipeline {names} has {len(expected)} broken stage(s): "
               f"{len(extra)} of the names you returned are sound stages (their gradient agrees with central "
               f"differences at their own input), and {len(missed)} broken stage(s) are missing.")
    first = min((names.index(name) for name in expected), default=len(names))
    after = [name for name in names[first:] if name not in expected]     # the sound stages after the first break
    probes = _probes()
    if found == _at_the_start(stages, inputs) and _on_probe(find_cuts, *probes["start"]) == []:
        return proven_failure(message + " The names you returned are exactly the stages whose gradient disagrees "
                              "with central differences at the pipeline's `inputs`.", CUT_PIPELINE_INPUT)
    if extra and extra == after and not missed and \
            _on_probe(find_cuts, *probes["prefix"]) == ["squash", "log_softmax"]:
        return proven_failure(message + " The sound stages you named are exactly those after the first broken one.",
                              CUT_PREFIX)
    last = max((names.index(name) for name in expected), default=-1)
    before = [name for name in names[:last] if name not in expected]     # the sound stages before the last break
    if extra and extra == before and not missed and \
            _on_probe(find_cuts, *probes["prefix"]) == ["rescale", "squash"]:
        return proven_failure(message + " The sound stages you named are exactly those before the last broken one.",
                              CUT_SUFFIX)
    if len(missed) > 1 and not extra and missed == [name for name in expected if name not in NO_GRAPH]:
        return proven_failure(message + " Each missing one returns an output that requires grad.", CUT_NO_GRAPH)
    if missed and set(missed) <= ALONG_ONES and not extra and _on_probe(find_cuts, *probes["sort"]) == []:
        return proven_failure(message + " Your locator also leaves out a straight-through sort given rows in reverse "
                              "order, where its gradient is wrong along almost every weighting of its output.",
                              CUT_SUM_DIRECTION)
    if "normalise" in missed and not extra and not NO_GRAPH & set(missed) and \
            _on_probe(find_cuts, *probes["slight"]) == []:
        return proven_failure(message + _gaps(stages, inputs, expected, missed), CUT_LOOSE)
    if extra and not missed:
        evidence, farthest = _sound_named(stages, inputs, expected, extra)
        exact = _on_probe(find_cuts, *probes["exact"])
        if exact == ["normalise", "squash"] and len(extra) >= len(names) - len(expected) - 1:
            return proven_failure(message + evidence + " On a two-stage probe (a normalisation 2.2 % off, then tanh, "
                                  "sound) your locator names tanh too.", CUT_EXACT)
        if farthest and exact == ["normalise"]:
            return proven_failure(message + evidence, CUT_TIGHT)
        return GradingFailure(message + evidence)
    return GradingFailure(message)


@check
def check_find_cuts(find_cuts, grading_seed: int | None = None) -> None:
    """Part C1: find_cuts(stages, inputs) returns, in pipeline order, the names of the stages whose autograd gradient
    disagrees with central differences at the input the stage receives when the pipeline runs on ``inputs``.

    Domain: ``stages`` a list of (name, function) pairs, names from KINDS, each at most once; each function maps a
    float64 (n, w) tensor to a float64 (n, w) tensor, 4 <= n <= 6, 3 <= w <= 4; ``inputs`` float64 (n, w) in [-2, 2).
    A broken stage disagrees by more than MARGIN of its gradient's largest entry, the normalisation by more than
    SLIGHT (along DRAWS random directions; along the all-ones one too, except those in ALONG_ONES), a sound one agrees
    within 1e-6 (within 3e-9 where its input holds no tie). Five cases: two with every kind, broken in complementary
    halves, two with five kinds, two broken (one recording no graph), and the fixed pipeline of TIE_KINDS whose sound
    rescale receives ties; a sound stage after a broken one in each. Contracts: a list of names, in pipeline order;
    the inputs unchanged."""
    __tracebackhide__ = True
    for number, (stages, inputs, expected) in enumerate(_cases(grading_seed), start=1):
        with trial():
            n, w = inputs.shape
            what = f"find_cuts(stages, inputs) for pipeline {number} ({len(stages)} stages, inputs {n}x{w})"
            try:
                found = call_learner(find_cuts, list(stages), inputs, what=what)
            except GradingFailure as failure:
                text = str(failure.raised or "")
                if "inference tensor" in text.lower() or "Inference tensors" in text:
                    raise proven_failure(failure.message, CUT_INFERENCE_LEAF) from None
                if "does not require grad" in text:
                    raise proven_failure(failure.message, CUT_CRASHED) from None
                raise
            if not isinstance(found, (list, tuple)) or not all(isinstance(name, str) for name in found):
                raise GradingFailure(f"{what} returned {type(found).__name__} {found!r:.80}; expected a list of the "
                                     "broken stages' names.")
            found = list(found)
            if found != expected:
                if sorted(found) == sorted(expected):
                    raise GradingFailure(f"{what} returned {found}: the right stages, not in pipeline order "
                                         f"{[name for name, _ in stages]}.")
                raise _diagnose(found, expected, stages, inputs, what, find_cuts)


def team_pipeline(seed: int = 0) -> tuple[list[Stage], torch.Tensor]:
    """A pipeline of the team's stages and its inputs, to try a locator on (``seed`` 0 to 9 give ten of them; which
    stages are broken is for the locator to find)."""
    gen = generator("09/cuts/team", int(seed))
    kinds = _clip_after_serve(_order(gen, list(KINDS)))
    broken = set(_order(gen, kinds[1:-1])[:randint(gen, 2, 4)])
    stages, inputs, _ = _pipeline(gen, kinds, broken, randint(gen, 4, 6), randint(gen, 3, 4))
    return stages, inputs


def reference_find_cuts(stages, inputs) -> list[str]:
    """The tests' own locator (tests/test_ex09_parts.py): each stage on a fresh copy of its own input."""
    broken, x = [], inputs
    gen = torch.Generator().manual_seed(0)
    for name, stage in stages:
        with torch.no_grad():
            out = stage(x)
        direction = torch.rand(out.shape, generator=gen, dtype=torch.float64) * 2 - 1
        if _disagreement(stage, x, direction) > 1e-4:
            broken.append(name)
        x = out.clone()
    return broken


