"""Relation questions, "What is the R of X?" ("What is the capital of Kazakhstan?", "What is the chemical symbol
of iron?"): helpers of `elical.judges.span`.

A small model often answers such a question by describing X instead ("Kazakhstan is a country located in Central
Asia."): two such descriptions share their words beyond the question, yet neither names the capital. An answer
that makes X its subject and never says the relation R is a description that avoids the asked item, no answer
(GUIDELINE rule 5), whatever it shares with the other answer. Not for relations a description can answer
("What is the religion / occupation of X?": "X is a Buddhist monk."), nor for an answer with a number ("X is a
city of 1.2 million people." for its population).

The same holds for a typed question about a city ("In which US state is the city of Milwaukee?", "Hamilton is
the capital of which country?") answered with the capital of some country or state that never names the city
("The capital of the United States is New York City."): an answer to another question (rule 10).

"What is X a subclass of?" is answered by the class after "X is a type / kind / subcategory of": "a type of
bicycle that uses ..." and "a type of bicycle designed ..." both answer "bicycle", however different the rest
(`class_verdict`), even though the class word is the question's own (GUIDELINE rule 9: it fills the slot).
"""

from __future__ import annotations

import functools
import re

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from elical.judges.slots import asked_type
from elical.judges.text import tokens

__all__ = ["relation_question", "describes_subject", "names_another_capital", "named_class", "class_verdict"]

# relations a description of X can answer ("What is the religion / occupation / nationality of X?": "X is a
# Buddhist monk." answers); for the others (capital, chemical symbol, official language, ...) it cannot
_PREDICATES = frozenset("religion nationality citizenship occupation profession genre sport position field type kind "
                        "party gender species ethnicity instrument style".split())
_QUESTION = re.compile(r"^\s*(?:what|which) (?:is|was|are|were) the ([\w -]+?) of (?:the )?(.+?)\s*\??\s*$", re.I)


@functools.lru_cache(maxsize=4096)
def relation_question(question: str | None) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(relation words of >= 4 letters, subject tokens) of a "What is the R of X?" question whose R a description
    of X cannot answer (not religion, occupation, ...: `_PREDICATES`), else None."""
    m = _QUESTION.match(question or "")
    if not m:
        return None
    relation = tuple(w for w in tokens(m.group(1)) if len(w) >= 4)
    if set(relation) & _PREDICATES:
        return None
    return relation, tuple(tokens(m.group(2)))


def describes_subject(text: str, question: str | None) -> bool:
    """Whether ``text`` answers the relation question ``question`` with a description of its subject: it starts
    with "X is / was" or "The X is / was" and no word of it begins like a relation word ("capital", "capitals",
    "capitale"; its first len - 2 letters, at least 4)."""
    asked = relation_question(question)
    if asked is None or re.search(r"[0-9]", text):  # "X is a city of 1.2 million people." may answer
        return False
    relation, subject = asked
    words = tokens(text)
    if any(w.startswith(r[:max(4, len(r) - 2)]) for r in relation for w in words):
        return False
    n = len(subject)  # `tokens` drops articles: "The X is" starts like "X is"
    return len(words) > n and tuple(words[:n]) == subject and words[n] in ("is", "was")


_CAPITAL = re.compile(r"^\s*(?:in \d+,?\s+)?(?:the\s+)?capital(?:\s+city)?\s+of\b", re.I)
_NAME = re.compile(r"[A-Z][\w'’.-]*(?:\s+[A-Z][\w'’.-]*)*")


def names_another_capital(text: str, question: str | None) -> bool:
    """Whether ``text``, an answer to a question asking a country or a US state, begins "The capital (city) of
    ..." and contains no word of the names the question gives (its capitalized words)."""
    if not question or asked_type(question) not in ("country", "state") or not _CAPITAL.match(text):
        return False
    names = {t for m in _NAME.finditer(question) for t in tokens(m.group())}
    names -= {"in", "on", "which", "what", "where", "us", "u", "s", "state", "country"}
    return bool(names) and not names & set(tokens(text))


_CLASS_QUESTION = re.compile(r"\b(?:subclass|instance|type|kind|subcategory) of\s*\??\s*$", re.I)
_CLASS = re.compile(r"\b(?:is|are|was|were) (?:an? |one )?(?:(?:specific|particular|special) )?(?:type|kind|subclass|"
                    r"subcategory|category|form|class|branch|variety|sort|subtype|instance|example) of (?:an? |the )?"
                    r"([^.,;:!?()]+)", re.I)


def named_class(text: str) -> tuple[str, ...] | None:
    """The class ``text`` puts its subject in: the words after "is a type / kind / subcategory ... of", up to
    punctuation, a stop word or a participle (at most 4; repeated words once): "a type of contemporary
    contemporary art that ..." -> ("contemporary", "art"); None when there is no such phrase."""
    m = _CLASS.search(text)
    if not m:
        return None
    out: list[str] = []
    for w in tokens(m.group(1)):
        if w in ENGLISH_STOP_WORDS or w.endswith(("ed", "ing")) or len(out) == 4:
            break
        if w not in out:
            out.append(w)
    return tuple(out) or None


def class_verdict(a: str, b: str, question: str | None) -> int | None:
    """For "What is X a subclass / an instance of?": 1 when both answers name the same class (same words),
    0 when they name classes with no word in common, None otherwise (a class missing, or partly shared)."""
    if not question or not _CLASS_QUESTION.search(question):
        return None
    ca, cb = named_class(a), named_class(b)
    if ca is None or cb is None:
        return None
    if set(ca) == set(cb):
        return 1
    return 0 if not set(ca) & set(cb) else None
