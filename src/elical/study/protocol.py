"""The HonestyBench study's fitting loop (Ni et al., arXiv 2510.17509, Sec. 5-6) on one run directory.

Per seed: stage 1 (Eli-Only) once on the pool's self-consistency; one seeded nested label order shared by every
label-using method; per k, Cal-Only(k), EliCal(k), Eli-Only + Platt / isotonic(k) and Consis-Sem + isotonic(k),
all on the same first k pool questions with the same label target; per pool size of the elicitation curve, Eli-Only
on the first m questions of an independent nested order of the pool. The training-free estimators come from the
run (``predictions.jsonl``), aligned by record id. Each (target, seed) is written as one part file
(``study/parts/<target>_seed<s>.npz``: the evaluation ids and every method's confidences), so a killed study
resumes where it stopped. Evaluation labels are never read here.

With ``elical study --layer 8,15,-1 [--pooling last,mean]`` the run also writes the hidden states of those layers
(:mod:`elical.jobs.layers`), and every seed and target fits Eli-Only, Cal-Only(k) and EliCal(k) on each of them as
well, on the same nested label sets, named ``Eli-Only [L8]``, ``EliCal(64) [L15 mean]``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from elical.fileio import atomic_path
from elical.records import InputError

__all__ = ["StudyInputs", "load_inputs", "label_sets_for", "fit_part", "fit_elicitation", "part_path",
           "read_part", "write_part", "CALIBRATED"]

#: The post-hoc calibrated rivals of EliCal fitted at every k: (estimator, calibrator).
CALIBRATED = (("Eli-Only", "Platt"), ("Eli-Only", "Isotonic"), ("Consis-Sem", "Isotonic"))
_IDS = "__ids__"


@dataclass
class StudyInputs:
    """What the study reads from a run directory. Shapes: n_pool pool questions, n evaluation questions, d
    features. ``training_free``: {estimator: confidences of shape (n,)} aligned with ``test_ids``."""

    pool: list[dict]
    test: list[dict]
    X_pool: np.ndarray  # (n_pool, d) float32
    X_test: np.ndarray  # (n, d) float32
    c_cons: np.ndarray  # (n_pool,) self-consistency of the pool
    consis_sem_pool: np.ndarray  # (n_pool,) Consis-Sem of the pool (the calibrated baseline's training scores)
    training_free: dict[str, np.ndarray]
    head: str
    #: {tag: (X_pool, X_test)} of the other layers and poolings ("L8", "L15 mean"), float32, rows as above
    extra: dict = field(default_factory=dict)

    @property
    def test_ids(self) -> list[str]:
        return [r["id"] for r in self.test]


def load_inputs(run_dir) -> StudyInputs:
    """Records, hidden states and training-free confidences of a finished ``elical run`` directory.

    Raises InputError naming the file for a missing or malformed file, a record without a hidden state, a
    training-free method scored on other questions than the evaluation records, or an out-of-domain / MMLU
    question in the training pool (pools come from in-domain sets only). The run's other layers and poolings
    (config.json ``layers`` / ``pooling``) are read from its ``features/hidden_states.layer-*.safetensors`` into
    ``extra``."""
    from elical.data.groups import group_of
    from elical.estimators import estimate
    from elical.evaluation.scoring import align_by_id
    from elical.jobs.sweep import load_run

    run_dir = Path(run_dir)
    pool, test, X_pool, X_test, c_cons, _ = load_run(run_dir, "greedy")
    for r in pool:
        if group_of(r.get("dataset", "")) in ("out_of_domain", "unseen"):
            raise InputError(run_dir / "records" / "annotations.jsonl", None, "split",
                             f"record {r['id']} of {r['dataset']} is in the training pool; out-of-domain sets and "
                             "MMLU are evaluation only")
    results_path, pred_path = run_dir / "results.json", run_dir / "predictions.jsonl"
    for path in (results_path, pred_path):
        if not path.is_file():
            raise InputError(path, None, None, "missing; the run directory is not finished (run it with --resume)")
    results = json.loads(results_path.read_text(encoding="utf-8"))
    names = list(results.get("estimators", {}).get("training_free", []))
    rows: dict[str, list[dict]] = {name: [] for name in names}
    with open(pred_path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            row = json.loads(line)
            if row.get("method") in rows:
                rows[row["method"]].append(row)
    ids = [r["id"] for r in test]
    training_free = {}
    for name in names:
        try:
            training_free[name] = align_by_id(ids, rows[name], name)
        except ValueError as exc:
            raise InputError(pred_path, None, "id", str(exc)) from None
    run_cfg = results.get("config", {})
    extra = {}
    if run_cfg.get("layers") is not None or run_cfg.get("pooling", "last") != "last":
        from elical.jobs.layers import run_dir_features

        feats = run_dir_features(run_dir, run_cfg, pool + test, run_cfg.get("layers"), run_cfg.get("pooling", "last"))
        extra = {tag: (f[:len(pool)], f[len(pool):]) for tag, f in feats.items()}
    return StudyInputs(pool=pool, test=test, X_pool=X_pool, X_test=X_test, c_cons=c_cons,
                       consis_sem_pool=np.asarray(estimate("Consis-Sem", pool).confidence, dtype=np.float64),
                       training_free=training_free, head=run_cfg.get("head", "linear"), extra=extra)


def label_sets_for(n_pool: int, k_values, seed: int) -> dict[int, np.ndarray]:
    """{k: sorted pool indices}: :func:`elical.heads.protocol.label_sets` of ``random_label_order(n_pool, seed)``
    ("all" and values above the pool mean the whole pool). Nested in k; the same for every method and target."""
    from elical.heads.labeling import random_label_order
    from elical.heads.protocol import label_sets

    return label_sets(random_label_order(n_pool, seed), k_values)


def part_path(study_dir, name: str) -> Path:
    return Path(study_dir) / "parts" / f"{name}.npz"


def write_part(path: Path, ids: list[str], confidences: dict[str, np.ndarray], meta: dict) -> None:
    """Atomically write one part: the evaluation ids, each method's confidences (float64) and a JSON ``meta``."""
    arrays = {name: np.asarray(c, dtype=np.float64) for name, c in confidences.items()}
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:  # a file object: np.savez would add ".npz" to a name
        np.savez(fh, **{_IDS: np.array(ids), "__meta__": np.array(json.dumps(meta)), **arrays})


