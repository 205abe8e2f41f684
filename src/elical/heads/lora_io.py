"""Saving and loading a :class:`elical.heads.lora.LoRAHead`: a peft adapter directory plus the head as
safetensors and JSON (no pickle anywhere)."""

from __future__ import annotations

import copy
import json
from dataclasses import asdict, fields
from pathlib import Path

from elical.extras import require
from elical.fileio import atomic_path, write_text_atomic
from elical.generation.models import load_model
from elical.heads.distributed import replicas
from elical.heads.lora_config import _FORMAT, _FORMAT_VERSION, _PEFT_PREFIX, LoRAConfig, _rng_devices

__all__ = ["save_lora_head", "load_lora_head"]


def save_lora_head(head, directory) -> None:
    """See :meth:`elical.heads.lora.LoRAHead.save`."""
    import torch
    from peft import get_peft_model_state_dict
    from safetensors.torch import save_file

    if not hasattr(head, "head_"):
        raise ValueError("this LoRAHead is not fitted yet; nothing to save")
    if not replicas().is_main:  # data-parallel training: every rank holds the same head, rank 0 writes it
        return
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = get_peft_model_state_dict(head.model, adapter_name=head.adapter_name_)
    adapter = {_PEFT_PREFIX + k: v.detach().cpu().contiguous() for k, v in state.items()}
    tensors = {"head.weight": head.head_.weight, "head.bias": head.head_.bias, "mean": head.mean_,
               "scale": head.scale_}
    tensors = {k: v.detach().cpu().contiguous().to(torch.float32) for k, v in tensors.items()}
    meta = {
        "format": _FORMAT, "format_version": _FORMAT_VERSION, "base_model": head.base_model,
        "hidden_size": int(head.head_.in_features), "target_modules": list(head.target_modules_),
        "token": "last real prompt token", "layer": "final (after the final norm)",
        "config": {**asdict(head.config), "target_modules": list(head.target_modules_)},
        "fitted": {"n_epochs_": head.n_epochs_, "best_epoch_": head.best_epoch_,
                   "best_val_loss_": head.best_val_loss_, "history_": [list(r) for r in head.history_],
                   "n_processes_": getattr(head, "n_processes_", 1),
                   "mixed_precision_": getattr(head, "mixed_precision_", "no")},
    }
    peft_cfg = copy.deepcopy(head.peft_config_)
    peft_cfg.base_model_name_or_path = head.base_model
    peft_cfg.save_pretrained(str(directory))
    for name, part in (("adapter_model.safetensors", adapter), ("head.safetensors", tensors)):
        with atomic_path(directory / name) as tmp:
            save_file(part, str(tmp), metadata={"format": "pt"})
    write_text_atomic(directory / "head.json", json.dumps(meta, indent=2) + "\n")


def load_lora_head(cls, directory, model=None, device: str = "cpu"):
    """See :meth:`elical.heads.lora.LoRAHead.load`; ``cls`` is the head class to build."""
    import torch

    require("peft", "lora", "loading a LoRA head")
    from peft import set_peft_model_state_dict
    from elical.records import read_safetensors

    directory = Path(directory)
    meta = json.loads((directory / "head.json").read_text(encoding="utf-8"))
    if meta.get("format") != _FORMAT:
        raise ValueError(f"{directory / 'head.json'}: not a {_FORMAT} file (format={meta.get('format')!r})")
    lm, tok = model if model is not None else load_model(meta["base_model"], device)
    known = {f.name for f in fields(LoRAConfig)}
    config = LoRAConfig(**{k: v for k, v in meta["config"].items() if k in known})
    head = cls(lm, tok, config, base_model=meta["base_model"])
    if lm.config.hidden_size != meta["hidden_size"]:
        raise ValueError(f"{directory}: head was trained on hidden size {meta['hidden_size']}, the model has "
                         f"{lm.config.hidden_size}")
    with torch.random.fork_rng(devices=_rng_devices(lm)):
        head._inject(meta["target_modules"])
    saved = read_safetensors(directory / "adapter_model.safetensors")[0]
    adapter = {k[len(_PEFT_PREFIX):]: v for k, v in saved.items()}
    result = set_peft_model_state_dict(lm, adapter, adapter_name=head.adapter_name_)
    missing = [k for k in getattr(result, "missing_keys", []) if f".{head.adapter_name_}." in k]
    if missing:
        raise ValueError(f"{directory / 'adapter_model.safetensors'}: {len(missing)} adapter weights missing "
                         f"(e.g. {missing[0]}): not an adapter of this model")
    tensors = read_safetensors(directory / "head.safetensors")[0]
    out_device = head._device
    linear = torch.nn.Linear(meta["hidden_size"], 1)
    linear.load_state_dict({"weight": tensors["head.weight"], "bias": tensors["head.bias"]})
    head.head_ = linear.to(out_device)
    head.mean_, head.scale_ = tensors["mean"].to(out_device), tensors["scale"].to(out_device)
    fitted = meta["fitted"]
    head.history_ = [tuple(r) for r in fitted["history_"]]
    head.n_epochs_, head.best_epoch_ = fitted["n_epochs_"], fitted["best_epoch_"]
    head.best_val_loss_ = fitted["best_val_loss_"]
    head.n_processes_ = fitted.get("n_processes_", 1)  # heads saved before data-parallel training: one process
    head.mixed_precision_ = fitted.get("mixed_precision_", "no")
    return head
