"""Question-aware judges that compare what answers say *beyond the question* (the answer span).

A small model answers in sentences that repeat the question ("The capital of New Zealand is Wellington."), so
whole-sentence similarity mostly measures the shared frame: two sentences of one template with different
entities look alike, and an echo of the question looks like any answer. Here each answer is reduced to its
answer span (`answer_span`): the words of the question, English stop words and common answer-frame verbs ("is
located in", "was born in", "was written by") are removed, and numbers are read apart, as values. Then:

* **equivalence** (`SpanEquivalenceJudge`, "span"): numbers first (for a question that asks for a number or a
  date they decide; elsewhere a number on one side only is incidental: "It was founded in 1910 by X" vs "X"),
  then equal spans / token containment / fuzzy spelling, then embedding similarity of the *spans*;
* **correctness** (`SpanCorrectnessJudge`, "span-contains"): the gold alias's own span (its words beyond the
  question) occurs in the response's span, numbers compared as values, short codes as exact tokens.

Before the spans, `elical.judges.slots` decides what fills the asked slot where it can: the option a choice
question's answer picks, the first country / continent / US state a typed question's answer names (demonyms
included: "French" is France); `elical.judges.names` then reads the organization a "who produces X?" answer
names, a region two answers to a typed question both name, and the issuer of a currency (an answer to a currency
question that names none is no answer); `elical.judges.relations` reads the class a "What is X a subclass of?"
answer names, and finds no answer in a description of X for "What is the R of X?" ("Kazakhstan is a country in
Central Asia." for its capital) or in the capital of another place for where a city lies; a text cut off by the
token limit loses its last, maybe partial, word (`elical.judges.cutoff`).
An answer with nothing beyond the question (an echo, "I don't know", empty) matches nothing, and an alias made
only of question words cannot make an answer correct ("Mexico" for "What is the capital of Mexico?"). A question
shown with lettered choices (MMLU in the QA layout, lines "A. ...") is judged by the one choice each answer names
(`elical.judges.choices`). Measured agreement with hand labels: docs/benchmarks.md.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Sequence

import numpy as np
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from elical.judges.base import CorrectnessBase, PairJudge, check_alias_pairs, check_pairs, question_at
from elical.judges.choices import choices_named, lettered_choices, mmlu_choice
from elical.judges.rules import _code_in, is_code
from elical.judges.names import currency_verdict, same_organization, shared_region
from elical.judges.relations import class_verdict, describes_subject, names_another_capital
from elical.judges.cutoff import uncut, uncut_pair
from elical.judges.slots import (asked_type, hedged, less_specific, places_only, question_place, slot_correct,
                                 slot_equivalent)
from elical.judges.text import (covered, find_spans, fold, inflections, normalize_answer, numbers_in, same_word_form,
                                 spelling_variant, strip_numbers, tokens)

__all__ = ["Span", "answer_span", "SpanEquivalenceJudge", "SpanCorrectnessJudge", "span_equivalent", "span_correct",
           "lettered_choices"]

# Stop words that are also parts of names ("Bill Clinton", "Charles de Gaulle") or answers (yes/no, first/last).
_CONTENT = {"bill", "fire", "mill", "system", "interest", "thick", "thin", "cry", "de", "con", "co", "top", "bottom",
            "side", "back", "front", "full", "empty", "call", "name", "well", "first", "last", "yes", "no", "un",
            "inc", "ltd", "amount", "part", "detail", "find", "fill", "show", "move", "serious", "sincere",
            "mine", "third", "none", "never"}
_FRAME_WORDS = {
    "located", "situated", "born", "died", "called", "named", "known", "founded", "established", "created",
    "written", "wrote", "directed", "produced", "composed", "performed", "played", "released", "published",
    "developed", "invented", "discovered", "designed", "built", "painted", "authored", "starred", "sung", "sang",
    "found", "runs", "flows", "lies",  # "X is found in / runs through / lies in ..."
    "answer", "question", "correct", "think", "believe", "probably", "likely", "actually", "officially",
    "originally", "famous", "famously", "dont", "doesnt", "didnt", "isnt", "wasnt", "im", "ive", "whats", "theres",
    "s", "t", "d", "ll", "ve", "re", "m", "yes", "no",
    # descriptors around a place or a kind ("in the southern part of the country of X", "the Indian state of X")
    "country", "state", "region", "province", "part", "area", "specifically", "particular",
    *(d + x for d in ("north", "south", "east", "west", "northeast", "northwest", "southeast", "southwest")
      for x in ("", "ern")),
}
# Class nouns that describe what an answer is rather than name it ("a car made by Chevrolet", "Microsoft
# Corporation", "a word in English"); tried as frame words
_CLASS_NOUNS = {"word", "words", "car", "cars", "model", "company", "corporation", "corp", "inc", "manufacturer",
                "brand", "creation", "production", "product", "type", "kind", "element", "continent", "nation"}

_STOP = frozenset(ENGLISH_STOP_WORDS)
_FRAME = frozenset((ENGLISH_STOP_WORDS - _CONTENT) | _FRAME_WORDS | _CLASS_NOUNS) - {"yes", "no"}
_NON_ANSWER = re.compile(
    r"\b(?:i (?:do not|don'?t|dont) know|not sure|no idea|i cannot|i can'?t|unable to|no (?:specific |reliable )?"
    r"(?:information|data|record)|not (?:able|possible) to|sorry|as an ai|unknown to me)\b")
_NUMERIC_QUESTION = re.compile(
    r"\b(?:how (?:many|much|old|long|far|tall|high|big|large|deep|often)|when\b|(?:what|which|in what|in which) "
    r"(?:year|date|decade|century|age|number|percentage|day|month)|population|atomic number|what time|date of|"
    r"year\b|calling code|how\b)")
_POSSESSIVE = re.compile(r"(?<=\w)['’]s?\b")
_MONTHS = frozenset("january february march april may june july august september october november december".split())
_YEAR = re.compile(r"1[0-9]{3}|20[0-9]{2}")


def _options(question: str) -> set[str]:
    """Words of the alternatives a question offers ("Who was born first, Ann Lee or Bo Li?" -> ann lee bo li):
    they stay in the answer span, since naming one of them is the answer."""
    clause = re.split(r"[,:;]", question.rstrip(" ?"))[-1]
    if not re.search(r"\bor\b", clause):
        return set()
    return set(tokens(strip_numbers(clause))) - _FRAME


@dataclass(frozen=True)
class Span:
    """What an answer says beyond the question: ``words`` (tokens, numbers removed) and ``numbers`` (values)."""

    words: tuple[str, ...]
    numbers: frozenset

    @property
    def empty(self) -> bool:
        return not self.words and not self.numbers


_NAME_RUN = re.compile(r"[A-Z][\w'’.-]*(?:\s+(?:of\s+|de\s+|the\s+)?[A-Z][\w'’.-]*)+")


@dataclass(frozen=True)
class _QuestionTerms:
    drop: frozenset  # question words removed from answers
    names: tuple  # multi-word names of the question (token tuples), deleted from answers as whole phrases
    numbers: frozenset


@functools.lru_cache(maxsize=4096)
def _question_terms(question: str | None) -> _QuestionTerms:
    """What an answer may repeat from the question without answering: its words, except the alternatives a
    choice question offers and words that occur only inside a longer name ("Mexico" in "... the city of Mexico
    City?"), which are removed from answers as whole names instead."""
    if not question:
        return _QuestionTerms(frozenset(), (), frozenset())
    qtokens = tokens(strip_numbers(question))
    names = sorted({tuple(tokens(m.group())) for m in _NAME_RUN.finditer(question)}, key=len, reverse=True)
    names = [n for n in names if len(n) >= 2]
    claimed = [False] * len(qtokens)
    for name in names:
        for start, end in find_spans(name, qtokens):
            claimed[start:end] = [True] * (end - start)
    standalone = {t for t, c in zip(qtokens, claimed) if not c}
    # inflections of the question's words ("incomes" asked, "income" answered) are question words too
    standalone |= {f for t in standalone if len(t) >= 4 for f in inflections(t)}
    drop = (standalone - _options(question)) - {"yes", "no"}
    return _QuestionTerms(frozenset(drop), tuple(names), frozenset(numbers_in(question)))


def _delete_phrases(toks: list[str], phrases) -> list[str]:
    for phrase in phrases:
        for start, end in reversed(find_spans(phrase, toks)):
            toks = toks[:start] + toks[end:]
    return toks


def _is_non_answer(text: str) -> bool:
    """A refusal, or a text that is only a question ("The capital of which country is Peru?")."""
    text = text.strip()
    if text.endswith(("?", ":")) and not re.search(r"[.!?]\s", text):  # "The original cast of X was:"
        return True
    return _NON_ANSWER.search(fold(text).replace("’", "'")) is not None


@functools.lru_cache(maxsize=65536)
def answer_span(text: str, question: str | None = None, keep_stop_words: bool = False) -> Span:
    """The answer span of ``text`` for ``question``: its tokens minus the question's words (except a choice's
    alternatives and names that extend a question word: "Panama City"), minus stop and answer-frame words (unless
    ``keep_stop_words``), and its numbers (`numbers_in`) minus the question's. A refusal is empty."""
    if _is_non_answer(text):
        return Span((), frozenset())
    text = uncut(text)
    terms = _question_terms(question)
    drop = terms.drop if keep_stop_words else terms.drop | _FRAME
    cased = _POSSESSIVE.sub("", text)
    stutters = [name[:1] + name for name in terms.names]  # "Ivan Ivan Illich" for "Ivan Illich"
    toks = _delete_phrases(normalize_answer(strip_numbers(cased)).split(), [*stutters, *terms.names])
    # an answer's name that adds a word to a question word is a new name: "Panama City" (of Panama) stays whole,
    # unless it is another name of a place the question names ("Republic of Uganda" for "... of Uganda?")
    runs = [tuple(normalize_answer(strip_numbers(m.group())).split())
            for sentence in re.split(r"(?<=[.!?;:])\s+", cased) for m in _NAME_RUN.finditer(sentence)]
    runs = [r for r in runs if any(t in terms.drop for t in r) and any(t not in terms.drop | _STOP for t in r)]
    toks = _delete_phrases(toks, [r for r in runs if question_place(r, question)])
    kept = {i for r in runs if not question_place(r, question) for s, e in find_spans(r, toks) for i in range(s, e)}
    return Span(tuple(t for i, t in enumerate(toks) if (i in kept and t not in _STOP) or t not in drop),
                frozenset(numbers_in(text) - terms.numbers))


def _months(text: str) -> set[str]:
    return set(tokens(text)) & _MONTHS


def _numbers_verdict(sa: Span, sb: Span, numeric: bool) -> str:
    """'agree', 'ignore' (incidental numbers) or 'conflict'."""
    if not sa.numbers and not sb.numbers:
        return "ignore"
    if sa.numbers and sb.numbers:
        if sa.numbers == sb.numbers or (numeric and (sa.numbers < sb.numbers or sb.numbers < sa.numbers)):
            return "agree"
        if not numeric and all(_YEAR.fullmatch(n) for n in sa.numbers ^ sb.numbers):
            return "ignore"
        return "conflict"
    return "conflict" if numeric else "ignore"


def span_equivalent(a: str, b: str, question: str | None = None, fuzzy_cut: float = 0.9) -> int | None:
    """Rule decision for a pair of answers (1 same, 0 different), or None when the spans' embeddings must
    decide. See the module docstring for the order of the rules."""
    choices = lettered_choices(question)
    if choices:
        ca, cb = mmlu_choice(a, choices), mmlu_choice(b, choices)
        return int(ca is not None and ca == cb)
    if _is_non_answer(a) or _is_non_answer(b):
        return 0
    if any(describes_subject(t, question) or names_another_capital(t, question) for t in (a, b)):
        return 0  # "X is a country in Asia." for X's capital; "The capital of Y is Z." for where city C is
    a, b = uncut_pair(a, b), uncut_pair(b, a)
    slot = slot_equivalent(a, b, question)
    if slot is None:  # the agent of "who produces X?"; a region both name for a typed question; a currency's issuer
        slot = same_organization(a, b, question) or shared_region(a, b, question, asked_type(question))
    if slot is None:
        slot = currency_verdict(a, b, question)
    if slot is None:
        slot = class_verdict(a, b, question)
    if slot is not None:
        return slot
    sa, sb = answer_span(a, question), answer_span(b, question)
    if sa.empty or sb.empty or places_only(sa.words, question) or places_only(sb.words, question):
        return 0
    numeric = bool(question) and _NUMERIC_QUESTION.search(fold(question)) is not None
    verdict = _numbers_verdict(sa, sb, numeric)
    if verdict == "conflict":
        return 0
    ma, mb = _months(a), _months(b)
    if ma and mb and not (ma <= mb or mb <= ma):
        return 0
    wa, wb = sa.words, sb.words
    if verdict == "agree" and (numeric or (not wa and not wb)):
        return 1
    if not wa or not wb:  # a number alone does not answer a question that asks no number ("... in 2022.")
        return 0
    if wa == wb:
        return 1
    short, long_ = (wa, wb) if len(wa) <= len(wb) else (wb, wa)
    if find_spans(short, long_) or covered(short, long_) or spelling_variant(wa, wb, fuzzy_cut):
        long_text = a if long_ is wa else b
        return int(not hedged(long_text, short) and not less_specific(short, long_, question, long_text))
    return None


def _short_and_apart(wa: Sequence[str], wb: Sequence[str]) -> bool:
    """Two short spans (<= 3 words) with no word form in common: mostly two different names ("wellington" /
    "auckland", cosine 0.78), so the embeddings need to agree more."""
    return max(len(wa), len(wb)) <= 3 and not any(same_word_form(w, v) for w in wa for v in wb)


def span_correct(response: str, alias: str, question: str | None = None, fuzzy_cut: float = 0.9) -> bool:
    """Whether ``response`` gives the gold ``alias`` as its answer to ``question`` (rules in the module
    docstring): numbers as values first, short codes as exact tokens, then the alias's span within the
    response's span (contiguous tokens), then fuzzy spelling of a one-name alias."""
    if not normalize_answer(alias) or not normalize_answer(response) or _is_non_answer(response):
        return False
    response = uncut(response)
    slot = slot_correct(response, alias, question)
    if slot is not None:
        return slot
    if is_code(alias) and not numbers_in(alias):
        return _code_in(response, alias) and not _code_in(question or "", alias)
    sr = answer_span(response, question)
    if sr.empty:
        return False
    need = numbers_in(alias)
    if need:
        if not need <= sr.numbers:
            return False
        months = _months(alias)
        return not (months and _months(response) and not months <= _months(response))
    sa = answer_span(alias.lower(), question)  # an alias's capitals are arbitrary ("Portuguese Language")
    words, resp = sa.words, sr.words
    if not words:  # only stop words beyond the question ("The Who"): compare with stop words kept
        words = answer_span(alias, question, keep_stop_words=True).words
        resp = answer_span(response, question, keep_stop_words=True).words
    if not words:
        return False
    n = len(words)
    found = bool(find_spans(words, resp)) or (n == 1 and covered(words, resp)) or \
        any(spelling_variant(words, resp[i:i + n], fuzzy_cut) for i in range(len(resp) - n + 1))
    return found and not hedged(response, tokens(alias))


class SpanEquivalenceJudge(PairJudge):
    """Equivalence of two answers to a question by their answer spans ("span", the rules; default before "learned").

    Rules first (`span_equivalent`); pairs they leave open are decided by the cosine similarity of the two
    *spans* (not the sentences) under all-MiniLM-L6-v2 >= ``threshold``.

    Parameters
    ----------
    model_path : str or path, optional
        Sentence-transformers model directory (default: the packaged all-MiniLM-L6-v2), local files only,
        loaded only when a pair needs it.
    threshold : float in [0, 1], default 0.75
        Cosine cut on spans, chosen on dev pairs only (tests/fixtures/judge_pairs.jsonl and the dev part of
        benchmarks/judge_pairs/pairs.jsonl).
    short_threshold : float in [0, 1], default 0.85
        The cut for two short spans (<= 3 words) with no word form in common, mostly two different names.
    fuzzy_cut : float in (0, 1], default 0.9
        difflib ratio for spelling variants.
    device, batch_size : for the embedding model.

    ``judge_many(pairs, questions)`` returns ndarray of int 0/1, shape (n,); without questions the spans are
    the answers less stop words and frame words. Source: semantic consistency (Kuhn et al., 2023; Ni et al.,
    2025, Sec. 3), on answer spans.
    """

    name = "span"

    def __init__(self, model_path=None, threshold: float = 0.75, short_threshold: float = 0.85,
                 fuzzy_cut: float = 0.9, device: str = "cpu", batch_size: int = 64):
        from elical.judges.semantic import Embedder

        if not 0.0 <= threshold <= 1.0:
            raise ValueError(f"threshold must be in [0, 1], got {threshold!r}")
        if not 0.0 < fuzzy_cut <= 1.0:
            raise ValueError(f"fuzzy_cut must be in (0, 1], got {fuzzy_cut!r}")
        if not 0.0 <= short_threshold <= 1.0:
            raise ValueError(f"short_threshold must be in [0, 1], got {short_threshold!r}")
        self.threshold, self.short_threshold, self.fuzzy_cut = threshold, short_threshold, fuzzy_cut
        self.embedder = Embedder(model_path, device, batch_size)

    @property
    def model(self):
        """The embedding model (loaded on first use)."""
        return self.embedder.model

    def judge_many(self, pairs: Sequence[tuple[str, str]], questions: Sequence[str | None] | None = None) -> np.ndarray:
        """Judge n (a, b) pairs; ``questions``: one per pair (or None). ndarray of int 0/1, shape (n,)."""
        check_pairs(pairs, questions)
        out = np.zeros(len(pairs), dtype=int)
        open_ = []
        for i, (a, b) in enumerate(pairs):
            q = question_at(questions, i)
            rule = span_equivalent(a, b, q, self.fuzzy_cut)
            if rule is None:
                wa, wb = answer_span(a, q).words, answer_span(b, q).words
                cut = self.short_threshold if _short_and_apart(wa, wb) else self.threshold
                open_.append((i, " ".join(wa), " ".join(wb), cut))
            else:
                out[i] = rule
        if open_:
            self.embedder.embed([s for _, x, y, _ in open_ for s in (x, y)])
            for i, x, y, cut in open_:
                out[i] = int(self.embedder.cosine(x, y) >= cut)
        return out


class SpanCorrectnessJudge(CorrectnessBase):
    """Correctness of answers against gold aliases by answer spans ("span-contains", the rules; default before
    "learned"; no model).

    A response is correct when `span_correct` holds for any alias. A question shown with lettered choices
    (MMLU in the QA layout) and a letter among the aliases is judged by `elical.judges.choices.mmlu_correct`
    logic: the response must name that choice and no other.
    ``judge_many([(response, aliases), ...], questions)`` returns ndarray of int 0/1, shape (n,).
    """

    name = "span-contains"

    def __init__(self, fuzzy_cut: float = 0.9):
        if not 0.0 < fuzzy_cut <= 1.0:
            raise ValueError(f"fuzzy_cut must be in (0, 1], got {fuzzy_cut!r}")
        self.fuzzy_cut = fuzzy_cut

    def _one(self, response: str, aliases: Sequence[str], question: str | None) -> int:
        choices = lettered_choices(question)
        letters = [a.strip().strip("().").upper() for a in aliases]
        keys = [ord(x) - ord("A") for x in letters if len(x) == 1 and "A" <= x <= "D"]
        if choices and keys and keys[0] < len(choices):
            return int(choices_named(response, choices) == {keys[0]})
        return int(any(span_correct(response, a, question, self.fuzzy_cut) for a in aliases))

    def judge_many(self, pairs: Sequence[tuple[str, Sequence[str]]], questions=None) -> np.ndarray:
        pairs = check_alias_pairs(pairs, questions)
        return np.array([self._one(r, a, question_at(questions, i)) for i, (r, a) in enumerate(pairs)],
                        dtype=int).reshape(-1)
