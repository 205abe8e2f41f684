"""Text primitives of the judges: normalization, tokens, numbers, token F1 and ROUGE-L.

Normalization follows the SQuAD evaluation script (Rajpurkar et al., 2016), extended to Unicode. Numbers are
read before normalization (which deletes the decimal point: "3.5" and "35" both become "35"), so every judge
compares numbers as values first (`numbers_in`, `number_spans`).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import Counter
from decimal import Decimal
from typing import Sequence

from rouge_score import rouge_scorer

__all__ = ["normalize_answer", "tokens", "find_spans", "numbers_in", "number_spans", "strip_numbers",
           "token_f1", "rouge_l", "fold"]

_ARTICLES = frozenset({"a", "an", "the"})
# Dashes and slashes separate words ("Saint-Étienne" = "Saint Etienne"); other punctuation is deleted
# as in SQuAD, so "U.S." -> "us" and "1,000" -> "1000".
_SEPARATORS = frozenset("/\\")


@functools.lru_cache(maxsize=1 << 16)
def fold(text: str) -> str:
    """Casefold and strip combining marks (NFKD), so "Zürich" == "zurich" and "ß" == "ss"."""
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    # NFC afterwards recomposes what is left (Hangul syllables, for one).
    return unicodedata.normalize("NFC", "".join(ch for ch in decomposed if unicodedata.category(ch) != "Mn"))


@functools.lru_cache(maxsize=1 << 16)  # judges normalize the same answers many times
def normalize_answer(text: str) -> str:
    """Normalize an answer, SQuAD style, for string matching.

    Casefold, fold accents (NFKD, combining marks dropped), delete punctuation and symbols (Unicode
    categories P* and S*; dashes and slashes become spaces), drop the English articles a/an/the and
    collapse whitespace. Letters and digits of any script are kept.

    Returns space-separated tokens, ``""`` when nothing is left.
    Source: ``normalize_answer`` of the SQuAD v1.1 evaluation script, extended to Unicode.
    """
    chars = []
    for ch in fold(text):
        cat = unicodedata.category(ch)
        if cat == "Pd" or ch in _SEPARATORS:
            chars.append(" ")
        elif cat[0] in "PS":
            continue
        else:
            chars.append(ch)
    return " ".join(t for t in "".join(chars).split() if t not in _ARTICLES)


def tokens(text: str) -> list[str]:
    """The tokens of `normalize_answer`."""
    return normalize_answer(text).split()


def find_spans(needle: Sequence[str], hay: Sequence[str]) -> list[tuple[int, int]]:
    """Spans ``[start, end)`` where the token list ``needle`` occurs contiguously in ``hay``."""
    k = len(needle)
    if k == 0:
        return []
    return [(i, i + k) for i in range(len(hay) - k + 1) if list(hay[i : i + k]) == list(needle)]


_UNITS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9}
_TENS = {"twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70, "eighty": 80,
         "ninety": 90}  # fmt: skip
_NUMBER_WORDS = {
    **{k: v for k, v in _UNITS.items() if k != "one"},  # "one" alone is mostly a pronoun ("one of the")
    "zero": 0, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13, "fourteen": 14, "fifteen": 15,
    "sixteen": 16, "seventeen": 17, "eighteen": 18, "nineteen": 19,
}  # fmt: skip
# ordinal words are numbers too ("the sixteenth century" = "the 16th century", "twenty-first" = "21st")
_ORDINAL_UNITS = {"first": 1, "second": 2, "third": 3, "fourth": 4, "fifth": 5, "sixth": 6, "seventh": 7,
                  "eighth": 8, "ninth": 9}
_ORDINALS = {
    **_ORDINAL_UNITS, "tenth": 10, "eleventh": 11, "twelfth": 12, "thirteenth": 13, "fourteenth": 14,
    "fifteenth": 15, "sixteenth": 16, "seventeenth": 17, "eighteenth": 18, "nineteenth": 19, "twentieth": 20,
    "thirtieth": 30, "fortieth": 40, "fiftieth": 50, "sixtieth": 60, "seventieth": 70, "eightieth": 80,
    "ninetieth": 90, "hundredth": 100, "thousandth": 1000,
}  # fmt: skip
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "trillion": 10**12}
# Thousands separators only in groups of three ("1,000", "12,345,678"); a decimal point needs digits on both
# sides, so a full stop after a number ("born in 1920.") is no decimal.
_NUMBER_RE = re.compile(
    r"(?<![0-9])(?<![0-9][.])(?P<digits>[0-9]{1,3}(?:,[0-9]{3})+(?![0-9])(?:\.[0-9]+)?|[0-9]+(?:\.[0-9]+)?)"
    rf"(?:\s+(?P<scale>{'|'.join(_SCALES)})\b)?"
    rf"|\b(?P<tens>{'|'.join(_TENS)})(?:[\s-]+(?P<unit>{'|'.join([*_UNITS, *_ORDINAL_UNITS])}))?\b"
    rf"|\b(?P<word>{'|'.join([*_NUMBER_WORDS, *_ORDINALS])})\b"
)


def number_spans(text: str) -> list[tuple[int, int, str]]:
    """Each number written in ``text``: (start, end, canonical value), offsets into ``fold(text)``.

    Canonical values are decimal strings: "1,000" -> "1000", "3.50" -> "3.5", "1.5 million" -> "1500000",
    "twenty-one" -> "21", "three" -> "3", ordinals as their number ("sixteenth" and "16th" -> "16",
    "twenty-first" -> "21"); "one" alone is not read as a number (mostly a pronoun).
    """
    out = []
    for m in _NUMBER_RE.finditer(fold(text)):
        if m["digits"]:
            value = Decimal(m["digits"].replace(",", "")) * _SCALES.get(m["scale"], 1)
        elif m["tens"]:
            value = Decimal(_TENS[m["tens"]] + _UNITS.get(m["unit"], _ORDINAL_UNITS.get(m["unit"], 0)))
        else:
            value = Decimal(_NUMBER_WORDS.get(m["word"], _ORDINALS.get(m["word"])))
        value = value.normalize()
        out.append((m.start(), m.end(), format(value, "f") if value == value.to_integral_value() else str(value)))
    return out


def numbers_in(text: str) -> set[str]:
    """The numbers written in ``text``, in canonical decimal form (see `number_spans`); a set of str.

    Digits with thousands separators and decimals ("1,000" -> "1000", "3.50" -> "3.5"; "3.5" and "35" stay
    apart), a following scale word ("2 million" -> "2000000"), and English number words zero to ninety-nine
    ("six" -> "6", "twenty-one" -> "21") and their ordinals ("sixteenth" -> "16", as "16th" is). Years are
    numbers ("1920s" -> "1920").
    """
    return {value for _, _, value in number_spans(text)}


def strip_numbers(text: str) -> str:
    """``fold(text)`` with every number of `number_spans` replaced by a space."""
    folded = fold(text)
    for start, end, _ in reversed(number_spans(text)):
        folded = folded[:start] + " " + folded[end:]
    return folded


def token_f1(a: str, b: str) -> float:
    """SQuAD token F1 between two answers (symmetric), in [0, 1]; 0.0 when either is empty.

    Tokens are those of `normalize_answer`; overlap counts repeated tokens with multiplicity.

    Source: SQuAD v1.1 evaluation script (``f1_score``).
    """
    ta, tb = tokens(a), tokens(b)
    if not ta or not tb:
        return 0.0
    same = sum((Counter(ta) & Counter(tb)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(ta), same / len(tb)
    return 2 * precision * recall / (precision + recall)


class _UnicodeTokenizer:
    """rouge_score tokenizer that keeps letters of every script (the default drops non-ASCII)."""

    _word = re.compile(r"[^\W_]+")

    def tokenize(self, text: str) -> list[str]:
        return self._word.findall(fold(text))


_ROUGE = rouge_scorer.RougeScorer(["rougeL"], tokenizer=_UnicodeTokenizer())


def rouge_l(a: str, b: str) -> float:
    """ROUGE-L F-measure (longest common subsequence of tokens), in [0, 1]; 0.0 when either is empty.

    Computed by ``rouge_score.rouge_scorer`` without stemming. Tokens: casefolded, accent-folded runs
    of letters and digits (on ASCII text the same as rouge_score's default tokenizer, which would drop
    "ü" from "Zürich"). Symmetric in ``a`` and ``b``.

    Source: Lin (2004), ROUGE; used as Consis-Lex in Ni et al. (2025).
    """
    return float(_ROUGE.score(a, b)["rougeL"].fmeasure)
