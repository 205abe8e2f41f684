"""`elical sweep` on a real small run directory: the recorded SmolLM2 answers and hidden states of
tests/fixtures/smoke_run (made by tests/fixtures/make_smoke_run.py), with heads, estimators and metrics computed by
`elical run --resume` from the current code (nothing is generated)."""
import csv
import json
import shutil
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from elical.cli import main
from elical.generation.features import load_features
from elical.heads.stages import fit_eli_only
from elical.heads.labeling import random_label_order, stratified_label_order
from elical.jobs.run import RunConfig, run
from elical.records import read_records, self_consistency
from elical.jobs.sweep import default_k_grid, run_sweep, summarised


RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "smoke_run"


def _recorded_config() -> RunConfig:
    saved = json.loads((RECORDED / "config.json").read_text())
    known = {f.name for f in fields(RunConfig)}
    return RunConfig(**{k: tuple(v) if isinstance(v, list) else v for k, v in saved.items() if k in known})


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A real run: SmolLM2-135M on 32 pool + 16 eval facts questions (smoke decoding), features included; the
    answers and hidden states are the recorded ones, the rest is computed now."""
    out = tmp_path_factory.mktemp("sweep") / "run"
    shutil.copytree(RECORDED, out)
    cfg = _recorded_config()
    (out / "config.json").write_text(json.dumps(asdict(cfg)))  # the fields added since the recording: defaults
    run(cfg, out, resume=True, progress=False)
    return out


@pytest.fixture(scope="module")
def swept(run_dir):
    return run_sweep(run_dir, k_values=[4, 8, 12, "all"], seeds=(0, 1), selections=("random", "stratified"))


def _pool_and_test(run_dir):
    recs = read_records(run_dir / "records" / "annotations.jsonl")
    ids, X, _ = load_features(run_dir / "features" / "hidden_states.safetensors")
    row = {r: i for i, r in enumerate(ids)}
    pool = [r for r in recs if r["split"] == "train"]
    test = [r for r in recs if r["split"] == "test"]
    return pool, test, X[[row[r["id"]] for r in pool]], X[[row[r["id"]] for r in test]]


def _row(result, method, selection, k):
    (r,) = [r for r in result["results"] if (r["method"], r["selection"], r["k"]) == (method, selection, k)]
    return r


def test_default_k_grid():
    assert default_k_grid(600) == [4, 8, 16, 32, 64, 128, 256, 512, 600]
    assert default_k_grid(64) == [4, 8, 16, 32, 64]
    assert default_k_grid(3) == [3]


def test_nested_same_subsets_and_refit_reproduces(run_dir, swept):
    pool, test, X_pool, X_test = _pool_and_test(run_dir)
    pool_ids, test_ids = [r["id"] for r in pool], {r["id"] for r in test}
    assert swept["sizes"]["pool"] == 32 and swept["sizes"]["eval"] == 16
    assert 0 < swept["sizes"]["eval_accuracy"] < 1  # both classes: AUROC is defined, the checks below bite
    assert swept["config"]["k_values"] == [4, 8, 12, 32]
    c_cons = np.array([self_consistency(r) for r in pool])
    y = np.array([r["greedy_correctness"] for r in test])
    for seed in (0, 1):
        eli = fit_eli_only(X_pool, c_cons, random_state=seed)
        expected = {"random": random_label_order(32, seed),
                    "stratified": stratified_label_order(eli.predict(X_pool), seed)}
        for sel, order in expected.items():
            saved = swept["label_orders"][sel][str(seed)]
            # one permutation of the pool per seed and selection: the k-sets are its prefixes, hence nested
            assert saved == [pool_ids[i] for i in order]
            assert not set(saved) & test_ids
        got = _row(swept, "Eli-Only", None, 0)["per_seed"][str(seed)]
        assert got["auroc"] == pytest.approx(roc_auc_score(y, eli.predict(X_test)))
    # `elical run` (seed 0, k = 8, random labels) trained its heads on its own path: the sweep's random-selection
    # row for seed 0 must score them identically (AUROC from sklearn on the run's predictions.jsonl).
    preds = [p for p in read_records(run_dir / "predictions.jsonl")]
    order = [r["id"] for r in test]
    for method in ("Eli-Only", "Cal-Only(8)", "EliCal(8)"):
        conf = {p["id"]: p["confidence"] for p in preds if p["method"] == method}
        want = roc_auc_score(y, [conf[i] for i in order])
        name, k = (method, 0) if method == "Eli-Only" else (method.split("(")[0], 8)
        row = _row(swept, name, None if k == 0 else "random", k)
        assert row["per_seed"]["0"]["auroc"] == pytest.approx(want), method
    # with every label the selection does not matter: the same set gives the same heads
    for method in ("Cal-Only", "EliCal"):
        assert _row(swept, method, "random", 32)["per_seed"] == _row(swept, method, "stratified", 32)["per_seed"]


def test_mean_and_std_are_over_the_per_seed_values(swept):
    rows = swept["results"]
    assert {(r["method"], r["selection"]) for r in rows} >= {("Eli-Only", None), ("N-Prob", None),
                                                             ("Consis-Sem", None), ("EliCal", "random"),
                                                             ("Cal-Only", "stratified")}
    for r in rows:
        assert r["n_seeds"] == 2 and set(r["per_seed"]) == {"0", "1"}
        for m in summarised():
            v = np.array([r["per_seed"][s][m] for s in ("0", "1")], dtype=float)
            if np.isnan(v).any():
                continue
            assert r["mean"][m] == pytest.approx((v[0] + v[1]) / 2)
            assert r["std"][m] == pytest.approx(abs(v[0] - v[1]) / np.sqrt(2))  # ddof=1 with two values
        assert r["label_fraction"] == pytest.approx(r["k"] / 32)
    assert _row(swept, "N-Prob", None, 0)["std"]["auroc"] == 0.0  # training-free: no seed dependence


def test_evaluation_labels_are_never_used_for_selection_or_training(run_dir, swept, tmp_path):
    # flip every evaluation label; label orders and confidences must stay, so AUROC becomes 1 - AUROC
    flipped = tmp_path / "flipped"
    shutil.copytree(run_dir, flipped)
    path = flipped / "records" / "annotations.jsonl"
    lines = []
    for r in read_records(path):
        if r["split"] == "test":
            r["greedy_correctness"] = 1 - r["greedy_correctness"]
            r["sampling_correctness"] = [1 - v for v in r["sampling_correctness"]]
        lines.append(json.dumps(r))
    path.write_text("\n".join(lines) + "\n")
    other = run_sweep(flipped, k_values=[4, 8, 12, "all"], seeds=(0, 1), selections=("random", "stratified"))
    assert other["label_orders"] == swept["label_orders"]
    for r in swept["results"]:
        o = _row(other, r["method"], r["selection"], r["k"])
        for s in ("0", "1"):
            a, b = r["per_seed"][s]["auroc"], o["per_seed"][s]["auroc"]
            if not np.isnan(a):
                assert b == pytest.approx(1.0 - a)


def test_cli_writes_json_and_csv_and_never_overwrites(run_dir, tmp_path, capsys):
    out = tmp_path / "s.json"
    args = ["sweep", str(run_dir), "--k", "4,all", "--seeds", "0", "--selection", "random", "--output", str(out),
            "--quiet"]
    assert main(args) == 0
    printed = capsys.readouterr().out
    assert "EliCal(4)" in printed and "Cal-Only(32)" in printed
    saved = json.loads(out.read_text())
    assert saved["config"]["seeds"] == [0] and set(saved["label_orders"]) == {"random"}
    with open(out.with_suffix(".csv"), newline="") as fh:
        rows = list(csv.DictReader(fh))
    # 3 training-free + Eli-Only + (Cal-Only, EliCal) x 2 ks
    assert len(rows) == 8 and rows[0]["auroc_std"] == ""  # one seed: no spread
    ec = [r for r in rows if r["method"] == "EliCal" and r["k"] == "4"][0]
    assert float(ec["auroc_mean"]) == pytest.approx(_row(saved, "EliCal", "random", 4)["mean"]["auroc"])
    before = out.read_text()
    assert main(args) == 2
    assert "--force" in capsys.readouterr().err and out.read_text() == before
    assert main(args + ["--force", "--seeds", "1"]) == 0
    assert json.loads(out.read_text())["config"]["seeds"] == [1]
    # a run directory without features: exit 2, nothing written
    empty = tmp_path / "empty"
    (empty / "records").mkdir(parents=True)
    shutil.copy(run_dir / "records" / "annotations.jsonl", empty / "records")
    assert main(["sweep", str(empty), "--quiet"]) == 2
    assert "hidden_states.safetensors" in capsys.readouterr().err and not (empty / "sweep.json").exists()


def test_calibrated_baselines_get_the_same_k_labels_and_target_as_elical(run_dir):
    # Consis-Sem+Isotonic(8) of the run must be sklearn's isotonic regression fitted on the 8 questions EliCal(8)
    # was given, with EliCal's target (sample accuracy, the default), not greedy correctness.
    from sklearn.isotonic import IsotonicRegression

    pool, test, _, _ = _pool_and_test(run_dir)
    idx = np.sort(random_label_order(len(pool), 0)[:8])
    c_acc = np.array([np.mean(r["sampling_correctness"]) for r in pool])
    says_something = lambda r: any(ch.isalnum() for ch in r["greedy_response"])  # noqa: E731
    cons = lambda recs: np.array([np.mean(r["consistency_judgement"]) if says_something(r) else 0.0  # noqa: E731
                                  for r in recs])
    iso = IsotonicRegression(increasing=True, out_of_bounds="clip", y_min=0.0, y_max=1.0)
    want = iso.fit(cons(pool)[idx], c_acc[idx]).predict(cons(test))
    preds = {p["id"]: p["confidence"] for p in read_records(run_dir / "predictions.jsonl")
             if p["method"] == "Consis-Sem+Isotonic(8)"}
    np.testing.assert_allclose([preds[r["id"]] for r in test], want, atol=1e-9)
    for head in ("elical_k8", "cal_only_k8"):
        assert json.loads((run_dir / "heads" / head / "fingerprint.json").read_text())["target"] == "sample-accuracy"
    assert any(p["method"] == "Eli-Only+Isotonic(8)" for p in read_records(run_dir / "predictions.jsonl"))


def test_resume_reuses_trained_heads_and_estimator_outputs(run_dir, tmp_path):
    # A finished run resumed with the same configuration trains no head and recomputes no estimator: every head
    # file and estimators.json stay byte for byte and untouched (same mtime), and the metrics are the same.
    copy = tmp_path / "resumed"
    shutil.copytree(run_dir, copy)
    files = sorted(p for p in copy.rglob("*") if p.is_file() and ("heads" in p.parts or p.name == "estimators.json"))
    before = {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files}
    res = run(_recorded_config(), copy, resume=True, progress=False)
    assert len(files) > 10 and {p: (p.read_bytes(), p.stat().st_mtime_ns) for p in files} == before
    old = json.loads((run_dir / "results.json").read_text())["results"]["all"]
    assert {m: v["auroc"] for m, v in res["results"]["all"].items()} == pytest.approx(
        {m: v["auroc"] for m, v in old.items()}, nan_ok=True)
