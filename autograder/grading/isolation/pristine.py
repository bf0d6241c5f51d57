"""The checks' world as it was before any submission code ran, and how to put it back.

A test cell runs in the same interpreter as the submission, so a submission can monkeypatch what the checks rely on
(``torch.allclose``, ``torch.Tensor.__le__``, ``math.isclose``, ``autograder.checking.expect_close``,
``sys.modules['autograder.checks.ex01_chain_rule']``, ``builtins.isinstance``...). nbgrader restores a test cell's
*source*, not these objects.

:func:`take` records, in the fork server before any notebook code runs, the namespace of every protected module
(:data:`PROTECTED`) and of every class defined in one, and returns ``restore(full=True)``, which puts back every name
that was changed or deleted (and a module's ``__class__``, a class's ``__bases__``). The kernel restores everything
before each instructor cell; the :data:`CORE` (the modules the checks' comparisons run through) is restored also every
time learner code returns to a check: ``autograder.checking`` raises the audit event
:data:`autograder.checking.LEARNER_RETURNED`, which the confined child's audit hook (:mod:`.confine`) answers. Names
a submission *added* to a module are kept (code that existed before cannot see them); names added to a class are
removed (they would override inherited ones, e.g. ``__eq__``). Function objects cannot be changed at all: the audit
hook refuses new ``__code__``/``__defaults__``/``__kwdefaults__`` for them.

``restore`` is a closure whose builtins are bound as default arguments when this module is imported, so it works even
when the submission has replaced ``builtins.map`` or this module's globals. The fast path checks, in C, that every
value of a namespace is *the same object* as recorded (``operator.is_``: never an ``__eq__`` a submission could
define); the full restore takes a few milliseconds, the core a fraction of one.
"""

from __future__ import annotations

import operator
import sys
import types
from collections.abc import Callable

#: Top-level packages whose modules (and the classes defined in them) are protected.
PROTECTED = ("autograder", "torch", "numpy", "math", "cmath", "builtins", "operator", "functools", "warnings", "os",
             "posixpath", "json", "zlib", "copy", "numbers", "re", "random", "types", "collections", "abc", "enum",
             "dataclasses", "contextlib", "statistics", "fractions", "decimal", "itertools", "io", "signal")

#: The core: what the checks' comparisons run through. Restored also every time learner code returns to a check.
CORE = ("builtins", "math", "operator", "functools", "warnings", "torch", "torch._tensor", "torch.functional",
        "torch.autograd", "torch.autograd.grad_mode", "torch.autograd.graph", "torch.autograd.function",
        "torch.autograd.functional", "torch.nn.functional", "torch.nn.parameter", "torch.nn.modules.module",
        "torch.overrides", "torch.testing._comparison", "numpy")

_HEAPTYPE = 1 << 9


def _protected(name) -> bool:
    return isinstance(name, str) and name.split(".", 1)[0] in PROTECTED


def _core(name) -> bool:
    """A core module: one of :data:`CORE`, or the course package (not this grader's own modules, whose functions are
    bound where they are used)."""
    return isinstance(name, str) and (name in CORE or (name.split(".", 1)[0] == "autograder"
                                                       and not name.startswith("autograder.grading")))


def _core_class(cls: type, outside: frozenset[str]) -> bool:
    """A class of the core: defined in a core module, not a binding of torch's C++ (its JIT graph, dispatch keys...:
    nothing a check compares with)."""
    module = vars(cls).get("__module__")
    return _core(module) and module not in outside and type(cls).__name__ != "pybind11_type"


def take(outside_core: frozenset[str] = frozenset()) -> Callable[..., int]:
    """Record every protected module loaded now; return ``restore(full=True) -> number of things repaired``.

    ``restore(full=False)`` repairs only the :data:`CORE` modules and their classes (a fraction of a millisecond);
    ``outside_core`` names modules that would be core but are restored only before instructor cells (the check
    modules of other exercises). The core is walked every time learner code returns to a check, so its size is the
    grader's largest cost per submission.
    """
    import warnings

    with warnings.catch_warnings():  # reading every attribute trips torch's deprecation warnings
        warnings.simplefilter("ignore")
        return _take(outside_core)


