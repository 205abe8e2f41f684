"""Features of a pair of answers for the learned judges: lexical overlap both ways, the same beyond the question's
words, numbers, non-answers, salient words (capitalised words and numbers beyond the question: what a long answer
commits to), yes/no polarity, the listed option each answer names (a question asked with "Options: a; b; c; d.",
since the twenty-first round), and soft token alignment with the offline MiniLM encoder.

Two feature sets, each a fixed, named vector (the names are stored beside the shipped weights):

* `equivalence_features(a, b, question)`, symmetric in a and b (greedy vs sample);
* `correctness_features(answer, alias, question)`, directed (does the answer give the alias?).

Lexical features use `elical.judges.extract.extract` (SQuAD-normalised tokens, content words, words beyond the
question). Soft alignment is BERTScore (Zhang et al., 2020, greedy matching of contextual token embeddings) computed
on the token embeddings of all-MiniLM-L6-v2 (`TokenEncoder`), with the answer's word pieces that also occur in the
question left out, so an echo of the question earns nothing; plus the sentence-embedding cosine. The soft features
(`SOFT_FEATURES`) are NaN when no encoder is given: the learned judges' cheap first stage reads only the others.
"""

from __future__ import annotations

import functools
import math
import os
import re
from collections import Counter
from difflib import SequenceMatcher
from typing import Sequence

import numpy as np

from elical.judges.extract import (NEGATIONS, STOP_WORDS, Extraction, alias_contained, extract, is_open,
                                   listed_options, option_tokens, options_named)
from elical.judges.rules import is_code
from elical.judges.semantic import Embedder
from elical.judges.text import find_spans, normalize_answer, numbers_in, token_f1

__all__ = ["TokenEncoder", "EQUIVALENCE_FEATURES", "CORRECTNESS_FEATURES", "SOFT_FEATURES", "equivalence_features",
           "correctness_features", "equivalence_soft", "correctness_soft", "overlap", "bertscore", "salient", "is_open"]


def overlap(x: Sequence[str], y: Sequence[str]) -> tuple[float, float]:
    """(share of x's tokens found in y, share of y's tokens found in x), counting repeats; 0.0 for an empty side."""
    if not x or not y:
        return 0.0, 0.0
    same = sum((Counter(x) & Counter(y)).values())
    return same / len(x), same / len(y)


def _f1(p: float, r: float) -> float:
    return 0.0 if p + r == 0 else 2 * p * r / (p + r)


class TokenEncoder(Embedder):
    """MiniLM token and sentence embeddings of each distinct text, encoded once in batches and cached.

    `tokens(text)` -> (ids, vectors): word-piece ids (tuple of int; special tokens and punctuation removed) and
    their unit token
    embeddings, ndarray of shape (n_pieces, 384); `sentence(text)` -> the unit sentence embedding, shape (384,).
    Parameters as `elical.judges.semantic.Embedder` (model_path, device, batch_size). At most ``max_cached`` texts
    (5,000) are kept; a batch that would pass it empties the cache first (one call's texts are always all kept).
    """

    max_cached = 5000

    def __init__(self, model_path=None, device: str = "cpu", batch_size: int = 64):
        super().__init__(model_path, device, batch_size)
        self._tokens: dict[str, tuple[tuple[int, ...], np.ndarray]] = {}
        self._ids: dict[str, frozenset[int]] = {}
        self._skip: set[int] | None = None

    def encode_all(self, texts: Sequence[str]) -> None:
        """Encode the texts not yet cached (each distinct string once)."""
        todo = list(dict.fromkeys(t for t in texts if t not in self._tokens))
        if not todo:
            return
        if len(self._tokens) + len(todo) > self.max_cached:  # bounded memory (~30 KB a text): start afresh
            self._tokens.clear()
            self._cache.clear()
        outs = self.model.encode(todo, batch_size=self.batch_size, output_value=None, convert_to_numpy=False,
                                 show_progress_bar=False)
        if self._skip is None:  # special tokens and pieces without a letter or digit (punctuation) are not scored
            vocab = self.model.tokenizer.get_vocab()
            self._skip = set(self.model.tokenizer.all_special_ids) | {
                i for piece, i in vocab.items() if not any(ch.isalnum() for ch in piece)}
        for text, out in zip(todo, outs):
            mask = out["attention_mask"].bool().cpu()
            ids = out["input_ids"].cpu()[mask].tolist()
            vecs = out["token_embeddings"].detach().float().cpu()[mask].numpy()
            keep = [i for i, t in enumerate(ids) if t not in self._skip]
            vecs = vecs[keep]
            vecs /= np.maximum(np.linalg.norm(vecs, axis=1, keepdims=True), 1e-12)
            self._tokens[text] = (tuple(ids[i] for i in keep), vecs.astype(np.float32))
            sent = out["sentence_embedding"].detach().float().cpu().numpy()
            self._cache[text] = sent / max(float(np.linalg.norm(sent)), 1e-12)

    def tokens(self, text: str) -> tuple[tuple[int, ...], np.ndarray]:
        self.encode_all([text])
        return self._tokens[text]

    def sentence(self, text: str) -> np.ndarray:
        self.encode_all([text])
        return self._cache[text]

    def question_ids(self, question: str | None) -> frozenset[int]:
        """Word-piece ids of the question (tokenizer only, no encoding)."""
        if not question:
            return frozenset()
        if question not in self._ids:
            self._ids[question] = frozenset(self.model.tokenizer(question, add_special_tokens=False)["input_ids"])
        return self._ids[question]


