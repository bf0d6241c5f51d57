"""Part C of exercise 06: 24 snippets the lesson did not show, each sorted into "raises" / "silently wrong" / "fine"
with the mechanism that decides it and, for a gradient snippet, the names of its tensors whose memory a backward node
saved; graded snippet by snippet in three groups of eight. A verdict and the saved names are measured by running the
snippet on the installed PyTorch (a recorded answer that disagrees is a course bug); no message shows a snippet's
right verdict, mechanism or saved names, only what running it gives (never for the held-back snippets of group 3,
whose messages name the snippet only) and, when two cases agree, what its group's situation is, as a question."""

from __future__ import annotations

import dataclasses
import warnings
from dataclasses import dataclass

import torch

from ...checking import CourseBug, GradingFailure, Misconception, call_learner, check, fmt, trial
from ...oracles import central_difference
from ...seeding import choice, uniform
from ..cases import case_stream

Tensor = torch.Tensor
VERDICTS = ("raises", "silently wrong", "fine")

# ---------------------------------------------------------------------------------------------------------------
# Part C: raises / silently wrong / fine, measured by running each snippet; and the mechanism behind it, graded
# snippet by snippet in three groups of eight

#: What decides a snippet's outcome (the learner names it for every snippet).
MECHANISMS = ("leaf guard", "version counter", ".data", "detach", "rebinding", "accumulation", "fine")


@dataclass(frozen=True)
class Snippet:
    """A few lines of code; ``kind`` says what the code is meant to do and so how its verdict is measured.

    * "gradient": ``x`` is a leaf (float64, requires grad); the code computes ``loss`` and then ``loss.backward()``
      runs. Fine means x.grad equals the central finite difference of the same code.
    * "update": ``w`` is a model's parameter (a leaf), ``loss_of(w)`` a scalar loss, ``lr`` and ``steps`` numbers;
      the code means to do gradient descent on ``w`` (``steps`` times if it loops, else once; ``steps`` >= 2, as the
      part says: with a single step, forgetting to reset .grad does no harm yet). Fine means the parameter that was
      passed in holds what plain gradient descent gives.

    ``verdict`` is what running it gives on this PyTorch (the check runs it and treats a disagreement as a course
    bug); ``group`` decides the mechanism (:data:`GROUPS`).
    """

    id: str
    group: str
    kind: str
    verdict: str
    source: str

    @property
    def mechanism(self) -> str:
        return GROUPS[self.group][0]

    @property
    def saved(self) -> frozenset[str] | None:
        """For a gradient snippet, the names it binds (x, y, z, d) whose memory a tensor saved by a backward node
        shares, by the time the code stops (an error stops it); None for an update snippet."""
        return frozenset(SAVED[self.id]) if self.kind == "gradient" else None


def _bank(*entries: tuple[str, str, str, str]) -> list[Snippet]:
    return [Snippet(f"S{number:02d}", *entry) for number, entry in enumerate(entries, start=1)]


