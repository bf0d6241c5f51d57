"""The protocol every check follows: cases as trials, a misconception named only on agreement or proof, how an
answer was made (routes), the contracts it keeps, and the structured diagnosis the class report reads."""

from __future__ import annotations

import importlib
import pkgutil

import nbformat
import pytest
import torch

import autograder.checks
from autograder import misconceptions
from autograder.checking import (
    GradingFailure,
    Misconception,
    NotWritten,
    Route,
    Routes,
    call_learner,
    check,
    expect_close,
    expect_no_alias,
    trial,
)
from autograder.grading.orchestration import report

WRONG = Misconception("a test mistake (with .grad, torch.no_grad() and 1.0 in its name)", "Do the other thing.")
OTHER = Misconception("another test mistake", "Never named here.")


@check
def _check_cases(values: list[float], expected: float = 1.0) -> None:
    for value in values:
        with trial():
            expect_close(value, expected, what=f"f({value})", source="expected",
                         symptoms=[WRONG.looks_like(2.0), OTHER.looks_like(3.0)])


def test_a_check_runs_every_case_and_passes_silently():
    _check_cases([1.0, 1.0, 1.0])


def test_one_matching_case_gives_the_numbers_alone():
    with pytest.raises(GradingFailure) as failure:
        _check_cases([1.0, 2.0, 5.0])
    assert "Likely misconception" not in str(failure.value)
    assert "2 of the 3 cases" in str(failure.value)


def test_two_matching_cases_name_the_misconception():
    with pytest.raises(GradingFailure) as failure:
        _check_cases([2.0, 1.0, 2.0])
    assert WRONG.line() in str(failure.value)
    assert failure.value.suspects == (WRONG,)


def test_the_named_case_is_one_that_matches():
    with pytest.raises(GradingFailure) as failure:
        _check_cases([5.0, 3.0, 3.0])
    message = str(failure.value)
    assert message.startswith(OTHER.line() + "\nf(3.0) is wrong")  # the named mistake first, then its case


@check
def _check_with_a_diagnosis(answer, in_a_trial: bool) -> None:
    """A check that re-raises the learner's error with a diagnosis of its own, as several parts' checks do."""
    def run():
        try:
            call_learner(answer, what="answer()")
        except GradingFailure as failure:
            raise GradingFailure(f"{failure.message}\n  (a diagnosis)") from None
    if in_a_trial:
        with trial():
            run()
    else:
        run()


@pytest.mark.parametrize("in_a_trial", [True, False])
def test_an_unwritten_part_reads_as_unwritten_whatever_the_check_does_with_it(in_a_trial):
    def answer():
        raise NotImplementedError

    with pytest.raises(NotWritten):
        _check_with_a_diagnosis(answer, in_a_trial)
    with pytest.raises(GradingFailure) as failure:  # a wrong answer's error stays a wrong answer
        _check_with_a_diagnosis(lambda: 1 / 0, in_a_trial)
    assert not isinstance(failure.value, NotWritten) and "(a diagnosis)" in str(failure.value)


@check
def _check_two_functions(first, second) -> None:
    """A part of two functions, checked one after the other (as exercise 10's hvp, then gnvp)."""
    for value in (1.0, 1.0):
        with trial():
            expect_close(call_learner(first, what="first()"), value, what="first()")
    with trial():
        call_learner(second, what="second()")


def _unwritten():
    raise NotImplementedError


def test_a_later_function_not_written_says_the_earlier_passed_and_never_hides_their_failure():
    with pytest.raises(NotWritten) as failure:
        _check_two_functions(lambda: 1.0, _unwritten)
    assert "The 2 cases this test tried before it passed." in str(failure.value)
    with pytest.raises(GradingFailure) as failure:  # the first function is wrong: that is what the learner reads
        _check_two_functions(lambda: 2.0, _unwritten)
    assert not isinstance(failure.value, NotWritten) and "first() is wrong" in str(failure.value)
    with pytest.raises(NotWritten) as failure:  # nothing passed before: no count
        _check_two_functions(_unwritten, _unwritten)
    assert "before it passed" not in str(failure.value)


@check
def _check_timed(answers) -> None:
    """A check whose cases each give the learner a time limit, as exercise 01 B2's and 11 D.1's do."""
    from autograder.time_limit import OutOfTime, time_limit

    for answer in answers:
        with trial():
            try:
                with time_limit(0.2):
                    expect_close(call_learner(answer, what="answer()"), 1.0, what="answer()")
            except OutOfTime as out:
                out.failure = GradingFailure("answer() was still running: stopped (and the later cases)")
                raise


