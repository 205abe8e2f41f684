"""``elical merge``: join the ``--shard`` files of a build; :func:`export`, a build in the released HonestyBench
layout (the ``elical export`` command is :mod:`elical.jobs.export`; see :mod:`elical.jobs.build` and
``docs/build.md``)."""

from __future__ import annotations

import json
from pathlib import Path

from elical.fileio import write_text_atomic
from elical.jobs.build import _SHARD_RE, Unit, _records_done, _some, load_config, plan_units
from elical.records import InputError, read_records

__all__ = ["merge", "export", "register"]


def _raw_lines(path: Path):
    """``(id, raw line)`` of a record file; a torn last line (no newline) is left out."""
    lines = path.read_text(encoding="utf-8").split("\n")
    for i, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines):
                continue
            raise InputError(path, i, None, "malformed JSON") from None
        yield str(obj.get("id")) if isinstance(obj, dict) else None, line


def merge(build_dir: str | Path, log=print) -> dict:
    """Join the shard files of every unit into ``<split>.jsonl`` (lines in question order, byte for byte as
    written by the shards) and, when every shard has them, the features into ``<split>.features.safetensors``.

    Everything is checked before anything is written: InputError (naming the ids) when an id is in two shard
    files, an expected id is in none, or a shard holds an id outside the build's question list.
    Returns ``{"merged": [paths], "nothing_to_do": bool}``.
    """
    root = Path(build_dir)
    jobs = [job for u in plan_units(load_config(root), log=lambda *_: None) if (job := _merge_job(u, root))]
    for u, ids, n, lines in jobs:
        target = u.records_path(root)
        write_text_atomic(target, "".join(lines[r] + "\n" for r in ids))
        log(f"merged {len(ids)} records into {target}")
        _merge_features(u, ids, root, n, log)
    if not jobs:
        log(f"nothing to do: no shard files left to merge in {root}")
    return {"merged": [str(j[0].records_path(root)) for j in jobs], "nothing_to_do": not jobs}


def _merge_job(u: Unit, root: Path):
    """``(unit, ids, n, {id: raw line})`` to merge, None when the unit is already complete; InputError else."""
    ids, target = [q["id"] for q in u.questions], u.records_path(root)
    shards = sorted(p for p in target.parent.glob(f"{u.split}.shard-*-of-*.jsonl") if _SHARD_RE.match(p.name))
    if target.exists() and _records_done(target, ids) == len(ids):
        return None
    if not shards or target.exists():
        raise InputError(target, None, None, "exists but is incomplete while shard files are present: remove one "
                         "or the other" if shards else "incomplete and no shard files: run `elical build` first")
    ns = {int(_SHARD_RE.match(p.name)["n"]) for p in shards}
    if len(ns) != 1:
        raise InputError(target.parent, None, "--shard", f"shard files of different n: {sorted(ns)}")
    n = ns.pop()
    owner, lines, overlap = {}, {}, []
    for p in shards:
        for rid, line in _raw_lines(p):
            if rid in owner:
                overlap.append(f"{rid} ({owner[rid]}, {p.name})")
            owner[rid], lines[rid] = p.name, line
    expected = set(ids)
    unexpected = sorted(r for r in owner if r not in expected)
    missing = [r for r in ids if r not in owner]
    absent = [p.name for i in range(1, n + 1) if not (p := u.records_path(root, (i, n))).exists()]
    problems = {"ids in more than one shard file": overlap, "ids not in the build's question list": unexpected,
                "ids missing from the shard files" + (f" (no {', '.join(absent)})" if absent else ""): missing}
    for what, bad in problems.items():
        if bad:
            raise InputError(target.parent, None, "id", f"{len(bad)} {what} (nothing was merged): {_some(bad)}")
    return u, ids, n, lines


def _merge_features(u: Unit, ids: list[str], root: Path, n: int, log) -> None:
    import numpy as np

    from elical.generation.features import load_features, save_features

    rows, meta = {}, {}
    for i in range(1, n + 1):
        path = u.features_path(root, (i, n))
        if not path.exists():
            log(f"{u.dataset}/{u.split}: no features in shard {i}/{n}; `elical build` without --shard computes them")
            return
        sids, X, meta = load_features(path)
        rows.update(zip(sids, X))
    if set(rows) != set(ids):
        log(f"{u.dataset}/{u.split}: shard features do not cover the records; `elical build` recomputes them")
        return
    save_features(u.features_path(root), ids, np.stack([rows[r] for r in ids]), meta)


def export(build_dir: str | Path, dest: str | Path, log=print) -> list[str]:
    """Write every complete record file of a build to ``dest/<dataset>/<split>.jsonl`` in the released
    HonestyBench layout (:func:`elical.data.honestybench.to_released`). Raises InputError, before writing anything,
    when a file is incomplete (finish or merge the build first) or a destination file exists."""
    from elical.data.honestybench import write_honestybench

    root, dest = Path(build_dir), Path(dest)
    jobs = []
    for u in plan_units(load_config(root), log=lambda *_: None):
        ids, src = [q["id"] for q in u.questions], u.records_path(root)
        by_id = {r["id"]: r for r in read_records(src)}
        if set(by_id) != set(ids):
            raise InputError(src, None, None, f"{len(set(ids) & set(by_id))} of {len(ids)} records: finish the "
                             "build (or merge its shards) before exporting")
        target = dest / u.dataset / f"{u.split}.jsonl"
        if target.exists():
            raise InputError(target, None, "--output", "exists; nothing was overwritten")
        jobs.append((target, [by_id[r] for r in ids]))
    for target, recs in jobs:
        write_honestybench(target, recs)
        log(f"wrote {len(recs)} records to {target}")
    return [str(t) for t, _ in jobs]


def _cmd_merge(args) -> int:
    merge(args.build_dir)
    return 0


def register(sub) -> None:
    """Add the ``merge`` subcommand to the ``elical`` parser (``export``: :mod:`elical.jobs.export`)."""
    m = sub.add_parser("merge", help="join the --shard files of a build; refuses overlapping or missing ids")
    m.add_argument("build_dir")
    m.set_defaults(handler=_cmd_merge)
