"""Probe heads on frozen hidden states: the two EliCal stages and their baselines.

EliCal (Ni et al., arXiv 2510.17509) fits a head with a sigmoid output on the hidden state of the last
prompt token, trained with MSE loss and AdamW (weight decay 0.1, warm-up ratio 0.1). The paper trains LoRA
adapters together with a linear head; this module is the fast path: the backbone stays frozen and only the head
learns, on features extracted once (see :mod:`elical.generation.features`).

- :func:`fit_eli_only` -- stage 1, elicitation: target is the self-consistency ``c_cons`` of the unlabelled pool.
- :func:`fit_elical` -- stage 2, calibration: continue from the stage-1 head on the k labelled questions.
- :func:`fit_cal_only` -- baseline: the same head trained from scratch on the k labelled questions.

Protocol (DESIGN.md): early stopping and checkpoint choice use a validation split of *training* questions only;
in stage 2 that split is carved out of the k labelled questions, nothing else.
"""

from __future__ import annotations

import copy
import math

import numpy as np
import torch
from sklearn.base import BaseEstimator

from elical.heads.cv import CV_RULES, choose_epoch, cv_splits, question_weights
from elical.heads.probe_io import _build_net, load_probe_head, mlp_widths, save_probe_head
from elical.heads.streaming import FeatureFile, check_features, feature_scaler, iter_batches, map_chunks
from elical.heads.validation import MIN_SAMPLES_FOR_VALIDATION, _check_y, holdout_split

__all__ = ["ProbeHead", "mlp_widths"]

_KINDS = ("linear", "mlp")
_EVAL_CHUNK = 16384  # rows per forward pass when predicting; bounds memory for the mlp's hidden layer


def _standardize(X: np.ndarray, mean: np.ndarray, scale: np.ndarray) -> np.ndarray:
    if isinstance(X, FeatureFile):  # memory-mapped: standardised chunk by chunk as rows are read
        return X.standardized(mean, scale)
    # numpy, not torch: single-threaded and fast even when other processes load the cores.
    Z = X - mean.astype(np.float32)
    Z /= scale.astype(np.float32)
    return Z


def _confidence(net: torch.nn.Module, X: torch.Tensor) -> torch.Tensor:
    return torch.sigmoid(net(X).squeeze(-1))


