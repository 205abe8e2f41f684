"""The OpenAI-compatible service behind ``elical serve``: request validation, the confidence gate and the replies.

Endpoints (served by :mod:`elical.generation.server_app`): ``POST /v1/completions`` (``prompt`` a string or a
list of strings), ``POST /v1/chat/completions`` (the tokenizer's chat template is applied to ``messages``),
``GET /v1/models``, ``GET /health``. Request fields: ``model`` (must be the served name, else 404 like OpenAI;
may be left out), ``max_tokens`` (default 16), ``temperature`` (0 = greedy; default 1), ``top_p``, ``top_k``
(default 50), ``n``, ``seed`` (default 0: the same request gives the same answers), ``logprobs`` (completions:
an int, chat: a bool), ``stop`` and ``stream`` (server-sent events; the confidence comes in the first chunk,
before any token). Every body is checked by pydantic models: a malformed one gets HTTP 400 naming the field, a
prompt that does not fit the model's context with ``max_tokens`` gets 400 before any work. Answers come from
:class:`elical.generation.prefix_sharing.TransformersGenerator` (prompt i of a request is sampled with the key
``str(i)``); with a ``stop`` containing ``"\\n"`` an answer ends at its first line, otherwise at EOS or
``max_tokens`` (other ``stop`` strings cut the text and its tokens). Log-probs are those of the raw model
distribution; ``top_logprobs`` are not given. Concurrent requests are batched by
:class:`elical.generation.batching.ModelWorker`.

Confidence before answering (EliCal, Ni et al., arXiv 2510.17509): given a ``confidence`` model (anything with
``predict(questions) -> ndarray`` in [0, 1] and ``method``; ``elical serve --confidence-head`` loads a
:class:`elical.heads.confidence.ConfidenceModel`) every choice carries ``"elical": {"confidence": c, "method":
name, "abstained": bool, "threshold": T or null}``, computed from the question (chat: the last user message;
completions: the prompt) with one forward pass before any token is generated. Below the threshold a question is
not answered: its choices hold the fixed abstention text with ``finish_reason`` ``"stop"`` and no token is
generated. A request may set its own threshold with ``"elical": {"abstain_below": T or null}``. See
``docs/serving.md``.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass

from elical.generation.api_schema import RequestError, parse_request
from elical.generation.batching import GenParams, ModelWorker

__all__ = ["ABSTENTION_TEXT", "CompletionService", "RequestError", "MAX_TOKENS", "MAX_N"]

MAX_TOKENS, MAX_N = 1024, 128
ABSTENTION_TEXT = "I am not confident that I can answer this correctly, so I will not guess."


@dataclass
class Plan:
    """A validated request: what to score, what to generate and how to reply."""

    chat: bool
    prompts: list
    questions: list | None
    params: GenParams
    seed: int
    stop: list
    want_lp: bool
    stream: bool
    threshold_override: tuple | None  # (T,) when the request set elical.abstain_below, else None
    prompt_tokens: int


class CompletionService:
    """Turns OpenAI request bodies into answers from a transformers model (``model``/``tokenizer`` as returned by
    :func:`elical.generation.models.load_model`); all model work runs on one :class:`ModelWorker` thread.

    ``name``: the served model name (requests naming another get 404); ``logprobs``: False never returns
    log-probs. ``confidence``: optional confidence model on the same model (module docstring); ``abstain_below``
    a probability in [0, 1] (None: never abstain); ``context``: the model's context in tokens (default: its
    ``max_position_embeddings``). Raises ValueError for ``abstain_below`` outside [0, 1] or without
    ``confidence``."""

    def __init__(self, model, tokenizer, name: str, logprobs: bool = True, *, confidence=None,
                 abstain_below: float | None = None, abstention_text: str = ABSTENTION_TEXT,
                 context: int | None = None, max_prompts: int = 32):
        if abstain_below is not None and (confidence is None or not 0.0 <= abstain_below <= 1.0):
            raise ValueError(f"abstain_below must be in [0, 1] and needs a confidence head, got {abstain_below!r}")
        self.model, self.tokenizer, self.name, self.logprobs = model, tokenizer, name, logprobs
        self.confidence, self.abstain_below, self.abstention_text = confidence, abstain_below, abstention_text
        self.context = context or getattr(getattr(model, "config", None), "max_position_embeddings", None)
        self.worker = ModelWorker(model, tokenizer, confidence, max_prompts=max_prompts)

    def plan(self, raw: bytes, chat: bool) -> Plan:
        """Parse and check a request body (JSON bytes). Raises :class:`RequestError`."""
        req = parse_request(raw, chat)
        if req.model is not None and req.model != self.name:
            raise RequestError(f"The model `{req.model}` does not exist (this server serves `{self.name}`).",
                               404, "invalid_request_error", "model_not_found")
        if chat:
            messages = [m.as_template_dict() for m in req.messages]
            prompts = [self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)]
            questions = [_last_user_message(messages)] if self.confidence is not None else None
        else:
            prompts = [req.prompt] if isinstance(req.prompt, str) else list(req.prompt)
            questions = prompts
        max_tokens = req.max_tokens if req.max_tokens is not None else 16
        stop = [req.stop] if isinstance(req.stop, str) else [s for s in (req.stop or []) if s]
        lengths = [self._count_tokens(p) for p in prompts]
        if self.context and max(lengths) + max_tokens > self.context:
            raise RequestError(f"This model's maximum context length is {self.context} tokens; the prompt has "
                               f"{max(lengths)} tokens and max_tokens asks for {max_tokens} more.",
                               code="context_length_exceeded")
        temperature = 1.0 if req.temperature is None else float(req.temperature)
        params = GenParams(temperature=temperature, top_p=float(req.top_p if req.top_p is not None else 1.0),
                           top_k=req.top_k if req.top_k is not None else 50, max_tokens=max_tokens, n=req.n,
                           one_line="\n" in stop)
        override = None
        if req.elical is not None and "abstain_below" in req.elical.model_fields_set:
            override = (req.elical.abstain_below,)
        return Plan(chat, prompts, questions, params, req.seed, stop,
                    req.logprobs not in (None, False) and self.logprobs, req.stream, override, sum(lengths))

    def _count_tokens(self, text: str) -> int:
        """Tokens of ``text``; above the context, a lower bound from a prefix (tokenizing 80k tokens takes a
        second, their first 8 characters per context token a tenth of that)."""
        cut = 8 * self.context if self.context else 0
        if cut and len(text) > cut:
            space = text.rfind(" ", cut // 2, cut)  # a word boundary: the prefix's words are the text's words
            head = len(self.tokenizer(text[:space if space > 0 else cut], add_special_tokens=False)["input_ids"])
            if head - 1 > self.context:
                return head - 1
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def threshold(self, plan: Plan):
        return plan.threshold_override[0] if plan.threshold_override is not None else self.abstain_below

    def gates(self, plan: Plan, confidence) -> list[dict] | None:
        """Per question ``{"confidence", "method", "abstained", "threshold"}`` from the scores ``confidence``."""
        if confidence is None:
            return None
        t = self.threshold(plan)
        return [{"confidence": float(c), "method": self.confidence.method,
                 "abstained": t is not None and float(c) < t, "threshold": t} for c in confidence]

    @staticmethod
    def answered(plan: Plan, gates: list | None) -> list[int]:
        """Indices of the prompts to generate (all but the abstained ones)."""
        return [i for i in range(len(plan.prompts)) if gates is None or not gates[i]["abstained"]]

    def reply(self, plan: Plan, gates: list | None, rows: dict) -> dict:
        """The response body; ``rows`` maps each answered prompt's index to its rows (see ModelWorker.generate)."""
        choices, used = [], 0
        for i in range(len(plan.prompts)):
            got = rows.get(i)
            if got is None:
                answers = [(self.abstention_text, [], [], [], "stop")] * plan.params.n
            else:
                answers = [_cut(r, plan.stop, plan.params.max_tokens) for r in
                           (got * plan.params.n if plan.params.greedy else got)]
            for text, tokens, lps, ids, finish in answers:
                used += len(ids)
                choices.append(_choice(len(choices), text, tokens, lps, finish, plan.want_lp, plan.chat))
                if gates is not None:
                    choices[-1]["elical"] = dict(gates[i])
        return {"id": f"{'chatcmpl' if plan.chat else 'cmpl'}-{uuid.uuid4().hex}",
                "object": "chat.completion" if plan.chat else "text_completion", "created": int(time.time()),
                "model": self.name, "choices": choices,
                "usage": {"prompt_tokens": plan.prompt_tokens, "completion_tokens": used,
                          "total_tokens": plan.prompt_tokens + used}}

    def complete(self, body: dict, chat: bool = False) -> dict:
        """The reply to a body (a dict), computed in this thread's call: for scripts and tests without HTTP.
        Raises :class:`RequestError`."""
        import json

        plan = self.plan(json.dumps(body).encode(), chat)
        scores = self.worker.score(plan.questions).future.result() if self.confidence is not None else None
        gates = self.gates(plan, scores)
        todo = self.answered(plan, gates)
        rows = self.generate(plan, todo).future.result() if todo else []
        return self.reply(plan, gates, dict(zip(todo, rows)))

    def generate(self, plan: Plan, todo: list[int]):
        """Queue the generation of prompts ``todo`` (a :class:`elical.generation.batching.Job`); its result, one
        list of rows per prompt of ``todo``, goes to :meth:`reply` as ``dict(zip(todo, result))``."""
        return self.worker.generate([plan.prompts[i] for i in todo], [str(i) for i in todo], plan.seed, plan.params)