def read_part(path: Path) -> tuple[list[str], dict[str, np.ndarray], dict]:
    """(ids, {method: confidences}, meta) of a part file."""
    with np.load(path, allow_pickle=False) as z:
        ids = [str(v) for v in z[_IDS]]
        meta = json.loads(str(z["__meta__"]))
        return ids, {k: z[k] for k in z.files if k not in (_IDS, "__meta__")}, meta


def _stages(inputs: StudyInputs, seed: int):
    from elical.heads.stages import probe_stages

    if inputs.head not in ("linear", "mlp"):
        raise InputError("--head", None, "--head", f"the study trains probe heads (linear, mlp); got {inputs.head!r}")
    return probe_stages(inputs.head, random_state=seed)


def fit_part(inputs: StudyInputs, target: str, seed: int, k_values, eli=None) -> tuple[dict[str, np.ndarray], dict]:
    """Every label-using method of one (target, seed) and Eli-Only; returns ({method: confidences (n,)}, the
    fitted stage-1 heads {None: primary, tag: other feature set}, to reuse for the other target of the seed).
    Method names: "Eli-Only", "Cal-Only(k)", "EliCal(k)", "Eli-Only+Platt(k)", "Eli-Only+Isotonic(k)",
    "Consis-Sem+Isotonic(k)", and per other feature set (``inputs.extra``) "Eli-Only [tag]", "Cal-Only(k) [tag]",
    "EliCal(k) [tag]" on the same label sets."""
    from elical.heads.labeling import label_targets
    from elical.heads.protocol import calibrated_rivals, fit_heads
    from elical.jobs.heads_stage import tagged

    stages = _stages(inputs, seed)
    eli = dict(eli or {})
    y = label_targets(inputs.pool, target)
    sets = label_sets_for(len(inputs.pool), k_values, seed)
    out = {}
    for tag, (X_pool, X_test) in {None: (inputs.X_pool, inputs.X_test), **inputs.extra}.items():
        for fitted in fit_heads(stages, X_pool, inputs.c_cons, y, sets, eli=eli.get(tag)):
            eli[tag] = fitted.head if fitted.k is None else eli[tag]
            out[tagged(fitted.name, tag)] = fitted.head.predict(X_test)
    train = {"Eli-Only": eli[None].predict(inputs.X_pool), "Consis-Sem": inputs.consis_sem_pool}
    test = {"Eli-Only": out["Eli-Only"], "Consis-Sem": inputs.training_free["Consis-Sem"]}
    out.update(calibrated_rivals(train, test, y, sets, pairs=CALIBRATED))
    return out, eli


def fit_elicitation(inputs: StudyInputs, seed: int, pool_sizes, eli_all=None) -> dict[str, np.ndarray]:
    """Eli-Only trained on the first m pool questions of a nested order drawn from a stream independent of the
    label order, for each m in ``pool_sizes`` below the pool size and for the whole pool (``eli_all`` when given).
    Returns {"Eli-Only@m": confidences (n,)}. No label is read (the paper's elicitation analysis, Sec. 6)."""
    n_pool = len(inputs.pool)
    order = np.random.default_rng([seed, 1]).permutation(n_pool)
    stages = _stages(inputs, seed)
    out = {}
    for m in sorted({int(m) for m in pool_sizes if 0 < int(m) < n_pool}):
        idx = np.sort(order[:m])
        out[f"Eli-Only@{m}"] = stages.eli_only(inputs.X_pool[idx], inputs.c_cons[idx]).predict(inputs.X_test)
    head = eli_all if eli_all is not None else stages.eli_only(inputs.X_pool, inputs.c_cons)
    out[f"Eli-Only@{n_pool}"] = head.predict(inputs.X_test)
    return out
