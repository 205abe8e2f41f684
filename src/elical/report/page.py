"""``elical report RUN_DIR``: tables, figures and one offline HTML page from a finished run, recomputing nothing.

Reads only ``RUN_DIR/results.json`` (metrics with their bootstrap intervals, written by ``elical run``) and
``RUN_DIR/predictions.jsonl`` (one confidence per evaluation question and method, for the reliability diagrams).
Writes ``RUN_DIR/report/`` (or ``--output``); see ``docs/report.md``:

- ``metrics.md``, ``metrics.csv`` (long format: one row per scope, method and metric), ``report.json`` (strict
  JSON: configuration, versions, seed, sizes, every metric with its interval, HonestyBench averages, reliability
  bins);
- ``figures/metric_vs_k_<scope>.png``: AUROC, ECE, Alignment, Brier, AURC, Acc@80 against the number k of labelled
  questions on a log axis with 95 % bootstrap bands, methods without labels as horizontal lines; on all questions
  also one figure per training-free estimator with its Platt / isotonic versions (``..._<estimator>_calibrated``);
- ``figures/bars_<metric>.png`` (several datasets only): per-dataset bars with their intervals, plus the
  HonestyBench in-domain and out-of-domain averages weighted by test size and MMLU alone (:func:`aggregates`);
- ``figures/reliability_<family>.png``: reliability diagrams (equal-width bins, the bin count over each bar);
- ``index.html``: everything above on one page, figures embedded as base64 data URIs, so it opens offline.

The figures are drawn by :mod:`elical.report.plots`.
"""

from __future__ import annotations

import base64
import csv
import html
import io
import json
import math
from pathlib import Path

from elical.fileio import write_bytes_atomic
from elical.report.plots import (GROUP_TITLES, bar_figures, metric_columns, metric_vs_k_figure, parse_method, reliability_figures, slug,
                    vs_k_selections)
from elical.records import InputError, iter_json_lines

__all__ = ["build_report", "load_run", "parse_method", "aggregates", "reliability_tables"]
_REQUIRED = ("auroc", "ece", "brier", "alignment")  # what every results.json metrics dict has


