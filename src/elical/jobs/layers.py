"""Where the confidence lives: heads on other layers and poolings, reported beside the run's primary heads.

``elical run --layer 8,15,-1 --pooling last,mean`` (or ``--layer all``: every transformer layer) trains Eli-Only,
Cal-Only(k) and EliCal(k) on every (layer, pooling) pair as well as on the primary one, on the same pool, labels
and evaluation ids, named ``Eli-Only [L8]``, ``EliCal(64) [L15 mean]`` (layers by their non-negative index into
``output_hidden_states``: ``-1`` of a 30-layer model is ``L30``). Probing studies find middle layers generalise
better out of domain than the final one (e.g. Azaria & Mitchell 2023; Marks & Tegmark 2023); the layer table
(:func:`layer_table`) measures it on the HonestyBench in-domain and out-of-domain averages.

The primary heads stay the paper's (Ni et al., arXiv 2510.17509, Sec. 3): the last real prompt token of the
first ``--layer``, saved in ``features/hidden_states.safetensors`` as before (``elical predict`` and ``elical sweep``
read it). Every other set goes to ``features/hidden_states.layer-<L>.<pooling>.safetensors`` with its meta. Last-token
states come from the decoder's prefill (:func:`elical.jobs.annotate.annotate`), mean-pooled ones from one separate
pass (:func:`elical.generation.features.extract_hidden_states`, ``pooling="mean"``).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from elical.records import InputError

__all__ = ["parse_layer_arg", "parse_pooling_arg", "canonical_layer", "check_layers", "layer_tag", "feature_sets",
           "prefill_layers", "features_path", "stage_layer_features", "run_dir_features", "stage_layer_heads",
           "layer_table"]


def parse_layer_arg(text: str) -> tuple[int | None, tuple[int, ...] | str | None]:
    """``--layer``: ``"8"`` -> ``(8, None)`` (one layer, as before); ``"8,15,-1"`` -> ``(8, (8, 15, -1))`` (the first
    is the primary); ``"all"`` -> ``(None, "all")`` (the primary stays the configured one, final by default).
    Raises InputError naming ``--layer``."""
    text = str(text).strip()
    if text.lower() == "all":
        return None, "all"
    try:
        values = tuple(int(v) for v in text.split(",") if v.strip())
    except ValueError:
        raise InputError("--layer", None, "--layer", f"expected an integer, a comma-separated list of integers "
                         f"or 'all', got '{text}'") from None
    if not values:
        raise InputError("--layer", None, "--layer", "empty list")
    return values[0], (values if len(values) > 1 else None)


def parse_pooling_arg(text: str) -> str:
    """``--pooling``: ``last``, ``mean`` or both (``last,mean``); returned normalized. Raises InputError."""
    from elical.generation.pooling import POOLINGS

    names = [p.strip().lower() for p in str(text).split(",") if p.strip()]
    bad = [p for p in names if p not in POOLINGS]
    if not names or bad:
        raise InputError("--pooling", None, "--pooling", f"expected {', '.join(POOLINGS)} or a comma-separated "
                         f"list of them, got '{text}'")
    return ",".join(p for p in POOLINGS if p in names)


def canonical_layer(layer: int, n_layers: int) -> int:
    """Non-negative index into ``output_hidden_states`` (n_layers + 1 entries: 0 = embeddings); -1 -> n_layers."""
    return layer if layer >= 0 else n_layers + 1 + layer


def check_layers(cfg, n_layers: int) -> list[int]:
    """The run's layers as non-negative indices, primary (``cfg.layer``) first, no repeats: ``cfg.layers`` ("all":
    1 .. n_layers, every transformer layer) or the primary alone. Raises InputError naming ``--layer`` for an index
    outside [-(n_layers + 1), n_layers] or a malformed value, and ``--pooling`` for an unknown pooling."""
    listed = cfg.layers
    if listed == "all":
        listed = tuple(range(1, n_layers + 1))
    elif listed is None:
        listed = ()
    elif isinstance(listed, str) or not all(isinstance(v, int) and not isinstance(v, bool) for v in listed):
        raise InputError("--layer", None, "--layer", f"expected integers or 'all', got {listed!r}")
    parse_pooling_arg(cfg.pooling)
    out = []
    for v in (cfg.layer, *listed):
        if not -(n_layers + 1) <= v <= n_layers:
            raise InputError("--layer", None, "--layer", f"layer {v} out of range for {cfg.model} "
                             f"({n_layers} layers): expected -{n_layers + 1} .. {n_layers} (0 = embeddings, "
                             f"-1 = final)")
        out.append(canonical_layer(v, n_layers))
    return list(dict.fromkeys(out))


def layer_tag(layer: int, pooling: str) -> str:
    """Method tag of a feature set: ``"L8"`` (last token) or ``"L8 mean"``."""
    return f"L{layer}" if pooling == "last" else f"L{layer} {pooling}"


def feature_sets(cfg, n_layers: int) -> list[tuple[int, str]]:
    """The (layer, pooling) pairs beside the primary (first layer, last token): every run layer x every pooling of
    ``cfg.pooling``. Empty for a run with one layer and last-token pooling (today's run). Raises as
    :func:`check_layers`."""
    layers = check_layers(cfg, n_layers)
    pairs = [(layer, p) for p in parse_pooling_arg(cfg.pooling).split(",") for layer in layers]
    return [pair for pair in pairs if pair != (layers[0], "last")]


def prefill_layers(cfg, n_layers: int) -> tuple[int, ...]:
    """Layers whose last-token states the decoder's prefill should return: the primary (as configured) and every
    last-token feature set."""
    return tuple(dict.fromkeys([cfg.layer, *(layer for layer, p in feature_sets(cfg, n_layers) if p == "last")]))


def features_path(run_dir, layer: int, pooling: str) -> Path:
    """``features/hidden_states.layer-<layer>.<pooling>.safetensors`` of a run directory."""
    return Path(run_dir) / "features" / f"hidden_states.layer-{layer}.{pooling}.safetensors"


def stage_layer_features(run_dir, records: list[dict], model, tok, cfg, fresh: dict | None = None,
                         progress: bool = True) -> dict[tuple[int, str], np.ndarray]:
    """Features of every set of :func:`feature_sets`: {(layer, pooling): float32 ndarray of shape (len(records),
    hidden_size)}, in record order, each saved (and on a resumed run reloaded when its ids match).

    Last-token states are taken from ``fresh`` (``{id: {layer: state}}`` from the prefill; layers keyed as
    requested by :func:`prefill_layers`), the rest by one pass over all missing layers; mean pooling by one pass
    over all its layers (the question's tokens: :mod:`elical.generation.pooling`)."""
    from elical.generation.features import extract_hidden_states, load_features, save_features

    n_layers = model.config.num_hidden_layers
    ids = [r["id"] for r in records]
    out, todo = {}, []
    for layer, pooling in feature_sets(cfg, n_layers):
        path = features_path(run_dir, layer, pooling)
        if path.exists():
            saved_ids, feats, _ = load_features(path)
            if saved_ids == ids:
                out[(layer, pooling)] = np.asarray(feats, dtype=np.float32)
                continue
        todo.append((layer, pooling))
    by_key = {canonical_layer(k, n_layers): k for k in prefill_layers(cfg, n_layers)}
    last = [layer for layer, p in todo if p == "last"]
    if last:
        feats = {layer: np.zeros((len(records), model.config.hidden_size), np.float32) for layer in last}
        rest = [i for i, r in enumerate(records)
                if any(by_key.get(layer, layer) not in (fresh or {}).get(r["id"], {}) for layer in last)]
        skip = set(rest)
        for i, r in enumerate(records):
            if i not in skip:
                for layer in last:
                    feats[layer][i] = fresh[r["id"]][by_key.get(layer, layer)]
        if rest:
            extra = extract_hidden_states(model, tok, [records[i]["prompt"] for i in rest], layer=last,
                                          batch_size=cfg.batch_size, progress=progress)
            for layer in last:
                feats[layer][rest] = extra[layer]
        out.update(((layer, "last"), feats[layer]) for layer in last)
    mean = [layer for layer, p in todo if p == "mean"]
    if mean:
        feats = extract_hidden_states(model, tok, [r["prompt"] for r in records], layer=mean,
                                      batch_size=cfg.batch_size, progress=progress, pooling="mean",
                                      questions=[r["question"] for r in records])
        out.update(((layer, "mean"), feats[layer]) for layer in mean)
    token = {"last": "last prompt token", "mean": "mean over the question's tokens"}
    for layer, pooling in todo:
        save_features(features_path(run_dir, layer, pooling), ids, out[(layer, pooling)],
                      meta={"model": cfg.model, "layer": layer, "pooling": pooling, "token": token[pooling]})
    return {pair: out[pair] for pair in feature_sets(cfg, n_layers)}


def run_dir_features(run_dir, run_cfg: dict, records: list[dict], layers, pooling: str,
                     progress: bool = False) -> dict[str, np.ndarray]:
    """For ``elical sweep --layer``: {tag: float32 features of shape (len(records), hidden_size), in record order}
    of every (layer, pooling) of ``layers`` ("8,15,-1", "all", a list of ints; None: the run's own layer) x
    ``pooling`` other than the run's own features (last token of its ``layer``: the untagged rows). Read from the
    run's :func:`features_path` files when they hold every record, else computed with the run's model
    (``run_cfg``: its config.json) and saved there. Raises InputError naming ``--layer`` for a layer out of range or
    a malformed list."""
    from dataclasses import dataclass

    from transformers import AutoConfig

    from elical.generation.features import extract_hidden_states, load_features, save_features
    from elical.generation.models import DEFAULT_MODEL, resolve_model_path

    @dataclass(frozen=True)
    class _Cfg:  # what check_layers and feature_sets read of a run configuration
        model: str
        layer: int
        layers: tuple | str | None
        pooling: str

    model_name = run_cfg.get("model", DEFAULT_MODEL)
    run_layer = int(run_cfg.get("layer", -1))
    if layers is None:
        listed = (run_layer,)
    elif isinstance(layers, str):
        first, listed = parse_layer_arg(layers)
        listed = listed or (first,)
    else:
        listed = tuple(int(v) for v in layers)
    n_layers = AutoConfig.from_pretrained(resolve_model_path(model_name)).num_hidden_layers
    cfg = _Cfg(model_name, run_layer, listed, pooling)
    ids = [r["id"] for r in records]
    out, todo = {}, []
    for layer, pool in feature_sets(cfg, n_layers):
        path = features_path(run_dir, layer, pool)
        if path.exists():
            got_ids, feats, _ = load_features(path)
            row = {rid: i for i, rid in enumerate(got_ids)}
            if all(i in row for i in ids):
                out[layer_tag(layer, pool)] = np.asarray(feats, dtype=np.float32)[[row[i] for i in ids]]
                continue
        todo.append((layer, pool))
    if todo:
        from elical.generation.models import load_model

        model, tok = load_model(model_name, device=run_cfg.get("device", "cpu"))
        for pool in sorted({p for _, p in todo}):
            want = [la for la, p in todo if p == pool]
            feats = extract_hidden_states(model, tok, [r["prompt"] for r in records], layer=want,
                                          batch_size=int(run_cfg.get("batch_size", 16)), progress=progress,
                                          pooling=pool, questions=[r["question"] for r in records])
            for layer in want:
                save_features(features_path(run_dir, layer, pool), ids, feats[layer],
                              meta={"model": model_name, "layer": layer, "pooling": pool, "made_by": "elical sweep"})
                out[layer_tag(layer, pool)] = feats[layer]
    return {layer_tag(la, p): out[layer_tag(la, p)] for la, p in feature_sets(cfg, n_layers)}


def stage_layer_heads(run_dir, records: list[dict], sets: dict[tuple[int, str], np.ndarray], cfg,
                      progress: bool = True) -> dict[str, np.ndarray]:
    """Eli-Only, Cal-Only(k) and EliCal(k) on every feature set (:func:`elical.jobs.heads_stage.stage_heads` with
    the set's tag; the same pool, k labels and targets as the primary heads). Returns {method: confidence on the
    evaluation records}. Every head gets a ``model.json`` with its layer and pooling, so ``elical predict`` and
    :class:`elical.heads.confidence.ConfidenceModel` can use it."""
    import time

    from elical.jobs.heads_stage import stage_heads
    from elical.jobs.released import instruction_of

    preds: dict[str, np.ndarray] = {}
    for (layer, pooling), feats in sets.items():
        t0 = time.time()
        got, _ = stage_heads(run_dir, records, feats, cfg, tag=layer_tag(layer, pooling), cal_only_all=False,
                             model_json={"model": cfg.model, "layer": layer, "pooling": pooling,
                                         "instruction": instruction_of(cfg)})
        preds.update(got)
        if progress:
            print(f"heads [{layer_tag(layer, pooling)}]: {time.time() - t0:.1f} s", file=sys.stderr, flush=True)
    return preds


def _scopes(results: dict) -> dict[str, dict]:
    """{scope: {method: metrics}}: all evaluation questions, then the HonestyBench group averages when the run has
    several datasets (a group's AUROC is nan when one of its datasets has a single class)."""
    from elical.evaluation.aggregate import aggregate

    datasets = [d for d in results if d != "all"]
    out: dict = {"all": results["all"]}
    for method in results["all"]:
        per = {d: results[d][method] for d in datasets if method in results[d]}
        for group, values in aggregate(per, {d: per[d]["n"] for d in per}).items():
            out.setdefault(group, {})[method] = values
    return out


def layer_table(results: dict, cfg, n_layers: int, metric: str = "auroc") -> tuple[str, list[dict]]:
    """Markdown table and rows: per feature set (the primary first, marked), ``metric`` of Eli-Only, Cal-Only(k)
    and EliCal(k) at the largest k, on all evaluation questions and on each HonestyBench group (in-domain,
    out-of-domain, ...). ``results``: ``score_methods`` output {scope: {method: metrics}}."""
    from elical.jobs.heads_stage import tagged

    scopes = _scopes(results)
    primary = canonical_layer(cfg.layer, n_layers)
    sets = [(primary, "last", None)] + [(la, p, layer_tag(la, p)) for la, p in feature_sets(cfg, n_layers)]
    rows, cols = [], []
    for layer, pooling, tag in sets:
        row = {"layer": layer, "pooling": pooling, "primary": tag is None}
        for scope, methods in scopes.items():
            ks = [m for m in methods if m.startswith("EliCal(") and "[" not in m]
            kk = max((int(m[7:-1]) for m in ks), default=max(cfg.k_values))
            for base in ("Eli-Only", f"Cal-Only({kk})", f"EliCal({kk})"):
                value = methods.get(tagged(base, tag), {}).get(metric)
                row[f"{scope}/{base}"] = None if value is None else float(value)
                if f"{scope}/{base}" not in cols:
                    cols.append(f"{scope}/{base}")
        rows.append(row)
    head = "| layer | pooling | " + " | ".join(cols) + " |"
    lines = [f"### {metric.upper()} per layer ({', '.join(scopes)})", "", head, "|---" * (len(cols) + 2) + "|"]
    for row in rows:
        cells = ["n/a" if row[c] is None or row[c] != row[c] else f"{row[c]:.3f}" for c in cols]
        lines.append(f"| L{row['layer']}{' (primary)' if row['primary'] else ''} | {row['pooling']} | "
                     + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n", rows
