"""MMLU asked free-form with lettered choices: which choice a response names, and whether it is right.

`mmlu_correct` judges correctness (the right choice named by letter or text, and no other choice);
`mmlu_choice` gives the one choice a response names (None for none or several), so two answers to an MMLU
question are equivalent when they name the same single choice.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from elical.judges.text import find_spans, tokens

__all__ = ["MMLUCorrectness", "mmlu_correct", "mmlu_choice", "choices_named", "named_by_text"]

_LETTERS = "ABCD"
# "A" is also an article: not a letter when a lowercase word follows ("A cat"), except words that
# follow a letter far more often than a noun does ("A is correct", "A or B"); "A: text" is the Q/A
# prefix small chat models like to write, not the letter.
_LETTER_RE = re.compile(
    r"(?<![A-Za-z0-9])(?<![A-Za-z]\.)"
    r"(?:\(([A-Da-d])\)"
    r"|([B-D])(?![A-Za-z0-9-])(?!\.[A-Za-z])"
    r"|(A)(?![A-Za-z0-9-])(?!\.[A-Za-z])(?!:[ \t]*\S)"
    r"(?!\s+(?!(?:is|was|seems|and|or|because|since)\b)[a-z]))"
)
_LETTER_CUE_RE = re.compile(r"\b(?i:answer(?:\s+is)?|option|choice)\s*[:\-]?\s*\(?([A-D])\b")


def _letters_named(response: str) -> set[int]:
    found = [next(g for g in m.groups() if g) for m in _LETTER_RE.finditer(response)]
    found += _LETTER_CUE_RE.findall(response)
    return {_LETTERS.index(letter.upper()) for letter in found}


def named_by_text(response: str, choices: Sequence[str]) -> set[int]:
    """Choices whose text occurs in the response; a choice inside a longer matched choice does not count."""
    resp = tokens(response)
    claimed = [False] * len(resp)
    named = set()
    for j in sorted(range(len(choices)), key=lambda j: -len(tokens(choices[j]))):
        for start, end in find_spans(tokens(choices[j]), resp):
            if not any(claimed[start:end]):
                claimed[start:end] = [True] * (end - start)
                named.add(j)
    return named


def choices_named(response: str, choices: Sequence[str]) -> set[int]:
    """Indices of the choices a response names, by text (token-bounded; a choice inside a longer named choice
    does not count) or by letter (see `mmlu_correct`). Raises ValueError for more than four choices."""
    if not 0 < len(choices) <= len(_LETTERS):
        raise ValueError(f"choices must hold 1 to {len(_LETTERS)} strings, got {len(choices)}")
    named = named_by_text(response, choices)
    rest = response  # letters inside a quoted choice ("Vitamin C") name nothing
    for j in sorted(named, key=lambda j: -len(choices[j])):
        text = choices[j].strip().rstrip(".")
        rest = re.sub(re.escape(text), "_", rest, flags=re.IGNORECASE) if text else rest
    return named | {j for j in _letters_named(rest) if j < len(choices)}


def mmlu_choice(response: str, choices: Sequence[str]) -> int | None:
    """The one choice the response names (index), or None when it names none or several."""
    named = choices_named(response, choices)
    return next(iter(named)) if len(named) == 1 else None


def mmlu_correct(response: str, choices: Sequence[str], answer_index: int) -> bool:
    """Correctness of a free-form answer to an MMLU question shown with lettered choices A-D.

    Correct when the response names the right choice — by letter ("B", "(B)", "B.", "Answer: B") or
    by its text (token-bounded containment) — and names no other choice by letter or text: "The answer is A,
    not B, C or D." is wrong for every key. A capital "A" followed by a lowercase word is read as an article,
    not a letter; an empty response names nothing and is wrong.

    Parameters
    ----------
    response : str
    choices : sequence of str, length 1-4
    answer_index : int
        Index of the correct choice.

    Raises
    ------
    ValueError
        If there are more than four choices or ``answer_index`` is out of range.
    """
    if not 0 < len(choices) <= len(_LETTERS):
        raise ValueError(f"choices must hold 1 to {len(_LETTERS)} strings, got {len(choices)}")
    if not 0 <= answer_index < len(choices):
        raise ValueError(f"answer_index must be in [0, {len(choices)}), got {answer_index!r}")
    return choices_named(response, choices) == {answer_index}


class MMLUCorrectness:
    """Correctness judge for MMLU with the call signature of :class:`elical.judges.rules.CorrectnessJudge`.

    ``judge(responses, answer) -> ndarray of shape (len(responses),)`` with 0/1 entries, from
    :func:`mmlu_correct`. ``answer`` must be an :class:`elical.data.mmlu.MMLUAnswer` (as produced by
    :func:`elical.data.mmlu.load_mmlu`); a plain alias list raises ValueError, since the other choices are needed to
    tell a right answer from one that names every choice.
    """

    mode = "mmlu_correct"

    def __call__(self, responses: Sequence[str], answer, question: str | None = None) -> np.ndarray:
        choices, index = getattr(answer, "choices", None), getattr(answer, "answer_index", None)
        if choices is None or index is None:
            raise ValueError("MMLUCorrectness needs an MMLUAnswer (choices and answer_index), got "
                             f"{type(answer).__name__} {list(answer)!r}")
        return np.array([int(mmlu_correct(r, choices, index)) for r in responses], dtype=np.int64)
