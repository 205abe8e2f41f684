"""Learned judges ("learned"): a small classifier over `elical.judges.features`, trained on the hand-labelled pairs.

The weights ship as JSON beside this module (``learned_weights.json``, no pickle), written by
``benchmarks/judge_cv.py --write`` (seeded) from the labelled files; nothing is trained at run time. A model is a
logistic regression (standardised features), a gradient-boosted tree ensemble, or the mean of the two's
probabilities (a soft vote), whichever did best on labelled sets of question styles held out of its training
(docs/benchmarks.md); each is evaluated here with numpy alone. The probability cut is shipped with the model.

* `LearnedEquivalenceJudge`: P(sample says the same as the greedy answer) >= threshold;
* `LearnedCorrectnessJudge`: max over gold aliases of P(answer gives the alias) >= threshold;
* `LearnedCrossEncoderEquivalenceJudge` ("learned-ce"): the equivalence judge with its cross-encoder on every pair
  the cheap stage is not sure are the same (about three times the CPU; since the ninth round not clearly more accurate).

Each is a two-stage cascade: a first model reads only the lexical features (no encoder); where its probability is
inside the shipped ``band`` (the pairs it is unsure of: (0.1, 0.8) for equivalence, (0.15, 0.8) for correctness)
the texts are encoded with MiniLM and the full model decides; for equivalence, where the full model is unsure too
(inside the shipped ``second_band``, (0.1, 0.8)), its probability is averaged with the MiniLM cross-encoder's
(`elical.judges.cross_encoder`, reading ``second_orders`` orders of the pair: one since the ninth round). The
encoder, the judges' main cost, so runs only where it helps (grouped CV: docs/benchmarks.md). Before either model
one named rule of the shared extraction (`elical.judges.extract`) decides: two non-answers are never the same
answer ("both-non-answers"), a non-answer is never correct ("non-answer").

Both explain a decision (`explain`): the extraction of each side, every feature and the probability.
Source: a trained answer-equivalence classifier over cheap features, as PEDANTS (Li et al., 2024); BERTScore
features (Zhang et al., 2020).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from elical.judges.base import CorrectnessBase, PairJudge, check_alias_pairs, check_pairs, question_at
from elical.judges.extract import extract
from elical.judges.features import (CORRECTNESS_FEATURES, EQUIVALENCE_FEATURES, SOFT_FEATURES, TokenEncoder,
                                    correctness_features, correctness_soft, equivalence_features, equivalence_soft)

__all__ = ["WEIGHTS_PATH", "Scorer", "export_model", "LearnedEquivalenceJudge", "LearnedCrossEncoderEquivalenceJudge",
           "LearnedCorrectnessJudge"]

WEIGHTS_PATH = Path(__file__).with_name("learned_weights.json")
_ENCODERS: dict[tuple, TokenEncoder] = {}
_CROSS: dict[tuple, object] = {}  # (id of a shared encoder, weights file) -> its CrossEncoder


class Scorer:
    """Probability of label 1 from a shipped model (one entry of ``learned_weights.json``).

    ``model``: {"kind": "logistic", "features", "mean", "scale", "coef", "intercept", "threshold"},
    {"kind": "trees", "features", "init", "learning_rate", "trees": [{"feature", "threshold", "left", "right",
    "value"}, ...], "threshold"}, or {"kind": "mean", "features", "models": [one or more of those, over the same
    features], "threshold"} (the mean of their probabilities: a soft vote). Raises ValueError for another kind, or
    a "mean" without models or with a part over other features.
    """

    def __init__(self, model: dict):
        if model.get("kind") not in ("logistic", "trees", "mean"):
            raise ValueError(f"unknown model kind {model.get('kind')!r} (expected 'logistic', 'trees' or 'mean')")
        self.model = model
        self.features = tuple(model["features"])
        self.threshold = float(model["threshold"])
        self.parts = [Scorer(m) for m in model.get("models", ())] if model["kind"] == "mean" else []
        if model["kind"] == "mean" and (not self.parts or any(s.features != self.features for s in self.parts)):
            raise ValueError("a 'mean' model needs one or more models over its own features")

    def decision(self, X: np.ndarray) -> np.ndarray:
        """Log-odds of label 1: X of shape (n, n_features) -> shape (n,)."""
        X = np.asarray(X, dtype=float).reshape(-1, len(self.features))
        if self.parts:
            p = np.clip(self.proba(X), 1e-12, 1 - 1e-12)
            return np.log(p / (1 - p))
        m = self.model
        if m["kind"] == "logistic":
            return ((X - np.asarray(m["mean"])) / np.asarray(m["scale"])) @ np.asarray(m["coef"]) + m["intercept"]
        raw = np.full(len(X), float(m["init"]))
        for tree in m["trees"]:
            feat, thr, left, right, value = (np.asarray(tree[k]) for k in ("feature", "threshold", "left", "right",
                                                                               "value"))
            node = np.zeros(len(X), dtype=int)
            while True:
                inner = left[node] >= 0
                if not inner.any():
                    break
                go_left = X[np.arange(len(X)), np.where(inner, feat[node], 0)] <= thr[node]
                node = np.where(inner, np.where(go_left, left[node], right[node]), node)
            raw += m["learning_rate"] * value[node]
        return raw

    def proba(self, X: np.ndarray) -> np.ndarray:
        """P(label 1) in [0, 1], shape (n,)."""
        if self.parts:
            X = np.asarray(X, dtype=float).reshape(-1, len(self.features))
            return np.mean([s.proba(X) for s in self.parts], axis=0)
        return 1.0 / (1.0 + np.exp(-self.decision(X)))


def export_model(est, features: Sequence[str], threshold: float = 0.5) -> dict:
    """The JSON form of a fitted sklearn model: a Pipeline(StandardScaler, LogisticRegression), a binary
    GradientBoostingClassifier, or a list of them (kind "mean": the mean of their probabilities). Raises TypeError
    for anything else."""
    from sklearn.ensemble import GradientBoostingClassifier
    from sklearn.pipeline import Pipeline

    if isinstance(est, (list, tuple)):
        return {"kind": "mean", "features": list(features), "models": [export_model(e, features, threshold)
                                                                        for e in est], "threshold": threshold}
    if isinstance(est, Pipeline):
        scaler, lr = est[0], est[-1]
        return {"kind": "logistic", "features": list(features), "mean": scaler.mean_.tolist(),
                "scale": scaler.scale_.tolist(), "coef": lr.coef_[0].tolist(), "intercept": float(lr.intercept_[0]),
                "threshold": threshold}
    if isinstance(est, GradientBoostingClassifier):
        trees = []
        for (reg,) in est.estimators_:
            t = reg.tree_
            trees.append({"feature": t.feature.tolist(), "threshold": [round(float(v), 6) for v in t.threshold],
                          "left": t.children_left.tolist(), "right": t.children_right.tolist(),
                          "value": [float(v) for v in t.value[:, 0, 0]]})
        init = float(est._raw_predict_init(np.zeros((1, len(features))))[0, 0])
        return {"kind": "trees", "features": list(features), "init": init, "learning_rate": est.learning_rate,
                "trees": trees, "threshold": threshold}
    raise TypeError(f"cannot export {type(est).__name__}")


def load_weights(path=None) -> dict:
    """The shipped models {"equivalence": ..., "correctness": ..., "meta": ...} (``path`` default `WEIGHTS_PATH`).
    Raises FileNotFoundError when the file is missing (train it with benchmarks/judge_cv.py --write)."""
    with open(path or WEIGHTS_PATH, encoding="utf-8") as f:
        return json.load(f)


def _named(names: Sequence[str], x: np.ndarray) -> dict:
    """Feature name -> value; None for a soft feature the cheap stage did not compute (NaN), so the dict is JSON."""
    return {n: None if np.isnan(v) else float(v) for n, v in zip(names, x)}


class _Selected:
    """A `Scorer` over some of a judge's features (all of them, or those a `judge_cv.py --drop` run kept), read from
    a matrix of all of them: ``proba(X)``, X of shape (n, len(names)) -> P(label 1), shape (n,). Raises ValueError,
    naming ``source``, when the model reads a feature ``names`` lacks."""

    def __init__(self, scorer: Scorer, names: Sequence[str], source: str):
        if set(scorer.features) - set(names):
            raise ValueError(f"{source} features {scorer.features} are not all among this version's {tuple(names)}; "
                             "retrain with benchmarks/judge_cv.py --write")
        self.inner, self.features, self.threshold = scorer, tuple(names), scorer.threshold
        self.cols = [self.features.index(f) for f in scorer.features]

    def proba(self, X: np.ndarray) -> np.ndarray:
        return self.inner.proba(np.asarray(X, dtype=float).reshape(-1, len(self.features))[:, self.cols])


class _Learned:
    task = "?"
    names: tuple = ()
    everywhere = False  # True: the cheap stage decides only where it is sure of label 1; second opinion on the rest

    def __init__(self, model_path=None, weights=None, threshold: float | None = None, device: str = "cpu",
                 batch_size: int = 64):
        shipped = load_weights(weights)
        source = f"{weights or WEIGHTS_PATH}: {self.task}"
        self.scorer = _Selected(Scorer(shipped[self.task]), self.names, source)
        cheap = shipped.get(f"{self.task}_cheap")
        self.cheap = _Selected(Scorer(cheap), self.names, f"{source}_cheap") if cheap else None
        self.band = tuple(float(b) for b in cheap["band"]) if cheap else (0.0, 1.0)
        if self.cheap is not None and set(self.cheap.inner.features) & SOFT_FEATURES:
            raise ValueError(f"{weights or WEIGHTS_PATH}: {self.task}_cheap must read only lexical features")
        if not 0.0 <= self.band[0] < self.band[1] <= 1.0:
            raise ValueError(f"{weights or WEIGHTS_PATH}: {self.task}_cheap band {self.band} is not 0 <= lo < hi <= 1")
        self.threshold = self.scorer.threshold if threshold is None else float(threshold)
        # a cut outside the band would leave the pairs nearest to it to the cheap stage: widen the band to hold it
        self.band = (min(self.band[0], self.threshold), max(self.band[1], self.threshold))
        # where the full model's probability asks for the second opinion (default: the cheap stage's band)
        second = shipped[self.task].get("second_band", self.band)
        self.second_band = (min(float(second[0]), self.threshold), max(float(second[1]), self.threshold))
        if not 0.0 <= self.second_band[0] < self.second_band[1] <= 1.0:
            raise ValueError(f"{weights or WEIGHTS_PATH}: {self.task} second_band {second} is not 0 <= lo < hi <= 1")
        # how many orders of (a, b) the second opinion reads (2 when the file does not say: the eighth round's)
        self.second_orders = shipped[self.task].get("second_orders", 2)
        if self.second_orders not in (1, 2):
            raise ValueError(f"{weights or WEIGHTS_PATH}: {self.task} second_orders {self.second_orders!r} is not 1 "
                             "or 2")
        # One encoder (and text cache) per model and device, shared by the two judges: the answers a run judges for
        # equivalence are the ones it judges for correctness, so each is encoded once.
        key = (str(model_path), device, batch_size)
        self.encoder = _ENCODERS.setdefault(key, TokenEncoder(model_path, device, batch_size))

    def _by(self, stage: int, *row) -> str:
        """Which step decided a row (``stage`` as `_cascade` gives it): "rule: NAME", "cheap", "full" or
        "full + cross-encoder"."""
        name = self.rule(*row)
        return f"rule: {name}" if name else ("cheap", "full", "full + cross-encoder")[int(stage)]

    @property
    def model(self):
        """The MiniLM encoder behind the soft-alignment features (loaded on first use)."""
        return self.encoder.model

    def _second_opinion(self, rows: list) -> np.ndarray | None:
        """A second model's P(label 1) of the rows the full model decides, averaged with it; None (no second)."""
        return None

    @staticmethod
    def rule(*row) -> str | None:
        """The name of the rule that decides this row before any model (probability 0), else None."""
        return None

    def _cascade(self, rows: list, featurize, soft) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(P(label 1) per row, the feature matrix, the stage that decided each row: 0 cheap, 1 full, 2 full with the
        second opinion). ``featurize(*row, None)`` is a row's feature list with the soft features NaN,
        ``soft(*row, encoder)`` its soft features; the encoder runs only on the rows the cheap model is unsure of
        (all rows without a cheap model), the second opinion (`_second_opinion`) only where the full model is unsure
        too (probability inside ``second_band``), and a row a `rule` decides gets probability 0."""
        X = np.array([featurize(*r, None) for r in rows], dtype=float).reshape(len(rows), len(self.names))
        full = np.ones(len(rows), dtype=bool)
        p = np.zeros(len(rows))
        if self.cheap is not None and len(rows):
            p = self.cheap.proba(X)
            full = (p < self.band[1]) if self.everywhere else (p > self.band[0]) & (p < self.band[1])
        ruled = np.array([self.rule(*r) is not None for r in rows], dtype=bool).reshape(len(rows))
        full &= ~ruled
        p[ruled] = 0.0
        stage = full.astype(int)
        idx = np.flatnonzero(full)
        if len(idx):
            self.encoder.encode_all([t.strip() for i in idx for t in rows[i][:2]])
            soft_cols = [j for j, n in enumerate(self.names) if n in SOFT_FEATURES]
            X[np.ix_(idx, soft_cols)] = [soft(*rows[i], self.encoder) for i in idx]
            p[idx] = self.scorer.proba(X[idx])
            lo, hi = self.second_band
            unsure = idx if self.everywhere else idx[(p[idx] > lo) & (p[idx] < hi)]
            second = self._second_opinion([rows[i] for i in unsure]) if len(unsure) else None
            if second is not None:
                p[unsure] = (p[unsure] + second) / 2
                stage[unsure] = 2
        return p, X, stage


class LearnedEquivalenceJudge(_Learned, PairJudge):
    """Equivalence of two answers to one question by the shipped classifier ("learned"; the default).

    Where the cheap stage and the full feature model are both unsure (probability inside ``band`` and
    ``second_band``), P(same) is the mean of the full model's and the shipped MiniLM cross-encoder's
    (`elical.judges.cross_encoder`, reading the weights file's ``second_orders`` orders of the pair, 2 when it does
    not say; docs/benchmarks.md says how it, the bands and the orders were chosen).

    Parameters: model_path (MiniLM directory, default the packaged all-MiniLM-L6-v2), weights (a JSON file, default
    the shipped `WEIGHTS_PATH`), threshold (probability cut, default the weights file's), device, batch_size,
    cross_encoder (a safetensors file, default the shipped `CE_WEIGHTS_PATH`; False: the feature model alone).
    """

    name = "learned"
    task = "equivalence"
    names = EQUIVALENCE_FEATURES

    def __init__(self, model_path=None, weights=None, threshold: float | None = None, device: str = "cpu",
                 batch_size: int = 64, cross_encoder=None):
        super().__init__(model_path, weights, threshold, device, batch_size)
        self._cross_path, self._cross = cross_encoder, None

    def _second_opinion(self, rows: list) -> np.ndarray | None:
        """The cross-encoder's P(same) of (a, b, question) rows (loaded on first use), or None when disabled."""
        if self._cross_path is False:
            return None
        if self._cross is None:  # one per encoder and weights file: a run's judge stage and SE clustering share it
            from elical.judges.cross_encoder import CE_WEIGHTS_PATH, CrossEncoder

            key = (id(self.encoder), str(self._cross_path or CE_WEIGHTS_PATH))
            if key not in _CROSS:
                _CROSS[key] = CrossEncoder(self.encoder.model, self._cross_path or None, self.encoder.batch_size)
            self._cross = _CROSS[key]
        return self._cross.proba(rows, 2 if self.everywhere else self.second_orders)

    @staticmethod
    def rule(a: str, b: str, question: str | None = None) -> str | None:
        """"both-non-answers" when neither answer claims anything (`Extraction.answers`): not the same answer
        (GUIDELINE.md rule 5), whatever their wording shares."""
        return "both-non-answers" if not extract(a, question).answers and not extract(b, question).answers else None

    def features(self, pairs, questions=None) -> np.ndarray:
        """n (a, b) pairs -> ndarray of shape (n, len(EQUIVALENCE_FEATURES)), every feature (all texts encoded)."""
        pairs = check_pairs(pairs, questions)
        self.encoder.encode_all([s.strip() for p in pairs for s in p])
        return np.array([equivalence_features(a, b, question_at(questions, i), self.encoder)
                         for i, (a, b) in enumerate(pairs)], dtype=float).reshape(len(pairs), len(self.names))

    def _rows(self, pairs, questions):
        pairs = check_pairs(pairs, questions)
        return [(a, b, question_at(questions, i)) for i, (a, b) in enumerate(pairs)]

    def scores(self, pairs, questions=None) -> np.ndarray:
        """P(same answer) of each pair, shape (n,) (the cascade: the full model only where the cheap one is unsure)."""
        return self._cascade(self._rows(pairs, questions), equivalence_features, equivalence_soft)[0]

    def judge_many(self, pairs: Sequence[tuple[str, str]], questions=None) -> np.ndarray:
        """n (a, b) pairs -> ndarray of int 0/1, shape (n,)."""
        return (self.scores(pairs, questions) >= self.threshold).astype(int)

    def explain(self, a: str, b: str, question: str | None = None) -> dict:
        """The extraction of each answer, every feature (soft ones NaN where the cheap model decided), which model
        decided, the probability and the verdict of one pair."""
        p, X, full = self._cascade(self._rows([(a, b)], None if question is None else [question]),
                                   equivalence_features, equivalence_soft)
        return {"a": extract(a, question).__dict__, "b": extract(b, question).__dict__,
                "features": _named(self.names, X[0]), "decided_by": self._by(full[0], a, b, question),
                "probability": float(p[0]), "verdict": int(p[0] >= self.threshold)}


class LearnedCrossEncoderEquivalenceJudge(LearnedEquivalenceJudge):
    """The learned equivalence judge with the cross-encoder on nearly every pair ("learned-ce"): the cheap stage
    decides only the pairs it is sure are the same (probability at or above the band's top: identical answers, for
    one; the cross-encoder never saw an identical pair in training), the named rule decides the non-answers, and
    every other pair gets the mean of the full feature model's and the cross-encoder's P(same), the cross-encoder
    reading both orders of the pair. It was more accurate than the default cascade until the eighth round (final8:
    0.899 against 0.882 balanced accuracy); since the ninth, whose default reads the cross-encoder on more pairs, it
    is not clearly so (final9: 0.906 against 0.913; final10: 0.907 against 0.902; final11: 0.884 against 0.880;
    final12: 0.907 against 0.907; final13: 0.925 against 0.913; final14: 0.894 against 0.901; final15: 0.912 against
    0.894; final16: 0.859 against 0.851; final17: 0.852 against 0.851; final18: 0.9003 against 0.8996; final19:
    0.883 against 0.888; final20: 0.892 against 0.890; final21: 0.887 against 0.905; final22: 0.867 against 0.870;
    final23: 0.948 against 0.946; fold 0 of the grouped CV: 0.868 against 0.876), at about three times the CPU
    (docs/benchmarks.md). Kept for comparison.
    Parameters as `LearnedEquivalenceJudge` (``cross_encoder=False`` leaves the full feature model alone)."""

    name = "learned-ce"
    everywhere = True


class LearnedCorrectnessJudge(_Learned, CorrectnessBase):
    """Correctness of an answer by the shipped classifier ("learned"; the default): the highest probability over
    the gold aliases that are not empty after normalisation, against the threshold. Parameters as
    `LearnedEquivalenceJudge`."""

    name = "learned"
    task = "correctness"
    names = CORRECTNESS_FEATURES

    @staticmethod
    def rule(answer: str, alias: str, question: str | None = None) -> str | None:
        """"non-answer" when the answer claims nothing (empty, a refusal, an echo of the question): never correct."""
        return "non-answer" if not extract(answer, question).answers else None

    @staticmethod
    def _rows(pairs, questions) -> list[tuple[int, str, str, str | None]]:
        """(pair index, answer, alias, question) of every alias with a word after normalisation."""
        return [(i, r, a, question_at(questions, i)) for i, (r, aliases) in enumerate(pairs)
                for a in aliases if extract(a).tokens]

    def _flat(self, pairs, questions):
        """(rows, every feature of each row, all texts encoded): the training matrix of benchmarks/judge_cv.py."""
        flat = self._rows(pairs, questions)
        self.encoder.encode_all([s.strip() for _, r, a, _ in flat for s in (r, a)])
        X = np.array([correctness_features(r, a, q, self.encoder) for _, r, a, q in flat], dtype=float)
        return flat, X.reshape(len(flat), len(self.names))

    def _score_rows(self, pairs, questions):
        pairs = check_alias_pairs(pairs, questions)
        flat = self._rows(pairs, questions)
        p, X, full = self._cascade([(r, a, q) for _, r, a, q in flat], correctness_features, correctness_soft)
        return len(pairs), flat, p, X, full

    def scores(self, pairs, questions=None) -> np.ndarray:
        """max over aliases of P(the answer gives the alias), shape (n,); 0.0 where no alias has a word."""
        n, flat, p, _, _ = self._score_rows(pairs, questions)
        out = np.zeros(n)
        if flat:
            np.maximum.at(out, np.array([f[0] for f in flat]), p)
        return out

    def judge_many(self, pairs: Sequence[tuple[str, Sequence[str]]], questions=None) -> np.ndarray:
        """n (response, aliases) pairs -> ndarray of int 0/1, shape (n,)."""
        return (self.scores(pairs, questions) >= self.threshold).astype(int)

    def explain(self, answer: str, aliases: Sequence[str], question: str | None = None) -> dict:
        """The answer's extraction and, per alias, every feature (soft ones NaN where the cheap model decided),
        which model decided and the probability; the verdict."""
        _, flat, P, X, full = self._score_rows([(answer, aliases)], None if question is None else [question])
        per = [{"alias": a, "features": _named(self.names, x), "decided_by": self._by(f, answer, a, question),
                "probability": float(p)} for (_, _, a, _), x, p, f in zip(flat, X, P, full)]
        best = max((d["probability"] for d in per), default=0.0)
        return {"answer": extract(answer, question).__dict__, "aliases": per, "probability": best,
                "verdict": int(best >= self.threshold)}
