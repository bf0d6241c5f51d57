"""How an answer was made: which of PyTorch's machines ran while a learner's function ran.

Where a part says "by hand", "without autograd" or "from scratch", the numbers alone cannot tell an answer that
derived the gradient from one that asked autograd for it. :class:`Routes` watches one call of learner code
(:func:`autograder.checking.call_learner` starts and stops it) and counts:

* ``backward_runs``: reverse-mode autograd runs of any kind (``Tensor.backward``, ``torch.autograd.grad``,
  ``torch.func.grad``/``vjp``/``jacrev``, ``torch.autograd.functional``...). Counted by the engine itself: every
  run gets the next id of a counter inside PyTorch's C++ engine, and a probe reads it before and after the call.
  Learner code cannot reset, hide or switch off that counter (``torch.enable_grad()``, a saved reference to
  ``torch.autograd.grad`` or an engine object all still count);
* ``forward_ad``: forward-mode autograd (``torch.func.jvp``/``jacfwd``, dual numbers), seen by a :class:`CallWatch`
  as calls to ``torch._make_dual``;
* ``backward_kernels``: calls of PyTorch's own backward kernels (``torch.ops.aten.silu_backward`` and every other
  ``aten.*_backward`` op), which autograd runs for a node and learner code may call directly: the same watch sees them;
* ``optimizer_steps``: steps of any ``torch.optim`` optimizer, seen by PyTorch's global optimizer step hook;
* ``clipping``: calls of ``torch.nn.utils``' gradient clipping (``clip_grad_norm_``, ``clip_grad_value_``,
  ``get_total_norm``, ``clip_grads_with_norm_``), seen by wrapping them in their modules for the call.

Each :class:`Route` has the :class:`~autograder.misconceptions.Misconception` a check names when it was forbidden and
used anyway.

:func:`watch_calls` is the one way a check notices a call to a library function the part asks the learner to write
(torch's softmax, ``Tensor.sum_to_size``, batch normalisation...): a :class:`CallWatch` sees every torch call made
inside it, also through saved references or ``nn`` modules, and lets each through unchanged.
"""

from __future__ import annotations

import contextlib
import enum
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.utils
import torch.nn.utils.clip_grad
from torch.optim.optimizer import register_optimizer_step_pre_hook
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from .misconceptions import CourseBug, Misconception

# Bound when this module is imported, so that learner code cannot swap them before a probe.
_current_graph_task_id = torch._C._current_graph_task_id
_len_function_stack = torch._C._len_torch_function_stack
_pop_function_stack = torch._C._pop_torch_function_stack
_make_dual = torch._make_dual
_backward = torch.autograd.backward
_register_hook = torch.Tensor.register_hook
_mul = torch.mul
_ATEN_OPS = (torch._ops.OpOverload, torch._ops.OpOverloadPacket)


class Route(enum.Enum):
    """A machine a part may forbid; the value is how a failure message names it."""

    AUTOGRAD = "autograd (backward(), torch.autograd.grad, torch.func, dual numbers or its aten.*_backward kernels)"
    OPTIMIZER = "a torch.optim optimizer's step()"
    CLIPPING = "torch.nn.utils' gradient clipping"


#: What a check names when a forbidden route was used (proven, so named whatever the numbers).
MISCONCEPTIONS = {
    Route.AUTOGRAD: Misconception(
        "used autograd where the part asks for a hand derivation",
        "This part is about computing the gradient yourself, so PyTorch's autograd must not run inside your function "
        "(no backward(), torch.autograd.grad, torch.func, torch.ops.aten.*_backward kernels or torch.enable_grad() "
        "tricks): derive the formula and "
        "compute it with plain tensor operations.",
        question="Did autograd run inside your function, where the part asks you to derive the gradient yourself?"),
    Route.OPTIMIZER: Misconception(
        "used torch.optim where the part asks you to write the update",
        "This part is about the update itself: write it with tensor operations under torch.no_grad() "
        "instead of calling an optimizer's step().",
        question="Did a torch.optim optimizer make the update the part asks you to write?"),
    Route.CLIPPING: Misconception(
        "used torch.nn.utils.clip_grad_norm_ where the part asks for clipping from scratch",
        "This part is about writing the clipping yourself: compute the global norm from the gradients and "
        "scale them, without torch.nn.utils' clipping functions.",
        question="Did torch.nn.utils' clipping do the work the part asks you to write?"),
}


def _engine_counter() -> int:
    """The id the autograd engine gave to a run of its own (each run takes the next one)."""
    seen: list[int] = []
    with torch.inference_mode(False), torch.enable_grad():
        leaf = torch.zeros((), requires_grad=True)
        node = _mul(leaf, 1.0)
        _register_hook(node, lambda grad: seen.append(_current_graph_task_id()))
        _backward(node)
    if not seen:  # the engine did not run the hook: something is badly wrong, never a learner's mistake
        raise CourseBug("the autograd probe did not run.")
    return seen[0]


