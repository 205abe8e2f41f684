"""The metric registry is a contract: one ``METRICS.add`` puts a metric in results.json, table.md and the report
(computed on the recorded SmolLM2 run of tests/fixtures/smoke_run by ``elical evaluate``), and every registered
metric declares what the loop needs."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from elical.cli import main
from elical.evaluation import METRICS
from elical.evaluation.spec import metric_names, metric_spec

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "smoke_run"


def _share_above_half(y, c):
    return float(np.mean(np.asarray(c) > 0.5))


@pytest.fixture
def extra_metric():
    METRICS.add("above_half", _share_above_half, summary="share of confidences above 0.5", title="Above-half",
                higher=True, headline=True)
    yield "above_half"
    METRICS.remove("above_half")


def test_one_entry_reaches_results_table_and_report(tmp_path, extra_metric):
    run_dir = tmp_path / "run"
    shutil.copytree(RECORDED, run_dir)
    assert main(["evaluate", str(run_dir), "--estimators", "N-Prob,Consis-Lex", "--quiet"]) == 0
    results = json.loads((run_dir / "results.json").read_text())
    rows = [json.loads(line) for line in (run_dir / "predictions.jsonl").open()]
    for method in ("N-Prob", "Consis-Lex"):
        conf = np.array([r["confidence"] for r in rows if r["method"] == method])
        scored = results["results"]["all"][method]
        assert scored["above_half"] == pytest.approx(float(np.mean(conf > 0.5)))  # counted by hand here
        low, high = scored["ci"]["above_half"]  # every metric gets an interval by default
        assert 0.0 <= low <= high <= 1.0
    assert "Above-half" in (run_dir / "table.md").read_text()
    assert main(["report", str(run_dir)]) == 0
    html = (run_dir / "report" / "index.html").read_text()
    assert "Above-half" in html


def test_removed_entry_is_gone_everywhere():
    assert "above_half" not in metric_names()


def test_every_registered_metric_builds_from_its_declaration():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 50)
    c = rng.random(50)
    for name in metric_names():
        spec = metric_spec(name)
        assert isinstance(spec.title, str) and isinstance(spec.higher, bool)
        if spec.needs_dev:
            chosen = spec.compute(y[:10], c[:10], **spec.params)
            value = spec.score(y[10:], c[10:], chosen, **spec.params)
        else:
            value = spec.compute(y, c, **spec.params)
        assert np.isfinite(value), name


def test_a_bad_declaration_is_a_clear_error():
    METRICS.add("half_declared", _share_above_half, title="Half")
    try:
        with pytest.raises(ValueError, match="must declare higher"):
            metric_spec("half_declared")
    finally:
        METRICS.remove("half_declared")
    METRICS.add("dev_without_score", _share_above_half, title="x", higher=True, needs_dev=True)
    try:
        with pytest.raises(ValueError, match="must declare score"):
            metric_spec("dev_without_score")
    finally:
        METRICS.remove("dev_without_score")
