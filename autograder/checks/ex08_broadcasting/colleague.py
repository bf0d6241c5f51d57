"""Part C's given library: a colleague's sentence scorer in four stages, each a torch.autograd.Function whose backward
is written by hand (to keep fewer tensors alive). The notebook treats them as a compiled extension it cannot read: the
learner finds which backward is wrong by probing, not by reading this file.

Shapes: x (n, L, d) token features, mask (n, L) of 0.0 / 1.0 (at least one 1 per row), p, q, z (n, d), scale and w
(d,), b 0-d; the scores are (n,). Every forward is right; one backward is not.
"""

from __future__ import annotations

import torch

Tensor = torch.Tensor


class _Pool(torch.autograd.Function):
    """p = each sentence's mean over its real tokens."""

    @staticmethod
    def forward(ctx, x: Tensor, mask: Tensor) -> Tensor:
        weights = mask.unsqueeze(-1) / mask.sum(dim=1, keepdim=True).unsqueeze(-1)    # (n, L, 1)
        ctx.save_for_backward(weights)
        return (x * weights).sum(dim=1)

    @staticmethod
    def backward(ctx, grad: Tensor):
        weights, = ctx.saved_tensors
        return grad.unsqueeze(1) * weights, None


class _Scale(torch.autograd.Function):
    """q = p * scale, feature by feature."""

    @staticmethod
    def forward(ctx, p: Tensor, scale: Tensor) -> Tensor:
        ctx.save_for_backward(p, scale)
        return p * scale

    @staticmethod
    def backward(ctx, grad: Tensor):
        p, scale = ctx.saved_tensors
        return grad * scale, (grad * p).sum(dim=0)


class _Centre(torch.autograd.Function):
    """z = q minus each row's own mean."""

    @staticmethod
    def forward(ctx, q: Tensor) -> Tensor:
        return q - q.mean(dim=-1, keepdim=True)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad - grad.mean(dim=0)


class _Head(torch.autograd.Function):
    """s = z @ w + b."""

    @staticmethod
    def forward(ctx, z: Tensor, w: Tensor, b: Tensor) -> Tensor:
        ctx.save_for_backward(z, w)
        return z @ w + b

    @staticmethod
    def backward(ctx, grad: Tensor):
        z, w = ctx.saved_tensors
        return grad.unsqueeze(1) * w, (grad.unsqueeze(1) * z).sum(dim=0), grad.sum()


pool, scale, centre, head = _Pool.apply, _Scale.apply, _Centre.apply, _Head.apply

#: The stages by the names the notebook uses, in the order the scorer calls them.
STAGES = {"pool": pool, "scale": scale, "centre": centre, "head": head}


def given_score(x: Tensor, mask: Tensor, w: Tensor, b: Tensor, scale_: Tensor) -> Tensor:
    """The colleague's scorer, as the notebook shows it."""
    return head(centre(scale(pool(x, mask), scale_)), w, b)