def _cut(row, stop: list, max_tokens: int):
    """(text, tokens, log-probs, ids, finish_reason) of a decoded row cut at the first ``stop`` string; tokens
    are kept while they end inside the kept text."""
    text, tokens, lps, ids = row
    cut = min((text.find(s) for s in stop if s and s in text), default=-1)
    if cut < 0:
        return text, tokens, lps, ids, "length" if len(ids) >= max_tokens else "stop"
    keep, length = 0, 0
    for t in tokens:
        if length + len(t) > cut:
            break
        length += len(t)
        keep += 1
    return text[:cut], tokens[:keep], lps[:keep], ids[:keep], "stop"


def _last_user_message(messages: list) -> str:
    """The text of the last ``user`` message (its content already a string)."""
    for message in reversed(messages):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str) and content.strip():
                return content
            break
    raise RequestError("the confidence head needs a non-empty 'user' message (the question) in 'messages'")


def _choice(index: int, text: str, tokens: list, lps: list, finish: str, want_lp: bool, chat: bool) -> dict:
    if chat:
        logprobs = {"content": [{"token": t, "logprob": lp, "bytes": list(t.encode()), "top_logprobs": []}
                                for t, lp in zip(tokens, lps)]} if want_lp else None
        return {"index": index, "message": {"role": "assistant", "content": text}, "logprobs": logprobs,
                "finish_reason": finish}
    logprobs = None
    if want_lp:
        offsets = [sum(len(t) for t in tokens[:k]) for k in range(len(tokens))]
        logprobs = {"tokens": tokens, "token_logprobs": lps, "top_logprobs": None, "text_offset": offsets}
    return {"index": index, "text": text, "logprobs": logprobs, "finish_reason": finish}
