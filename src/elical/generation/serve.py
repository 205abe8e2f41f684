"""A small OpenAI-compatible HTTP server over the transformers backend (standard library ``http.server``).

    python -m elical.generation.serve --model smollm2-135m-instruct --port 8000      # prints "listening on http://..."

Endpoints: ``POST /v1/completions`` (``prompt`` a string or a list of strings), ``POST /v1/chat/completions``
(the tokenizer's chat template is applied to ``messages``), ``GET /v1/models``, ``GET /health``. Request fields:
``max_tokens`` (default 16), ``temperature`` (0 = greedy; default 1), ``top_p``, ``top_k`` (default 50),
``n``, ``seed`` (default 0: the same request gives the same answers), ``logprobs`` (completions: an int, chat: a
bool) and ``stop``. Answers come from :class:`elical.generation.prefix_sharing.TransformersGenerator` (prompt i of
a request is sampled with the key ``str(i)``), so they always end at the end of their first line or at EOS (other
``stop`` strings cut the text afterwards); log-probs are those of the raw model distribution, ``top_logprobs`` are
not given. Requests are served one at a time (the model is not shared between threads); for throughput use
vLLM's server. It exists so elical's endpoint backend (:class:`elical.generation.backends.OpenAIGenerator`) can be
tested against a real server offline, and to serve a local model to clients that speak the OpenAI API.
``--no-logprobs`` answers without log-probs (like servers that do not give them); ``--fail-first K`` answers the
first K POST requests with HTTP 503 (to exercise clients' retries).

Confidence before answering (EliCal, Ni et al., arXiv 2510.17509): with ``--confidence-head HEAD_DIR`` (a head
directory of ``elical run``, ``RUN/heads/<name>/``, or of ``elical export-head``) every choice carries
``"elical": {"confidence": c, "method": name, "abstained": bool, "threshold": T or null}``, computed from the
question (chat: the last user message; completions: the prompt) with one forward pass before any token is
generated. With ``--abstain-below T`` a question with ``c < T`` is not answered: its choices hold the fixed
``--abstention-text`` with ``finish_reason`` ``"stop"`` (a value every OpenAI client accepts) and no token is
generated. A request may set its own threshold with ``"elical": {"abstain_below": T or null}``. Without a head the
server behaves as before (no ``elical`` field). See ``docs/serving.md``.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from elical.generation.base import DecodingConfig

__all__ = ["ABSTENTION_TEXT", "CompletionService", "make_server", "register", "main"]

MAX_TOKENS, MAX_N = 1024, 128
ABSTENTION_TEXT = "I am not confident that I can answer this correctly, so I will not guess."


class RequestError(ValueError):
    """A request the server rejects with HTTP 400."""


def _rows_generator(model, tokenizer, decoding):
    """A :class:`elical.generation.prefix_sharing.TransformersGenerator` that also keeps every decoded row's (raw text,
    token strings, log-probs, token ids) in ``rows``, in row order: the samples' per-token log-probs too."""
    from elical.generation.prefix_sharing import TransformersGenerator

    class RowsGenerator(TransformersGenerator):
        def generate(self, *args, **kwargs):
            self.rows = []
            return super().generate(*args, **kwargs)

        def _finish(self, ids, lps):
            out = super()._finish(ids, lps)
            raw = self.tokenizer.decode(ids, skip_special_tokens=True).split("\n")[0]  # unstripped, as sent
            self.rows.append((raw, [self.tokenizer.decode([t]) for t in ids], list(lps), list(ids)))
            return out

    return RowsGenerator(model, tokenizer, decoding)


