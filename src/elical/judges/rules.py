"""Rule judges without a model: exact match, token containment, token F1 and ROUGE-L.

Numbers are compared first, as values, before any text rule ("3.5" != "35", "1,000" == "1000", "three" == "3",
"1.5 million" != "15 million"). Short aliases (codes and symbols of at most three letters, top-level domains
such as ".is") match only as an exact token, with case respected when the alias has a capital: "IN" (Indiana)
is not the word "in", "Au" is not "au". Project rule: an answer or alias that is empty after normalization
("", "...", "the") matches nothing, in every judge, before any model is asked.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Sequence

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from elical.judges.base import CorrectnessBase, PairJudge, alias_list, check_alias_pairs, check_pairs
from elical.judges.text import find_spans, normalize_answer, numbers_in, rouge_l, strip_numbers, token_f1, tokens

__all__ = ["exact_match", "contains_match", "alias_in", "CorrectnessJudge", "LexicalConsistency",
           "LexicalEquivalenceJudge", "numbers_agree"]

_WORD_RE = re.compile(r"[^\W_]+")
_DOTTED_RE = re.compile(r"\b(?:[^\W\d_]\.){2,}")  # "U.S." / "U.S.A." -> "US" / "USA"
_TLD_RE = re.compile(r"\.[^\W\d_]{2,3}")


def _case_words(text: str) -> list[str]:
    """Words of ``text`` with accents folded but case kept, dotted abbreviations closed up ("U.S." -> "US")."""
    text = _DOTTED_RE.sub(lambda m: m.group().replace(".", ""), text)
    text = "".join(ch for ch in unicodedata.normalize("NFKD", text) if unicodedata.category(ch) != "Mn")
    return _WORD_RE.findall(text)


def is_code(alias: str) -> bool:
    """An alias written as a short code or symbol: a top-level domain (".is"), or at most three letters
    ("IN", "Au", "U.S.", "UK"); such aliases must match as an exact token."""
    a = alias.strip()
    if _TLD_RE.fullmatch(a):
        return True
    words = _case_words(a)
    return len(words) == 1 and len(words[0]) <= 3 and words[0].isalpha()


def _code_in(response: str, alias: str) -> bool:
    a = alias.strip()
    if _TLD_RE.fullmatch(a):
        return re.search(rf"(?<![.]){re.escape(a)}(?!\w)", response, flags=re.IGNORECASE) is not None
    code = _case_words(a)[0]
    words = _case_words(response)
    if any(ch.isupper() for ch in code):
        return code in words
    return code.casefold() in {w.casefold() for w in words}


def numbers_agree(response: str, alias: str) -> bool | None:
    """Numbers first: None when the alias has no number; else whether every number of the alias is among the
    response's (values, so "1,000" == "1000" and "3.5" != "35")."""
    need = numbers_in(alias)
    if not need:
        return None
    return need <= numbers_in(response)


def alias_in(response: str, alias: str) -> bool:
    """Whether the gold ``alias`` is given in ``response`` (no question: see `elical.judges.learned` for that).

    1. empty after normalization (either side) -> False;
    2. an alias with numbers: all its numbers among the response's, and its other words among the response's;
    3. a short code (`is_code`) -> an exact token, case respected when the alias has a capital;
    4. otherwise the normalized alias occurs in the normalized response as whole tokens.
    """
    resp, want = tokens(response), tokens(alias)
    if not resp or not want:
        return False
    agree = numbers_agree(response, alias)
    if agree is not None:
        rest = normalize_answer(strip_numbers(alias)).split()
        return agree and set(rest) <= set(normalize_answer(strip_numbers(response)).split())
    if is_code(alias):
        return _code_in(response, alias)
    return bool(find_spans(want, resp))


def exact_match(response: str, aliases: Sequence[str]) -> bool:
    """True when the normalized response equals a normalized gold alias and both hold the same numbers;
    empty strings match nothing. ``aliases``: a sequence of gold aliases (a bare string is one alias).

    Source: SQuAD exact match (Rajpurkar et al., 2016), numbers compared as values first.
    """
    if not normalize_answer(response):
        return False
    nums, rest = numbers_in(response), normalize_answer(strip_numbers(response))
    return any(bool(normalize_answer(a)) and nums == numbers_in(a) and rest == normalize_answer(strip_numbers(a))
               for a in alias_list(aliases))


def contains_match(response: str, aliases: Sequence[str]) -> bool:
    """True when a gold alias occurs in the response (`alias_in`): numbers compared as values first, short
    codes as exact tokens, otherwise token-bounded containment ("6" does not match "16", "Au" does not match
    "Australia", "IN" does not match "in"). Empty strings match nothing.

    Source: HonestyBench correctness (a gold alias contained in the answer; Ni et al., 2025, Sec. 3),
    made token-bounded and number-aware.
    """
    return any(alias_in(response, a) for a in alias_list(aliases))


