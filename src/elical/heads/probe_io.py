"""Saving and loading a :class:`elical.heads.probe.ProbeHead`: weights and standardisation as safetensors, parameters
and training metadata as JSON (no pickle anywhere); and the head's network."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import save_file

from elical.fileio import atomic_path, write_text_atomic
from elical.records import read_safetensors

__all__ = ["save_probe_head", "load_probe_head", "mlp_widths"]

_FORMAT = "elical.ProbeHead"
_FORMAT_VERSION = 1


def mlp_widths(n_features: int, hidden_size: int | None = None) -> tuple[int, ...]:
    """Widths of the mlp head's layers after the input: the official shape ``(H // 2, H // 4, 1)`` of
    ``train_mlp.py`` (Ni et al., arXiv 2510.17509) when ``hidden_size`` is None, else ``(hidden_size, 1)``."""
    if hidden_size is None:
        return max(1, n_features // 2), max(1, n_features // 4), 1
    return hidden_size, 1


def _build_net(kind: str, n_features: int, hidden_size: int | None, generator: torch.Generator) -> torch.nn.Sequential:
    # skip_init builds the layers without nn.Linear's own reset_parameters, which would draw from the global RNG;
    # the initialisation is then PyTorch's default (Kaiming-uniform weights, uniform bias), drawn from `generator`.
    if kind == "linear":
        layers = [torch.nn.utils.skip_init(torch.nn.Linear, n_features, 1)]
    elif hidden_size is None:  # the official MLP: Linear, ReLU, Linear, ReLU, Linear (keys 0.*, 2.*, 4.*)
        layers, width = [], n_features
        for out in mlp_widths(n_features):
            layers += [torch.nn.utils.skip_init(torch.nn.Linear, width, out), torch.nn.ReLU()]
            width = out
        layers = layers[:-1]
    else:
        layers = [
            torch.nn.utils.skip_init(torch.nn.Linear, n_features, hidden_size),
            torch.nn.ReLU(),
            torch.nn.utils.skip_init(torch.nn.Linear, hidden_size, 1),
        ]
    for layer in layers:
        if isinstance(layer, torch.nn.Linear):
            torch.nn.init.kaiming_uniform_(layer.weight, a=math.sqrt(5), generator=generator)
            bound = 1.0 / math.sqrt(layer.in_features)
            torch.nn.init.uniform_(layer.bias, -bound, bound, generator=generator)
    return torch.nn.Sequential(*layers)


def save_probe_head(head, directory) -> None:
    """See :meth:`elical.heads.probe.ProbeHead.save`."""
    head._check_fitted()
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    tensors = {f"module.{k}": v.detach().contiguous() for k, v in head.module_.state_dict().items()}
    tensors["mean"] = torch.from_numpy(head.mean_.copy())
    tensors["scale"] = torch.from_numpy(head.scale_.copy())
    meta = {
        "format": _FORMAT, "format_version": _FORMAT_VERSION, "kind": head.kind,
        "n_features": int(head.n_features_in_), "params": _jsonable(head.get_params()),
        "fitted": {"n_epochs_": int(head.n_epochs_), "best_epoch_": int(head.best_epoch_),
                   "best_val_loss_": head.best_val_loss_,
                   "history_": [list(row) for row in head.history_]},
    }
    with atomic_path(directory / "head.safetensors") as tmp:
        save_file(tensors, str(tmp), metadata={"format": "pt"})
    write_text_atomic(directory / "head.json", json.dumps(meta, indent=2) + "\n")


def load_probe_head(cls, directory):
    """See :meth:`elical.heads.probe.ProbeHead.load` (``cls``: the head class)."""
    directory = Path(directory)
    meta = json.loads((directory / "head.json").read_text(encoding="utf-8"))
    if meta.get("format") != _FORMAT:
        raise ValueError(f"{directory / 'head.json'}: not a {_FORMAT} file (format={meta.get('format')!r})")
    tensors = read_safetensors(directory / "head.safetensors")[0]  # a truncated file: InputError naming it
    head = cls(**meta["params"])
    net = _build_net(meta["kind"], int(meta["n_features"]), head.hidden_size, torch.Generator().manual_seed(0))
    state = {k[len("module."):]: v for k, v in tensors.items() if k.startswith("module.")}
    try:
        net.load_state_dict(state)
    except RuntimeError as exc:
        raise ValueError(f"{directory / 'head.safetensors'}: weights do not match head.json: {exc}") from None
    net.eval()
    head.module_ = net
    head.mean_ = tensors["mean"].numpy().astype(np.float64)
    head.scale_ = tensors["scale"].numpy().astype(np.float64)
    head.n_features_in_ = int(meta["n_features"])
    fitted = meta["fitted"]
    head.history_ = [tuple(row) for row in fitted["history_"]]
    head.n_epochs_, head.best_epoch_ = fitted["n_epochs_"], fitted["best_epoch_"]
    head.best_val_loss_ = fitted["best_val_loss_"]
    return head


def _jsonable(params: dict) -> dict:
    return {k: (v.item() if isinstance(v, np.generic) else v) for k, v in params.items()}
