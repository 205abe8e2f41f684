"""Question sources and splits.

Sources: ``facts`` (embedded, built offline from knowledge packages; :mod:`elical.data.facts`) and any directory in
the HonestyBench QA layout ``<data_dir>/<dataset>/<split>.jsonl`` with lines ``{"question", "answer": [...]}``
(for example ``../shared/data/honestybench-qa``).

Training pools: only evaluation files exist offline, so each file is cut in two by a hash of the normalized
question (:func:`hash_split`): the ``train`` part feeds the unlabelled pool and the k labelled questions, the
``test`` part the evaluation. The cut depends on the question text alone, so it is the same on every machine,
for every seed and every run size, and a question never lands on both sides.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Sequence

from elical.records import InputError, read_qa_file

__all__ = ["hash_split", "load_dataset", "load_questions", "select_run_questions"]

TRAIN_FRACTION = 0.5


def hash_split(question: str, train_fraction: float = TRAIN_FRACTION) -> str:
    """``"train"`` or ``"test"`` from a SHA-1 hash of the lower-cased, whitespace-folded question."""
    key = " ".join(question.lower().split()).encode("utf-8")
    u = int(hashlib.sha1(key).hexdigest()[:15], 16) / 16**15
    return "train" if u < train_fraction else "test"


def _dataset_file(data_dir: Path, name: str) -> Path:
    folder = data_dir / name
    if not folder.is_dir():
        have = sorted(p.name for p in data_dir.iterdir() if p.is_dir()) if data_dir.is_dir() else []
        raise InputError(data_dir, None, "--datasets", f"no dataset '{name}' here (found: {', '.join(have) or 'none'})")
    files = sorted(folder.glob("*.jsonl"))
    if len(files) != 1:
        raise InputError(folder, None, None, f"expected exactly one <split>.jsonl file, found {len(files)}")
    return files[0]


def load_dataset(name: str, data_dir: str | Path | None = None) -> list[dict]:
    """All questions of one dataset: ``"facts"`` or a folder name under ``data_dir``.

    Returns dicts with ``id``, ``dataset``, ``question``, ``answer``. Raises InputError for a missing dataset or
    a bad line (file, line and field named)."""
    if name == "facts" and data_dir is None:
        from elical.data.facts import load_facts

        return load_facts()
    if data_dir is None:
        raise InputError("--data-dir", None, "--datasets", f"dataset '{name}' needs --data-dir")
    return read_qa_file(_dataset_file(Path(data_dir), name), dataset=name)


def load_questions(datasets: Sequence[str], data_dir: str | Path | None = None) -> dict[str, list[dict]]:
    """``{dataset: questions}`` for each named dataset (see :func:`load_dataset`)."""
    return {name: load_dataset(name, data_dir) for name in datasets}


def select_run_questions(by_dataset: dict[str, list[dict]], n_train: int, n_eval: int, seed: int) -> list[dict]:
    """Pick a seeded training pool and evaluation set.

    Per dataset, ``n_eval`` questions from its hash ``test`` part and ``n_train / len(datasets)`` (rounded up)
    from its ``train`` part, drawn with ``random.Random(seed)``. Returns copies with ``split`` set to
    ``"train"`` or ``"test"``. Raises InputError when a dataset has too few questions on a side.
    """
    rng = random.Random(seed)
    per_train = -(-n_train // max(len(by_dataset), 1))
    chosen = []
    for name in sorted(by_dataset):
        sides = {"train": [], "test": []}
        for q in by_dataset[name]:
            sides[hash_split(q["question"])].append(q)
        for side, n in (("train", per_train), ("test", n_eval)):
            pool = sides[side]
            if len(pool) < n:
                raise InputError(name, None, "--n-train" if side == "train" else "--n-eval",
                                 f"{len(pool)} questions on the {side} side of '{name}', {n} asked")
            for q in rng.sample(pool, n):
                chosen.append({**q, "split": side})
    return chosen
