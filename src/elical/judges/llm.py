"""LLM-as-judge for answer equivalence and correctness, driven by any text-completion backend.

The backend is a callable ``complete(prompts: list[str]) -> list[str]`` (one completion per prompt, greedy /
temperature 0). Two are provided: `TransformersCompletion` (a local transformers model, through
`elical.generation.prefix_sharing.TransformersGenerator` and the model's chat template) and `OpenAICompletion` (any
OpenAI-compatible ``/v1/chat/completions`` server: vLLM, llama.cpp server, Ollama, OpenAI).

Prompts (exact text, ``{...}`` filled in; without a question the first line ends "... to a question."):

``EQUIVALENCE_PROMPT``::

    We are evaluating answers to the question: {question}
    Answer 1: {a}
    Answer 2: {b}
    Are these two answers to the question the same? Answer yes or no.

``CORRECTNESS_PROMPT``::

    We are evaluating an answer to the question: {question}
    Correct answers (any one of them is right): {aliases joined by " | "}
    Proposed answer: {response}
    Does the proposed answer give the same answer as one of the correct answers? Answer yes or no.

The equivalence wording follows the LLM-judge variant of semantic clustering (Kuhn et al., 2023, App.; Farquhar
et al., 2024, *Nature*, "Detecting hallucinations ... using semantic entropy", Methods); the correctness
variant is the usual gold-answer grading prompt of LLM-judged QA.

Answer parsing (`parse_yes_no`): lowercase, strip; the first word (letters only) decides if it is one of
yes/y/true/correct/same/equivalent (-> 1) or no/n/false/incorrect/different/not (-> 0); otherwise the first
standalone "yes" or "no" anywhere in the text decides; otherwise the completion is unparseable: the judgement is
``unparsed_value`` (default 0, "not shown to be the same") and ``n_unparsed_`` counts it.
"""

from __future__ import annotations

import os
import re
import sys
from typing import Callable, Sequence

import numpy as np

from elical.judges.base import PairJudge, alias_list, check_alias_pairs, check_pairs
from elical.judges.text import normalize_answer

__all__ = ["EQUIVALENCE_PROMPT", "CORRECTNESS_PROMPT", "parse_yes_no", "LLMJudge", "TransformersCompletion",
           "OpenAICompletion"]

EQUIVALENCE_PROMPT = (
    "We are evaluating answers to the question: {question}\n"
    "Answer 1: {a}\nAnswer 2: {b}\n"
    "Are these two answers to the question the same? Answer yes or no."
)
CORRECTNESS_PROMPT = (
    "We are evaluating an answer to the question: {question}\n"
    "Correct answers (any one of them is right): {aliases}\n"
    "Proposed answer: {response}\n"
    "Does the proposed answer give the same answer as one of the correct answers? Answer yes or no."
)

_YES = frozenset({"yes", "y", "true", "correct", "same", "equivalent"})
_NO = frozenset({"no", "n", "false", "incorrect", "different", "not"})
_WORD = re.compile(r"[a-z]+")
_ANY = re.compile(r"\b(yes|no)\b")


def parse_yes_no(text: str) -> int | None:
    """1 for a yes, 0 for a no, None when the completion says neither (rules in the module docstring).

    "Yes.", "**YES**", " yes, they are" -> 1; "No", "not the same", "false" -> 0;
    "I think yes" -> 1 (first standalone yes/no); "", "Maybe", "Answer 1" -> None.
    """
    low = text.strip().lower()
    first = _WORD.search(low)
    if first is not None and first.group() in _YES | _NO:
        return int(first.group() in _YES)
    m = _ANY.search(low)
    return None if m is None else int(m.group(1) == "yes")


def _question_line(template: str, question: str | None) -> str:
    return template if question else template.replace(" to the question: {question}", " to a question.")


def _as_complete(backend) -> Callable[[list[str]], list[str]]:
    from elical.generation.prefix_sharing import TransformersGenerator

    if hasattr(backend, "complete"):  # e.g. elical.generation.backends.OpenAIGenerator (use endpoint="chat" there)
        return backend.complete
    if isinstance(backend, TransformersGenerator):
        return TransformersCompletion(backend.model, backend.tokenizer)
    if callable(backend):
        return backend
    raise TypeError(f"complete must be a callable list[str] -> list[str], an object with .complete, or a "
                    f"TransformersGenerator; got {type(backend).__name__}")


