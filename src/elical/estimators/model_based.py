"""Training-free confidence estimators that query the language model itself: Verbal-0, Verbal-k and P(True).

All three share one call signature (registered in :data:`elical.estimators.ESTIMATORS`, kind "model")::

    fn(model, tokenizer, records, *, train_records=(), k=8, seed=0, batch_size=16, progress=False)
        -> ModelEstimate   # .confidence: ndarray of shape (len(records),) in [0, 1]

``model``/``tokenizer``: a transformers causal LM and its tokenizer (:func:`elical.generation.models.load_model`);
``records``: the evaluation records (need ``question``; P(True) also the greedy answer); ``train_records``: the
training pool, used only by Verbal-k for its examples; unused keywords are ignored, so a caller can pass the same
keywords to every entry.

Prompts (exact text; wrapped in the tokenizer's chat template when it has one, the assistant turn prefilled):

* **Verbal** (Tian et al., 2023; Xiong et al., ICLR 2024; "Verbal" baseline of Ni et al., 2025) — the model states
  its confidence *before* answering. User turn :data:`VERBAL_INSTRUCTION`; assistant turn prefilled with
  :data:`VERBAL_PREFIX` (``"Confidence:"``) so that even a small model writes a number; greedy decoding, at most
  ``max_new_tokens`` tokens, first line. **Verbal-k** lists k examples in the same user turn
  (:data:`VERBAL_EXAMPLES`): training-pool questions with their sample accuracy ``c_acc`` (two decimals) as the
  confidence they deserve (one turn, not k chat turns: 3x fewer prompt tokens). The output is read by
  :func:`parse_confidence`; an output without a number or probability word gets 0.5 and is counted in
  ``ModelEstimate.n_unparseable``.
* **P(True)** (Kadavath et al., 2022, Sec. 4) — the model judges its own greedy answer. User turn
  :data:`P_TRUE_TEMPLATE` (question, proposed answer, "(A) True (B) False"), assistant turn prefilled with
  :data:`P_TRUE_PREFIX` (``"The proposed answer is: ("``); confidence = softmax of the next-token logits of "A" and
  "B", normalized between the two: ``exp(l_A) / (exp(l_A) + exp(l_B))``.

A greedy answer that is empty after normalization answers nothing and gets P(True) 0.0 without a model call (the
rule of :mod:`elical.estimators.training_free`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from elical.estimators.training_free import EstimatorInputError, _empty_greedy
from elical.records import greedy_text, sample_accuracy

__all__ = [
    "VERBAL_INSTRUCTION", "VERBAL_EXAMPLES", "VERBAL_EXAMPLE", "VERBAL_PREFIX", "P_TRUE_TEMPLATE", "P_TRUE_PREFIX",
    "UNPARSEABLE_CONFIDENCE",
    "ModelEstimate", "parse_confidence", "verbal_prompt", "select_examples", "verbal", "verbal_0", "verbal_k",
    "p_true_prompt", "p_true",
]  # fmt: skip

VERBAL_INSTRUCTION = (
    "Before answering, estimate how likely you are to answer the following question correctly. "
    "Do not answer it. Reply with only a number between 0 and 1.{examples}\nQuestion: {question}"
)
VERBAL_EXAMPLES = "\nExamples of questions and the confidence they deserve:{lines}\n\nThe question to rate:"
VERBAL_EXAMPLE = "\nQuestion: {question}\nConfidence: {confidence:.2f}"
VERBAL_PREFIX = "Confidence:"
P_TRUE_TEMPLATE = "Question: {question}\nProposed Answer: {answer}\nIs the proposed answer:\n (A) True\n (B) False"
P_TRUE_PREFIX = "The proposed answer is: ("
UNPARSEABLE_CONFIDENCE = 0.5

# Words of estimative probability: Kent (1964) for the phrases he calibrated (midpoints of his ranges); the
# high/medium/low levels are our own mapping. Longer phrases first, so "very low" is not read as "low".
_WORDS = {
    "almost certainly not": 0.07, "almost certain": 0.93, "certainly not": 0.0, "very unlikely": 0.1,
    "very likely": 0.9, "very high": 0.9, "very low": 0.1, "probably not": 0.3, "about even": 0.5,
    "impossible": 0.0, "certain": 1.0, "unlikely": 0.3, "likely": 0.75, "probable": 0.75, "high": 0.8,
    "medium": 0.5, "moderate": 0.5, "low": 0.2,
}  # fmt: skip
_NUMBER = (r"(?P<sign>-)?(?P<num>\d+(?:\.\d+)?|\.\d+)\s*"
           r"(?:(?P<pct>%|percent\b)|/\s*(?P<den>\d+(?:\.\d+)?)|out\s+of\s+(?P<den2>\d+(?:\.\d+)?))?")
_CONFIDENCE_RE = re.compile(rf"(?<![\w.]){_NUMBER}|\b(?P<word>{'|'.join(map(re.escape, _WORDS))})\b", re.I)


def parse_confidence(text: str) -> float | None:
    """Read a stated confidence from model output; the first number or probability word wins.

    Numbers: ``"0.7"``, ``".8"``, ``"70%"``, ``"70 percent"``, ``"7/10"``, ``"3 out of 5"``; a bare number above 1
    and up to 100 is a percentage without its sign (``"70"`` -> 0.7); the result is clipped to [0, 1] (``"150"``
    -> 1.0, ``"-0.2"`` -> 0.0); a zero denominator is ignored (``"1/0"`` -> 1.0). Words (case-insensitive):
    Kent's (1964) estimative phrases ("almost certain" 0.93, "likely" 0.75, "unlikely" 0.3, ...) and
    high / medium / low (0.8 / 0.5 / 0.2). Returns a float in [0, 1], or None when the text holds neither (the
    caller then uses :data:`UNPARSEABLE_CONFIDENCE`).
    """
    m = _CONFIDENCE_RE.search(text or "")
    if m is None:
        return None
    if m["word"]:
        return _WORDS[m["word"].lower()]
    value = float(m["num"])
    den = m["den"] or m["den2"]
    if m["pct"]:
        value /= 100.0
    elif den is not None and float(den) > 0:
        value /= float(den)
    elif value > 1.0:
        value /= 100.0
    if m["sign"]:
        value = -value
    return float(min(max(value, 0.0), 1.0))


@dataclass
class ModelEstimate:
    """Output of a model-based estimator.

    confidence : ndarray of shape (n,), in [0, 1]. n_unparseable : Verbal outputs without a readable number (they
    got :data:`UNPARSEABLE_CONFIDENCE`). outputs : the raw Verbal outputs (empty for P(True)). meta : what a
    report should carry (estimator, k, the ids of the Verbal-k examples).
    """

    confidence: np.ndarray
    n_unparseable: int = 0
    outputs: list[str] = field(default_factory=list)
    meta: dict = field(default_factory=dict)

    def info(self) -> dict:
        """JSON-ready summary: n, n_unparseable and ``meta``."""
        return {"n": int(len(self.confidence)), "n_unparseable": int(self.n_unparseable), **self.meta}


def _chat(tokenizer, turns: list[tuple[str, str]], user: str, prefix: str) -> str:
    """Chat-templated prompt ending inside the assistant turn, which starts with ``prefix``."""
    if getattr(tokenizer, "chat_template", None):
        messages = []
        for u, a in turns:
            messages += [{"role": "user", "content": u}, {"role": "assistant", "content": a}]
        messages.append({"role": "user", "content": user})
        return tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True) + prefix
    return "".join(f"{u}\n{a}\n\n" for u, a in turns) + f"{user}\n{prefix}"


def verbal_prompt(tokenizer, question: str, examples: Sequence[tuple[str, float]] = ()) -> str:
    """The Verbal prompt for ``question``; ``examples``: (question, confidence in [0, 1]) pairs listed before it
    (Verbal-k) as :data:`VERBAL_EXAMPLE` lines inside :data:`VERBAL_EXAMPLES`."""
    block = VERBAL_EXAMPLES.format(lines="".join(VERBAL_EXAMPLE.format(question=q, confidence=c)
                                                  for q, c in examples)) if examples else ""
    return _chat(tokenizer, [], VERBAL_INSTRUCTION.format(examples=block, question=question), VERBAL_PREFIX)


def _question(record: dict, index: int) -> str:
    q = record.get("question")
    if not isinstance(q, str) or not q.strip():
        raise EstimatorInputError(record, index, "question", "missing or empty")
    return q.strip()


def select_examples(train_records: Sequence[dict], k: int, seed: int = 0,
                    exclude_ids: Sequence[str] = ()) -> list[tuple[str, float, str]]:
    """The k Verbal-k examples: (question, sample accuracy c_acc, id) of the first k training-pool records of
    ``np.random.default_rng(seed).permutation(len(train_records))`` — the same order that picks the k labelled
    questions of Cal-Only(k) / EliCal(k) in :mod:`elical.jobs.run`, so Verbal-k uses no other labels.

    Raises ValueError when a record is not a training record (``split`` other than "train") or its id is in
    ``exclude_ids`` (the evaluation set), when k < 1 or the pool is empty; :class:`EstimatorInputError` for a
    record without ``sampling_correctness``. Fewer than k records: all are used."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k!r}")
    if not train_records:
        raise ValueError("Verbal-k needs training-pool records (train_records) for its examples; none were given")
    exclude = set(exclude_ids)
    for r in train_records:
        if r.get("split", "train") != "train":
            raise ValueError(f"record {r.get('id', '?')}: Verbal-k examples must come from the training pool, "
                             f"got split {r.get('split')!r}")
        if r.get("id") in exclude:
            raise ValueError(f"record {r['id']}: Verbal-k example is also an evaluation record")
    order = np.random.default_rng(seed).permutation(len(train_records))[:k]
    out = []
    for i in order:
        r = train_records[int(i)]
        try:
            c_acc = sample_accuracy(r)
        except ValueError as exc:
            raise EstimatorInputError(r, int(i), "sampling_correctness", str(exc)) from None
        out.append((_question(r, int(i)), c_acc, str(r.get("id", i))))
    return out


