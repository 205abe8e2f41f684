"""``elical serve``: an OpenAI-compatible server over a local model, optionally with a confidence head.

    elical serve --port 8000                                                   # prints "listening on http://..."
    elical serve --confidence-head runs/demo/heads/eli_only --abstain-below 0.5

The service is :class:`elical.generation.serve.CompletionService` (validation, confidence gate, replies) behind
the FastAPI app of :mod:`elical.generation.server_app`, run by uvicorn; the head is loaded here, in the jobs layer,
and handed to the service. See ``docs/serving.md``.
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["register", "main"]


def _add_arguments(ap: argparse.ArgumentParser) -> None:
    from elical.generation.serve import ABSTENTION_TEXT
    from elical.generation.server_app import DEFAULT_MAX_BODY_BYTES

    ap.add_argument("--model", help="default name, local directory or HF id (default: the confidence head's base "
                    "model, else smollm2-135m-instruct)")
    ap.add_argument("--served-model-name", default=None, help="the name clients send (default: --model); "
                    "requests naming another model get 404")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8000, help="0 picks a free port")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--dtype", default="auto")
    ap.add_argument("--no-logprobs", action="store_true", help="never return log-probs")
    ap.add_argument("--fail-first", type=int, default=0, metavar="K", help="answer the first K POSTs with 503")
    ap.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES, metavar="B",
                    help=f"larger request bodies get 413 (default {DEFAULT_MAX_BODY_BYTES})")
    ap.add_argument("--max-batch", type=int, default=32, metavar="P",
                    help="prompts of concurrent requests decoded together in one batch (default 32)")
    ap.add_argument("--confidence-head", metavar="HEAD_DIR", help="a trained head (RUN/heads/<name>/ or an "
                    "export-head directory): each choice gets its confidence before answering (field 'elical')")
    ap.add_argument("--abstain-below", type=float, metavar="T", help="with --confidence-head: below this confidence "
                    "answer with --abstention-text instead of generating (a probability in [0, 1])")
    ap.add_argument("--abstention-text", default=ABSTENTION_TEXT, help="the fixed text of an abstention")


def _serve(args) -> int:
    import socket

    from elical.generation.models import DEFAULT_MODEL, load_model
    from elical.generation.serve import CompletionService
    from elical.records import InputError

    if args.abstain_below is not None and (args.confidence_head is None or not 0.0 <= args.abstain_below <= 1.0):
        raise InputError("--abstain-below", None, "--abstain-below", "needs --confidence-head and a value in [0, 1]")
    if args.max_body_bytes < 1 or args.max_batch < 1:
        raise InputError("--max-body-bytes", None, "--max-body-bytes/--max-batch", "must be positive")
    try:
        import uvicorn

        from elical.generation.server_app import make_app
    except ImportError:
        raise InputError("elical serve", None, "serve", "needs FastAPI and uvicorn: pip install 'elical[serve]'") \
            from None
    confidence, name = None, args.served_model_name or args.model or DEFAULT_MODEL
    if args.confidence_head is not None:
        from elical.heads.confidence import ConfidenceModel

        # Without --model the head's recorded base model is served (the one its confidences are about).
        given = load_model(args.model, device=args.device, dtype=args.dtype) if args.model else None
        confidence = ConfidenceModel.load(args.confidence_head, model=given, device=args.device)
        model, tok = confidence.model, confidence.tokenizer
        name = args.served_model_name or args.model or confidence.base_model or DEFAULT_MODEL
    else:
        model, tok = load_model(args.model or DEFAULT_MODEL, device=args.device, dtype=args.dtype)
    service = CompletionService(model, tok, name, logprobs=not args.no_logprobs, confidence=confidence,
                                abstain_below=args.abstain_below, abstention_text=args.abstention_text,
                                max_prompts=args.max_batch)
    app = make_app(service, max_body_bytes=args.max_body_bytes, fail_first=args.fail_first)
    sock = socket.socket(socket.AF_INET6 if ":" in args.host else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
    except OSError as exc:
        raise InputError("--port", None, "--port", f"cannot listen on {args.host}:{args.port}: {exc}") from None
    sock.listen(2048)  # connections made as soon as the line below is printed wait in the backlog
    host, port = sock.getsockname()[:2]
    print(f"listening on http://{host}:{port}/v1", flush=True)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", backlog=2048,
                                           timeout_graceful_shutdown=5))
    try:
        server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        service.worker.close()
    return 0


def register(sub) -> None:
    """Add ``elical serve`` to the ``elical`` parser."""
    p = sub.add_parser("serve", help="serve a model over an OpenAI-compatible HTTP API (FastAPI + uvicorn), "
                                     "optionally with its confidence before answering")
    _add_arguments(p)
    p.set_defaults(handler=_serve)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m elical.jobs.serve", description=__doc__.split("\n\n")[0])
    _add_arguments(ap)
    return _serve(ap.parse_args(argv))


if __name__ == "__main__":
    raise SystemExit(main())