def _record(owner, is_class: bool) -> list:
    """[owner, its namespace (modules) or None (classes), pristine items, values last seen, is_class, type, bases]"""
    namespace = vars(owner)
    return [owner, None if is_class else namespace, dict(namespace), tuple(namespace.values()), is_class,
            type(owner), owner.__bases__ if is_class else None]


def _take(outside: frozenset[str]) -> Callable[..., int]:
    modules = {name: module for name, module in list(sys.modules.items())
               if isinstance(module, types.ModuleType) and _protected(name)}
    classes: dict[int, type] = {}
    for module in modules.values():
        for value in list(vars(module).values()):
            if isinstance(value, type) and value.__flags__ & _HEAPTYPE and _protected(vars(value).get("__module__")):
                classes[id(value)] = value
    core = [_record(m, False) for n, m in modules.items() if _core(n) and n not in outside]
    core += [_record(c, True) for c in classes.values() if _core_class(c, outside)]
    rest = [_record(m, False) for n, m in modules.items() if not (_core(n) and n not in outside)]
    rest += [_record(c, True) for c in classes.values() if not _core_class(c, outside)]
    functions = set()
    for record in core + rest:
        for value in record[2].values():
            value = getattr(value, "__func__", value) if isinstance(value, (staticmethod, classmethod)) else value
            if isinstance(value, types.FunctionType):
                functions.add(id(value))
    restore = _restorer(tuple(core), tuple(rest), tuple(modules.items()), sys.modules)
    #: ids of the protected modules' and classes' functions, whose code and defaults the sandbox freezes
    restore.functions = frozenset(functions)
    return restore


def _restorer(core, rest, modules, table, _len=len, _list=list, _map=map, _all=all, _is=operator.is_, _vars=vars,
              _type=type, _set=set, _str=str, _tuple=tuple, _setattr=setattr, _delattr=delattr, _object=object):
    missing = _object()
    only_str = {_str}

    def repair(records, _len=_len, _list=_list, _map=_map, _all=_all, _is=_is, _vars=_vars, _type=_type, _set=_set,
               _str=_str, _tuple=_tuple, _setattr=_setattr, _delattr=_delattr) -> int:
        changed = 0
        for record in records:
            owner, namespace, items, seen, is_class, kind, bases = record
            if _type(owner) is not kind:  # e.g. torch.__class__ = a ModuleType subclass with __getattribute__
                owner.__class__ = kind
                changed += 1
            if is_class:
                if owner.__bases__ is not bases:
                    owner.__bases__ = bases
                    changed += 1
                namespace = _vars(owner)
            if _len(namespace) == _len(seen) and _all(_map(_is, namespace.values(), seen)):
                continue
            if is_class:
                for key in [k for k in namespace if k not in items]:
                    _delattr(owner, key)
                    changed += 1
                for key, value in items.items():
                    if namespace.get(key, missing) is not value:
                        _setattr(owner, key, value)
                        changed += 1
            else:
                if _set(_map(_type, namespace)) != only_str:  # a key with its own __hash__/__eq__: drop it unseen
                    kept = [(k, v) for k, v in _list(namespace.items()) if _type(k) is _str]
                    namespace.clear()
                    namespace.update(kept)
                    changed += 1
                for key, value in items.items():
                    if namespace.get(key, missing) is not value:
                        namespace[key] = value
                        changed += 1
            record[3] = _tuple(namespace.values())
        return changed

    def restore(full: bool = True, _repair=repair, _core=core, _rest=rest, _set=_set, _map=_map, _type=_type,
                _list=_list, _str=_str) -> int:
        changed = 0
        if _set(_map(_type, table)) != only_str:
            kept = [(k, v) for k, v in _list(table.items()) if _type(k) is _str]
            table.clear()
            table.update(kept)
            changed += 1
        for name, module in modules:
            if table.get(name) is not module:
                table[name] = module
                changed += 1
        changed += _repair(_core)
        if full:
            changed += _repair(_rest)
        return changed

    return restore
