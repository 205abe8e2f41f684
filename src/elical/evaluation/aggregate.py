"""HonestyBench aggregation: per group (in-domain, out-of-domain, unseen), each metric averaged over the group's
datasets weighted by test size (Ni et al., arXiv 2510.17509, Sec. 5); MMLU is its own group."""

from __future__ import annotations

import numpy as np

from elical.data.groups import group_of

__all__ = ["aggregate"]

# Keys of an evaluate_confidence() dict that are counts or per-dataset choices, not scores to average.
_NOT_AVERAGED = frozenset({"n", "n_dev", "n_test", "threshold", "thresholds", "ci", "n_bins", "n_resamples",
                           "ci_level"})


def aggregate(per_dataset: dict, sizes: dict, groups: dict | None = None) -> dict:
    """HonestyBench aggregation: per group, the mean of each metric over its datasets weighted by test size.

    per_dataset : {dataset: {metric: value}} (e.g. :func:`evaluate_confidence` outputs). sizes : {dataset: test
    size > 0}. groups : {dataset: "in_domain" | "out_of_domain" | "unseen" | ...}; None uses :func:`elical.data.groups.group_of` ("other" for a dataset in no group).
    The unseen task (MMLU) is its own group, so it is reported alone. Averaged: the numeric metrics present in
    every dataset of the group, except counts and per-dataset choices ("n", "n_dev", "n_test", "threshold",
    "ci"); a nan in any dataset makes the group's value nan. Datasets named in ``groups`` but absent from
    ``per_dataset`` are ignored.
    Returns {group: {metric: float, "n": total size, "datasets": [names, sorted]}}.
    Raises ValueError if a dataset of ``per_dataset`` lacks a size or a group, or a size is not positive.
    """
    by_group: dict[str, list[str]] = {}
    for name in per_dataset:
        if name not in sizes:
            raise ValueError(f"sizes has no entry for dataset {name!r}")
        size = sizes[name]
        if isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size <= 0:
            raise ValueError(f"sizes[{name!r}] must be a positive integer, got {size!r}")
        if groups is None:
            group = group_of(name) or "other"
        elif name in groups:
            group = groups[name]
        else:
            raise ValueError(f"groups has no entry for dataset {name!r}")
        by_group.setdefault(group, []).append(name)
    out = {}
    for group, names in sorted(by_group.items()):
        names = sorted(names)
        weights = np.array([sizes[name] for name in names], dtype=np.float64)
        keys = [k for k, v in per_dataset[names[0]].items() if k not in _NOT_AVERAGED
                and isinstance(v, (int, float, np.number)) and not isinstance(v, bool)]
        keys = [k for k in keys if all(isinstance(per_dataset[d].get(k), (int, float, np.number))
                                       and not isinstance(per_dataset[d].get(k), bool) for d in names)]
        result: dict = {k: float(np.dot(weights, [float(per_dataset[d][k]) for d in names]) / weights.sum())
                        for k in keys}
        result["n"] = int(weights.sum())
        result["datasets"] = names
        out[group] = result
    return out