class ProbeHead(BaseEstimator):
    """A sigmoid head on frozen features, trained with MSE on targets in [0, 1] (EliCal, arXiv 2510.17509).

    Parameters
    ----------
    kind : {"linear", "mlp"}
        ``"linear"``: Linear -> sigmoid (the paper's head). ``"mlp"``: the official code's MLP head (the paper's
        frozen-backbone ablation, ``train_mlp.py``): Linear(H, H/2) -> ReLU -> Linear(H/2, H/4) -> ReLU ->
        Linear(H/4, 1) -> sigmoid, H the number of features (integer division).
    hidden_size : int or None
        None (default): the official mlp shape above. An int: one hidden layer of that width instead
        (Linear -> ReLU -> Linear -> sigmoid; not loadable by the official class). Ignored for ``"linear"``.
    learning_rate, weight_decay : float
        AdamW step size (peak, after warm-up) and decoupled weight decay (paper: 0.1).
    batch_size : int
        Mini-batch size, capped at ceil(n / 8) so an epoch has at least ~8 steps; every epoch is one full shuffled
        pass. For large pools use ~1024 (fewer, cheaper steps). A fresh head's output bias starts at the log-odds
        of the mean target.
    max_epochs : int
        Upper bound on epochs (0 returns the initial weights: random, or ``init``'s).
    patience : int
        Stop after this many epochs without a validation-loss improvement larger than ``tol``.
    tol : float
        Minimum decrease of the validation MSE that resets the patience counter.
    warmup_ratio : float in [0, 1)
        Share of the planned steps (all planned epochs, full passes) over which the learning rate rises linearly from
        ~0 to ``learning_rate``; it stays constant afterwards (early stopping, not a decay, ends training).
    validation_fraction : float in [0, 1)
        Share of ``(X, y)`` held out (seeded) for early stopping when no ``X_val`` is given. 0 disables it.
    epochs_without_validation : int
        Epochs trained when there is no validation data (``validation_fraction=0`` or fewer than
        :data:`MIN_SAMPLES_FOR_VALIDATION` samples), capped by ``max_epochs``.
    validation : {"holdout", "cv"}
        How early stopping is chosen when no ``X_val`` is given. ``"holdout"``: a seeded ``validation_fraction``
        is held out and the best epoch's weights are kept. ``"cv"``: ``cv_folds``-fold cross-validation (seeded)
        picks the number of epochs from the mean CV curve (:mod:`elical.heads.cv`; 0 allowed), then the head trains
        on *all* samples for as many optimiser steps as the folds took in that many epochs, at the folds' batch
        size -- with few labels (EliCal stage 2) no label is left out of training.
    cv_folds : int
        Folds for ``validation="cv"`` (at most n_samples // 2).
    cv_rule : {"min", "one_se"}
        How the CV curve picks the epochs (:func:`elical.heads.cv.choose_epoch`): its argmin, or that only when the
        gain over epoch 0 exceeds its standard error.
    cv_loss : {"mse", "balanced"}
        The CV curve's loss: plain MSE or MSE with both classes weighted half (:func:`elical.heads.cv.question_weights`).
    l2sp : float >= 0
        With ``init``: strength of the L2-SP penalty ``l2sp * sum((w - w_init)^2)`` added to each batch's MSE,
        which pulls the weights towards the starting (stage-1) ones (Li et al., 2018, "Explicit inductive bias for
        transfer learning with convolutional networks"). 0 (default): no penalty.
    random_state : int
        Seeds initialisation, the validation split and the shuffling, through private generators (the global
        torch and numpy RNGs are untouched). Same seed and data -> identical weights.

    Attributes
    ----------
    module_ : torch.nn.Sequential
        The trained network (outputs logits; :meth:`predict` applies the sigmoid).
    mean_, scale_ : ndarray of shape (n_features,), float64
        Standardisation, ``(X - mean_) / scale_``; with ``init`` these are init's (stage 1's pool statistics).
    n_features_in_ : int
    history_ : list of (epoch, train_loss, val_loss)
        Epoch 0 is the starting point. ``train_loss`` is the mean batch MSE of that epoch (at epoch 0, the MSE of
        the initial weights on the training part); ``val_loss`` is None without validation data.
    n_epochs_ : int
        Epochs actually trained. ``best_epoch_``: the epoch whose weights were kept.
    best_val_loss_ : float or None
        Validation MSE of the kept weights (None without validation: the last epoch's weights are kept).
    """

    def __init__(self, kind="linear", hidden_size=None, learning_rate=1e-3, weight_decay=0.1, batch_size=256,
                 max_epochs=200, patience=10, tol=1e-5, warmup_ratio=0.1, validation_fraction=0.2,
                 epochs_without_validation=20, validation="holdout", cv_folds=5, random_state=0, cv_rule="min",
                 cv_loss="mse", l2sp=0.0):
        self.kind = kind
        self.hidden_size = hidden_size
        self.learning_rate = learning_rate
        self.weight_decay = weight_decay
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.tol = tol
        self.warmup_ratio = warmup_ratio
        self.validation_fraction = validation_fraction
        self.epochs_without_validation = epochs_without_validation
        self.validation = validation
        self.cv_folds = cv_folds
        self.random_state = random_state
        self.cv_rule = cv_rule
        self.cv_loss = cv_loss
        self.l2sp = l2sp

    def _check_params(self) -> None:
        if self.kind not in _KINDS:
            raise ValueError(f"kind must be one of {_KINDS}, got {self.kind!r}")
        for name in ("hidden_size", "batch_size", "patience"):
            value = getattr(self, name)
            if name == "hidden_size" and value is None:
                continue
            if not isinstance(value, (int, np.integer)) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        for name in ("max_epochs", "epochs_without_validation"):
            value = getattr(self, name)
            if not isinstance(value, (int, np.integer)) or value < 0:
                raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
        if (not isinstance(self.random_state, (int, np.integer)) or isinstance(self.random_state, bool)
                or self.random_state < 0):
            raise ValueError(f"random_state must be a non-negative int, got {self.random_state!r}")
        if not self.learning_rate > 0:
            raise ValueError(f"learning_rate must be > 0, got {self.learning_rate!r}")
        if not (self.weight_decay >= 0 and self.tol >= 0):
            raise ValueError("weight_decay and tol must be >= 0")
        for name in ("warmup_ratio", "validation_fraction"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                raise ValueError(f"{name} must be in [0, 1), got {value!r}")
        if self.validation not in ("holdout", "cv"):
            raise ValueError(f"validation must be 'holdout' or 'cv', got {self.validation!r}")
        if not isinstance(self.cv_folds, (int, np.integer)) or self.cv_folds < 2:
            raise ValueError(f"cv_folds must be an integer >= 2, got {self.cv_folds!r}")
        if self.cv_rule not in CV_RULES:
            raise ValueError(f"cv_rule must be one of {CV_RULES}, got {self.cv_rule!r}")
        question_weights([0.0], self.cv_loss)  # raises for an unknown loss
        if not self.l2sp >= 0:
            raise ValueError(f"l2sp must be >= 0, got {self.l2sp!r}")

    def _check_fitted(self) -> None:
        if not hasattr(self, "module_"):
            raise ValueError("this ProbeHead is not fitted yet; call fit (or ProbeHead.load) first")

    def fit(self, X, y, *, X_val=None, y_val=None, init: ProbeHead | None = None) -> ProbeHead:
        """Train the head; keep the weights with the lowest validation MSE, the starting weights included.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Frozen features (e.g. last-prompt-token hidden states). Finite values. A ``np.memmap`` (e.g.
            ``load_features(path, mmap=True)``) or an :class:`elical.heads.streaming.FeatureFile` is read chunk by
            chunk, never whole; the result equals the in-memory fit up to float rounding.
        y : ndarray of shape (n_samples,)
            Targets in [0, 1]; soft targets (self-consistency, sample accuracy) are allowed.
        X_val, y_val : ndarray of shape (n_val, n_features) and (n_val,), optional
            Validation data for early stopping. Give both or neither. Without them, a seeded
            ``validation_fraction`` of ``(X, y)`` is held out, unless there are fewer than
            :data:`MIN_SAMPLES_FOR_VALIDATION` samples: then there is no early stopping and the head trains
            ``min(max_epochs, epochs_without_validation)`` epochs.
        init : ProbeHead, optional
            A fitted head to continue from (EliCal stage 2): its weights are copied and its ``mean_``/``scale_``
            are kept; ``init`` itself is never modified. Its ``kind``/``hidden_size`` must match this head's.

        Returns
        -------
        self : ProbeHead

        Raises
        ------
        ValueError
            Bad parameters; X not 2-D / not finite; y not 1-D, not in [0, 1] or of another length than X;
            only one of X_val, y_val given; feature count differing from ``init``'s or between X and X_val.
        """
        self._check_params()
        X = check_features(X, "X")
        y = _check_y(y, "y", X.shape[0], "X")
        if (X_val is None) != (y_val is None):
            raise ValueError("X_val and y_val must be given together (or neither)")
        if X_val is not None:
            X_val = check_features(X_val, "X_val")
            y_val = _check_y(y_val, "y_val", X_val.shape[0], "X_val")
            if X_val.shape[1] != X.shape[1]:
                raise ValueError(f"X_val has {X_val.shape[1]} features but X has {X.shape[1]}")
        if init is not None:
            if not isinstance(init, ProbeHead):
                raise ValueError(f"init must be a fitted ProbeHead or None, got {type(init).__name__}")
            init._check_fitted()
            if init.n_features_in_ != X.shape[1]:
                raise ValueError(f"X has {X.shape[1]} features but init was fitted on {init.n_features_in_}")
            if init.kind != self.kind or (self.kind == "mlp" and init.hidden_size != self.hidden_size):
                raise ValueError(f"init is a {init.kind!r} head (hidden_size={init.hidden_size}); this head is "
                                 f"{self.kind!r} (hidden_size={self.hidden_size}): architectures must match")

        generator = torch.Generator().manual_seed(int(self.random_state))
        enough = X.shape[0] >= MIN_SAMPLES_FOR_VALIDATION and self.validation_fraction > 0
        epochs = None
        if X_val is None and self.validation == "cv" and X.shape[0] >= 2 and self.validation_fraction > 0:
            # Below MIN_SAMPLES_FOR_VALIDATION: leave-one-out, which may choose 0 epochs (keep init's weights).
            epochs = self._cv_epochs(X, y, init)
        elif X_val is None and enough:
            train_idx, val_idx = holdout_split(X.shape[0], self.validation_fraction, self.random_state)
            X_val, y_val, X, y = X[val_idx], y[val_idx], X[train_idx], y[train_idx]
        net, mean, scale = self._start(X, init, generator, y)
        val = None if X_val is None else (_standardize(X_val, mean, scale), y_val)
        batch_size = max_steps = fold_steps = None
        if epochs is not None:
            # The final fit follows the folds' schedule: their batch size, their warm-up (planned over max_epochs)
            # and as many steps as they took in the chosen epochs, so "e epochs" means what it meant in the folds.
            batch_size, fold_steps = self.cv_batch_size_, self.cv_steps_per_epoch_
            max_steps = epochs * fold_steps
        else:
            epochs = self.max_epochs if val is not None else min(self.max_epochs, self.epochs_without_validation)
        plan = self.max_epochs if self.validation == "cv" and val is None else epochs
        history, best_epoch = self._train(net, _standardize(X, mean, scale), y, val, epochs, generator, plan,
                                          batch_size=batch_size, max_steps=max_steps, anchor=self._anchor(init),
                                          steps_per_epoch=fold_steps)
        self.module_, self.mean_, self.scale_, self.n_features_in_ = net.eval(), mean, scale, X.shape[1]
        self.history_, self.n_epochs_, self.best_epoch_ = history, history[-1][0], best_epoch
        self.best_val_loss_ = None if val is None else history[best_epoch][2]
        return self

    def _start(self, X, init, generator, y=None):
        """Starting network and standardisation: a copy of ``init``'s, or fresh ones fitted on ``X``."""
        if init is not None:
            return copy.deepcopy(init.module_), init.mean_.copy(), init.scale_.copy()
        scaler = feature_scaler(X)
        net = _build_net(self.kind, X.shape[1], self.hidden_size, generator)
        if y is not None:
            # Start the output at the targets' mean (its log-odds as the last bias): with few steps per epoch a
            # head started near 0.5 stops early far from a low base rate, which shows up as a large ECE.
            p = float(np.clip(np.mean(y), 1e-3, 1 - 1e-3))
            with torch.no_grad():
                net[-1].bias.fill_(math.log(p / (1 - p)))
        return net, scaler.mean_.astype(np.float64), scaler.scale_.astype(np.float64)

    def _anchor(self, init):
        """The L2-SP anchor: copies of ``init``'s weights (None without init or penalty)."""
        if init is None or not self.l2sp > 0:
            return None
        return [p.detach().clone() for p in init.module_.parameters()]

    def _cv_epochs(self, X, y, init) -> int:
        """Epochs chosen by seeded cross-validation inside (X, y) (:mod:`elical.heads.cv`; leave-one-out below
        :data:`MIN_SAMPLES_FOR_VALIDATION` samples). The folds train in lockstep; after every epoch their
        out-of-fold predictions form one row of the CV loss matrix; training stops when the mean CV curve has not
        improved by more than ``tol`` for ``patience`` epochs (or at ``max_epochs``); ``cv_rule`` then picks."""
        n = X.shape[0]
        splits = cv_splits(n, self.cv_folds, self.random_state)
        weights = question_weights(y, self.cv_loss)
        runs, sizes = [], []
        for i, (tr, va) in enumerate(splits):
            gen = torch.Generator().manual_seed(int(self.random_state) + 1 + i)
            net, mean, scale = self._start(X[tr], init, gen, y[tr])
            steps = self._epochs(net, _standardize(X[tr], mean, scale), y[tr], gen, self.max_epochs,
                                 anchor=self._anchor(init))
            runs.append((net, _standardize(X[va], mean, scale), va, steps))
            sizes.append(len(tr))
        preds, best, stale = [], np.inf, 0
        for epoch in range(self.max_epochs + 1):
            p = np.empty(n)
            for net, X_va, va, steps in runs:
                next(steps)  # epoch 0: the starting weights, no step taken
                with torch.no_grad():
                    p[va] = _predict_tensor(net, X_va).numpy()
            preds.append(p)
            curve = float(np.mean(weights * (p - y) ** 2))
            stale = 0 if curve < best - self.tol else stale + 1
            best = min(best, curve)
            if stale >= self.patience:
                break
        P = np.array(preds)
        losses = weights * (P - y) ** 2
        epochs = choose_epoch(losses, self.cv_rule)
        self.cv_epochs_, self.cv_curve_ = epochs, losses.mean(axis=1).tolist()
        self.cv_oof_ = P[epochs]  # out-of-fold predictions at the chosen epoch, shape (n,)
        self.cv_best_epochs_ = [int(np.argmin(((P[:, va] - y[va]) ** 2).mean(axis=1))) for _, va in splits]
        # The median fold's schedule (folds differ by at most one question in size).
        fold_n = int(np.median(sizes))
        self.cv_batch_size_ = max(1, min(self.batch_size, math.ceil(fold_n / 8)))
        self.cv_steps_per_epoch_ = math.ceil(fold_n / self.cv_batch_size_)
        return epochs

    def _epochs(self, net, Xs, y, generator, plan_epochs, batch_size=None, max_steps=None, anchor=None,
                steps_per_epoch=None):
        """Generator of training epochs: yields None first (epoch 0, nothing trained), then after each full shuffled
        pass the mean batch MSE of that pass. AdamW with linear warm-up over ``warmup_ratio * plan_epochs``
        epochs of ``steps_per_epoch`` steps (default: this data's); returns once ``max_steps`` optimiser steps are
        taken (after yielding the partial epoch)."""
        n_train = Xs.shape[0]
        # At least ~8 steps per epoch: a small pool in one or two batches barely moves per epoch and early
        # stopping then ends training long before convergence.
        if batch_size is None:
            batch_size = max(1, min(self.batch_size, math.ceil(n_train / 8)))
        steps_per_epoch = steps_per_epoch or math.ceil(n_train / batch_size)
        warmup_steps = math.ceil(self.warmup_ratio * plan_epochs * steps_per_epoch)
        self.warmup_steps_ = warmup_steps
        optimizer = torch.optim.AdamW(net.parameters(), lr=self.learning_rate, weight_decay=self.weight_decay)
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: min(1.0, (step + 1) / warmup_steps) if warmup_steps else 1.0)
        net.train()
        yield None
        step = 0
        while max_steps is None or step < max_steps:
            order = torch.randperm(n_train, generator=generator).numpy()
            total, seen = 0.0, 0
            # Gathered in numpy (torch's threaded copies crawl on a busy 2-core machine), shared without a copy.
            for idx, batch in iter_batches(Xs, order, batch_size):
                if max_steps is not None and step >= max_steps:
                    break
                mse = torch.nn.functional.mse_loss(_confidence(net, torch.from_numpy(batch)), torch.from_numpy(y[idx]))
                loss = mse
                if anchor is not None:
                    loss = loss + self.l2sp * sum(((w - w0) ** 2).sum() for w, w0 in zip(net.parameters(), anchor))
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                scheduler.step()
                step += 1
                total += mse.item() * len(idx)
                seen += len(idx)
            yield total / max(seen, 1)
        self.n_steps_ = step

    def _train(self, net, Xs, y, val, epochs, generator, plan_epochs, *, batch_size=None, max_steps=None,
               anchor=None, steps_per_epoch=None) -> tuple[list, int]:
        """Trains at most ``epochs`` epochs (and ``max_steps`` steps) with early stopping on ``val``; leaves the kept
        weights in ``net``. Returns (history, best epoch)."""
        def mse(X_np, y_np):
            with torch.no_grad():
                pred = _predict_tensor(net, X_np)
                return float(torch.nn.functional.mse_loss(pred, torch.from_numpy(y_np)))

        steps = self._epochs(net, Xs, y, generator, plan_epochs, batch_size, max_steps, anchor, steps_per_epoch)
        next(steps)
        val_loss = None if val is None else mse(*val)
        history = [(0, mse(Xs, y), val_loss)]
        best_val, best_epoch, stale = val_loss, 0, 0
        best_state = copy.deepcopy(net.state_dict())
        for epoch in range(1, epochs + 1):
            train_loss = next(steps, None)
            if train_loss is None:  # the step budget is spent
                break
            val_loss = None if val is None else mse(*val)
            history.append((epoch, train_loss, val_loss))
            if val is None:
                best_epoch = epoch
                continue
            # As scikit-learn's MLP: patience counts epochs not beating the best by more than tol.
            stale = 0 if val_loss < best_val - self.tol else stale + 1
            if val_loss < best_val:
                best_val, best_epoch, best_state = val_loss, epoch, copy.deepcopy(net.state_dict())
            if stale >= self.patience:
                break
        if val is not None:
            # May be the starting weights (epoch 0): a stage 2 that does not help on the held-out k keeps stage 1.
            net.load_state_dict(best_state)
        return history, best_epoch

    def predict(self, X) -> np.ndarray:
        """Confidence that the answer is correct.

        Parameters
        ----------
        X : ndarray of shape (n_samples, n_features)
            Or a ``np.memmap`` / :class:`elical.heads.streaming.FeatureFile`, read chunk by chunk.

        Returns
        -------
        ndarray of shape (n_samples,), float64, values in [0, 1] (higher = more likely correct).

        Raises
        ------
        ValueError
            Not fitted; X not 2-D or not finite; X's feature count differing from the fitted one.
        """
        self._check_fitted()
        X = check_features(X, "X")
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features but the head was fitted on {self.n_features_in_}")
        with torch.no_grad():
            out = _predict_tensor(self.module_, _standardize(X, self.mean_, self.scale_))
        return np.clip(out.numpy().astype(np.float64), 0.0, 1.0)

    def save(self, directory) -> None:
        """Write ``head.safetensors`` (weights, ``mean``, ``scale``) and ``head.json`` (parameters, metadata).

        No pickle is involved; the directory is created if needed and existing head files are replaced atomically.

        Raises
        ------
        ValueError
            If the head is not fitted.
        """
        save_probe_head(self, directory)

    @classmethod
    def load(cls, directory) -> ProbeHead:
        """Read a head written by :meth:`save` (safetensors + JSON, no pickle).

        Raises
        ------
        FileNotFoundError
            If ``head.json`` or ``head.safetensors`` is missing.
        ValueError
            If ``head.json`` is not an elical ProbeHead file or the weights do not match it.
        """
        return load_probe_head(cls, directory)


def _predict_tensor(net: torch.nn.Module, X) -> torch.Tensor:
    return torch.cat(list(map_chunks(X, lambda rows: _confidence(net, torch.from_numpy(rows)), _EVAL_CHUNK)))