def bertscore(ta: tuple, tb: tuple, drop: frozenset[int] = frozenset()) -> tuple[float, float]:
    """BERTScore (precision, recall) of a against b from ``(ids, unit vectors)`` pairs: each kept piece of a matched
    to its most similar piece of b (precision), and each kept piece of b to a (recall). Pieces whose id is in
    ``drop`` (the question's) are not scored; 0.0 when a side has none left.
    Source: Zhang et al. (2020), BERTScore, greedy matching without idf weights."""
    (ia, va), (ib, vb) = ta, tb
    ka = [i for i, t in enumerate(ia) if t not in drop]
    kb = [i for i, t in enumerate(ib) if t not in drop]
    if not ka or not kb:
        return 0.0, 0.0
    sim = va[ka] @ vb.T
    p = float(sim.max(axis=1).mean())
    sim_b = vb[kb] @ va.T
    r = float(sim_b.max(axis=1).mean())
    return max(p, 0.0), max(r, 0.0)


EQUIVALENCE_FEATURES = (
    "f1", "cover_min", "cover_max", "beyond_f1", "beyond_min", "beyond_max", "beyond_equal", "contained",
    "nonanswer_any", "nonanswer_both", "echo_any", "numbers_same", "numbers_conflict", "numbers_one_side",
    "length_gap", "salient_min", "salient_max", "salient_first_both", "salient_first_any", "salient_disjoint",
    "yesno_conflict", "negation_parity_differs", "lead_both", "lead_any", "salient_unmatched_both", "open_any",
    "open_both", "options_question", "option_same", "option_conflict", "option_one_side",
    "cosine", "bertscore_min", "bertscore_max", "bertscore_q_min", "bertscore_q_max",
)  # fmt: skip
CORRECTNESS_FEATURES = (
    "floor", "fuzzy_recall", "stem_floor", "nonanswer", "echo", "alias_numbers", "numbers_given", "numbers_other",
    "negated", "option_alias", "option_alone", "option_other", "cosine",
    "bertscore_recall", "bertscore_precision_q",
)  # fmt: skip


#: The features read from the MiniLM encoder (NaN without one); in both feature sets they come last.
SOFT_FEATURES = frozenset({"cosine", "bertscore_min", "bertscore_max", "bertscore_q_min", "bertscore_q_max",
                           "bertscore_recall", "bertscore_precision_q"})
_WORD = re.compile(r"[^\W_](?:[\w'.-]|,(?=\d))*")  # "1,000" is one word
_NOT_SALIENT = STOP_WORDS | NEGATIONS | {"yes"}
_NO = frozenset({"no", "not", "never", "isnt", "doesnt", "cannot", "cant", "arent", "wasnt", "werent", "didnt"})


@functools.lru_cache(maxsize=1 << 12)
def _question_words(question: str | None) -> frozenset[str]:
    return frozenset(normalize_answer(question).split()) if question else frozenset()


def salient(text: str, question: str | None) -> list[str]:
    """The normalised tokens of ``text``'s capitalised or digit-initial words that are neither stop words, yes/no
    and negations nor the question's: the names and numbers an answer commits to, in order ("The Nile flows
    through Cairo." -> ["nile", "cairo"] for "Which river flows through the capital of Egypt?")."""
    q = _question_words(question)
    return [t for w in _WORD.findall(text) if w[0].isupper() or w[0].isdigit()
            for t in normalize_answer(w).split() if t not in q and t not in _NOT_SALIENT]


def _cover(x: list[str], other: set[str]) -> float:
    return sum(t in other for t in x) / len(x) if x else -1.0


def _polarity(x: Extraction, question: str | None) -> tuple[bool, bool, int]:
    """(says yes in its first three words, says no there, parity of its negation words beyond the question's)."""
    q = _question_words(question)
    return "yes" in x.tokens[:3], "no" in x.tokens[:3], sum(t in _NO and t not in q for t in x.tokens) % 2


