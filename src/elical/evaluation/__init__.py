"""Evaluation: metrics, HonestyBench aggregation, scoring by record id, tables.

``METRICS`` is the registry of the scored metrics, each entry a contract (:mod:`elical.evaluation.spec`): the
function computing it, its column title, its direction, whether it needs a dev split (a threshold chosen on the
dev part, scored on the test part), how its bootstrap interval is resampled, and where it is shown (headline
tables, metric-vs-k figures, the study's tables). ``evaluate_confidence`` (results.json), the tables, the report's
figures, the sweep and the study summary all loop over it, so adding a metric is one ``METRICS.add`` here (or in
a plug-in: :func:`elical.registry.load_plugins`).
"""

from elical.registry import Registry

__all__ = ["METRICS", "headline_metrics"]

METRICS = Registry("metric")
_M = "elical.evaluation.metrics:"
_D = "elical.evaluation.decision:"
_ROWS = _M + "batch_metrics"  # one vectorized pass computes these seven on a matrix of resamples
METRICS.add("auroc", _M + "auroc", summary="area under the ROC curve of confidence vs greedy correctness",
            title="AUROC", higher=True, headline=True, curve=True, study=True, rows=_ROWS)
METRICS.add("ece", _M + "ece", summary="expected calibration error, 10 equal-width bins (1.0 in the top bin)",
            title="ECE", higher=False, headline=True, curve=True, study=True, rows=_ROWS,
            params={"n_bins": 10, "strategy": "uniform"})
METRICS.add("ece_quantile", _M + "ece", summary="ECE with 10 equal-mass bins", title="ECE (equal-mass)",
            higher=False, rows=_ROWS, params={"n_bins": 10, "strategy": "quantile"})
METRICS.add("alignment", _M + "best_threshold", summary="accuracy of answer/abstain at a threshold chosen on a dev "
            "part", title="Alignment", higher=True, headline=True, curve=True, study=True, needs_dev=True,
            score=_M + "alignment_rows")
METRICS.add("brier", _M + "brier", summary="mean squared error of the confidence", title="Brier", higher=False,
            headline=True, curve=True, study=True, rows=_ROWS)
METRICS.add("aurc", _M + "aurc", summary="area under the risk-coverage curve", title="AURC", higher=False,
            curve=True, rows=_ROWS)
METRICS.add("acc@50", _M + "accuracy_at_coverage", summary="accuracy of the 50 % most confident answers",
            title="Acc@50", higher=True, rows=_ROWS, params={"coverage": 0.5})
METRICS.add("acc@80", _M + "accuracy_at_coverage", summary="accuracy of the 80 % most confident answers",
            title="Acc@80", higher=True, curve=True, rows=_ROWS, params={"coverage": 0.8})
# decisions (elical.evaluation.decision; docs/metrics.md): thresholds from the dev part, scored on the test part
METRICS.add("pr_auc", _D + "pr_auc", summary="average precision of ranking correct answers first", title="PR-AUC",
            higher=True, study=True, rows=_D + "pr_auc_batch")
for _name, _risk in (("cov@risk10", 0.1), ("cov@risk20", 0.2)):
    METRICS.add(_name, _D + "risk_threshold", summary=f"share answered at a dev threshold with error <= "
                f"{_risk:.0%}", title=_name.replace("cov", "Cov"), higher=True, needs_dev=True,
                score=_D + "coverage_at", params={"risk": _risk})
for _name, _cost, _title in (("util@1/9", 1 / 9, "Util(c=1/9)"), ("util@1", 1.0, "Util(c=1)"),
                             ("util@9", 9.0, "Util(c=9)")):
    METRICS.add(_name, _D + "utility_threshold", summary=f"utility +1 / -{_name[5:]} / 0 (correct / wrong / "
                "abstain)", title=_title, higher=True, needs_dev=True, score=_D + "utility_at",
                params={"cost": _cost})
METRICS.add("util_mean", _D + "utility_thresholds", summary="mean utility over the costs 1/9, 1, 9",
            title="Util (mean)", higher=True, needs_dev=True, score=_D + "mean_utility_at",
            params={"costs": (1 / 9, 1.0, 9.0)})


def headline_metrics() -> list[str]:
    """The metrics of the printed tables: AUROC, ECE, Alignment, Brier (the paper's three and Brier)."""
    return [name for name in METRICS if METRICS[name].info.get("headline", False)]
