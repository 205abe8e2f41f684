"""The page of ``elical report STUDY_DIR`` for a directory written by ``elical study``: the paper's figures and
tables (Ni et al., arXiv 2510.17509, Fig. 1 and Sec. 6), from ``study.json`` only, recomputing nothing.

- ``figures/study_<metric>_<target>.png``: the metric against the number k of labelled questions (log axis), one
  panel per group (in-domain, out-of-domain, MMLU); lines = mean over seeds, bands = ± the seeds' sample standard
  deviation; dashed lines = methods without labels;
- ``figures/study_elicitation.png``: Eli-Only's AUROC as a share of Consis-Sem's against the unlabelled pool size;
- ``study.md`` (the tables) and ``index.html`` (everything, figures embedded, opens offline).
"""

from __future__ import annotations

import base64
import html
import json
import math
from pathlib import Path

from elical.extras import require
from elical.fileio import write_bytes_atomic
from elical.records import InputError

__all__ = ["study_figures", "build_study_report", "markdown_to_html"]

_GROUPS = (("in_domain", "In-domain"), ("out_of_domain", "Out-of-domain"), ("unseen", "MMLU (unseen task)"))
_CURVES = ("Cal-Only", "EliCal", "Eli-Only+Platt", "Eli-Only+Isotonic", "Consis-Sem+Isotonic")
_FLAT = ("N-Prob", "Consis-Sem", "Eli-Only")
_COLORS = {"Cal-Only": "C0", "EliCal": "C3", "Eli-Only+Platt": "C2", "Eli-Only+Isotonic": "C4",
           "Consis-Sem+Isotonic": "C5", "N-Prob": "C7", "Consis-Sem": "C1", "Eli-Only": "C2"}


def _title(metric: str) -> str:
    from elical.evaluation import METRICS

    info = METRICS[metric].info
    return info["title"] + ("" if info["higher"] else " (lower is better)")


def _num(v) -> float:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else math.nan


def _png(fig) -> bytes:
    from elical.report.plots import _png as png  # the report's PNG settings

    return png(fig)


def _vs_k(summary: dict, metric: str, title: str, n_pool: int) -> bytes:
    Figure = require("matplotlib.figure", "report", "drawing the study's figures").Figure

    from elical.study.summary import method_family

    groups = [(g, t) for g, t in _GROUPS if g in summary["groups"]]
    ks = sorted({method_family(m)[1] for m in summary["methods"] if method_family(m)[1] > 0})
    fig = Figure(figsize=(5.2 * len(groups), 4.2))
    for i, (group, gtitle) in enumerate(groups):
        ax = fig.add_subplot(1, len(groups), i + 1)
        for family in _CURVES:
            pts = sorted((method_family(m)[1], s["groups"][group][metric]) for m, s in summary["methods"].items()
                         if method_family(m)[0] == family and method_family(m)[1] > 0)
            if not pts:
                continue
            x = [k for k, _ in pts]
            y = [_num(s["mean"]) for _, s in pts]
            sd = [_num(s.get("std")) if s.get("std") is not None else 0.0 for _, s in pts]
            ax.plot(x, y, "o-", color=_COLORS[family], lw=1.6, ms=3.5, label=family)
            ax.fill_between(x, [a - b for a, b in zip(y, sd)], [a + b for a, b in zip(y, sd)],
                            color=_COLORS[family], alpha=0.15, lw=0)
        for name in _FLAT:
            if name in summary["methods"]:
                ax.axhline(_num(summary["methods"][name]["groups"][group][metric]["mean"]), color=_COLORS[name],
                           ls="--", lw=1.1, label=name)
        ax.set_xscale("log")
        ax.set_xlim(ks[0] / 1.3, ks[-1] * 1.3)  # explicit: a panel whose values are all undefined has no data
        ax.set_xticks(ks, [str(k) for k in ks], fontsize=7)
        ax.minorticks_off()
        ax.set_xlabel(f"k labelled questions (log; pool {n_pool:,})", fontsize=8)
        ax.set_title(f"{gtitle}: {_title(metric)}", fontsize=10)
        ax.grid(alpha=0.3)
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.suptitle(title + " (band: ± seeds' std; dashed: no labels)", fontsize=11)
    fig.tight_layout()
    return _png(fig)