RAISES, WRONG, FINE = VERDICTS
#: None of these is a snippet of lesson 06: each is a variant of a mechanism the lesson shows (a saved INPUT where
#: the lesson overwrote saved outputs, a write through a view's base or through .data into a saved input, an op that
#: keeps its input AND its output (prod) or only an index (index_select), a loop that trains a copy, a reset that
#: comes too early...). S01, S14 and S24's saved names cannot be read off the lesson's table: they are measured.
SNIPPETS = _bank(
    ("saved", "gradient", RAISES, "y = x * 2\nv = y[1:]\nz = v.sin()\ny[0] = 0.0\nloss = z.sum()"),
    ("harmless", "gradient", FINE, "y = x * 2\nz = torch.tanh(y)\ny.mul_(-1)\nloss = z.sum()"),
    ("data_intermediate", "gradient", WRONG, "y = x.tanh()\ny.data.mul_(0.5)\nloss = y.sum()"),
    ("no_grad_update", "update", FINE, "for _ in range(steps):\n    loss_of(w).backward()\n"
                                       "    with torch.no_grad():\n        w.sub_(lr * w.grad)\n"
                                       "        w.grad.zero_()"),
    ("leaf", "gradient", RAISES, "x.clamp_(-1.0, 1.0)\nloss = (x ** 2).sum()"),
    ("detach_write", "gradient", RAISES, "y = torch.tanh(x)\nd = y.detach()\nd[0] = 0.0\nloss = y.sum()"),
    ("rebinding", "update", WRONG, "loss_of(w).backward()\nwith torch.no_grad():\n    w = w - lr * w.grad"),
    ("clone", "gradient", FINE, "y = x.exp()\nz = y.clone()\nz[0] = 0.0\nloss = (y + z).sum()"),
    ("no_reset", "update", WRONG, "for _ in range(steps):\n    loss_of(w).backward()\n    with torch.no_grad():\n"
                                  "        w -= lr * w.grad"),
    ("data_update", "update", FINE, "for _ in range(steps):\n    loss_of(w).backward()\n"
                                    "    w.data.add_(w.grad, alpha=-lr)\n    w.grad.zero_()"),
    ("saved", "gradient", RAISES, "y = x.sin()\nz = y * x\ny.zero_()\nloss = z.sum()"),
    ("leaf", "update", RAISES, "for _ in range(steps):\n    loss_of(w).backward()\n    w.sub_(lr * w.grad)\n"
                               "    w.grad = None"),
    ("detach_cut", "gradient", WRONG, "y = x.sin()\nloss = (y * x.detach()).sum()"),
    ("data_intermediate", "gradient", WRONG, "y = x + 2\nz = y.prod()\ny.data.mul_(2)\nloss = z * 1.0"),
    ("rebinding", "update", WRONG, "for _ in range(steps):\n    loss_of(w).backward()\n    with torch.no_grad():\n"
                                   "        w = w - lr * w.grad\n    w.requires_grad_(True)"),
    ("clone", "gradient", FINE, "y = x.clone()\nz = torch.sigmoid(y)\ny.mul_(2)\nloss = z.sum()"),
    # Group 3: where the lesson's rules, applied by the look of the code, mispredict (a write that changes no value,
    # an op that keeps its input where its neighbours keep their output, a ratio to its own detached copy, an op
    # that keeps an index and not the tensor it reads). Its
    # gradient snippets are held back from run_snippet (HELD_BACK): the learner measures what the nodes kept.
    ("saved", "gradient", RAISES, "y = torch.sigmoid(x)\ny.relu_()\nloss = y.sum()"),
    ("harmless", "gradient", FINE, "y = x.sin()\ny.mul_(2)\nloss = y.sum()"),
    ("detach_write", "gradient", RAISES, "y = x + 1\nz = y.cos()\ny.detach().mul_(1.0)\nloss = z.sum()"),
    ("no_grad_update", "update", FINE, "for _ in range(steps):\n    w.grad = None\n    loss_of(w).backward()\n"
                                       "    with torch.no_grad():\n        w.copy_(w - lr * w.grad)"),
    ("no_reset", "update", WRONG, "w.grad = None\nfor _ in range(steps):\n    loss_of(w).backward()\n"
                                  "    with torch.no_grad():\n        w -= lr * w.grad"),
    ("detach_cut", "gradient", WRONG, "y = x.exp()\nloss = (y / y.detach()).sum()"),
    ("data_update", "update", FINE, "loss_of(w).backward()\nw.data.sub_(lr * w.grad)\nw.grad.zero_()"),
    ("harmless", "gradient", FINE, "y = x * 2\ni = torch.tensor([2, 0])\nz = y.index_select(0, i)\ny.zero_()\n"
                                   "loss = (z ** 2).sum()"),
)

#: What the backward nodes of each gradient snippet kept, as the names whose memory a saved tensor shares (measured by
#: :func:`measure_saved` with saved_tensors_hooks; a tensor that shares memory with a saved one counts, e.g. both the
#: y and the d = y.detach() of S06). The verdicts of groups 1-3 hinge on them; the part asks for them.
SAVED = {"S01": ("v", "y"), "S02": ("z",), "S03": ("y",), "S05": (), "S06": ("d", "y"), "S08": ("y",),
         "S11": ("x", "y"), "S13": ("x",), "S14": ("y", "z"), "S16": ("z",), "S17": ("y",), "S18": ("x",),
         "S19": ("y",), "S22": ("y",), "S24": ("i", "z")}

