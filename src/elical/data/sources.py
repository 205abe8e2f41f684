"""Question sources and splits.

Sources: ``facts`` (embedded, frozen from knowledge packages; :mod:`elical.data.facts`) and any directory in
the HonestyBench QA layout ``<data_dir>/<dataset>/<split>.jsonl`` with lines ``{"question", "answer": [...]}``
(for example ``../shared/data/honestybench-qa``).

Training pools: only evaluation files exist offline, so each file is cut in two by a hash of the normalized
question (:func:`hash_split`): the ``train`` part feeds the unlabelled pool and the k labelled questions, the
``test`` part the evaluation. The cut depends on the question text alone, so it is the same on every machine,
for every seed and every run size, and a question never lands on both sides. The hash is taken of
:func:`normalize_question`, so near-duplicates that differ only in case, accents, punctuation, articles or
spacing (NQ's "when did michael jordan return to the nba" and WebQuestions' "... the nba?") land on one side,
in whichever dataset they occur.

Only in-domain datasets feed the pool (:mod:`elical.data.groups`); out-of-domain sets, MMLU and datasets in no
group give evaluation questions only, unless a dataset in no group is named in ``extra_pool`` on purpose.
"""

from __future__ import annotations

import hashlib
import random
import re
import unicodedata
from pathlib import Path
from typing import Sequence

from elical.data.groups import group_of, pool_eligible
from elical.records import InputError, read_qa_file

__all__ = ["hash_split", "normalize_question", "load_dataset", "load_questions", "select_run_questions"]

TRAIN_FRACTION = 0.5

_APOSTROPHES = re.compile(r"['\u2018\u2019\u02bc`\u00b4]")
_ARTICLES = frozenset({"a", "an", "the"})


def normalize_question(question: str) -> str:
    """The key of a question for the split: Unicode NFKC, casefolded, accents folded, apostrophes dropped, other
    punctuation and symbols turned into spaces, the articles a/an/the dropped, whitespace folded.

    ``"When did Michael Jordan return to the NBA?"`` -> ``"when did michael jordan return to nba"``."""
    text = unicodedata.normalize("NFKD", unicodedata.normalize("NFKC", question).casefold())
    text = _APOSTROPHES.sub("", "".join(ch for ch in text if not unicodedata.combining(ch)))
    # punctuation (P*), symbols (S*) and underscores separate words
    text = "".join(" " if unicodedata.category(ch)[0] in "PS" or ch == "_" else ch for ch in text)
    return " ".join(w for w in text.split() if w not in _ARTICLES)


def hash_split(question: str, train_fraction: float = TRAIN_FRACTION) -> str:
    """``"train"`` or ``"test"`` from a SHA-1 hash of :func:`normalize_question` (near-duplicates share a side)."""
    key = normalize_question(question).encode("utf-8")
    u = int(hashlib.sha1(key).hexdigest()[:15], 16) / 16**15
    return "train" if u < train_fraction else "test"


def _dataset_files(data_dir: Path, name: str) -> tuple[Path | None, Path]:
    """(training file or None, evaluation file) of ``<data_dir>/<name>/``: one ``<split>.jsonl`` (hash split), or
    ``train.jsonl`` beside exactly one other file (the released training split and an evaluation split)."""
    folder = data_dir / name
    if not folder.is_dir():
        have = sorted(p.name for p in data_dir.iterdir() if p.is_dir()) if data_dir.is_dir() else []
        raise InputError(data_dir, None, "--datasets", f"no dataset '{name}' here (found: {', '.join(have) or 'none'})")
    files = sorted(folder.glob("*.jsonl"))
    train = folder / "train.jsonl"
    if len(files) == 2 and train in files:
        return train, next(f for f in files if f != train)
    if len(files) != 1:
        raise InputError(folder, None, None, f"expected one <split>.jsonl file, or train.jsonl and one evaluation "
                         f"file, found {len(files)}")
    return None, files[0]


def load_dataset(name: str, data_dir: str | Path | None = None, mmlu_dir: str | Path | None = None) -> list[dict]:
    """All questions of one dataset, found by name in :data:`elical.data.SOURCES`: ``"facts"`` (embedded; a
    folder named ``facts`` under ``data_dir`` wins), ``"mmlu"`` (``mmlu_dir``'s test split, as free-form QA with
    lettered choices), else a folder name under ``data_dir`` (the HonestyBench QA layout).

    Returns dicts with ``id``, ``dataset``, ``question``, ``answer`` (MMLU also ``choices``, ``answer_index``).
    Raises InputError for a missing dataset, a missing directory or option (named from the source's spec) or a
    bad line (file, line and field named)."""
    spec = source_of(name, data_dir)
    given = {"data_dir": data_dir, "mmlu_dir": mmlu_dir, "name": name}
    for need in spec.needs:
        if given.get(need) is None:
            option = spec.info["options"].get(need, need)
            example = f" (e.g. {spec.info['example']})" if spec.info.get("example") else ""
            raise InputError(option, None, "--datasets", f"dataset '{name}' needs {option}{example}")
    from elical.data import SOURCES

    return SOURCES.create(spec.name, **{need: given[need] for need in spec.needs})


