"""Part A of exercise 06: audit_step(step) finds, by measuring, which in-place hazards an optimizer step with momentum
has. The suspects are the notebook's given step (``sgd_momentum_step``, none of the hazards) with its parts swapped
for others: how the first momentum buffer is made, how a later one is updated, whether .grad is edited, and how the
parameter is written. Truth: each suspect's hazards, declared from its parts (:meth:`Suspect.declared`) and checked
against what running it shows (:func:`measured`, the oracle; tests/test_ex06_snippets.py compares the two on every
combination of parts)."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...checking import GradingFailure, Misconception, call_learner, check, trial
from ...seeding import choice
from ..cases import case_stream

#: The four hazards, in the words of the part's text.
SHARES = "buffer shares .grad"
EDITS = ".grad edited"
NEW_MEMORY = "new memory"
SILENT = "silent graph"
HAZARDS = (SHARES, EDITS, NEW_MEMORY, SILENT)

ALIASES = ("alias", "alias_detach", "alias_view", "alias_data")
FIRST = {"clone": lambda g: g.clone(), "detach_clone": lambda g: g.detach().clone(),
         "zeros_add": lambda g: torch.zeros_like(g).add_(g), "alias": lambda g: g, "alias_detach": lambda g: g.detach(),
         "alias_view": lambda g: g.view_as(g), "alias_data": lambda g: g.data}
LATER = ("inplace", "new", "into_grad")
EDIT = ("none", "scale", "data_scale")
UPDATE = ("sub_", "add_alpha", "copy_", "data_sub", "data_copy", "data_assign", "set_")
UNCOUNTED = ("data_sub", "data_copy", "data_assign")  # the writes the parameter's version counter does not see


def _write(p: torch.Tensor, d: torch.Tensor, update: str) -> None:
    if update == "sub_":
        p.sub_(d)
    elif update == "add_alpha":
        p.add_(d, alpha=-1.0)
    elif update == "copy_":
        p.copy_(p - d)
    elif update == "data_sub":
        p.data.sub_(d)
    elif update == "data_copy":
        p.data.copy_(p.data - d)
    elif update == "data_assign":
        p.data = p.detach() - d
    else:  # set_: new storage, through an op the counter sees
        p.set_(p.detach() - d)


@dataclass(frozen=True)
class Suspect:
    """A momentum step made of four parts (see the module's docstring)."""

    first: str
    later: str
    edit: str
    update: str

    def step(self) -> Callable:
        first, later, edit, update = FIRST[self.first], self.later, self.edit, self.update

        def step(params, momentum_buffers, lr, momentum=0.9):
            """One step of SGD with momentum, in place (a suspect: it may have in-place hazards)."""
            with torch.no_grad():
                for i, p in enumerate(params):
                    if p.grad is None:
                        continue
                    if edit == "scale":
                        p.grad.mul_(0.5)
                    elif edit == "data_scale":
                        p.grad.data.mul_(0.5)
                    g, buffer = p.grad, momentum_buffers[i]
                    if buffer is None:
                        buffer = first(g)
                    elif later == "inplace":
                        buffer.mul_(momentum).add_(g)
                    elif later == "new":
                        buffer = buffer * momentum + g
                    else:  # into_grad
                        buffer = g.add_(buffer, alpha=momentum)
                    momentum_buffers[i] = buffer
                    _write(p, lr * buffer, update)

        return step

    def declared(self) -> frozenset[str]:
        """The hazards this step has, from its parts."""
        alias = self.first in ALIASES
        found = {SHARES} if alias or self.later == "into_grad" else set()
        if self.edit != "none" or self.later == "into_grad" or (alias and self.later == "inplace"):
            found.add(EDITS)  # an aliased buffer updated in place writes .grad once zero_() reset it in place
        if self.update in ("data_assign", "set_"):
            found.add(NEW_MEMORY)
        if self.update in UNCOUNTED:
            found.add(SILENT)
        return frozenset(found)


GIVEN = Suspect("clone", "inplace", "none", "sub_")  # the notebook's sgd_momentum_step, as parts

#: The visible suspects, in the order checks.suspect_steps() gives them (a step whose hazard needs a second call comes
#: before one whose hazard needs the in-place reset: a one-call audit misses both, and its first failure names it).
VISIBLE = (GIVEN, Suspect("clone", "into_grad", "none", "sub_"), Suspect("alias", "inplace", "none", "sub_"),
           Suspect("alias_detach", "new", "none", "copy_"), Suspect("clone", "inplace", "data_scale", "add_alpha"),
           Suspect("zeros_add", "new", "none", "data_sub"), Suspect("detach_clone", "inplace", "none", "data_assign"),
           Suspect("alias_view", "inplace", "scale", "data_copy"),
           Suspect("detach_clone", "into_grad", "data_scale", "set_"), Suspect("alias_data", "inplace", "none", "sub_"),
           Suspect("zeros_add", "inplace", "data_scale", "sub_"))

ALL = tuple(Suspect(*parts) for parts in itertools.product(FIRST, LATER, EDIT, UPDATE))


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def measured(step: Callable, calls: int = 3) -> frozenset[str]:
    """The oracle: the hazards running ``step`` shows, on two parameters (a vector and a matrix), ``calls`` calls in a
    row, with .grad reset between calls both ways the caller may (to None; in place by zero_(), where the next
    backward adds into the same tensor)."""
    found = set()
    for reset in ("zero", "none"):
        params = [torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True),
                  torch.tensor([[1.5, -0.5], [0.25, 1.0]], dtype=torch.float64, requires_grad=True)]
        buffers: list = [None, None]
        for _ in range(calls):
            for p in params:
                if p.grad is not None and reset == "zero":
                    p.grad.zero_()
                else:
                    p.grad = None
            sum(((p - 3.0) ** 3).sum() for p in params).backward()
            grads = [p.grad.clone() for p in params]
            views, before = [p.detach() for p in params], [p.detach().clone() for p in params]
            graphs = [(p * p).sum() for p in params]  # each saves p itself
            step(params, buffers, 0.1, 0.9)
            held = {_storage(p.grad) for p in params if p.grad is not None}
            if any(b is not None and _storage(b) in held for b in buffers):
                found.add(SHARES)
            if any(not torch.equal(p.grad, g) for p, g in zip(params, grads)):
                found.add(EDITS)
            if any(not torch.equal(v, p.detach()) for v, p in zip(views, params)):
                found.add(NEW_MEMORY)
            for graph, p, old in zip(graphs, params, before):
                if torch.equal(p.detach(), old):
                    continue
                try:
                    torch.autograd.grad(graph, p)
                except RuntimeError:
                    continue
                found.add(SILENT)
    return frozenset(found)


