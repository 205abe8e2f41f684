"""Scoring methods on evaluation records: every method aligned by record id, then metrics per group.

One place for the group x method loop of ``elical run`` and ``elical evaluate``: each method's confidences are
put in the order of the evaluation records (by ``id``) before anything is computed, so a method read from
``predictions.jsonl`` and one recomputed from the records see the same questions in the same order -- and the
same seeded Alignment dev part (Ni et al., arXiv 2510.17509, Sec. 5; DESIGN.md protocol rules).
"""

from __future__ import annotations

import json
import os
from typing import Sequence

import numpy as np

from elical.fileio import atomic_path

__all__ = ["align_by_id", "score_methods", "write_predictions"]


def align_by_id(ids: Sequence[str], rows: Sequence[dict], method: str) -> np.ndarray:
    """Confidences of ``rows`` (dicts with ``id`` and ``confidence``) in the order of ``ids``.

    Returns an ndarray of shape (len(ids),). Raises ValueError naming the method and some ids when a row's id is
    duplicated, missing or not among ``ids``: every method must be scored on exactly the same questions."""
    by_id: dict[str, float] = {}
    for row in rows:
        rid = row.get("id")
        if rid in by_id:
            raise ValueError(f"method {method}: id {rid!r} appears twice")
        by_id[rid] = float(row["confidence"])
    missing = [i for i in ids if i not in by_id]
    extra = sorted(set(by_id) - set(ids), key=str)
    if missing or extra:
        raise ValueError(f"method {method}: scored on other questions than the evaluation records "
                         f"(missing {missing[:5]}{'...' if len(missing) > 5 else ''}, "
                         f"extra {extra[:5]}{'...' if len(extra) > 5 else ''})")
    return np.array([by_id[i] for i in ids], dtype=np.float64)


def score_methods(records: Sequence[dict], confidences: dict[str, np.ndarray], *, dev_fraction: float = 0.2,
                  seed: int = 0, n_resamples: int = 1000,
                  alignment_protocol: str = "elical") -> dict[str, dict[str, dict]]:
    """Metrics of every method on the group "all" and, with several datasets, on each dataset.

    records : evaluation records (``id``, ``dataset``, ``greedy_correctness``), length n.
    confidences : {method: ndarray of shape (n,)}, aligned with ``records`` (see :func:`align_by_id`).
    alignment_protocol : "elical" (the default), or "paper": each method's dict also gets ``alignment_paper``,
    ``n_dev_paper`` and ``threshold_paper`` (a dataset) or ``thresholds_paper`` (the group "all": per dataset),
    from :mod:`elical.evaluation.paper` on the records in the given order (each dataset's own first 20 %).
    Returns {group: {method: :func:`elical.evaluation.metrics.evaluate_confidence` dict}}.
    Raises ValueError (from the metrics) for a bad confidence array, naming the method and group."""
    from elical.evaluation.metrics import evaluate_confidence

    y = np.array([int(r["greedy_correctness"]) for r in records])
    ds = np.array([str(r.get("dataset", "")) for r in records])
    groups = {"all": np.ones(len(records), bool)}
    if len(set(ds)) > 1:
        groups.update({d: ds == d for d in sorted(set(ds))})
    out: dict[str, dict[str, dict]] = {}
    for group, mask in groups.items():
        for method, c in confidences.items():
            c = np.asarray(c, dtype=np.float64)
            if c.shape != y.shape:
                raise ValueError(f"method {method}: {c.shape[0]} confidences for {y.shape[0]} records")
            try:
                out.setdefault(group, {})[method] = evaluate_confidence(
                    y[mask], c[mask], dev_fraction=dev_fraction, seed=seed, n_resamples=n_resamples)
            except ValueError as exc:
                raise ValueError(f"method {method}, group {group}: {exc}") from None
            if alignment_protocol == "paper":
                out[group][method].update(_paper_row(y[mask], c[mask], ds[mask], dev_fraction))
            elif alignment_protocol != "elical":
                raise ValueError(f"alignment_protocol must be 'elical' or 'paper', got {alignment_protocol!r}")
    return out


def _paper_row(y: np.ndarray, c: np.ndarray, ds: np.ndarray, dev_fraction: float) -> dict:
    from elical.evaluation.paper import paper_alignment_grouped

    r = paper_alignment_grouped(y, c, ds, dev_fraction)
    row = {"alignment_paper": r["alignment"], "n_dev_paper": r["n_dev"]}
    if len(r["thresholds"]) == 1:
        row["threshold_paper"] = next(iter(r["thresholds"].values()))
    else:
        row["thresholds_paper"] = r["thresholds"]
    return row


def write_predictions(path: str | os.PathLike, records: Sequence[dict], confidences: dict[str, np.ndarray]) -> None:
    """Write ``predictions.jsonl`` atomically: one line per (method, record) with ``id``, ``dataset``,
    ``method``, ``confidence`` and ``greedy_correctness``."""
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as fh:
        for method, c in confidences.items():
            for r, v in zip(records, c):
                fh.write(json.dumps({"id": r["id"], "dataset": r.get("dataset", ""), "method": method,
                                     "confidence": float(v), "greedy_correctness": int(r["greedy_correctness"])},
                                    ensure_ascii=False) + "\n")
