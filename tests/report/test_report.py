"""Tests for ``elical report``: tables, figures and the offline HTML page, from a recorded real run and a
synthetic multi-dataset run; the page is rendered in a real headless Chromium when one is installed."""

import base64
import csv
import hashlib
import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from elical.cli import main
from elical.evaluation.metrics import evaluate_confidence
from elical.report.page import build_report, parse_method

# results.json and predictions.jsonl of a real `elical run --preset smoke` (SmolLM2-135M on 32 facts questions).
REAL_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "report_smoke_run"
CHROMIUM = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome") if shutil.which(n)),
                None)


def _copy_real_run(dst: Path) -> Path:
    dst.mkdir(parents=True)
    for name in ("results.json", "predictions.jsonl"):
        shutil.copy(REAL_RUN / name, dst / name)
    return dst


@pytest.fixture(scope="module")
def real_report(tmp_path_factory):
    run = _copy_real_run(tmp_path_factory.mktemp("real") / "run")
    before = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.iterdir()}
    assert main(["report", str(run)]) == 0
    after = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run.iterdir() if p.is_file()}
    assert after == before  # the run's own files are only read
    return run, run / "report"


def _img_sources(page: str) -> list[str]:
    return re.findall(r'<img src="([^"]+)"', page)


# ---------------------------------------------------------------------------------------------- method names
def test_parse_method():
    assert parse_method("EliCal(64)") == ("EliCal", 64)
    assert parse_method("Cal-Only(16)") == ("Cal-Only", 16)
    assert parse_method("Cal-Only(all=600)") == ("Cal-Only", 600)
    assert parse_method("Consis-Sem+Isotonic(16)") == ("Consis-Sem+Isotonic", 16)
    assert parse_method("N-Prob") == ("N-Prob", None)
    assert parse_method("Eli-Only") == ("Eli-Only", None)
    assert parse_method("P(True)") == ("P(True)", None)


# ------------------------------------------------------------------------------------------------ a real run
def test_report_of_a_real_run_tables_match_results(real_report):
    run, out = real_report
    results = json.loads((run / "results.json").read_text())["results"]
    methods = list(results["all"])
    assert sorted(p.name for p in (out / "figures").iterdir()) == [
        "metric_vs_k_all.png", "reliability_cal_only.png", "reliability_elical.png",
        "reliability_training_free_and_eli_only.png"]
    md = (out / "metrics.md").read_text()
    m = results["all"]["EliCal(8)"]
    lo, hi = m["ci"]["auroc"]
    assert f"| EliCal(8) | 32 | {m['auroc']:.3f} [{lo:.2f}, {hi:.2f}] | " in md
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    assert {r["method"] for r in rows} == set(methods)
    for r in rows:
        src = results[r["scope"]][r["method"]]
        assert float(r["value"]) == pytest.approx(src[r["metric"]], abs=0, nan_ok=True)
        if r["metric"] in src["ci"]:
            assert [float(r["ci_low"]), float(r["ci_high"])] == src["ci"][r["metric"]]
    assert {(r["method"], r["k"]) for r in rows if r["method"].startswith("Cal-Only")} == {
        ("Cal-Only(8)", "8"), ("Cal-Only(24)", "24"), ("Cal-Only(all=48)", "48")}
    rep = json.loads((out / "report.json").read_text(), parse_constant=lambda c: pytest.fail(f"{c} in JSON"))
    assert rep["results"]["all"]["N-Prob"]["auroc"] == results["all"]["N-Prob"]["auroc"]
    assert rep["honestybench"] == {} and rep["config"]["preset"] == "smoke"
    assert rep["versions"]["torch"].startswith("2.")


def test_reliability_bins_agree_with_results(real_report):
    # The bins come from predictions.jsonl and the ECE from results.json: they must tell the same story.
    run, out = real_report
    results = json.loads((run / "results.json").read_text())["results"]["all"]
    rel = json.loads((out / "report.json").read_text())["reliability"]
    assert list(rel) == list(results)
    for method, b in rel.items():
        assert sum(b["count"]) == results[method]["n"] == 32 and len(b["count"]) == 10
        gap = sum(n * abs(a - c) for n, a, c in zip(b["count"], b["accuracy"], b["mean_confidence"]) if n)
        assert gap / 32 == pytest.approx(results[method]["ece"], abs=1e-9)


def test_report_is_rebuilt_byte_for_byte(real_report, tmp_path):
    run, out = real_report  # nothing random, no timestamps: the same files give the same report
    again = build_report(run, tmp_path / "again")
    for rel in ("index.html", "metrics.md", "metrics.csv", "report.json", "figures/metric_vs_k_all.png"):
        assert (again / rel).read_bytes() == (out / rel).read_bytes(), rel