class CorrectnessJudge(CorrectnessBase):
    """Judge free-form answers against gold aliases (the ``*_correctness`` fields), without the question.

    Parameters
    ----------
    mode : {"contains", "exact"}
        "contains": `contains_match`; "exact": `exact_match`.

    Raises ValueError if ``mode`` is not one of the two. The question is accepted and ignored (the
    question-aware judges are `elical.judges.learned` (the default), nli and llm).
    """

    def __init__(self, mode: str = "contains"):
        if mode not in ("contains", "exact"):
            raise ValueError(f"mode must be 'contains' or 'exact', got {mode!r}")
        self.mode = mode
        self.name = mode

    def judge_many(self, pairs: Sequence[tuple[str, Sequence[str]]], questions=None) -> np.ndarray:
        """Correctness of n (response, aliases) pairs: ndarray of int 0/1, shape (n,). TypeError for non-str."""
        match = contains_match if self.mode == "contains" else exact_match
        return np.array([int(match(r, a)) for r, a in check_alias_pairs(pairs, questions)], dtype=int).reshape(-1)


class LexicalConsistency:
    """Consis-Lex: ROUGE-L F-measure of each sampled answer with the greedy answer.

    Source: lexical self-consistency (Lin et al., 2023; Ni et al., 2025, baselines).
    """

    def __call__(self, greedy: str, samples: Sequence[str]) -> np.ndarray:
        """Returns ndarray of float, shape (n,), values in [0, 1]: ``rouge_l(sample_i, greedy)``."""
        return np.array([rouge_l(s, greedy) for s in samples], dtype=float).reshape(-1)


def nontrivial(toks: Sequence[str]) -> bool:
    """Some token is not an English stop word."""
    return any(t not in ENGLISH_STOP_WORDS for t in toks)


def _contained(a: str, b: str) -> bool:
    """The shorter normalized answer occurs as whole tokens in the longer one, is not only stop words, and its
    numbers are among the longer one's."""
    ta, tb = tokens(a), tokens(b)
    (short, s), (long_, l) = sorted([(ta, a), (tb, b)], key=lambda x: len(x[0]))
    return nontrivial(short) and numbers_in(s) <= numbers_in(l) and bool(find_spans(short, long_))


_LEXICAL_THRESHOLDS = {"token-f1": 0.5, "rouge-l": 0.5}


class LexicalEquivalenceJudge(PairJudge):
    """Equivalence of two answers by string overlap; symmetric, no model, question ignored.

    kind
        "exact": same numbers and equal after `normalize_answer`. "contains": the shorter normalized answer
        occurs in the longer one as whole tokens, is not only stop words, and its numbers are among the longer
        one's ("Paris" ~ "The capital is Paris."). "token-f1": SQuAD token F1 (`token_f1`) >= ``threshold``.
        "rouge-l": ROUGE-L F-measure (`rouge_l`) >= ``threshold``.
    threshold : float in (0, 1], optional
        For token-f1 and rouge-l; default 0.5 for both (the usual "F1 >= 0.5 counts as a match" reading).

    An answer empty after normalization matches nothing (0). Source: SQuAD EM/F1 (Rajpurkar et al., 2016);
    ROUGE-L (Lin, 2004), the Consis-Lex similarity of Ni et al. (2025).
    """

    def __init__(self, kind: str = "exact", threshold: float | None = None):
        if kind not in ("exact", "contains", "token-f1", "rouge-l"):
            raise ValueError(f"kind must be 'exact', 'contains', 'token-f1' or 'rouge-l', got {kind!r}")
        if threshold is not None and (kind not in _LEXICAL_THRESHOLDS or not 0.0 < threshold <= 1.0):
            raise ValueError(f"threshold applies to token-f1 / rouge-l and must be in (0, 1], got {threshold!r}")
        self.name = self.kind = kind
        self.threshold = _LEXICAL_THRESHOLDS.get(kind) if threshold is None else threshold

    def score(self, a: str, b: str) -> float:
        """The similarity behind the decision, in [0, 1] (1.0/0.0 for exact and contains)."""
        if self.kind == "exact":
            na = normalize_answer(a)
            return float(bool(na) and na == normalize_answer(b) and numbers_in(a) == numbers_in(b))
        if self.kind == "contains":
            return float(_contained(a, b))
        return token_f1(a, b) if self.kind == "token-f1" else rouge_l(a, b)

    def judge_many(self, pairs: Sequence[tuple[str, str]], questions=None) -> np.ndarray:
        """n (a, b) pairs -> ndarray of int 0/1, shape (n,). ``questions`` is ignored. TypeError for non-str."""
        check_pairs(pairs, questions)
        cut = 1.0 if self.threshold is None else self.threshold
        return np.array([int(bool(normalize_answer(a)) and bool(normalize_answer(b)) and self.score(a, b) >= cut)
                         for a, b in pairs], dtype=int).reshape(-1)
