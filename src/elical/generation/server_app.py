"""The HTTP side of ``elical serve``: a FastAPI app (Starlette, run by uvicorn) over a
:class:`elical.generation.serve.CompletionService`. Install with ``pip install 'elical[serve]'``.

Requests are served concurrently: each one waits on the service's model thread, which batches what is queued
(:mod:`elical.generation.batching`). Limits checked before any model work: the body size (``max_body_bytes``;
413 without reading past the limit), the fields (400 naming the field), the model name (404) and the prompt's
length against the model's context (400). A client that goes away is noticed while its request waits or
decodes (checked every ``poll_s`` seconds): its work is cancelled, nothing is written to its closed connection,
and no traceback is logged. ``fail_first=K`` answers the first K POSTs with 503 (to exercise clients' retries).
"""



import asyncio
import json
import threading
import time
import uuid

__all__ = ["make_app", "start_in_thread", "DEFAULT_MAX_BODY_BYTES"]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024


def _error(status: int, message: str, kind: str = "invalid_request_error", code=None, headers=None):
    from starlette.responses import JSONResponse

    return JSONResponse({"error": {"message": message, "type": kind, "param": None, "code": code or status}},
                        status_code=status, headers=headers)


class _Gone(Exception):
    """The client closed its connection."""


def make_app(service, *, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES, fail_first: int = 0, poll_s: float = 0.1):
    """The ASGI app answering the OpenAI routes with ``service``. Raises ImportError without fastapi."""
    try:
        from fastapi import FastAPI, Request
        from starlette.concurrency import run_in_threadpool
        from starlette.exceptions import HTTPException
        from starlette.responses import JSONResponse, Response, StreamingResponse
    except ImportError as exc:
        raise ImportError("elical serve needs FastAPI and uvicorn: pip install 'elical[serve]'") from exc
    from elical.generation.batching import Cancelled
    from elical.generation.serve import RequestError

    app = FastAPI(title="elical serve", docs_url=None, redoc_url=None, openapi_url=None)
    failures = {"left": fail_first}
    guard = threading.Lock()

    @app.exception_handler(HTTPException)
    async def http_error(request, exc):  # unknown route or method: OpenAI's error shape
        return _error(exc.status_code, f"{exc.detail}: {request.method} {request.url.path}", "not_found"
                      if exc.status_code == 404 else "invalid_request_error")

    @app.get("/health")
    async def health():
        return {"status": "ok"}

    @app.get("/v1/models")
    @app.get("/models")
    async def models():
        return {"object": "list", "data": [{"id": service.name, "object": "model", "owned_by": "elical"}]}

    async def read_body(request: Request) -> bytes:
        length = request.headers.get("content-length")
        if length is not None and (not length.isdigit()):
            raise RequestError(f"bad Content-Length header {length!r}")
        too_large = length is not None and int(length) > max_body_bytes
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if too_large and size <= 16 * max_body_bytes:
                continue  # read and dropped, so that the client, still sending, can read the 413
            if size > max_body_bytes:
                break
            chunks.append(chunk)
        if size > max_body_bytes:
            raise RequestError(f"the body has {int(length) if too_large else 'more than ' + str(max_body_bytes)} "
                               f"bytes; this server takes at most {max_body_bytes} (--max-body-bytes)", 413)
        return b"".join(chunks)

    async def wait(request: Request, job):
        """The job's result; cancels the job and raises _Gone when the client leaves first."""
        future = asyncio.wrap_future(job.future)
        try:
            while True:
                done, _ = await asyncio.wait({future}, timeout=poll_s)
                if done:
                    return future.result()
                if await request.is_disconnected():
                    raise _Gone()
        except (_Gone, asyncio.CancelledError):
            job.cancel()
            raise

    async def handle(request: Request, chat: bool):
        with guard:
            fail = failures["left"] > 0
            failures["left"] -= fail
        try:
            raw = await read_body(request)
            if fail:
                return _error(503, "injected failure (--fail-first)", "server_error", headers={"Retry-After": "0"})
            plan = await run_in_threadpool(service.plan, raw, chat)
            scores = None
            if service.confidence is not None:
                scores = await wait(request, service.worker.score(plan.questions))
            gates = service.gates(plan, scores)
            todo = service.answered(plan, gates)
            if plan.stream:
                return StreamingResponse(_events(service, plan, gates, todo, request, wait),
                                         media_type="text/event-stream")
            rows = await wait(request, service.generate(plan, todo)) if todo else []
            return JSONResponse(service.reply(plan, gates, dict(zip(todo, rows))))
        except RequestError as exc:
            headers = {"Connection": "close"} if exc.status == 413 else None
            return _error(exc.status, str(exc), exc.kind, exc.code, headers)
        except (_Gone, Cancelled):
            return Response(status_code=499)  # nobody reads it: the connection is closed

    @app.post("/v1/completions")
    @app.post("/completions")
    async def completions(request: Request):
        return await handle(request, chat=False)

    @app.post("/v1/chat/completions")
    @app.post("/chat/completions")
    async def chat_completions(request: Request):
        return await handle(request, chat=True)

    return app


async def _events(service, plan, gates, todo, request, wait):
    """Server-sent events of a ``stream: true`` request: the first chunk (role, and the confidence when the
    server has a head) goes out before any token is generated; then each choice's text; then ``[DONE]``."""
    from elical.generation.batching import Cancelled

    rid = f"{'chatcmpl' if plan.chat else 'cmpl'}-{uuid.uuid4().hex}"
    head = {"id": rid, "object": "chat.completion.chunk" if plan.chat else "text_completion",
            "created": int(time.time()), "model": service.name}
    n = plan.params.n
    first = []
    for i in range(len(plan.prompts) * n):
        c = {"index": i, "finish_reason": None, "logprobs": None}
        c.update({"delta": {"role": "assistant", "content": ""}} if plan.chat else {"text": ""})
        if gates is not None:
            c["elical"] = dict(gates[i // n])
        first.append(c)
    yield f"data: {json.dumps({**head, 'choices': first})}\n\n"
    try:
        rows = await wait(request, service.generate(plan, todo)) if todo else []
    except (_Gone, Cancelled):
        return
    reply = service.reply(plan, gates, dict(zip(todo, rows)))
    for c in reply["choices"]:
        text = c["message"]["content"] if plan.chat else c["text"]
        body = {"index": c["index"], "logprobs": c["logprobs"], "finish_reason": None}
        body.update({"delta": {"content": text}} if plan.chat else {"text": text})
        yield f"data: {json.dumps({**head, 'choices': [body]})}\n\n"
    last = [{"index": c["index"], "finish_reason": c["finish_reason"], "logprobs": None,
             **({"delta": {}} if plan.chat else {"text": ""})} for c in reply["choices"]]
    yield f"data: {json.dumps({**head, 'choices': last, 'usage': reply['usage']})}\n\n"
    yield "data: [DONE]\n\n"


def start_in_thread(app, host: str = "127.0.0.1", port: int = 0):
    """Run ``app`` with uvicorn in a daemon thread (tests, notebooks). Returns (server, base URL ending in /v1);
    stop it with ``server.should_exit = True``."""
    import socket

    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    deadline = time.time() + 30
    while not server.started and time.time() < deadline:
        time.sleep(0.02)
    return server, f"http://{host}:{sock.getsockname()[1]}/v1"