def _contained(x: Extraction, y: Extraction) -> float:
    short, long_ = sorted((x.tokens, y.tokens), key=len)
    return float(bool(short) and bool(find_spans(short, long_)))


def equivalence_features(a: str, b: str, question: str | None, enc: TokenEncoder | None) -> list[float]:
    """`EQUIVALENCE_FEATURES` of the pair, symmetric in a and b (a list of float; texts are encoded by ``enc``; the
    `SOFT_FEATURES` are NaN when ``enc`` is None)."""
    x, y = extract(a, question), extract(b, question)
    ca, cb = overlap(x.content, y.content)
    ba, bb = overlap(x.beyond, y.beyond)
    nx, ny = x.new_numbers, y.new_numbers
    sa, sb = salient(a, question), salient(b, question)
    ta, tb = set(x.tokens), set(y.tokens)
    first_a, first_b = bool(sa) and sa[0] in tb, bool(sb) and sb[0] in ta
    lead_a, lead_b = bool(x.beyond) and x.beyond[0] in tb, bool(y.beyond) and y.beyond[0] in ta
    (ya, na, pa), (yb, nb, pb) = _polarity(x, question), _polarity(y, question)
    soft = [math.nan] * 5 if enc is None else equivalence_soft(a, b, question, enc)
    cover = (_cover(sa, tb), _cover(sb, ta))
    return [
        token_f1(a, b), min(ca, cb), max(ca, cb), _f1(ba, bb), min(ba, bb), max(ba, bb),
        float(bool(x.beyond) and set(x.beyond) == set(y.beyond)), _contained(x, y),
        float(not x.answers or not y.answers), float(not x.answers and not y.answers), float(x.echo or y.echo),
        float(bool(nx) and nx == ny), float(bool(nx) and bool(ny) and not nx & ny), float(bool(nx) != bool(ny)),
        abs(math.log1p(len(x.tokens)) - math.log1p(len(y.tokens))),
        min(cover), max(cover), float(first_a and first_b), float(first_a or first_b),
        float(bool(sa) and bool(sb) and not set(sa) & set(sb)), float((ya and nb) or (na and yb)), float(pa != pb),
        float(lead_a and lead_b), float(lead_a or lead_b),
        float(any(t not in tb for t in sa) and any(t not in ta for t in sb)),
        float(is_open(a) or is_open(b)), float(is_open(a) and is_open(b)), *_option_agreement(a, b, question),
        *soft,
    ]


def _option_agreement(a: str, b: str, question: str | None) -> list[float]:
    """(the question lists options, both name the same one option, both name options but none in common, one names
    an option and the other none): which listed option each answer picks, the extraction of a multiple-choice answer
    (every word of "150 million km" and "190 million km" is the question's, so the other features see no claim)."""
    if not listed_options(question):
        return [0.0] * 4
    na, nb = options_named(a, question), options_named(b, question)
    return [1.0, float(len(na) == 1 and na == nb), float(bool(na) and bool(nb) and not na & nb),
            float(bool(na) != bool(nb))]


def equivalence_soft(a: str, b: str, question: str | None, enc: TokenEncoder) -> list[float]:
    """The `SOFT_FEATURES` of an equivalence pair, in `EQUIVALENCE_FEATURES` order (texts encoded by ``enc``)."""
    tx, ty = enc.tokens(a.strip()), enc.tokens(b.strip())
    p, r = bertscore(tx, ty)
    pq, rq = bertscore(tx, ty, enc.question_ids(question))
    return [float(enc.sentence(a.strip()) @ enc.sentence(b.strip())), min(p, r), max(p, r), min(pq, rq), max(pq, rq)]


@functools.lru_cache(maxsize=1 << 12)
def _value(word: str) -> frozenset[str]:
    """The numeric value of one normalised word, as `numbers_in` reads it ("three" -> {"3"}, "16th" -> {"16"},
    "1000" -> {"1000"}); empty for a word that is no number."""
    return frozenset(numbers_in(word))


def _values(words: Sequence[str]) -> frozenset[str]:
    """The numeric values of the number words among ``words``."""
    return frozenset().union(*map(_value, words))


def _alias_words(g: Extraction) -> tuple[str, ...]:
    """The words of a gold alias that the lexical correctness features compare: its content words and its number
    words ("three wheels" -> ("three", "wheels"); scikit-learn's stop-word list holds "three", "twelve", "first"),
    or every token when it has neither."""
    return tuple(t for t in g.tokens if t not in STOP_WORDS or _value(t)) or g.tokens


def _number_given(word: str, numbers: frozenset[str]) -> bool | None:
    """Whether an answer whose numbers (values) are ``numbers`` states the value of the alias word ``word``; None
    when the word is no number (the caller compares it as a word)."""
    value = _value(word)
    return value <= numbers if value else None


