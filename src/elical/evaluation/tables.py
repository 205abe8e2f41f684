"""Markdown tables of evaluation results (methods x metrics with bootstrap intervals)."""

from __future__ import annotations

__all__ = ["format_table", "headline_methods"]


def _num(x) -> float:
    return float("nan") if x is None else float(x)


def headline_methods(methods) -> list[str]:
    """The rows of the printed table: every method but the post-hoc calibrated baselines, of which only
    Consis-Sem's isotonic version is shown (all are in results.json and the report)."""
    return [m for m in methods if "+" not in m or m.startswith("Consis-Sem+Isotonic")]


def format_table(results: dict, title: str = "", methods=None) -> str:
    """Markdown table, methods x (AUROC, ECE, Alignment, Brier), each with its 95 % bootstrap interval."""
    lines = [f"### {title}" if title else "", "", "| method | AUROC | ECE | Alignment | Brier |",
             "|---|---|---|---|---|"]
    for method in methods or results:
        m = results[method]
        cells = []
        for key in ("auroc", "ece", "alignment", "brier"):
            lo, hi = (_num(v) for v in m.get("ci", {}).get(key, [None, None]))
            cells.append(f"{_num(m[key]):.3f} [{lo:.2f}, {hi:.2f}]")
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return "\n".join(lines).strip() + "\n"
