"""Markdown tables of evaluation results (methods x metrics with bootstrap intervals)."""

from __future__ import annotations

__all__ = ["format_table", "headline_methods"]


def _num(x) -> float:
    return float("nan") if x is None else float(x)


def headline_methods(methods) -> list[str]:
    """The rows of the printed table: every method but the post-hoc calibrated baselines, of which only the
    isotonic versions of Consis-Sem and Eli-Only are shown (all are in results.json and the report)."""
    return [m for m in methods if "+" not in m or m.startswith(("Consis-Sem+Isotonic", "Eli-Only+Isotonic"))]


def format_table(results: dict, title: str = "", methods=None) -> str:
    """Markdown table, methods x the headline metrics (AUROC, ECE, Alignment, Brier:
    :func:`elical.evaluation.headline_metrics`), each with its 95 % bootstrap interval."""
    from elical.evaluation import METRICS, headline_metrics

    keys = headline_metrics()
    lines = [f"### {title}" if title else "", "", "| method | " + " | ".join(METRICS[k].info["title"] for k in keys)
             + " |", "|---" * (len(keys) + 1) + "|"]
    for method in methods or results:
        m = results[method]
        cells = []
        for key in keys:
            lo, hi = (_num(v) for v in m.get("ci", {}).get(key, [None, None]))
            cells.append(f"{_num(m[key]):.3f} [{lo:.2f}, {hi:.2f}]")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines).strip() + "\n"
