"""autograder.learner_code: the learner's exercise-04 ``attention_backward``, taken from their saved notebook, and
lesson 11's section 6, which trains on it behind a gate.

The answers below are written here, not taken from solutions/: a plain (not blocked) backward that forms all of P,
which the lesson's gate must accept like any right one, and two slips of it.
"""

from __future__ import annotations

import math
import re
import shutil
from pathlib import Path

import nbformat
import torch
import torch.nn.functional as F
from traitlets.config.loader import PyFileConfigLoader

from autograder import course, learner_code

ASSIGNMENT = "04-layer-backward"
LESSON = course.LESSONS / "11-capstone.ipynb"

RIGHT = '''
def attention_backward(Q, K, V, O, lse, dO, *, causal=False, block=64):
    """All of P at once (no blocks): the gradients are the same."""
    scale = 1 / math.sqrt(Q.shape[-1])
    S = Q @ K.transpose(-2, -1) * scale
    if causal:
        S = S.masked_fill(~torch.ones(S.shape[-2:], dtype=torch.bool).tril(), -math.inf)
    P = torch.exp(S - lse.unsqueeze(-1))
    dS = P * (dO @ V.transpose(-2, -1) - (dO * O).sum(dim=-1, keepdim=True))
    return scale * dS @ K, scale * dS.transpose(-2, -1) @ Q, P.transpose(-2, -1) @ dO
'''
#: The mask forgotten: right without it, wrong with it.
MASK_FORGOTTEN = RIGHT.replace("    if causal:\n        S = S.masked_fill", "    if False:\n        S = S.masked_fill")
RAISES = '''
def attention_backward(Q, K, V, O, lse, dO, *, causal=False, block=64):
    raise ValueError("shapes do not match")
'''


def learner_copy(folder: Path, answer: str | None) -> Path:
    """The released exercise-04 notebook saved in ``folder``, its attention_backward cell holding ``answer`` (None:
    the release's stub)."""
    notebook = nbformat.read(course.release_notebook(ASSIGNMENT), as_version=4)
    if answer is not None:
        (cell,) = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "attention_backward"]
        cell.source = answer.strip()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{ASSIGNMENT}.ipynb"
    nbformat.write(notebook, path)
    return path


def attention_forward(Q, K, V, causal):
    S = Q @ K.transpose(-2, -1) / math.sqrt(Q.shape[-1])
    if causal:
        S = S.masked_fill(~torch.ones(S.shape[-2:], dtype=torch.bool).tril(), -math.inf)
    return torch.softmax(S, dim=-1) @ V, torch.logsumexp(S, dim=-1)


def lesson_cells() -> list:
    return nbformat.read(LESSON, as_version=4).cells


def lesson_gate():
    """The lesson's own attention_gate, with the Function and the forward it uses (its cells, run here)."""
    namespace = {"math": math, "torch": torch, "F": F}
    for cell in lesson_cells():
        if cell.cell_type == "code" and re.search(r"^(def attention_forward|class Attention)\(", cell.source, re.M):
            exec(compile(cell.source, str(LESSON), "exec"), namespace)
    return namespace["attention_gate"]


