"""LoRA + linear head on the language model itself: EliCal as trained in the paper.

Ni et al. (*Annotation-Efficient Universal Honesty Alignment*, arXiv 2510.17509, Sec. 3) keep the base model frozen,
add LoRA adapters (rank 8, alpha 16, dropout 0) to every attention and MLP projection and put a linear head with a
sigmoid on the final layer's hidden state of the last prompt token; MSE loss, AdamW (weight decay 0.1), linear
warm-up over 10 % of the steps then linear decay (the transformers Trainer schedule of their code, shifted by one
step so that no step has a zero rate), gradient accumulation and early stopping on a validation loss.
:mod:`elical.heads.probe` is the fast path (frozen features, head only); this module trains the adapters too.

- :func:`elical.heads.stages.fit_lora_eli_only` -- stage 1, elicitation, on the unlabelled pool's self-consistency (Eli-Only).
- :func:`elical.heads.stages.fit_lora_elical` -- stage 2, calibration: continues from the stage-1 adapter *and* head on the k labelled
  questions (the adapter keeps training unless ``freeze_lora=True``).
- :func:`elical.heads.stages.fit_lora_cal_only` -- baseline: the same architecture from scratch on the same k questions.

Several heads share one base model: each :class:`LoRAHead` injects its own named peft adapter into the model and
switches it on only inside its own forward passes; outside them every adapter is off, so the model keeps giving
its original outputs to generation and feature extraction. Deviations from the paper, all configurable: the head
reads standardised hidden states (mean/scale of the training prompts' initial states; an affine
reparametrisation of a linear head that keeps AdamW well conditioned under the few huge "massive activation"
dimensions) and learns at ``head_learning_rate`` (1e-3), the adapters at ``learning_rate`` (1e-4), because our
pools are thousands of times smaller than HonestyBench's 560k questions.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import itertools
import math
import os
import warnings
from contextlib import contextmanager
from dataclasses import replace
from typing import Sequence

import numpy as np

from elical.extras import require
from elical.heads.cv import choose_epoch, cv_splits
from elical.heads.distributed import Replicas, replicas, resolve_precision, step_batches, training_autocast
from elical.heads.lora_config import LoRAConfig, _rng_devices, detect_target_modules
from elical.heads.validation import MIN_SAMPLES_FOR_VALIDATION, holdout_split

__all__ = ["LoRAConfig", "LoRAHead", "detect_target_modules"]

_names = itertools.count()
_MAX_STAT_PROMPTS = 2048  # prompts whose initial hidden states set the standardisation


@contextmanager
def _adapter_on(model, name: str, trainable: bool):
    """Switch on adapter ``name`` alone (its weights trainable or not); switch every adapter off afterwards."""
    from peft.tuners.tuners_utils import BaseTunerLayer

    layers = [m for m in model.modules() if isinstance(m, BaseTunerLayer)]
    for layer in layers:
        layer.set_adapter(name)
        layer.enable_adapters(True)  # also marks the active adapter's weights trainable
    if not trainable:
        key = f".{name}."
        for param_name, param in model.named_parameters():
            if key in param_name:
                param.requires_grad_(False)
    try:
        yield
    finally:
        for layer in layers:
            layer.enable_adapters(False)


def _as_prompts(prompts, name: str) -> list[str]:
    if isinstance(prompts, str) or not all(isinstance(p, str) and p for p in prompts):
        raise ValueError(f"{name} must be a sequence of non-empty strings")
    prompts = list(prompts)
    if not prompts:
        raise ValueError(f"{name} is empty")
    return prompts


def _as_targets(targets, n: int, name: str) -> np.ndarray:
    y = np.asarray(targets, dtype=np.float32)
    if y.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) to match the prompts, got {y.shape}")
    if not np.isfinite(y).all() or y.min() < 0 or y.max() > 1:
        raise ValueError(f"{name} must lie in [0, 1] (a probability target)")
    return y


class LoRAHead:
    """A sigmoid linear head on the final-layer hidden state of the last prompt token, with LoRA adapters on the
    base model (EliCal's architecture, Ni et al., arXiv 2510.17509, Sec. 3).

    Parameters
    ----------
    model, tokenizer : a transformers causal LM (or its backbone) and its tokenizer, e.g. from
        :func:`elical.generation.models.load_model`. Any device; with ``device_map="auto"`` (accelerate) the model may span
        several GPUs; the head sits on the device of the input embeddings. The model is shared: this head
        adds its own adapter to it and leaves it switched off outside :meth:`fit` / :meth:`predict`.
    config : :class:`LoRAConfig`
    base_model : str, optional
        Name or path of the base model, written to ``head.json`` so :meth:`load` (and
        :class:`elical.heads.confidence.ConfidenceModel`) can reload it; default ``model.config._name_or_path``.

    Attributes (after fit or load)
    ------------------------------
    adapter_name_ : str, the peft adapter's name in ``model``. target_modules_ : tuple of str.
    head_ : torch.nn.Linear(hidden_size, 1), float32. mean_, scale_ : float32 tensors of shape (hidden_size,).
    history_ : list of (epoch, train_loss or None, val_loss or None); n_epochs_, best_epoch_, best_val_loss_.
    n_processes_ : int, the data-parallel processes that trained it (1 without a launcher); mixed_precision_ :
    "bf16" or "no", the precision of its training forward passes.
    """

    def __init__(self, model, tokenizer, config: LoRAConfig | None = None, *, base_model: str | None = None):
        self.model, self.tokenizer = model, tokenizer
        self.config = config if config is not None else LoRAConfig()
        self.base_model = base_model or getattr(getattr(model, "config", None), "_name_or_path", None)

    # ------------------------------------------------------------------ model plumbing
    def _inject(self, target_modules: Sequence[str]) -> None:
        require("peft", "lora", "the LoRA head (--head lora)")
        from peft import LoraConfig, inject_adapter_in_model
        from peft.tuners.tuners_utils import cast_adapter_dtype

        cfg = self.config
        self.adapter_name_ = f"elical_{os.getpid()}_{next(_names)}"
        self.target_modules_ = tuple(target_modules)
        self.peft_config_ = LoraConfig(r=int(cfg.rank), lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                                       target_modules=list(self.target_modules_), bias="none")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*Already found a `peft_config`.*")
            inject_adapter_in_model(self.peft_config_, self.model, adapter_name=self.adapter_name_)
        cast_adapter_dtype(self.model, self.adapter_name_)  # float32 adapters on a bf16/fp16 model, as peft does
        for layer in self._tuner_layers():
            layer.enable_adapters(False)
        self._device = next(p for p in self.model.parameters()).device
        self.model.requires_grad_(False)

    def _tuner_layers(self):
        from peft.tuners.tuners_utils import BaseTunerLayer

        return [m for m in self.model.modules() if isinstance(m, BaseTunerLayer)]

    def _adapter_params(self) -> dict:
        key = f".{self.adapter_name_}."
        return {n: p for n, p in self.model.named_parameters() if key in n and "lora_" in n}

    def _encode(self, prompts: Sequence[str]) -> dict:
        enc = self.tokenizer(list(prompts), return_tensors="pt", padding=True, add_special_tokens=False)
        return {k: v.to(self._device) for k, v in enc.items()}

    def _last_hidden(self, enc: dict):
        """Final-layer hidden state of each row's last real token, float32, shape (batch, hidden_size), on the
        device of ``mean_``; the caller switches the adapter on."""
        import torch

        from elical.generation.features import last_token_index

        backbone = getattr(self.model, "base_model", self.model)
        mask = enc["attention_mask"]
        # Positions count real tokens only, so a left-padded row sees the same positions as when unpadded.
        positions = (mask.long().cumsum(-1) - 1).clamp(min=0)
        hidden = backbone(input_ids=enc["input_ids"], attention_mask=mask, position_ids=positions,
                          use_cache=False).last_hidden_state
        idx = last_token_index(mask).to(hidden.device)
        last = hidden[torch.arange(hidden.shape[0], device=hidden.device), idx]
        return last.to(self.mean_.device, torch.float32)

    def _logits(self, enc: dict, precision=contextlib.nullcontext):
        """Head logits, shape (batch,), float32; ``precision()``: the context of the backbone's forward pass."""
        with precision():
            hidden = self._last_hidden(enc)
        return self.head_((hidden - self.mean_) / self.scale_).squeeze(-1)

    def _predict_batches(self, prompts: Sequence[str]) -> np.ndarray:
        import torch

        out = []
        was_training = self.model.training
        self.model.eval()
        try:
            with _adapter_on(self.model, self.adapter_name_, trainable=False), torch.no_grad():
                for start in range(0, len(prompts), self.config.batch_size):
                    enc = self._encode(prompts[start:start + self.config.batch_size])
                    out.append(torch.sigmoid(self._logits(enc)).cpu().numpy())
        finally:
            self.model.train(was_training)
        return np.concatenate(out).astype(np.float64)

    def _predict_shared(self, prompts: Sequence[str], reps: Replicas) -> np.ndarray:
        """Confidences of ``prompts`` (n,), float64: each process predicts its block, every process gets all."""
        import torch

        mine = [prompts[i] for i in reps.block(len(prompts))]
        pred = torch.from_numpy(self._predict_batches(mine) if mine else np.zeros(0)).to(self._device)
        return reps.gather_rows(pred).cpu().numpy()

    # ------------------------------------------------------------------ public API
    def fit(self, prompts, targets, *, val=None, init: LoRAHead | None = None) -> LoRAHead:
        """Train the adapter and the head; keep the weights with the lowest validation MSE (epoch 0 included).

        Parameters
        ----------
        prompts : sequence of str, length n
            Exact model inputs (e.g. :func:`elical.generation.base.build_prompt` output); no special tokens are added.
        targets : array of shape (n,), values in [0, 1]
            Self-consistency (stage 1), sample accuracy or greedy correctness (stage 2).
        val : (prompts_val, targets_val), optional
            Validation data for early stopping; without it a seeded ``validation_fraction`` of the prompts is held
            out (none below :data:`elical.heads.validation.MIN_SAMPLES_FOR_VALIDATION` prompts).
        init : LoRAHead, optional
            A fitted head on the *same model object* to continue from (EliCal stage 2): its adapter, head and
            standardisation are copied into this head's own adapter; ``init`` is not modified. Its rank, alpha and
            target modules are used whatever this head's config says.

        Under ``accelerate launch`` / ``torchrun`` every process calls fit with the same arguments and trains on
        its share of each step (:mod:`elical.heads.distributed`); all of them end with the same weights.

        Returns self. Raises ValueError for bad prompts/targets, a second call to fit, an ``init`` that is not
        fitted or sits on another model, or processes given different data.
        """
        import torch

        cfg = self.config
        if hasattr(self, "adapter_name_"):
            raise ValueError("this LoRAHead is already fitted; create a new one (fit(init=...) to continue)")
        prompts = _as_prompts(prompts, "prompts")
        y = _as_targets(targets, len(prompts), "targets")
        if val is not None:
            val_prompts = _as_prompts(val[0], "val prompts")
            val = (val_prompts, _as_targets(val[1], len(val_prompts), "val targets"))
        reps = replicas()
        reps.check_same("training data", prompts, y, *(val or ()), device=next(self.model.parameters()).device)
        if init is not None:
            if not isinstance(init, LoRAHead) or not hasattr(init, "head_"):
                raise ValueError("init must be a fitted LoRAHead")
            if init.model is not self.model:
                raise ValueError("init was trained on another model object; stage 2 continues on the same model")
            self.config = cfg = replace(cfg, rank=init.config.rank, alpha=init.config.alpha,
                                        target_modules=init.target_modules_)
        epochs = None
        if val is None and cfg.validation == "cv" and len(prompts) >= 2 and cfg.validation_fraction > 0:
            epochs = self._cv_epochs(prompts, y, init)  # the final fit then follows the folds' schedule
        elif val is None and len(prompts) >= MIN_SAMPLES_FOR_VALIDATION and cfg.validation_fraction > 0:
            train_idx, val_idx = holdout_split(len(prompts), cfg.validation_fraction, cfg.random_state)
            val = ([prompts[i] for i in val_idx], y[val_idx])
            prompts, y = [prompts[i] for i in train_idx], y[train_idx]
        plan = cfg.max_epochs if epochs is not None else None
        if epochs is None:
            epochs = cfg.max_epochs if val is not None else min(cfg.max_epochs, cfg.epochs_without_validation)

        with torch.random.fork_rng(devices=_rng_devices(self.model)):
            torch.manual_seed(cfg.random_state)  # peft's adapter init and LoRA dropout draw from the global RNG
            generator = torch.Generator().manual_seed(cfg.random_state)
            self._inject(cfg.target_modules or (init.target_modules_ if init else detect_target_modules(self.model)))
            hidden_size = self.model.config.hidden_size
            if init is not None:
                src, dst = f".{init.adapter_name_}.", f".{self.adapter_name_}."
                ours = self._adapter_params()
                with torch.no_grad():
                    for name, p in init._adapter_params().items():
                        ours[name.replace(src, dst)].copy_(p)
                self.head_ = copy.deepcopy(init.head_)
                self.mean_, self.scale_ = init.mean_.clone(), init.scale_.clone()
            else:
                self._init_head(hidden_size, prompts, generator, reps)
            reps.broadcast_(self._weights())  # as DDP does: every replica starts from rank 0's weights
            if reps.rank:  # LoRA dropout masks independent across ranks; rank 0 keeps the one-process stream
                torch.manual_seed(int(np.random.SeedSequence([cfg.random_state, reps.rank]).generate_state(1)[0]))
            history, best = self._train(prompts, y, val, epochs, generator, plan or epochs, reps)
        self.history_, self.n_epochs_, self.best_epoch_ = history, history[-1][0], best
        self.n_processes_ = reps.world_size
        self.mixed_precision_ = resolve_precision(self._device, cfg.mixed_precision)
        self.best_val_loss_ = None if val is None else history[best][2]
        return self

    def _weights(self) -> list:
        """The adapter's and the head's weights and the standardisation (the tensors every replica shares)."""
        return [*self._adapter_params().values(), *self.head_.parameters(), self.mean_, self.scale_]

    def _init_head(self, hidden_size: int, prompts: list[str], generator, reps: Replicas) -> None:
        import torch

        head = torch.nn.utils.skip_init(torch.nn.Linear, hidden_size, 1)
        torch.nn.init.kaiming_uniform_(head.weight, a=math.sqrt(5), generator=generator)
        bound = 1.0 / math.sqrt(hidden_size)
        torch.nn.init.uniform_(head.bias, -bound, bound, generator=generator)
        # Standardisation from the prompts' initial final hidden states (LoRA B starts at zero: the base model's).
        n = min(len(prompts), _MAX_STAT_PROMPTS)
        pick = torch.randperm(len(prompts), generator=generator)[:n].tolist()
        self.mean_ = torch.zeros(hidden_size, device=self._device)  # _last_hidden puts states on mean_'s device
        mine, bs = [pick[i] for i in reps.block(n)], self.config.batch_size  # each process its block of prompts
        states = [torch.zeros((0, hidden_size), device=self.mean_.device)]
        with _adapter_on(self.model, self.adapter_name_, trainable=False), torch.no_grad():
            for start in range(0, len(mine), bs):
                states.append(self._last_hidden(self._encode([prompts[i] for i in mine[start:start + bs]])))
        states = reps.gather_rows(torch.cat(states)).double()
        scale = states.std(dim=0, unbiased=False)
        scale[scale == 0] = 1.0  # as scikit-learn's StandardScaler
        self.mean_, self.scale_ = states.mean(dim=0).float(), scale.float()
        self.head_ = head.to(self.mean_.device)

    def _cv_epochs(self, prompts: list[str], y: np.ndarray, init) -> int:
        """Epochs chosen by seeded k-fold cross-validation (leave-one-out below MIN_SAMPLES_FOR_VALIDATION):
        each fold trains a head of its own on the same model (from ``init`` when given) and is then released. The
        argmin of the mean CV curve (:func:`elical.heads.cv.choose_epoch`, each question carrying its fold's
        validation MSE; a fold that stopped early keeps its last value), not a median of the folds' optima."""
        n = len(prompts)
        best, rows = [], []
        for i, (tr, va) in enumerate(cv_splits(n, self.config.cv_folds, self.config.random_state)):
            cfg = replace(self.config, validation="holdout", random_state=self.config.random_state + 1 + i)
            fold = LoRAHead(self.model, self.tokenizer, cfg, base_model=self.base_model)
            fold.fit([prompts[j] for j in tr], y[tr], val=([prompts[j] for j in va], y[va]), init=init)
            best.append(fold.best_epoch_)
            rows.append(([h[2] for h in fold.history_], va))
            fold.release()
        losses = np.empty((max(len(curve) for curve, _ in rows), n))
        for curve, va in rows:
            losses[:, va] = np.r_[curve, [curve[-1]] * (losses.shape[0] - len(curve))][:, None]
        self.cv_best_epochs_, self.cv_curve_ = best, losses.mean(axis=1).tolist()
        self.cv_epochs_ = choose_epoch(losses, "min")
        return self.cv_epochs_

    def _train(self, prompts, y, val, epochs, generator, plan_epochs, reps: Replicas) -> tuple[list, int]:
        import torch

        cfg = self.config
        lora = list(self._adapter_params().values())
        groups = [{"params": list(self.head_.parameters()), "lr": cfg.head_learning_rate or cfg.learning_rate}]
        if not cfg.freeze_lora:
            groups.append({"params": lora, "lr": cfg.learning_rate})
        optimizer = torch.optim.AdamW(groups, weight_decay=cfg.weight_decay)
        # optimiser steps: one per effective batch (batch_size x processes x grad_accumulation prompts)
        steps_per_epoch = math.ceil(len(prompts) / (cfg.batch_size * reps.world_size * cfg.grad_accumulation))
        total = max(1, plan_epochs * steps_per_epoch)  # the schedule's length; training may stop before it
        warmup = math.ceil(cfg.warmup_ratio * total)

        def rate(step):  # linear warm-up, then linear decay; no step at rate 0 (a 1-step stage 2 still learns)
            return (step + 1) / warmup if step < warmup else (total - step) / max(1, total - warmup)

        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, rate)
        trainable = [p for g in groups for p in g["params"]]
        y_t = torch.from_numpy(y)

        def snapshot():
            return ({k: v.detach().cpu().clone() for k, v in self._adapter_params().items()},
                    {k: v.detach().cpu().clone() for k, v in self.head_.state_dict().items()})

        def val_loss():  # the same number on every process: predictions gathered in order
            pred = self._predict_shared(val[0], reps)
            return float(np.mean((pred - val[1].astype(np.float64)) ** 2))

        best_val = None if val is None else val_loss()
        history, best_epoch, stale, best_state = [(0, None, best_val)], 0, 0, snapshot()
        was_training = self.model.training
        precision = functools.partial(training_autocast, self._device, cfg.mixed_precision)
        for epoch in range(1, epochs + 1):
            order = torch.randperm(len(prompts), generator=generator).tolist()  # the same on every process
            total_loss = 0.0
            self.model.train()
            with _adapter_on(self.model, self.adapter_name_, trainable=not cfg.freeze_lora):
                for mine, step_size in step_batches(order, cfg.batch_size, cfg.grad_accumulation, reps.rank,
                                                    reps.world_size):
                    optimizer.zero_grad(set_to_none=True)
                    for batch in mine:  # the loss of the whole step is a mean over all its prompts
                        pred = torch.sigmoid(self._logits(self._encode([prompts[i] for i in batch]), precision))
                        target = y_t[batch].to(pred.device)
                        loss = torch.nn.functional.mse_loss(pred, target, reduction="sum") / step_size
                        loss.backward()
                        total_loss += loss.detach().item() * step_size
                    reps.sum_grads(trainable)  # the step's gradient, summed over the processes' shares
                    if cfg.max_grad_norm:
                        torch.nn.utils.clip_grad_norm_(trainable, cfg.max_grad_norm)
                    optimizer.step()
                    scheduler.step()
            self.model.train(was_training)
            total_loss = reps.sum_(torch.tensor([total_loss], dtype=torch.float64, device=self._device)).item()
            current = None if val is None else val_loss()
            history.append((epoch, total_loss / len(prompts), current))
            if val is None:
                best_epoch = epoch
                continue
            stale = 0 if current < best_val - cfg.tol else stale + 1
            if current < best_val:
                best_val, best_epoch, best_state = current, epoch, snapshot()
            if stale >= cfg.patience:
                break
        if val is not None:
            adapter, head = best_state
            params = self._adapter_params()
            with torch.no_grad():
                for k, v in adapter.items():
                    params[k].copy_(v)
            self.head_.load_state_dict(head)
        reps.broadcast_(self._weights())  # a guarantee: the ranks already agree (same summed gradients, decisions)
        return history, best_epoch

    def predict(self, prompts) -> np.ndarray:
        """Confidence that the model answers each prompt correctly, from one forward pass (no generation).

        ``prompts``: sequence of n strings (exact model inputs, as for :meth:`fit`). Returns ndarray of shape (n,),
        float64, in [0, 1]. Padding side does not matter (the last *real* token is read). Raises ValueError when
        not fitted or for empty/non-string prompts.
        """
        if not hasattr(self, "head_"):
            raise ValueError("this LoRAHead is not fitted yet; call fit (or LoRAHead.load) first")
        return np.clip(self._predict_batches(_as_prompts(prompts, "prompts")), 0.0, 1.0)

    def release(self) -> None:
        """Remove this head's adapter from the shared model (the head can no longer predict)."""
        from peft.tuners.tuners_utils import delete_adapter

        if hasattr(self, "adapter_name_"):
            with warnings.catch_warnings():  # "adapter ... was active": every adapter is off between passes anyway
                warnings.simplefilter("ignore", UserWarning)
                delete_adapter(self.model, self.adapter_name_, prefix="lora_")
            getattr(self.model, "peft_config", {}).pop(self.adapter_name_, None)
            del self.adapter_name_, self.head_

    def save(self, directory) -> None:
        """Write the peft adapter (``adapter_config.json`` + ``adapter_model.safetensors``, readable by
        ``peft.PeftModel.from_pretrained(base, directory)``), ``head.safetensors`` (head weight/bias, mean, scale)
        and ``head.json`` (format, base model, config, target modules, training history, processes). No pickle.
        With several processes (:mod:`elical.heads.distributed`) only rank 0 writes; the others return at once
        (no barrier: a caller that reads the files on another rank waits for rank 0 itself).
        Raises ValueError when not fitted."""
        from elical.heads.lora_io import save_lora_head

        save_lora_head(self, directory)

    @classmethod
    def load(cls, directory, model=None, device: str = "cpu") -> LoRAHead:
        """Read a head written by :meth:`save` (safetensors + JSON, no pickle).

        ``model``: None (load ``head.json``'s ``base_model`` with :func:`elical.generation.models.load_model` on
        ``device``; ``device="auto"`` spreads it over the GPUs with accelerate) or a ``(model, tokenizer)`` pair
        already loaded (shared: the adapter is added to it). Raises FileNotFoundError for missing files,
        ValueError for a directory that is not a LoRAHead or weights that do not match the model."""
        from elical.heads.lora_io import load_lora_head

        return load_lora_head(cls, directory, model, device)
