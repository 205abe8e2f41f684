"""Request bodies of ``elical serve`` as pydantic models: the OpenAI fields it honours, with their types and ranges.

A body that is not JSON, not an object, or has a field of the wrong type or range is refused with HTTP 400 and a
message naming the field (``'messages.0': Input should be a valid dictionary, got 'hi'``). Unknown fields are
ignored, as OpenAI-compatible servers do.
"""

from __future__ import annotations

from typing import Annotated, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictFloat, StrictInt, StrictStr, ValidationError

__all__ = ["CompletionRequest", "ChatRequest", "RequestError", "parse_request"]


class RequestError(ValueError):
    """A request the server rejects: ``status`` 400 (malformed), 404 (unknown model), 413 (too large)."""

    def __init__(self, message: str, status: int = 400, kind: str = "invalid_request_error", code=None):
        super().__init__(message)
        self.status, self.kind, self.code = status, kind, code


_Number = Union[StrictInt, StrictFloat]


class _Base(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ElicalOptions(_Base):
    """``"elical": {"abstain_below": T}``: this request's threshold (a probability; null = always answer)."""

    abstain_below: Optional[Annotated[_Number, Field(ge=0.0, le=1.0)]] = None


class _Request(_Base):
    model: Optional[StrictStr] = None
    n: Annotated[StrictInt, Field(ge=1, le=128)] = 1
    max_tokens: Optional[Annotated[StrictInt, Field(ge=1, le=1024)]] = None
    temperature: Optional[Annotated[_Number, Field(ge=0.0, le=100.0)]] = None
    top_p: Optional[Annotated[_Number, Field(gt=0.0, le=1.0)]] = None
    top_k: Optional[Annotated[StrictInt, Field(ge=-1)]] = None
    seed: Annotated[StrictInt, Field(ge=0, le=2 ** 63 - 1)] = 0
    stop: Optional[Union[StrictStr, Annotated[list[StrictStr], Field(max_length=16)]]] = None
    stream: StrictBool = False
    elical: Optional[ElicalOptions] = None


class CompletionRequest(_Request):
    prompt: Union[Annotated[StrictStr, Field(min_length=1)],
                  Annotated[list[Annotated[StrictStr, Field(min_length=1)]], Field(min_length=1, max_length=64)]]
    logprobs: Optional[Union[StrictBool, Annotated[StrictInt, Field(ge=0, le=5)]]] = None


class ContentPart(_Base):
    type: StrictStr
    text: Optional[StrictStr] = None


class Message(_Base):
    role: StrictStr
    content: Optional[Union[StrictStr, list[ContentPart]]] = None

    def as_template_dict(self) -> dict:
        """``{"role", "content"}`` with list-of-parts content joined to its text parts (one per line)."""
        content = self.content
        if isinstance(content, list):
            content = "\n".join(p.text or "" for p in content if p.type == "text")
        return {"role": self.role, "content": content or ""}


class ChatRequest(_Request):
    messages: Annotated[list[Message], Field(min_length=1)]
    logprobs: Optional[StrictBool] = None
    # chat's newer name for max_tokens (OpenAI); max_tokens wins when both are given
    max_completion_tokens: Optional[Annotated[StrictInt, Field(ge=1, le=1024)]] = None


def parse_request(raw: bytes, chat: bool):
    """The validated request from JSON bytes. Raises :class:`RequestError` (400)."""
    kind = ChatRequest if chat else CompletionRequest
    try:
        req = kind.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        raise RequestError(_message(exc)) from None
    if chat and req.max_tokens is None:
        req.max_tokens = req.max_completion_tokens
    return req


def _message(exc: ValidationError) -> str:
    errors = exc.errors(include_url=False)
    if errors and errors[0]["type"] == "json_invalid":
        return f"the body is not valid JSON: {errors[0]['msg']}"
    if errors and errors[0]["type"] == "model_type" and not errors[0]["loc"]:
        return "the body must be a JSON object"
    seen, parts = set(), []
    for e in errors:
        loc = ".".join(str(x) for x in e["loc"] if not _is_branch(x))
        if loc in seen:  # one message per field (a union gives one error per branch)
            continue
        seen.add(loc)
        got = repr(e.get("input"))
        msg = "Input should be a number" if e["type"] in ("int_type", "float_type") and any(
            x in ("int", "float") for x in e["loc"]) else e["msg"]
        parts.append(f"'{loc or 'body'}': {msg}" + (f", got {got[:60]}" if e["type"] != "missing" else ""))
    return "; ".join(parts[:4])


def _is_branch(x) -> bool:
    """Pydantic names union branches in an error's location (``str``, ``list[str]``, ``function-after[...]``)."""
    return isinstance(x, str) and (x in ("str", "int", "float", "bool") or "[" in x or x.startswith("constrained"))
