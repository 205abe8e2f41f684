"""The one client of OpenAI-compatible servers (vLLM, llama.cpp, TGI, OpenAI, ``elical serve``), on the ``openai``
package: the generation backend (:class:`elical.generation.backends.OpenAIGenerator`) and the LLM judge
(:class:`elical.judges.llm.OpenAICompletion`) both go through it, so timeouts, retries and concurrency are set in
one place.

- **timeout** (seconds, per request): the ``openai`` client's timeout.
- **retries**: connection errors, timeouts, HTTP 408/409/429 and 5xx are retried ``max_retries`` times by the
  ``openai`` client with exponential back-off and jitter (0.5 s doubling up to 8 s, or the server's
  ``Retry-After``); any other 4xx is not retried.
- **concurrency**: :meth:`OpenAIClient.map` keeps at most ``concurrency`` requests in flight.

Every failure is raised as :class:`EndpointError` naming the URL. Install with ``pip install 'elical[openai]'``.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Callable, Iterable, TypeVar

__all__ = ["EndpointError", "OpenAIClient", "CLIENT_ARGUMENTS", "client_options", "require_openai", "DEFAULT_TIMEOUT",
           "DEFAULT_MAX_RETRIES", "DEFAULT_CONCURRENCY"]

DEFAULT_TIMEOUT, DEFAULT_MAX_RETRIES, DEFAULT_CONCURRENCY = 300.0, 4, 16

T = TypeVar("T")


class EndpointError(RuntimeError):
    """An OpenAI-compatible server that is down, keeps failing, rejects a request or answers something unusable;
    the message names the URL."""


class OpenAIClient:
    """A thread-safe client of one OpenAI-compatible server.

    ``base_url``: e.g. ``http://127.0.0.1:8000/v1``; ``api_key``: sent as a Bearer token (None: a placeholder,
    local servers ignore it); ``timeout``: seconds per request (> 0); ``max_retries``: retries of a failed
    request (>= 0); ``concurrency``: requests in flight in :meth:`map` (>= 1). Raises ValueError for bad values,
    ImportError (with the install command) without the ``openai`` package.
    """

    def __init__(self, base_url: str, api_key: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
                 max_retries: int = DEFAULT_MAX_RETRIES, concurrency: int = DEFAULT_CONCURRENCY):
        if not timeout or timeout <= 0:
            raise ValueError(f"timeout must be a positive number of seconds, got {timeout!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ValueError(f"concurrency must be an integer >= 1, got {concurrency!r}")
        from elical.extras import require

        # MissingExtraError (an ImportError; exit code 2 from the command line) naming the extra
        openai = require("openai", "openai", "talking to an OpenAI-compatible server")
        self.base_url = base_url.rstrip("/")
        self.timeout, self.max_retries, self.concurrency = float(timeout), max_retries, concurrency
        self._openai = openai
        self.client = openai.OpenAI(base_url=self.base_url, api_key=api_key or "unused", timeout=self.timeout,
                                    max_retries=max_retries)

    def create(self, endpoint: str, body: dict) -> dict:
        """POST ``body`` to ``/completions`` (``endpoint="completions"``) or ``/chat/completions`` (``"chat"``);
        fields the ``openai`` client does not know (``top_k``, ``elical``) go as extra body fields. Returns the
        reply as a dict, unknown fields included. Raises :class:`EndpointError` once the retries are spent, at
        once for a 4xx other than 408/409/429."""
        url = f"{self.base_url}/{'chat/completions' if endpoint == 'chat' else 'completions'}"
        api = self.client.chat.completions if endpoint == "chat" else self.client.completions
        known = _CHAT_FIELDS if endpoint == "chat" else _COMPLETION_FIELDS
        kwargs = {k: v for k, v in body.items() if k in known}
        extra = {k: v for k, v in body.items() if k not in known}
        o = self._openai
        try:
            reply = api.create(**kwargs, extra_body=extra or None)
        except o.APITimeoutError:
            raise EndpointError(f"{url}: no reply within {self.timeout:g} s (gave up after {self.max_retries + 1} "
                                f"attempts; raise --request-timeout or lower --concurrency)") from None
        except o.APIConnectionError as exc:
            raise EndpointError(f"{url}: cannot connect ({exc}); is the server running? (gave up after "
                                f"{self.max_retries + 1} attempts)") from None
        except o.APIStatusError as exc:
            retried = exc.status_code in (408, 409, 429) or exc.status_code >= 500
            tail = f" (gave up after {self.max_retries + 1} attempts)" if retried else ""
            raise EndpointError(f"{url} rejected the request: HTTP {exc.status_code}: "
                                f"{_text(exc.response)[:300]}{tail}") from None
        except o.APIError as exc:  # e.g. a body that is not JSON
            raise EndpointError(f"{url}: unusable reply ({type(exc).__name__}: {exc})") from None
        if isinstance(reply, str):  # a server that answered with something other than a JSON object
            raise EndpointError(f"{url} answered with non-JSON: {reply[:200]!r}")
        return reply.model_dump()

    def map(self, fn: Callable[[T], object], items: Iterable[T]) -> list:
        """``[fn(x) for x in items]`` with at most ``concurrency`` calls running at once, results in order; the
        first exception is raised once the calls in flight end."""
        items = list(items)
        if len(items) <= 1 or self.concurrency == 1:
            return [fn(x) for x in items]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(items))) as pool:
            return list(pool.map(fn, items))


def _text(response) -> str:
    try:
        return response.text
    except Exception:  # a streamed or closed response
        return ""


_COMMON = {"model", "max_tokens", "temperature", "top_p", "n", "seed", "stop", "logprobs", "stream", "user",
           "presence_penalty", "frequency_penalty", "logit_bias"}
_COMPLETION_FIELDS = _COMMON | {"prompt", "echo", "best_of", "suffix"}
_CHAT_FIELDS = _COMMON | {"messages", "top_logprobs", "response_format", "tools", "tool_choice"}


#: The command-line options of the client (``elical run``, ``build``, ``judge``): flag -> argparse keywords.
CLIENT_ARGUMENTS = (
    ("--request-timeout", dict(type=float, metavar="S", help="openai backend and llm judge server: seconds per "
                               f"request before it is retried (default {DEFAULT_TIMEOUT:g})")),
    ("--max-retries", dict(type=int, metavar="R", help="openai backend and llm judge server: retries of a failed "
                           f"request, with exponential back-off (default {DEFAULT_MAX_RETRIES})")),
    ("--concurrency", dict(type=int, metavar="C", help="openai backend and llm judge server: requests in flight "
                           f"(default {DEFAULT_CONCURRENCY})")),
)


def client_options(timeout=None, max_retries=None, concurrency=None) -> dict:
    """``{"timeout", "max_retries", "concurrency"}`` for :class:`OpenAIClient` from the command line's values
    (None: the default). Raises :class:`elical.records.InputError` (exit 2) naming the option for a bad value."""
    from elical.records import InputError

    if timeout is not None and not timeout > 0:
        raise InputError("--request-timeout", None, "--request-timeout", f"expected seconds > 0, got {timeout!r}")
    if max_retries is not None and max_retries < 0:
        raise InputError("--max-retries", None, "--max-retries", f"expected an integer >= 0, got {max_retries!r}")
    if concurrency is not None and concurrency < 1:
        raise InputError("--concurrency", None, "--concurrency", f"expected an integer >= 1, got {concurrency!r}")
    return {"timeout": DEFAULT_TIMEOUT if timeout is None else timeout,
            "max_retries": DEFAULT_MAX_RETRIES if max_retries is None else max_retries,
            "concurrency": DEFAULT_CONCURRENCY if concurrency is None else concurrency}


def require_openai(option: str) -> None:
    """Raise :class:`elical.records.InputError` (exit 2) naming ``option`` when the ``openai`` package is missing
    (the message of :func:`elical.extras.require`)."""
    from elical.extras import MissingExtraError, require
    from elical.records import InputError

    try:
        require("openai", "openai", "talking to an OpenAI-compatible server")
    except MissingExtraError as exc:
        raise InputError(option, None, option, str(exc)) from None
