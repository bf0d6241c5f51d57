"""Part C: attention's backward as FlashAttention runs it. The forward kept only O and each query's log-sum-exp
(lse); the backward walks the keys in blocks of ``block`` columns, recomputing each block of P from the scores and
lse, and never creates a tensor of the (..., n, m) score matrix's size. Gradients are compared with autograd and
central differences through F.scaled_dot_product_attention; the largest tensor the function creates is measured
with a dispatch mode that sees every tensor an operation returns."""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from ...checking import GradingFailure, check, proven_failure, trial
from ...routes import TORCH_EXITS, CallWatch, LargestTensor
from ...seeding import choice, uniform
from ..cases import case_stream, randint
from .common import Case, literal_symptoms, make_case, run_case
from .misconceptions import (
    BLOCK_MASK_LOCAL,
    BLOCK_ROW_SUM,
    BLOCK_SOFTMAX,
    CAUSAL_IGNORED,
    FULL_SCORE_MATRIX,
    MASK_BOTTOM_RIGHT,
    MASK_WRONG_TRIANGLE,
    MISSING_SCALE,
    NO_SOFTMAX_BACKWARD,
    SCALE_BY_D,
)

Tensor = torch.Tensor


def _visible(n: int, m: int, mask: str) -> Tensor | None:
    """Which keys each query sees: PyTorch's top-left causal mask ("causal"), the usual wrong ones, or None."""
    ones = torch.ones(n, m, dtype=torch.bool)
    return {"none": None, "causal": ones.tril(), "bottom right": ones.tril(m - n), "future": ones.triu(),
            "strict": ones.tril(-1)}[mask]


def _block_local(n: int, m: int, block: int) -> Tensor:
    """The causal mask written in each block's own column numbers (the block's offset forgotten)."""
    return torch.arange(m).remainder(block).unsqueeze(0) <= torch.arange(n).unsqueeze(-1)


def _gradients(Q, K, V, output, lse, dO, *, block: int, mask: Tensor | None, scale: float, d_rows: str = "output",
               p_from: str = "lse", softmax: bool = True) -> tuple[Tensor, Tensor, Tensor]:
    """(dQ, dK, dV) from P recomputed as the knobs say: ``mask`` (None: not re-applied), ``scale`` on dQ and dK,
    ``d_rows`` the row term D ("output": rowsum(dO∘O) with the true O; "block": rowsum(dP∘P) within each block),
    ``p_from`` ("lse", or "block": a softmax within each block), ``softmax`` False for dS = dP."""
    tau = 1 / math.sqrt(Q.shape[-1])
    S = Q @ K.transpose(-2, -1) * tau
    if mask is not None:
        S = S.masked_fill(~mask, -math.inf)
    m = S.shape[-1]
    starts = range(0, m, block)
    if p_from == "block":
        P = torch.cat([torch.softmax(S[..., s:s + block], dim=-1) for s in starts], dim=-1)
    else:
        P = torch.exp(S - lse.unsqueeze(-1))
    dP = dO @ V.transpose(-2, -1)
    if d_rows == "block":
        D = torch.cat([(dP[..., s:s + block] * P[..., s:s + block]).sum(dim=-1, keepdim=True)
                       .expand(*P.shape[:-1], min(block, m - s)) for s in starts], dim=-1)
    else:
        D = (dO * output).sum(dim=-1, keepdim=True)
    dS = P * (dP - D) if softmax else dP
    return scale * dS @ K, scale * dS.transpose(-2, -1) @ Q, P.transpose(-2, -1) @ dO


def _forward(Q: Tensor, K: Tensor, V: Tensor, causal: bool) -> tuple[Tensor, Tensor]:
    """What FlashAttention's forward keeps: O and each query's log-sum-exp of its (masked) scores."""
    S = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    visible = _visible(S.shape[-2], S.shape[-1], "causal" if causal else "none")
    if visible is not None:
        S = S.masked_fill(~visible, -math.inf)
    return torch.softmax(S, dim=-1) @ V, torch.logsumexp(S, dim=-1)


def _attention_case(Q: Tensor, K: Tensor, V: Tensor, dO: Tensor, causal: bool, block: int) -> Case:
    n, d = Q.shape[-2:]
    m = K.shape[-2]
    tau = 1 / math.sqrt(d)
    output, lse = _forward(Q, K, V, causal)
    right = {"block": block, "mask": _visible(n, m, "causal" if causal else "none"), "scale": tau}
    variants = [(MISSING_SCALE, {**right, "scale": 1.0}), (SCALE_BY_D, {**right, "scale": 1 / d}),
                (NO_SOFTMAX_BACKWARD, {**right, "softmax": False}), (BLOCK_ROW_SUM, {**right, "d_rows": "block"}),
                (BLOCK_SOFTMAX, {**right, "p_from": "block"})]
    if causal:
        variants += [(CAUSAL_IGNORED, {**right, "mask": None}),
                     (MASK_BOTTOM_RIGHT, {**right, "mask": _visible(n, m, "bottom right")}),
                     (MASK_WRONG_TRIANGLE, {**right, "mask": _visible(n, m, "future")}),
                     (BLOCK_MASK_LOCAL, {**right, "mask": _block_local(n, m, block)})]
    wrong = [(mistake, _gradients(Q, K, V, output, lse, dO, **knobs)) for mistake, knobs in variants]
    symptoms = tuple(literal_symptoms([(mistake, grads[i]) for mistake, grads in wrong]) for i in range(3))

    def loss(Q, K, V):
        return (F.scaled_dot_product_attention(Q, K, V, is_causal=causal) * dO).sum()

    options = {"causal": True} if causal else {}
    options["block"] = block
    unseen = f", keys {n}..{m - 1} seen by no query" if causal and m > n else ""
    return make_case("attention_backward", {"Q": Q, "K": K, "V": V, "O": output, "lse": lse, "dO": dO},
                     {"dQ": "Q", "dK": "K", "dV": "V"}, loss, (Q, K, V), symptoms, options=options,
                     note=f"n = {n} queries, m = {m} keys in blocks of {block}, d = {d} (√d = {math.sqrt(d):g})"
                          f"{unseen}")


