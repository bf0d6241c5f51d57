"""Exercise 11, Part E (the bug hunt): the given backward of the notebook is the one the check knows, its bug is one
line that still trains, and the cases of the check tell its mistakes apart at every seed.

A mistake is named only when two cases agree on it, so every case must arm each mistake the catalogue names with a
value of its own, at every grading seed.
"""

from __future__ import annotations

import math

import nbformat
import pytest
import torch

from autograder import course, references
from autograder.checks.ex11_capstone import BN_EPS, bughunt, mlp_loss
from autograder.checks.ex11_capstone.network import network_gradients
from autograder.datasets import digits_split
from autograder.misconceptions import armed

SEEDS = [None, *range(40)]


def _cell(grade_id: str) -> str:
    notebook = nbformat.read(course.source_notebook("11-capstone"), as_version=4)
    return next(c.source for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _defined(source: str, name: str):
    namespace = {"torch": torch, "BN_EPS": BN_EPS, "linear_backward": references.reference_linear_backward,
                 "softmax_cross_entropy_backward": references.reference_softmax_cross_entropy_backward,
                 "silu_backward": lambda x, dy: dy * torch.sigmoid(x) * (1 + x * (1 - torch.sigmoid(x)))}
    exec(source.replace("### BEGIN SOLUTION", "").replace("### END SOLUTION", ""), namespace)
    return namespace[name]


def test_the_notebooks_given_backward_is_the_one_the_check_knows():
    given = _defined(_cell("given_backward"), "given_gradients")
    for seed in range(5):
        for params, X, targets, _ in bughunt._bug_hunt_cases(seed):
            mine, known = given(params, X, targets), bughunt.given_gradients(params, X, targets)
            for key in params:
                assert torch.allclose(mine[key], known[key], rtol=1e-12, atol=1e-14), (seed, key)


def test_the_reference_fix_changes_one_line_of_the_given_code():
    given = [line.strip() for line in _cell("given_backward").splitlines()[1:] if line.strip()]
    fixed = [line.strip() for line in _cell("mlp_gradients").splitlines() if line.strip()
             and "###" not in line]
    body = given[given.index("n = X.shape[0]"):]
    answer = fixed[fixed.index("n = X.shape[0]"):]
    assert len(body) == len(answer)
    assert sum(a != b for a, b in zip(body, answer)) == 1


def test_the_given_backward_trains_as_a_right_one_does():
    """The planted bug is quiet: 150 steps of 64 digits from the try-it cell's start end within 2 % of the loss a
    right backward reaches, while the gate's comparison flags W1 alone."""
    X_train, y_train, _, _ = digits_split(seed=0)

    def run(gradients):
        gen = torch.Generator().manual_seed(0)
        params = {"W1": torch.randn(64, 32, generator=gen, dtype=torch.float64) / 8,
                  "gamma": torch.ones(32, dtype=torch.float64), "beta": torch.zeros(32, dtype=torch.float64),
                  "W2": torch.randn(32, 10, generator=gen, dtype=torch.float64) / math.sqrt(32),
                  "b2": torch.zeros(10, dtype=torch.float64)}
        losses = []
        for _ in range(150):
            chosen = torch.randint(len(y_train), (64,), generator=gen)
            grads = gradients(params, X_train[chosen], y_train[chosen])
            losses.append(float(mlp_loss(params, X_train[chosen], y_train[chosen])))
            params = {k: params[k] - 0.5 * grads[k] for k in params}
        return sum(losses[-10:]) / 10, losses[0]

    (buggy, first), (right, _) = run(bughunt.given_gradients), run(network_gradients)
    assert buggy < first / 10 and abs(buggy - right) < 0.02 * right
    gen = torch.Generator().manual_seed(0)
    params = {"W1": torch.randn(64, 32, generator=gen, dtype=torch.float64) / 8,
              "gamma": torch.ones(32, dtype=torch.float64), "beta": torch.zeros(32, dtype=torch.float64),
              "W2": torch.randn(32, 10, generator=gen, dtype=torch.float64) / math.sqrt(32),
              "b2": torch.zeros(10, dtype=torch.float64)}
    given, good = (f(params, X_train[:16], y_train[:16]) for f in (bughunt.given_gradients, network_gradients))
    assert [k for k in params if not torch.allclose(given[k], good[k], rtol=1e-6, atol=1e-9)] == [bughunt.BUGGY_KEY]


@pytest.mark.parametrize("seed", SEEDS)
def test_every_case_arms_each_named_mistake_of_w1(seed):
    from autograder.checks.ex11_capstone.misconceptions import BUG_LEFT_IN, N_MINUS_1_IN_BACKWARD
    from autograder.checks.shared import CE_NOT_DIVIDED

    counts: dict[str, int] = {}
    batches = set()
    for params, X, targets, _ in bughunt._bug_hunt_cases(seed):
        batches.add(len(X))
        assert X.shape[0] != X.shape[1], "a batch never as large as the number of inputs (mutants of shape[0])"
        right = network_gradients(params, X, targets)["W1"]
        values = {BUG_LEFT_IN: bughunt.given_gradients(params, X, targets)["W1"],
                  N_MINUS_1_IN_BACKWARD: bughunt.staged_gradients(params, X, targets, var_divisor="n - 1",
                                                                   mean_divisor="n - 1")["W1"],
                  CE_NOT_DIVIDED: bughunt.staged_gradients(params, X, targets, ce_divided=False)["W1"]}
        symptoms = [mistake.looks_like(value) for mistake, value in values.items()]
        for symptom in armed(symptoms, right, rtol=1e-6, atol=1e-8):
            others = [v for m, v in values.items() if m is not symptom.misconception]
            if not any(symptom.matches(v) for v in others):
                counts[symptom.misconception.name] = counts.get(symptom.misconception.name, 0) + 1
    assert bughunt.TRY_IT_BATCH in batches and len(batches) >= 3
    for mistake in (BUG_LEFT_IN, N_MINUS_1_IN_BACKWARD, CE_NOT_DIVIDED):
        assert counts.get(mistake.name, 0) >= 2, (seed, mistake.name, counts)


@pytest.mark.parametrize("n", [2, 3, 7, 64, 1000])
def test_dvar_factor_is_what_autograd_measures(n):
    """The factor dvar_factor is graded against is the given line's dvar over autograd's gradient of the loss with
    respect to the batch variance (a leaf), on a batch whose hidden units' variances are far above eps."""
    import torch.nn.functional as F

    gen = torch.Generator().manual_seed(n)
    W1, W2 = (torch.randn(*shape, generator=gen, dtype=torch.float64) for shape in [(5, 4), (4, 3)])
    gamma = 1 + 0.1 * torch.randn(4, generator=gen, dtype=torch.float64)
    X = 3 * torch.randn(n, 5, generator=gen, dtype=torch.float64)
    X[0] += 10  # even a batch of 2 spreads far beyond eps
    targets = torch.randint(3, (n,), generator=gen)
    centred = X @ W1 - (X @ W1).mean(0)
    variance = (centred ** 2).mean(0).requires_grad_(True)
    xhat = centred / torch.sqrt(variance + BN_EPS)
    xhat.retain_grad()
    a = gamma * xhat
    F.cross_entropy((a * torch.sigmoid(a)) @ W2, targets).backward()
    given = -0.5 * (xhat.grad * centred).sum(0) * (centred.var(0) + BN_EPS) ** -1.5   # the notebook's given line
    formula = ((n - 1) / n) ** 1.5
    assert torch.allclose(given / variance.grad, torch.full_like(given, formula), rtol=bughunt.DVAR_RTOL / 10)
    assert abs(bughunt.dvar_ratio(n) - formula) <= bughunt.DVAR_RTOL / 10 * formula


# ------------------------------------------------------------------------------------ Part C.2


@pytest.mark.parametrize("seed", SEEDS)
def test_every_residual_mistake_shows_in_two_cases(seed):
    """Each catalogued mistake of the residual block's backward is armed, with a value of its own (no other mistake's),
    in at least two cases, at every seed; the hand-written gradients are autograd's."""
    from autograder.checks.ex11_capstone import residual
    from autograder.oracles import autograd_gradient

    counts: dict[str, int] = {}
    for args, _ in residual._residual_cases(seed):
        right = residual.residual_gradients(*args)
        auto = autograd_gradient(lambda *v, dy=args[-1]: (residual.residual_forward(*v) * dy).sum(), *args[:5])
        for name, expected in zip(residual.NAMES, auto):
            assert torch.allclose(right[name], expected, rtol=1e-10, atol=1e-12), (seed, name)
        variants = {key: residual.residual_gradients(*args, mistake=key) for key in residual.MISTAKES}
        for key, mistake in residual.MISTAKES.items():
            own = [name for name in residual.NAMES
                   if armed([mistake.looks_like(variants[key][name])], right[name], rtol=1e-6, atol=1e-8)
                   and not any(torch.allclose(variants[key][name], variants[other][name], rtol=1e-4, atol=1e-7)
                               for other in residual.MISTAKES if other != key)]
            counts[mistake.name] = counts.get(mistake.name, 0) + bool(own)
    for mistake in residual.MISTAKES.values():
        assert counts[mistake.name] >= 2, (seed, mistake.name, counts)


# ------------------------------------------------------------------------------------ Part A


@pytest.mark.parametrize("seed", SEEDS)
def test_every_logsumexp_mistake_shows_in_two_cases(seed):
    """Each catalogued mistake of logsumexp's backward leaves .grad values of its own (armed, and no other mistake's)
    in at least two cases at every seed; the cases pin a single Value, a repeated one and inputs up to 1000."""
    from autograder.checks.ex11_capstone import logsumexp

    counts: dict[str, int] = {}
    cases = logsumexp._lse_cases(seed)
    assert any(len(pattern) > len(set(pattern)) for _, pattern, *_ in cases)
    assert any(float(xs.max()) >= 1000 for xs, *_ in cases)
    assert any(float(xs[pattern[0]]) <= float(xs.max()) - 1000 for xs, pattern, *_ in cases), "the largest first"
    for xs, pattern, c, d, _ in cases:
        _, right = logsumexp._expected(xs, pattern, c, d)
        variants = logsumexp._variants(xs, pattern, c, d)
        for key, values in variants.items():
            others = [v for k, vs in variants.items() if k != key for v in vs]
            own = any(armed([logsumexp.GRAD_ASSIGNED.looks_like(v)], right, rtol=1e-6, atol=1e-8)
                      and not any(torch.allclose(v, o, rtol=1e-4, atol=1e-7) for o in others) for v in values)
            counts[key] = counts.get(key, 0) + own
    for key in ("assigned", "upstream", "not normalised", "max counted"):
        assert counts[key] >= 2, (seed, key, counts)