def test_a_case_out_of_time_stops_the_check_with_its_failure():
    calls = []

    def forever():
        calls.append(1)
        while True:
            pass

    with pytest.raises(GradingFailure) as failure:
        _check_timed([lambda: 1.0, forever, forever, lambda: 1.0])
    assert calls == [1]  # the second loop never started
    assert str(failure.value) == "answer() was still running: stopped (and the later cases)"
    with pytest.raises(GradingFailure) as failure:  # a failure before it: both counted, the stopped case once
        _check_timed([lambda: 2.0, forever])
    assert "2 of the 2 cases this test tried failed" in str(failure.value)


def test_a_passing_check_says_what_passed(capsys):
    _check_cases([1.0, 1.0])
    assert capsys.readouterr().out.startswith("✓ _check_cases: the visible tests pass (2 cases).")


RIGHT = 1.0


@pytest.mark.parametrize("mistake", [
    WRONG.looks_like(RIGHT),                        # the mistake's value is the right answer
    WRONG.looks_like(RIGHT * (1 + 1.5e-6)),        # ... or within the check's tolerance of it
    WRONG.when(lambda got: abs(float(got) - RIGHT) > 0.5 or float(got) == RIGHT),  # the right answer fits it
], ids=["equal", "within-tolerance", "predicate"])
def test_a_mistake_the_right_answer_shows_is_never_named(mistake):
    """Two failing cases that match a misconception whose value (or test) also fits the right answer: the numbers
    alone, no name (issue 21, class 5)."""
    @check
    def check_it(values):
        for value in values:
            with trial():
                expect_close(value, RIGHT, what=f"f({value})", source="expected", symptoms=[mistake])

    with pytest.raises(GradingFailure) as failure:
        check_it([RIGHT + 0.9, RIGHT + 0.9])
    assert "Likely misconception" not in str(failure.value)


def test_a_value_two_mistakes_share_names_neither():
    @check
    def check_it(values):
        for value in values:
            with trial():
                expect_close(value, 1.0, what=f"f({value})", source="expected",
                             symptoms=[WRONG.looks_like(2.0), OTHER.looks_like(2.0)])

    with pytest.raises(GradingFailure) as failure:
        check_it([2.0, 2.0])
    assert "Likely misconception" not in str(failure.value)


def test_an_observed_mistake_stays_armed():
    @check
    def check_it(values):
        for value in values:
            with trial():
                expect_close(value, 1.0, what=f"f({value})", source="expected", symptoms=[WRONG.given(True)])

    with pytest.raises(GradingFailure, match="Likely misconception: a test mistake"):
        check_it([1.5, 1.7])


def test_a_name_defined_twice_with_another_hint_is_an_error():
    assert Misconception(WRONG.name, WRONG.hint) == WRONG  # the same mistake again is allowed
    with pytest.raises(ValueError, match="defined twice"):
        Misconception(WRONG.name, "A different hint.")


def test_a_proven_mistake_is_named_at_once():
    def change_input(x):
        x.add_(1.0)
        return x.sum()

    @check
    def check_it(fn):
        with trial():
            call_learner(fn, torch.zeros(3), what="f(x)")

    with pytest.raises(GradingFailure, match="changed its inputs") as failure:
        check_it(change_input)
    assert failure.value.proven is not None


# ---------------------------------------------------------------------------------------------- routes

def _autograd_backward(x):
    x = x.detach().clone().requires_grad_(True)
    (x**2).sum().backward()
    return x.grad


def _autograd_grad_saved_reference(x, _grad=torch.autograd.grad):
    x = x.detach().clone().requires_grad_(True)
    return _grad((x**2).sum(), x)[0]


def _enable_grad_inside_no_grad(x):
    with torch.no_grad(), torch.enable_grad():
        return _autograd_backward(x)


def _func_grad(x):
    return torch.func.grad(lambda t: (t**2).sum())(x)


def _forward_mode(x):
    return torch.func.jacfwd(lambda t: (t**2).sum())(x)


def _backward_kernel(x):  # PyTorch's own backward of x * sigmoid(x), called without autograd
    return torch.ops.aten.silu_backward(torch.ones_like(x), x)


def _backward_kernel_overload(x):
    return torch.ops.aten.tanh_backward.default(torch.ones_like(x), torch.tanh(x))


def _by_hand(x):
    return 2 * x


@pytest.mark.parametrize("answer", [_autograd_backward, _autograd_grad_saved_reference, _enable_grad_inside_no_grad,
                                    _func_grad, _forward_mode, _backward_kernel, _backward_kernel_overload])
