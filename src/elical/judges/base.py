"""Judge interfaces and input checks shared by every judge (no model, no text rule here).

Equivalence judges share ``judge_many(pairs, questions=None) -> ndarray 0/1`` and
``judge(greedy, samples, question=None)``; correctness judges ``judge_many([(response, aliases), ...],
questions=None)`` and ``judge(responses, aliases, question=None)`` (also callable so). Project rule
(docs/DESIGN): judges always receive the question; a judge may ignore it, but the call sites pass it.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = ["PairJudge", "CorrectnessBase", "AliasCorrectnessJudge", "check_pairs", "check_alias_pairs",
           "alias_list"]


def alias_list(aliases: Sequence[str] | str) -> Sequence[str]:
    """``aliases`` as a sequence: a bare alias string is one alias, not its characters."""
    return [aliases] if isinstance(aliases, str) else aliases


def check_pairs(pairs, questions=None, aliases: bool = False) -> list:
    """Reject, at the boundary, what would crash deep inside a tokenizer: each pair must be two strings (or a
    string and a sequence of strings, with ``aliases``; a bare alias string becomes a one-element list).

    Raises TypeError naming the bad element (``pairs[i][j]``), ValueError when ``questions`` is given with a
    length other than ``len(pairs)``. Returns the pairs as a list."""
    out = []
    for i, pair in enumerate(pairs):
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise TypeError(f"pairs[{i}] must be a pair ({'response, aliases' if aliases else 'a, b'}), got {pair!r}")
        second = alias_list(pair[1]) if aliases else [pair[1]]
        for j, text in enumerate([pair[0], *second]):
            if not isinstance(text, str):
                where = f"pairs[{i}]" + f"[{min(j, 1)}]" + (f"[{j - 1}]" if aliases and j else "")
                raise TypeError(f"{where} must be str, got {type(text).__name__}")
        out.append((pair[0], second) if aliases else (pair[0], pair[1]))
    if questions is not None and len(questions) != len(pairs):
        raise ValueError(f"questions must hold one entry per pair: {len(questions)} for {len(pairs)} pairs")
    return out


def check_alias_pairs(pairs, questions=None) -> list[tuple[str, Sequence[str]]]:
    """`check_pairs` for (response, aliases) pairs."""
    return check_pairs(pairs, questions, aliases=True)


def question_at(questions, i: int) -> str | None:
    """The i-th question, or None when no questions were given."""
    return None if questions is None else questions[i]


class PairJudge:
    """Equivalence-judge interface: subclasses define ``judge_many(pairs, questions=None)``."""

    name = "?"

    def judge_many(self, pairs: Sequence[tuple[str, str]], questions: Sequence[str | None] | None = None) -> np.ndarray:
        raise NotImplementedError

    def judge(self, greedy: str, samples: Sequence[str], question: str | None = None) -> np.ndarray:
        """Agreement of each of n sampled answers with the greedy one: ndarray of int 0/1, shape (n,)."""
        return self.judge_many([(greedy, s) for s in samples], None if question is None else [question] * len(samples))


class CorrectnessBase:
    """Correctness-judge interface: subclasses define ``judge_many([(response, aliases), ...], questions=None)``."""

    name = "?"

    def judge_many(self, pairs, questions: Sequence[str | None] | None = None) -> np.ndarray:
        raise NotImplementedError

    def judge(self, responses: Sequence[str], aliases: Sequence[str], question: str | None = None) -> np.ndarray:
        """Correctness of n answers to one question with gold ``aliases``: ndarray of int 0/1, shape (n,)."""
        qs = None if question is None else [question] * len(responses)
        return self.judge_many([(r, aliases) for r in responses], qs)

    def __call__(self, responses: Sequence[str], aliases: Sequence[str], question: str | None = None) -> np.ndarray:
        return self.judge(responses, aliases, question)


class AliasCorrectnessJudge(CorrectnessBase):
    """Correctness from an equivalence judge: a response is correct when it is judged equivalent to any alias.

    ``equivalence``: any object with ``judge_many(pairs, questions=None)``; all (response, alias) pairs of a
    call go to it in one batch, each with its question. Aliases with no letter or digit are skipped (they match
    nothing).
    """

    def __init__(self, equivalence):
        self.equivalence = equivalence
        self.name = getattr(equivalence, "name", type(equivalence).__name__)

    def judge_many(self, pairs: Sequence[tuple[str, Sequence[str]]], questions=None) -> np.ndarray:
        """n (response, aliases) pairs -> ndarray of int 0/1, shape (n,)."""
        from elical.judges.text import normalize_answer

        pairs = check_alias_pairs(pairs, questions)
        flat, owner, qs = [], [], []
        for i, (response, aliases) in enumerate(pairs):
            for alias in aliases:
                if normalize_answer(alias):
                    flat.append((response, alias))
                    owner.append(i)
                    qs.append(question_at(questions, i))
        out = np.zeros(len(pairs), dtype=int)
        if flat:
            hits = self.equivalence.judge_many(flat, None if questions is None else qs)
            np.maximum.at(out, np.array(owner), np.asarray(hits, dtype=int))
        return out