class CompletionService:
    """Turns OpenAI request bodies into answers from a transformers model (``model``/``tokenizer`` as returned by
    :func:`elical.generation.models.load_model`). ``logprobs``: False never returns log-probs. Thread-safe (one lock).

    ``confidence``: optional :class:`elical.heads.confidence.ConfidenceModel` on the same model (anything with
    ``predict(questions) -> ndarray (n,)`` in [0, 1] and ``method``): each choice then gets an ``elical`` field and,
    below ``abstain_below`` (a probability in [0, 1], None = never), the ``abstention_text`` instead of an answer.
    Raises ValueError for ``abstain_below`` outside [0, 1] or without ``confidence``."""

    def __init__(self, model, tokenizer, name: str, logprobs: bool = True, *, confidence=None,
                 abstain_below: float | None = None, abstention_text: str = ABSTENTION_TEXT):
        if abstain_below is not None and (confidence is None or not 0.0 <= abstain_below <= 1.0):
            raise ValueError(f"abstain_below must be in [0, 1] and needs a confidence head, got {abstain_below!r}")
        self.model, self.tokenizer, self.name, self.logprobs = model, tokenizer, name, logprobs
        self.confidence, self.abstain_below, self.abstention_text = confidence, abstain_below, abstention_text
        self._lock = threading.Lock()

    def complete(self, body: dict, chat: bool = False) -> dict:
        """The reply to a ``/v1/completions`` (or, with ``chat``, ``/v1/chat/completions``) body. Raises
        RequestError for a malformed body."""
        if chat:
            messages = body.get("messages")
            if not isinstance(messages, list) or not messages:
                raise RequestError("'messages' must be a non-empty list")
            # Content as a list of parts (OpenAI's newer format): its text parts, for templates that want a string.
            messages = [{**m, "content": _text(m.get("content"))} if isinstance(m, dict) else m for m in messages]
            prompts = [self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)]
            questions = [_last_user_message(messages)] if self.confidence is not None else None
        else:
            prompts = body.get("prompt")
            prompts = [prompts] if isinstance(prompts, str) else prompts
            if not isinstance(prompts, list) or not prompts or not all(isinstance(p, str) for p in prompts):
                raise RequestError("'prompt' must be a string or a non-empty list of strings")
            questions = prompts
        n = _number(body, "n", 1, int, 1, MAX_N)
        max_tokens = _number(body, "max_tokens", 16, int, 1, MAX_TOKENS)
        temperature = _number(body, "temperature", 1.0, float, 0.0, 100.0)
        top_p = _number(body, "top_p", 1.0, float, 1e-6, 1.0)
        top_k = _number(body, "top_k", 50, int, -1, 10 ** 9)
        seed = _number(body, "seed", 0, int, 0, 2 ** 63 - 1)
        stop = body.get("stop") or []
        stop = [stop] if isinstance(stop, str) else list(stop)
        want_lp = body.get("logprobs") not in (None, False) and self.logprobs

        gates = self._gates(questions, body) if self.confidence is not None else None
        answer = [i for i in range(len(prompts)) if gates is None or not gates[i]["abstained"]]

        greedy = temperature == 0.0
        per = 1 if greedy else n + 1
        if answer:  # all abstained: no token is generated
            decoding = DecodingConfig(n_samples=0 if greedy else n, temperature=temperature or 1.0, top_p=top_p,
                                      top_k=top_k if top_k > 0 else 0, max_new_tokens=max_tokens,
                                      batch_size=len(answer))
            with self._lock:
                gen = _rows_generator(self.model, self.tokenizer, decoding)
                # Prompt i keeps its sampling key str(i) whether or not other prompts of the request abstained.
                gen.generate([prompts[i] for i in answer], [str(i) for i in answer], seed=seed)
        position = {i: k for k, i in enumerate(answer)}
        choices, used = [], 0
        for i in range(len(prompts)):
            k = position.get(i)
            if k is None:
                rows = [(self.abstention_text, [], [], [])] * n
            else:
                rows = [gen.rows[k * per]] * n if greedy else gen.rows[k * per + 1:(k + 1) * per]
            for text, tokens, lps, ids in rows:
                if k is not None:
                    for s in stop:
                        text = text.split(s)[0] if s else text
                used += len(ids)
                finish = "length" if len(ids) >= max_tokens else "stop"
                choices.append(_choice(len(choices), text, tokens, lps, finish, want_lp, chat))
                if gates is not None:
                    choices[-1]["elical"] = dict(gates[i])
        prompt_tokens = sum(len(self.tokenizer(p, add_special_tokens=False)["input_ids"]) for p in prompts)
        return {"id": f"{'chatcmpl' if chat else 'cmpl'}-{uuid.uuid4().hex}",
                "object": "chat.completion" if chat else "text_completion", "created": int(time.time()),
                "model": self.name, "choices": choices,
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": used,
                          "total_tokens": prompt_tokens + used}}

    def _gates(self, questions: list, body: dict) -> list[dict]:
        """Per question ``{"confidence", "method", "abstained", "threshold"}`` from one forward pass (no generation)."""
        threshold = self.abstain_below
        override = body.get("elical")
        if isinstance(override, dict) and "abstain_below" in override:
            threshold = override["abstain_below"]
            if threshold is not None and (isinstance(threshold, bool) or not isinstance(threshold, (int, float))
                                          or not 0.0 <= threshold <= 1.0):
                raise RequestError(f"'elical.abstain_below' must be a number in [0, 1] or null, got {threshold!r}")
        elif override is not None and not isinstance(override, dict):
            raise RequestError("'elical' must be an object, e.g. {\"abstain_below\": 0.5}")
        try:
            with self._lock:
                confidence = self.confidence.predict(questions)
        except ValueError as exc:
            raise RequestError(f"cannot score the question: {exc}") from None
        return [{"confidence": float(c), "method": self.confidence.method,
                 "abstained": threshold is not None and float(c) < threshold, "threshold": threshold}
                for c in confidence]


def _text(content):
    """A message's content as a string: a list of parts gives its text parts, one per line."""
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content


def _last_user_message(messages: list) -> str:
    """The text of the last ``user`` message (its content already a string, see :func:`_text`)."""
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, str) and content.strip():
                return content
            break
    raise RequestError("the confidence head needs a non-empty 'user' message (the question) in 'messages'")