# -------------------------------------------------------------------------------------------------------- input
def load_run(run_dir) -> tuple[dict, list[dict]]:
    """Read and check ``results.json`` and ``predictions.jsonl`` of a run directory.

    Returns (results dict, prediction lines {"id", "dataset", "method", "confidence", "greedy_correctness"}).
    Raises InputError naming the file, line and field when a file is missing, malformed, or the two disagree on
    the methods."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise InputError(run_dir, None, None, "run directory not found")
    res_path, pred_path = run_dir / "results.json", run_dir / "predictions.jsonl"
    for path in (res_path, pred_path):
        if not path.is_file():
            raise InputError(path, None, None, "missing: is this a finished `elical run` directory?")
    try:
        results = json.loads(res_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(res_path, exc.lineno, None, f"malformed JSON ({exc.msg})") from None
    scopes = results.get("results") if isinstance(results, dict) else None
    if not isinstance(scopes, dict) or not isinstance(scopes.get("all"), dict) or not scopes["all"]:
        raise InputError(res_path, None, "results", 'expected {"all": {method: metrics, ...}, dataset: {...}}')
    for scope, methods in scopes.items():
        for method, m in (methods.items() if isinstance(methods, dict) else [(None, None)]):
            if not isinstance(m, dict) or not isinstance(m.get("n"), int) or not all(
                    k in m and (m[k] is None or isinstance(m[k], (int, float))) for k in _REQUIRED):
                raise InputError(res_path, None, f"results.{scope}.{method}",
                                 f"expected a metrics dict with n and {', '.join(_REQUIRED)} (numbers or null)")
    predictions = []
    for lineno, obj in iter_json_lines(pred_path):
        for field in ("id", "dataset", "method"):
            if not isinstance(obj.get(field), str):
                raise InputError(pred_path, lineno, field, "missing or not a string")
        c = obj.get("confidence")
        if isinstance(c, bool) or not isinstance(c, (int, float)) or not 0.0 <= c <= 1.0:
            raise InputError(pred_path, lineno, "confidence", f"expected a number in [0, 1], got {c!r}")
        if obj.get("greedy_correctness") not in (0, 1) or isinstance(obj.get("greedy_correctness"), bool):
            raise InputError(pred_path, lineno, "greedy_correctness", "expected 0 or 1")
        predictions.append(obj)
    missing = sorted(set(scopes["all"]) - {p["method"] for p in predictions})
    if missing:
        raise InputError(pred_path, None, "method", f"no predictions for {missing} listed in results.json")
    return results, predictions


# ------------------------------------------------------------------------------------------------------- tables
def aggregates(scopes: dict) -> dict:
    """HonestyBench aggregation of every method over the per-dataset scopes of ``results.json``.

    scopes : results["results"], {"all" | dataset: {method: metrics}}. Returns {group: {method: {metric: weighted
    mean, "n", "datasets"}}} via :func:`elical.evaluation.aggregate.aggregate` (weights = each dataset's n; groups from the
    dataset names), or {} when the run has a single dataset."""
    from elical.evaluation.aggregate import aggregate

    datasets = [d for d in scopes if d != "all"]
    if not datasets:
        return {}
    out: dict = {}
    for method in scopes["all"]:
        per = {d: scopes[d][method] for d in datasets if method in scopes[d]}
        for group, values in aggregate(per, {d: per[d]["n"] for d in per}).items():
            out.setdefault(group, {})[method] = values
    return out


def _fmt(m: dict, key: str) -> str:
    v = m.get(key)
    if not isinstance(v, (int, float)) or math.isnan(v):
        return "n/a"
    ci = m.get("ci", {}).get(key)
    if ci and all(isinstance(x, (int, float)) and not math.isnan(x) for x in ci):
        return f"{v:.3f} [{ci[0]:.2f}, {ci[1]:.2f}]"
    return f"{v:.3f}"


def _table_rows(methods: dict) -> list[list[str]]:
    return [[method, str(m.get("n", "")), *(_fmt(m, key) for key, _ in metric_columns())] for method, m in methods.items()]


def _sections(results: dict, aggs: dict) -> list[tuple[str, dict]]:
    """(title, {method: metrics}) per table: all questions, the HonestyBench averages, then each dataset."""
    scopes = results["results"]
    s = results.get("sizes", {})
    title = "All evaluation questions" + (f" (pool {s['train_pool']}, greedy accuracy {s['eval_accuracy']:.1%})"
                                          if "train_pool" in s and "eval_accuracy" in s else "")
    out = [(title, scopes["all"])]
    out += [(f"HonestyBench {GROUP_TITLES.get(g, g)}: " + ", ".join(next(iter(v.values()))["datasets"]), v)
            for g, v in aggs.items()]
    return out + [(f"Dataset {d}", scopes[d]) for d in scopes if d != "all"]


def _markdown(sections) -> str:
    head = ["method", "n", *(t for _, t in metric_columns())]
    parts = ["Values with 95 % bootstrap intervals [low, high] (HonestyBench averages: weighted by test size, "
             "no interval).\n"]
    for title, methods in sections:
        parts += [f"### {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        parts += ["| " + " | ".join(row) + " |" for row in _table_rows(methods)] + [""]
    return "\n".join(parts)


def _csv(results: dict, aggs: dict) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["scope", "method", "family", "k", "n", "metric", "value", "ci_low", "ci_high"])
    scopes = [(s, v) for s, v in results["results"].items()] + [(f"avg:{g}", v) for g, v in aggs.items()]
    for scope, methods in scopes:
        for method, m in methods.items():
            family, k = parse_method(method)
            for key, _ in metric_columns():
                if key in m:
                    ci = m.get("ci", {}).get(key) or ["", ""]
                    w.writerow([scope, method, family, "" if k is None else k, m.get("n", ""), key, m[key], *ci])
    return buf.getvalue()


def _json_safe(obj):
    """NaN/inf become null so that the file is strict JSON (browsers and jq reject NaN)."""
    if isinstance(obj, float) and not math.isfinite(obj):
        return None
    if isinstance(obj, dict):
        return {k: _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    return obj


# ------------------------------------------------------------------------------------------------------ figures
def reliability_tables(results: dict, predictions: list[dict]) -> dict[str, dict]:
    """Reliability-diagram bins of every method on all evaluation questions, from the saved predictions.

    Returns {method: {"lower", "upper", "count", "mean_confidence", "accuracy": lists of length n_bins}} from
    :func:`elical.evaluation.metrics.reliability_bins` with equal-width bins and the run's ``n_bins`` (10 if absent)."""
    import numpy as np

    from elical.evaluation.metrics import reliability_bins

    by_method: dict[str, tuple[list, list]] = {}
    for p in predictions:
        ys, cs = by_method.setdefault(p["method"], ([], []))
        ys.append(p["greedy_correctness"])
        cs.append(p["confidence"])
    out = {}
    for method, m in results["results"]["all"].items():
        y, c = by_method[method]
        bins = reliability_bins(np.array(y), np.array(c), n_bins=int(m.get("n_bins", 10)))
        out[method] = {k: v.tolist() for k, v in bins.items()}
    return out