class CallWatch(TorchFunctionMode):
    """Notes calls of the given torch functions (by identity) or of any function with one of the given names, and lets
    every call through unchanged. ``seen``: the names of the calls noticed, in order."""

    def __init__(self, functions: Iterable[Callable] = (), names: Iterable[str] = (), backward_kernels: bool = False):
        super().__init__()
        self.functions = tuple(functions)
        self.names = frozenset(names)
        self.backward_kernels = backward_kernels  # also note PyTorch's aten.*_backward ops (seen in ``kernels``)
        self.seen: list[str] = []
        self.kernels: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in self.names or any(func is watched for watched in self.functions):
            self.seen.append(name)
        elif self.backward_kernels and isinstance(func, _ATEN_OPS) and name.split(".")[0].endswith("_backward"):
            self.kernels.append(name)
        return func(*args, **(kwargs or {}))

    @property
    def used(self) -> bool:
        return bool(self.seen)


#: Ways out of torch (to NumPy or to Python lists), where a :class:`LargestTensor` cannot follow: a check that bounds
#: tensor sizes watches these with a :class:`CallWatch` and refuses them.
TORCH_EXITS = ("numpy", "__array__", "tolist")


class LargestTensor(TorchDispatchMode):
    """The largest tensor (number of elements) any operation returns while the mode is on, forward and backward:
    how a check measures a part's memory bound ("never the whole score matrix", "never B copies of the model")."""

    def __init__(self) -> None:
        super().__init__()
        self.numel, self.shape = 0, ()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for tensor in tree_leaves(out):
            if isinstance(tensor, torch.Tensor) and tensor.numel() > self.numel:
                self.numel, self.shape = tensor.numel(), tuple(tensor.shape)
        return out


@contextlib.contextmanager
def watch_calls(functions: Iterable[Callable] = (), *, names: Iterable[str] = ()) -> Iterator[CallWatch]:
    """A :class:`CallWatch` for the block. Leaving it never fails: learner code may have popped torch's mode stack
    (or left modes of its own on it), so the exit pops back to the depth the block started at, whatever is there."""
    depth = _len_function_stack()
    watch = CallWatch(functions, names)
    watch.__enter__()
    try:
        yield watch
    finally:
        while _len_function_stack() > depth:
            _pop_function_stack()


#: (module, attribute) of every gradient-clipping entry point a learner may reach.
_CLIPPING = [(torch.nn.utils.clip_grad, name) for name in
             ("clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "_get_total_norm", "_clip_grads_with_norm_")]
_CLIPPING += [(torch.nn.utils, name) for name in
              ("clip_grad_norm_", "clip_grad_norm", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_")]


@dataclass
class Routes:
    """What one call of learner code used. ``start()`` before the call, ``stop()`` after it (never nested).

    ``dual_numbers``: watch for forward-mode autograd and backward kernels. It is the one watch with a cost that grows
    with the call (a ``TorchFunctionMode`` sees every torch call: a training run took twice as long under it), so a
    call that does not rule autograd out and reads no ``forward_ad`` switches it off."""

    dual_numbers: bool = True
    backward_runs: int = 0
    forward_ad: int = 0
    backward_kernels: int = 0
    optimizer_steps: int = 0
    clipping: int = 0
    _undo: list = field(default_factory=list, repr=False)

    def start(self) -> None:
        self._counter = _engine_counter()
        handle = register_optimizer_step_pre_hook(self._optimizer_step)
        self._undo.append(handle.remove)
        for module, name in _CLIPPING:
            original = getattr(module, name, None)
            if original is not None:
                setattr(module, name, self._counting(original))
                self._undo.append(lambda module=module, name=name, original=original: setattr(module, name, original))
                self._count_inside(original)
        self._depth = _len_function_stack()
        self._dual = CallWatch([_make_dual], backward_kernels=True) if self.dual_numbers else None
        if self._dual is not None:
            self._dual.__enter__()

    def stop(self) -> None:
        """Undo everything ``start`` did (also what learner code left on the function-mode stack), then count."""
        while _len_function_stack() > self._depth:
            _pop_function_stack()
        while self._undo:
            self._undo.pop()()
        self.backward_runs = _engine_counter() - self._counter - 1
        if self._dual is not None:
            self.forward_ad += len(self._dual.seen)
            self.backward_kernels += len(self._dual.kernels)

    def _optimizer_step(self, optimizer, args, kwargs):
        self.optimizer_steps += 1

    def _count_inside(self, wrapper) -> None:
        """Count calls through a reference saved before the watch began (``from torch.nn.utils import
        get_total_norm`` at the top of a cell): torch's clipping functions are ``_no_grad`` wrappers that call the
        function held in their closure, so the function in that cell is wrapped too."""
        for cell in getattr(wrapper, "__closure__", None) or ():
            inner = cell.cell_contents
            if callable(inner) and getattr(inner, "__name__", None) == getattr(wrapper, "__name__", None):
                cell.cell_contents = self._counting(inner)
                self._undo.append(lambda cell=cell, inner=inner: setattr(cell, "cell_contents", inner))

    def _counting(self, function):
        def counted(*args, **kwargs):
            self.clipping += 1
            return function(*args, **kwargs)

        return counted

    def used(self, route: Route) -> bool:
        return {Route.AUTOGRAD: self.backward_runs + self.forward_ad + self.backward_kernels,
                Route.OPTIMIZER: self.optimizer_steps,
                Route.CLIPPING: self.clipping}[route] > 0
