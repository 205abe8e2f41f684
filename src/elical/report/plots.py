"""Figures of ``elical report`` (matplotlib, Agg canvas, no pyplot state): reliability diagrams, metrics
against the number k of labelled questions, per-dataset bars. Each function returns PNG bytes; matplotlib is
imported inside the functions so that importing this module (done by every ``elical`` call) stays light.

Reliability diagrams follow Guo et al. (2017); the metric-vs-k view follows the EliCal paper's annotation-efficiency
plots (Ni et al., arXiv 2510.17509, Sec. 5); the HonestyBench averages are :func:`elical.evaluation.aggregate.aggregate`.
"""

from __future__ import annotations

import io
import math
import re

from elical.evaluation import METRICS as _REGISTRY
from elical.evaluation import headline_metrics
from elical.extras import require

__all__ = ["metric_columns", "GROUP_TITLES", "parse_method", "is_tagged", "slug", "reliability_figures", "vs_k_selections",
           "metric_vs_k_figure", "headline_methods", "bar_figures"]

GROUP_TITLES = {"in_domain": "In-domain (avg)", "out_of_domain": "Out-of-domain (avg)", "unseen": "MMLU (unseen)",
                "other": "Other (avg)"}
_K_NAME = re.compile(r"^(?P<family>.+?)\((?P<all>all=)?(?P<k>\d+)\)(?P<tag> \[[^\]]+\])?$")


def metric_columns() -> list[tuple[str, str]]:
    """(key in an evaluate_confidence dict, column title) of every metric of the registry
    (:data:`elical.evaluation.METRICS`), read when called, so a metric registered later is in every table."""
    return [(name, _REGISTRY[name].info["title"]) for name in _REGISTRY]


def _title(key: str, direction: bool = False) -> str:
    info = _REGISTRY[key].info
    return info["title"] + (" (lower is better)" if direction and not info["higher"] else "")


def parse_method(name: str) -> tuple[str, int | None]:
    """Split a method name into (family, k): "EliCal(64)" -> ("EliCal", 64), "Cal-Only(all=600)" ->
    ("Cal-Only", 600), "Consis-Sem+Isotonic(16)" -> ("Consis-Sem+Isotonic", 16), "N-Prob" -> ("N-Prob", None).
    A tag (another layer or pooling, a control: :mod:`elical.jobs.layers`, :mod:`elical.jobs.controls`) stays with the
    family: "EliCal(64) [L8]" -> ("EliCal [L8]", 64), "Eli-Only [MiniLM]" -> ("Eli-Only [MiniLM]", None)."""
    m = _K_NAME.match(name)
    return (m["family"] + (m["tag"] or ""), int(m["k"])) if m else (name, None)


def is_tagged(name: str) -> bool:
    """Whether a method is a head on another layer or pooling, or a control ("EliCal(64) [L8]"): those are in the
    tables; the figures keep to the run's own methods (a run over every layer has hundreds)."""
    return name.endswith("]") and " [" in name


def _num(value) -> float:
    """A metric value as a float; a missing value, null or a non-number becomes nan (drawn as a gap)."""
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def _png(fig) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight", metadata={"Software": None})
    return buf.getvalue()


