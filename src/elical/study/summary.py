"""The study's numbers: per dataset, per HonestyBench group (in-domain and out-of-domain weighted by test size,
MMLU alone), mean and sample standard deviation over seeds, percentile bootstrap intervals, and the headline
ratios (Ni et al., arXiv 2510.17509, Sec. 6: EliCal with ~1 % of the labels against Cal-Only with all of them;
Eli-Only against Consis-Sem as the unlabelled pool grows).

Intervals: B resamples of each dataset's evaluation questions (drawn once per dataset, the same for every method,
so differences between methods are paired); for each resample the metric of every seed's confidences is
computed and averaged over seeds, then the group value is the test-size-weighted average over its datasets. The
interval is the 2.5-97.5 percentile of those B values: question sampling only; the seeds' spread is reported
beside it. A dataset where a metric is undefined (AUROC when every answer is wrong) is left out of its group's
average for that metric, the weights renormalised over the others.

Paired comparisons (``summary["paired"]``): for every k, EliCal(k) - Cal-Only(k) and EliCal(k) - Eli-Only per group
and metric with a bootstrap interval (:func:`study_metrics`): the per-seed differences (same seed = same labelled questions for both methods;
mean and the seeds' std) and a paired percentile bootstrap interval over questions (both methods scored on the same
resamples, :func:`elical.evaluation.decision.percentile_interval` of the B differences). A difference is called
distinguishable from zero when that interval excludes 0.
"""

from __future__ import annotations

import math
import re

import numpy as np

from elical.data.groups import group_of

__all__ = ["GROUPS", "study_metrics", "method_family", "summarize", "one_percent_k", "paired_pairs"]

GROUPS = ("in_domain", "out_of_domain", "unseen")
_K = re.compile(r"^(?P<family>.+?)\((?P<k>\d+)\)(?P<tag> \[[^\]]+\])?$")


def method_family(name: str) -> tuple[str, int]:
    """("EliCal", 64) for "EliCal(64)", ("EliCal [L8]", 64) for "EliCal(64) [L8]" (a head on another layer or
    pooling); (name, 0) for a method without labels."""
    m = _K.match(name)
    return (m.group("family") + (m.group("tag") or ""), int(m.group("k"))) if m else (name, 0)


def one_percent_k(ks, n_pool: int) -> int:
    """The k of the grid closest (in log scale) to 1 % of the pool: the paper's "about 1 % of the labels"."""
    ks = [int(k) for k in ks if 0 < int(k) < n_pool] or [n_pool]
    return min(ks, key=lambda k: abs(math.log(k / max(n_pool * 0.01, 1.0))))


def study_metrics() -> tuple[list[str], list[str]]:
    """(the metrics of the study's tables, those of them with paired bootstrap intervals): the registry's metrics
    flagged ``study`` (:data:`elical.evaluation.METRICS`), and of those the ones without a dev split."""
    from elical.evaluation.spec import metric_names

    shown = metric_names("study")
    fixed = set(metric_names("needs_dev"))
    return shown, [m for m in shown if m in set(metric_names("interval")) - fixed]


def _point(y, c, dev_fraction, seed, metrics) -> dict:
    from elical.evaluation.metrics import evaluate_confidence

    out = evaluate_confidence(y, c, dev_fraction=dev_fraction, seed=seed, n_resamples=1)
    return {m: float(out[m]) for m in metrics}


def _mean_std(values) -> dict:
    v = np.asarray(values, dtype=np.float64)
    std = None if v.size < 2 else 0.0 if np.all(v == v[0]) else float(np.std(v, ddof=1))
    return {"mean": float(np.mean(v)), "std": std, "per_seed": [float(x) for x in v]}


