"""Part C: multiple-choice review questions whose answer cannot be found from the form of the options: every
question is asked in two orders under other letters (:func:`presentations`), and a form of answering is named only
across questions."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ...checking import GradingFailure, Misconception, call_learner, check, trial
from ...seeding import generator
from .misconceptions import (
    ANSWERED_BY_POSITION,
    BACKWARD_RETURNS,
    BACKWARD_UPDATES,
    CHOSE_BY_FORM,
    CLIP_ONLY_MEASURES,
    CLIPPED_PER_TENSOR,
    CLIPPING_EQUALISES,
    CONSTANT_BLOCKS_GRADIENT,
    FILLED_GRAD_RAISES,
    GRAD_OVERWRITTEN,
    GRAPH_REUSED,
    IDENTITY_SCALED,
    INFERENCE_AS_NO_GRAD,
    INTERMEDIATE_GRAD,
    ONE_NOT_UPSTREAM,
    RECORDING_OFF_FORBIDDEN,
    ROUTES_AVERAGED,
)


@dataclass(frozen=True)
class Question:
    """A multiple-choice item: the prompt, the right option, and each wrong option with the mistake it reveals."""

    name: str
    prompt: str
    correct: str
    distractors: tuple[tuple[str, Misconception], ...]
    position: int  # where the right option sits in the notebook's order (0 = a)

    def options(self) -> list[str]:
        """The options in the notebook's order."""
        texts = [text for text, _ in self.distractors]
        texts.insert(self.position, self.correct)
        return texts

    def mistake(self, text: str) -> Misconception | None:
        return next((m for option, m in self.distractors if option == text), None)


QUESTIONS = (
    Question(
        "inference_or_no_grad",
        "Two cached results, computed with recording off in two ways, each multiplied by a tensor that requires "
        "grad. What does this print?\n\n```python\nx = torch.ones(3)\nwith torch.inference_mode():\n    a = 2 * x\n"
        "with torch.no_grad():\n    b = 2 * x\nt = torch.tensor(1.0, requires_grad=True)\nfor cached in (b, a):\n"
        "    try:\n        (t * cached).sum().backward()\n        print(t.grad)\n    except RuntimeError:\n"
        "        print(\"RuntimeError\")\n```",
        "It prints tensor(6.), then RuntimeError: t * a must save a for backward, and an inference tensor cannot be.",
        (("It prints tensor(6.), then tensor(12.): outputs of inference_mode and of no_grad are the very same "
          "constants.",
          INFERENCE_AS_NO_GRAD),
         ("It prints RuntimeError twice: a tensor computed with recording off can never meet one that requires grad.",
          RECORDING_OFF_FORBIDDEN),
         ("It prints None, then RuntimeError: b was computed without a graph, so no gradient can reach t through it.",
          CONSTANT_BLOCKS_GRADIENT)),
        position=2),
    Question(
        "what_backward_populates",
        "What does this print?\n\n```python\nw = torch.tensor([1.0, 2.0], requires_grad=True)\nh = 3 * w\n"
        "result = (h * h).sum().backward()\nprint(result, w.grad, h.grad)\n```",
        "It prints None, tensor([18., 36.]) and None: only the leaf w keeps a gradient, and backward returns nothing.",
        (("It prints None, tensor([18., 36.]) and tensor([6., 12.]): every tensor in the graph keeps its own "
          "gradient.", INTERMEDIATE_GRAD),
         ("It prints a list holding tensor([18., 36.]), then None twice: backward hands the gradients back to its "
          "caller.", BACKWARD_RETURNS),
         ("It prints None three times: backward has already subtracted the gradient from w and then emptied its "
          ".grad.", BACKWARD_UPDATES)),
        position=0),
    Question(
        "why_zero_grad",
        "What does this print?\n\n```python\nx = torch.tensor(2.0, requires_grad=True)\nfor step in range(3):\n"
        "    z = 4 * x + x\n    z.backward()\nprint(x.grad)\n```",
        "It prints tensor(15.): every backward adds its 5 into x.grad, and nothing in the loop resets it.",
        (("It prints tensor(5.): every backward replaces x.grad with the gradient of the newest z, which is 5.",
          GRAD_OVERWRITTEN),
         ("It raises a RuntimeError at the second backward, because x.grad still holds the first call's 5.",
          FILLED_GRAD_RAISES),
         ("It raises a RuntimeError at the second backward, because the first backward freed the graph of z.",
          GRAPH_REUSED)),
        position=3),
    Question(
        "clipping_keeps_the_profile",
        "An exploding profile: the first layer's gradient has norm 1000, the last one's 0.1. What does this print?"
        "\n\n```python\nfirst = torch.zeros(4, requires_grad=True)\nlast = torch.zeros(4, requires_grad=True)\n"
        "first.grad = torch.full((4,), 500.0)\nlast.grad = torch.full((4,), 0.05)\n"
        "torch.nn.utils.clip_grad_norm_([first, last], max_norm=1.0)\nprint(first.grad.norm(), last.grad.norm())\n```",
        "It prints tensor(1.) tensor(0.0001): one factor, about 1/1000, scales both, so their ratio stays 10000.",
        (("It prints tensor(1.) tensor(0.1000): each tensor is clipped to norm 1 alone; the last was already below.",
          CLIPPED_PER_TENSOR),
         ("It prints tensor(1.) tensor(1.): clipping brings every gradient to norm 1 and evens out the profile.",
          CLIPPING_EQUALISES),
         ("It prints tensor(1000.) tensor(0.1000): clip_grad_norm_ returns the total norm, the gradients stay.",
          CLIP_ONLY_MEASURES)),
        position=1),
    Question(
        "residual_identity_path",
        "A residual block y = x + F(x) with F(x) = 0.01·x², under an upstream gradient of 3. What does this print?"
        "\n\n```python\nx = torch.tensor(2.0, requires_grad=True)\ny = x + 0.01 * x ** 2\n(3 * y).backward()\n"
        "print(x.grad)\n```",
        "It prints tensor(3.1200): the identity passes the upstream 3 on unscaled, the branch adds 3 × 0.04.",
        (("It prints tensor(0.1200): the block passes on only what its branch lets through, which is 3 × 0.04.",
          IDENTITY_SCALED),
         ("It prints tensor(1.5600): the identity and the branch share the upstream 3, so (3 + 3 × 0.04) / 2.",
          ROUTES_AVERAGED),
         ("It prints tensor(1.1200): the identity path adds a constant 1, and then the branch adds 3 × 0.04.",
          ONE_NOT_UPSTREAM)),
        position=1),
)

