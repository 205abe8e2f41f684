"""Markdown tables of ``elical study`` in the paper's layout (Ni et al., arXiv 2510.17509, Tables 1-2): one table
per group and metric, rows = label count k, columns = the methods; cells are the mean over seeds ± the seeds'
sample standard deviation, with the 95 % bootstrap interval (question sampling) in brackets for AUROC."""

from __future__ import annotations

from elical.study.summary import method_family

__all__ = ["COLUMNS", "format_study", "format_group_table", "format_dataset_table", "format_elicitation",
           "format_headline", "format_label_free", "format_layer_table", "format_paired"]

#: Columns of the paper's layout, then the calibrated rivals we add.
COLUMNS = ("N-Prob", "Consis-Sem", "Eli-Only", "Cal-Only", "EliCal", "Eli-Only+Platt", "Eli-Only+Isotonic",
           "Consis-Sem+Isotonic")
_TITLES = {"in_domain": "in-domain", "out_of_domain": "out-of-domain", "unseen": "MMLU (unseen task)",
           "other": "other datasets"}


def _metric_title(name: str) -> str:
    """The registry's column title with its direction: "AUROC ↑", "ECE ↓"."""
    from elical.evaluation import METRICS

    info = METRICS[name].info
    return f"{info['title']} {'↑' if info['higher'] else '↓'}"


def _shown(metrics) -> list[str]:
    """``metrics``, or the registry's study metrics (flag ``study``) shown in the printed tables (``headline``)."""
    from elical.evaluation import headline_metrics
    from elical.study.summary import study_metrics

    return list(metrics) if metrics is not None else [m for m in study_metrics()[0] if m in headline_metrics()]


def _ok(v) -> bool:
    """A number that is not nan (study.json holds undefined values as null)."""
    return isinstance(v, (int, float)) and v == v


def _cell(stats: dict | None, with_ci: bool = False) -> str:
    if not stats or not _ok(stats["mean"]):
        return "–"
    text = f"{stats['mean']:.3f}"
    if stats.get("std"):
        text += f" ± {stats['std']:.3f}"
    if with_ci and stats.get("ci") and _ok(stats["ci"][0]):
        text += f" [{stats['ci'][0]:.2f}, {stats['ci'][1]:.2f}]"
    return text


def _ks(methods: dict) -> list[int]:
    return sorted({method_family(m)[1] for m in methods if method_family(m)[1] > 0})


def format_group_table(summary: dict, group: str, metric: str, n_pool: int) -> str:
    """Rows = k (the label-free methods repeat on every row), columns :data:`COLUMNS`."""
    methods = summary["methods"]
    cols = [c for c in COLUMNS if c in methods or any(method_family(m)[0] == c for m in methods)]
    lines = [f"| k (labels) | {' | '.join(cols)} |", "|---|" + "---|" * len(cols)]
    for k in _ks(methods):
        cells = []
        for c in cols:
            name = c if c in methods else f"{c}({k})"
            stats = methods.get(name, {}).get("groups", {}).get(group, {}).get(metric)
            cells.append(_cell(stats, with_ci=metric == "auroc"))
        label = f"{k} (all)" if k == n_pool else f"{k} ({k / n_pool:.1%})"
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(lines)