def test_html_is_self_contained(real_report):
    _, out = real_report
    page = (out / "index.html").read_text()
    figures = sorted((out / "figures").iterdir())
    sources = _img_sources(page)
    assert len(sources) == len(figures) == 4
    embedded = sorted(base64.b64decode(s.split(",", 1)[1]) for s in sources)
    assert embedded == sorted(p.read_bytes() for p in figures)
    assert all(s.startswith("data:image/png;base64,") for s in sources)
    assert not re.search(r'(src|href)="(?!data:|#)', page)  # nothing to fetch: no external file, no network
    assert "<script" not in page
    assert "EliCal(24)" in page and "Reliability diagrams" in page


@pytest.mark.skipif(CHROMIUM is None, reason="needs a headless Chromium to render the page (Debian: apt-get install "
                    "chromium); see docs/report.md for the documented check")
def test_html_renders_offline_in_headless_chromium(real_report, tmp_path):
    _, out = real_report
    # A probe copy of the page records, after the load event, how many images decoded with a non-zero width.
    probe = out / "probe.html"
    script = ('<script>addEventListener("load",()=>{const a=[...document.images];document.body.setAttribute('
              '"data-images",a.length+":"+a.filter(i=>i.complete&&i.naturalWidth>0).length+":"+'
              'a.map(i=>i.naturalWidth).join(","))})</script></body>')
    probe.write_text((out / "index.html").read_text().replace("</body>", script))
    flags = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--host-resolver-rules=MAP * ~NOTFOUND",
             f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=10000"]
    dom = subprocess.run(flags + ["--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=180).stdout
    found = re.search(r'data-images="(\d+):(\d+):([\d,]*)"', dom)
    assert found, f"no probe result in the DOM dump: {dom[:300]!r}"
    total, loaded, widths = int(found[1]), int(found[2]), [int(w) for w in found[3].split(",")]
    assert total == loaded == 4 and min(widths) > 400
    probe.unlink()
    shot = tmp_path / "shot.png"
    subprocess.run(flags + [f"--screenshot={shot}", "--window-size=1280,2400", (out / "index.html").as_uri()],
                   capture_output=True, timeout=180, check=True)
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[:2] == (2400, 1280) and pixels[..., :3].std() > 0.05  # a page, not a blank screen


# ------------------------------------------------------------------------------ several datasets (synthetic)
DATASETS = {"nq": 30, "hq": 20, "squad": 25, "mmlu": 12}
METHODS = ["N-Prob", "Eli-Only", "Cal-Only(4)", "EliCal(4)", "Cal-Only(16)", "EliCal(16)", "N-Prob+Platt(4)",
           "N-Prob+Platt(16)", "N-Prob+Isotonic(4)", "N-Prob+Isotonic(16)", "Cal-Only(all=32)"]


def _synthetic_run(path: Path, seed: int = 0) -> Path:
    """A run directory in the shape `elical run` writes, with HonestyBench dataset names and calibrated baselines."""
    rng = np.random.default_rng(seed)
    names = [d for d, n in DATASETS.items() for _ in range(n)]
    y = (rng.random(len(names)) < 0.4).astype(int)
    starts = np.cumsum([0, *DATASETS.values()])[:-1]
    y[starts], y[starts + 1] = 1, 0  # both classes in every dataset, so that every AUROC is defined
    conf = {m: np.clip(0.3 * y + 0.7 * rng.random(len(names)), 0, 1) for m in METHODS}
    ds = np.array(names)
    scopes = {"all": np.ones(len(names), bool), **{d: ds == d for d in DATASETS}}
    results = {s: {m: evaluate_confidence(y[mask], conf[m][mask], n_resamples=40) for m in METHODS}
               for s, mask in scopes.items()}
    path.mkdir(parents=True)
    (path / "results.json").write_text(json.dumps({
        "config": {"preset": "test", "model": "synthetic", "datasets": list(DATASETS)}, "versions": {}, "seed": seed,
        "sizes": {"train_pool": 32, "eval": len(names), "eval_accuracy": float(y.mean())}, "results": results}))
    with open(path / "predictions.jsonl", "w") as fh:
        for m in METHODS:
            for i, d in enumerate(names):
                fh.write(json.dumps({"id": f"{d}/{i}", "dataset": d, "method": m, "confidence": float(conf[m][i]),
                                     "greedy_correctness": int(y[i])}) + "\n")
    return path


def test_report_several_datasets_honestybench_aggregates(tmp_path):
    run = _synthetic_run(tmp_path / "run")
    out = build_report(run, tmp_path / "out")
    res = json.loads((run / "results.json").read_text())["results"]
    agg = json.loads((out / "report.json").read_text())["honestybench"]
    assert set(agg) == {"in_domain", "out_of_domain", "unseen"}
    for group, names in (("in_domain", ["hq", "nq"]), ("out_of_domain", ["squad"]), ("unseen", ["mmlu"])):
        for method in ("EliCal(16)", "N-Prob+Isotonic(4)"):
            a = agg[group][method]
            assert a["datasets"] == names and a["n"] == sum(DATASETS[d] for d in names)
            for key in ("auroc", "ece", "alignment", "brier"):
                hand = sum(DATASETS[d] * res[d][method][key] for d in names) / a["n"]
                assert a[key] == pytest.approx(hand, rel=1e-12)
    assert agg["unseen"]["N-Prob"]["auroc"] == pytest.approx(res["mmlu"]["N-Prob"]["auroc"], abs=1e-15)  # alone
    figures = {p.name for p in (out / "figures").iterdir()}
    assert {f"bars_{k}.png" for k in ("auroc", "ece", "alignment", "brier")} <= figures
    assert {f"metric_vs_k_{d}.png" for d in ["all", *DATASETS]} <= figures
    assert {"metric_vs_k_all_n_prob_calibrated.png", "reliability_n_prob_platt.png",
            "reliability_n_prob_isotonic.png"} <= figures
    assert len(_img_sources((out / "index.html").read_text())) == len(figures)
    md = (out / "metrics.md").read_text()
    assert "### HonestyBench In-domain (avg): hq, nq" in md and "### HonestyBench MMLU (unseen): mmlu" in md
    rows = list(csv.DictReader((out / "metrics.csv").open()))
    row = next(r for r in rows if r["scope"] == "avg:in_domain" and r["method"] == "EliCal(16)"
               and r["metric"] == "auroc")
    assert float(row["value"]) == pytest.approx(agg["in_domain"]["EliCal(16)"]["auroc"]) and row["ci_low"] == ""


# --------------------------------------------------------------------------------------------------- bad input
@pytest.mark.parametrize("damage, match", [
    (lambda run: (run / "predictions.jsonl").unlink(), r"predictions\.jsonl: missing"),
    (lambda run: (run / "results.json").write_text("{"), r"results\.json, line 1: malformed JSON"),
    (lambda run: (run / "results.json").write_text('{"results": {}}'), r"results\.json: field 'results'"),
    (lambda run: _edit_line(run, 2, lambda o: "{not json"), r"predictions\.jsonl, line 2: malformed JSON"),
    (lambda run: _edit_line(run, 3, lambda o: {**o, "confidence": 1.5}),
     r"predictions\.jsonl, line 3: field 'confidence': expected a number in \[0, 1\]"),
    (lambda run: _edit_line(run, 4, lambda o: {**o, "greedy_correctness": 2}),
     r"line 4: field 'greedy_correctness'"),
    (lambda run: _edit_line(run, 5, lambda o: {k: v for k, v in o.items() if k != "method"}),
     r"line 5: field 'method'"),
])
def test_bad_input_exit_2_and_earlier_report_untouched(tmp_path, capsys, damage, match):
    run = _copy_real_run(tmp_path / "run")
    (run / "report").mkdir()
    (run / "report" / "index.html").write_text("earlier report")
    damage(run)
    assert main(["report", str(run)]) == 2
    assert re.search(match, capsys.readouterr().err)
    assert (run / "report" / "index.html").read_text() == "earlier report"
    assert sorted(p.name for p in (run / "report").iterdir()) == ["index.html"]


def test_bad_input_missing_run_dir_and_missing_method(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope")]) == 2
    assert "run directory not found" in capsys.readouterr().err
    run = _copy_real_run(tmp_path / "run")
    lines = [ln for ln in (run / "predictions.jsonl").read_text().splitlines() if '"EliCal(8)"' not in ln]
    (run / "predictions.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["report", str(run)]) == 2
    assert "no predictions for ['EliCal(8)']" in capsys.readouterr().err


def _edit_line(run: Path, lineno: int, edit) -> None:
    path = run / "predictions.jsonl"
    lines = path.read_text().splitlines()
    new = edit(json.loads(lines[lineno - 1]))
    lines[lineno - 1] = new if isinstance(new, str) else json.dumps(new)
    path.write_text("\n".join(lines) + "\n")


def test_nan_metrics_are_reported_as_null_and_na(tmp_path):
    run = _copy_real_run(tmp_path / "run")
    res = json.loads((run / "results.json").read_text())
    res["results"]["all"]["N-Prob"]["auroc"] = math.nan  # e.g. one-class evaluation set
    res["results"]["all"]["N-Prob"]["ci"]["auroc"] = [math.nan, math.nan]
    res["results"]["all"]["Consis-Lex"]["ece"] = None  # a results file written with null instead of NaN
    (run / "results.json").write_text(json.dumps(res))
    out = build_report(run)
    assert out == run / "report"
    assert json.loads((out / "report.json").read_text())["results"]["all"]["N-Prob"]["auroc"] is None
    md = (out / "metrics.md").read_text()
    assert "| N-Prob | 32 | n/a |" in md and re.search(r"\| Consis-Lex \| 32 \| [0-9.]+ \[[0-9., ]+\] \| n/a \|", md)
