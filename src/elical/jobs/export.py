"""``elical export`` and ``elical export-head``: records, confidences and heads in the formats of the paper's release.

``elical export DIR --output OUT [--layout released|official] [--model-name NAME]``: the records of a build
directory (``elical build``) or a run directory (``elical run``, ``OUTPUT/run`` of ``elical study``).
``--layout released`` (default) writes ``OUT/<dataset>/<split>.jsonl`` in the released HonestyBench layout
(:func:`elical.data.honestybench.to_released`); ``--layout official`` writes what the official scripts read
(:mod:`elical.data.official`), and for a run directory every method's confidences on the evaluation records as the
official ``evaluation_results_test.jsonl`` files. The official scripts group the consistency verdicts by 20, so they
need N = 20 samples; other N are written as recorded.

``elical export-head HEAD_DIR --output OUT_DIR`` writes ``vector_head_linear.pt`` or ``vector_head_mlp.pt`` (the
head's state dict, standardisation folded into the first Linear layer, so it gives the same confidences on raw
hidden states), ``lora/`` (a peft adapter directory, for LoRA heads) and ``elical_reference.json`` (base model,
layer, prompt format) into a new directory. The reference code (Ni et al., arXiv 2510.17509) and
:meth:`elical.heads.confidence.ConfidenceModel.from_reference` read it; so do ``elical predict OUT_DIR`` and
``elical serve --confidence-head OUT_DIR``. See ``docs/models.md``.
"""

from __future__ import annotations

import json
from pathlib import Path

from elical.records import InputError

__all__ = ["register", "export_records", "read_units"]


def _run_units(root: Path) -> tuple[dict, dict, str]:
    """({(dataset, split): records in run order}, {method: {id: confidence}}, model name) of a run directory."""
    from elical.records import read_records

    cfg = json.loads((root / "config.json").read_text(encoding="utf-8"))
    rec_path = root / "records" / "annotations.jsonl"
    records = read_records(rec_path)
    if not records:
        raise InputError(rec_path, None, None, "missing or empty: the run has no records yet")
    units: dict = {}
    for r in records:
        units.setdefault((r["dataset"], r.get("split", "test")), []).append(r)
    preds: dict = {}
    pred_path = root / "predictions.jsonl"
    if pred_path.is_file():
        from elical.records import iter_json_lines

        for lineno, row in iter_json_lines(pred_path):
            try:
                preds.setdefault(row["method"], {})[row["id"]] = float(row["confidence"])
            except (KeyError, TypeError, ValueError):
                raise InputError(pred_path, lineno, "confidence", "expected id, method and a numeric "
                                 "confidence") from None
    return units, preds, str(cfg.get("model", "model"))


def _build_units(root: Path) -> tuple[dict, dict, str]:
    """({(dataset, split): records in question order}, {}, model name) of a finished build directory."""
    from elical.jobs.build import load_config, plan_units
    from elical.records import read_records

    cfg = load_config(root)
    units = {}
    for u in plan_units(cfg, log=lambda *_: None):
        ids, src = [q["id"] for q in u.questions], u.records_path(root)
        by_id = {r["id"]: r for r in read_records(src)}
        if set(by_id) != set(ids):
            raise InputError(src, None, None, f"{len(set(ids) & set(by_id))} of {len(ids)} records: finish the "
                             "build (or merge its shards) before exporting")
        units[(u.dataset, u.split)] = [by_id[i] for i in ids]
    return units, {}, str(getattr(cfg, "model", "model"))


def read_units(directory) -> tuple[dict, dict, str, str]:
    """(units, predictions, model, kind) of a build or run directory: ``units`` {(dataset, split): records},
    ``predictions`` {method: {id: confidence}} (runs only), ``kind`` "build" or "run". Raises InputError for a
    directory that is neither."""
    root = Path(directory)
    if (root / "build.json").is_file():
        return (*_build_units(root), "build")
    if (root / "config.json").is_file():
        return (*_run_units(root), "run")
    raise InputError(root, None, "DIR", "neither a build directory (build.json) nor a run directory (config.json)")


def export_records(directory, output, layout: str = "released", model_name: str | None = None, log=print) -> dict:
    """Export a build or run directory (see the module docstring). Returns {"kind", "layout", "files":
    {path: lines}}. Raises InputError, before anything is written, for a bad directory, an unfinished build, an
    unknown layout, or an output that exists and is not empty."""
    if layout not in ("released", "official"):
        raise InputError("--layout", None, "--layout", f"expected released or official, got {layout!r}")
    out = Path(output)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise InputError(out, None, "--output", "exists and is not empty; nothing was overwritten")
    units, preds, model, kind = read_units(directory)
    model = model_name or Path(model).name
    if layout == "official":
        from elical.data.official import write_official

        try:
            files = write_official(units, out, model, preds)["files"]
        except ValueError as exc:
            raise InputError(Path(directory) / "predictions.jsonl", None, "id", str(exc)) from None
    else:
        from elical.data.honestybench import write_honestybench

        files = {}
        for (dataset, split), recs in units.items():
            target = out / dataset / f"{split}.jsonl"
            files[str(target.relative_to(out))] = write_honestybench(target, recs)
    for path, n in files.items():
        log(f"wrote {n} lines to {out / path}")
    return {"kind": kind, "layout": layout, "files": files}


def register(subparsers) -> None:
    """Add the ``export`` and ``export-head`` subcommands to the ``elical`` parser."""
    e = subparsers.add_parser("export", help="write a build's or run's records (and a run's confidences) in the "
                              "released HonestyBench layout or the official scripts' layout",
                              description=__doc__.split("\n\n")[1])
    e.add_argument("build_dir", metavar="DIR", help="a build directory or a run directory")
    e.add_argument("--output", required=True, help="new (or empty) destination directory")
    e.add_argument("--layout", choices=["released", "official"], default="released",
                   help="released (<dataset>/<split>.jsonl, default) or official (the official scripts' files, "
                   "docs/build.md)")
    e.add_argument("--model-name", help="official layout: the model name in the paths (default: the run's or "
                   "build's model, e.g. Qwen2.5-7B-Instruct)")
    e.set_defaults(handler=_handle_records)
    p = subparsers.add_parser("export-head", help="write a trained head in the reference code's format "
                              "(vector_head_*.pt + LoRA adapter dir)", description=__doc__.split("\n\n")[-1])
    p.add_argument("head_dir", metavar="HEAD_DIR", help="a trained head, e.g. runs/<run>/heads/elical_k64")
    p.add_argument("--output", required=True, metavar="OUT_DIR", help="new (or empty) directory to write")
    p.set_defaults(handler=_handle)


def _handle_records(args) -> int:
    export_records(args.build_dir, args.output, args.layout, args.model_name)
    return 0


def _handle(args) -> int:
    from elical.heads.reference import EXPORT_JSON, export_head, read_export_json

    out = export_head(args.head_dir, args.output)
    meta = read_export_json(out)
    extra = f" + {out / meta['lora_dir']}/" if meta.get("lora_dir") else ""
    print(f"wrote {out / meta['head_file']}{extra} and {out / EXPORT_JSON} (base model {meta['base_model']}, "
          f"layer {meta['layer']})")
    return 0