def source_of(name: str, data_dir: str | Path | None = None):
    """The :data:`elical.data.SOURCES` entry (dataset spec) that serves dataset ``name``: the one whose
    ``dataset`` is ``name`` unless a folder of that name under ``data_dir`` exists, else ``qa-folder``."""
    from elical.data import SOURCES

    for source in SOURCES:
        entry = SOURCES[source]
        if entry.info.get("dataset") == name and (data_dir is None or not (Path(data_dir) / name).is_dir()):
            return entry
    return SOURCES["qa-folder"]


def read_qa_folder(data_dir: str | Path, name: str) -> list[dict]:
    """The questions of ``<data_dir>/<name>/``: one ``<split>.jsonl`` file, cut by :func:`hash_split` later; or a
    released training split ``train.jsonl`` beside one evaluation file, whose questions then carry ``side``
    ("train" / "test"; ids ``<name>/train/<line>`` for the training file) and are never hash-split. A training
    question equal to an evaluation question after :func:`normalize_question` is dropped (warned). Raises
    InputError."""
    from elical.records import warn

    train_file, eval_file = _dataset_files(Path(data_dir), name)
    questions = read_qa_file(eval_file, dataset=name)
    if train_file is None:
        return questions
    seen = {normalize_question(q["question"]) for q in questions}
    train = [{**q, "id": f"{name}/train/{q['source']['line']}", "side": "train"}
             for q in read_qa_file(train_file, dataset=name)]
    kept = [q for q in train if normalize_question(q["question"]) not in seen]
    if len(kept) < len(train):
        warn(f"{train_file}: {len(train) - len(kept)} training question(s) also in {eval_file.name} dropped")
    return [{**q, "side": "test"} for q in questions] + kept


def load_questions(datasets: Sequence[str], data_dir: str | Path | None = None,
                   mmlu_dir: str | Path | None = None) -> dict[str, list[dict]]:
    """``{dataset: questions}`` for each named dataset (see :func:`load_dataset`)."""
    return {name: load_dataset(name, data_dir, mmlu_dir) for name in datasets}


def select_run_questions(by_dataset: dict[str, list[dict]], n_train: int, n_eval: int, seed: int,
                         extra_pool: Sequence[str] = ()) -> list[dict]:
    """Pick a seeded training pool and evaluation set.

    Per dataset, ``n_eval`` questions from its hash ``test`` part; per pool dataset (in-domain, see
    :mod:`elical.data.groups`, or a dataset in no group named in ``extra_pool``), ``n_train / number of pool
    datasets`` (rounded up) from its ``train`` part. Out-of-domain and unseen datasets, and datasets in no group
    not named in ``extra_pool``, give evaluation questions only. Draws with ``random.Random(seed)``. Returns
    copies with ``split`` set to ``"train"`` or ``"test"``. Raises InputError when a dataset has too few questions
    on a side, when no dataset may feed the pool, or when ``extra_pool`` names an out-of-domain or unseen dataset.
    """
    for name in extra_pool:
        if group_of(name) is not None and group_of(name) != "in_domain":
            raise InputError("--pool-datasets", None, "--pool-datasets",
                             f"'{name}' is {group_of(name).replace('_', '-')}: evaluation only (training pools "
                             "come from in-domain datasets only)")
    pool_names = [name for name in sorted(by_dataset) if pool_eligible(name, extra_pool)]
    if not pool_names:
        raise InputError("--datasets", None, "--datasets",
                         f"no in-domain dataset among {', '.join(sorted(by_dataset))} to draw the training pool "
                         "from (out-of-domain sets and MMLU are evaluation only); add one (e.g. nq or facts), or "
                         "name a dataset of your own with --pool-datasets")
    rng = random.Random(seed)
    per_train = -(-n_train // len(pool_names))
    chosen = []
    for name in sorted(by_dataset):
        sides = {"train": [], "test": []}
        for q in by_dataset[name]:  # a released training split fixes the side; else the hash does
            side = q.get("side") or hash_split(q["question"])
            sides[side].append({k: v for k, v in q.items() if k != "side"})
        wanted = (("train", per_train),) if name in pool_names else ()
        for side, n in (*wanted, ("test", n_eval)):
            pool = sides[side]
            if len(pool) < n:
                raise InputError(name, None, "--n-train" if side == "train" else "--n-eval",
                                 f"{len(pool)} questions on the {side} side of '{name}', {n} asked")
            for q in rng.sample(pool, n):
                chosen.append({**q, "split": side})
    return chosen