def format_dataset_table(summary: dict, k: int, metric: str = "auroc") -> str:
    """Rows = datasets (with their group, size and greedy accuracy), columns = the methods at label count k."""
    methods = summary["methods"]
    cols = [c if c in methods else f"{c}({k})" for c in COLUMNS]
    cols = [c for c in cols if c in methods]
    lines = [f"| dataset | group | n | accuracy | {' | '.join(cols)} |", "|---|---|---|---|" + "---|" * len(cols)]
    for d, info in summary["datasets"].items():
        cells = [_cell(methods[c]["datasets"][d][metric]) for c in cols]
        lines.append(f"| {d} | {_TITLES.get(info['group'], info['group'])} | {info['n']} | {info['accuracy']:.1%} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines)


def format_elicitation(elicitation: dict, summary: dict) -> str:
    """Eli-Only's AUROC against the unlabelled pool size, per group, and its share of Consis-Sem's AUROC."""
    sizes = sorted(int(m.split("@")[1]) for m in elicitation["methods"])
    groups = [g for g in ("in_domain", "out_of_domain", "unseen") if g in elicitation["groups"]]
    head = " | ".join(f"{_TITLES[g]} AUROC | share of Consis-Sem" for g in groups)
    lines = [f"| pool size | {head} |", "|---|" + "---|---|" * len(groups)]
    for m in sizes:
        cells = []
        for g in groups:
            stats = elicitation["methods"][f"Eli-Only@{m}"]["groups"][g]["auroc"]
            cons = summary["methods"]["Consis-Sem"]["groups"][g]["auroc"]["mean"]
            cells += [_cell(stats, with_ci=True),
                      f"{stats['mean'] / cons:.1%}" if _ok(stats["mean"]) and _ok(cons) else "–"]
        lines.append(f"| {m} | {' | '.join(cells)} |")
    cons = [f"{_TITLES[g]} {_cell(summary['methods']['Consis-Sem']['groups'][g]['auroc'])}" for g in groups]
    return "\n".join(lines) + f"\n\nConsis-Sem AUROC: {', '.join(cons)}."


def format_label_free(summary: dict, metrics=None) -> str:
    """Every method without labels (the training-free estimators and Eli-Only): rows = method, columns = metric
    per group (default: the registry's study metrics of the headline tables)."""
    metrics = _shown(metrics)
    groups = [g for g in ("in_domain", "out_of_domain", "unseen") if g in summary["groups"]]
    names = [m for m, e in summary["methods"].items() if e["k"] == 0 and " [" not in m]
    head = " | ".join(f"{_TITLES[g]} {_metric_title(m)}" for g in groups for m in metrics)
    lines = [f"| method | {head} |", "|---|" + "---|" * (len(groups) * len(metrics))]
    for name in names:
        cells = [_cell(summary["methods"][name]["groups"][g][m]) for g in groups for m in metrics]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    return "\n".join(lines)


def format_layer_table(summary: dict, k: int, tags, primary: str, metric: str = "auroc") -> str:
    """Where the confidence lives: rows = feature sets (the primary heads, then each ``tag`` such as "L8" or
    "L15 mean"), columns = Eli-Only, EliCal(k) and Cal-Only(k) per group (in-domain, out-of-domain, MMLU); cells
    mean ± seed std of ``metric``."""
    groups = [g for g in ("in_domain", "out_of_domain", "unseen") if g in summary["groups"]]
    bases = ("Eli-Only", f"EliCal({k})", f"Cal-Only({k})")
    head = " | ".join(f"{_TITLES[g]} {b}" for g in groups for b in bases)
    lines = [f"| features | {head} |", "|---|" + "---|" * (len(groups) * len(bases))]
    for tag in (None, *tags):
        cells = []
        for g in groups:
            for b in bases:
                entry = summary["methods"].get(b if tag is None else f"{b} [{tag}]", {})
                cells.append(_cell(entry.get("groups", {}).get(g, {}).get(metric)))
        lines.append(f"| {primary if tag is None else tag} | {' | '.join(cells)} |")
    return "\n".join(lines)


def _diff_cell(stats: dict | None) -> str:
    if not stats or not _ok(stats.get("mean")):
        return "–"
    text = f"{stats['mean']:+.3f}"
    if stats.get("std"):
        text += f" ± {stats['std']:.3f}"
    if stats.get("ci") and _ok(stats["ci"][0]):
        text += f" [{stats['ci'][0]:+.3f}, {stats['ci'][1]:+.3f}]"
    return text + (" *" if stats.get("distinguishable") else "")


def format_paired(summary: dict, group: str, metric: str, n_pool: int) -> str:
    """Paired differences per k: EliCal(k) - Cal-Only(k) and EliCal(k) - Eli-Only; cells: mean over seeds of the
    per-seed difference ± the seeds' std [95 % paired bootstrap interval over questions]; * = the interval excludes
    0."""
    paired = summary.get("paired", {})
    lines = [f"| k (labels) | EliCal(k) − Cal-Only(k) | EliCal(k) − Eli-Only |", "|---|---|---|"]
    for k in _ks(summary["methods"]):
        cells = [_diff_cell(paired.get(f"EliCal({k}) - {b}", {}).get("groups", {}).get(group, {}).get(metric))
                 for b in (f"Cal-Only({k})", "Eli-Only")]
        if cells == ["–", "–"]:
            continue
        label = f"{k} (all)" if k == n_pool else f"{k} ({k / n_pool:.1%})"
        lines.append(f"| {label} | {' | '.join(cells)} |")
    return "\n".join(lines)


def _distinguishable(h: dict) -> str:
    """The headline's sentence on which paired AUROC differences at its k are distinguishable from zero."""
    parts = []
    for name, groups in h.get("paired_auroc", {}).items():
        for g, st in groups.items():
            if g in ("in_domain", "out_of_domain", "unseen") and _ok(st.get("mean")):
                verdict = ("distinguishable from zero" if st["distinguishable"] else "not distinguishable from zero")
                parts.append(f"{name} {_TITLES[g]} {st['mean']:+.3f} [{st['ci'][0]:+.3f}, {st['ci'][1]:+.3f}]: "
                             f"{verdict}")
    return ("- paired AUROC differences (95 % paired bootstrap over questions): " + "; ".join(parts)) if parts else ""


def _pm(stats: dict, pct: bool = True) -> str:
    if not _ok(stats.get("mean")):
        return "undefined"
    scale, unit = (100.0, " %") if pct else (1.0, "")
    std = f" ± {stats['std'] * scale:.1f}" if stats.get("std") else ""
    return f"{stats['mean'] * scale:.1f}{std}{unit}"


def format_headline(h: dict) -> str:
    """The headline ratios as bullet points (mean ± std over seeds)."""
    k = h["k"]
    lines = [f"- label budget k = {k} ({h['label_fraction']:.2%} of the {h['n_pool']:,}-question pool)"]
    for g in ("in_domain", "out_of_domain"):
        if f"elical_over_cal_all_{g}" in h:
            line = (f"- {_TITLES[g]}: EliCal({k}) / Cal-Only(all) AUROC = {_pm(h[f'elical_over_cal_all_{g}'])}"
                    f" (above chance: {_pm(h[f'elical_over_cal_all_above_chance_{g}'])})")
            if f"eli_only_over_cal_all_{g}" in h:
                line += (f"; Eli-Only (no labels) / Cal-Only(all) = {_pm(h[f'eli_only_over_cal_all_{g}'])}"
                         f" (above chance: {_pm(h[f'eli_only_over_cal_all_above_chance_{g}'])})")
            lines.append(line)
    if _distinguishable(h):
        lines.append(_distinguishable(h))
    if "mmlu" in h:
        parts = ", ".join(f"{name} {_cell(s)}" for name, s in h["mmlu"].items())
        lines.append(f"- MMLU AUROC: {parts}")
    for g in ("in_domain", "out_of_domain", "unseen"):
        if f"eli_over_consis_sem_{g}" in h:
            s = h[f"eli_over_consis_sem_{g}"]
            lines.append(f"- {_TITLES[g]}: Eli-Only (pool {s['pool']:,}) / Consis-Sem AUROC = {_pm(s)}")
    return "\n".join(lines)


def format_study(study: dict, metrics=None) -> str:
    """The whole study as markdown: headline, then per target the group tables (``metrics``; default the
    registry's study metrics of the headline tables), per-dataset AUROC at the ~1 % budget and with all labels,
    and the elicitation curve."""
    metrics = _shown(metrics)
    s = study["sizes"]
    out = [f"# elical study: {study['config']['model']}, preset {study['config']['preset']}", "",
           f"Pool {s['pool']:,} unlabelled in-domain questions; evaluation {s['eval']:,} questions "
           f"({', '.join(f'{d} {n}' for d, n in s['eval_per_dataset'].items())}); seeds {study['config']['seeds']}; "
           f"cells: mean ± sample std over seeds [95 % bootstrap interval over questions].", ""]
    for target, res in study["targets"].items():
        out += [f"## Label target: {target}", "", "Headline:", "", format_headline(res["headline"]), ""]
        for group in res["summary"]["groups"]:
            for metric in metrics:
                out += [f"### {_TITLES.get(group, group)}: {_metric_title(metric)}", "",
                        format_group_table(res["summary"], group, metric, s["pool"]), ""]
            if res["summary"].get("paired"):
                out += [f"### {_TITLES.get(group, group)}: paired AUROC differences", "",
                        format_paired(res["summary"], group, "auroc", s["pool"]), "",
                        "Mean of the per-seed differences ± the seeds' std [95 % paired bootstrap interval over "
                        "questions]; * = the interval excludes 0.", ""]
        out += ["### Every method without labels", "", format_label_free(res["summary"]), ""]
        k1 = res["headline"]["k"]
        tags = study.get("feature_tags") or []
        if tags:
            layer = study["config"]["run"].get("layer", -1)
            out += [f"### AUROC per layer and pooling, k = {k1}", "",
                    format_layer_table(res["summary"], k1, tags, f"primary (layer {layer}, last token)"), ""]
        for k in (k1, s["pool"]):
            out += [f"### AUROC per dataset, k = {k}", "", format_dataset_table(res["summary"], k), ""]
    if study.get("elicitation"):
        first = next(iter(study["targets"].values()))["summary"]
        out += ["## Elicitation: Eli-Only against the unlabelled pool size", "",
                format_elicitation(study["elicitation"], first), ""]
    return "\n".join(out)
