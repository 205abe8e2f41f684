"""Records and confidences in the layout the paper's official scripts read (``elical export --layout official``).

The official code (Ni et al., arXiv 2510.17509; ``honesty_alignment/prepare_label.py``, ``train_one_conf.py``,
``eval.py``) does not read the released HonestyBench lines: it reads the intermediate files of its own inference
scripts, one set per (dataset, split), under ``<base>/<model>/<dataset>/<split>_data/<qa>_qa/`` with the name stem
``<dataset>_<split>_<model>_<qa>_qa``:

- ``<stem>_0.0_0.95_50_sample_1.jsonl`` -- one line per question, the greedy answer: ``prompt``, ``question``,
  ``answer`` (gold aliases), ``response`` ([greedy answer]), ``tokens`` ([[token, ...]]), ``cumulative_logprobs``
  ([sum of the token log-probs]), ``logprobs`` ([[...]]). N-Prob there is ``exp(cumulative_logprobs[0] /
  len(tokens[0]))``.
- ``<stem>_0.0_0.95_50_sample_1_long_qa_judge.jsonl`` -- one line per question, the judge's verdict on the greedy
  answer: ``response`` ([text]); correct is ``1 - deal_judge_new(text)``, i.e. the text holds none of "no",
  "false", "unknown", "cannot", ... We write ``"Yes"`` (correct) or ``"No"``.
- ``<stem>_1.0_0.95_50_sample_<N>.jsonl`` -- one line per question, the N sampled answers: ``prompt``,
  ``question``, ``answer``, ``response`` ([N samples]); ``sampling_correctness`` is kept as an extra field (the
  official ``construct_right_answer_conf`` re-derives it by string match, ``has_answer``).
- ``<stem>_1.0_0.95_50_sample_<N>_for_greedy_consistency_res.jsonl`` -- N lines per question, in question order:
  ``response`` ([``"Yes"`` if the sample agrees with the greedy answer, else ``"No"``]); the official code groups
  them **by 20** (hard-coded), so it reads these files right only when N = 20.

``<qa>`` is ``long`` (``long_mc`` for MMLU, as ``eval.py`` names it). Confidences of a run go to
``<base>/<model>/eval/<method>/<dataset>/evaluation_results_test.jsonl``: one line per evaluation question in the
order of the greedy file, ``{"index", "predicted", "true_label"}`` (``true_label``: the share of correct samples,
the official training target). ``<base>/elical_official.json`` lists what was written and the method names.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Iterable

from elical.fileio import atomic_path, write_text_atomic
from elical.records import greedy_text

__all__ = ["MANIFEST", "official_stem", "qa_type", "write_official", "method_slug"]

MANIFEST = "elical_official.json"
_YES, _NO = "Yes", "No"


def qa_type(dataset: str) -> str:
    """``long_mc`` for MMLU (the official ``eval.py`` appends ``_mc``), ``long`` otherwise."""
    return "long_mc" if dataset.lower().startswith("mmlu") else "long"


def official_stem(dataset: str, split: str, model: str) -> str:
    """``<dataset>_<split>_<model>_<qa>_qa``, the stem of the official file names."""
    return f"{dataset}_{split}_{model}_{qa_type(dataset)}_qa"


def method_slug(method: str) -> str:
    """A directory name for a method: ``EliCal(64)`` -> ``EliCal_64``."""
    return re.sub(r"[^A-Za-z0-9.+-]+", "_", method).strip("_") or "method"


def _write_lines(path: Path, rows: Iterable[dict]) -> int:
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            n += 1
    return n


def _unit_files(records: list[dict], folder: Path, stem: str) -> dict[str, int]:
    """The four files of one (dataset, split); returns {file name: lines}."""
    n_samples = {len(r.get("sampling_response") or []) for r in records}
    n = max(n_samples) if n_samples else 0
    greedy = [{"id": r["id"], "prompt": r.get("prompt"), "question": r["question"], "answer": list(r["answer"]),
               "response": [greedy_text(r)], "tokens": [list(r.get("greedy_tokens") or [])],
               "cumulative_logprobs": [r.get("greedy_cumulative_logprobs")],
               "logprobs": [list(r.get("greedy_logprobs") or [])]} for r in records]
    judge = [{"id": r["id"], "response": [_YES if int(r["greedy_correctness"]) else _NO]} for r in records]
    samples = [{"id": r["id"], "prompt": r.get("prompt"), "question": r["question"], "answer": list(r["answer"]),
                "response": list(r.get("sampling_response") or []),
                "sampling_correctness": list(r.get("sampling_correctness") or [])} for r in records]
    consistency = ({"id": r["id"], "sample": j, "response": [_YES if int(v) else _NO]}
                   for r in records for j, v in enumerate(r.get("consistency_judgement") or []))
    names = {f"{stem}_0.0_0.95_50_sample_1.jsonl": greedy,
             f"{stem}_0.0_0.95_50_sample_1_long_qa_judge.jsonl": judge,
             f"{stem}_1.0_0.95_50_sample_{n}.jsonl": samples,
             f"{stem}_1.0_0.95_50_sample_{n}_for_greedy_consistency_res.jsonl": consistency}
    return {name: _write_lines(folder / name, rows) for name, rows in names.items()}


def write_official(units: dict[tuple[str, str], list[dict]], out, model: str,
                   predictions: dict[str, dict[str, float]] | None = None) -> dict:
    """Write ``units`` ({(dataset, split): records in order}) under ``out`` in the official layout (module
    docstring), and ``predictions`` ({method: {record id: confidence}}, scored on the ``test`` records) as the
    official evaluation files. ``model``: the model name in the paths (e.g. ``Qwen2.5-7B-Instruct``).

    Every file is written atomically (:func:`elical.fileio.atomic_path`). Returns the manifest also written to
    ``out/elical_official.json``: {"model", "files": {relative path: lines}, "n_samples": {dataset/split: N},
    "methods": {slug: method}, "note"}. Raises ValueError when a method lacks a confidence for a test record."""
    out = Path(out)
    files, n_samples = {}, {}
    for (dataset, split), records in units.items():
        folder = out / model / dataset / f"{split}_data" / f"{qa_type(dataset)}_qa"
        for name, n in _unit_files(records, folder, official_stem(dataset, split, model)).items():
            files[str((folder / name).relative_to(out))] = n
        n_samples[f"{dataset}/{split}"] = sorted({len(r.get("sampling_response") or []) for r in records})
    methods = {}
    for method, conf in (predictions or {}).items():
        slug = method_slug(method)
        methods[slug] = method
        for (dataset, split), records in units.items():
            if split != "test":
                continue
            missing = [r["id"] for r in records if r["id"] not in conf]
            if missing:
                raise ValueError(f"method {method}: no confidence for {len(missing)} test records, e.g. {missing[0]}")
            path = out / model / "eval" / slug / dataset / "evaluation_results_test.jsonl"
            rows = ({"index": i, "predicted": float(conf[r["id"]]),
                     "true_label": (sum(r["sampling_correctness"]) / len(r["sampling_correctness"])
                                    if r.get("sampling_correctness") else float(r["greedy_correctness"]))}
                    for i, r in enumerate(records))
            files[str(path.relative_to(out))] = _write_lines(path, rows)
    manifest = {"format": "elical.OfficialLayout", "model": model, "files": files, "n_samples": n_samples,
                "methods": methods,
                "note": "the official scripts group the consistency lines by 20: they need N = 20 samples"}
    write_text_atomic(out / MANIFEST, json.dumps(manifest, indent=2) + "\n")
    return manifest
