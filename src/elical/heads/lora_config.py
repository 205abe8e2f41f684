"""Configuration of the LoRA + linear head (:class:`elical.heads.lora.LoRAHead`): the paper's hyper-parameters
(Ni et al., arXiv 2510.17509, Sec. 3 and App.) and the choice of projections that get adapters."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["LoRAConfig", "detect_target_modules"]


@dataclass(frozen=True)
class LoRAConfig:
    """Hyper-parameters of a :class:`LoRAHead`. Defaults: the paper's LoRA and optimiser settings.

    rank, alpha, dropout : LoRA rank r, scaling alpha (update scaled by alpha / r) and dropout (paper: 8, 16, 0).
    target_modules : names of the projections that get adapters; None detects every linear projection of the
        decoder (:func:`detect_target_modules`: q/k/v/o and gate/up/down for Llama-like models).
    learning_rate : peak AdamW step size of the adapters; head_learning_rate: of the head (None: the same).
    weight_decay : AdamW decoupled weight decay (paper: 0.1). warmup_ratio: share of the planned optimiser steps
        with a linear warm-up; the rate then decays linearly towards 0 at ``max_epochs`` (paper: 0.1).
    batch_size : prompts per forward pass *per process*; grad_accumulation: forward passes per process per
        optimiser step. Effective batch (prompts per optimiser step) = ``batch_size * processes *
        grad_accumulation``, processes being 1 without a launcher and ``WORLD_SIZE`` under ``accelerate launch`` /
        ``torchrun`` (:mod:`elical.heads.distributed`); the paper: 16 x 4 GPUs x 8 = 512 on 560k questions. The
        learning-rate schedule counts optimiser steps, so W processes x b give the run of 1 process x W*b.
        max_grad_norm: gradient clipping of the summed gradient (None: off; the transformers Trainer default is 1.0).
    mixed_precision : "auto" (bfloat16 autocast of the training forward passes on a CUDA device that has it,
        float32 elsewhere, e.g. on a CPU), "bf16" or "no". Weights, gradients, optimiser state, validation and
        :meth:`LoRAHead.predict` stay float32 (on the model's own dtype).
    max_epochs, patience, tol : early stopping as :class:`elical.heads.probe.ProbeHead`: stop after ``patience`` epochs
        without a validation-MSE decrease larger than ``tol``; keep the best epoch's weights (epoch 0 included).
    validation_fraction : seeded share of the training prompts held out for early stopping when no ``val`` is
        given (none below :data:`elical.heads.validation.MIN_SAMPLES_FOR_VALIDATION` prompts: then
        ``min(max_epochs, epochs_without_validation)`` epochs and the last weights).
    freeze_lora : train the head only, keeping the adapter as it starts (stage 2 option; the paper's default,
        and ours, is to keep training it).
    validation : "holdout" (the seeded ``validation_fraction``, best epoch kept) or "cv": ``cv_folds``-fold
        cross-validation (leave-one-out below :data:`elical.heads.validation.MIN_SAMPLES_FOR_VALIDATION`) picks
        the number of epochs (median of the folds' best, 0 allowed), then the head trains on all prompts for
        that many on the folds' schedule -- the path of the probe heads' stage 2 and Cal-Only.
    random_state : seeds the adapter and head initialisation, the validation split, the shuffling and LoRA
        dropout; the global torch RNG state is saved and restored around :meth:`LoRAHead.fit`. With several
        processes every one draws the same initialisation, split and shuffling; LoRA dropout masks differ by rank
        (so only at dropout 0, the default, does W x b reproduce 1 x W*b).
    """

    rank: int = 8
    alpha: float = 16.0
    dropout: float = 0.0
    target_modules: tuple[str, ...] | None = None
    learning_rate: float = 1e-4
    head_learning_rate: float | None = 1e-3
    weight_decay: float = 0.1
    warmup_ratio: float = 0.1
    batch_size: int = 16
    grad_accumulation: int = 1
    max_grad_norm: float | None = 1.0
    max_epochs: int = 10
    patience: int = 4
    tol: float = 1e-5
    validation_fraction: float = 0.2
    epochs_without_validation: int = 5
    freeze_lora: bool = False
    validation: str = "holdout"
    cv_folds: int = 5
    random_state: int = 0
    mixed_precision: str = "auto"

    def __post_init__(self):
        if self.target_modules is not None:
            object.__setattr__(self, "target_modules", tuple(self.target_modules))
        if self.validation not in ("holdout", "cv"):
            raise ValueError(f"LoRAConfig.validation must be 'holdout' or 'cv', got {self.validation!r}")
        if self.mixed_precision not in ("auto", "bf16", "no"):
            raise ValueError(f"LoRAConfig.mixed_precision must be 'auto', 'bf16' or 'no', got {self.mixed_precision!r}")
        for name in ("rank", "batch_size", "grad_accumulation", "patience", "cv_folds"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 1:
                raise ValueError(f"LoRAConfig.{name} must be a positive integer, got {value!r}")
        for name in ("max_epochs", "epochs_without_validation", "random_state"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
                raise ValueError(f"LoRAConfig.{name} must be a non-negative integer, got {value!r}")
        if not (self.alpha > 0 and self.learning_rate > 0 and (self.head_learning_rate or 1) > 0):
            raise ValueError("LoRAConfig.alpha, learning_rate and head_learning_rate must be > 0")
        if not (self.weight_decay >= 0 and self.tol >= 0 and (self.max_grad_norm or 1) > 0):
            raise ValueError("LoRAConfig.weight_decay and tol must be >= 0, max_grad_norm > 0 or None")
        for name in ("dropout", "warmup_ratio", "validation_fraction"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ValueError(f"LoRAConfig.{name} must be in [0, 1), got {getattr(self, name)!r}")


def detect_target_modules(model) -> tuple[str, ...]:
    """Names of the linear projections inside the model's blocks, the LoRA targets (the paper: all of them).

    Every ``torch.nn.Linear`` (or transformers ``Conv1D``, GPT-2 style) except the output embedding (``lm_head``),
    by its last name component: ``('down_proj', 'gate_proj', 'k_proj', 'o_proj', 'q_proj', 'up_proj', 'v_proj')``
    for Llama/Qwen/SmolLM2. Layers already wrapped by peft count by their own name. Raises ValueError when there is
    none.
    """
    import torch
    from peft.tuners.tuners_utils import BaseTunerLayer
    from transformers.pytorch_utils import Conv1D

    out = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    names = set()
    for qualified, module in model.named_modules():
        leaf = qualified.rsplit(".", 1)[-1]
        if "lora_" in qualified or "base_layer" in qualified or module is out or leaf in ("lm_head", "score"):
            continue
        if isinstance(module, (BaseTunerLayer, torch.nn.Linear, Conv1D)):
            names.add(leaf)
    if not names:
        raise ValueError(f"no linear projection found in {type(model).__name__} to put LoRA adapters on")
    return tuple(sorted(names))


_FORMAT = "elical.LoRAHead"  # head.json "format" of a saved LoRAHead
_FORMAT_VERSION = 1
_PEFT_PREFIX = "base_model.model."  # key prefix of a PeftModel's adapter file: PeftModel.from_pretrained reads ours


def _rng_devices(model) -> list[int]:
    """CUDA devices whose RNG :meth:`elical.heads.lora.LoRAHead.fit` forks (saves and restores)."""
    return sorted({p.device.index or 0 for p in model.parameters() if p.device.type == "cuda"})
