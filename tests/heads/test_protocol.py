"""The one fitting protocol (elical.heads.protocol): ``elical run``, ``sweep`` and ``study`` give the numbers
recorded from the code before they shared it (tests/fixtures/protocol_expected.json, made by
tests/fixtures/make_protocol_expected.py from main at da70ab4), and the protocol's own rules on small cases."""

import json
from pathlib import Path

import numpy as np
import pytest

from elical.heads.protocol import calibrated_rivals, fit_heads, label_sets
from elical.heads.stages import probe_stages

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


@pytest.fixture(scope="module")
def now(tmp_path_factory, load_script):
    return load_script(FIXTURES / "make_protocol_expected.py").compute(tmp_path_factory.mktemp("protocol") / "run")


@pytest.fixture(scope="module")
def recorded():
    return json.loads((FIXTURES / "protocol_expected.json").read_text())


def _close(a, b):
    np.testing.assert_allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), rtol=0, atol=1e-6)


@pytest.mark.slow
def test_run_numbers_unchanged(now, recorded):
    assert set(now["run"]) == set(recorded["run"])
    for method, conf in recorded["run"].items():
        _close(now["run"][method], conf)


@pytest.mark.slow
def test_sweep_numbers_unchanged(now, recorded):
    assert set(now["sweep"]) == set(recorded["sweep"])
    for key, per_seed in recorded["sweep"].items():
        for seed, metrics in per_seed.items():
            for name in ("auroc", "ece", "brier", "alignment"):
                got = now["sweep"][key][seed][name]
                assert (got is None) == (metrics[name] is None), (key, seed, name)
                if got is not None:
                    assert got == pytest.approx(metrics[name], abs=1e-6), (key, seed, name)


@pytest.mark.slow
def test_study_numbers_unchanged(now, recorded):
    for target, by_method in recorded["study"].items():
        assert list(now["study"][target]) == list(by_method)
        for method, conf in by_method.items():
            _close(now["study"][target][method], conf)


@pytest.mark.slow
def test_run_and_study_share_heads(now):
    # the same seed, label order, k and target: the run's EliCal(8) is the study's EliCal(8)
    _close(now["run"]["EliCal(8)"], now["study"]["sample-accuracy"]["EliCal(8)"])
    _close(now["run"]["Cal-Only(8)"], now["study"]["sample-accuracy"]["Cal-Only(8)"])
    _close(now["run"]["Eli-Only+Isotonic(8)"], now["study"]["sample-accuracy"]["Eli-Only+Isotonic(8)"])


def test_label_sets_nested_sorted_and_clipped():
    order = np.array([5, 2, 7, 0, 1, 3, 6, 4])
    sets = label_sets(order, [2, "all", 4, 100])
    assert list(sets) == [2, 4, 8]
    assert sets[2].tolist() == [2, 5] and sets[4].tolist() == [0, 2, 5, 7] and sets[8].tolist() == list(range(8))
    with pytest.raises(ValueError, match="k must be"):
        label_sets(order, [0])


def test_fit_heads_order_cache_and_reuse():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, 5)).astype(np.float32)
    c_cons = (X[:, 0] > 0).astype(float) * 0.8 + 0.1
    y = (X[:, 0] + 0.3 * rng.normal(size=40) > 0).astype(float)
    stages = probe_stages("linear", random_state=0, max_epochs=5)
    sets = label_sets(np.random.default_rng(1).permutation(40), [8, 16])
    fits = list(fit_heads(stages, X, c_cons, y, sets, include_all=True))
    assert [f.name for f in fits] == ["Eli-Only", "Cal-Only(8)", "EliCal(8)", "Cal-Only(16)", "EliCal(16)",
                                      "Cal-Only(all=40)"]
    # a saved head is used instead of fitting; a labelled set seen before reuses the cached heads
    calls = []
    marker = fits[0].head

    def reuse(method, k, idx):
        calls.append((method, k, len(idx)))
        return marker if method == "Eli-Only" else None
    cache: dict = {}
    again = list(fit_heads(stages, X, c_cons, y, {8: sets[8]}, cache=cache, reuse=reuse))
    assert again[0].head is marker and calls == [("Eli-Only", None, 40), ("Cal-Only", 8, 8), ("EliCal", 8, 8)]
    third = list(fit_heads(stages, X, c_cons, y, {8: sets[8]}, eli=fits[0].head, cache=cache))
    assert third[1].head is again[1].head
    np.testing.assert_array_equal(again[2].head.predict(X), fits[2].head.predict(X))


def test_calibrated_rivals_pairs_pick_from_the_full_set():
    rng = np.random.default_rng(3)
    train = {"A": rng.random(30), "B": rng.random(30)}
    test = {"A": rng.random(10), "B": rng.random(10)}
    y = (rng.random(30) > 0.5).astype(float)
    sets = {8: np.arange(8), 16: np.arange(16)}
    full = calibrated_rivals(train, test, y, sets)
    some = calibrated_rivals(train, test, y, sets, pairs=(("B", "Isotonic"), ("A", "Platt")))
    assert list(some) == ["B+Isotonic(8)", "B+Isotonic(16)", "A+Platt(8)", "A+Platt(16)"]
    for name, conf in some.items():
        np.testing.assert_array_equal(conf, full[name])
    with pytest.raises(ValueError, match="no scores"):
        calibrated_rivals(train, test, y, sets, pairs=(("C", "Platt"),))