def suspect_steps() -> list[Callable]:
    """The visible suspects as step functions, ``step(params, momentum_buffers, lr, momentum=0.9)``; the first is the
    notebook's given step."""
    return [suspect.step() for suspect in VISIBLE]


# ------------------------------------------------------------------------------------------ the mistakes

IDENTITY = Misconception(
    "sharing memory judged by identity",
    "`t.detach()`, `t.view_as(t)` and `t.data` are new tensor objects over the same memory: `is` says no, yet a "
    "zero_() or a backward into one changes the other. Compare memory (data_ptr(), or untyped_storage().data_ptr()).",
    "Is `p.grad.detach()` the same object as `p.grad`, and does it have memory of its own?")
VALUES = Misconception(
    "equal values taken for shared memory",
    "A buffer that is a fresh copy of the first gradient has the same values as .grad and none of its memory: "
    "equal numbers say nothing about aliasing. Compare memory, not values.",
    "After the first call, what else but shared memory makes a buffer equal to .grad?")
ONE_CALL = Misconception(
    "one call audited",
    "Some hazards live in the branch that updates a buffer that already exists, which only a second call reaches.",
    "Which branch of a momentum step does a first call never run?")
RESET_NONE = Misconception(
    "only the set-to-None reset tried",
    "A buffer that is .grad under another name stays .grad only if the caller resets .grad in place (zero_()) and "
    "the next backward adds into that same tensor; then updating the buffer in place writes .grad. Try both resets.",
    "After `p.grad = None` and a backward, is the new .grad the tensor your buffer shares memory with?")
VERSION_ONLY = Misconception(
    "an edit decided by _version alone",
    "A write through .data changes the values without moving _version: compare the values before and after (a "
    "clone taken before the call), not only the counter.",
    "Does a write through `.data` move the tensor's `_version`?")
COUNTER_IS_MEMORY = Misconception(
    "new memory and the counter mixed up",
    "New memory (p.data = ..., p.set_(...)) and a write the counter does not see (.data) are separate hazards: "
    "p.set_() gives new memory and a counted write; p.data.sub_() writes the old memory uncounted. Measure each.",
    "Can a parameter get new memory while its version counter moves, and be written in place while it does not?")


def _suspects(suspect: Suspect, missed: set[str], extra: set[str]) -> tuple[Misconception, ...]:
    """The mistakes a wrong report on this suspect would come from (named when two cases agree; new memory and the
    counter mixed up: :func:`_mix_ups`, settled by all the cases together)."""
    out = []
    alias_first = suspect.first in ALIASES
    if SHARES in missed and alias_first and suspect.first != "alias":
        out.append(IDENTITY)
    if SHARES in extra and not alias_first:
        out.append(VALUES)
    if SHARES in missed and suspect.later == "into_grad" and not alias_first:  # shows from the second call only
        out.append(ONE_CALL)
    if EDITS in missed and alias_first and suspect.later == "inplace" and suspect.edit == "none":
        out.append(RESET_NONE)
    if EDITS in missed and suspect.edit == "data_scale":
        out.append(VERSION_ONLY)
    return tuple(out)


