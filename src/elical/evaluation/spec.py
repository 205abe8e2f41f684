"""The metric contract: what a metric of :data:`elical.evaluation.METRICS` declares, and the one loop that scores
every registered metric (points, dev-chosen thresholds, bootstrap intervals).

A metric entry declares (``METRICS.add(name, compute, title=..., higher=..., ...)``):

- ``compute``: ``compute(y, c, **params) -> float`` on all n questions; for a metric that needs a dev split
  (``needs_dev=True``) it is the *choice* made on the dev part, ``compute(y_dev, c_dev, **params) -> chosen``
  (a threshold), and ``score(Y, C, chosen, **params)`` scores the test part (vectorized over the last axis);
- ``title`` (column title), ``higher`` (higher is better), ``headline`` (printed tables, bar figures), ``curve``
  (metric-vs-k figures), ``study`` (the study's tables), ``params`` (fixed keyword arguments; ``n_bins`` is
  overridden by the caller's), ``interval`` (whether it gets a bootstrap interval);
- ``rows``: ``rows(Y, C, n_bins) -> (R,) array`` or a dict of several metrics' arrays (shared by every metric
  naming the same function, computed once per chunk of resamples), the metric on each resample of a matrix of
  resamples; without it the interval calls ``compute`` on every resample (correct, slower).

Adding a metric is one ``METRICS.add``: :func:`elical.evaluation.metrics.evaluate_confidence` (hence
results.json), :func:`elical.evaluation.tables.format_table`, the report's tables and figures, the sweep and the
study summary all loop over the registry.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

__all__ = ["MetricSpec", "metric_spec", "metric_names", "resampled_rows", "score_all"]


@dataclass(frozen=True)
class MetricSpec:
    """One registered metric, its functions imported (see the module docstring for each field)."""

    name: str
    compute: Callable
    title: str
    higher: bool
    summary: str = ""
    headline: bool = False
    curve: bool = False
    study: bool = False
    needs_dev: bool = False
    interval: bool = True
    score: Callable | None = None
    rows: Callable | None = None
    params: dict = field(default_factory=dict)

    def bound(self, n_bins: int) -> dict:
        """``params`` with the caller's ``n_bins`` where the metric takes one."""
        return {**self.params, "n_bins": n_bins} if "n_bins" in self.params else dict(self.params)


def _load(ref):
    if ref is None or callable(ref):
        return ref
    from elical.registry import Entry

    return Entry("", ref).load()


def metric_spec(name: str) -> MetricSpec:
    """The :class:`MetricSpec` of a registered metric. Raises UnknownNameError for an unknown name and ValueError
    for an entry that misses ``title`` / ``higher`` or a dev metric without ``score``."""
    from elical.evaluation import METRICS

    entry = METRICS[name]
    info = dict(entry.info)
    missing = [k for k in ("title", "higher") if k not in info]
    if missing:
        raise ValueError(f"metric {name!r} must declare {', '.join(missing)}")
    if info.get("needs_dev") and info.get("score") is None:
        raise ValueError(f"metric {name!r} needs a dev split, so it must declare score(Y, C, chosen)")
    unknown = set(info) - {f for f in MetricSpec.__dataclass_fields__} - {"name", "compute", "summary"}
    if unknown:
        raise ValueError(f"metric {name!r} declares unknown fields {sorted(unknown)}")
    info["score"], info["rows"] = _load(info.get("score")), _load(info.get("rows"))
    return MetricSpec(name=name, compute=entry.load(), summary=entry.summary, **info)


def metric_names(flag: str | None = None) -> list[str]:
    """Registered metric names, in registration order; with ``flag`` ("headline", "curve", "study", "interval",
    "needs_dev") those whose flag is set (``interval`` defaults to true, the others to false)."""
    from elical.evaluation import METRICS

    if flag is None:
        return METRICS.names()
    default = flag == "interval"
    return [n for n in METRICS if METRICS[n].info.get(flag, default)]


def _resampled(spec: MetricSpec, Y: np.ndarray, C: np.ndarray, n_bins: int, shared: dict) -> np.ndarray:
    """``spec`` on each row of the resample matrices Y, C (shape (R, m)); ``shared`` caches a ``rows`` function's
    result for the metrics that name the same one."""
    if spec.rows is None:
        params = spec.bound(n_bins)
        return np.array([spec.compute(Y[r], C[r], **params) for r in range(Y.shape[0])], dtype=np.float64)
    if spec.rows not in shared:
        shared[spec.rows] = spec.rows(Y, C, n_bins)
    out = shared[spec.rows]
    return np.asarray(out[spec.name] if isinstance(out, dict) else out, dtype=np.float64)


def resampled_rows(name: str, Y: np.ndarray, C: np.ndarray, n_bins: int = 10, shared: dict | None = None):
    """The metric ``name`` (no dev split) on every row of resample matrices Y, C of shape (R, m): shape (R,)."""
    return _resampled(metric_spec(name), Y, C, n_bins, {} if shared is None else shared)


def score_all(y: np.ndarray, c: np.ndarray, dev: np.ndarray, test: np.ndarray, *, n_bins: int, n_resamples: int,
              seed: int, level: float) -> tuple[dict, dict, dict]:
    """Every registered metric on checked arrays y (0/1), c ([0, 1]) of shape (n,), with the dev / test index
    parts of Alignment's split. Returns ({metric: point value}, {dev metric: what was chosen on the dev part},
    {metric: [low, high]}). Intervals (:func:`elical.evaluation.decision.resample_rows`, seed ``seed``): the
    metrics without a dev split resample all n questions; the others resample the test part with the dev choice
    held fixed (the choice's own variance is not included)."""
    from elical.evaluation.decision import percentile_interval, resample_rows

    specs = [metric_spec(name) for name in metric_names()]
    point, chosen = {}, {}
    for s in specs:
        if s.needs_dev:
            chosen[s.name] = s.compute(y[dev], c[dev], **s.bound(n_bins))
            point[s.name] = float(s.score(y[test], c[test], chosen[s.name], **s.params))
        else:
            point[s.name] = float(s.compute(y, c, **s.bound(n_bins)))
    parts: dict[str, list[np.ndarray]] = {s.name: [] for s in specs if s.interval}
    whole = [s for s in specs if s.interval and not s.needs_dev]
    for idx in resample_rows(y.shape[0], n_resamples, seed) if whole else ():
        shared: dict = {}
        for s in whole:
            parts[s.name].append(_resampled(s, y[idx], c[idx], n_bins, shared))
    on_test = [s for s in specs if s.interval and s.needs_dev]
    y_t, c_t = y[test], c[test]
    for idx in resample_rows(y_t.shape[0], n_resamples, seed) if on_test else ():
        for s in on_test:
            parts[s.name].append(np.asarray(s.score(y_t[idx], c_t[idx], chosen[s.name], **s.params), np.float64))
    ci = {name: list(percentile_interval(np.concatenate(v), level)) for name, v in parts.items()}
    return point, chosen, ci
