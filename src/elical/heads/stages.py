"""The EliCal stages and the Cal-Only baseline for each head kind (Ni et al., arXiv 2510.17509, Sec. 3):
stage 1 (elicitation, Eli-Only) on self-consistency, stage 2 (calibration, EliCal(k)) from the stage-1 head on k
labelled questions, and Cal-Only(k) from scratch on the same k. Probe heads read frozen hidden states
(:class:`elical.heads.probe.ProbeHead`); the LoRA head trains an adapter on the model itself
(:class:`elical.heads.lora.LoRAHead`)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from elical.heads.lora import LoRAHead
from elical.heads.lora_config import LoRAConfig
from elical.heads.probe import ProbeHead
from elical.heads.stage2 import DEFAULT_STAGE2_RULE, fit_stage2

__all__ = ["fit_eli_only", "fit_elical", "fit_cal_only", "fit_lora_eli_only", "fit_lora_elical", "fit_lora_cal_only",
           "HeadStages", "probe_stages", "lora_stages"]


def fit_eli_only(X_pool, self_consistency, *, random_state=0, **head_params) -> ProbeHead:
    """EliCal stage 1, elicitation; alone it is the Eli-Only baseline (Ni et al., arXiv 2510.17509).

    Fits a :class:`ProbeHead` on the unlabelled pool ``X_pool`` (ndarray of shape (n_pool, n_features)) with
    target ``self_consistency`` (ndarray of shape (n_pool,), in [0, 1]: ``c_cons``, the share of sampled answers
    that agree with the greedy answer). Early stopping uses a seeded held-out part of the pool and *its*
    self-consistency; no correctness label is seen. ``head_params`` are :class:`ProbeHead` parameters.
    Raises ValueError as :meth:`ProbeHead.fit`.
    """
    return ProbeHead(random_state=random_state, **head_params).fit(X_pool, self_consistency)


def fit_elical(eli_head: ProbeHead, X_k, y_k, *, random_state=0, rule: str | None = None,
               **head_params) -> ProbeHead:
    """EliCal stage 2, calibration: continue from the stage-1 head on the k labelled questions (Ni et al.).

    Returns a new head that starts from a copy of ``eli_head``'s weights and standardisation; ``eli_head`` is not
    modified. ``rule`` (:data:`elical.heads.stage2.STAGE2_RULES`, default
    :data:`elical.heads.stage2.DEFAULT_STAGE2_RULE`) says how the k labels move it: by default an affine map of the
    stage-1 logit with a non-negative slope (Eli-Only's ranking kept) below 512 labels and the full stage 2 from
    there on; or the full stage 2 under one of several early-stopping rules
    (:mod:`elical.heads.stage2`). Labels of one value: no step, EliCal(k) is Eli-Only. Hyper-parameters of the full
    stage 2 default to ``eli_head``'s, overridden by ``head_params`` (``kind`` and ``hidden_size`` must stay the
    same). Only the k questions are used: k-fold cross-validation inside the k (leave-one-out for
    k < :data:`elical.heads.validation.MIN_SAMPLES_FOR_VALIDATION`) picks the number of epochs from the mean CV
    curve (0 = keep the stage-1 weights), then the head trains on all k for as many steps as the folds took, on the
    folds' learning-rate schedule; ``validation="holdout"`` with ``rule="full"`` holds out a seeded
    ``validation_fraction`` of them instead.

    Parameters
    ----------
    eli_head : ProbeHead, fitted (stage 1)
    X_k : ndarray of shape (k, n_features)
    y_k : ndarray of shape (k,), values in [0, 1]
        Sample accuracy ``c_acc`` (share of correct sampled answers) or greedy correctness (0/1).
    random_state : int
    **head_params : constructor parameters of :class:`ProbeHead`.

    Raises
    ------
    ValueError
        ``eli_head`` not fitted, architecture mismatch, or as :meth:`ProbeHead.fit`.
    """
    if not isinstance(eli_head, ProbeHead):
        raise ValueError(f"eli_head must be a fitted ProbeHead, got {type(eli_head).__name__}")
    params = {**eli_head.get_params(), "validation": "cv", **head_params, "random_state": random_state}
    if rule is None:  # validation="holdout" asks for the full stage 2 with a held-out part
        rule = "full" if params["validation"] == "holdout" else DEFAULT_STAGE2_RULE
    if rule == "full" and params["validation"] == "holdout":
        return ProbeHead(**params).fit(X_k, y_k, init=eli_head)
    return fit_stage2(eli_head, X_k, y_k, rule, params)


def fit_cal_only(X_k, y_k, *, random_state=0, **head_params) -> ProbeHead:
    """Cal-Only baseline: the same head trained from scratch on the k labelled questions (Ni et al., 2510.17509).

    ``X_k``: ndarray of shape (k, n_features); ``y_k``: ndarray of shape (k,), in [0, 1]. Standardisation comes
    from the k questions themselves; validation and early stopping as in :func:`fit_elical`. ``head_params`` are
    :class:`ProbeHead` parameters. Raises ValueError as :meth:`ProbeHead.fit`.
    """
    return ProbeHead(**{"validation": "cv", **head_params, "random_state": random_state}).fit(X_k, y_k)


def fit_lora_eli_only(model, tokenizer, prompts, self_consistency, *, config: LoRAConfig | None = None,
                      base_model: str | None = None) -> LoRAHead:
    """EliCal stage 1 (elicitation) with LoRA; alone, the Eli-Only baseline (Ni et al., arXiv 2510.17509).

    ``prompts``: n pool prompts; ``self_consistency``: shape (n,), in [0, 1] (``c_cons``). Early stopping holds out
    a seeded ``validation_fraction`` of the pool and uses *its* self-consistency: no correctness label is read.
    """
    return LoRAHead(model, tokenizer, config, base_model=base_model).fit(prompts, self_consistency)


def fit_lora_elical(eli_head: LoRAHead, prompts_k, y_k, *, config: LoRAConfig | None = None, rule: str | None = None,
                    **overrides) -> LoRAHead:
    """EliCal stage 2 (calibration): from the stage-1 adapter and head on the k labelled questions.

    ``prompts_k``: k prompts; ``y_k``: shape (k,), in [0, 1] (sample accuracy ``c_acc``, or greedy correctness).
    ``rule`` (:data:`elical.heads.stage2.LORA_STAGE2_RULES`): ``"affine"`` (default) keeps the stage-1 adapter and
    head and fits only sigmoid(a z + b) on the stage-1 logit z with a >= 0 (Eli-Only's ranking kept, as the probe
    heads' default at small k; :func:`elical.heads.stage2.affine_parameters`); ``"full"`` continues training: the
    config defaults to ``eli_head.config`` with ``overrides`` (e.g. ``freeze_lora=True`` to train the head only,
    ``max_epochs``; rank, alpha and target modules stay stage 1's), cross-validation inside the k questions
    (``validation="cv"``, leave-one-out below :data:`elical.heads.validation.MIN_SAMPLES_FOR_VALIDATION`) picks the
    epochs from the mean CV curve, 0 keeping the stage-1 weights, then all k train; ``validation="holdout"`` in
    ``overrides`` holds out a part instead (and means ``"full"``). Labels of one value: no stage-2 step (the
    stage-1 weights, copied). ``eli_head`` is not modified. The probe heads' switch from the affine map to the full
    stage 2 (``"affine+full"``) is not implemented for the LoRA head.
    """
    import torch

    from elical.heads.stage2 import LORA_STAGE2_RULES, affine_parameters

    if not isinstance(eli_head, LoRAHead):
        raise ValueError(f"eli_head must be a fitted LoRAHead, got {type(eli_head).__name__}")
    if rule is None:
        rule = "full" if overrides.get("validation") == "holdout" else "affine"
    if rule not in LORA_STAGE2_RULES:
        raise ValueError(f"rule must be one of {LORA_STAGE2_RULES}, got {rule!r}")
    y = np.asarray(y_k, dtype=np.float64)
    one_value = y.ndim == 1 and y.size > 0 and y.min() == y.max()
    if one_value or rule == "affine":
        # No training step: the stage-1 adapter and head, copied (then, for "affine", rescaled).
        overrides = {**overrides, "max_epochs": 0, "validation": "holdout", "validation_fraction": 0.0}
    cfg = replace(config if config is not None else eli_head.config, **{"validation": "cv", **overrides})
    affine = None
    if rule == "affine" and not one_value:
        q = np.clip(eli_head.predict(prompts_k), 1e-7, 1 - 1e-7)
        affine = affine_parameters(np.log(q / (1 - q)), y)
    head = LoRAHead(eli_head.model, eli_head.tokenizer, cfg, base_model=eli_head.base_model)
    head = head.fit(prompts_k, y_k, init=eli_head)
    if affine is not None:
        with torch.no_grad():
            head.head_.weight.mul_(affine[0])
            head.head_.bias.mul_(affine[0]).add_(affine[1])
        head.stage2_ = {"rule": "affine", "slope": affine[0], "intercept": affine[1]}
    return head


def fit_lora_cal_only(model, tokenizer, prompts_k, y_k, *, config: LoRAConfig | None = None,
                      base_model: str | None = None, validation: str = "cv") -> LoRAHead:
    """Cal-Only baseline: the LoRA + linear head trained from scratch on the same k labelled questions
    (Ni et al., arXiv 2510.17509). Validation inside the k questions as :func:`fit_lora_elical` (all k train)."""
    cfg = replace(config if config is not None else LoRAConfig(), validation=validation)
    return LoRAHead(model, tokenizer, cfg, base_model=base_model).fit(prompts_k, y_k)


@dataclass(frozen=True)
class HeadStages:
    """How one head kind trains its three methods. ``inputs``: ``"features"`` (X is an ndarray of shape
    (n, hidden_size)) or ``"prompts"`` (X is a list of n prompt strings). ``eli_only(X, c_cons)``,
    ``cal_only(X_k, y_k)`` and ``elical(eli_head, X_k, y_k)`` return fitted heads with ``predict(X)`` and
    ``save(directory)``."""

    inputs: str
    eli_only: Callable
    cal_only: Callable
    elical: Callable

    def take(self, X, idx):
        """Rows ``idx`` of ``X`` (an ndarray or a list of prompts)."""
        return X[idx] if self.inputs == "features" else [X[i] for i in idx]


def probe_stages(kind: str = "linear", *, random_state: int = 0, **head_params) -> HeadStages:
    """:class:`HeadStages` of a :class:`ProbeHead` of ``kind`` ("linear" or "mlp") on frozen hidden states."""
    params = dict(kind=kind, random_state=random_state, **head_params)
    return HeadStages("features", lambda X, y: fit_eli_only(X, y, **params),
                      lambda X, y: fit_cal_only(X, y, **params), lambda eli, X, y: fit_elical(eli, X, y, **params))


def lora_stages(*, model, tokenizer, base_model: str | None = None, random_state: int = 0,
                config: LoRAConfig | None = None) -> HeadStages:
    """:class:`HeadStages` of the paper's LoRA + linear head on ``model`` (prompts in, the adapter trained)."""
    cfg = config if config is not None else LoRAConfig(random_state=random_state)
    return HeadStages(
        "prompts", lambda X, y: fit_lora_eli_only(model, tokenizer, X, y, config=cfg, base_model=base_model),
        lambda X, y: fit_lora_cal_only(model, tokenizer, X, y, config=cfg, base_model=base_model),
        lambda eli, X, y: fit_lora_elical(eli, X, y))

