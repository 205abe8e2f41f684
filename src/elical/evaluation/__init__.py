"""Evaluation: metrics, HonestyBench aggregation, scoring by record id, tables.

``METRICS`` is the registry of the scored metrics (name -> the function computing it on (y, confidence), with its
column title and direction). Tables, the sweep, the report's figures and ``CI_METRICS`` read it, so a new metric
is added in one module, :mod:`elical.evaluation.metrics` (its function, its point value and bootstrap values in
``evaluate_confidence``), plus its line here.
"""

from elical.registry import Registry

__all__ = ["METRICS", "headline_metrics"]

METRICS = Registry("metric")
_M = "elical.evaluation.metrics:"
# info: title (column title), higher (higher is better), headline (printed table, bars), curve (metric-vs-k figure)
METRICS.add("auroc", _M + "auroc", summary="area under the ROC curve of confidence vs greedy correctness",
            title="AUROC", higher=True, headline=True, curve=True)
METRICS.add("ece", _M + "ece", summary="expected calibration error, 10 equal-width bins (1.0 in the top bin)",
            title="ECE", higher=False, headline=True, curve=True)
METRICS.add("ece_quantile", _M + "ece", summary="ECE with 10 equal-mass bins", title="ECE (equal-mass)",
            higher=False, headline=False, curve=False)
METRICS.add("alignment", _M + "alignment", summary="accuracy of answer/abstain at a threshold chosen on a dev part",
            title="Alignment", higher=True, headline=True, curve=True)
METRICS.add("brier", _M + "brier", summary="mean squared error of the confidence", title="Brier", higher=False,
            headline=True, curve=True)
METRICS.add("aurc", _M + "aurc", summary="area under the risk-coverage curve", title="AURC", higher=False,
            headline=False, curve=True)
METRICS.add("acc@50", _M + "accuracy_at_coverage", summary="accuracy of the 50 % most confident answers",
            title="Acc@50", higher=True, headline=False, curve=False)
METRICS.add("acc@80", _M + "accuracy_at_coverage", summary="accuracy of the 80 % most confident answers",
            title="Acc@80", higher=True, headline=False, curve=True)
# decisions (elical.evaluation.decision; docs/metrics.md): thresholds from the dev part, scored on the test part
_D = "elical.evaluation.decision:"
METRICS.add("pr_auc", _D + "pr_auc", summary="average precision of ranking correct answers first", title="PR-AUC",
            higher=True, headline=False, curve=False)
METRICS.add("cov@risk10", _D + "risk_threshold", summary="share answered at a dev threshold with error <= 10 %",
            title="Cov@risk10", higher=True, headline=False, curve=False)
METRICS.add("cov@risk20", _D + "risk_threshold", summary="share answered at a dev threshold with error <= 20 %",
            title="Cov@risk20", higher=True, headline=False, curve=False)
METRICS.add("util@1/9", _D + "utility_threshold", summary="utility +1 / -1/9 / 0 (correct / wrong / abstain)",
            title="Util(c=1/9)", higher=True, headline=False, curve=False)
METRICS.add("util@1", _D + "utility_threshold", summary="utility +1 / -1 / 0 (correct / wrong / abstain)",
            title="Util(c=1)", higher=True, headline=False, curve=False)
METRICS.add("util@9", _D + "utility_threshold", summary="utility +1 / -9 / 0 (correct / wrong / abstain)",
            title="Util(c=9)", higher=True, headline=False, curve=False)
METRICS.add("util_mean", _D + "decision_metrics", summary="mean utility over the costs 1/9, 1, 9",
            title="Util (mean)", higher=True, headline=False, curve=False)


def headline_metrics() -> list[str]:
    """The metrics of the printed tables: AUROC, ECE, Alignment, Brier (the paper's three and Brier)."""
    return [name for name in METRICS if METRICS[name].info["headline"]]