def test_autograd_is_seen_whichever_way_it_is_called(answer):
    with pytest.raises(GradingFailure, match="used autograd where the part asks for a hand derivation"):
        call_learner(answer, torch.tensor([1.0, 2.0]), what="grad(x)", forbid=[Route.AUTOGRAD])


def test_a_hand_derivation_passes_and_counts_nothing():
    routes = Routes()
    assert torch.equal(call_learner(_by_hand, torch.tensor([1.0, 2.0]), what="g", forbid=[Route.AUTOGRAD],
                                    routes=routes), torch.tensor([2.0, 4.0]))
    assert (routes.backward_runs, routes.forward_ad, routes.backward_kernels, routes.optimizer_steps,
            routes.clipping) == (0, 0, 0, 0, 0)


def test_backward_runs_are_counted():
    def three_micro_batches(w):
        w = w.detach().clone().requires_grad_(True)
        for _ in range(3):
            (w * 2).sum().backward()
        return w.grad

    routes = Routes()
    call_learner(three_micro_batches, torch.ones(2), what="g", routes=routes)
    assert routes.backward_runs == 3


def test_optimizer_and_clipping_are_seen():
    from torch.nn.utils import clip_grad_norm_, get_total_norm  # references taken before the check starts watching

    def with_optimizer(w):
        w = torch.nn.Parameter(w.detach().clone())
        w.grad = torch.ones_like(w)
        torch.optim.SGD([w], lr=0.1).step()
        return w.detach()

    def with_clipping(w):
        w = torch.nn.Parameter(w.detach().clone())
        w.grad = torch.full_like(w, 10.0)
        clip_grad_norm_([w], 1.0)
        return w.grad

    with pytest.raises(GradingFailure, match="used torch.optim where the part asks you to write the update"):
        call_learner(with_optimizer, torch.ones(2), what="step", forbid=[Route.OPTIMIZER])
    with pytest.raises(GradingFailure, match="clipping from scratch"):
        call_learner(with_clipping, torch.ones(2), what="clip", forbid=[Route.CLIPPING])
    with pytest.raises(GradingFailure, match="clipping from scratch"):
        call_learner(lambda w: get_total_norm([w]), torch.ones(2), what="norm", forbid=[Route.CLIPPING])
    assert torch.nn.utils.clip_grad_norm_ is clip_grad_norm_  # put back afterwards
    assert get_total_norm(torch.ones(4)).item() == 2.0  # and still works unwatched


def test_the_watch_is_undone_when_the_answer_raises():
    depth = torch._C._len_torch_function_stack()

    def broken(x):
        raise ValueError("oops")

    with pytest.raises(GradingFailure, match="raised ValueError"):
        call_learner(broken, torch.ones(1), what="f", forbid=list(Route))
    assert torch._C._len_torch_function_stack() == depth
    assert torch.nn.utils.clip_grad.clip_grad_norm_.__name__ == "clip_grad_norm_"


# ---------------------------------------------------------------------------------------------- contracts

@pytest.mark.parametrize("mutate, change", [
    (lambda x: x.add_(1.0), "values changed"),
    (lambda x: (x.add_(1.0), x.sub_(1.0)), "changed in place"),
    (lambda x: x.requires_grad_(True), "requires_grad went from False to True"),
    (lambda x: setattr(x, "grad", torch.ones_like(x)), ".grad went from None to a tensor"),
])
def test_changed_inputs_are_seen(mutate, change):
    def answer(x):
        mutate(x)
        return 0.0

    with pytest.raises(GradingFailure, match=change):
        call_learner(answer, torch.zeros(2), what="f(x)")


def test_an_argument_meant_to_change_may_change():
    def step(params, lr):
        params[0].sub_(lr)
        return "stepped"

    params = [torch.zeros(2)]
    assert call_learner(step, params, 0.1, what="step", may_change=["params"]) == "stepped"
    assert torch.equal(params[0], torch.full((2,), -0.1))
    with pytest.raises(GradingFailure, match=r"step changed its arguments: params\[0\]: its values changed"):
        call_learner(step, [torch.zeros(2)], 0.1, what="step")


def test_an_argument_meant_to_change_may_be_named_by_its_position():
    def renamed(ps, lr):  # the learner's own name for the parameters
        ps[0].sub_(lr)

    def star(*args):
        args[0][0].sub_(args[1])

    for answer in (renamed, star):
        call_learner(answer, [torch.zeros(2)], 0.1, what="step", may_change=[0])
    with pytest.raises(GradingFailure, match="changed its arguments"):
        call_learner(renamed, [torch.zeros(2)], 0.1, what="step", may_change=["params"])


