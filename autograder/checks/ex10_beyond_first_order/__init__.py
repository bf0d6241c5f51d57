"""Checks for exercise 10, beyond first order, one module per part: a Hessian-vector product by double backward for
a function of several tensors (:mod:`.hvp`), Hutchinson's estimate of the Hessian's diagonal with random sign probes,
one H·z per probe (:mod:`.hutchinson`), the WGAN-GP gradient penalty at interpolates (:mod:`.penalty`), per-example
gradient clipping with torch.func, the DP-SGD step (:mod:`.clipping`), activation checkpointing in groups of k blocks
(:mod:`.checkpoint`); :mod:`.misconceptions` holds every mistake they name.

Every check first runs its corner cases (the edges of the domain its docstring states), the same at every seed, then
the cases it draws. Oracles: the full Hessian by autograd and finite differences of gradients (Parts A, B), a loop of
per-example backward passes (Part D), central differences of the penalty (Part C), a plain forward from the same
random state (Part E).
"""

from .checkpoint import check_checkpointed_forward
from .clipping import check_clipped_mean_gradient
from .hutchinson import check_hessian_diagonal, check_rademacher_probes
from .hvp import check_hvp
from .penalty import check_gradient_penalty

__all__ = ["check_checkpointed_forward", "check_clipped_mean_gradient", "check_gradient_penalty",
           "check_hessian_diagonal", "check_hvp", "check_rademacher_probes"]
