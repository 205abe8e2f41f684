"""Probe heads on memory-mapped features: the file layout is read exactly, a fit on a memmap equals the in-memory
fit (independent reference: ProbeHead on the loaded ndarray, StandardScaler on the whole matrix), and no read is
larger than a chunk."""
import json
import struct
import tracemalloc

import numpy as np
import pytest
from safetensors.numpy import save_file
from sklearn.preprocessing import StandardScaler

from elical.generation.features import load_features, save_features
from elical.heads.probe import ProbeHead
from elical.heads.streaming import FeatureFile, check_features, feature_scaler
from elical.records import InputError


def _data(n=600, d=24, seed=0):
    rng = np.random.default_rng(seed)
    X = (rng.standard_normal((n, d)) * rng.uniform(0.5, 5.0, d) + rng.uniform(-3, 3, d)).astype(np.float32)
    y = 1.0 / (1.0 + np.exp(-(X[:, :3] - X[:, :3].mean(0)).sum(1) / 3))
    return X, y.astype(np.float32)


@pytest.fixture()
def feature_file(tmp_path):
    X, y = _data()
    path = tmp_path / "f.safetensors"
    save_features(path, [f"q{i}" for i in range(len(X))], X, meta={"layer": -1})
    return path, X, y


def test_mmap_reads_the_safetensors_data_block_exactly(feature_file, tmp_path):
    path, X, _ = feature_file
    ids, M, meta = load_features(path, mmap=True)
    ids_ref, X_ref, meta_ref = load_features(path)
    assert isinstance(M, np.memmap) and (ids, meta) == (ids_ref, meta_ref) == ([f"q{i}" for i in range(600)],
                                                                            {"layer": -1})
    assert M.dtype == np.float32 and M.shape == (600, 24) and np.array_equal(M, X) and np.array_equal(M, X_ref)
    with pytest.raises(ValueError):  # read-only
        M[0, 0] = 1.0
    # the offset by hand: 8 bytes of header length, the JSON header, then data_offsets[0] into the data block
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    begin = json.loads(raw[8:8 + n])["hidden_states"]["data_offsets"][0]
    assert M.offset == 8 + n + begin and raw[M.offset:M.offset + 4] == X[0, 0].tobytes()
    # another tensor before ours in the data block, ids of odd lengths (header padding): offsets still exact
    other = tmp_path / "two.safetensors"
    save_file({"a": np.arange(7, dtype=np.float64), "hidden_states": X[:5]}, str(other),
              metadata={"ids": json.dumps(["x" * i for i in range(1, 6)])})
    ids2, M2, meta2 = load_features(other, mmap=True)
    assert np.array_equal(M2, X[:5]) and ids2 == ["x" * i for i in range(1, 6)] and meta2 == {}


def test_mmap_refuses_files_that_are_not_features_files(tmp_path, feature_file):
    path, X, _ = feature_file
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(InputError, match="does not match data_offsets"):
        load_features(cut, mmap=True)
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x05\x00\x00\x00\x00\x00\x00\x00{bad}")
    with pytest.raises(InputError, match="not an elical features file"):
        load_features(junk, mmap=True)
    with pytest.raises(InputError, match="file not found"):
        load_features(tmp_path / "absent.safetensors", mmap=True)
    ints = tmp_path / "ints.safetensors"
    save_file({"hidden_states": np.zeros((2, 3), np.int32)}, str(ints), metadata={"ids": '["a", "b"]'})
    with pytest.raises(InputError, match="cannot be memory-mapped"):
        load_features(ints, mmap=True)


def test_feature_file_views_index_like_ndarrays(feature_file):
    path, X, _ = feature_file
    F = FeatureFile.open(path, chunk_bytes=24 * 4 * 7)
    assert F.shape == (600, 24) and F.chunk_rows == 7 and len(F) == 600
    idx = np.array([5, 599, 0, 5, -1, 17])
    assert np.array_equal(F.take([3, 3, 5]), X[[3, 3, 5]])  # a repeat and a gap: not one contiguous run
    mask = np.arange(600) % 3 == 1
    assert np.array_equal(F.take(idx), X[idx]) and np.array_equal(F[idx].take(), X[idx])
    assert np.array_equal(F[mask][np.array([3, 0])].take(), X[mask][[3, 0]])
    assert np.array_equal(F[10:40:3].take(), X[10:40:3]) and np.array_equal(F[7], X[7])
    assert F[idx].ids == [f"q{i}" for i in (5, 599, 0, 5, 599, 17)]
    assert np.array_equal(np.concatenate(list(F[mask].chunks())), X[mask])
    assert np.array_equal(np.asarray(F[idx]), X[idx])
    mean, scale = X.mean(0), X.std(0)
    Z = (X - mean.astype(np.float32)) / scale.astype(np.float32)
    assert np.array_equal(F.standardized(mean, scale)[idx].take(), Z[idx])
    with pytest.raises(IndexError):
        F[np.array([600])]
    with pytest.raises(IndexError):
        F[np.ones(5, dtype=bool)]


