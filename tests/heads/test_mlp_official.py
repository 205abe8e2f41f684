"""``--head mlp`` in the official shape (``train_mlp.py`` of Ni et al.: Linear(H, H/2), ReLU, Linear(H/2, H/4), ReLU,
Linear(H/4, 1), sigmoid): the architecture, a hand-computed head, and the round trip both ways through
``vector_head_mlp.pt``."""
import numpy as np
import pytest
import torch

from elical.heads.probe import ProbeHead, mlp_widths
from elical.heads.reference import ReferenceHead, export_head, load_head_file


def _official_class(hidden):
    """The official head class, written out from its description (not imported from elical)."""
    return torch.nn.Sequential(torch.nn.Linear(hidden, hidden // 2), torch.nn.ReLU(),
                               torch.nn.Linear(hidden // 2, hidden // 4), torch.nn.ReLU(),
                               torch.nn.Linear(hidden // 4, 1))


def test_default_mlp_has_the_official_shape():
    X = np.random.default_rng(0).normal(size=(64, 12)).astype(np.float32)
    y = np.random.default_rng(1).uniform(size=64)
    head = ProbeHead(kind="mlp", max_epochs=2).fit(X, y)
    shapes = [tuple(p.shape) for p in head.module_.state_dict().values()]
    assert shapes == [(6, 12), (6,), (3, 6), (3,), (1, 3), (1,)]
    assert [type(m).__name__ for m in head.module_] == ["Linear", "ReLU", "Linear", "ReLU", "Linear"]
    assert mlp_widths(3584) == (1792, 896, 1) and mlp_widths(576, 32) == (32, 1)
    assert len(ProbeHead(kind="mlp", hidden_size=8, max_epochs=1).fit(X, y).module_) == 3  # an explicit width


def test_hand_computed_official_head(tmp_path):
    # H = 4: widths 2, 1, 1. h = (1, 2, 0, -1)
    state = {"0.weight": torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 1.0]]),
             "0.bias": torch.tensor([0.0, -2.0]),
             "2.weight": torch.tensor([[2.0, 3.0]]), "2.bias": torch.tensor([-1.0]),
             "4.weight": torch.tensor([[0.5]]), "4.bias": torch.tensor([0.25])}
    # layer 0: (1, 2 - 1 - 2) = (1, -1) -> ReLU (1, 0); layer 2: 2*1 + 3*0 - 1 = 1 -> ReLU 1; layer 4: 0.5 + 0.25
    torch.save(state, tmp_path / "vector_head_mlp.pt")
    head = ReferenceHead(load_head_file(tmp_path / "vector_head_mlp.pt"))
    got = head.predict(np.array([[1.0, 2.0, 0.0, -1.0], [0.0, 0.0, 0.0, 0.0]]))
    # second row: layer 0 (0, -2) -> (0, 0); layer 2: -1 -> 0; layer 4: 0.25
    np.testing.assert_allclose(got, [1 / (1 + np.exp(-0.75)), 1 / (1 + np.exp(-0.25))], rtol=1e-12)


def test_round_trip_through_the_official_class(tmp_path):
    rng = np.random.default_rng(3)
    X = (rng.normal(size=(200, 16)) * rng.uniform(0.5, 3, size=16) + rng.normal(size=16)).astype(np.float32)
    y = 1 / (1 + np.exp(-(X[:, 0] - X[:, 3])))
    ours = ProbeHead(kind="mlp", max_epochs=5, random_state=0).fit(X, y)
    ours.save(tmp_path / "eli_only")
    export_head(tmp_path / "eli_only", tmp_path / "exported")
    # elical -> official: the official class loads the file strictly and gives our confidences on raw states
    net = _official_class(16)
    net.load_state_dict(torch.load(tmp_path / "exported" / "vector_head_mlp.pt", weights_only=True), strict=True)
    with torch.no_grad():
        official = torch.sigmoid(net.double()(torch.from_numpy(X.astype(np.float64))).squeeze(-1)).numpy()
    np.testing.assert_allclose(official, ours.predict(X), atol=1e-6)
    # official -> elical: a head saved by the official class is read back with the same outputs
    torch.manual_seed(0)
    theirs = _official_class(16)
    torch.save(theirs.state_dict(), tmp_path / "vector_head_mlp_official.pt")
    back = ReferenceHead(load_head_file(tmp_path / "vector_head_mlp_official.pt"))
    with torch.no_grad():
        expected = torch.sigmoid(theirs(torch.from_numpy(X)).squeeze(-1)).numpy()
    np.testing.assert_allclose(back.predict(X), expected, atol=1e-6)
    assert back.kind == "mlp" and back.n_features_in_ == 16


def test_a_head_of_another_width_is_refused_by_the_official_class(tmp_path):
    X = np.random.default_rng(0).normal(size=(40, 16)).astype(np.float32)
    ProbeHead(kind="mlp", hidden_size=8, max_epochs=1).fit(X, np.full(40, 0.5)).save(tmp_path / "h")
    export_head(tmp_path / "h", tmp_path / "out")
    with pytest.raises(RuntimeError, match="size mismatch"):
        _official_class(16).load_state_dict(torch.load(tmp_path / "out" / "vector_head_mlp.pt", weights_only=True))
