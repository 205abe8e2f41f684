"""The heads stage of ``elical run``: Eli-Only, Cal-Only(k) and EliCal(k) on one set of features, saved in
``heads/<method>/`` with a fingerprint, so that ``--resume`` reloads a head instead of training it again.

The same loop trains the run's primary heads (the paper's: last prompt token of ``--layer``) and, under a tag, the
heads of the other feature sets of :mod:`elical.jobs.layers` (another layer or pooling: ``Eli-Only [L8]``,
``EliCal(64) [L15 mean]``) and of the controls of :mod:`elical.jobs.controls` (``EliCal(64) [MiniLM]``, ...).
Every tagged method is named ``<method> [<tag>]`` and saved in ``heads/<directory>.<tag slug>/``.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np

from elical.records import write_json_atomic

__all__ = ["SHUFFLED", "tagged", "tag_slug", "label_sets", "shuffled_order", "head_fingerprint", "HeadStore",
           "stage_heads"]

#: Tag of the shuffled-label control: Cal-Only(k) and EliCal(k) trained on the k labels permuted.
SHUFFLED = "shuffled"


def tagged(method: str, tag: str | None) -> str:
    """``"EliCal(64)"``, ``"L8"`` -> ``"EliCal(64) [L8]"``; no tag: the method itself."""
    return f"{method} [{tag}]" if tag else method


def tag_slug(tag: str) -> str:
    """A directory-safe form of a tag: ``"L15 mean"`` -> ``"l15-mean"``."""
    return re.sub(r"[^a-z0-9]+", "-", tag.lower()).strip("-")


def label_sets(n_pool: int, cfg) -> dict[int, np.ndarray]:
    """The k labelled questions for every k of ``cfg.k_values``: :func:`elical.heads.protocol.label_sets` of one
    seeded permutation of the pool (``random_label_order(n_pool, cfg.seed)``), shared by Cal-Only(k), EliCal(k),
    the calibrated baselines and every tagged feature set and control."""
    from elical.heads.labeling import random_label_order
    from elical.heads.protocol import label_sets as first_k

    return first_k(random_label_order(n_pool, cfg.seed), cfg.k_values)


def shuffled_order(k: int, seed: int) -> np.ndarray:
    """The seeded permutation of the k labels of the shuffled-label control: position i gets the target of
    position ``order[i]`` (indices into the sorted k). Never the identity for k >= 2 (a rotation replaces it)."""
    order = np.random.default_rng([int(seed), int(k), 12]).permutation(k)
    if k >= 2 and np.array_equal(order, np.arange(k)):
        order = np.roll(order, 1)
    return order


def head_fingerprint(method: str, ids, targets, cfg) -> str:
    """What a trained head depends on beyond the run's configuration: its method (with its tag), training questions
    and targets. SHA-1 hex digest."""
    blob = json.dumps([method, cfg.head, cfg.layer, cfg.seed, cfg.target, list(ids),
                       [round(float(v), 6) for v in targets]])
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()


class HeadStore:
    """Heads of one run directory: ``load(directory, fingerprint)`` returns the saved head when its fingerprint
    matches (else None); ``keep(directory, head, fingerprint, ...)`` saves a head not loaded that way, with
    ``model.json`` (:func:`elical.heads.confidence.write_model_json`, when ``model_json`` is given: what
    ``elical predict`` needs to rebuild the head's input) and ``fingerprint.json`` (sha1, target, and ``extra``)."""

    def __init__(self, run_dir: Path, cfg, inputs: str = "features", model=None, tok=None):
        self.root, self.cfg, self.inputs, self.model, self.tok = Path(run_dir) / "heads", cfg, inputs, model, tok
        self._resumed: set[int] = set()

    def load(self, directory: str, fingerprint: str):
        path = self.root / directory
        try:
            if json.loads((path / "fingerprint.json").read_text(encoding="utf-8")).get("sha1") != fingerprint:
                return None
        except (OSError, ValueError):
            return None
        if self.inputs == "prompts":
            from elical.heads.lora import LoRAHead

            head = LoRAHead.load(path, model=(self.model, self.tok))
        else:
            from elical.heads.probe import ProbeHead

            head = ProbeHead.load(path)
        self._resumed.add(id(head))
        return head

    def keep(self, directory: str, head, fingerprint: str, model_json: dict | None = None,
             extra: dict | None = None) -> None:
        from elical.heads.distributed import replicas

        if id(head) in self._resumed or not replicas().is_main:  # only rank 0 writes
            return
        from elical.heads.confidence import write_model_json

        path = self.root / directory
        head.save(path)
        if model_json is not None:
            write_model_json(path, **model_json)
        write_json_atomic(path / "fingerprint.json", {"sha1": fingerprint, "target": self.cfg.target,
                                                      **(extra or {})})


def stage_heads(run_dir: Path, records: list[dict], feats, cfg, model=None, tok=None, *, tag: str | None = None,
                model_json: dict | None = None, cal_only_all: bool = True, shuffled: bool = False):
    """Fit Eli-Only, Cal-Only(k), EliCal(k) on the training pool; return ({method: confidence on the eval set,
    ndarray of shape (n_eval,)}, Eli-Only's confidence on the pool, shape (n_pool,)).

    records : the run's records (``split`` "train" = pool, "test" = evaluation), in the order of ``feats``
    (ndarray of shape (len(records), n_features); unused by a head on prompts). Labels: :func:`label_sets`, target
    ``cfg.target`` (:func:`elical.heads.labeling.label_targets`: sample accuracy, the paper's, or greedy
    correctness). Stage 1 sees only self-consistency; evaluation labels are never read here. ``cfg.head``: a kind of
    :data:`elical.heads.HEADS`. ``tag``: names the methods ``<method> [tag]`` (directories ``<dir>.<slug>``).
    ``model_json``: keyword arguments of :func:`elical.heads.confidence.write_model_json` for every head (default:
    ``cfg.model`` at ``cfg.layer`` without a tag, none with one). ``cal_only_all``: also
    Cal-Only on the whole pool when it is not among the k. ``shuffled``: the shuffled-label control too,
    ``Cal-Only(k) [shuffled]`` and ``EliCal(k) [shuffled]`` (from this Eli-Only) on the same k questions with their
    targets permuted by :func:`shuffled_order` (recorded in the head's ``fingerprint.json``: ``ids``, ``targets``,
    ``true_targets``): a head that reads the model's knowledge of the question must lose it. A head saved by an earlier run of this directory with
    the same fingerprint (method, training ids, targets) is loaded instead of trained (Ni et al., arXiv
    2510.17509, Sec. 3).
    """
    from elical.heads import HEADS
    from elical.heads.labeling import label_targets
    from elical.heads.protocol import fit_heads, fit_labelled
    from elical.records import self_consistency

    pool = [r for r in records if r["split"] == "train"]
    test = [r for r in records if r["split"] == "test"]
    c_cons = np.array([self_consistency(r) for r in pool])
    y_labels = label_targets(pool, cfg.target)
    inputs = HEADS[cfg.head].info.get("inputs", "features")
    if inputs == "prompts":
        X_pool, X_test = [r["prompt"] for r in pool], [r["prompt"] for r in test]
        stages = HEADS.create(cfg.head, model=model, tokenizer=tok, base_model=cfg.model, random_state=cfg.seed)
    else:
        train = np.array([r["split"] == "train" for r in records])
        X_pool, X_test = feats[train], feats[~train]
        stages = HEADS.create(cfg.head, random_state=cfg.seed)
    if model_json is None and tag is None:
        from elical.jobs.released import instruction_of

        model_json = {"model": cfg.model, "layer": cfg.layer, "instruction": instruction_of(cfg)}
    store = HeadStore(run_dir, cfg, inputs, model, tok)
    suffix = f".{tag_slug(tag)}" if tag else ""
    ids = [r["id"] for r in pool]
    n_pool = len(pool)

    def where(method: str, k: int | None, idx) -> tuple[str, str]:
        """(directory, fingerprint) of a head: what it trains on decides whether ``--resume`` reloads it."""
        target = c_cons if k is None else y_labels[idx]
        directory = ("eli_only" if k is None else "cal_only_all" if k == n_pool and k not in sets
                     else f"{method.lower().replace('-', '_')}_k{k}")
        return directory + suffix, head_fingerprint(tagged(method, tag), [ids[i] for i in idx], target, cfg)

    sets = label_sets(n_pool, cfg)
    preds = {}
    eli = None
    import os
    import sys

    from tqdm.auto import tqdm

    # heads fitted or loaded, with a count (on a terminal; `--quiet` sets TQDM_DISABLE=1)
    shown = sys.stderr.isatty() and os.environ.get("TQDM_DISABLE") != "1"
    bar = tqdm(total=1 + 2 * len(sets) + int(cal_only_all and n_pool not in sets), unit="head", disable=not shown,
               desc="heads" + (f" [{tag}]" if tag else ""))
    for fitted in fit_heads(stages, X_pool, c_cons, y_labels, sets, include_all=cal_only_all,
                            reuse=lambda m, k, idx: store.load(*where(m, k, idx))):
        directory, fp = where(fitted.method, fitted.k, np.arange(n_pool) if fitted.whole_pool or fitted.k is None
                              else sets[fitted.k])
        store.keep(directory, fitted.head, fp, model_json)
        preds[tagged(fitted.name, tag)] = fitted.head.predict(X_test)
        eli = fitted.head if fitted.k is None else eli
        bar.update(1)
    bar.close()
    # the shuffled-label control: the same k questions and the same protocol, their targets permuted
    for k, idx in sets.items() if shuffled and inputs == "features" else ():
        y_k, ids_k = y_labels[idx][shuffled_order(len(idx), cfg.seed)], [ids[i] for i in idx]
        record = {"ids": ids_k, "targets": [float(v) for v in y_k], "true_targets": [float(v) for v in y_labels[idx]]}
        names = [(m, d, tagged(f"{m}({k})", SHUFFLED)) for m, d in (("Cal-Only", "cal_only"), ("EliCal", "elical"))]
        fps = [head_fingerprint(name, ids_k, y_k, cfg) for _, _, name in names]
        heads = [store.load(f"{d}_k{k}.{SHUFFLED}", fp) for (_, d, _), fp in zip(names, fps)]
        if None in heads:
            heads = fit_labelled(stages, eli, X_pool[idx], y_k)
        for (_, d, name), fp, head in zip(names, fps, heads):
            store.keep(f"{d}_k{k}.{SHUFFLED}", head, fp, extra=record)
            preds[name] = head.predict(X_test)
    return preds, eli.predict(X_pool)
