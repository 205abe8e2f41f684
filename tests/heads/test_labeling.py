"""Label orders: seeded random and stratified by the stage-1 confidence; nested by construction."""
import numpy as np
import pytest

from elical.heads.labeling import (label_order, random_label_order, stratified_label_order, stratum_visit_order)


def test_random_label_order_is_the_seeded_numpy_permutation():
    order = random_label_order(50, 3)
    assert order.dtype == np.int64 and sorted(order.tolist()) == list(range(50))
    assert order.tolist() == np.random.default_rng(3).permutation(50).tolist()
    assert random_label_order(50, 3).tolist() == order.tolist()
    assert random_label_order(50, 4).tolist() != order.tolist()
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="n_pool"):
            random_label_order(bad, 0)
    with pytest.raises(ValueError, match="seed"):
        random_label_order(5, -1)


def test_stratum_visit_order_is_van_der_corput():
    # vdc base 2: 0, .5, .25, .75, .125, .625, .375, .875 -> times 8
    assert stratum_visit_order(8) == [0, 4, 2, 6, 1, 5, 3, 7]
    # rotated by .5: .5, 0, .75, .25, .625, .125, .875, .375
    assert stratum_visit_order(8, 0.5) == [4, 0, 6, 2, 5, 1, 7, 3]
    # 5 strata: 0 -> 0, .5 -> 2, .25 -> 1, .75 -> 3, then .125 (0), .625 (3), .375 (1) repeat, .875 -> 4
    assert stratum_visit_order(5) == [0, 2, 1, 3, 4]
    assert stratum_visit_order(1) == [0]
    for n in range(1, 40):
        for shift in (0.0, 0.3, 0.999):
            assert sorted(stratum_visit_order(n, shift)) == list(range(n))
    with pytest.raises(ValueError):
        stratum_visit_order(0)
    with pytest.raises(ValueError):
        stratum_visit_order(4, 1.0)


@pytest.mark.parametrize("n, n_strata", [(64, 8), (10, 3), (37, 8), (5, 8)])
def test_every_prefix_holds_its_share_of_every_stratum(n, n_strata):
    rng = np.random.default_rng(0)
    conf = rng.random(n)
    order = stratified_label_order(conf, seed=1, n_strata=n_strata)
    assert order.dtype == np.int64 and sorted(order.tolist()) == list(range(n))
    # independent stratum membership: rank of each question, cut as np.array_split does
    s = min(n_strata, n)
    sizes = [n // s + (1 if i < n % s else 0) for i in range(s)]
    edges = np.cumsum([0] + sizes)
    rank = np.empty(n, int)
    rank[np.argsort(conf)] = np.arange(n)
    stratum = np.searchsorted(edges, rank, side="right") - 1
    for k in range(1, n + 1):
        counts = np.bincount(stratum[order[:k]], minlength=s)
        # proportional allocation: floor(k/s) or ceil(k/s) from each stratum not yet exhausted
        assert (counts <= sizes).all()
        for j in range(s):
            if counts[j] < sizes[j]:
                assert k // s <= counts[j] <= -(-k // s), (k, counts)


def test_small_prefixes_spread_over_the_range_and_order_is_rank_based():
    conf = np.linspace(0.01, 0.99, 80)
    order = stratified_label_order(conf, seed=0, n_strata=8)
    stratum = (np.arange(80) // 10)  # conf is sorted, so question i is in stratum i // 10
    first8 = stratum[order[:8]]
    assert sorted(first8.tolist()) == list(range(8))
    # the first two labels lie in opposite halves of the range (van der Corput: strata 4 apart)
    assert abs(int(first8[0]) - int(first8[1])) == 4
    # only ranks matter: a strictly increasing transform of the confidence gives the same order
    assert stratified_label_order(conf ** 3, seed=0, n_strata=8).tolist() == order.tolist()
    # seeded: same seed same order, another seed another order
    assert stratified_label_order(conf, seed=0, n_strata=8).tolist() == order.tolist()
    assert stratified_label_order(conf, seed=1, n_strata=8).tolist() != order.tolist()


def test_ties_one_stratum_and_errors():
    order = stratified_label_order(np.full(12, 0.3), seed=2)
    assert sorted(order.tolist()) == list(range(12))
    one = stratified_label_order(np.arange(9.0), seed=5, n_strata=1)
    assert sorted(one.tolist()) == list(range(9))
    for bad in ([], [[0.1, 0.2]], [0.1, float("nan")]):
        with pytest.raises(ValueError, match="eli_confidence"):
            stratified_label_order(bad, 0)
    with pytest.raises(ValueError, match="n_strata"):
        stratified_label_order([0.1, 0.2], 0, n_strata=0)
    with pytest.raises(ValueError, match="seed"):
        stratified_label_order([0.1, 0.2], -3)


def test_label_order_dispatch():
    conf = np.random.default_rng(1).random(20)
    assert label_order("random", 20, 7).tolist() == random_label_order(20, 7).tolist()
    assert (label_order("stratified", 20, 7, eli_confidence=conf, n_strata=4).tolist()
            == stratified_label_order(conf, 7, 4).tolist())
    with pytest.raises(ValueError, match="eli_confidence"):
        label_order("stratified", 20, 7)
    with pytest.raises(ValueError, match="selection"):
        label_order("uncertainty", 20, 7)