def _batches(n: int, size: int, progress: bool, desc: str):
    """Slices of at most ``size`` questions, small enough for at least 8 steps of the progress bar (which counts
    questions): the answers are greedy and do not depend on the batch."""
    from tqdm.auto import tqdm

    size = max(1, min(size, -(-n // 8)))
    with tqdm(total=n, desc=desc, unit="q", disable=not progress) as bar:
        for start in range(0, n, size):
            yield slice(start, min(start + size, n))
            bar.update(min(start + size, n) - start)


def verbal(model, tokenizer, records: Sequence[dict], examples: Sequence[tuple[str, float]] = (), *,
           batch_size: int = 16, max_new_tokens: int = 10, progress: bool = False) -> ModelEstimate:
    """Verbal confidence with the given in-context ``examples`` ((question, confidence) pairs; none = Verbal-0).

    Batched greedy decoding (:class:`elical.generation.prefix_sharing.TransformersGenerator`, deterministic). Returns a
    :class:`ModelEstimate` with confidence of shape (len(records),) and the count of unparseable outputs.
    Raises :class:`EstimatorInputError` for a record without a question."""
    from elical.generation.base import DecodingConfig
    from elical.generation.prefix_sharing import TransformersGenerator

    prompts = [verbal_prompt(tokenizer, _question(r, i), examples) for i, r in enumerate(records)]
    gen = TransformersGenerator(model, tokenizer, DecodingConfig(n_samples=0, max_new_tokens=max_new_tokens,
                                                                 batch_size=batch_size))
    outputs = []
    for part in _batches(len(prompts), batch_size, progress, "verbal"):
        keys = [str(r.get("id", i)) for i, r in enumerate(records[part])]
        outputs += [g.greedy_response for g in gen.generate(prompts[part], keys, seed=0, n_samples=0)]
    parsed = [parse_confidence(o) for o in outputs]
    conf = np.array([UNPARSEABLE_CONFIDENCE if p is None else p for p in parsed], dtype=float)
    return ModelEstimate(conf, sum(p is None for p in parsed), outputs, {"k": len(examples)})


def verbal_0(model, tokenizer, records: Sequence[dict], *, batch_size: int = 16, progress: bool = False,
             **_) -> ModelEstimate:
    """Verbal-0: zero-shot verbal confidence (:func:`verbal` without examples). Extra keywords are ignored."""
    out = verbal(model, tokenizer, records, (), batch_size=batch_size, progress=progress)
    out.meta["estimator"] = "Verbal-0"
    return out


def verbal_k(model, tokenizer, records: Sequence[dict], *, train_records: Sequence[dict] = (), k: int = 8,
             seed: int = 0, batch_size: int = 16, progress: bool = False, **_) -> ModelEstimate:
    """Verbal-k: verbal confidence after k training-pool examples labelled with their sample accuracy
    (:func:`select_examples` with ``seed``, never evaluation records). Raises ValueError as
    :func:`select_examples`."""
    chosen = select_examples(train_records, k, seed, exclude_ids=[r.get("id") for r in records])
    out = verbal(model, tokenizer, records, [(q, c) for q, c, _ in chosen], batch_size=batch_size,
                 progress=progress)
    out.meta.update(estimator="Verbal-k", seed=seed, example_ids=[i for _, _, i in chosen])
    return out


def p_true_prompt(tokenizer, question: str, answer: str) -> str:
    """The P(True) prompt: question and proposed answer, ending right before the option letter."""
    return _chat(tokenizer, [], P_TRUE_TEMPLATE.format(question=question, answer=answer), P_TRUE_PREFIX)


def _option_ids(tokenizer) -> tuple[int, int]:
    """Token ids of "A" and "B" as the tokenizer writes them right after :data:`P_TRUE_PREFIX`."""
    base = tokenizer.encode(P_TRUE_PREFIX, add_special_tokens=False)
    ids = []
    for letter in "AB":
        full = tokenizer.encode(P_TRUE_PREFIX + letter, add_special_tokens=False)
        if full[: len(base)] != base or len(full) != len(base) + 1:
            raise ValueError(f"the tokenizer does not write option {letter!r} as one token after the prefix")
        ids.append(full[-1])
    return ids[0], ids[1]


def p_true(model, tokenizer, records: Sequence[dict], *, batch_size: int = 16, progress: bool = False,
           **_) -> ModelEstimate:
    """P(True) (Kadavath et al., 2022): probability that the model calls its own greedy answer "(A) True".

    One prefill per ``batch_size`` prompts (their common prefix, the chat template and instruction, run once; the
    rest left-padded, positions counting real tokens only), next-token logits of "A" and "B" after
    :data:`P_TRUE_PREFIX`, softmax between the two. Returns a :class:`ModelEstimate` with confidence of shape
    (len(records),) in [0, 1]; an empty greedy answer gets 0.0 without a model call.
    Raises :class:`EstimatorInputError` for a record without a question; ValueError when the tokenizer splits
    an option letter."""
    import torch

    from elical.generation.prefix_sharing import TransformersGenerator

    id_a, id_b = _option_ids(tokenizer)
    conf = np.zeros(len(records))
    todo = [i for i, r in enumerate(records) if not _empty_greedy(r)]
    prompts = [p_true_prompt(tokenizer, _question(records[i], i), greedy_text(records[i]).strip()) for i in todo]
    gen = TransformersGenerator(model, tokenizer)
    for part in _batches(len(todo), batch_size, progress, "P(True)"):
        pair = gen.next_token_logits(prompts[part])[:, [id_a, id_b]].double()
        conf[todo[part]] = torch.softmax(pair, dim=-1)[:, 0].cpu().numpy()
    return ModelEstimate(np.clip(conf, 0.0, 1.0), 0, [], {"estimator": "P(True)"})

