"""Checks for exercise 07, depth, one module per part: the size of the gradient at every layer of a deep
linear-tanh chain, by hand and without leaving float64's range (:mod:`.chain`); per-example clipping, each
example's gradient clipped by its own global norm before the mean (:mod:`.clipping`); per-layer gradient norms
collected with hooks, on models where one Linear runs twice (:mod:`.hooks`); :mod:`.misconceptions` holds every
mistake they name, :mod:`.hints` the hint book.

Every check first runs its corner cases (the edges of the domain its docstring states), the same at every seed, then
the cases it draws; the cases are built so that each catalogued mistake shows in at least two of them, visible and
hidden.
"""

from .chain import check_log10_gradient_profile
from .clipping import check_per_example_clip
from .hints import hint
from .hooks import check_layer_grad_norms

__all__ = ["check_layer_grad_norms", "check_log10_gradient_profile", "check_per_example_clip", "hint"]