LETTERS = "abcd"


def _shuffled(question: Question, gen: torch.Generator, away_from: list[str] | None = None) -> list[str]:
    """The options in a random order; given ``away_from`` (another order), one in which no option keeps its letter
    from that order (a uniformly drawn derangement of it)."""
    texts = question.options()
    while True:
        order = [texts[i] for i in torch.randperm(len(texts), generator=gen).tolist()]
        if away_from is None or all(a != b for a, b in zip(order, away_from)):
            return order


def presentations(question: Question, grading_seed: int | None) -> list[list[str]]:
    """The two orders a check offers the options in: the notebook's and a shuffle (visible), two shuffles (hidden,
    from the grading seed). No option has the same letter in both orders, so the right option moves: a fixed letter
    is wrong in one order at least; a letter returned twice means two different options (a choice by position), one
    option chosen twice means two different letters (a choice by content). Each order alone is uniformly random, so
    the right option is equally likely under every letter."""
    if grading_seed is None:
        gen = torch.Generator().manual_seed(929 + QUESTIONS.index(question))
        first = question.options()
    else:
        gen = generator(f"09/multiple_choice/{question.name}", grading_seed)
        first = _shuffled(question, gen)
    return [first, _shuffled(question, gen, away_from=first)]


def _words(text: str) -> set[str]:
    return set(re.findall(r"[\w′.']+", text.lower()))


