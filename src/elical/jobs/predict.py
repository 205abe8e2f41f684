"""``elical predict``: confidence before answering for new questions, from a trained head.

Reads a JSONL file of questions (lines ``{"question": str}``, optionally ``"id"``: a string or an integer) and writes
one line per question ``{"id", "question", "method", "confidence"}`` (``id``: the given one, else the 1-based line
number), in input order. One forward pass per batch, no generation (:class:`elical.heads.confidence.ConfidenceModel`).
The whole input is checked before the model is loaded; a bad line stops the command with an error naming the
file, the line and the field (exit code 2). An existing output file is never overwritten (exit code 2).

HEAD_DIR is a head directory of ``elical run`` or of ``elical export-head``; instead of it, ``--reference-head FILE``
(``vector_head_*.pt``) with ``--reference-lora DIR`` (its peft adapter; omit it for a head on the frozen model) and
``--model`` reads a checkpoint of the paper's own code, e.g. the released Honest-Qwen2.5 models (docs/models.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from elical.fileio import write_text_atomic

__all__ = ["register", "read_questions", "predict_file"]


def register(subparsers) -> None:
    """Add the ``predict`` subcommand to the ``elical`` parser."""
    import argparse

    p = subparsers.add_parser(
        "predict", help="confidence before answering for new questions, from a trained head (no generation)",
        description=__doc__.split("\n\n")[1], formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("head_dir", metavar="HEAD_DIR", nargs="?",
                   help="a trained head, e.g. runs/<run>/heads/elical_k64 (or give --reference-head)")
    p.add_argument("--input", required=True, help='JSONL of questions: {"question": ..., "id": ...} per line')
    p.add_argument("--output", required=True, help="JSONL to write (must not exist)")
    p.add_argument("--model", help="base model (default: the one recorded with the head)")
    p.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ... or auto (accelerate, several GPUs)")
    p.add_argument("--batch-size", type=int, default=16, help="questions per forward pass")
    p.add_argument("--reference-head", metavar="FILE", help="a reference-format head, vector_head_*.pt (read with "
                   "torch.load(weights_only=True)), instead of HEAD_DIR")
    p.add_argument("--reference-lora", metavar="DIR", help="with --reference-head: its peft adapter directory")
    p.set_defaults(handler=_handle)


def read_questions(path) -> list[dict]:
    """Validated questions of a JSONL file: list of ``{"id": str | int, "question": str, "line": int}``.

    Raises InputError naming the file, the line and the field for a missing file, malformed JSON, a line that is
    not an object, a missing/empty/non-string ``question``, an ``id`` that is neither string nor integer, a
    repeated ``id``, or a file without questions."""
    from elical.records import InputError, iter_json_lines

    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, None, "input file not found")
    out, seen = [], {}
    for lineno, obj in iter_json_lines(path):
        question = obj.get("question")
        if not isinstance(question, str) or not question.strip():
            raise InputError(path, lineno, "question", "missing or not a non-empty string")
        qid = obj.get("id", lineno)
        if isinstance(qid, bool) or not isinstance(qid, (str, int)):
            raise InputError(path, lineno, "id", f"expected a string or an integer, got {qid!r}")
        if qid in seen:
            raise InputError(path, lineno, "id", f"{qid!r} already used on line {seen[qid]}")
        seen[qid] = lineno
        out.append({"id": qid, "question": question, "line": lineno})
    if not out:
        raise InputError(path, None, "question", "no questions in the file")
    return out


def predict_file(head_dir, input_path, output_path, *, model=None, device: str = "cpu",
                 batch_size: int = 16, reference_head=None, reference_lora=None) -> int:
    """Score every question of ``input_path`` with the head in ``head_dir`` and write ``output_path`` (JSONL).

    ``reference_head`` (with ``head_dir`` None) and ``reference_lora``: a checkpoint in the reference code's format
    (:meth:`elical.heads.confidence.ConfidenceModel.from_reference`). Returns the number of questions. Raises
    InputError (nothing written) when the output exists, the input is bad or the head is not usable."""
    from elical.heads.confidence import ConfidenceModel
    from elical.jobs.checks import check_output_dir
    from elical.records import InputError

    output_path = Path(output_path)
    check_output_dir(output_path.parent, "--output")
    if output_path.exists():
        raise InputError(output_path, None, None, "already exists; refusing to overwrite (choose another --output)")
    if batch_size < 1:
        raise InputError(output_path, None, "--batch-size", f"must be >= 1, got {batch_size}")
    questions = read_questions(input_path)
    if (head_dir is None) == (reference_head is None) or (reference_lora and reference_head is None):
        raise InputError(output_path, None, "HEAD_DIR", "give either HEAD_DIR or --reference-head (with "
                         "--reference-lora for a LoRA checkpoint)")
    if reference_head is not None:
        cm = ConfidenceModel.from_reference(reference_lora, reference_head, model, device=device,
                                            batch_size=batch_size)
    else:
        cm = ConfidenceModel.load(head_dir, model=model, device=device, batch_size=batch_size)
    confidence = cm.predict([q["question"] for q in questions])
    text = "".join(json.dumps({"id": q["id"], "question": q["question"], "method": cm.method,
                               "confidence": float(c)}, ensure_ascii=False) + "\n"
                   for q, c in zip(questions, confidence))
    try:
        write_text_atomic(output_path, text, overwrite=False)  # never overwrite, even a file that appeared meanwhile
    except FileExistsError:
        raise InputError(output_path, None, None, "already exists; refusing to overwrite") from None
    return len(questions)


def _handle(args) -> int:
    n = predict_file(args.head_dir, args.input, args.output, model=args.model, device=args.device,
                     batch_size=args.batch_size, reference_head=args.reference_head,
                     reference_lora=args.reference_lora)
    print(f"wrote {n} confidences to {args.output}")
    return 0