#: Every group: its mechanism, and what a wrong answer on a snippet of the group misjudged (named after the situation
#: the code shows, never after the mechanism that decides it; the explanation, for graded feedback, may say more).
GROUPS = {
    "leaf": ("leaf guard", Misconception(
        "an in-place write into a leaf, misjudged", "Outside torch.no_grad(), an in-place write into a leaf that "
        "requires grad is refused on the spot by the leaf guard: RuntimeError 'a leaf Variable that requires grad is "
        "being used in an in-place operation', before any backward.",
        "What does PyTorch do with an in-place write into a tensor created with requires_grad=True, and when?")),
    "saved": ("version counter", Misconception(
        "an overwrite of a tensor backward saved, misjudged", "Backward nodes keep what their derivative needs: some "
        "their output, some their inputs (grad_fn._saved_result, grad_fn._saved_self and grad_fn._saved_other show "
        "which; compare their data_ptr() with your tensors'). An in-place edit of such a tensor (also through an "
        "index, y[1:] = 0) bumps its version counter, even when it changes no value, and backward() raises "
        "'modified by an inplace operation'.",
        "Which tensors did the backward nodes here keep, and what wrote into one of them afterwards?")),
    "detach_write": ("version counter", Misconception(
        "a write through detach(), misjudged", "detach() shares memory and the version counter with the original: "
        "writing into it changes the saved tensor, the counter sees it (it counts writes, not changed values), and "
        "backward raises. Use clone() for a copy you may modify.",
        "What does a detached tensor share with the tensor it came from, besides its values?")),
    "data_intermediate": (".data", Misconception(
        "a write through .data into a saved tensor, misjudged", "Writes through .data skip the version counter: no "
        "error, but backward multiplies by the overwritten values. The gradient is wrong and only a finite-difference "
        "check shows it.", "Which checks does a write through .data pass, and which values does backward then use?")),
    "detach_cut": ("detach", Misconception(
        "a detach() inside the loss, misjudged", "A tensor made by detach() is a constant to backward: whatever is "
        "computed from it contributes nothing to x.grad, so the gradient is wrong without an error. y / y.detach() "
        "is 1 whatever x is, yet autograd gives it the gradient of y / c.",
        "Which factors of the loss does backward treat as constants here?")),
    "rebinding": ("rebinding", Misconception(
        "w = w - ... in an update, misjudged", "It builds a new tensor and binds the name w to it: the parameter that "
        "was passed in keeps its values, and nothing tells you. Even in a loop that runs without an error (a new leaf "
        "made with requires_grad_), what trains is a copy, not the parameter.",
        "After the update line, which tensor does the name w refer to, and which one did the caller pass in?")),
    "no_reset": ("accumulation", Misconception(
        "what .grad holds between steps, misjudged", "backward() adds into .grad. Without a reset after every update, "
        "the second step uses the sum of both gradients: no error, wrong weights.",
        "What does w.grad hold after the second step's backward?")),
    "harmless": ("fine", Misconception(
        "whether an in-place write reaches memory a node saved, misjudged",
        "An in-place edit only matters when it overwrites a leaf or a tensor that a backward node saved. Adding or "
        "multiplying by a constant saves nothing, a function that keeps its output does not need its input, and one "
        "that keeps only an index (index_select, max over a dim) does not need the values it read: what a node kept "
        "is what its grad_fn._saved_* attributes show.",
        "Does the in-place line overwrite a leaf, or a tensor a backward node kept?")),
    "clone": ("fine", Misconception(
        "a write into a clone, misjudged", "clone() copies the memory: editing the copy leaves the original alone, "
        "and gradients still flow through the clone; editing the clone is safe unless a node saved the clone "
        "itself.",
        "Which memory does the write after clone() change, and does any backward node read it?")),
    "no_grad_update": ("fine", Misconception(
        "an in-place update under no_grad, misjudged", "Inside torch.no_grad() nothing is recorded, so the leaf "
        "guard allows the write; w stays the same leaf and, with .grad reset each step, this is exactly SGD.",
        "Is autograd recording during the update, and what does .grad hold at the next backward?")),
    "data_update": ("fine", Misconception(
        "a weight update through .data, misjudged", "For a plain step, w.data -= lr * w.grad writes the same memory "
        "as a no_grad update, so the numbers are right. Its danger is elsewhere: it hides the write from the version "
        "counter, so a graph that saved w would silently use the new value.",
        "Did any graph save w before this .data write, and is that graph walked after it?")),
}