def _expect_small(largest: LargestTensor, case: Case) -> None:
    """No tensor larger than the largest argument or result, or than one block of scores (..., n, block)."""
    __tracebackhide__ = True
    Q, K = case.args["Q"], case.args["K"]
    block = case.options["block"]
    lead, n, m = math.prod(Q.shape[:-2]), Q.shape[-2], K.shape[-2]
    one_block, biggest = lead * n * min(block, m), max(t.numel() for t in case.args.values())
    if largest.numel > max(one_block, biggest):
        raise proven_failure(
            f"{case.call}: your function created a tensor of shape {largest.shape} ({largest.numel} numbers); one "
            f"block of scores holds {one_block} numbers and the largest argument {biggest}, while the whole score "
            f"matrix (..., n, m) holds {lead * n * m}.\n  here:               {case.note}", FULL_SCORE_MATRIX)


#: Part C's corners, (leading dimensions, n, m, d, e, causal, block), tried at every seed: one query and d = 1 with
#: one block; one key, causal; causal with fewer queries than keys and a last block shorter than the others; causal
#: with more queries than keys; blocks of 1 over a batch; a long causal sequence whose score matrix is 8 times a
#: block (the measurement's case).
ATTENTION_CORNERS = [((), 1, 3, 1, 2, False, 4), ((), 3, 1, 4, 1, True, 2), ((), 3, 7, 4, 3, True, 3),
                     ((), 6, 4, 9, 2, True, 2), ((2,), 4, 4, 4, 2, True, 1), ((2,), 24, 24, 3, 2, True, 3)]


@check
def check_attention_backward(attention_backward, grading_seed: int | None = None) -> None:
    """Part C: for O = F.scaled_dot_product_attention(Q, K, V, is_causal=causal) with lse = logsumexp of each query's
    (masked, scaled) scores, attention_backward(Q, K, V, O, lse, dO, causal=False, block=...) returns (dQ, dK, dV), by
    hand (no autograd), new float64 tensors, arguments unchanged, and no tensor it creates is larger than its largest
    argument or result or than one block of scores (..., n, block).

    Domain: Q (..., n, d), K (..., m, d), V (..., m, e), O and dO (..., n, e), lse (..., n), float64, the same leading
    dimensions (none, or batch and heads), n, m, d, e >= 1, values of order 1; causal a bool keyword, left out when
    False; block an int >= 1, m a multiple of it or not. Corners at every seed (:data:`ATTENTION_CORNERS`); then an
    unmasked case with batch and a causal one with batch and heads, n and m >= 8 times block (public: fixed; hidden:
    drawn)."""
    __tracebackhide__ = True
    gen = case_stream("04/attention", grading_seed)
    if grading_seed is None:
        sizes = [((2,), 10, 17, 4, 3, False, 2), ((2, 2), 16, 12, 3, 2, True, 1)]
    else:
        sizes = [((randint(gen, 1, 3),), randint(gen, 9, 16), randint(gen, 16, 20), choice(gen, [1, 4]),
                  randint(gen, 1, 3), False, 2),
                 ((randint(gen, 1, 2), randint(gen, 2, 3)), randint(gen, 8, 16), randint(gen, 8, 16),
                  choice(gen, [1, 2]), randint(gen, 1, 2), True, 1)]
    for lead, n, m, d, e, causal, block in ATTENTION_CORNERS + sizes:
        Q, K, V = uniform(gen, (*lead, n, d), -1, 1), uniform(gen, (*lead, m, d), -1, 1), uniform(gen, (*lead, m, e))
        case = _attention_case(Q, K, V, uniform(gen, (*lead, n, e), -1, 1), causal, block)
        largest, leaving = LargestTensor(), CallWatch(names=TORCH_EXITS)

        @functools.wraps(attention_backward)
        def measured(*args, largest=largest, leaving=leaving, **kwargs):
            with leaving, largest:
                return attention_backward(*args, **kwargs)

        with trial():
            run_case(measured, case)
            if leaving.used:
                exits = ", ".join(sorted(set(leaving.seen)))
                raise GradingFailure(f"{case.call} took tensors out of torch (Tensor.{exits}"
                                     "): the test measures every tensor your function creates and cannot follow NumPy "
                                     "arrays or Python lists, so the part asks for torch operations only.")
            _expect_small(largest, case)
