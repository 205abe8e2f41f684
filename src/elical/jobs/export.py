"""``elical export-head``: one of our heads in the reference code's checkpoint format.

Writes ``vector_head_linear.pt`` or ``vector_head_mlp.pt`` (the head's state dict, standardisation folded into the
first Linear layer, so it gives the same confidences on raw hidden states), ``lora/`` (a peft adapter directory, for
LoRA heads) and ``elical_reference.json`` (base model, layer, prompt format) into a new directory. The reference code
(Ni et al., arXiv 2510.17509) and :meth:`elical.heads.confidence.ConfidenceModel.from_reference` read it; so do
``elical predict OUT_DIR`` and ``elical serve --confidence-head OUT_DIR``. See ``docs/models.md``.
"""

from __future__ import annotations

__all__ = ["register"]


def register(subparsers) -> None:
    """Add the ``export-head`` subcommand to the ``elical`` parser."""
    p = subparsers.add_parser("export-head", help="write a trained head in the reference code's format "
                              "(vector_head_*.pt + LoRA adapter dir)", description=__doc__.split("\n\n")[1])
    p.add_argument("head_dir", metavar="HEAD_DIR", help="a trained head, e.g. runs/<run>/heads/elical_k64")
    p.add_argument("--output", required=True, metavar="OUT_DIR", help="new (or empty) directory to write")
    p.set_defaults(handler=_handle)


def _handle(args) -> int:
    from elical.heads.reference import EXPORT_JSON, export_head, read_export_json

    out = export_head(args.head_dir, args.output)
    meta = read_export_json(out)
    extra = f" + {out / meta['lora_dir']}/" if meta.get("lora_dir") else ""
    print(f"wrote {out / meta['head_file']}{extra} and {out / EXPORT_JSON} (base model {meta['base_model']}, "
          f"layer {meta['layer']})")
    return 0