def summarize(test: list[dict], methods: dict[str, np.ndarray], *, dev_fraction: float = 0.2, eval_seed: int = 0,
              n_resamples: int = 1000, bootstrap_seed: int = 0) -> dict:
    """Per dataset and per group metrics of every method.

    test : evaluation records (``dataset``, ``greedy_correctness``), length n.
    methods : {method: confidences of shape (S, n)} — one row per seed (S = 1 for a training-free estimator).
    Returns {"datasets": {dataset: {"n", "group"}}, "methods": {method: {"family", "k", "datasets": {dataset:
    {metric: {"mean", "std", "per_seed"}}}, "groups": {group: {metric: {"mean", "std", "per_seed"[, "ci"]}}}}}}.
    Alignment uses a seeded dev part of each dataset (``dev_fraction``, ``eval_seed``) for its threshold.
    """
    from elical.evaluation.decision import percentile_interval, resample_rows
    from elical.evaluation.spec import resampled_rows

    METRICS, CI_METRICS = study_metrics()

    y = np.array([int(r["greedy_correctness"]) for r in test])
    ds = np.array([str(r["dataset"]) for r in test])
    names = sorted(set(ds))
    rows = {d: np.flatnonzero(ds == d) for d in names}
    groups = {g: [d for d in names if (group_of(d) or "other") == g] for g in (*GROUPS, "other")}
    groups = {g: members for g, members in groups.items() if members}
    rng = np.random.default_rng(bootstrap_seed)
    # one draw per dataset from one stream, the same for every method (paired differences)
    resamples = {d: np.concatenate([*resample_rows(rows[d].size, n_resamples, rng, chunk_elements=None),
                                    np.empty((0, rows[d].size), np.int64)]) for d in names}
    out = {"datasets": {d: {"n": int(rows[d].size), "group": group_of(d) or "other",
                            "accuracy": float(y[rows[d]].mean())} for d in names},
           "groups": {g: {"datasets": members, "n": int(sum(rows[d].size for d in members))}
                      for g, members in groups.items()},
           "n_resamples": n_resamples, "methods": {}}
    boot_groups = {}
    for method, C in methods.items():
        C = np.atleast_2d(np.asarray(C, dtype=np.float64))
        family, k = method_family(method)
        per_ds = {d: [_point(y[rows[d]], C[s, rows[d]], dev_fraction, eval_seed, METRICS) for s in range(C.shape[0])]
                  for d in names}
        boot = {}
        for d in names:
            Y = y[rows[d]][resamples[d]]
            acc = {m: np.zeros(n_resamples) for m in CI_METRICS}
            for s in range(C.shape[0]):
                shared: dict = {}
                for m in CI_METRICS:
                    acc[m] += resampled_rows(m, Y, C[s, rows[d]][resamples[d]], 10, shared) / C.shape[0]
            boot[d] = acc
        entry = {"family": family, "k": k, "datasets": {}, "groups": {}}
        for d in names:
            entry["datasets"][d] = {m: _mean_std([p[m] for p in per_ds[d]]) for m in METRICS}
        for g, members in groups.items():
            w = np.array([rows[d].size for d in members], dtype=np.float64)
            stats = {}
            for m in METRICS:
                per_seed = [_weighted([per_ds[d][s][m] for d in members], w) for s in range(C.shape[0])]
                stats[m] = _mean_std(per_seed)
                if m in CI_METRICS:
                    values = _weighted(np.stack([boot[d][m] for d in members]), w)
                    stats[m]["ci"] = [float(v) for v in percentile_interval(values, 0.95)]
                    boot_groups[(method, g, m)] = values
            entry["groups"][g] = stats
        out["methods"][method] = entry
    out["paired"] = _paired(out, boot_groups, paired_pairs(methods))
    return out


def paired_pairs(methods) -> list[tuple[str, str]]:
    """The study's paired comparisons among ``methods`` (names): (EliCal(k), Cal-Only(k)) and (EliCal(k),
    Eli-Only) for every k, without layer/pooling tags; pairs whose second method is absent are left out."""
    pairs = []
    for name in methods:
        family, k = method_family(name)
        if family == "EliCal" and k > 0:
            pairs += [(name, other) for other in (f"Cal-Only({k})", "Eli-Only") if other in methods]
    return pairs


def _paired(summary: dict, boot_groups: dict, pairs) -> dict:
    """{"A - B": {"a", "b", "k", "groups": {group: {metric: {"mean", "std", "per_seed", "ci", "distinguishable"}}}}}
    from the per-seed group values and the shared bootstrap resamples of :func:`summarize`."""
    from elical.evaluation.decision import percentile_interval

    out = {}
    for a, b in pairs:
        ea, eb = summary["methods"][a], summary["methods"][b]
        groups = {}
        for g in ea["groups"]:
            stats = {}
            for m in dict.fromkeys(key[2] for key in boot_groups if key[:2] == (a, g)):
                sa, sb = np.array(ea["groups"][g][m]["per_seed"]), np.array(eb["groups"][g][m]["per_seed"])
                if sb.size == 1:
                    sb = np.full_like(sa, sb[0])  # a method without seeds (one row) against every seed
                if sa.size != sb.size:
                    continue
                entry = _mean_std(sa - sb)
                ci = percentile_interval(boot_groups[(a, g, m)] - boot_groups[(b, g, m)], 0.95)
                entry["ci"] = [float(v) for v in ci]
                entry["distinguishable"] = bool(np.isfinite(ci).all() and (ci[0] > 0 or ci[1] < 0))
                stats[m] = entry
            groups[g] = stats
        out[f"{a} - {b}"] = {"a": a, "b": b, "k": ea["k"], "groups": groups}
    return out