@dataclass(frozen=True)
class SnippetInputs:
    x: Tensor        # for "gradient" snippets
    w: Tensor        # for "update" snippets: start value, and loss_of(w) = sum((w * a - b)**2)
    a: Tensor
    b: Tensor
    lr: float
    steps: int

    def describe(self, kind: str) -> str:
        if kind == "gradient":
            return f"x = {fmt(self.x)}"
        return f"w = {fmt(self.w)}, loss_of(w) = sum((w * {fmt(self.a)} - {fmt(self.b)})**2), lr = {self.lr:g}, " \
               f"steps = {self.steps}"


def _run_source(source: str, namespace: dict) -> dict:
    with warnings.catch_warnings():  # e.g. reading .grad of a non-leaf: part of what a snippet does, not news
        warnings.simplefilter("ignore")
        exec(compile(source, "<snippet>", "exec"), namespace)
    return namespace


def _first_line(error: Exception) -> str:
    message = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {message if len(message) <= 220 else message[:217] + '...'}"


def measure(snippet: Snippet, inputs: SnippetInputs) -> tuple[str, str]:
    """Run a snippet on the installed PyTorch: its verdict and the evidence for it (a CourseBug if the verdict is
    not the one the bank records, so that a mechanism is never graded against a behaviour that changed)."""
    verdict, evidence = _measure(snippet, inputs)
    if verdict != snippet.verdict:
        raise CourseBug(f"snippet {snippet.id} is {verdict!r} on PyTorch {torch.__version__} ({evidence}), but the "
                        f"exercise records {snippet.verdict!r}.")
    return verdict, evidence


def measure_saved(snippet: Snippet, inputs: SnippetInputs) -> frozenset[str]:
    """The names a gradient snippet binds whose memory a tensor saved by a backward node shares, measured with
    saved_tensors_hooks while its code runs (up to an error, if it raises); a CourseBug if they are not the recorded
    :data:`SAVED`."""
    kept: list[Tensor] = []

    def pack(tensor):
        kept.append(tensor)
        return tensor

    namespace = {"torch": torch, "x": inputs.x.clone().requires_grad_(True)}
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            _run_source(snippet.source, namespace)
    except Exception:  # a snippet that raises saved what it saved before the error
        pass
    memory = {tensor.untyped_storage().data_ptr() for tensor in kept}
    names = frozenset(name for name, value in namespace.items()
                      if isinstance(value, Tensor) and value.untyped_storage().data_ptr() in memory)
    if names != snippet.saved:
        raise CourseBug(f"snippet {snippet.id}'s nodes saved {sorted(names)} on PyTorch {torch.__version__}, but the "
                        f"exercise records {sorted(snippet.saved)}.")
    return names


def _measure(snippet: Snippet, inputs: SnippetInputs) -> tuple[str, str]:
    if snippet.kind == "gradient":
        x = inputs.x.clone().requires_grad_(True)
        try:
            _run_source(snippet.source, {"torch": torch, "x": x})["loss"].backward()
        except Exception as error:
            return RAISES, _first_line(error)
        (fd,) = central_difference(lambda v: _run_source(snippet.source, {"torch": torch, "x": v.clone()})["loss"],
                                   inputs.x)
        got, truth = x.grad, fd
        evidence = f"x.grad = {fmt(got)}, finite differences of the same code = {fmt(fd)}"
    else:
        w = inputs.w.clone().requires_grad_(True)

        def loss_of(v):
            return ((v * inputs.a - inputs.b) ** 2).sum()

        try:
            _run_source(snippet.source, {"torch": torch, "w": w, "loss_of": loss_of, "lr": inputs.lr,
                                         "steps": inputs.steps})
        except Exception as error:
            return RAISES, _first_line(error)
        truth = inputs.w.clone()
        for _ in range(inputs.steps if "range(steps)" in snippet.source else 1):
            (grad,) = central_difference(loss_of, truth)
            truth = truth - inputs.lr * grad
        got = w.detach()
        evidence = f"the parameter passed in now holds {fmt(got)}; gradient descent gives {fmt(truth)}"
    fine = bool(torch.allclose(got.to(torch.float64), truth, rtol=1e-6, atol=1e-8))
    return (FINE if fine else WRONG), evidence


