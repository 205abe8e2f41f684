"""``elical study``: the smoke preset end to end with the real model (protocol checks against the records, metrics
against scikit-learn), and the summary's arithmetic on hand-computed cases."""

import json

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from elical.cli import main
from elical.study.protocol import read_part
from elical.study.summary import _weighted, method_family, one_percent_k, summarize

IN_DOMAIN = {"nq", "hq", "2wikimultihopqa", "pararel_patterns", "tq"}  # the paper's in-domain sets (Sec. 5)


@pytest.fixture(scope="module")
def study(tmp_path_factory, shared_data):
    out = tmp_path_factory.mktemp("study") / "smoke"
    code = main(["study", "--preset", "smoke", "--output", str(out), "--quiet", "--layer=-1,8",
                 "--data-dir", str(shared_data / "honestybench-qa"), "--mmlu-dir", str(shared_data / "mmlu")])
    assert code == 0
    records = [json.loads(line) for line in (out / "run" / "records" / "annotations.jsonl").open()]
    return out, json.loads((out / "study.json").read_text()), records


@pytest.mark.slow
def test_pools_hold_in_domain_questions_only(study):
    out, s, records = study
    pool = [r for r in records if r["split"] == "train"]
    assert pool and {r["dataset"] for r in pool} <= IN_DOMAIN
    assert sorted(s["pool_ids"]) == sorted(r["id"] for r in pool)
    evaluated = {r["dataset"] for r in records if r["split"] == "test"}
    assert {"squad", "popqa", "mmlu"} <= evaluated  # out-of-domain sets and MMLU are evaluated ...
    assert not {"squad", "popqa", "mmlu"} & {r["dataset"] for r in pool}  # ... never pooled


@pytest.mark.slow
def test_every_method_is_scored_on_the_same_questions(study):
    out, s, records = study
    test_ids = [r["id"] for r in records if r["split"] == "test"]
    assert s["eval_ids"] == test_ids
    parts = sorted((out / "study" / "parts").glob("*.npz"))
    assert len(parts) == 2 * 3  # (two targets + the elicitation curve) x two seeds
    for path in parts:
        with np.load(path) as z:
            assert [str(v) for v in z["__ids__"]] == test_ids
            for name in z.files:
                if not name.startswith("__"):
                    assert z[name].shape == (len(test_ids),) and np.all((z[name] >= 0) & (z[name] <= 1))
    by_method = {}
    for line in (out / "run" / "predictions.jsonl").open():
        row = json.loads(line)
        by_method.setdefault(row["method"], []).append(row["id"])
    for method in ("N-Prob", "Consis-Sem"):
        assert sorted(by_method[method]) == sorted(test_ids)
    summary = s["targets"]["sample-accuracy"]["summary"]
    for method in ("N-Prob", "Eli-Only", "EliCal(4)", "Cal-Only(48)", "Eli-Only+Isotonic(16)"):
        n = sum(info["n"] for info in summary["datasets"].values())
        assert n == len(test_ids) and method in summary["methods"]


@pytest.mark.slow
def test_consis_sem_auroc_matches_scikit_learn(study):
    out, s, records = study
    summary = s["targets"]["greedy"]["summary"]
    checked = 0
    for dataset in summary["datasets"]:
        rows = [r for r in records if r["split"] == "test" and r["dataset"] == dataset]
        y = [r["greedy_correctness"] for r in rows]
        c = [float(np.mean(r["consistency_judgement"])) for r in rows]
        got = summary["methods"]["Consis-Sem"]["datasets"][dataset]["auroc"]["mean"]
        if 0 < sum(y) < len(y):
            assert got == pytest.approx(roc_auc_score(y, c), abs=1e-9)
            checked += 1
        else:
            assert got is None  # undefined (one class), stored as null
    assert checked >= 1


@pytest.mark.slow
def test_elical_group_auroc_is_the_weighted_mean_of_scikit_learn(study):
    out, s, records = study
    test = [r for r in records if r["split"] == "test"]
    with np.load(out / "study" / "parts" / "sample-accuracy_seed1.npz") as z:
        conf = z["EliCal(16)"]
    want = _in_domain_auroc(test, conf)
    got = s["targets"]["sample-accuracy"]["summary"]["methods"]["EliCal(16)"]["groups"]["in_domain"]["auroc"]
    if want is not None:
        assert got["per_seed"][1] == pytest.approx(want, abs=1e-9)