def _number(body: dict, key: str, default, kind, lo, hi):
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and value != int(value)):
        raise RequestError(f"'{key}' must be {'an integer' if kind is int else 'a number'}, got {value!r}")
    if not lo <= value <= hi:
        raise RequestError(f"'{key}' must be in [{lo}, {hi}], got {value!r}")
    return kind(value)


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


def make_server(service: CompletionService, host: str = "127.0.0.1", port: int = 8000,
                fail_first: int = 0) -> ThreadingHTTPServer:
    """An HTTP server (not started: call ``serve_forever``) answering the OpenAI routes with ``service``;
    ``port=0`` picks a free port (read it from ``server.server_address``)."""
    failures = {"left": fail_first}
    guard = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):  # quiet: one line per request would flood test output
            pass

        def _send(self, status: int, obj: dict, headers: dict | None = None):
            data = json.dumps(obj).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def _error(self, status: int, message: str, kind: str, headers: dict | None = None):
            self._send(status, {"error": {"message": message, "type": kind, "param": None, "code": status}}, headers)

        def do_GET(self):
            if self.path.rstrip("/") in ("/v1/models", "/models"):
                self._send(200, {"object": "list", "data": [{"id": service.name, "object": "model",
                                                             "owned_by": "elical"}]})
            elif self.path.rstrip("/") == "/health":
                self._send(200, {"status": "ok"})
            else:
                self._error(404, f"no route {self.path}", "not_found")

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            with guard:
                fail = failures["left"] > 0
                failures["left"] -= fail
            if fail:
                return self._error(503, "injected failure (--fail-first)", "server_error", {"Retry-After": "0"})
            path = self.path.rstrip("/")
            if path not in ("/v1/completions", "/v1/chat/completions"):
                return self._error(404, f"no route {self.path}", "not_found")
            try:
                body = json.loads(raw or b"{}")
                if not isinstance(body, dict):
                    raise RequestError("the body must be a JSON object")
                self._send(200, service.complete(body, chat=path.endswith("chat/completions")))
            except (json.JSONDecodeError, RequestError) as exc:
                self._error(400, str(exc), "invalid_request_error")

    return ThreadingHTTPServer((host, port), Handler)


def _add_arguments(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--model", help="default name, local directory or HF id (default: the confidence head's base "
                    "model, else smollm2-135m-instruct)")
    ap.add_argument("--served-model-name", default=None, help="the name clients send (default: --model)")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--no-logprobs", action="store_true", help="never return log-probs")
    ap.add_argument("--fail-first", type=int, default=0, metavar="K", help="answer the first K POSTs with 503")
    ap.add_argument("--confidence-head", metavar="HEAD_DIR", help="a trained head (RUN/heads/<name>/ or an "
                    "export-head directory): each choice gets its confidence before answering (field 'elical')")
    ap.add_argument("--abstain-below", type=float, metavar="T", help="with --confidence-head: below this confidence "
                    "answer with --abstention-text instead of generating (a probability in [0, 1])")
    ap.add_argument("--abstention-text", default=ABSTENTION_TEXT, help="the fixed text of an abstention")


def _serve(args) -> int:
    from elical.generation.models import DEFAULT_MODEL, load_model

    if args.abstain_below is not None and (args.confidence_head is None or not 0.0 <= args.abstain_below <= 1.0):
        print("elical serve: error: --abstain-below needs --confidence-head and a value in [0, 1]", file=sys.stderr)
        return 2
    confidence, name = None, args.served_model_name or args.model or DEFAULT_MODEL
    if args.confidence_head is not None:
        # The command line sits above the stages: loading a head here is the jobs layer's work, not generation's.
        from elical.heads.confidence import ConfidenceModel

        # Without --model the head's recorded base model is served (the one its confidences are about).
        given = load_model(args.model, device=args.device, dtype=args.dtype) if args.model else None
        confidence = ConfidenceModel.load(args.confidence_head, model=given, device=args.device)
        model, tok = confidence.model, confidence.tokenizer
        name = args.served_model_name or args.model or confidence.base_model or DEFAULT_MODEL
    else:
        model, tok = load_model(args.model or DEFAULT_MODEL, device=args.device, dtype=args.dtype)
    service = CompletionService(model, tok, name, logprobs=not args.no_logprobs, confidence=confidence,
                                abstain_below=args.abstain_below, abstention_text=args.abstention_text)
    server = make_server(service, args.host, args.port, fail_first=args.fail_first)
    host, port = server.server_address[:2]
    print(f"listening on http://{host}:{port}/v1", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
    return 0


def register(sub) -> None:
    """Add ``elical serve`` (this module's server) to the ``elical`` parser."""
    p = sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API (/v1/completions)")
    _add_arguments(p)
    p.set_defaults(handler=_serve)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m elical.generation.serve", description=__doc__.split("\n\n")[0])
    _add_arguments(ap)
    return _serve(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