class LLMJudge(PairJudge):
    """Equivalence (``mode="equivalence"``) or correctness (``mode="correctness"``) asked of a language model.

    Parameters
    ----------
    complete : callable list[str] -> list[str], an object with ``.complete``, or a TransformersGenerator
        The backend (greedy decoding expected; a few new tokens are enough). An object's ``.complete(prompts)``
        is used as is (``elical.generation.backends.OpenAIGenerator`` has one; give it ``endpoint="chat"`` so that the
        server applies the chat template); a TransformersGenerator is wrapped in `TransformersCompletion`.
    mode : {"equivalence", "correctness"}
    batch_size : int, default 16
        Prompts per backend call.
    unparsed_value : {0, 1}, default 0
        Judgement for a completion `parse_yes_no` cannot read.

    Before the model: an answer (or every alias) empty after `normalize_answer` -> 0; in equivalence mode,
    answers equal after normalization -> 1. Completions are cached by prompt text, so the same question and
    answers are never sent twice. ``n_unparsed_`` counts unparseable completions (each prompt once);
    ``raw_`` maps each prompt to its completion.

    Equivalence ``judge_many(pairs, questions)``: pairs (a, b); correctness ``judge_many(pairs, questions)``:
    pairs (response, aliases). Both return ndarray of int 0/1, shape (n,). Raises ValueError on bad
    parameters or when the backend returns the wrong number of completions; TypeError for non-str answers.
    """

    name = "llm"

    def __init__(self, complete, mode: str = "equivalence", batch_size: int = 16, unparsed_value: int = 0):
        if mode not in ("equivalence", "correctness"):
            raise ValueError(f"mode must be 'equivalence' or 'correctness', got {mode!r}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size!r}")
        if unparsed_value not in (0, 1):
            raise ValueError(f"unparsed_value must be 0 or 1, got {unparsed_value!r}")
        self.complete = _as_complete(complete)
        self.mode, self.batch_size, self.unparsed_value = mode, batch_size, unparsed_value
        self.raw_: dict[str, str] = {}
        self.n_unparsed_ = 0

    def prompt(self, a: str, b: str | Sequence[str], question: str | None = None) -> str:
        """The exact prompt for a pair: (a, b) in equivalence mode, (response, aliases) in correctness mode."""
        q = question.strip() if question else None
        if self.mode == "equivalence":
            return _question_line(EQUIVALENCE_PROMPT, q).format(question=q, a=a.strip(), b=b.strip())
        aliases = " | ".join(x.strip() for x in alias_list(b) if normalize_answer(x))
        return _question_line(CORRECTNESS_PROMPT, q).format(question=q, aliases=aliases, response=a.strip())

    def _ask(self, prompts: list[str]) -> None:
        from tqdm.auto import tqdm

        todo = list(dict.fromkeys(p for p in prompts if p not in self.raw_))
        # a count for long passes (semantic clustering of a whole run); on a terminal, off with TQDM_DISABLE=1
        shown = len(todo) > self.batch_size and sys.stderr.isatty() and os.environ.get("TQDM_DISABLE") != "1"
        bar = tqdm(total=len(todo), desc=f"llm judge ({self.mode})", unit="prompt", leave=False, disable=not shown)
        for i in range(0, len(todo), self.batch_size):
            chunk = todo[i:i + self.batch_size]
            outs = list(self.complete(chunk))
            if len(outs) != len(chunk):
                raise ValueError(f"the completion backend returned {len(outs)} completions for {len(chunk)} prompts")
            for p, text in zip(chunk, outs):
                self.raw_[p] = str(text)
                self.n_unparsed_ += parse_yes_no(str(text)) is None
            bar.update(len(chunk))
        bar.close()

    def judge(self, first, second, question: str | None = None) -> np.ndarray:
        """Equivalence: ``judge(greedy, samples)``; correctness: ``judge(responses, aliases)`` (also callable so).
        Returns ndarray of int 0/1, one per sample / response."""
        if self.mode == "equivalence":
            pairs = [(first, s) for s in second]
        else:
            pairs = [(r, second) for r in first]
        return self.judge_many(pairs, None if question is None else [question] * len(pairs))

    __call__ = judge

    def judge_many(self, pairs, questions: Sequence[str | None] | None = None) -> np.ndarray:
        """Judge n pairs (see the class docstring), all prompts batched; ndarray of int 0/1, shape (n,)."""
        if self.mode == "equivalence":
            check_pairs(pairs, questions)
        else:
            pairs = check_alias_pairs(pairs, questions)
        out = np.zeros(len(pairs), dtype=int)
        todo, prompts = [], []
        for i, (a, b) in enumerate(pairs):
            na = normalize_answer(a)
            nb = normalize_answer(b) if self.mode == "equivalence" else " ".join(map(normalize_answer, b)).strip()
            if not na or not nb:
                continue
            if self.mode == "equivalence" and na == nb:
                out[i] = 1
                continue
            todo.append(i)
            prompts.append(self.prompt(a, b, None if questions is None else questions[i]))
        self._ask(prompts)
        for i, p in zip(todo, prompts):
            verdict = parse_yes_no(self.raw_[p])
            out[i] = self.unparsed_value if verdict is None else verdict
        return out