def _in_domain_auroc(test, conf):
    """scikit-learn's AUROC per in-domain dataset of the smoke preset, weighted by test size (None: undefined)."""
    values, weights = [], []
    for dataset in ("nq", "pararel_patterns"):
        idx = [i for i, r in enumerate(test) if r["dataset"] == dataset]
        y = [test[i]["greedy_correctness"] for i in idx]
        if 0 < sum(y) < len(y):
            values.append(roc_auc_score(y, conf[idx]))
            weights.append(len(idx))
    return np.average(values, weights=weights) if values else None


@pytest.mark.slow
def test_resume_reuses_everything_and_refuses_a_changed_config(study, capsys, shared_data, tmp_path):
    out, s, _ = study
    before = {p.name: p.stat().st_mtime_ns for p in (out / "study" / "parts").glob("*.npz")}
    assert main(["study", "--preset", "smoke", "--output", str(out), "--resume", "--quiet", "--layer=-1,8"]) == 0
    link = tmp_path / "shared-link"  # the same data through a symlink is the same config (real paths compared)
    link.symlink_to(shared_data, target_is_directory=True)
    assert main(["study", "--preset", "smoke", "--output", str(out), "--resume", "--quiet", "--layer=-1,8",
                 "--data-dir", str(link / "honestybench-qa"), "--mmlu-dir", str(link / "mmlu")]) == 0
    after = {p.name: p.stat().st_mtime_ns for p in (out / "study" / "parts").glob("*.npz")}
    assert before == after
    again = json.loads((out / "study.json").read_text())
    assert again["targets"] == s["targets"]
    assert main(["study", "--preset", "smoke", "--output", str(out), "--resume", "--seeds", "0,1,2",
                 "--layer=-1,8"]) == 2
    assert "seeds" in capsys.readouterr().err
    assert main(["study", "--preset", "smoke", "--output", str(out), "--resume", "--quiet"]) == 2  # layers differ
    assert "layers" in capsys.readouterr().err
    assert main(["study", "--preset", "smoke", "--output", str(out)]) == 2  # exists, no --resume
    assert (out / "report" / "index.html").is_file()


@pytest.mark.slow
def test_resume_refits_the_parts_of_another_stage2_rule(study, tmp_path, shared_data, monkeypatch):
    """Part files record the stage-2 rule they were fitted under: after a rule change a resume fits them again
    (and EliCal(16) of the smoke grid, below the new switch of 8 labels, becomes the full stage 2), instead of
    reading back EliCal confidences of the old rule."""
    import shutil

    from elical.heads import stage2

    out, s, _ = study
    copy = tmp_path / "smoke"
    shutil.copytree(out, copy)
    before = {p.name: p.stat().st_mtime_ns for p in (copy / "study" / "parts").glob("*.npz")}
    monkeypatch.setattr(stage2, "FULL_FROM_K", 8)
    assert main(["study", "--preset", "smoke", "--output", str(copy), "--resume", "--quiet", "--layer=-1,8",
                 "--data-dir", str(shared_data / "honestybench-qa"), "--mmlu-dir", str(shared_data / "mmlu")]) == 0
    after = {p.name: p.stat().st_mtime_ns for p in (copy / "study" / "parts").glob("*.npz")}
    assert before.keys() == after.keys() and all(after[n] != before[n] for n in before)
    ids, conf, meta = read_part(copy / "study" / "parts" / "sample-accuracy_seed0.npz")
    assert meta["stage2"] == {"rule": "affine<512", "full_from_k": 8}
    _, old, _ = read_part(out / "study" / "parts" / "sample-accuracy_seed0.npz")
    np.testing.assert_array_equal(conf["EliCal(4)"], old["EliCal(4)"])  # 4 < 8: still the affine map
    assert not np.allclose(conf["EliCal(16)"], old["EliCal(16)"])  # 16 >= 8: now the full stage 2


def test_bad_targets_and_seeds_exit_2(tmp_path, capsys):
    assert main(["study", "--preset", "smoke", "--output", str(tmp_path / "a"), "--targets", "accuracy"]) == 2
    assert main(["study", "--preset", "smoke", "--output", str(tmp_path / "b"), "--seeds", "1,x"]) == 2
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_weighted_mean_skips_undefined_datasets():
    w = np.array([100.0, 300.0, 50.0])
    assert _weighted([0.6, 0.8, float("nan")], w) == pytest.approx((0.6 * 100 + 0.8 * 300) / 400)
    assert np.isnan(_weighted([float("nan")] * 3, w))
    cols = _weighted(np.array([[0.5, 1.0], [1.0, float("nan")]]), np.array([1.0, 3.0]))
    assert cols == pytest.approx([0.875, 1.0])