#: The corner of Part C's domain, run at every seed: x with a zero entry and entries of both signs, the fewest
#: steps the part allows (2: at 1, the two "accumulation" snippets would be fine). The part's x is never all zeros:
#: there, S13's missing term sin(x) vanishes and S13 would be fine.
CORNER_INPUTS = SnippetInputs(torch.tensor([0.0, -1.2, 0.7], dtype=torch.float64),
                              torch.tensor([0.4, -0.3, 1.1], dtype=torch.float64),
                              torch.tensor([1.0, 0.5, 1.5], dtype=torch.float64),
                              torch.tensor([0.3, 1.0, -0.2], dtype=torch.float64), 0.1, 2)

def _snippet_inputs(gen: torch.Generator | None) -> SnippetInputs:
    """The part's domain: x a 1-D float64 leaf of 3 to 5 entries in [-1.5, 1.5), not all zero (a uniform draw never
    is); w of 3 to 5 entries in [-2, 2),
    a in [0.5, 1.5), b in [-2, 2) (so w is not at the minimum of loss_of), lr in [0.05, 0.2), steps 2 to 4."""
    if gen is None:
        return CORNER_INPUTS
    n = choice(gen, [3, 4, 5])
    return SnippetInputs(uniform(gen, (n,), -1.5, 1.5), uniform(gen, (n,)), uniform(gen, (n,), 0.5, 1.5),
                         uniform(gen, (n,)), round(float(uniform(gen, (), 0.05, 0.2)), 3), choice(gen, [2, 3, 4]))


#: Part C's snippets are graded in groups of this many, in their order (S01-S08, S09-S16, S17-S24).
GROUP_SIZE = 8


def group_of(group: int) -> list[Snippet]:
    """The snippets of group 1, 2 or 3."""
    if group not in (1, 2, 3):
        raise CourseBug(f"there is no snippet group {group!r}: the groups are 1, 2 and 3.")
    return SNIPPETS[(group - 1) * GROUP_SIZE:group * GROUP_SIZE]


def _snippets_to_check(group: int, grading_seed: int | None) -> list[tuple[Snippet, SnippetInputs]]:
    """The group's snippets on the corner inputs, then again on inputs drawn from the case stream (the public
    stream for the visible test): each snippet is judged twice, so that a wrong answer names its misconception."""
    drawn = _snippet_inputs(case_stream("06/classify_snippets", grading_seed))
    return [(snippet, inputs) for inputs in (CORNER_INPUTS, drawn) for snippet in group_of(group)]


def _words(text: str) -> str:
    return " ".join(text.strip().lower().replace("_", " ").replace("-", " ").replace("()", "").split())


def _one_of(value, options: tuple[str, ...]) -> str | None:
    """``value`` read as one of ``options`` (case, '_', '-', '()' and a leading '.' do not matter), else None."""
    if type(value) is not str:
        return None
    wanted = _words(value).lstrip(".")
    return next((option for option in options if _words(option).lstrip(".") == wanted), None)


def _names(value) -> frozenset[str] | None:
    """The saved names of an answer: one name, or a set, list or tuple of names (spaces do not matter), else None."""
    if type(value) is str:
        value = value.replace(",", " ").split()
    if type(value) not in (set, frozenset, list, tuple) or not all(type(name) is str for name in value):
        return None
    return frozenset(name.strip() for name in value)


