"""Part C's given library: a colleague's sentence scorer in four stages, each a torch.autograd.Function whose backward
is written by hand (to keep fewer tensors alive). The notebook treats them as a compiled extension it cannot read: the
learner finds which backward is wrong by probing, not by reading this file.

Shapes: x (n, L, d) token features, mask (n, L) of 0.0 / 1.0 (at least one 1 per row), data with no gradient;
scale and w (d,), b 0-d; q (n, L, d), p and z (n, d); the scores are (n,). Every forward is right; one backward is
not, and only on batches whose sentences have different numbers of real tokens.
"""

from __future__ import annotations

import torch

Tensor = torch.Tensor


class _Scale(torch.autograd.Function):
    """q = x * scale, every token's features scaled feature by feature."""

    @staticmethod
    def forward(ctx, x: Tensor, scale: Tensor) -> Tensor:
        ctx.save_for_backward(x, scale)
        return x * scale

    @staticmethod
    def backward(ctx, grad: Tensor):
        x, scale = ctx.saved_tensors
        return grad * scale, (grad * x).reshape(-1, x.shape[-1]).sum(dim=0)


class _Pool(torch.autograd.Function):
    """p = each sentence's mean over its real tokens; the mask is data."""

    @staticmethod
    def forward(ctx, q: Tensor, mask: Tensor) -> Tensor:
        ctx.save_for_backward(mask)
        ctx.tokens = mask.sum() / max(len(mask), 1)            # one number kept instead of n counts
        return (q * mask.unsqueeze(-1)).sum(dim=1) / mask.sum(dim=1, keepdim=True)

    @staticmethod
    def backward(ctx, grad: Tensor):
        mask, = ctx.saved_tensors
        return grad.unsqueeze(1) * mask.unsqueeze(-1) / ctx.tokens, None


class _Centre(torch.autograd.Function):
    """z = p minus each row's own mean."""

    @staticmethod
    def forward(ctx, p: Tensor) -> Tensor:
        return p - p.mean(dim=-1, keepdim=True)

    @staticmethod
    def backward(ctx, grad: Tensor):
        return grad - grad.mean(dim=-1, keepdim=True)


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


scale, pool, centre, head = _Scale.apply, _Pool.apply, _Centre.apply, _Head.apply

#: The stages by the names the notebook uses, in the order the scorer calls them.
STAGES = {"scale": scale, "pool": pool, "centre": centre, "head": head}


def given_score(x: Tensor, mask: Tensor, w: Tensor, b: Tensor, scale_: Tensor) -> Tensor:
    """The colleague's scorer, as the notebook shows it."""
    return head(centre(pool(scale(x, scale_), mask)), w, b)