@pytest.mark.slow
def test_per_layer_heads_on_layer_8_states(study, smollm2):
    import torch

    from elical.generation.features import load_features

    out, s, records = study
    assert s["feature_tags"] == ["L8"]
    test = [r for r in records if r["split"] == "test"]
    # the L8 features are layer 8's hidden state of the last prompt token (transformers' own forward pass)
    model, tok = smollm2
    ids, feats, meta = load_features(out / "run" / "features" / "hidden_states.layer-8.last.safetensors")
    assert meta["layer"] == 8 and ids == [r["id"] for r in records]
    for i in (0, len(records) - 1):
        enc = tok(records[i]["prompt"], return_tensors="pt", add_special_tokens=False)
        with torch.inference_mode():
            want = model(**enc, output_hidden_states=True).hidden_states[8][0, -1].numpy()
        np.testing.assert_allclose(feats[i], want, rtol=1e-4, atol=1e-4)
    with np.load(out / "study" / "parts" / "sample-accuracy_seed0.npz") as z:
        layer8, final = z["EliCal(16) [L8]"], z["EliCal(16)"]
        assert {"Eli-Only [L8]", "Cal-Only(4) [L8]", "Cal-Only(48) [L8]"} <= set(z.files)
    assert not np.allclose(layer8, final)  # another layer's features give another head
    # its group AUROC is the test-size-weighted mean of scikit-learn's per-dataset AUROCs
    want = _in_domain_auroc(test, layer8)
    got = s["targets"]["sample-accuracy"]["summary"]["methods"]["EliCal(16) [L8]"]["groups"]["in_domain"]["auroc"]
    if want is not None:
        assert got["per_seed"][0] == pytest.approx(want, abs=1e-9)
    md = (out / "study.md").read_text()
    assert "### AUROC per layer and pooling, k = 4" in md
    assert "| primary (layer -1, last token) |" in md and "\n| L8 |" in md
    assert "EliCal [L8]" not in md.split("### AUROC per layer")[0]  # the paper-layout tables keep their columns


def test_one_percent_k_and_method_family():
    assert one_percent_k([4, 8, 16, 32, 64, 128, 5000], 5000) == 64  # 1 % of 5,000 = 50: log-closest is 64
    assert one_percent_k([16, 64, 256], 560_000) == 256
    assert method_family("EliCal(64)") == ("EliCal", 64)
    assert method_family("Eli-Only+Isotonic(16)") == ("Eli-Only+Isotonic", 16)
    assert method_family("Consis-Sem") == ("Consis-Sem", 0)
    assert method_family("EliCal(64) [L15 mean]") == ("EliCal [L15 mean]", 64)
    assert method_family("Eli-Only [L8]") == ("Eli-Only [L8]", 0)


def test_summarize_groups_and_seed_spread_by_hand():
    test = ([{"dataset": "nq", "greedy_correctness": v} for v in (1, 0, 1, 0)]
            + [{"dataset": "squad", "greedy_correctness": v} for v in (1, 1, 0, 0, 0, 0)])
    c_seed0 = np.array([0.9, 0.1, 0.8, 0.2, 0.7, 0.3, 0.6, 0.1, 0.2, 0.4])
    c_seed1 = np.array([0.1, 0.9, 0.8, 0.2, 0.7, 0.8, 0.6, 0.1, 0.2, 0.4])
    out = summarize(test, {"EliCal(2)": np.stack([c_seed0, c_seed1])}, n_resamples=50)
    m = out["methods"]["EliCal(2)"]
    # seed 0: nq AUROC 1.0; squad: positives 0.7, 0.3 vs negatives 0.6, 0.1, 0.2, 0.4 -> (4 + 2) / 8 = 0.75
    # seed 1: nq: positives 0.1, 0.8 vs negatives 0.9, 0.2 -> 1 / 4 = 0.25; squad: 0.7, 0.8 -> 8 / 8 = 1.0
    assert m["datasets"]["nq"]["auroc"]["per_seed"] == pytest.approx([1.0, 0.25])
    assert m["datasets"]["squad"]["auroc"]["per_seed"] == pytest.approx([0.75, 1.0])
    assert m["groups"]["in_domain"]["auroc"]["mean"] == pytest.approx(0.625)
    assert m["groups"]["out_of_domain"]["auroc"]["std"] == pytest.approx(np.std([0.75, 1.0], ddof=1))
    low, high = m["groups"]["in_domain"]["auroc"]["ci"]
    assert 0.0 <= low <= high <= 1.0
    assert out["groups"]["in_domain"]["n"] == 4 and out["datasets"]["squad"]["accuracy"] == pytest.approx(2 / 6)


