"""Reuse of an ``elical build`` directory by ``elical run --build-dir``: its records (when model, decoding and
judges match) and its hidden states (when model and layer match)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from elical.jobs.build import load_config
from elical.records import InputError, open_append, read_records

__all__ = ["reuse_build", "reuse_features"]


def _meta_key(meta: dict) -> dict:
    # meta["decoding"] names the generator class beside its settings (elical.generation.base.decoding_meta), so
    # records of two decoders never mix; the batch size (older records have it) changes no answer
    decoding = {k: v for k, v in (meta.get("decoding") or {}).items() if k != "batch_size"}
    return {"model": meta.get("model"), "decoding": decoding, "judges": meta.get("judges")}


def reuse_build(build_dir: str | Path, questions: Sequence[dict], path: str | Path, *, meta: dict) -> int:
    """Append to the run's record file ``path`` the built records of ``questions`` (matched by id, in question
    order; ``split`` set to the question's), so that :func:`elical.jobs.annotate` generates only the rest.

    ``meta``: the run's record meta; a built record must share its model, decoding (batch size aside) and judges,
    else InputError. The seed may differ: a built record keeps its own in ``meta``. Returns the number appended.
    """
    root = Path(build_dir)
    load_config(root)
    wanted = {q["id"]: q for q in questions}
    present = {r["id"] for r in read_records(path)}
    key, taken = _meta_key(meta), {}
    for ds in sorted({q["dataset"] for q in questions}):
        for f in sorted((root / ds).glob("*.jsonl")):
            for rec in read_records(f):
                q = wanted.get(rec.get("id"))
                if q is None or rec["id"] in present or rec["id"] in taken:
                    continue
                if rec.get("question") != q["question"]:
                    raise InputError(f, None, "question", f"record {rec['id']} was built from another question "
                                     f"text ({rec.get('question')!r} vs {q['question']!r})")
                if _meta_key(rec.get("meta") or {}) != key:
                    raise InputError(f, None, "meta", f"built with {_meta_key(rec.get('meta') or {})}, this run "
                                     f"uses {key}")
                taken[rec["id"]] = {**rec, "split": q.get("split", rec.get("split"))}
    new = [taken[q["id"]] for q in questions if q["id"] in taken]
    if new:
        with open_append(path) as w:
            w.write(new)
    return len(new)


def reuse_features(build_dir: str | Path, records: Sequence[dict], model, tokenizer, *, model_name: str,
                   layer: int, batch_size: int = 16, progress: bool = False):
    """Hidden states of ``records`` (ndarray of shape (len(records), hidden_size)): rows built with the same
    model name and layer are read from the build, the rest computed with
    :func:`elical.generation.features.extract_hidden_states`."""
    import numpy as np

    from elical.generation.features import extract_hidden_states, load_features

    need, known = {r["id"] for r in records}, {}
    for ds in sorted({r["dataset"] for r in records}):
        for f in sorted((Path(build_dir) / ds).glob("*.features.safetensors")):
            ids, X, meta = load_features(f)
            if meta.get("model") == model_name and meta.get("layer") == layer:
                known.update((rid, X[i]) for i, rid in enumerate(ids) if rid in need)
    todo = [i for i, r in enumerate(records) if r["id"] not in known]
    if not todo and records:
        return np.stack([known[r["id"]] for r in records]).astype(np.float32)
    fresh = extract_hidden_states(model, tokenizer, [records[i]["prompt"] for i in todo], layer=layer,
                                  batch_size=batch_size, progress=progress)
    out = np.zeros((len(records), fresh.shape[1]), dtype=np.float32)
    out[todo] = fresh
    for i, r in enumerate(records):
        if r["id"] in known:
            out[i] = known[r["id"]]
    return out
