"""Markdown tables of evaluation results (methods x metrics with bootstrap intervals)."""

from __future__ import annotations

__all__ = ["format_table", "format_alignment_protocols", "alignment_protocol_tables", "headline_methods"]


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


def format_alignment_protocols(results: dict, title: str = "", methods=None) -> str:
    """Markdown table of Alignment under both protocols (methods with ``alignment_paper``, from
    ``score_methods(..., alignment_protocol="paper")``): elical's (seeded random dev part, every distinct
    confidence) and the paper's (first 20 % in file order, grid 0.01-0.99), each with its threshold; "" when no
    method has the paper's value."""
    rows = [m for m in (methods or results) if isinstance(results[m], dict) and "alignment_paper" in results[m]]
    if not rows:
        return ""
    lines = [f"### {title}" if title else "", "", "| method | Alignment (elical) | threshold | Alignment (paper) | "
             "threshold (paper) |", "|---|---|---|---|---|"]
    for method in rows:
        m = results[method]
        paper_t = m.get("threshold_paper")
        shown = f"{paper_t:.2f}" if paper_t is not None else "per dataset"
        lines.append(f"| {method} | {_num(m['alignment']):.3f} | {_num(m['threshold']):.3f} | "
                     f"{_num(m['alignment_paper']):.3f} | {shown} |")
    return "\n".join(lines).strip() + "\n"


def alignment_protocol_tables(metrics: dict) -> str:
    """:func:`format_alignment_protocols` of every group of ``metrics`` ({group: {method: dict}}), each preceded
    by a blank line; "" when no method has the paper's Alignment."""
    return "".join("\n" + t for g, m in metrics.items()
                   if (t := format_alignment_protocols(m, f"Alignment, both protocols: {g}", headline_methods(m))))