def test_streaming_statistics_and_checks_equal_in_memory(feature_file):
    path, X, _ = feature_file
    X = X.copy()
    X[:, 4] = 2.5  # a constant feature: scale 1, as scikit-learn sets it
    F = FeatureFile(X, chunk_bytes=24 * 4 * 13)
    ref = StandardScaler().fit(X)
    got = feature_scaler(F)
    np.testing.assert_allclose(got.mean_, ref.mean_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.scale_, ref.scale_, rtol=1e-10)
    assert got.scale_[4] == 1.0
    sub = F[np.arange(600)[::-2]]
    np.testing.assert_allclose(feature_scaler(sub).mean_, X[::-2].astype(np.float64).mean(0), rtol=1e-12,
                               atol=1e-12)
    X[321, 7] = np.nan
    with pytest.raises(ValueError, match="X contains NaN"):
        check_features(FeatureFile(X, chunk_bytes=1000), "X")
    with pytest.raises(ValueError, match="X contains NaN"):
        ProbeHead().fit(FeatureFile(X, chunk_bytes=1000), np.full(600, 0.5))


def _weights(head):
    return np.concatenate([p.detach().numpy().ravel() for p in head.module_.parameters()])


@pytest.mark.parametrize("chunk_bytes", [24 * 4 * 50, 24 * 4 * 1000])
@pytest.mark.parametrize("kind", ["linear", "mlp"])
def test_fit_on_memmap_equals_fit_in_memory(feature_file, chunk_bytes, kind):
    path, X, y = feature_file
    _, M, _ = load_features(path, mmap=True)
    params = dict(kind=kind, hidden_size=8, batch_size=32, max_epochs=40, patience=4, random_state=3)
    ref = ProbeHead(**params).fit(X, y)
    got = ProbeHead(**params).fit(FeatureFile(M, chunk_bytes=chunk_bytes), y)
    assert 0 < ref.best_epoch_ and (got.n_epochs_, got.best_epoch_) == (ref.n_epochs_, ref.best_epoch_)
    np.testing.assert_allclose(got.mean_, ref.mean_, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got.scale_, ref.scale_, rtol=1e-12)
    np.testing.assert_allclose(np.array(got.history_, dtype=float), np.array(ref.history_, dtype=float),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(_weights(got), _weights(ref), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.predict(M), ref.predict(X), atol=1e-6)
    np.testing.assert_allclose(ref.predict(M), ref.predict(X), atol=1e-6)  # predict streams too
    # EliCal stage 2 (continue from stage 1, epochs chosen by cross-validation) on a lazy subset of the file
    k = np.arange(0, 600, 12)
    stage2 = dict(params, validation="cv", max_epochs=15)
    ref2 = ProbeHead(**stage2).fit(X[k], y[k], init=ref)
    got2 = ProbeHead(**stage2).fit(FeatureFile(M, chunk_bytes=chunk_bytes)[k], y[k], init=got)
    assert got2.cv_best_epochs_ == ref2.cv_best_epochs_ and got2.n_epochs_ == ref2.n_epochs_
    np.testing.assert_allclose(got2.predict(M), ref2.predict(X), atol=1e-5)


class _CountingRows:
    """A 2-D float32 matrix that records the number of rows of every read."""

    def __init__(self, X):
        self.X, self.reads = X, []
        self.shape, self.ndim, self.dtype = X.shape, 2, X.dtype

    def __getitem__(self, index):
        out = self.X[index]
        self.reads.append(out.shape[0])
        return out

    def __array__(self, *a, **k):
        raise AssertionError("the whole matrix was asked for")


def test_fit_and_predict_never_read_more_than_a_chunk():
    X, y = _data(n=2000, d=16)
    data = _CountingRows(X)
    F = FeatureFile(data, chunk_bytes=16 * 4 * 100)  # 100 rows a read
    head = ProbeHead(batch_size=30, max_epochs=5, random_state=0).fit(F, y)
    head.predict(F)
    assert data.reads and max(data.reads) <= 100
    # rows per epoch: the training part once (whole batches: 90 rows a read) plus validation and epoch-0 passes
    assert sum(data.reads) >= 5 * 1600 and max(data.reads) == 100
    np.testing.assert_allclose(head.predict(X), ProbeHead(batch_size=30, max_epochs=5).fit(X, y).predict(X),
                               atol=1e-6)


def test_streamed_fit_allocates_a_fraction_of_the_matrix(tmp_path):
    """Memory traced by numpy (tracemalloc): the in-memory fit holds the matrix and its standardised copy; the
    memory-mapped fit a few chunks (scikit-learn's float64 temporaries in the statistics pass) and the ids."""
    X, y = _data(n=4000, d=256)  # 4 MB
    path = tmp_path / "big.safetensors"
    save_features(path, [str(i) for i in range(len(X))], X)
    params = dict(batch_size=64, max_epochs=3)
    ProbeHead(**params).fit(X[:500], y[:500])  # first calls allocate once (imports, caches): not counted

    def peak(fit):
        tracemalloc.start()
        fit()
        size = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return size

    chunk = 256 * 4 * 128
    in_memory = peak(lambda: ProbeHead(**params).fit(load_features(path)[1], y))
    mapped = peak(lambda: ProbeHead(**params).fit(FeatureFile.open(path, chunk_bytes=chunk), y))
    assert in_memory > 2 * X.nbytes  # the matrix and its standardised training part (+ scikit-learn's float64)
    assert mapped < 8 * chunk < X.nbytes / 3, (mapped, in_memory)