def _read_answers(answer, what: str) -> dict[str, tuple]:
    """{snippet id: (verdict, mechanism)} for an update snippet, (verdict, mechanism, saved names) for a gradient
    snippet, from the learner's dict, or a GradingFailure saying what is missing."""
    __tracebackhide__ = True
    example = "{'S01': ('<verdict>', '<mechanism>', {'<name>', ...}), ..., 'S04': ('<verdict>', '<mechanism>'), ...}"
    if type(answer) is not dict:
        raise GradingFailure(f"{what} returned {type(answer).__name__}; expected a dict such as {example}.")
    missing = [s.id for s in SNIPPETS if s.id not in answer]
    if missing:
        raise GradingFailure(f"{what} has no answer for {', '.join(missing)}: give one for every snippet.")
    read, invalid = {}, []
    for snippet in SNIPPETS:
        pair = answer[snippet.id]
        size, shape = (3, "a triple (verdict, mechanism, saved names)") if snippet.kind == "gradient" else \
            (2, "a pair (verdict, mechanism)")
        if type(pair) not in (tuple, list) or len(pair) != size:
            invalid.append(f"{snippet.id} ({snippet.kind} snippet): {pair!r:.40} is not {shape}")
            continue
        names = None
        if size == 3:
            names = _names(pair[2])
            if names is None:
                invalid.append(f"{snippet.id}: saved names {pair[2]!r:.30} is not a name or a set of names")
        verdict, mechanism = _one_of(pair[0], VERDICTS), _one_of(pair[1], MECHANISMS)
        if verdict is None:
            invalid.append(f"{snippet.id}: verdict {pair[0]!r:.30} is not one of {', '.join(map(repr, VERDICTS))}")
        if mechanism is None:
            invalid.append(f"{snippet.id}: mechanism {pair[1]!r:.30} is not one of "
                           f"{', '.join(map(repr, MECHANISMS))}")
        read[snippet.id] = (verdict, mechanism) if size == 2 else (verdict, mechanism, names)
    if invalid:
        raise GradingFailure(f"{what}: {'; '.join(invalid[:4])}{' ...' if len(invalid) > 4 else ''}. Expected a "
                             f"dict such as {example}.")
    return read


def _judge(snippet: Snippet, inputs: SnippetInputs, answer: tuple, what: str) -> None:
    """The learner's verdict must be what running the snippet gives, the mechanism the one that decides it and, for a
    gradient snippet, the saved names those the nodes kept. The message shows the snippet, the answer and the
    evidence of running it, never the right verdict, mechanism or names; for a snippet held back from run_snippet
    (:data:`HELD_BACK`) it names the snippet only and no misconception (its group's situation would give the verdict
    away), since measuring it is the learner's part."""
    __tracebackhide__ = True
    truth, evidence = measure(snippet, inputs)
    verdict, mechanism = answer[:2]
    saved_right = snippet.kind != "gradient" or answer[2] == measure_saved(snippet, inputs)
    if verdict == truth and mechanism == snippet.mechanism and saved_right:
        return
    if snippet.id in HELD_BACK:  # the measurement is the part: which snippet is off, not what running it shows
        raise GradingFailure(f"{what}: {snippet.id} is wrong (its verdict, its mechanism or the names you say its "
                             "nodes saved). It is held back: settle it by measuring its graph in a scratch cell of "
                             "your own, not by reading this message.")
    if verdict == truth and mechanism == snippet.mechanism:  # only the saved names are off: no group's situation
        names = ", ".join(sorted(answer[2])) or "none"
        code = "\n".join("      " + line for line in snippet.source.splitlines())
        raise GradingFailure(f"{what}: {snippet.id} (gradient snippet):\n{code}\n    the names you say its backward "
                             f"nodes saved ({names}) are not the names whose memory a saved tensor shares. Which "
                             "tensors do each node's _saved_ attributes hold (dir() lists them), and whose "
                             "untyped_storage().data_ptr() is theirs?")
    if verdict != truth:
        said = f"you said {verdict!r}; running it: {evidence}."
    else:
        said = (f"your verdict {verdict!r} is what running it gives ({evidence}), but {mechanism!r} is not what "
                "decides it.")
    code = "\n".join("      " + line for line in snippet.source.splitlines())
    raise GradingFailure(f"{what}: {snippet.id} ({snippet.kind} snippet, run with {inputs.describe(snippet.kind)}):"
                         f"\n{code}\n    {said}", suspects=(GROUPS[snippet.group][1],))


