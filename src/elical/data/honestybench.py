"""Released HonestyBench files in and out.

The released HonestyBench (Ni et al., arXiv 2510.17509; layout in the authors' README) has one JSONL file per model
and dataset, one line per question::

    {"question": str, "answer": [str, ...],
     "greedy_response": [str], "greedy_correctness": 0/1, "greedy_tokens": [[str, ...]],
     "greedy_cumulative_logprobs": [float], "greedy_logprobs": [[float, ...]],
     "sampling_response": [str] * N, "sampling_correctness": [0/1] * N, "consistency_judgement": [0/1] * N}

The four greedy fields are one-element lists (vLLM returns a list of completions). elical's records
(``docs/records.md``) use the same names with the greedy fields unwrapped, plus ``id``, ``dataset``, ``split``,
``prompt``, ``sampling_cumulative_logprobs``, ``sampling_num_tokens``, ``consistency_rougeL`` and ``meta``.

:func:`read_honestybench` accepts both forms of each greedy field (wrapped or bare) and returns elical records;
:func:`to_released` / :func:`write_honestybench` write the released layout, keeping elical's own fields as extra
keys after the released ones, so ``read_honestybench(write_honestybench(records))`` gives the records back.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Iterable, Iterator

from elical.fileio import atomic_path
from elical.records import InputError, _json_default, greedy_text, iter_json_lines, warn

__all__ = ["RELEASED_FIELDS", "REQUIRED_FIELDS", "from_released", "iter_released", "read_honestybench", "to_released",
           "write_honestybench"]

RELEASED_FIELDS = ("question", "answer", "greedy_response", "greedy_correctness", "greedy_tokens",
                   "greedy_cumulative_logprobs", "greedy_logprobs", "sampling_response", "sampling_correctness",
                   "consistency_judgement")
#: Fields the ``--honestybench`` reader needs on every line: all ten of the release (N-Prob reads the token log-probs).
REQUIRED_FIELDS = RELEASED_FIELDS


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _unwrap(value, inner_ok):
    """A one-element list around a value the field accepts bare is unwrapped (the released layout)."""
    if isinstance(value, list) and len(value) == 1 and inner_ok(value[0]):
        return value[0]
    return value


def _str_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _num_list(v) -> bool:
    return isinstance(v, list) and all(_is_num(x) for x in v)


def _binary(v) -> int | None:
    if isinstance(v, bool) or (_is_num(v) and v in (0, 1)):
        return int(v)
    return None


def _token_list(v) -> bool:
    """Tokens as the released files hold them: strings, or integer token ids (some files store ids)."""
    return isinstance(v, list) and all(isinstance(x, str) or (isinstance(x, int) and not isinstance(x, bool))
                                       for x in v)


def from_released(obj: dict, path: str | os.PathLike = "<input>", line: int | None = None, *,
                  dataset: str | None = None, split: str = "test", strict: bool = False) -> dict:
    """One released HonestyBench line (a dict) as an elical record; ``path``/``line`` only name the source in
    errors.

    Required: ``question`` (non-empty str), ``answer`` (list of str, empty aliases dropped),
    ``greedy_response`` (str or one-element list of str), ``greedy_correctness`` (0/1 or bool). Optional, checked
    when present: ``greedy_tokens`` (list of str, bare or wrapped), ``greedy_logprobs`` (list of numbers, bare or
    wrapped, as long as ``greedy_tokens``), ``greedy_cumulative_logprobs`` (number or [number]; the sum of
    ``greedy_logprobs`` when absent), ``sampling_response`` (list of str), ``sampling_correctness`` and
    ``consistency_judgement`` (lists of 0/1 as long as ``sampling_response``). Absent list fields become ``[]``;
    ``id`` defaults to ``<dataset>/<line>``, ``dataset`` to the argument, ``split`` to the argument, ``prompt`` to
    None (the released files do not store it), ``meta`` to ``{"source": <file name>}``. Other keys are kept.

    ``greedy_tokens`` may hold integer token ids (kept as their decimal strings: only their number matters to
    N-Prob). ``strict`` (the ``--honestybench`` reader): every field of :data:`REQUIRED_FIELDS` must be present
    (else the error's problem is ``"missing"``). A line whose aliases are all empty is kept with ``answer`` ``[]``
    (its correctness comes from the file; the released CWQ dev set has such lines).

    Raises :class:`InputError` naming file, line and field.
    """
    def bad(field, problem):
        return InputError(path, line, field, problem)

    missing = [f for f in (REQUIRED_FIELDS if strict else ()) if f not in obj]
    if missing:
        raise bad(missing[0], "missing")
    q = obj.get("question")
    if not isinstance(q, str) or not q.strip():
        raise bad("question", "missing or empty question" if not q else f"expected a string, got {type(q).__name__}")
    answer = obj.get("answer")
    if not _str_list(answer):
        raise bad("answer", f"expected a list of strings, got {json.dumps(answer)[:60]}")
    aliases = [a for a in answer if a.strip()]
    greedy = _unwrap(obj.get("greedy_response"), lambda v: isinstance(v, str))
    if not isinstance(greedy, str):
        raise bad("greedy_response", "expected a string or a one-element list of strings, got "
                  f"{json.dumps(obj.get('greedy_response'))[:60]}")
    correct = _binary(obj.get("greedy_correctness"))
    if correct is None:
        raise bad("greedy_correctness", f"expected 0 or 1, got {json.dumps(obj.get('greedy_correctness'))}")
    tokens = _unwrap(obj.get("greedy_tokens", []), _token_list)
    if not _token_list(tokens):
        raise bad("greedy_tokens", "expected a list of tokens, strings or integer ids (or a one-element list of "
                  "such lists)")
    tokens = [t if isinstance(t, str) else str(int(t)) for t in tokens]
    lps = _unwrap(obj.get("greedy_logprobs", []), _num_list)
    if not _num_list(lps) or not all(math.isfinite(x) for x in lps):
        raise bad("greedy_logprobs", "expected a list of finite numbers (or a one-element list of such lists)")
    if tokens and lps and len(tokens) != len(lps):
        raise bad("greedy_logprobs", f"{len(lps)} log-probs for {len(tokens)} greedy_tokens")
    cum = _unwrap(obj.get("greedy_cumulative_logprobs"), _is_num)
    if cum is None:
        cum = round(float(sum(lps)), 6) if lps else None
    elif not _is_num(cum) or math.isnan(cum):
        raise bad("greedy_cumulative_logprobs", f"expected a number or [number], got {json.dumps(cum)[:40]}")
    samples = obj.get("sampling_response", [])
    if not _str_list(samples):
        raise bad("sampling_response", "expected a list of strings")
    judged = {}
    for field in ("sampling_correctness", "consistency_judgement"):
        values = obj.get(field, [])
        flags = [_binary(v) for v in values] if isinstance(values, list) else [None]
        if None in flags:
            raise bad(field, "expected a list of 0/1")
        if flags and len(flags) != len(samples):
            raise bad(field, f"{len(flags)} values for {len(samples)} sampling_response entries")
        judged[field] = flags
    name = obj.get("dataset") or dataset or Path(path).parent.name
    rec = {
        "id": str(obj.get("id") or f"{name}/{line}"), "dataset": name, "split": obj.get("split") or split,
        "question": q, "answer": aliases, "prompt": obj.get("prompt"), "greedy_response": greedy,
        "greedy_tokens": tokens, "greedy_logprobs": lps, "greedy_cumulative_logprobs": cum,
        "greedy_correctness": correct, "sampling_response": samples,
        "sampling_cumulative_logprobs": obj.get("sampling_cumulative_logprobs", []),
        "sampling_num_tokens": obj.get("sampling_num_tokens", []), **judged,
        "consistency_rougeL": obj.get("consistency_rougeL", []),
        "meta": obj.get("meta", {"source": Path(path).name}),
    }
    rec.update((k, v) for k, v in obj.items() if k not in rec)
    return rec


def iter_released(path: str | os.PathLike, dataset: str | None = None, split: str = "test", *,
                  strict: bool = False, lines=None, quiet: bool = False) -> Iterator[tuple[int, dict]]:
    """``(line number, record)`` for each line of a released HonestyBench file, one line in memory at a time.

    ``lines``: a set of line numbers to return (the others are still parsed and checked, not kept); None: all.
    Lines whose aliases are all empty strings, or hold some, are counted and reported in one warning per file
    after the last line (none with ``quiet``: a second pass over a file already read). See :func:`from_released`
    for ``dataset``, ``split`` and ``strict``. Raises
    :class:`InputError` naming file, line and field for a malformed line or a duplicate id.
    """
    path = Path(path)
    seen, empties = {}, []
    for lineno, obj in iter_json_lines(path):
        rec = from_released(obj, path, lineno, dataset=dataset, split=split, strict=strict)
        if rec["id"] in seen:
            raise InputError(path, lineno, "id", f"duplicate id {rec['id']!r} (first on line {seen[rec['id']]})")
        seen[rec["id"]] = lineno
        if isinstance(obj.get("answer"), list) and len(rec["answer"]) < len(obj["answer"]):
            empties.append((lineno, not rec["answer"]))
        if lines is None or lineno in lines:
            yield lineno, rec
    if empties and not quiet:
        bare = [n for n, none_left in empties if none_left]
        warn(f"{path}: empty-string gold aliases dropped on {len(empties)} line(s), first line {empties[0][0]}"
             + (f"; {len(bare)} line(s) with no alias left (first {bare[0]}) keep answer [] and the file's "
                "correctness" if bare else ""))


def read_honestybench(path: str | os.PathLike, dataset: str | None = None, split: str = "test") -> list[dict]:
    """Read a released HonestyBench JSONL file (or one written by :func:`write_honestybench`) as elical records.

    ``dataset`` defaults to the line's own ``dataset`` field, else the name of the file's folder; ``split`` to
    the line's own field, else ``"test"``. Raises :class:`InputError` naming file, line and field for a malformed
    line (see :func:`from_released`) or duplicate ids. Empty-string aliases are dropped with one warning per file.
    """
    return [rec for _, rec in iter_released(path, dataset, split)]


def to_released(record: dict) -> dict:
    """An elical record in the released HonestyBench layout: the released fields first, the four greedy fields
    as one-element lists, then every other field of the record (``id``, ``dataset``, ``prompt``, ``meta``, ...)
    unchanged."""
    out = {
        "question": record["question"], "answer": list(record["answer"]),
        "greedy_response": [greedy_text(record)], "greedy_correctness": int(record["greedy_correctness"]),
        "greedy_tokens": [list(record.get("greedy_tokens") or [])],
        "greedy_cumulative_logprobs": [record.get("greedy_cumulative_logprobs")],
        "greedy_logprobs": [list(record.get("greedy_logprobs") or [])],
        "sampling_response": list(record.get("sampling_response") or []),
        "sampling_correctness": list(record.get("sampling_correctness") or []),
        "consistency_judgement": list(record.get("consistency_judgement") or []),
    }
    out.update((k, v) for k, v in record.items() if k not in out)
    return out


def write_honestybench(path: str | os.PathLike, records: Iterable[dict]) -> int:
    """Write records in the released layout (:func:`to_released`) to ``path`` through a temporary file and a
    rename, so a reader never sees half a file. Returns the number of lines written."""
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(to_released(rec), ensure_ascii=False, allow_nan=False, default=_json_default) + "\n")
            n += 1
    return n
