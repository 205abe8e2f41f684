"""Checkpoints in the reference code's format: the paper's released models in, our heads out.

The authors' code (Ni et al., arXiv 2510.17509; github.com/Trustworthy-Information-Access/
Annotation-Efficient-Universal-Honesty-Alignment, ``honesty_alignment/train_one_conf.py`` and ``train_mlp.py``) saves

- a peft adapter directory (``lora_<tag>/``: ``adapter_config.json`` + ``adapter_model.safetensors``) made by
  ``get_peft_model(AutoModel.from_pretrained(base), LoraConfig(r=8, lora_alpha=16, ...))``: its keys are relative to
  the *backbone* (``base_model.model.layers.0.self_attn.q_proj.lora_A.weight``), not to a causal-LM wrapper;
- ``vector_head_<tag>.pt``: ``torch.save`` of the head's state dict. The LoRA head is ``torch.nn.Linear(hidden, 1)``
  (keys ``weight`` [1, hidden], ``bias`` [1]); the frozen-backbone ablation's head is
  ``Sequential(Linear, ReLU, Linear, ReLU, Linear)`` (keys ``0.*``, ``2.*``, ``4.*``; widths hidden/2, hidden/4, 1).

Confidence there is ``sigmoid(head(h))`` with ``h`` the final layer's ``last_hidden_state`` (after the final norm,
equal to ``output_hidden_states[-1]``) at the last prompt position, on the raw hidden state (no standardisation).
Two differences, both deliberate: the reference reads position -1 of a padded batch (a pad token for the shorter
right-padded rows), we read each row's last *real* token (DESIGN.md), which is what the reference reads for a batch
of one; and its collator tokenizes the chat-templated prompt with the tokenizer's default special tokens, we add none
(the chat template already holds them).

A head file is read with ``torch.load(..., weights_only=True)`` only: tensors and plain containers, never an
arbitrary pickle. :func:`export_head` writes our heads in this format, with the standardisation folded into the first
Linear layer, plus :data:`EXPORT_JSON` (base model, layer, prompt format).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from elical.extras import require
from elical.fileio import atomic_path
from elical.generation.base import QA_INSTRUCTION
from elical.records import InputError

__all__ = ["REFERENCE_INSTRUCTION", "EXPORT_JSON", "ReferenceHead", "load_head_file", "load_reference",
           "read_export_json", "export_head"]

# The reference's QA prompt ("long_qa" in prompts/convert.py), inside the model's chat template.
REFERENCE_INSTRUCTION = "Answer the following question.\nQuestion: {question}"
EXPORT_JSON = "elical_reference.json"
_EXPORT_FORMAT = "elical.ReferenceExport"
_PEFT_PREFIX = "base_model.model."


class ReferenceHead:
    """A head in the reference format on frozen, raw hidden states: ``sigmoid(net(X))``.

    ``net``: ``torch.nn.Sequential`` of Linear layers with ReLU between them (see :func:`load_head_file`), input width
    ``n_features_in_``, output width 1. :meth:`predict` runs in float64 so a head exported with the standardisation
    folded in gives the same confidences as the head it came from.
    """

    def __init__(self, net):
        import copy

        self.module_ = copy.deepcopy(net).double().eval()
        self.n_features_in_ = int(net[0].in_features)
        self.kind = "linear" if len(net) == 1 else "mlp"

    def predict(self, X) -> np.ndarray:
        """X: ndarray of shape (n_samples, n_features_in_). Returns ndarray of shape (n_samples,), float64 in [0, 1]
        (higher = more likely correct). Raises ValueError for another shape or non-finite values."""
        import torch

        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2 or X.shape[1] != self.n_features_in_:
            raise ValueError(f"X must have shape (n, {self.n_features_in_}), got {X.shape}")
        if not np.isfinite(X).all():
            raise ValueError("X has non-finite values")
        with torch.no_grad():
            out = torch.sigmoid(self.module_(torch.from_numpy(X)).squeeze(-1))
        return np.clip(out.numpy(), 0.0, 1.0)


def load_head_file(path):
    """The head of a reference ``vector_head_*.pt`` file as a float32 ``torch.nn.Sequential``.

    Accepted state dicts: ``{"weight": [1, H], "bias": [1]}`` (``nn.Linear(H, 1)``) or ``{"0.weight", "0.bias",
    "2.weight", ..., "2k.weight", "2k.bias"}`` (``Sequential`` of k+1 Linear layers with ReLU between them, widths
    chaining, last width 1). Read with ``torch.load(path, map_location="cpu", weights_only=True)``.

    Raises InputError (file and field named) for a missing file, a file that ``weights_only`` refuses (any
    non-tensor object: a class instance, a function), or a state dict of another form, shape or with non-finite
    values.
    """
    import torch

    path = Path(path)
    if not path.is_file():
        raise InputError(path, None, None, "head file not found (expected a reference vector_head_*.pt)")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 -- whatever the unpickler refuses is bad input, never executed
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(path, None, None, "not a state dict of tensors loadable with torch.load(weights_only=True)"
                         f" -- refused, nothing executed ({first})") from None
    if not isinstance(state, dict) or not state:
        raise InputError(path, None, None, f"expected a state dict (key -> tensor), got {type(state).__name__}")
    for key, value in state.items():
        if not isinstance(key, str) or not isinstance(value, torch.Tensor):
            raise InputError(path, None, str(key), f"expected a tensor, got {type(value).__name__}")
    if set(state) == {"weight", "bias"}:
        state = {"0.weight": state["weight"], "0.bias": state["bias"]}
    keys = set(state)
    n = len(keys) // 2
    expected = {f"{2 * i}.{p}" for i in range(n) for p in ("weight", "bias")}
    if keys != expected:
        raise InputError(path, None, ", ".join(sorted(keys - expected) or sorted(expected - keys)),
                         "expected the keys of nn.Linear(H, 1) (weight, bias) or of Sequential(Linear, ReLU, ..., "
                         f"Linear) (0.weight, 0.bias, 2.weight, ...); got {sorted(state)}")
    layers, width = [], None
    for i in range(n):
        w, b = state[f"{2 * i}.weight"], state[f"{2 * i}.bias"]
        if w.ndim != 2 or b.shape != (w.shape[0],) or (width is not None and w.shape[1] != width):
            raise InputError(path, None, f"{2 * i}.weight", f"shape {tuple(w.shape)} with bias {tuple(b.shape)} does "
                             f"not chain (expected [out, {width or 'H'}] and [out])")
        if not (torch.isfinite(w).all() and torch.isfinite(b).all()):
            raise InputError(path, None, f"{2 * i}.weight", "non-finite values")
        linear = torch.nn.Linear(w.shape[1], w.shape[0])
        linear.load_state_dict({"weight": w.float(), "bias": b.float()})
        layers += [linear, torch.nn.ReLU()]
        width = w.shape[0]
    if width != 1:
        raise InputError(path, None, f"{2 * (n - 1)}.weight", f"the last layer must output 1 value, not {width}")
    return torch.nn.Sequential(*layers[:-1]).eval()


def read_export_json(directory) -> dict | None:
    """The :data:`EXPORT_JSON` of a directory written by :func:`export_head` (keys base_model, layer, instruction,
    head_file, lora_dir, ...), or None when absent. Raises InputError for a malformed file."""
    path = Path(directory) / EXPORT_JSON
    if not path.is_file():
        return None
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(path, exc.lineno, None, f"malformed JSON ({exc.msg})") from None
    if not isinstance(meta, dict) or meta.get("format") != _EXPORT_FORMAT:
        raise InputError(path, None, "format", f"expected {_EXPORT_FORMAT!r}")
    for field, kind in (("layer", int), ("instruction", str), ("head_file", str)):
        if not isinstance(meta.get(field), kind) or isinstance(meta.get(field), bool):
            raise InputError(path, None, field, f"missing or not a {kind.__name__}")
    if "{question}" not in meta["instruction"]:
        raise InputError(path, None, "instruction", "expected a prompt template containing {question}")
    return meta


def _adapter_config(lora_dir: Path) -> dict:
    """The validated ``adapter_config.json`` of a peft LoRA adapter directory."""
    cfg_path = lora_dir / "adapter_config.json"
    if not cfg_path.is_file():
        raise InputError(cfg_path, None, None, "not found: the LoRA directory must be a peft adapter directory")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise InputError(cfg_path, exc.lineno, None, f"malformed JSON ({exc.msg})") from None
    if not isinstance(cfg, dict) or str(cfg.get("peft_type", "LORA")).upper() != "LORA":
        raise InputError(cfg_path, None, "peft_type", "expected a LoRA adapter")
    if not isinstance(cfg.get("r"), int) or not isinstance(cfg.get("lora_alpha"), (int, float)):
        raise InputError(cfg_path, None, "r", "expected integer r and numeric lora_alpha")
    targets = cfg.get("target_modules")
    if not isinstance(targets, list) or not targets or not all(isinstance(t, str) for t in targets):
        raise InputError(cfg_path, None, "target_modules", "expected a list of module names (regex: unsupported)")
    for option in ("use_dora", "use_rslora"):
        if cfg.get(option):
            raise InputError(cfg_path, None, option, "unsupported (the reference trains plain LoRA)")
    return cfg


def _read_adapter(lora_dir: Path):
    """(adapter_config dict, adapter state dict) of a peft adapter directory, without any unrestricted unpickle."""
    import torch

    cfg = _adapter_config(lora_dir)
    safe, legacy = lora_dir / "adapter_model.safetensors", lora_dir / "adapter_model.bin"
    try:
        if safe.is_file():
            from safetensors.torch import load_file

            state = load_file(str(safe))
        elif legacy.is_file():
            state = torch.load(legacy, map_location="cpu", weights_only=True)
        else:
            raise InputError(safe, None, None, "not found (nor adapter_model.bin)")
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 -- unreadable weights are bad input
        raise InputError(safe if safe.is_file() else legacy, None, None, f"unreadable adapter weights ({exc})") from None
    return cfg, state


def _reference_lora_head(lm, tok, lora_dir: Path, net, base_model):
    """A :class:`elical.heads.lora.LoRAHead` carrying the reference adapter, with identity standardisation."""
    import torch

    require("peft", "lora", "a reference LoRA adapter")
    from peft import set_peft_model_state_dict

    from elical.heads.lora import LoRAConfig, LoRAHead
    from elical.heads.lora_config import _rng_devices

    cfg, state = _read_adapter(lora_dir)
    config = LoRAConfig(rank=cfg["r"], alpha=float(cfg["lora_alpha"]), dropout=0.0,
                        target_modules=tuple(cfg["target_modules"]))
    head = LoRAHead(lm, tok, config, base_model=base_model)
    with torch.random.fork_rng(devices=_rng_devices(lm)):
        head._inject(config.target_modules)
    hidden = lm.config.hidden_size
    head.head_ = net.to(head._device)
    head.mean_ = torch.zeros(hidden, device=head._device)
    head.scale_ = torch.ones(hidden, device=head._device)
    head.history_, head.n_epochs_, head.best_epoch_, head.best_val_loss_ = [], 0, 0, None
    modules = {name for name, _ in lm.named_modules()}
    prefix = getattr(lm, "base_model_prefix", "") or ""
    mapped = {}
    for key, value in state.items():
        key = key[len(_PEFT_PREFIX):] if key.startswith(_PEFT_PREFIX) else key
        module = key.split(".lora_")[0]
        # The reference wraps the backbone (AutoModel), we hold the causal LM around it: add the backbone's name.
        if module not in modules and f"{prefix}.{module}" in modules:
            key = f"{prefix}.{key}"
        mapped[key] = value
    try:
        result = set_peft_model_state_dict(lm, mapped, adapter_name=head.adapter_name_)
    except RuntimeError as exc:
        head.release()
        raise InputError(lora_dir, None, None, f"adapter does not fit this model: {str(exc)[:300]}") from None
    missing = [k for k in getattr(result, "missing_keys", []) if f".{head.adapter_name_}." in k]
    unexpected = [k for k in getattr(result, "unexpected_keys", []) if "lora_" in k]
    if missing or unexpected:
        head.release()
        example = (missing or unexpected)[0]
        raise InputError(lora_dir, None, None, f"not an adapter of this model: {len(missing)} adapter weights missing,"
                         f" {len(unexpected)} unexpected (e.g. {example})")
    return head


def load_reference(lora_dir, head_file, base_model=None, *, layer=None, instruction=None, device: str = "cpu"):
    """Load a reference checkpoint: returns ``(head, model, tokenizer, layer, instruction, method, base_model)`` for
    :meth:`elical.heads.confidence.ConfidenceModel.from_reference` (which documents the arguments).

    ``head`` is a :class:`ReferenceHead` (``lora_dir`` None: the head reads the frozen model's hidden states) or a
    :class:`elical.heads.lora.LoRAHead` carrying the adapter (identity standardisation; the adapter is on only inside
    its own forward passes, so generation with the same model is the base model's). Raises InputError for unusable
    files or a missing base model, ValueError for a head that does not fit the model or a layer other than the final
    one with an adapter.
    """
    from elical.generation.models import load_model

    head_file = Path(head_file)
    net = load_head_file(head_file)
    meta = read_export_json(head_file.parent) or {}
    if lora_dir is not None and not Path(lora_dir).is_dir():
        raise InputError(lora_dir, None, None, "LoRA directory not found")
    recorded = meta.get("base_model")
    if recorded is None and lora_dir is not None and (Path(lora_dir) / "adapter_config.json").is_file():
        recorded = _adapter_config(Path(lora_dir)).get("base_model_name_or_path")
    if base_model is None and not recorded:
        raise InputError(head_file, None, "base_model", "no base model recorded; pass base_model (--model)")
    layer = int(meta.get("layer", -1) if layer is None else layer)
    instruction = instruction or meta.get("instruction") or REFERENCE_INSTRUCTION
    if "{question}" not in instruction:
        raise ValueError("instruction must contain the placeholder {question}")
    lm, tok = base_model if isinstance(base_model, tuple) else load_model(base_model or recorded, device)
    name = base_model if isinstance(base_model, str) else recorded
    if net[0].in_features != lm.config.hidden_size:
        raise ValueError(f"{head_file}: the head reads {net[0].in_features} features but the model's hidden size is "
                         f"{lm.config.hidden_size}: not the model it was trained on")
    if lora_dir is None:
        head = ReferenceHead(net)
    else:
        if layer != -1:
            raise ValueError(f"a LoRA head reads the final layer; got layer={layer}")
        head = _reference_lora_head(lm, tok, Path(lora_dir), net, name)
    return head, lm, tok, layer, instruction, head_file.stem, name


def _fold(weight, bias, mean, scale):
    """First Linear layer on raw states equal to ``weight @ ((x - mean) / scale) + bias``, in float64 then float32."""
    import torch

    w = torch.as_tensor(weight, dtype=torch.float64) / torch.as_tensor(scale, dtype=torch.float64)
    b = torch.as_tensor(bias, dtype=torch.float64) - w @ torch.as_tensor(mean, dtype=torch.float64)
    return w.float().contiguous(), b.float().contiguous()


def export_head(head_dir, output_dir) -> Path:
    """Write one of our heads (a directory ``elical run`` writes under ``RUN/heads/<name>/``) in the reference format.

    ``output_dir`` gets ``vector_head_linear.pt`` (linear probe or LoRA head) or ``vector_head_mlp.pt`` (mlp probe:
    keys ``0.*``, ``2.*``, ``4.*``; the default mlp has the official shape H -> H/2 -> H/4 -> 1 and loads into the
    official ``train_mlp.py`` class; an mlp with an explicit ``hidden_size`` is written as Linear-ReLU-Linear with an
    identity Linear(h, h) in the middle, exact because ReLU output is non-negative, which elical reads but the
    official class does not), the standardisation folded into the first Linear layer; ``lora/`` (peft
    adapter with backbone-relative keys, as the reference saves it) for a LoRA head; and :data:`EXPORT_JSON` with the
    base model, layer, prompt instruction and token. Returns ``output_dir``.

    Raises InputError when ``output_dir`` exists and is not empty (never overwritten) or the head directory is not
    usable.
    """
    import torch
    from safetensors.torch import load_file, save_file

    from elical.heads.probe import ProbeHead

    head_dir, output_dir = Path(head_dir), Path(output_dir)
    if output_dir.exists() and (not output_dir.is_dir() or any(output_dir.iterdir())):
        raise InputError(output_dir, None, "--output", "exists and is not empty; refusing to overwrite")
    head_json = head_dir / "head.json"
    if not head_json.is_file():
        raise InputError(head_json, None, None, "not found: HEAD_DIR must be a trained head (e.g. <run>/heads/eli_only)")
    try:
        meta = json.loads(head_json.read_text(encoding="utf-8"))
        sidecar = json.loads((head_dir / "model.json").read_text(encoding="utf-8")) \
            if (head_dir / "model.json").is_file() else {}
    except json.JSONDecodeError as exc:
        raise InputError(head_dir, exc.lineno, None, f"malformed JSON ({exc.msg})") from None
    if sidecar.get("pooling", "last") != "last":
        raise InputError(head_dir / "model.json", None, "pooling", f"the reference format reads the last prompt "
                         f"token; a head on {sidecar['pooling']}-pooled states cannot be exported")
    fmt = meta.get("format")
    instruction = sidecar.get("instruction", QA_INSTRUCTION)
    tensors_out, lora = {}, None
    try:
        if fmt == "elical.ProbeHead":
            head = ProbeHead.load(head_dir)
            net, layer, base = head.module_, int(sidecar.get("layer", -1)), sidecar.get("model")
            w, b = _fold(net[0].weight.detach(), net[0].bias.detach(), head.mean_, head.scale_)
            if len(net) == 1:
                kind, tensors_out = "linear", {"weight": w, "bias": b}
            elif len(net) == 5:  # the official shape already: Linear(H, H/2), ReLU, Linear(H/2, H/4), ReLU, Linear
                kind = "mlp"
                tensors_out = {"0.weight": w, "0.bias": b, **{f"{i}.{p}": getattr(net[i], p).detach().float().clone()
                                                              for i in (2, 4) for p in ("weight", "bias")}}
            else:
                width = w.shape[0]
                kind = "mlp"
                tensors_out = {"0.weight": w, "0.bias": b, "2.weight": torch.eye(width), "2.bias": torch.zeros(width),
                               "4.weight": net[2].weight.detach().float().clone(),
                               "4.bias": net[2].bias.detach().float().clone()}
        elif fmt == "elical.LoRAHead":
            t = load_file(str(head_dir / "head.safetensors"))
            w, b = _fold(t["head.weight"], t["head.bias"], t["mean"], t["scale"])
            kind, layer, base = "linear", -1, sidecar.get("model") or meta.get("base_model")
            tensors_out = {"weight": w, "bias": b}
            lora = _export_adapter(head_dir)
        else:
            raise InputError(head_json, None, "format", f"expected 'elical.ProbeHead' or 'elical.LoRAHead', got {fmt!r}")
    except (FileNotFoundError, KeyError, ValueError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(head_dir, None, None, f"unusable head: {exc}") from None
    output_dir.mkdir(parents=True, exist_ok=True)
    head_file = f"vector_head_{kind}.pt"
    if lora is not None:
        cfg, adapter = lora
        (output_dir / "lora").mkdir()
        (output_dir / "lora" / "adapter_config.json").write_text(json.dumps(cfg, indent=2) + "\n", encoding="utf-8")
        save_file(adapter, str(output_dir / "lora" / "adapter_model.safetensors"), metadata={"format": "pt"})
    with atomic_path(output_dir / head_file) as tmp:
        torch.save(tensors_out, tmp)
    info = {"format": _EXPORT_FORMAT, "format_version": 1, "base_model": base, "layer": layer,
            "instruction": instruction, "prompt": "the base model's chat template around the instruction (user turn, "
            "generation prompt added); no further special tokens", "token": "last real prompt token",
            "kind": kind, "head_file": head_file, "lora_dir": "lora" if lora is not None else None,
            "confidence": "sigmoid(head(hidden state)) on the raw hidden state (standardisation folded in)",
            "source": str(head_dir), "method": head_dir.name}
    (output_dir / EXPORT_JSON).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    return output_dir


def _export_adapter(head_dir: Path):
    """Our adapter (keys relative to the causal LM) with keys relative to its backbone, as the reference saves it."""
    from safetensors.torch import load_file

    cfg = json.loads((head_dir / "adapter_config.json").read_text(encoding="utf-8"))
    state = load_file(str(head_dir / "adapter_model.safetensors"))
    rest = {k[len(_PEFT_PREFIX):] if k.startswith(_PEFT_PREFIX) else k: v for k, v in state.items()}
    firsts = {k.split(".", 1)[0] for k in rest}
    # Every adapted projection lives in the backbone, whose attribute name ("model" for Llama/Qwen) leads every key.
    strip = len(firsts) == 1 and not re.fullmatch(r"layers|h|blocks", next(iter(firsts)))
    adapter = {_PEFT_PREFIX + (k.split(".", 1)[1] if strip else k): v.contiguous() for k, v in rest.items()}
    return cfg, adapter