def reliability_figures(results: dict, tables: dict[str, dict]) -> dict[str, bytes]:
    """One figure per method family: accuracy per equal-width bin, the gap to the mean confidence, bin counts."""
    import numpy as np
    Figure = require("matplotlib.figure", "report", "drawing the report's figures").Figure

    families: dict[str, list[str]] = {}
    for method in (m for m in results["results"]["all"] if not is_tagged(m)):
        family, k = parse_method(method)
        families.setdefault("Training-free and Eli-Only" if k is None else family, []).append(method)
    out = {}
    for family, methods in families.items():
        methods.sort(key=lambda name: parse_method(name)[1] or 0)
        cols = min(4, len(methods))
        rows = math.ceil(len(methods) / cols)
        fig = Figure(figsize=(3.2 * cols, 3.1 * rows))
        for i, method in enumerate(methods):
            m = results["results"]["all"][method]
            ax = fig.add_subplot(rows, cols, i + 1)
            b = {k: np.array(v, dtype=float) for k, v in tables[method].items()}
            mid, width = (b["lower"] + b["upper"]) / 2, b["upper"] - b["lower"]
            full = b["count"] > 0
            ax.bar(mid[full], b["accuracy"][full], width=width[full], color="#4c72b0", edgecolor="white",
                   label="accuracy")
            ax.bar(mid[full], (b["mean_confidence"] - b["accuracy"])[full], bottom=b["accuracy"][full],
                   width=width[full], color="#dd8452", alpha=0.45, hatch="//", edgecolor="#dd8452", label="gap")
            for x, a, n in zip(mid[full], b["accuracy"][full], b["count"][full]):
                ax.text(x, min(a, 0.93) + 0.02, str(int(n)), ha="center", fontsize=7)
            ax.plot([0, 1], [0, 1], "k--", lw=0.8)
            ax.set(xlim=(0, 1), ylim=(0, 1.05), title=f"{method}\nECE {_num(m.get('ece')):.3f}, n={m['n']}")
            ax.title.set_fontsize(9)
            ax.tick_params(labelsize=7)
            if i % cols == 0:
                ax.set_ylabel("accuracy", fontsize=8)
            if i >= len(methods) - cols:
                ax.set_xlabel("confidence", fontsize=8)
        fig.axes[0].legend(fontsize=7, loc="upper left")
        fig.tight_layout()
        out[f"reliability_{slug(family)}.png"] = _png(fig)
    return out


_FAMILY_COLORS = {"EliCal": "C3", "Cal-Only": "C0", "Eli-Only": "black"}
_CALIBRATOR_COLORS = {"Platt": "C2", "Isotonic": "C1"}


def vs_k_selections(methods) -> list[tuple[str | None, list[str]]]:
    """(estimator, methods) per metric-vs-k figure: first (None) the heads trained on labels with every method
    without labels; then per training-free estimator with calibrated baselines: the heads (and Eli-Only), the
    estimator and its calibrated versions."""
    names = [n for n in methods if not is_tagged(n)]
    calibrated: dict[str, list[str]] = {}
    for name in names:
        family, k = parse_method(name)
        if k is not None and "+" in family:
            calibrated.setdefault(family.rsplit("+", 1)[0], []).append(name)
    main = [n for n in names if n not in sum(calibrated.values(), [])]
    heads = [n for n in main if parse_method(n)[1] is not None or n == "Eli-Only"]
    out: list[tuple[str | None, list[str]]] = [(None, main)]
    out += [(est, heads + [n for n in names if n == est] + cal) for est, cal in calibrated.items()]
    return out


def metric_vs_k_figure(methods: dict, title: str) -> bytes | None:
    """Metrics against k (log axis) with their 95 % bands; None when no method has a k."""
    Figure = require("matplotlib.figure", "report", "drawing the report's figures").Figure

    curves: dict[str, list[tuple[int, dict]]] = {}
    flat: dict[str, dict] = {}
    for method, m in methods.items():
        family, k = parse_method(method)
        if k is None:
            flat[method] = m
        else:
            curves.setdefault(family, []).append((k, m))
    if not curves:
        return None
    fig = Figure(figsize=(15, 7.5))
    free = iter([f"C{i}" for i in range(4, 10)] + ["#7f7f7f", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5"]
                + [f"C{i}" for i in range(10)] * 10)
    colors = {}
    for family in curves:
        calibrator = family.rsplit("+", 1)[-1] if "+" in family else None
        colors[family] = _FAMILY_COLORS.get(family) or _CALIBRATOR_COLORS.get(calibrator) or next(free)
    colors.update({method: _FAMILY_COLORS.get(method) or next(free) for method in flat})
    ks = sorted({k for pts in curves.values() for k, _ in pts})
    curve = [name for name in _REGISTRY if _REGISTRY[name].info.get("curve", False)]
    for i, key in enumerate(curve):
        ax = fig.add_subplot(max(2, math.ceil(len(curve) / 3)), 3, i + 1)
        for family, pts in curves.items():
            pts = sorted(pts, key=lambda p: p[0])
            x = [k for k, _ in pts]
            y = [_num(m.get(key)) for _, m in pts]
            ci = [[_num(v) for v in (m.get("ci", {}).get(key) or [None, None])] for _, m in pts]
            ax.plot(x, y, "o-", color=colors[family], lw=1.6, ms=4, label=family)
            ax.fill_between(x, [c[0] for c in ci], [c[1] for c in ci], color=colors[family], alpha=0.12, lw=0)
        for method, m in flat.items():
            ax.axhline(_num(m.get(key)), color=colors[method], lw=1.1, ls="--", label=method)
        ax.set_xscale("log")
        ax.set_xticks(ks, [str(k) for k in ks], fontsize=8)
        ax.minorticks_off()
        ax.set_title(_title(key, direction=True), fontsize=10)
        ax.set_xlabel("k labelled questions (log scale)", fontsize=8)
        ax.grid(alpha=0.3)
    handles, labels = fig.axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8)
    fig.suptitle(title + " (shaded: 95 % bootstrap interval; dashed: methods without labels)", fontsize=11)
    fig.tight_layout()
    return _png(fig)