class TransformersCompletion:
    """``complete(prompts) -> completions`` with a local transformers chat model, greedy.

    Each prompt is put in the model's chat template (`elical.generation.base.build_prompt` with the prompt as the
    whole user message) and decoded greedily for ``max_new_tokens`` tokens (stopping at a newline or EOS) by
    `elical.generation.prefix_sharing.TransformersGenerator`, ``batch_size`` prompts at a time.
    """

    def __init__(self, model, tokenizer, max_new_tokens: int = 4, batch_size: int = 16):
        from elical.generation.base import DecodingConfig
        from elical.generation.prefix_sharing import TransformersGenerator

        self.tokenizer = tokenizer
        self._gen = TransformersGenerator(model, tokenizer, DecodingConfig(
            n_samples=0, max_new_tokens=max_new_tokens, batch_size=batch_size))
        self.batch_size = batch_size

    def __call__(self, prompts: Sequence[str]) -> list[str]:
        from elical.generation.base import build_prompt

        out = []
        for i in range(0, len(prompts), self.batch_size):
            chunk = [build_prompt(self.tokenizer, p, instruction="{question}") for p in prompts[i:i + self.batch_size]]
            out += [g.greedy_response for g in self._gen.generate(chunk, [str(i)] * len(chunk), seed=0, n_samples=0)]
        return out


class OpenAICompletion:
    """``complete(prompts) -> completions`` from an OpenAI-compatible chat-completions server.

    Sends ``{"model", "messages": [{"role": "user", "content": prompt}], "temperature": 0, "max_tokens"}`` to
    ``{base_url}/chat/completions`` (``base_url`` such as ``http://localhost:8000/v1``) through
    :class:`elical.generation.openai_client.OpenAIClient` (the ``openai`` package): ``concurrency`` requests at a
    time, ``timeout`` seconds each, ``max_retries`` retries with exponential back-off; returns
    ``choices[0].message.content``. ``api_key`` is sent as a Bearer token when given. A reply that abstained
    (``elical serve --abstain-below``) is no verdict: raises. Raises
    :class:`elical.generation.openai_client.EndpointError` (a RuntimeError) naming the URL when the server cannot
    be reached, keeps failing or answers without a completion.
    """

    def __init__(self, base_url: str, model: str, api_key: str | None = None, max_tokens: int = 4, *,
                 timeout: float | None = None, max_retries: int | None = None, concurrency: int | None = None):
        from elical.generation import openai_client as oc

        self.client = oc.OpenAIClient(
            base_url, api_key, timeout=oc.DEFAULT_TIMEOUT if timeout is None else timeout,
            max_retries=oc.DEFAULT_MAX_RETRIES if max_retries is None else max_retries,
            concurrency=oc.DEFAULT_CONCURRENCY if concurrency is None else concurrency)
        self.url = self.client.base_url + "/chat/completions"
        self.model, self.api_key, self.max_tokens = model, api_key, max_tokens

    def _one(self, prompt: str) -> str:
        from elical.generation.openai_client import EndpointError

        reply = self.client.create("chat", {"model": self.model, "messages": [{"role": "user", "content": prompt}],
                                            "temperature": 0, "max_tokens": self.max_tokens})
        try:
            choice = reply["choices"][0]
            if (choice.get("elical") or {}).get("abstained"):
                raise EndpointError(f"{self.url}: the judge server abstained instead of answering")
            return choice["message"]["content"] or ""
        except (KeyError, IndexError, TypeError) as e:
            raise EndpointError(f"{self.url}: no completion ({type(e).__name__}: {e}) in {str(reply)[:200]}") from e

    def __call__(self, prompts: Sequence[str]) -> list[str]:
        return self.client.map(self._one, list(prompts))