def _elicitation(study: dict) -> bytes:
    Figure = require("matplotlib.figure", "report", "drawing the study's figures").Figure

    eli = study["elicitation"]
    first = next(iter(study["targets"].values()))["summary"]
    sizes = sorted(int(m.split("@")[1]) for m in eli["methods"])
    fig = Figure(figsize=(6.5, 4.2))
    ax = fig.add_subplot(1, 1, 1)
    for i, (group, gtitle) in enumerate(g for g in _GROUPS if g[0] in eli["groups"]):
        cons = _num(first["methods"]["Consis-Sem"]["groups"][group]["auroc"]["mean"])
        stats = [eli["methods"][f"Eli-Only@{m}"]["groups"][group]["auroc"] for m in sizes]
        y = [_num(s["mean"]) / cons for s in stats]
        sd = [(_num(s.get("std")) if s.get("std") is not None else 0.0) / cons for s in stats]
        ax.plot(sizes, y, "o-", color=f"C{i}", label=f"{gtitle} (Consis-Sem AUROC {cons:.3f})")
        ax.fill_between(sizes, [a - b for a, b in zip(y, sd)], [a + b for a, b in zip(y, sd)], color=f"C{i}",
                        alpha=0.15, lw=0)
    ax.axhline(1.0, color="k", lw=0.8, ls=":")
    ax.set_xscale("log")
    ax.set_xlim(sizes[0] / 1.3, sizes[-1] * 1.3)
    ax.set_xlabel("unlabelled pool questions (log)")
    ax.set_ylabel("Eli-Only AUROC / Consis-Sem AUROC")
    ax.set_title("Elicitation: Eli-Only against the pool size (band: ± seeds' std)", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return _png(fig)


def _figure_metrics() -> list[str]:
    """The registry's metrics drawn against k (flags ``study`` and ``curve``: AUROC, ECE, Alignment, Brier)."""
    from elical.evaluation.spec import metric_names

    return [m for m in metric_names("study") if m in metric_names("curve")]


def study_figures(study: dict) -> dict[str, bytes]:
    """{file name: PNG bytes}: each metric of :func:`_figure_metrics` against k per label target, and the
    elicitation curve."""
    out = {}
    n_pool = study["sizes"]["pool"]
    for target, res in study["targets"].items():
        for metric in _figure_metrics():
            out[f"study_{metric}_{target}.png"] = _vs_k(res["summary"], metric, f"Label target {target}", n_pool)
    if study.get("elicitation"):
        out["study_elicitation.png"] = _elicitation(study)
    return out


def markdown_to_html(text: str) -> str:
    """The subset of markdown the study tables use: headings, bullet lists, pipe tables, paragraphs."""
    out, rows = [], []

    def flush():
        if rows:
            head, body = rows[0], rows[2:]
            out.append("<table><tr>" + "".join(f"<th>{html.escape(c)}</th>" for c in head) + "</tr>"
                       + "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in body)
                       + "</table>")
            rows.clear()

    for line in text.splitlines():
        if line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split("|")])
            continue
        flush()
        if line.startswith("#"):
            level = min(len(line) - len(line.lstrip("#")) + 1, 6)
            out.append(f"<h{level}>{html.escape(line.lstrip('#').strip())}</h{level}>")
        elif line.startswith("- "):
            out.append(f"<li>{html.escape(line[2:])}</li>")
        elif line.strip():
            out.append(f"<p>{html.escape(line)}</p>")
    flush()
    return "\n".join(out)


def build_study_report(study_dir, output=None) -> Path:
    """Write the study's figures, ``study.md`` and ``index.html`` into ``output`` (default ``study_dir/report``).
    Raises InputError when ``study.json`` is missing or unreadable."""
    from elical.study.tables import format_study

    path = Path(study_dir) / "study.json"
    try:
        study = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(path, None, None, f"not a readable study file ({exc}); run `elical study` first") from None
    out = Path(output) if output else Path(study_dir) / "report"
    figures = study_figures(study)
    md = format_study(study)
    imgs = "\n".join(f'<figure><img src="data:image/png;base64,{base64.b64encode(data).decode()}" alt="{name}">'
                     f"<figcaption>{name}</figcaption></figure>" for name, data in figures.items())
    page = ("<!doctype html><html><head><meta charset='utf-8'><title>elical study</title><style>"
            "body{font-family:sans-serif;max-width:1400px;margin:auto}table{border-collapse:collapse;font-size:12px}"
            "td,th{border:1px solid #ccc;padding:2px 6px}img{max-width:100%}</style></head><body>"
            + markdown_to_html(md) + "<h2>Figures</h2>" + imgs + "</body></html>")
    files = {**{f"figures/{n}": d for n, d in figures.items()}, "study.md": md, "index.html": page}
    for rel, data in files.items():
        write_bytes_atomic(out / rel, data.encode("utf-8") if isinstance(data, str) else data)
    return out