#: Naive rules that choose an option by its form: name -> the indices of the options the rule may pick.
FORM_RULES: dict[str, Callable[[list[str], str], set[int]]] = {
    "the longest option": lambda texts, prompt: {i for i, t in enumerate(texts) if len(t) == max(map(len, texts))},
    "the shortest option": lambda texts, prompt: {i for i, t in enumerate(texts) if len(t) == min(map(len, texts))},
    "the option sharing the most words with the question": lambda texts, prompt: {
        i for i, t in enumerate(texts)
        if len(_words(t) & _words(prompt)) == max(len(_words(u) & _words(prompt)) for u in texts)},
}


def _ask(answer, texts: list[str], what: str) -> tuple[str, dict[str, str]] | GradingFailure:
    """The letter the learner's function picks among ``texts`` (or the failure it caused)."""
    __tracebackhide__ = True
    options = dict(zip(LETTERS, texts))
    try:
        letter = call_learner(answer, dict(options), what=what)
    except GradingFailure as failure:
        return failure
    picked = letter.strip().lower().strip("()") if isinstance(letter, str) else None
    if picked not in options:
        return GradingFailure(f"{what} returned {letter!r:.60}; expected one of the letters {list(options)}.")
    return picked, options


def _form_of(wrong: list[tuple[Question, str, dict[str, str]]]) -> str | None:
    """The form rule every wrong choice obeys, when the wrong choices span at least two questions."""
    if len({question.name for question, _, _ in wrong}) < 2:
        return None
    for form, rule in FORM_RULES.items():
        if all(LETTERS.index(letter) in rule(list(options.values()), question.prompt)
               for question, letter, options in wrong):
            return form
    return None


@check
def check_multiple_choice(*answers, grading_seed: int | None = None) -> None:
    """Part C: one function per question of QUESTIONS, in that order; each returns the right option's letter.

    Each question is asked twice, in two orders (see :func:`presentations`); each asking is a trial. A wrong option
    chosen in both orders names the mistake it stands for; the same letter for two different options names
    "answered by position"; wrong choices in two questions or more that all obey one rule of form name that.

    Domain: each function receives a fresh dict {letter: option text} of the four options under the letters a to d
    (the notebook's order and a derangement of it, visible; two drawn orders, hidden). Contracts checked: it returns
    one of those letters as a string (any case, surrounding spaces or parentheses allowed); the dict it receives is
    its own copy, so changing it changes nothing the check reads.
    """
    __tracebackhide__ = True
    asked = []
    for question, answer in zip(QUESTIONS, answers, strict=True):
        orders = presentations(question, grading_seed)
        picks = [_ask(answer, texts, f"{question.name}(options), order {k + 1} of {len(orders)}")
                 for k, texts in enumerate(orders)]
        asked.append((question, picks))
    wrong = [(question, *pick) for question, picks in asked for pick in picks
             if not isinstance(pick, GradingFailure) and pick[1][pick[0]] != question.correct]
    form = _form_of(wrong)
    for question, picks in asked:
        letters = {pick[0] for pick in picks if not isinstance(pick, GradingFailure)}
        for k, pick in enumerate(picks):
            with trial():
                if isinstance(pick, GradingFailure):
                    raise pick
                letter, options = pick
                if options[letter] == question.correct:
                    continue
                if form:  # one rule explains the wrong choices of two questions or more
                    suspects = (CHOSE_BY_FORM,)
                elif len(letters) == 1 and len(picks) == 2 and not isinstance(picks[1 - k], GradingFailure):
                    suspects = (ANSWERED_BY_POSITION,)  # one letter for two different options
                else:  # the same wrong statement chosen in both orders names what it stands for
                    suspects = tuple(m for m in [question.mistake(options[letter])] if m)
                note = f"\n  (Each of your wrong choices was {form}.)" if form else ""
                raise GradingFailure(
                    f"{question.name}(options), order {k + 1} of {len(picks)}, chose ({letter}) "
                    f"\"{options[letter]}\": that is not the right answer to: {question.prompt}{note}",
                    suspects=suspects)


def question_markdown(question: Question) -> str:
    """The question and its options as Markdown, in the notebook's order (the notebook shows exactly this)."""
    options = "\n".join(f"- ({letter}) {text}" for letter, text in zip(LETTERS, question.options()))
    return f"**`{question.name}`** — {question.prompt}\n\n{options}"