def _weighted(values, weights: np.ndarray):
    """Test-size-weighted mean over datasets (axis 0) of ``values`` (shape (D,) or (D, B)), over the datasets
    where the metric is defined (AUROC is undefined on a dataset whose answers are all wrong or all right);
    nan when it is defined on none."""
    v = np.asarray(values, dtype=np.float64)
    w = np.broadcast_to(weights.reshape((-1,) + (1,) * (v.ndim - 1)), v.shape)
    ok = np.isfinite(v)
    with np.errstate(invalid="ignore", divide="ignore"):
        return (np.where(ok, v, 0.0) * w).sum(axis=0) / np.where(ok, w, 0.0).sum(axis=0)


def _ratio(num, den) -> dict:
    r = np.asarray(num, dtype=np.float64) / np.asarray(den, dtype=np.float64)
    return _mean_std(r)


def headline(summary: dict, n_pool: int, ks, elicitation: dict | None = None) -> dict:
    """The issue's headline numbers from one target's :func:`summarize` output (per seed, then mean and std):
    EliCal(k ~ 1 % of the pool) / Cal-Only(all) AUROC in-domain and out-of-domain (and the same ratio of the
    parts above chance, (AUROC - 0.5) / (AUROC_all - 0.5)), with Eli-Only's ratios beside them; the paired AUROC
    differences at that k ("paired_auroc": mean, interval, distinguishable); EliCal vs Cal-Only on MMLU at that k and with all
    labels; and, from ``elicitation`` (:func:`summarize` of the elicitation curve), Eli-Only / Consis-Sem AUROC
    at the largest pool."""
    k1 = one_percent_k(ks, n_pool)
    meth = summary["methods"]
    out = {"k": k1, "label_fraction": k1 / n_pool, "n_pool": n_pool}

    def auc(method, group):
        return np.array(meth[method]["groups"][group]["auroc"]["per_seed"])

    for g in ("in_domain", "out_of_domain"):
        if g not in summary["groups"] or f"EliCal({k1})" not in meth:
            continue
        a, b = auc(f"EliCal({k1})", g), auc(f"Cal-Only({n_pool})", g)
        out[f"elical_over_cal_all_{g}"] = _ratio(a, b)
        out[f"elical_over_cal_all_above_chance_{g}"] = _ratio(a - 0.5, b - 0.5)
        if "Eli-Only" in meth:  # stage 1 alone, zero labels: what stage 2 is to be credited beyond
            e = auc("Eli-Only", g)
            out[f"eli_only_over_cal_all_{g}"] = _ratio(e, b)
            out[f"eli_only_over_cal_all_above_chance_{g}"] = _ratio(e - 0.5, b - 0.5)
    paired = summary.get("paired", {})
    out["paired_auroc"] = {name: {g: {key: stats["auroc"][key] for key in ("mean", "ci", "distinguishable")}
                                  for g, stats in p["groups"].items() if "auroc" in stats}
                           for name, p in paired.items() if p["k"] == k1}
    if "unseen" in summary["groups"] and f"EliCal({k1})" in meth:
        out["mmlu"] = {name: _mean_std(auc(name, "unseen"))
                       for name in (f"EliCal({k1})", f"Cal-Only({k1})", f"EliCal({n_pool})", f"Cal-Only({n_pool})",
                                    "Eli-Only", "Consis-Sem")}
    if elicitation:
        largest = max(int(name.split("@")[1]) for name in elicitation["methods"])
        for g in ("in_domain", "out_of_domain", "unseen"):
            if g in summary["groups"]:
                cons = meth["Consis-Sem"]["groups"][g]["auroc"]["mean"]
                eli = np.array(elicitation["methods"][f"Eli-Only@{largest}"]["groups"][g]["auroc"]["per_seed"])
                out[f"eli_over_consis_sem_{g}"] = {**_ratio(eli, np.full_like(eli, cons)), "pool": largest}
    return out