def _mix_ups(suspect: Suspect, report: set[str]) -> tuple[set[str], set[str]]:
    """The ways of mixing up new memory and the counter whose report on this suspect is the learner's, where that
    differs from the truth: a silent graph reported where the parameter got new memory ("silent by memory"), new
    memory reported where the write went uncounted ("memory by counter"), or both ("swapped"). Second, those of them
    that here report a hazard the step does not have: an audit that never finds one of the two hazards (a value
    comparison left out) misses the same ones as a mix-up does on some steps, never reports one too many."""
    truth = suspect.declared()
    memory, uncounted = NEW_MEMORY in truth, suspect.update in UNCOUNTED
    patterns = {"silent by memory": {NEW_MEMORY, SILENT} if memory else set(),
                "memory by counter": ({NEW_MEMORY} if uncounted else set()) | ({SILENT} & truth),
                "swapped": ({NEW_MEMORY} if uncounted else set()) | ({SILENT} if memory else set())}
    right, got = truth & {NEW_MEMORY, SILENT}, report & {NEW_MEMORY, SILENT}
    matched = {kind for kind, pattern in patterns.items() if pattern == got != right}
    return matched, {kind for kind in matched if patterns[kind] - right}


def _read(answer, what: str) -> set[str]:
    """The learner's report as a set of hazard names (case, spaces and an 'and' between words aside)."""
    if isinstance(answer, str) or not isinstance(answer, (set, frozenset, list, tuple)):
        raise GradingFailure(f"{what} returned {type(answer).__name__} {answer!r}; expected a set of hazard names "
                             f"from {sorted(HAZARDS)} (an empty set for a step without any).")
    names = {h.lower(): h for h in HAZARDS}
    report = set()
    for item in answer:
        key = " ".join(str(item).lower().split()) if isinstance(item, str) else None
        if key not in names:
            raise GradingFailure(f"{what} reported {item!r}, which is not one of the hazards {sorted(HAZARDS)}.")
        report.add(names[key])
    return report


def _cases(grading_seed: int | None) -> list[tuple[str, Suspect]]:
    if grading_seed is None:
        return [(f"suspect_steps()[{k}]" + (" (the given sgd_momentum_step)" if k == 0 else ""), s)
                for k, s in enumerate(VISIBLE)]
    gen = case_stream("06/audit_step", grading_seed)
    drawn = [Suspect(choice(gen, list(FIRST)), choice(gen, list(LATER)), choice(gen, list(EDIT)), UPDATE[k])
             for k in torch.randperm(len(UPDATE), generator=gen).tolist()]  # every way of writing the parameter
    # two corners: .grad edited through .data alone (no counted write into it), and a buffer that is .grad's memory
    # under another tensor object, updated in place (.grad edited only where the caller resets it by zero_())
    own = [first for first in FIRST if first not in ALIASES]
    drawn[0] = Suspect(choice(gen, own), choice(gen, ["inplace", "new"]), "data_scale", drawn[0].update)
    drawn.append(Suspect(choice(gen, list(ALIASES[1:])), "inplace", "none", choice(gen, list(UPDATE))))
    return [("the given sgd_momentum_step", GIVEN)] + [(f"a drawn suspect step (number {k + 1} of 8)", s)
                                                      for k, s in enumerate(drawn)]


@check
def check_audit_step(audit_step, grading_seed: int | None = None) -> None:
    """Part A: audit_step(step) returns the set of in-place hazards (of "buffer shares .grad", ".grad edited",
    "new memory", "silent graph") that the momentum step ``step(params, momentum_buffers, lr, momentum=0.9)`` has.

    Domain: a step made of the given step's parts swapped for others (:class:`Suspect`); a hazard counts when it
    shows within three calls, with .grad reset between calls either way (None, or zero_() in place). Visible: the
    eleven suspects of :func:`suspect_steps` (the given step first); hidden: the given step and eight drawn ones,
    every way of writing the parameter among them, one that edits .grad through .data alone, and one whose first
    buffer is .grad's memory under another tensor object, updated in place.
    Each suspect is one case: the report must be exactly the suspect's hazards."""
    __tracebackhide__ = True
    mix_ups, shown = [], set()  # each failure with the mix-ups its report matches; those some report shows for sure
    for label, suspect in _cases(grading_seed):
        with trial():
            what = f"audit_step({label})"
            answer = call_learner(audit_step, suspect.step(), what=what)
            report, truth = _read(answer, what), set(suspect.declared())
            missed, extra = truth - report, report - truth
            if missed or extra:
                lines = [f"{what} reported {sorted(report) or 'no hazard'}."]
                lines += [f"  It missed {h!r}: the step has it." for h in sorted(missed)]
                lines += [f"  It reported {h!r}: the step does not have it." for h in sorted(extra)]
                failure = GradingFailure("\n".join(lines), suspects=_suspects(suspect, missed, extra))
                matched, telling = _mix_ups(suspect, report)
                mix_ups.append((failure, matched))
                shown |= telling
                raise failure
    for failure, matched in mix_ups:  # named only where a report shows a mix-up that no missing check explains
        if matched & shown:
            failure.suspects += (COUNTER_IS_MEMORY,)
