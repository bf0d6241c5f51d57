"""Part C: score(x, mask, w, b, scale), a sentence scorer whose given version pools with ``mask @ x``: torch.matmul
broadcasts the (n, L) mask as one matrix over the batch, so every sentence is pooled with every sentence's mask and
the scores come out as an (n, n) table, which the training loss broadcasts against the (n,) targets silently, at every
size; fixed.

The oracles are the intended score written out with explicit shapes (:func:`intended_score`), its autograd gradients
and central differences for w, b and scale, in float64.
"""

from __future__ import annotations

import torch

from ...checking import GradingFailure, as_answer, call_learner, check, expect_close, proven_failure, trial
from ...oracles import autograd_gradient, central_difference
from ..cases import case_stream, randint
from .misconceptions import (
    CENTRED_PER_FEATURE,
    COUNT_PER_FEATURE,
    DETACHED,
    MASK_ACROSS_BATCH,
    MASK_ON_FEATURES,
    PADDING_IN_MEAN,
)

Tensor = torch.Tensor

#: What PyTorch says when two shapes do not broadcast (its own error, not the learner's).
BROADCAST_ERRORS = ("must match the size", "size of tensor", "shape mismatch")


def intended_score(x: Tensor, mask: Tensor, w: Tensor, b: Tensor, scale: Tensor) -> Tensor:
    """The text's score: each sentence's mean over its real tokens, centred on its own mean, scaled, then w, b."""
    counts = mask.sum(dim=1, keepdim=True)                  # (n, 1) real tokens per sentence
    pooled = (x * mask.unsqueeze(-1)).sum(dim=1) / counts   # (n, d)
    centred = (pooled - pooled.mean(dim=1, keepdim=True)) * scale
    return centred @ w + b                                  # (n,)


def sentence_data(length: int = 8) -> tuple[Tensor, Tensor, Tensor]:
    """The notebook's data: (x, mask, y) for 64 sentences of 1 to 8 tokens of 8 float32 features, padded (with
    numbers of their own) to ``length`` >= 8 positions; y is the intended score of true parameters plus a noise of
    standard deviation 0.05, the same whatever the padding."""
    gen = torch.Generator().manual_seed(0)
    n, d = 64, 8
    x = torch.randn(n, 8, d, generator=gen)
    lengths = torch.randint(1, 9, (n,), generator=gen)
    w, scale = torch.randn(d, generator=gen), torch.rand(d, generator=gen) + 0.5
    noise = 0.05 * torch.randn(n, generator=gen)
    x = torch.cat([x, torch.randn(n, length - 8, d, generator=gen)], dim=1)
    mask = (torch.arange(length) < lengths[:, None]).float()
    return x, mask, intended_score(x, mask, w, torch.tensor(0.5), scale) + noise


def buggy_score(x: Tensor, mask: Tensor, w: Tensor, b: Tensor, scale: Tensor) -> Tensor:
    """The notebook's given score: mask @ x is (n, n, d) (the mask broadcast as one matrix over the batch), so the
    scores are an (n, n) table; it runs at every size."""
    pooled = (mask @ x) / mask.sum(dim=1, keepdim=True)
    return ((pooled - pooled.mean(dim=-1, keepdim=True)) * scale) @ w + b


def mask_on_features(x: Tensor, mask: Tensor, w: Tensor, b: Tensor, scale: Tensor) -> Tensor:
    """An elementwise mask.unsqueeze(1): the mask lined up with the features (runs when L == d)."""
    pooled = (x * mask.unsqueeze(1)).sum(dim=1) / mask.sum(dim=1, keepdim=True)
    return ((pooled - pooled.mean(dim=1, keepdim=True)) * scale) @ w + b


def _variants(x: Tensor, mask: Tensor, w: Tensor, b: Tensor, scale: Tensor) -> list:
    """The symptoms of the mistakes whose value can be computed for this case's shapes."""
    n, length, d = x.shape

    def finish(pooled, centre_dim=1):
        return ((pooled - pooled.mean(dim=centre_dim, keepdim=True)) * scale) @ w + b

    counts = mask.sum(dim=1, keepdim=True)
    symptoms = [PADDING_IN_MEAN.looks_like(finish((x * mask.unsqueeze(-1)).mean(dim=1))),
                PADDING_IN_MEAN.looks_like(finish(x.mean(dim=1))),
                CENTRED_PER_FEATURE.looks_like(finish((x * mask.unsqueeze(-1)).sum(dim=1) / counts, 0))]
    if n > 1:   # the (n, n, d) product summed or averaged over its second axis: every mask of the batch in each
        symptoms += [MASK_ACROSS_BATCH.looks_like(finish((mask @ x).sum(dim=1) / counts)),
                     MASK_ACROSS_BATCH.looks_like(finish((mask @ x).mean(dim=1) / counts))]
    if length == d:
        symptoms.append(MASK_ON_FEATURES.looks_like(mask_on_features(x, mask, w, b, scale)))
    if n == d:
        symptoms.append(COUNT_PER_FEATURE.looks_like(finish((x * mask.unsqueeze(-1)).sum(dim=1) / mask.sum(dim=1))))
    return symptoms


