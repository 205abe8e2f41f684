"""Answer extraction apart from comparison, and the normalised alias-containment floor judge ("normalized").

`extract(answer, question)` turns a free-form answer into what it claims: its SQuAD-normalised tokens, the content
words (English stop words removed), the content words *beyond the question* (an echo of the question claims
nothing), its numbers as values, its polarity (a negation word) and whether it answers at all (`Extraction.answers`:
not empty, no refusal, not a restatement of the question). The learned judges (`elical.judges.learned`) compare two
extractions through `elical.judges.features`; `NormalizedCorrectnessJudge` is the standard floor every default
correctness judge must beat: a gold alias, normalised the same way, occurs in a real answer.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from elical.judges.base import CorrectnessBase, check_alias_pairs, question_at
from elical.judges.choices import named_by_text
from elical.judges.rules import _code_in, is_code
from elical.judges.text import find_spans, normalize_answer, numbers_in, strip_numbers

__all__ = ["Extraction", "extract", "is_open", "alias_contained", "listed_options", "option_tokens", "options_named",
           "NormalizedCorrectnessJudge", "NEGATIONS", "REFUSALS"]

# Negation words after normalisation ("doesn't" -> "doesnt"); kept out of the stop words so that polarity counts.
NEGATIONS = frozenset({"not", "no", "never", "none", "neither", "nor", "nobody", "nothing", "cannot", "without",
                       "dont", "doesnt", "didnt", "isnt", "wasnt", "arent", "werent", "cant", "couldnt", "wont",
                       "wouldnt", "hasnt", "havent", "hadnt", "shouldnt"})  # fmt: skip
# Refusals, as normalised token sequences: an answer holding one claims no answer.
REFUSALS = tuple(tuple(s.split()) for s in (
    "dont know", "do not know", "not sure", "im sorry", "i am sorry", "cannot answer", "cant answer", "unable to",
    "no information", "not enough information", "as an ai", "cannot provide", "cant provide", "cannot determine",
    "not possible to determine"))  # fmt: skip
STOP_WORDS = frozenset(ENGLISH_STOP_WORDS) - NEGATIONS
OPEN_MIN_WORDS = 8  # a 20-token answer has ~12-16 words; the default QA answers of 1-5 words are bare phrases
_CLOSED = re.compile(r"[.!?\"')\]]\s*$")  # ends with closing punctuation


def is_open(text: str) -> bool:
    """The answer looks cut off: it stops without closing punctuation (. ! ? or a closing quote/bracket) and is long
    enough (>= `OPEN_MIN_WORDS` words) to have reached a token limit; a short bare phrase ("It is Lyon") is not."""
    return len(text.split()) >= OPEN_MIN_WORDS and not _CLOSED.search(text)


@dataclass(frozen=True)
class Extraction:
    """What a free-form answer claims, relative to its question.

    tokens : normalised tokens (`elical.judges.text.normalize_answer`). content : tokens that are not English stop
    words (negations kept). beyond : content tokens not among the question's tokens. numbers : numbers as
    canonical values (`elical.judges.text.numbers_in`); new_numbers : those not written in the question.
    negated : a negation word (`NEGATIONS`) beyond the question's own. refusal : a `REFUSALS` phrase. echo : the
    answer only restates the question: its content words, counted with repeats, are the question's and it either
    repeats all of the question's content words in the question's order or is a contiguous piece of the question
    that starts where the question starts or stops without closing punctuation: a cut-off echo.
    A choice answer ("X is older than Y" to "Who is older, Y or X?"), a piece from inside the question closed like a
    sentence, which names one of its options ("Jane Austen." to "Who wrote Emma? Options: Charlotte Brontë; Jane
    Austen; ..."), an answer that is exactly one of the options the question lists after "Options:", closed or not
    ("stationary bicycle", "B. treadmill"), or "The capital of Durham is Durham." is no echo.
    """

    tokens: tuple[str, ...]
    content: tuple[str, ...]
    beyond: tuple[str, ...]
    numbers: frozenset[str]
    new_numbers: frozenset[str]
    negated: bool
    refusal: bool
    echo: bool

    @property
    def answers(self) -> bool:
        """Whether the answer claims anything: not empty, no refusal, not only an echo of the question."""
        return bool(self.tokens) and not self.refusal and not self.echo


def _in_order(content: Sequence[str], q_seq: Sequence[str]) -> bool:
    """Every content word of the question occurs in ``content``, in the question's order."""
    want = iter(content)
    return all(any(t == w for w in want) for t in q_seq if t not in STOP_WORDS)


_OPTIONS = re.compile(r"\bOptions:\s*(.+)$", re.S)


@functools.lru_cache(maxsize=1 << 12)
def listed_options(question: str | None) -> tuple[str, ...]:
    """The options a question lists as "... Options: A; B; C." (as MMLU is asked free-form, `make_final.py`), in
    order, stripped, without the list's final period; () when it lists none."""
    m = _OPTIONS.search(question) if question else None
    return tuple(o.strip() for o in m.group(1).strip().removesuffix(".").split(";") if normalize_answer(o)) if m \
        else ()


@functools.lru_cache(maxsize=1 << 12)
def option_tokens(question: str | None) -> tuple[tuple[str, ...], ...]:
    """The normalised token tuples of `listed_options`, in the same order; () when the question lists none."""
    return tuple(tuple(normalize_answer(o).split()) for o in listed_options(question))


@functools.lru_cache(maxsize=1 << 14)
def options_named(answer: str, question: str | None) -> frozenset[int]:
    """Indices (into `listed_options`) of the listed options whose text the answer contains, token-bounded, an
    option inside a longer named option not counted (`elical.judges.choices.named_by_text`); empty when the question
    lists none. Letters are not read: the options are listed without them."""
    opts = listed_options(question)
    return frozenset(named_by_text(answer, opts)) if opts else frozenset()


def _names_option(toks: Sequence[str], question: str) -> bool:
    """The answer is exactly one listed option, bare or after its letter ("treadmill", "B. treadmill")."""
    opts = option_tokens(question)
    return bool(opts) and (tuple(toks) in opts or (len(toks) > 1 and len(toks[0]) == 1 and tuple(toks[1:]) in opts))


def _cut_piece(answer: str, toks: Sequence[str], q_seq: Sequence[str]) -> bool:
    """The answer is a contiguous piece of the question that starts where the question starts, or stops without
    closing punctuation (cut off); a closed piece from inside the question names one of its options."""
    return any(start == 0 or not _CLOSED.search(answer) for start, _ in find_spans(toks, q_seq))


@functools.lru_cache(maxsize=1 << 16)
def extract(answer: str, question: str | None = None) -> Extraction:
    """The `Extraction` of ``answer`` given its ``question`` (None: no question words are removed)."""
    toks = tuple(normalize_answer(answer).split())
    q_seq = tuple(normalize_answer(question).split()) if question else ()
    q_toks = set(q_seq)
    q_content = Counter(t for t in q_seq if t not in STOP_WORDS)
    content = tuple(t for t in toks if t not in STOP_WORDS)
    beyond = tuple(t for t in content if t not in q_toks)
    numbers = frozenset(numbers_in(answer))
    new_numbers = numbers - (frozenset(numbers_in(question)) if question else frozenset())
    negated = any(t in NEGATIONS and t not in q_toks for t in toks)
    refusal = any(find_spans(r, toks) for r in REFUSALS)
    echo = bool(q_content) and bool(content) and not new_numbers and not Counter(content) - q_content and \
        (_in_order(content, q_seq) or _cut_piece(answer, toks, q_seq)) and not _names_option(toks, question)
    return Extraction(toks, content, beyond, numbers, new_numbers, negated, refusal, echo)


def alias_contained(answer: str, alias: str, question: str | None = None) -> bool:
    """The floor rule: ``alias``, normalised, occurs as whole tokens in the normalised ``answer``; numbers compared
    as values (every number of the alias among the answer's, "1,000" == "1000", "3.5" != "35"; the alias's other
    words among the answer's); a short code ("IN", "Au": `elical.judges.rules.is_code`) only as an exact token,
    so "IN" is not the word "in"; a
    non-answer (`Extraction.answers` False) or an empty alias is never correct."""
    ext, want = extract(answer, question), normalize_answer(alias).split()
    if not want or not ext.answers:
        return False
    if is_code(alias):
        return _code_in(answer, alias)
    need = numbers_in(alias)
    if need:
        rest = normalize_answer(strip_numbers(alias)).split()
        return need <= ext.numbers and set(rest) <= set(normalize_answer(strip_numbers(answer)).split())
    return bool(find_spans(want, ext.tokens))


class NormalizedCorrectnessJudge(CorrectnessBase):
    """Correctness by normalised alias containment ("normalized"): `alias_contained` with any gold alias.

    Case-folded, accent-folded, punctuation and articles removed on both sides (SQuAD), so "Portuguese language"
    and "Portuguese Language" are one alias; numbers as values; refusals and echoes of the question never correct.
    Source: SQuAD normalisation (Rajpurkar et al., 2016); HonestyBench containment (Ni et al., 2025, Sec. 3).
    """

    name = "normalized"

    def judge_many(self, pairs: Sequence[tuple[str, Sequence[str]]], questions=None) -> np.ndarray:
        """n (response, aliases) pairs -> ndarray of int 0/1, shape (n,). TypeError for non-str entries."""
        pairs = check_alias_pairs(pairs, questions)
        return np.array([int(any(alias_contained(r, a, question_at(questions, i)) for a in aliases))
                         for i, (r, aliases) in enumerate(pairs)], dtype=int).reshape(-1)