@check
def check_snippets(classify_snippets, group: int, grading_seed: int | None = None) -> None:
    """Part C, a group of snippets: in group 1 (S01-S08), 2 (S09-S16) or 3 (S17-S24) every snippet's verdict is the
    one running it gives and its mechanism the one that decides it; one wrong snippet costs its group's point
    (visible) and the same group's hidden point. A wrong answer is named after what its snippet's group misjudged
    when two cases agree (every snippet is judged on two inputs).

    Domain (the part's text): the bank's snippets with their inputs (:func:`_snippet_inputs`): gradient snippets on a
    float64 leaf x of 3 to 5 entries in [-1.5, 1.5), not all zero, update snippets with lr in [0.05, 0.2) and steps
    >= 2. Corner pinned at every seed: :data:`CORNER_INPUTS` (a zero entry, both signs, steps = 2). Contracts
    checked: a dict with a pair (verdict, mechanism) from the two lists for every update snippet and a triple
    (verdict, mechanism, saved names) for every gradient snippet; each verdict, and each set of saved names, is the
    one running the snippet on the installed PyTorch gives (a recorded one that disagrees is a course bug, not the
    learner's). A held-back snippet's failure names the snippet only.
    """
    __tracebackhide__ = True
    what = "classify_snippets()"
    answers = _read_answers(call_learner(classify_snippets, what=what), what)
    for snippet, inputs in _snippets_to_check(group, grading_seed):
        with trial():
            _judge(snippet, inputs, answers[snippet.id], what)


#: Group 3's gradient snippets: run_snippet does not run them. Their verdicts are the learner's prediction, checked
#: by measuring what each backward node kept (grad_fn._saved_result / _saved_self, _version, data_ptr).
HELD_BACK = tuple(s.id for s in SNIPPETS[2 * GROUP_SIZE:] if s.kind == "gradient")


def run_snippet(snippet_id: str, *, steps: int = 2, x=None) -> None:
    """Run one snippet of the bank as the tests do and print what happened: the error it raises, or the result beside
    the right one (finite differences of the same code, or plain gradient descent). The verdict and the mechanism are
    the learner's to conclude. ``steps`` (update snippets) and ``x`` (gradient snippets) default to the corner
    inputs. The snippets of :data:`HELD_BACK` are not run: only their code is printed."""
    snippet = next((s for s in SNIPPETS if s.id == str(snippet_id).upper()), None)
    if snippet is None:
        raise ValueError(f"no snippet {snippet_id!r}: the bank has S01 to S{len(SNIPPETS):02d}.")
    if snippet.id in HELD_BACK:
        print(f"{snippet.id} is held back: run_snippet does not run the gradient snippets of group 3 "
              f"({', '.join(HELD_BACK)}). Predict it from what each backward node keeps, and measure that in a "
              "scratch cell of your own on the line that makes the node: its _saved_ attributes (dir() lists them: "
              "_saved_result, _saved_self and others), _version and untyped_storage().data_ptr().")
        print("\n".join("    " + line for line in snippet.source.splitlines()))
        return
    inputs = CORNER_INPUTS
    if x is not None:
        inputs = dataclasses.replace(inputs, x=torch.as_tensor(x, dtype=torch.float64).detach().clone())
    inputs = dataclasses.replace(inputs, steps=int(steps))
    verdict, evidence = _measure(snippet, inputs)
    print(f"{snippet.id} ({snippet.kind} snippet, run with {inputs.describe(snippet.kind)}):")
    print("\n".join("    " + line for line in snippet.source.splitlines()))
    print(f"-> {'raised ' if verdict == RAISES else 'ran without an error: '}{evidence}")


def show_snippets() -> None:
    """Display the bank of snippets (every snippet's code, by group)."""
    from IPython.display import Markdown, display

    lines = []
    for snippet in SNIPPETS:
        if (int(snippet.id[1:]) - 1) % GROUP_SIZE == 0:
            lines += [f"#### Group {(int(snippet.id[1:]) - 1) // GROUP_SIZE + 1}", ""]
        lines += [f"**{snippet.id}** — *{snippet.kind}*", "", "```python", snippet.source, "```", ""]
    display(Markdown("\n".join(lines)))