def test_aliases_of_inputs_and_grads_are_seen():
    w = torch.zeros(3, requires_grad=True)
    w.grad = torch.ones(3)
    with pytest.raises(GradingFailure, match=r"the result shares memory with w.grad"):
        expect_no_alias(w.grad, {"w": w}, what="grads(w)")
    with pytest.raises(GradingFailure, match=r"the result\[0\] shares memory with w"):
        expect_no_alias([w.detach()[1:]], {"w": w}, what="grads(w)")
    expect_no_alias(w.grad.clone(), {"w": w}, what="grads(w)")


# ---------------------------------------------------------------------------------------------- the class report

def _all_misconceptions() -> dict[str, Misconception]:
    for info in pkgutil.walk_packages(autograder.checks.__path__, "autograder.checks."):
        importlib.import_module(info.name)
    return dict(misconceptions.REGISTRY)


def _graded_notebook(path, names: list[str]) -> None:
    cells = []
    for number, name in enumerate(names):
        cell = nbformat.v4.new_code_cell("checks.check_it(f)")
        cell.metadata["nbgrader"] = {"grade": True, "grade_id": f"test_{number}", "points": 1, "locked": True,
                                     "solution": False, "schema_version": 3}
        record = {"misconception": name, "check": "check_it", "cases": 2, "proven": False}
        cell.outputs = [nbformat.v4.new_output("display_data", data={misconceptions.MIME: record, "text/plain": ""}),
                        nbformat.v4.new_output("error", ename="GradingFailure", evalue=f"Likely misconception: {name}.",
                                               traceback=[])]
        cells.append(cell)
    nbformat.write(nbformat.v4.new_notebook(cells=cells), path)


def test_the_report_reads_every_name_the_package_defines_in_full(tmp_path):
    names = sorted(_all_misconceptions())
    assert WRONG.name in names and len(names) > 20
    _graded_notebook(tmp_path / "graded.ipynb", names)
    found = report.misconceptions(tmp_path / "graded.ipynb")
    assert [found[f"test_{number}"] for number in range(len(names))] == [{name} for name in names]


def test_a_published_diagnosis_reaches_the_notebook():
    published = []

    class Shell:
        pass

    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    shell.display_pub.publish = lambda data, metadata=None, **kwargs: published.append(data)
    try:
        with pytest.raises(GradingFailure):
            _check_cases([2.0, 2.0])
    finally:
        InteractiveShell.clear_instance()
    assert published == [{misconceptions.MIME: {"misconception": WRONG.name, "check": "_check_cases", "cases": 2,
                                                 "proven": False}, "text/plain": ""}]


def test_every_check_the_notebooks_call_is_a_check():
    """A test cell calls checks.check_*; each is made with @check (every case a trial, names only on agreement)."""
    import importlib
    import pkgutil

    import autograder.checks

    found = 0
    for info in pkgutil.iter_modules(autograder.checks.__path__, "autograder.checks."):
        if not info.name.startswith("autograder.checks.ex"):
            continue
        module = importlib.import_module(info.name)
        for name in dir(module):
            if name.startswith("check_") and callable(getattr(module, name)):
                found += 1
                assert getattr(getattr(module, name), "is_check", False), f"{info.name}.{name} is not a @check"
    assert found >= 30


def test_a_learner_reads_the_question_and_the_feedback_adds_the_explanation():
    """While working, a failing test names the mistake and asks its question, never the explanation (which may show
    the fix); graded feedback turns the published diagnosis into the explanation (autograder.feedback)."""
    import nbformat

    from autograder.feedback import ExplainMistakes
    from autograder.misconceptions import MIME

    mistake = Misconception("a mistake of the feedback test", "Do it like this: x.clone().", question="Is x yours?")
    assert mistake.line() == "Likely misconception: a mistake of the feedback test. Is x yours?"
    assert "x.clone()" not in mistake.line() and "x.clone()" in mistake.explanation()
    cell = nbformat.v4.new_code_cell("checks.check_x(x)", outputs=[
        nbformat.v4.new_output("display_data", data={MIME: {"misconception": mistake.name, "check": "check_x",
                                                            "cases": 2, "proven": False}, "text/plain": ""}),
        nbformat.v4.new_output("display_data", data={MIME: {"misconception": "<script>a name we never made",
                                                            "check": "check_x", "cases": 2, "proven": False},
                                                      "text/plain": ""})])
    ExplainMistakes().preprocess_cell(cell, {}, 0)
    explained, forged = (output["data"] for output in cell.outputs)
    assert "Do it like this: x.clone()." in explained["text/html"] and "About this mistake" in explained["text/plain"]
    assert "text/html" not in forged and forged["text/plain"] == ""  # only the course's own names are explained
