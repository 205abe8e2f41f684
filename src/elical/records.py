"""The per-question record (HonestyBench schema) and its JSONL files.

One JSON object per line. Field names follow the released HonestyBench files so they can be read and written
directly (see ``docs/records.md``): ``question``, ``answer`` (gold aliases), ``greedy_response``,
``greedy_tokens``, ``greedy_logprobs``, ``greedy_cumulative_logprobs``, ``greedy_correctness`` (0/1),
``sampling_response`` (N strings), ``sampling_correctness`` (N x 0/1), ``consistency_judgement`` (N x 0/1:
the sample agrees with the greedy answer). elical adds ``id``, ``dataset``, ``split``, ``prompt``,
``sampling_cumulative_logprobs``, ``sampling_num_tokens``, ``consistency_rougeL`` and a ``meta`` block.

Files are written append-only, one flushed line per record, so a killed run loses at most the line being written;
:func:`open_append` repairs such a torn last line before appending.
"""

from __future__ import annotations

import json
import math
import os
import sys
from pathlib import Path
from typing import Iterable, Iterator

__all__ = [
    "InputError",
    "MAX_QUESTION_CHARS",
    "decoded_lines",
    "iter_json_lines",
    "read_qa_file",
    "read_records",
    "open_append",
    "write_json_atomic",
    "self_consistency",
    "sample_accuracy",
    "greedy_text",
    "warn",
]


class InputError(ValueError):
    """Bad user input; the message names the file, the line and the field. The CLI exits with code 2."""

    def __init__(self, path: str | os.PathLike, line: int | None, field: str | None, problem: str):
        self.path, self.line, self.field, self.problem = str(path), line, field, problem
        where = str(path) + (f", line {line}" if line is not None else "")
        what = f"field '{field}': " if field else ""
        super().__init__(f"{where}: {what}{problem}")


def decoded_lines(path: str | os.PathLike) -> Iterator[tuple[int, str, bool]]:
    """``(line number, text, complete)`` for every line of a UTF-8 text file; ``complete`` is False for a last
    line without a newline. A leading byte-order mark is dropped (files saved by some Windows editors start with
    one). The one place where elical decodes its input files.

    Raises :class:`InputError` naming file and line for bytes that are not UTF-8, and for a missing path."""
    path = Path(path)
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        raise InputError(path, None, None, "file not found") from None
    except IsADirectoryError:
        raise InputError(path, None, None, "is a directory, not a file") from None
    with fh:
        for lineno, raw in enumerate(fh, start=1):
            if lineno == 1 and raw.startswith(b"\xef\xbb\xbf"):
                raw = raw[3:]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(path, lineno, None, f"not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                                 f"{len(raw[:exc.start].decode('utf-8', 'replace')) + 1}); save the file as "
                                 "UTF-8") from None
            complete = text.endswith("\n")
            yield lineno, text.rstrip("\r\n") if complete else text, complete