def test_the_places_looked_at_are_the_documented_ones(tmp_path):
    """The course's exercises/ folder first, then a hub's fetched copies (the course id's folder, then the home's):
    never solutions/."""
    found = learner_code.candidates(ASSIGNMENT, roots=[tmp_path / "course"], home=tmp_path / "home")
    assert found == [tmp_path / "course" / "exercises" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
                     tmp_path / "home" / "autograd-course" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb",
                     tmp_path / "home" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb"]
    default = learner_code.candidates(ASSIGNMENT)
    assert course.release_notebook(ASSIGNMENT) in default and not any("solutions" in p.parts for p in default)


def test_the_course_id_is_nbgraders():
    config = PyFileConfigLoader("nbgrader_config.py", path=str(course.ROOT)).load_config()
    assert config.CourseDirectory.course_id == course.COURSE_ID == "autograd-course"


def test_no_copy_found(tmp_path):
    loaded = learner_code.load_attention_backward(roots=[tmp_path], home=tmp_path)
    assert loaded.function is None and loaded.path is None
    assert "no saved copy" in loaded.reason and str(tmp_path) in loaded.reason


def test_the_blank_release_is_found_and_not_written_yet(tmp_path):
    loaded = learner_code.load_attention_backward(roots=[course.ROOT], home=tmp_path)
    assert loaded.function is None
    assert loaded.path == course.release_notebook(ASSIGNMENT)
    assert "not written yet" in loaded.reason and "NotImplementedError" in loaded.reason


def test_a_right_answer_is_returned_and_passes_the_lessons_gate(tmp_path):
    """On a hub: the blank release in the course folder, the learner's answer in the fetched copy, which wins."""
    copy = learner_copy(tmp_path / "home" / "autograd-course" / ASSIGNMENT, RIGHT)
    loaded = learner_code.load_attention_backward(roots=[course.ROOT], home=tmp_path / "home")
    assert loaded.function is not None, loaded.reason
    assert loaded.path == copy and str(copy) in loaded.reason
    torch.manual_seed(0)
    for causal in (False, True):
        Q, K, V = (torch.randn(2, n, 3, dtype=torch.float64, requires_grad=True) for n in (5, 5, 5))
        dO = torch.randn(2, 5, 3, dtype=torch.float64)
        expected = torch.autograd.grad(attention_forward(Q, K, V, causal)[0], (Q, K, V), dO)
        with torch.no_grad():
            output, lse = attention_forward(Q, K, V, causal)
            got = loaded.function(Q, K, V, output, lse, dO, causal=causal)
        assert all(torch.allclose(a, b, atol=1e-12) for a, b in zip(got, expected))
    assert lesson_gate()(loaded.function) == {}


def test_a_wrong_answer_runs_and_the_lessons_gate_names_the_case(tmp_path):
    learner_copy(tmp_path / "home" / ASSIGNMENT, MASK_FORGOTTEN)
    loaded = learner_code.load_attention_backward(roots=[tmp_path / "nowhere"], home=tmp_path / "home")
    assert loaded.function is not None, loaded.reason
    failed = lesson_gate()(loaded.function)
    assert list(failed) == ["causal"] and failed["causal"].startswith("GradcheckError")


def test_an_answer_that_raises_gives_none_and_why(tmp_path):
    learner_copy(tmp_path / "course" / "exercises" / ASSIGNMENT, RAISES)
    loaded = learner_code.load_attention_backward(roots=[tmp_path / "course"], home=tmp_path)
    assert loaded.function is None and "raises ValueError: shapes do not match" in loaded.reason


def test_a_cell_that_fails_to_run_gives_none_and_why(tmp_path):
    learner_copy(tmp_path / "course" / "exercises" / ASSIGNMENT, "def attention_backward(Q, K, V\n")
    loaded = learner_code.load_attention_backward(roots=[tmp_path / "course"], home=tmp_path)
    assert loaded.function is None and "cell defining attention_backward" in loaded.reason
    assert "SyntaxError" in loaded.reason


def test_the_newest_answered_copy_wins(tmp_path):
    import os

    older = learner_copy(tmp_path / "course" / "exercises" / ASSIGNMENT, RAISES)
    newer = learner_copy(tmp_path / "home" / ASSIGNMENT, RIGHT)
    os.utime(older, (1_000_000_000, 1_000_000_000))
    assert learner_code.find_notebook(ASSIGNMENT, "attention_backward", roots=[tmp_path / "course"],
                                      home=tmp_path / "home") == newer
    os.utime(newer, (900_000_000, 900_000_000))
    assert learner_code.find_notebook(ASSIGNMENT, "attention_backward", roots=[tmp_path / "course"],
                                      home=tmp_path / "home") == older


def test_an_instructors_source_is_refused(tmp_path):
    """A notebook with nbgrader's solution markers is a source notebook (solutions/): never run."""
    path = learner_copy(tmp_path / "home" / ASSIGNMENT, "### BEGIN SOLUTION\n" + RIGHT + "\n### END SOLUTION")
    loaded = learner_code.load_attention_backward(roots=[tmp_path / "nowhere"], home=tmp_path / "home")
    assert loaded.function is None and loaded.path == path and "instructor's source" in loaded.reason


def section_6(tmp_path: Path, answer: str | None) -> str:
    """Lesson 11's imports cell and section 6, run in a copy of the course whose exercise 04 holds ``answer``, with
    an empty home: the text outputs."""
    root = tmp_path / "course"
    (root / "lessons").mkdir(parents=True)
    learner_copy(root / "exercises" / ASSIGNMENT, answer)
    cells = lesson_cells()
    start = next(i for i, c in enumerate(cells) if c.source.startswith("## 6."))
    end = next(i for i, c in enumerate(cells) if c.source.startswith("## Check your understanding"))
    imports = next(c for c in cells if c.cell_type == "code")
    notebook = nbformat.v4.new_notebook(cells=[imports, *cells[start:end]])
    (tmp_path / "home").mkdir()
    course.run_notebook(notebook, root / "lessons", HOME=str(tmp_path / "home"),
                        MPLBACKEND="module://matplotlib_inline.backend_inline")
    shutil.rmtree(root)
    return "\n".join(str(output.get("text", "")) + str(output.get("data", {}).get("text/plain", ""))
                     for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs)


def test_section_6_trains_on_a_right_answer_and_matches_autograd(tmp_path):
    text = section_6(tmp_path, RIGHT)
    assert "Gate passed: the model below trains on your backward" in text
    assert "matches autograd's to 1e-10 in every parameter" in text  # the claim, proven


def test_section_6_names_the_failed_case_and_trains_on_autograd(tmp_path):
    text = section_6(tmp_path, MASK_FORGOTTEN)
    assert "✗ gate, causal: GradcheckError" in text and "gate, non-causal" not in text
    assert "trains on autograd's backward instead." in text
    assert "without your backward both runs are autograd's, and they agree exactly" in text


# Exercise 02's Value, spread over three answer cells (lesson 11, section 1), written here as a learner might.
VALUE_CELLS = {
    "Value": '''
class Value:
    def __init__(self, data, children=(), op=""):
        self.data, self.grad, self._backward, self._prev, self._op = float(data), 0.0, lambda: None, set(children), op

    def _node(self, data, children, rule):
        out = Value(data, children)

        def _backward():
            for child, local in zip(children, rule()):
                child.grad += local * out.grad
        out._backward = _backward
        return out

    def __add__(self, other):
        other = as_value(other)
        return self._node(self.data + other.data, (self, other), lambda: (1.0, 1.0))

    def __mul__(self, other):
        other = as_value(other)
        return self._node(self.data * other.data, (self, other), lambda: (other.data, self.data))

    def __neg__(self):
        return self * -1

    def __sub__(self, other):
        return self + (-as_value(other))

    def __truediv__(self, other):
        return self * as_value(other) ** -1

    __radd__, __rmul__ = __add__, __mul__

    def __rsub__(self, other):
        return as_value(other) - self

    def __rtruediv__(self, other):
        return as_value(other) / self


def as_value(x):
    return x if isinstance(x, Value) else Value(x)
''',
    "nonlinearities": '''
def relu(self):
    return self._node(max(self.data, 0.0), (self,), lambda: (float(self.data > 0),))


def tanh(self):
    t = math.tanh(self.data)
    return self._node(t, (self,), lambda: (1 - t * t,))


def power(self, exponent):
    return self._node(self.data ** exponent, (self,), lambda: (exponent * self.data ** (exponent - 1),))


Value.relu, Value.tanh, Value.__pow__ = relu, tanh, power
''',
    "backward": '''
def backward(self):
    order, seen = [], set()

    def visit(node):
        if node not in seen:
            seen.add(node)
            for child in node._prev:
                visit(child)
            order.append(node)
    visit(self)
    self.grad = 1.0
    for node in reversed(order):
        node._backward()


Value.backward = backward
''',
}


def value_copy(folder: Path, answers: dict[str, str]) -> Path:
    """The released exercise-02 notebook saved in ``folder``, the answer cells named in ``answers`` filled in."""
    notebook = nbformat.read(course.release_notebook("02-computation-graph"), as_version=4)
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers:
            cell.source = answers[grade_id].strip()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "02-computation-graph.ipynb"
    nbformat.write(notebook, path)
    return path


def test_a_written_value_loads_from_its_three_cells_and_computes_gradients(tmp_path):
    """load_value runs the imports cell and the three answer cells in one namespace: the class they build together
    wins over the blank release and differentiates like lesson 11's moons need."""
    copy = value_copy(tmp_path / "home" / "autograd-course" / "02-computation-graph", VALUE_CELLS)
    loaded = learner_code.load_value(roots=[course.ROOT], home=tmp_path / "home")
    assert loaded.function is not None, loaded.reason
    assert loaded.path == copy and str(copy) in loaded.reason
    Value = loaded.function
    x, y = Value(0.3), Value(-1.2)
    out = (1 - (x * y + 0.5).tanh() * 2).relu() * (1 / 4)
    out.backward()
    t = math.tanh(0.3 * -1.2 + 0.5)
    assert math.isclose(out.data, (1 - 2 * t) / 4)
    assert math.isclose(x.grad, -2 * (1 - t * t) * -1.2 / 4) and math.isclose(y.grad, -2 * (1 - t * t) * 0.3 / 4)


def test_an_unwritten_value_falls_back_with_the_reason(tmp_path):
    """The blank release, and a copy with only the class written (its backward still the stub): no class, and why."""
    loaded = learner_code.load_value(roots=[course.ROOT], home=tmp_path)
    assert loaded.function is None and "not written yet" in loaded.reason
    value_copy(tmp_path / "home" / "02-computation-graph", {"Value": VALUE_CELLS["Value"],
                                                            "nonlinearities": VALUE_CELLS["nonlinearities"]})
    loaded = learner_code.load_value(roots=[tmp_path / "nowhere"], home=tmp_path / "home")
    assert loaded.function is None and "not written yet" in loaded.reason and "NotImplementedError" in loaded.reason