# --------------------------------------------------------------------------------------------------------- HTML
def _html(results: dict, sections, figures: list[tuple[str, str, bytes, str]]) -> str:
    """One self-contained page: inline CSS, figures as base64 data URIs, no script and no external reference."""
    e = html.escape
    cfg = results.get("config") or {}
    info = {"model": cfg.get("model"), "datasets": ", ".join(cfg.get("datasets", []) or []),
            "seed": results.get("seed"), **{f"size: {k}": v for k, v in results.get("sizes", {}).items()},
            "wall time (s)": results.get("timings", {}).get("total_s")}
    info = {k: round(v, 4) if isinstance(v, float) else v for k, v in info.items()}
    headings = list(dict.fromkeys(h for h, _, _, _ in figures))
    anchors = {h: f"fig-{i}" for i, h in enumerate(headings)}
    # The summary tables, then the figures, then the (long) per-dataset tables.
    n_top = 1 + sum(1 for t, _ in sections if t.startswith("HonestyBench "))
    nav = [(f"tab-{i}", t) for i, (t, _) in enumerate(sections)]
    nav = nav[:n_top] + [(anchors[h], h) for h in headings] + nav[n_top:]
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             '<meta name="viewport" content="width=device-width, initial-scale=1">',
             f"<title>elical report: {e(str(info['datasets']))}</title><style>",
             "body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1500px;padding:0 1em;color:#222}"
             "table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:13px}"
             "td,th{border:1px solid #ccc;padding:3px 7px;text-align:right}td:first-child,th:first-child"
             "{text-align:left}th{background:#f3f3f3}img{max-width:100%;border:1px solid #eee}"
             "figure{margin:1em 0 2em}figcaption{font-size:13px;color:#555}nav li{font-size:14px}",
             "</style></head><body>", "<h1>elical report</h1>",
             "<p>Confidence of the model before it answers, evaluated against the correctness of its greedy "
             "answer. Values: point estimate [95 % bootstrap interval]. Built by <code>elical report</code> from "
             "<code>results.json</code> and <code>predictions.jsonl</code> without recomputing anything.</p>",
             "<table>" + "".join(f"<tr><th>{e(str(k))}</th><td>{e(str(v))}</td></tr>" for k, v in info.items())
             + "</table>",
             "<details><summary>configuration and package versions</summary><pre>"
             + e(json.dumps({"config": cfg, "versions": results.get("versions", {})}, indent=1)) + "</pre></details>",
             "<nav><ul>" + "".join(f'<li><a href="#{a}">{e(t)}</a></li>' for a, t in nav) + "</ul></nav>"]
    head = ["method", "n", *(t for _, t in metric_columns())]

    def table(i: int) -> None:
        title, methods = sections[i]
        parts.append(f'<h2 id="tab-{i}">{e(title)}</h2><table><tr>' + "".join(f"<th>{e(h)}</th>" for h in head)
                     + "</tr>")
        parts.extend("<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in _table_rows(methods))
        parts.append("</table>")

    for i in range(n_top):
        table(i)
    for heading in headings:
        parts.append(f'<h2 id="{anchors[heading]}">{e(heading)}</h2>')
        for _, name, data, caption in (f for f in figures if f[0] == heading):
            src = "data:image/png;base64," + base64.b64encode(data).decode("ascii")
            parts.append(f'<figure id="{e(name)}"><img src="{src}" alt="{e(caption)}"><figcaption>{e(caption)} '
                         f"(<code>figures/{e(name)}</code>)</figcaption></figure>")
    for i in range(n_top, len(sections)):
        table(i)
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


# ---------------------------------------------------------------------------------------------------- main
def _write(path: Path, data: bytes | str) -> None:
    write_bytes_atomic(path, data.encode("utf-8") if isinstance(data, str) else data)


def build_report(run_dir, output=None) -> Path:
    """Write tables, figures and index.html for ``run_dir`` into ``output`` (default ``run_dir/report``).

    Everything is read and drawn before the first file is written, so bad input leaves an earlier report
    untouched. Returns the output directory. Raises InputError for a missing or malformed run directory."""
    results, predictions = load_run(run_dir)
    out = Path(output) if output else Path(run_dir) / "report"
    scopes = results["results"]
    aggs = aggregates(scopes)
    sections = _sections(results, aggs)
    reliability = reliability_tables(results, predictions)
    figures: list[tuple[str, str, bytes, str]] = []  # (heading, file name, png, caption), in page order
    calibrated = []
    for scope, methods in scopes.items():
        where = "all evaluation questions" if scope == "all" else f"dataset {scope}"
        # Per-estimator comparisons with the calibrated baselines: on all questions only (figure count).
        for est, chosen in vs_k_selections(methods)[: None if scope == "all" else 1]:
            data = metric_vs_k_figure({n: methods[n] for n in chosen}, where[0].upper() + where[1:])
            if data is None:
                continue
            name = f"metric_vs_k_{slug(scope)}" + (f"_{slug(est)}_calibrated" if est else "") + ".png"
            if est is None:
                figures.append(("Metrics against k", name, data,
                                f"Metrics against the number k of labelled questions, {where}."))
            else:
                calibrated.append(("Calibrated baselines against k", name, data,
                                   f"EliCal and Cal-Only against {est} with Platt scaling and isotonic regression "
                                   f"fitted on the same k labels, {where}."))
    figures += [("Per dataset and HonestyBench averages", name, data,
                 "Per-dataset results of the methods without labels and of Cal-Only and EliCal at their largest "
                 "shared k, with the HonestyBench averages weighted by test size (no interval).")
                for name, data in bar_figures(scopes, aggs).items()]
    figures += calibrated
    figures += [("Reliability diagrams", name, data,
                 "Reliability diagrams, all evaluation questions, equal-width bins: bar = accuracy of the bin, "
                 "hatched = gap to its mean confidence, number = questions in the bin.")
                for name, data in reliability_figures(results, reliability).items()]
    files: dict[str, bytes | str] = {f"figures/{name}": data for _, name, data, _ in figures}
    files["metrics.md"] = _markdown(sections)
    files["metrics.csv"] = _csv(results, aggs)
    files["report.json"] = json.dumps(_json_safe({
        "config": results.get("config"), "versions": results.get("versions"), "seed": results.get("seed"),
        "sizes": results.get("sizes"), "results": scopes, "honestybench": aggs,
        "reliability": reliability}), indent=1, allow_nan=False)
    files["index.html"] = _html(results, sections, figures)
    for rel, data in files.items():
        _write(out / rel, data)
    for stale in (out / "figures").glob("*.png"):  # figures of an earlier report of this run that are gone now
        if f"figures/{stale.name}" not in files:
            stale.unlink()
    return out