def iter_json_lines(path: str | os.PathLike) -> Iterator[tuple[int, dict]]:
    """``(line number, object)`` for each non-blank line of a JSONL file (UTF-8, with or without a byte-order
    mark); InputError (file, line) for bytes that are not UTF-8, a malformed line or one that is not a JSON
    object."""
    path = Path(path)
    for lineno, line, _ in decoded_lines(path):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InputError(path, lineno, None, f"malformed JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise InputError(path, lineno, None, f"expected a JSON object, got {type(obj).__name__}")
        yield lineno, obj


MAX_QUESTION_CHARS = 20_000
"""Longest question :func:`read_qa_file` accepts, in characters: a cheap guard at read time against a line that
is not a question (a pasted document); the model's own context limit is checked where the model is loaded
(:func:`elical.jobs.checks.check_prompt_lengths`)."""


def warn(message: str) -> None:
    """A warning about the user's input, on stderr (the command still runs)."""
    print(f"elical: warning: {message}", file=sys.stderr, flush=True)


def read_qa_file(path: str | os.PathLike, dataset: str | None = None) -> list[dict]:
    """Read a QA file in the HonestyBench layout: lines ``{"question": str, "answer": [str, ...]}``.

    UTF-8, with or without a byte-order mark. Returns a list of dicts with ``id`` (``<dataset>/<line number>``
    unless the line has its own ``id``), ``dataset``, ``question``, ``answer`` (aliases; empty-string aliases,
    present in a few CWQ lines, are dropped), and ``source`` (``{"file", "line"}``, for error messages of later
    checks). A question repeated in the file (equal up to case and spacing) is kept once, at its first line, with
    a warning on stderr naming the lines; a question whose answer list holds no non-empty alias (nothing to judge
    against) is skipped with a warning naming the lines. Raises :class:`InputError` naming file, line and field
    for bytes that are not UTF-8, a malformed line, a missing or empty question, a question over
    ``MAX_QUESTION_CHARS`` characters, a missing or non-list answer, or a file without any answerable question.
    """
    path = Path(path)
    dataset = dataset or path.parent.name
    out, first_line, repeats, unanswerable = [], {}, [], []
    for lineno, obj in iter_json_lines(path):
        question = obj.get("question")
        if not isinstance(question, str) or not question.strip():
            raise InputError(path, lineno, "question", "missing or empty question" if not question else
                             f"expected a string, got {type(question).__name__}")
        if len(question) > MAX_QUESTION_CHARS:
            raise InputError(path, lineno, "question", f"{len(question):,} characters, more than the "
                             f"{MAX_QUESTION_CHARS:,} a question may have (is this line a question?)")
        if "answer" not in obj:
            raise InputError(path, lineno, "answer", "missing (expected a list of gold answer strings)")
        answer = obj["answer"]
        if not isinstance(answer, list) or not all(isinstance(a, str) for a in answer):
            raise InputError(path, lineno, "answer", f"expected a list of strings, got {json.dumps(answer)[:60]}")
        aliases = [a for a in answer if a.strip()]
        if not aliases:  # nothing to judge an answer against (3 lines of the released CWQ file)
            unanswerable.append(lineno)
            continue
        key = " ".join(question.casefold().split())
        if key in first_line:
            repeats.append((lineno, first_line[key]))
            continue
        first_line[key] = lineno
        rid = obj.get("id") or f"{dataset}/{lineno}"
        out.append({"id": str(rid), "dataset": dataset, "question": question.strip(), "answer": aliases,
                    "source": {"file": str(path), "line": lineno}})
    if not out:
        raise InputError(path, None, None, "no questions with a gold answer" if unanswerable
                         else "no questions (the file is empty)")
    if unanswerable:
        shown = ", ".join(str(n) for n in unanswerable[:10])
        warn(f"{path}: {len(unanswerable)} question(s) without a non-empty gold answer skipped (field 'answer', "
             f"line(s) {shown}{' ...' if len(unanswerable) > 10 else ''})")
    if repeats:
        shown = ", ".join(f"line {a} repeats line {b}" for a, b in repeats[:10])
        more = f" and {len(repeats) - 10} more" if len(repeats) > 10 else ""
        warn(f"{path}: {len(repeats)} duplicate question(s) skipped, the first kept ({shown}{more})")
    return out


def greedy_text(record: dict) -> str:
    """The greedy answer as a string; the released HonestyBench files store it as a one-element list."""
    g = record.get("greedy_response", "")
    if isinstance(g, list):
        g = g[0] if g else ""
    return g if isinstance(g, str) else ""


def _mean01(values, what: str, record: dict) -> float:
    if not values:
        raise ValueError(f"record {record.get('id', '?')}: '{what}' is empty; cannot compute its mean")
    return float(sum(float(v) for v in values) / len(values))


def self_consistency(record: dict) -> float:
    """``c_cons = mean(consistency_judgement)``: share of sampled answers that agree with the greedy answer."""
    return _mean01(record.get("consistency_judgement"), "consistency_judgement", record)


def sample_accuracy(record: dict) -> float:
    """``c_acc = mean(sampling_correctness)``: share of sampled answers that are correct."""
    return _mean01(record.get("sampling_correctness"), "sampling_correctness", record)


def read_records(path: str | os.PathLike, *, skip_torn_tail: bool = True) -> list[dict]:
    """Read a record JSONL file. A torn last line (a run killed mid-write) is skipped when ``skip_torn_tail``;
    any other malformed line raises :class:`InputError` naming file and line."""
    path = Path(path)
    if not path.exists():
        return []
    out = []
    lines = decoded_lines(path)
    while True:
        try:
            i, line, complete = next(lines)
        except StopIteration:
            break
        except InputError as exc:  # bytes that are not UTF-8: a torn multi-byte character at the tail is skipped
            if skip_torn_tail and exc.line is not None and _is_last_line(path, exc.line):
                break
            raise
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            if skip_torn_tail and not complete:  # no newline after it: the write was interrupted
                break
            raise InputError(path, i, None, f"malformed JSON ({exc.msg})") from None
        if not isinstance(obj, dict):
            raise InputError(path, i, None, "expected a JSON object")
        out.append(obj)
    return out


def _is_last_line(path: Path, lineno: int) -> bool:
    data = path.read_bytes()
    return not data.endswith(b"\n") and data.count(b"\n") == lineno - 1


def _repair_tail(path: Path) -> None:
    """Cut a torn last line (no trailing newline) so that appends start on a fresh line."""
    if not path.exists() or path.stat().st_size == 0:
        return
    with open(path, "rb+") as fh:
        fh.seek(-1, os.SEEK_END)
        if fh.read(1) == b"\n":
            return
        data = path.read_bytes()
        cut = data.rfind(b"\n") + 1
        fh.truncate(cut)


class _Appender:
    def __init__(self, path: Path):
        path.parent.mkdir(parents=True, exist_ok=True)
        _repair_tail(path)
        self._fh = open(path, "a", encoding="utf-8")

    def write(self, records: Iterable[dict]) -> None:
        for rec in records:
            self._fh.write(json.dumps(rec, ensure_ascii=False, allow_nan=False, default=_json_default) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def open_append(path: str | os.PathLike) -> _Appender:
    """Open a record file for appending whole, flushed lines (``with open_append(p) as w: w.write(records)``)."""
    return _Appender(Path(path))


def _json_default(obj):
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if isinstance(obj, float) and math.isnan(obj):
        return None
    raise TypeError(f"not JSON serializable: {type(obj).__name__}")


def _strict(obj):
    """NaN and infinities become null, so that strict JSON readers accept the file."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_strict(v) for v in obj]
    if hasattr(obj, "tolist"):
        return _strict(obj.tolist())
    return obj


def write_json_atomic(path: str | os.PathLike, obj) -> None:
    """Write strict JSON (NaN -> null) to ``path`` atomically and durably (:func:`elical.fileio.atomic_path`: a
    temporary file, fsync, rename), so a reader never sees half a file."""
    from elical.fileio import write_text_atomic

    write_text_atomic(path, json.dumps(_strict(obj), indent=2, ensure_ascii=False, allow_nan=False,
                                       default=_json_default) + "\n")


def read_safetensors(path: str | os.PathLike, framework: str = "pt") -> tuple[dict, dict]:
    """``(tensors, metadata)`` of a safetensors file (``framework`` "pt": torch tensors, "np": ndarrays).

    Raises :class:`InputError` naming the file for a missing, truncated or otherwise unreadable file (a copy cut
    short, a disk that filled up), with what to do about it."""
    from safetensors import safe_open

    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, None, "missing (or not a file)")
    try:
        with safe_open(str(path), framework=framework) as fh:
            return {k: fh.get_tensor(k) for k in fh.keys()}, dict(fh.metadata() or {})
    except Exception as exc:  # safetensors raises its own SafetensorError, OSError or ValueError for a bad file
        raise InputError(path, None, None, f"not a complete safetensors file ({type(exc).__name__}: "
                         f"{str(exc)[:160]}); it was probably cut short: delete it and make it again (train the "
                         f"head again, or rerun without --resume)") from None
