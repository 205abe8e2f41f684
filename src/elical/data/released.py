"""A released HonestyBench directory as a run's records: ``elical run --honestybench DIR`` and ``elical study``.

The authors release, per QA model, one JSONL file per dataset and split in the layout of
:mod:`elical.data.honestybench` (greedy answer, its token log-probs, N sampled answers, each judged for correctness
and for agreement with the greedy answer by Qwen2.5-32B). :func:`discover` finds the files under ``DIR``:

- ``DIR/<dataset>/<split>.jsonl`` (the folder names the dataset), or
- ``DIR/<dataset>_<split>.jsonl`` / ``DIR/<dataset>-<split>.jsonl`` / ``DIR/<dataset>.jsonl``,

with ``<split>`` one of ``train`` (the training side) or ``test``, ``dev``, ``eval``, ``validation``, ``val``
(the evaluation side). A dataset file without a split word is cut by :func:`elical.data.sources.hash_split`.
Dataset names map to the in-domain / out-of-domain / unseen (MMLU) groups by :func:`elical.data.groups.group_of`;
only in-domain training files feed the pool (DESIGN.md protocol rules).

:func:`select_released` reads every file twice, one line in memory at a time: the first pass checks every line
(an error names file, line and field before any model loads) and counts them; the second keeps the seeded choice
of lines. Evaluation records keep their order in the file, so the paper's Alignment protocol ("the first 20 % of
each file as dev", :func:`elical.evaluation.metrics.alignment`) sees the file's order.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from elical.data.groups import group_of, pool_eligible
from elical.records import InputError

__all__ = ["ReleasedFile", "discover", "select_released", "EVAL_WORDS"]

EVAL_WORDS = ("test", "dev", "eval", "validation", "val")
_SPLIT_RE = re.compile(r"^(?P<name>.+?)[_.-](?P<split>train|" + "|".join(EVAL_WORDS) + r")$", re.IGNORECASE)


@dataclass(frozen=True)
class ReleasedFile:
    """One released file: its ``dataset`` name (lower case), ``side`` ("train", "test", or None: hash split) and
    ``tag`` (the split word or the file stem; part of every record id ``<dataset>/<tag>/<line>``)."""

    path: Path
    dataset: str
    side: str | None
    tag: str


def _name(path: Path, root: Path) -> ReleasedFile:
    stem = path.stem
    if path.parent != root:  # DIR/<dataset>/<split>.jsonl
        word = stem.lower()
        side = "train" if word == "train" else "test" if word in EVAL_WORDS else None
        return ReleasedFile(path, path.parent.name.lower(), side, word)
    m = _SPLIT_RE.match(stem)
    if m:
        word = m["split"].lower()
        return ReleasedFile(path, m["name"].lower(), "train" if word == "train" else "test", word)
    return ReleasedFile(path, stem.lower(), None, "all")


def discover(root, datasets: Sequence[str] = ()) -> list[ReleasedFile]:
    """The released files under ``root`` (see the module docstring), sorted by dataset then path; only those of
    ``datasets`` when given. Raises InputError naming ``--honestybench`` for a missing directory, no JSONL file, or
    a named dataset that is absent."""
    root = Path(root)
    if not root.is_dir():
        raise InputError(root, None, "--honestybench", "not a directory (expected the released HonestyBench files "
                         "of one model: <dataset>/<split>.jsonl)")
    files = [_name(p, root) for p in sorted(root.rglob("*.jsonl")) if p.is_file()]
    if not files:
        raise InputError(root, None, "--honestybench", "no .jsonl file here (expected <dataset>/<split>.jsonl)")
    found = sorted({f.dataset for f in files})
    if datasets:
        wanted = [d.lower() for d in datasets]
        absent = [d for d in wanted if d not in found]
        if absent:
            raise InputError(root, None, "--datasets", f"no released file of {', '.join(absent)} here (found: "
                             f"{', '.join(found)})")
        files = [f for f in files if f.dataset in wanted]
    return sorted(files, key=lambda f: (f.dataset, str(f.path)))


def _scan(files: list[ReleasedFile]) -> dict[Path, list[tuple[int, str]]]:
    """First pass: every line checked (strict), ``{path: [(line, side)]}`` kept (no text)."""
    from elical.data.honestybench import iter_released
    from elical.data.sources import hash_split

    out = {}
    for f in files:
        rows = []
        for lineno, rec in iter_released(f.path, f.dataset, strict=True):
            rows.append((lineno, f.side or hash_split(rec["question"])))
        if not rows:
            raise InputError(f.path, None, None, "no record in this file")
        out[f.path] = rows
    return out


def select_released(root, *, n_train: int, n_eval: int, seed: int, datasets: Sequence[str] = (),
                    extra_pool: Sequence[str] = ()) -> tuple[list[dict], dict]:
    """The run's records from a released HonestyBench directory, and a summary.

    Per pool dataset (in-domain, or in no group and named in ``extra_pool``), up to ``ceil(n_train / number of
    pool datasets)`` lines of its training side; per dataset, up to ``n_eval`` lines of its evaluation side (fewer
    when the files hold fewer: all of them, which is the paper's protocol). Lines are drawn with
    ``random.Random(seed)`` and kept in file order. Out-of-domain sets and MMLU give evaluation records only.

    Returns (records, summary): elical records (:func:`elical.data.honestybench.from_released`) with ``id``
    ``<dataset>/<tag>/<line>``, ``split`` "train" / "test", ``prompt`` None (built from the model's tokenizer
    later), ``meta`` ``{"source": file, "line": n, "judged_by": "released"}``; summary ``{dataset: {"group",
    "train": [chosen, available], "test": [chosen, available]}}``. Raises InputError (file, line, field) for any
    bad line, before anything is returned; for no pool dataset; or for ``extra_pool`` naming an out-of-domain or
    unseen dataset.
    """
    from elical.data.honestybench import iter_released

    for name in extra_pool:
        if group_of(name) not in (None, "in_domain"):
            raise InputError("--pool-datasets", None, "--pool-datasets", f"'{name}' is evaluation only (training "
                             "pools come from in-domain datasets only)")
    files = discover(root, datasets)
    scanned = _scan(files)
    names = sorted({f.dataset for f in files})
    pool_names = [d for d in names if pool_eligible(d, extra_pool)
                  and any(side == "train" for f in files if f.dataset == d for _, side in scanned[f.path])]
    if not pool_names:
        raise InputError(root, None, "--honestybench", f"no training lines of an in-domain dataset among "
                         f"{', '.join(names)} (out-of-domain sets and MMLU are evaluation only)")
    rng = random.Random(seed)
    per_train = -(-n_train // len(pool_names))
    chosen: dict[Path, dict[int, str]] = {f.path: {} for f in files}
    summary = {}
    for name in names:
        mine = [f for f in files if f.dataset == name]
        summary[name] = {"group": group_of(name) or "none"}
        wanted = (("train", per_train),) if name in pool_names else ()
        for side, n in (*wanted, ("test", n_eval)):
            cands = [(f.path, line) for f in mine for line, s in scanned[f.path] if s == side]
            picked = rng.sample(cands, min(n, len(cands)))
            for path, line in picked:
                chosen[path][line] = side
            summary[name][side] = [len(picked), len(cands)]
    records = []
    for f in files:
        lines = chosen[f.path]
        if not lines:
            continue
        for lineno, rec in iter_released(f.path, f.dataset, strict=True, lines=set(lines), quiet=True):
            rec.update(id=f"{f.dataset}/{f.tag}/{lineno}", dataset=f.dataset, split=lines[lineno],
                       meta={"source": str(f.path), "line": lineno, "judged_by": "released"})
            records.append(rec)
    records.sort(key=lambda r: (r["split"] != "train", r["dataset"]))  # stable: file order kept within a dataset
    return records, summary