def _fuzzy_recall(want: Sequence[str], have: Sequence[str], question: str | None,
                  numbers: frozenset[str] | None = None) -> float:
    """Mean over the alias's words of the best character similarity (difflib ratio) with a word of the answer:
    word forms ("Portugal" / "Portuguese", "Muslims" / "Muslim") score high without a table. A number word counts 1
    when the answer states its value (``numbers``, the answer's `Extraction.numbers`; None: the values of the words
    of ``have``) and 0 otherwise: numbers are compared as numbers, not by their characters ("1234" shares three of
    four with "1264"; "three" is not "2"); any other word with a digit counts 1 when the answer has it. The
    question's words count on neither side when the alias has another ("London Cricket Ground" does not give
    "Lord's Cricket Ground" for "Which cricket ground ...?"): a word the question spells out is no evidence."""
    q = _question_words(question)
    numbers = _values(have) if numbers is None else numbers
    if any(w not in q for w in want):
        want, have = [w for w in want if w not in q], [h for h in have if h not in q]
    if not want or not have:
        return 0.0
    have = set(have)

    def score(w: str) -> float:
        given = _number_given(w, numbers)
        if given is not None:
            return float(given)
        if any(c.isdigit() for c in w):
            return float(w in have)
        return max(SequenceMatcher(None, w, h).ratio() for h in have)

    return sum(score(w) for w in want) / len(want)


def _stem_contained(want: Sequence[str], have: Sequence[str], question: str | None,
                    numbers: frozenset[str] | None = None) -> bool:
    """Every word of the alias is a word of the answer, or, for a word of four or more letters and no digit, an
    answer word shares all of it but its last letter (at least four letters) as a prefix: the adjective, demonym
    and plural forms of a name without a table ("india" in "indian", "cuba" / "cuban", "germany" / "german",
    "mexico" / "mexican", "muslims" / "muslim"), while "austria" is not "australia", "iran" not "iraq"; a number
    word only by its value among the answer's ``numbers`` ("three" by "3" or "three"; None: the values of the words
    of ``have``); and at least one of the alias's words is not the question's (an alias the question spells out is
    no evidence), nor is matched by a prefix of the question's words ("calico" is not given by "the port of Calicut"
    when the question names Calicut)."""
    have, q = set(have), _question_words(question)
    numbers = _values(have) if numbers is None else numbers

    def given(w: str) -> bool:
        number = _number_given(w, numbers)
        if number is not None:
            return number
        if len(w) < 4 or any(c.isdigit() for c in w):
            return w in have
        return any(len(os.path.commonprefix((w, h))) >= max(4, len(w) - 1) for h in have if w in q or h not in q)

    return any(w not in q for w in want) and all(given(w) for w in want)


def correctness_features(answer: str, alias: str, question: str | None, enc: TokenEncoder | None) -> list[float]:
    """`CORRECTNESS_FEATURES` of (answer, one gold alias) (a list of float; texts are encoded by ``enc``; the
    `SOFT_FEATURES` are NaN when ``enc`` is None)."""
    x = extract(answer, question)
    g = extract(alias, None)
    want = _alias_words(g)
    soft = [math.nan] * 3 if enc is None else correctness_soft(answer, alias, question, enc)
    floor = alias_contained(answer, alias, question)
    stem = floor or (x.answers and not is_code(alias) and _stem_contained(want, x.tokens, question, x.numbers))
    return [
        float(floor), _fuzzy_recall(want, x.tokens, question, x.numbers), float(stem), float(not x.answers),
        float(x.echo), float(bool(g.numbers)),
        float(bool(g.numbers) and g.numbers <= x.numbers), float(bool(x.new_numbers - g.numbers)),
        float(x.negated), *_option_given(answer, alias, question), *soft,
    ]


def _option_given(answer: str, alias: str, question: str | None) -> list[float]:
    """(the alias is one of the options the question lists, the answer names that option and no other, the answer
    names another listed option): a multiple-choice answer judged by the option it picks."""
    key = tuple(normalize_answer(alias).split())
    mine = frozenset(i for i, o in enumerate(option_tokens(question)) if o == key)
    if not mine:
        return [0.0] * 3
    named = options_named(answer, question)
    return [1.0, float(named == mine), float(bool(named - mine))]


def correctness_soft(answer: str, alias: str, question: str | None, enc: TokenEncoder) -> list[float]:
    """The `SOFT_FEATURES` of (answer, one gold alias), in `CORRECTNESS_FEATURES` order (texts encoded by ``enc``)."""
    tx, tg = enc.tokens(answer.strip()), enc.tokens(alias.strip())
    return [float(enc.sentence(answer.strip()) @ enc.sentence(alias.strip())), bertscore(tx, tg)[1],
            bertscore(tx, tg, enc.question_ids(question))[0]]