def _mask(gen, n: int, length: int, full: bool = False, left: bool = False) -> Tensor:
    """A float64 mask of 1 (a real token) and 0 (padding): every sentence holds 1 to L real tokens, padded at the
    end (or at the start, ``left``); ``full``: no padding at all."""
    mask = torch.zeros((n, length), dtype=torch.float64)
    for row in range(n):
        real = length if full else randint(gen, 1, length)
        if left:
            mask[row, length - real:] = 1
        else:
            mask[row, :real] = 1
    if not full and bool(mask.all()):
        mask[0, -1 if not left else 0] = 0 if length > 1 else 1
    return mask


def _case(gen, n: int, length: int, d: int, **mask_options) -> tuple[Tensor, ...]:
    x = torch.rand((n, length, d), generator=gen, dtype=torch.float64) * 4 - 2
    w, scale = (torch.rand(d, generator=gen, dtype=torch.float64) * 2 - 1 for _ in range(2))
    return x, _mask(gen, n, length, **mask_options), w, torch.rand((), generator=gen, dtype=torch.float64), scale


def _cases(grading_seed: int | None) -> list[tuple[Tensor, ...]]:
    """The corners, the same at every seed: L == d with padding (an elementwise mask on the features runs and is
    wrong); L != d; no padding at all; one sentence of one token; n == d (a count of shape (n,) runs);
    padding at the start. Then two cases of fixed (public) or drawn (hidden) sizes."""
    gen = case_stream("08/score/corners", None)
    cases = [_case(gen, 3, 4, 4), _case(gen, 2, 3, 5), _case(gen, 3, 4, 4, full=True), _case(gen, 1, 1, 2),
             _case(gen, 3, 5, 3), _case(gen, 4, 3, 3, left=True)]
    gen = case_stream("08/score", grading_seed)
    for _ in range(2):
        cases.append(_case(gen, randint(gen, 2, 5), randint(gen, 2, 6), randint(gen, 2, 5)))
    return cases


def _run(score_fn, x: Tensor, mask: Tensor, w: Tensor, b: Tensor, scale: Tensor) -> None:
    __tracebackhide__ = True
    n, length, d = x.shape
    what = (f"score(x {tuple(x.shape)}, mask {tuple(mask.shape)} with {int(mask.sum())} real tokens, "
            f"w {tuple(w.shape)}, b (), scale {tuple(scale.shape)})")
    leaves = [t.clone().requires_grad_(True) for t in (w, b, scale)]
    try:
        value = call_learner(score_fn, x.clone(), mask.clone(), *leaves, what=what)
    except GradingFailure as failure:
        sizes = failure.proven is None and any(text in failure.message for text in BROADCAST_ERRORS)
        suspects = [m for m, fits in ((MASK_ON_FEATURES, length != d), (COUNT_PER_FEATURE, n != d)) if fits]
        if not sizes:
            raise
        raise GradingFailure(failure.message, suspects=tuple(suspects)) from None
    got = as_answer(value, what=what)
    if tuple(got.shape) != (n,):
        table = buggy_score(x, mask, w, b, scale)
        suspects = ((MASK_ACROSS_BATCH,) if got.shape == table.shape
                    and torch.allclose(got.detach().to(table.dtype), table) else ())
        raise GradingFailure(f"{what} returned shape {tuple(got.shape)}; expected ({n},), one score per sentence.",
                             suspects=suspects)
    expect_close(got, intended_score(x, mask, w, b, scale), what=what, source="expected", rtol=1e-10, atol=1e-12,
                 symptoms=_variants(x, mask, w, b, scale), extra=f"  mask: {mask.tolist()}")
    if not (isinstance(value, Tensor) and value.requires_grad):
        raise proven_failure(f"{what} returned scores that are not attached to w, b and scale "
                             "(requires_grad=False).", DETACHED)
    grads = call_learner(torch.autograd.grad, value.sum(), leaves, allow_unused=True, what=f"backward through {what}")

    def total(w_, b_, scale_):
        return intended_score(x, mask, w_, b_, scale_).sum()

    for name, grad, want, fd in zip(("w", "b", "scale"), grads, autograd_gradient(total, w, b, scale),
                                    central_difference(total, w, b, scale)):
        expect_close(torch.zeros_like(want) if grad is None else grad, want, fd=fd,
                     what=f"the gradient of the summed scores of {what} with respect to {name}")


@check
def check_score(score_fn, grading_seed: int | None = None) -> None:
    """Part C: the fixed score(x, mask, w, b, scale) returns the (n,) scores of the text's formula, attached to w, b
    and scale, with the formula's gradients, leaving its arguments unchanged (no backward of its own).

    Domain: x (n, L, d), mask (n, L) of 0.0 and 1.0 with at least one 1 per sentence, w and scale (d,), b 0-d, all
    float64, n, L >= 1, d >= 2; w, b and scale require grad. Corners at every seed (:func:`_cases`): L == d with
    padding, L != d, no padding, one sentence of one token, n == d, padding at the start; then two cases of fixed
    (public) or drawn (hidden) sizes.

    Contracts checked: the arguments unchanged, the scores of shape (n,) and attached to w, b and scale."""
    __tracebackhide__ = True
    for x, mask, w, b, scale in _cases(grading_seed):
        with trial():
            _run(score_fn, x, mask, w, b, scale)
