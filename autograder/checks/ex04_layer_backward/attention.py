"""Part C: scaled dot-product attention's backward pass, by hand, for any leading (batch, head) dimensions, with and
without the causal mask of F.scaled_dot_product_attention(..., is_causal=True)."""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ...checking import check, trial
from ...seeding import choice, uniform
from ..cases import case_stream, randint
from .common import Case, distinct, literal_symptoms, make_case, run_case
from .misconceptions import (
    CAUSAL_IGNORED,
    MASK_BOTTOM_RIGHT,
    MASK_WRONG_TRIANGLE,
    MASKED_AFTER_SOFTMAX,
    MISSING_SCALE,
    NO_SOFTMAX_BACKWARD,
    SCALE_BY_D,
    SOFTMAX_ELEMENTWISE,
    TRANSPOSED_DV,
)

Tensor = torch.Tensor


def _visible(n: int, m: int, mask: str) -> Tensor | None:
    """Which keys each query sees: PyTorch's top-left causal mask ("causal"), the usual wrong ones, or None."""
    ones = torch.ones(n, m, dtype=torch.bool)
    return {"none": None, "causal": ones.tril(), "bottom right": ones.tril(m - n), "future": ones.triu(),
            "strict": ones.tril(-1)}[mask]


def _attention_gradients(Q, K, V, dO, *, forward_scale: float, backward_scale: float, softmax: str = "jacobian",
                         mask: str = "none", mask_after: bool = False) -> tuple[Tensor, Tensor, Tensor]:
    """(dQ, dK, dV) of a hand-written attention backward, with the knobs that reproduce the usual mistakes."""
    S = Q @ K.transpose(-2, -1) * forward_scale
    visible = _visible(S.shape[-2], S.shape[-1], mask)
    if visible is not None and not mask_after:
        S = S.masked_fill(~visible, -math.inf)
    P = torch.softmax(S, dim=-1)
    if visible is not None and mask_after:
        P = P * visible
    dP = dO @ V.transpose(-2, -1)
    dS = {"jacobian": lambda: P * (dP - (dP * P).sum(dim=-1, keepdim=True)),
          "elementwise": lambda: P * (1 - P) * dP, "none": lambda: dP}[softmax]()
    return backward_scale * dS @ K, backward_scale * dS.transpose(-2, -1) @ Q, P.transpose(-2, -1) @ dO


def _attention_case(Q: Tensor, K: Tensor, V: Tensor, dO: Tensor, causal: bool) -> Case:
    n, d = Q.shape[-2:]
    m = K.shape[-2]
    tau = 1 / math.sqrt(d)
    right = dict(forward_scale=tau, backward_scale=tau, mask="causal" if causal else "none")
    variants = [(MISSING_SCALE, {**right, "backward_scale": 1.0}),
                (MISSING_SCALE, {**right, "forward_scale": 1.0, "backward_scale": 1.0}),
                (SCALE_BY_D, {**right, "forward_scale": 1 / d, "backward_scale": 1 / d}),
                (SCALE_BY_D, {**right, "backward_scale": 1 / d}),
                (SOFTMAX_ELEMENTWISE, {**right, "softmax": "elementwise"}),
                (NO_SOFTMAX_BACKWARD, {**right, "softmax": "none"})]
    if causal:
        variants += [(CAUSAL_IGNORED, {**right, "mask": "none"}), (MASKED_AFTER_SOFTMAX, {**right, "mask_after": True}),
                     (MASK_BOTTOM_RIGHT, {**right, "mask": "bottom right"}),
                     (MASK_WRONG_TRIANGLE, {**right, "mask": "future"}),
                     (MASK_WRONG_TRIANGLE, {**right, "mask": "strict"})]
    wrong = [(mistake, _attention_gradients(Q, K, V, dO, **knobs)) for mistake, knobs in variants]
    mistakes = [[(mistake, grads[i]) for mistake, grads in wrong] for i in range(3)]
    if Q.dim() == 2 and not causal:
        P = torch.softmax(Q @ K.T * tau, dim=-1)
        mistakes[2].append((TRANSPOSED_DV, dO.T @ P))
    symptoms = tuple(literal_symptoms(found) for found in mistakes)

    def loss(Q, K, V):
        return (F.scaled_dot_product_attention(Q, K, V, is_causal=causal) * dO).sum()

    unseen = f", keys {n}..{m - 1} seen by no query" if causal and m > n else ""
    return make_case("attention_backward", {"Q": Q, "K": K, "V": V, "dO": dO}, {"dQ": "Q", "dK": "K", "dV": "V"},
                     loss, (Q, K, V), symptoms, options={"causal": True} if causal else {},
                     note=f"n = {n} queries, m = {m} keys, d = {d} (√d = {math.sqrt(d):g}){unseen}")


#: Part C's corners, (leading dimensions, n, m, d, e, causal), tried at every seed: one query with d = 1, one key with
#: e = 1 and the mask on, causal with fewer queries than keys (the last keys are seen by no query) and with more,
#: causal over a batch of two.
ATTENTION_CORNERS = [((), 1, 3, 1, 2, False), ((), 3, 1, 4, 1, True), ((), 2, 5, 4, 3, True), ((), 5, 3, 9, 2, True),
                     ((2,), 4, 4, 4, 2, True)]


@check
def check_attention_backward(attention_backward, grading_seed: int | None = None) -> None:
    """Part C: for O = F.scaled_dot_product_attention(Q, K, V, is_causal=causal), attention_backward(Q, K, V, dO,
    causal=False) returns (dQ, dK, dV), by hand (no autograd), new float64 tensors, arguments unchanged; called with
    four arguments it is the unmasked attention's backward.

    Domain: Q (..., n, d), K (..., m, d), V (..., m, e), dO (..., n, e), float64, the same leading dimensions (none,
    or batch and heads), n, m, d, e >= 1, values of order 1; causal a bool keyword, left out when False. Corners at
    every seed (:data:`ATTENTION_CORNERS`): n = 1 with d = 1, m = 1 causal, causal with n < m (unseen keys: dK and dV
    rows 0) and n > m, causal over a batch; then an unmasked 2-D case and a causal case with batch and heads, n != m
    and d in (4, 9, 16) (public: fixed; hidden: drawn)."""
    __tracebackhide__ = True
    gen = case_stream("04/attention", grading_seed)
    if grading_seed is None:
        sizes = [((), 3, 5, 4, 2, False), ((2, 2), 3, 4, 9, 3, True)]
    else:
        sizes = [((), *distinct(gen, 2), choice(gen, [4, 9, 16]), randint(gen, 2, 4), False),
                 ((randint(gen, 1, 2), randint(gen, 2, 3)), *distinct(gen, 2), choice(gen, [4, 9, 16]),
                  randint(gen, 2, 4), True)]
    for lead, n, m, d, e, causal in ATTENTION_CORNERS + sizes:
        Q, K, V = uniform(gen, (*lead, n, d), -1, 1), uniform(gen, (*lead, m, d), -1, 1), uniform(gen, (*lead, m, e))
        case = _attention_case(Q, K, V, uniform(gen, (*lead, n, e), -1, 1), causal)
        with trial():
            run_case(attention_backward, case)
