"""Checks for exercise 07, depth, one module per part: the size of the gradient at every layer of a deep
linear-tanh chain, by hand and without leaving float64's range (:mod:`.chain`); global-norm clipping from scratch
(:mod:`.clipping`); per-layer gradient norms collected with hooks, on models where one Linear runs twice
(:mod:`.hooks`); :mod:`.misconceptions` holds every mistake they name, :mod:`.hints` the hint book.

Every check first runs its corner cases (the edges of the domain its docstring states), the same at every seed, then
the cases it draws; the cases are built so that each catalogued mistake shows in at least two of them, visible and
hidden.
"""

from .chain import check_log10_gradient_profile
from .clipping import check_clip_grad_norm
from .hints import hint
from .hooks import check_layer_grad_norms

__all__ = ["check_clip_grad_norm", "check_layer_grad_norms", "check_log10_gradient_profile", "hint"]