def headline_methods(methods) -> list[str]:
    """What the per-dataset bars show: the methods without labels, and Cal-Only and EliCal at the largest k they
    share (calibrated baselines are left to the tables and the metric-vs-k figures, to keep the bars readable)."""
    methods = [m for m in methods if not is_tagged(m)]
    free = [m for m in methods if parse_method(m)[1] is None]
    heads = [m for m in methods if parse_method(m)[0] in ("Cal-Only", "EliCal") and "(all=" not in m]
    ks = [parse_method(m)[1] for m in heads]
    shared = [k for k in ks if ks.count(k) > 1] or ks
    return free + [m for m in heads if shared and parse_method(m)[1] == max(shared)]


def bar_figures(scopes: dict, aggs: dict) -> dict[str, bytes]:
    """Per-dataset grouped bars (with intervals) and the HonestyBench averages (shaded); {} for one dataset."""
    import numpy as np
    Figure = require("matplotlib.figure", "report", "drawing the report's figures").Figure

    datasets = [d for d in scopes if d != "all"]
    if not datasets:
        return {}
    methods = headline_methods(scopes["all"])
    groups = [(d, scopes[d]) for d in datasets] + [(GROUP_TITLES.get(g, g), v) for g, v in aggs.items()]
    width = 0.8 / len(methods)
    out = {}
    for key in headline_metrics():
        fig = Figure(figsize=(max(8.0, 0.16 * len(methods) * len(groups) + 3), 4.6))
        ax = fig.add_subplot(1, 1, 1)
        for j, method in enumerate(methods):
            x = np.arange(len(groups)) + (j - (len(methods) - 1) / 2) * width
            vals = np.array([_num(g.get(method, {}).get(key)) for _, g in groups])
            cis = [[_num(v) for v in (g.get(method, {}).get("ci", {}).get(key) or [None, None])] for _, g in groups]
            err = np.array([[v - c[0], c[1] - v] for v, c in zip(vals, cis)]).T
            ax.bar(x, vals, width=width, yerr=np.clip(err, 0, None), capsize=1.5, label=method,
                   color=f"C{j % 10}", hatch="" if j < 10 else "..", error_kw={"lw": 0.7})
        ax.set_xticks(np.arange(len(groups)), [g for g, _ in groups], rotation=20, ha="right", fontsize=8)
        for i in range(len(datasets), len(groups)):
            ax.axvspan(i - 0.45, i + 0.45, color="0.93", zorder=0)
        for i, (_, g) in enumerate(groups):  # e.g. AUROC when every answer of a dataset is wrong
            if all(math.isnan(_num(g.get(m, {}).get(key))) for m in methods):
                ax.text(i, 0.02, "n/a", ha="center", fontsize=8, color="0.4")
        ax.set_title(f"{_title(key)} per dataset and HonestyBench averages (weighted by test size; shaded, "
                     "no interval); error bars: 95 % bootstrap", fontsize=9)
        ax.legend(fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5))
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        out[f"bars_{slug(key)}.png"] = _png(fig)
    return out


def slug(text: str) -> str:
    """A file-name-safe lower-case form of a method, family or dataset name."""
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")