def test_paired_differences_by_hand_and_against_an_independent_bootstrap():
    # One dataset, two seeds; EliCal(2) against Cal-Only(2) (same seeds) and Eli-Only (one row per seed too).
    y = np.array([1, 0, 1, 0, 0, 1, 0, 0])
    test = [{"dataset": "nq", "greedy_correctness": int(v)} for v in y]
    eli = np.array([0.9, 0.2, 0.7, 0.4, 0.3, 0.6, 0.5, 0.1])  # positives 0.9, 0.7, 0.6 above all five negatives
    elical = np.stack([eli, eli])  # keeps Eli-Only's ranking in both seeds
    cal = np.stack([1 - eli, eli[::-1]])
    B = 200
    out = summarize(test, {"Eli-Only": np.stack([eli, eli]), "EliCal(2)": elical, "Cal-Only(2)": cal}, n_resamples=B)
    p_cal = out["paired"]["EliCal(2) - Cal-Only(2)"]["groups"]["in_domain"]["auroc"]
    p_eli = out["paired"]["EliCal(2) - Eli-Only"]["groups"]["in_domain"]["auroc"]
    a_eli = roc_auc_score(y, eli)  # 15 / 15 = 1.0: every positive above every negative
    a_cal = [roc_auc_score(y, cal[0]), roc_auc_score(y, cal[1])]
    assert a_eli == 1.0 and a_cal[0] == 0.0
    assert p_cal["per_seed"] == pytest.approx([a_eli - a_cal[0], a_eli - a_cal[1]])
    assert p_eli["per_seed"] == [0.0, 0.0] and p_eli["distinguishable"] is False and p_eli["ci"] == [0.0, 0.0]
    # The paired interval from our own resampling: the same draws as summarize (seed 0, one dataset), scikit-learn
    # AUROC per resample, seeds averaged, difference of the two methods, resamples with one class dropped.
    idx = np.random.default_rng(0).integers(0, y.size, size=(B, y.size))
    diffs = []
    for r in idx:
        if y[r].min() == y[r].max():
            continue
        d = [roc_auc_score(y[r], elical[s][r]) - roc_auc_score(y[r], cal[s][r]) for s in range(2)]
        diffs.append(np.mean(d))
    assert p_cal["ci"] == pytest.approx(list(np.quantile(diffs, [0.025, 0.975])), abs=1e-9)
    assert p_cal["distinguishable"] is (p_cal["ci"][0] > 0)


def test_paired_table_and_headline_name_eli_only_and_distinguishable_differences():
    from elical.study.summary import headline
    from elical.study.tables import format_headline, format_paired

    rng = np.random.default_rng(4)
    y = rng.binomial(1, 0.3, 400)
    test = [{"dataset": "nq", "greedy_correctness": int(v)} for v in y]
    good = y + rng.normal(0, 0.6, 400)  # a ranking that carries y
    squash = 1 / (1 + np.exp(-good))
    methods = {"Eli-Only": np.stack([squash, squash]), "EliCal(4)": np.stack([squash, squash]),
               "Cal-Only(4)": rng.random((2, 400)), "Cal-Only(40)": np.stack([squash, squash])}
    summary = summarize(test, methods, n_resamples=200)
    table = format_paired(summary, "in_domain", "auroc", 40)
    row = [line for line in table.splitlines() if line.startswith("| 4 ")][0]
    # EliCal(4) - Cal-Only(4) is large and its interval excludes 0 (*); EliCal(4) - Eli-Only is exactly 0 (no *).
    cal_cell, eli_cell = row.split(" | ")[1:3]
    assert cal_cell.endswith("*") and float(cal_cell.split()[0]) > 0.2
    assert eli_cell.startswith("+0.000") and not eli_cell.endswith("*")
    h = headline(summary, 40, [4, 40])
    text = format_headline(h)
    assert "Eli-Only (no labels) / Cal-Only(all) = 100.0 %" in text
    assert "EliCal(4) - Cal-Only(4) in-domain" in text and ": distinguishable from zero" in text
    assert "EliCal(4) - Eli-Only in-domain +0.000 [+0.000, +0.000]: not distinguishable from zero" in text
