"""Probe heads on feature matrices larger than memory: rows read chunk by chunk from a memory-mapped file.

HonestyBench's training pool has ~560k questions; their hidden states (3,584 float32 values each for a 7B model)
take 8 GB. :func:`elical.generation.features.load_features` with ``mmap=True`` maps the safetensors file
instead of reading it, and :class:`FeatureFile` reads its rows a bounded chunk at a time. ``ProbeHead.fit`` and
``ProbeHead.predict`` (:mod:`elical.heads.probe`) accept a ``np.memmap`` or a :class:`FeatureFile` and then

- check finiteness and compute the standardisation (``StandardScaler.partial_fit`` per chunk: float64
  accumulators, Chan et al.'s pairwise update, scikit-learn's constant-feature rule) in streaming passes;
- draw the same seeded validation split and the same shuffled order as in memory, and read each run of
  consecutive mini-batches as one chunk, in file order, standardised on arrival;
- evaluate the validation loss and predictions chunk by chunk.

Mini-batches are the very rows of the in-memory fit, so a fit on a memory-mapped file equals the fit on the
loaded matrix up to float rounding of the standardisation statistics (``tests/heads/test_streaming.py``). Peak
memory is two to three chunks (``chunk_bytes``, default :data:`CHUNK_BYTES`) beyond the ids and targets, whatever
the pool; the in-memory fit holds the matrix, its standardised copy and, while fitting the scaler, a float64 copy.
Measured: ``docs/benchmarks.md``.
"""

from __future__ import annotations

import mmap
from pathlib import Path
from typing import Iterator

import numpy as np

from elical.heads.validation import _check_X

__all__ = ["CHUNK_BYTES", "FeatureFile", "is_streamed", "check_features", "feature_scaler", "iter_batches",
           "map_chunks"]

#: Bytes of feature rows read at a time (rounded to whole rows, at least one row; whole mini-batches in training).
CHUNK_BYTES = 128 * 2**20


class FeatureFile:
    """Rows of an (n, d) feature matrix, read a chunk at a time: a memory-mapped features file or a lazy subset.

    Parameters
    ----------
    data : ndarray or np.memmap of shape (n_file, d)
        The matrix, typically ``load_features(path, mmap=True)[1]``; it is never read whole.
    rows : array of int, optional
        Rows of ``data`` this view holds, in this order (default: all, in file order).
    ids, meta : optional
        The record ids of the view's rows and the file's metadata (set by :meth:`open`).
    chunk_bytes : int
        Bytes of rows read at a time (see :data:`CHUNK_BYTES`).

    Indexing with an int array, a boolean mask or a slice gives another lazy ``FeatureFile``; :meth:`take` reads
    rows into memory. After each read the pages of a memory-mapped file are released from this process
    (``madvise(MADV_DONTNEED)``: they stay in the OS page cache, but out of the process's resident memory).
    """

    def __init__(self, data, rows=None, *, ids=None, meta=None, chunk_bytes: int = CHUNK_BYTES, _transform=None):
        if getattr(data, "ndim", None) != 2:
            raise ValueError(f"data must be 2-D of shape (n_rows, n_features), got shape {getattr(data, 'shape', None)}")
        if not isinstance(chunk_bytes, (int, np.integer)) or chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be a positive integer, got {chunk_bytes!r}")
        self._data, self._transform, self.chunk_bytes = data, _transform, int(chunk_bytes)
        self._rows = None if rows is None else np.asarray(rows, dtype=np.int64)
        self.ids, self.meta = ids, meta

    @classmethod
    def open(cls, path: str | Path, chunk_bytes: int = CHUNK_BYTES) -> FeatureFile:
        """Map a features file written by :func:`elical.generation.features.save_features` (nothing is read yet).

        Raises :class:`elical.records.InputError` for a file that is not a features file."""
        from elical.generation.features import load_features

        ids, data, meta = load_features(path, mmap=True)
        return cls(data, ids=ids, meta=meta, chunk_bytes=chunk_bytes)

    @property
    def shape(self) -> tuple[int, int]:
        n = self._data.shape[0] if self._rows is None else len(self._rows)
        return n, int(self._data.shape[1])

    ndim = 2
    dtype = np.dtype(np.float32)

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def chunk_rows(self) -> int:
        """Rows per read: ``chunk_bytes // (4 * n_features)``, at least 1."""
        return max(1, self.chunk_bytes // (4 * self.shape[1]))

    def __repr__(self) -> str:
        return f"FeatureFile(shape={self.shape}, chunk_rows={self.chunk_rows}, standardized={self._transform is not None})"

    def _positions(self, index) -> np.ndarray:
        """View positions (int64, 0 <= p < len) of ``index``: an int array (negatives count from the end), a
        boolean mask or a slice. Raises IndexError."""
        n = len(self)
        if isinstance(index, slice):
            return np.arange(n)[index]
        pos = np.asarray(index)
        if pos.dtype == bool:
            if pos.shape != (n,):
                raise IndexError(f"boolean mask of shape {pos.shape} for {n} rows")
            return np.flatnonzero(pos)
        if pos.ndim != 1 or (pos.size and not np.issubdtype(pos.dtype, np.integer)):
            raise IndexError(f"index must be 1-D integers, a boolean mask or a slice, got {pos.dtype} {pos.shape}")
        pos = pos.astype(np.int64)
        if pos.size and (pos.min() < -n or pos.max() >= n):
            raise IndexError(f"row index out of range for {n} rows")
        return np.where(pos < 0, pos + n, pos)

    def _file_rows(self, index) -> np.ndarray:
        pos = self._positions(index)
        return pos if self._rows is None else self._rows[pos]

    def __getitem__(self, index):
        if isinstance(index, (int, np.integer)):
            return self.take([index])[0]
        pos = self._positions(index)
        ids = None if self.ids is None else [self.ids[i] for i in pos]
        return FeatureFile(self._data, pos if self._rows is None else self._rows[pos], ids=ids, meta=self.meta,
                           chunk_bytes=self.chunk_bytes, _transform=self._transform)

    def standardized(self, mean, scale) -> FeatureFile:
        """The same rows read as ``(X - mean) / scale`` in float32 (the arithmetic of the in-memory probe)."""
        if self._transform is not None:
            raise ValueError("these features are standardised already")
        return FeatureFile(self._data, self._rows, ids=self.ids, meta=self.meta, chunk_bytes=self.chunk_bytes,
                           _transform=(np.asarray(mean).astype(np.float32), np.asarray(scale).astype(np.float32)))

    def _read(self, positions) -> tuple[np.ndarray, np.ndarray]:
        """``(buf, inv)``: the rows of ``positions`` (view positions) read in file order into ``buf`` (float32,
        standardised if this view is), ``buf[inv[j]]`` being the row of ``positions[j]``."""
        rows = self._file_rows(positions)
        order = np.argsort(rows, kind="stable")
        rows_sorted = rows[order]
        contiguous = rows_sorted.size and (np.diff(rows_sorted) == 1).all()
        buf = np.empty((rows_sorted.size, self.shape[1]), dtype=np.float32)
        # A page fault on a mapped file maps up to 64 KiB around it (fault-around) into the process: reading a
        # chunk's scattered rows at once would map most of the file. Sub-reads of 1/8 chunk (counting 64 KiB a
        # row), each followed by release(), bound that to 1/8 chunk. Ascending rows: sequential reads.
        mapped = getattr(self._data, "_mmap", None) is not None
        step = max(1, self.chunk_bytes // 8 // max(65536, 4 * self.shape[1])) if mapped else max(1, rows_sorted.size)
        for start in range(0, rows_sorted.size, step):
            part = rows_sorted[start:start + step]
            buf[start:start + step] = self._data[part[0]:part[-1] + 1] if contiguous else self._data[part]
            self.release()
        if self._transform is not None:
            buf -= self._transform[0]
            buf /= self._transform[1]
        inv = np.empty_like(order)
        inv[order] = np.arange(order.size)
        return buf, inv

    def take(self, positions=None) -> np.ndarray:
        """Rows ``positions`` (all by default) as float32 ndarray of shape (len(positions), d), in that order."""
        buf, inv = self._read(slice(None) if positions is None else positions)
        return buf if np.array_equal(inv, np.arange(inv.size)) else buf[inv]

    def chunks(self, file_order: bool = False) -> Iterator[np.ndarray]:
        """The view's rows, ``chunk_rows`` at a time, as float32 ndarrays: in view order, or in file order
        (``file_order=True``; for order-free passes such as sums)."""
        n, step = len(self), self.chunk_rows
        pos = np.arange(n) if not file_order or self._rows is None else np.argsort(self._rows, kind="stable")
        for start in range(0, n, step):
            yield self.take(pos[start:start + step])

    def release(self) -> None:
        """Drop the mapped pages from this process's resident memory (a no-op for an in-memory ``data``)."""
        mm = getattr(self._data, "_mmap", None)
        if mm is not None and hasattr(mm, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
            mm.madvise(mmap.MADV_DONTNEED)

    def __array__(self, dtype=None, copy=None):
        out = self.take()
        return out if dtype is None else out.astype(dtype)


def is_streamed(X) -> bool:
    """True for inputs that are read chunk by chunk: a ``np.memmap`` or a :class:`FeatureFile`."""
    return isinstance(X, (np.memmap, FeatureFile))


def check_features(X, name: str):
    """``X`` checked as a (n_samples, n_features) matrix of finite values: an in-memory float32 ndarray
    (:func:`elical.heads.validation._check_X`), or, for a memmap / :class:`FeatureFile`, a FeatureFile checked in
    one streaming pass. Raises ValueError naming ``name`` for a bad shape or a NaN / infinite value."""
    if not is_streamed(X):
        return _check_X(X, name)
    X = X if isinstance(X, FeatureFile) else FeatureFile(X)
    if 0 in X.shape:
        raise ValueError(f"{name} must be 2-D of shape (n_samples, n_features) with at least one sample and one "
                         f"feature, got shape {X.shape}")
    for chunk in X.chunks(file_order=True):
        if not np.isfinite(chunk).all():
            raise ValueError(f"{name} contains NaN or infinite values (or values too large for float32)")
    return X


def feature_scaler(X):
    """A fitted ``sklearn.preprocessing.StandardScaler`` of ``X`` (ndarray: one call; FeatureFile: ``partial_fit``
    chunk by chunk in file order, float64 accumulators). ``mean_``, ``scale_``: ndarray of shape (n_features,)."""
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler()
    if not isinstance(X, FeatureFile):
        return scaler.fit(X)
    # partial_fit makes two float64 copies of what it is given: an eighth of a chunk at a time keeps them small
    step = max(1, X.chunk_rows // 8)
    for chunk in X.chunks(file_order=True):
        for start in range(0, len(chunk), step):
            scaler.partial_fit(chunk[start:start + step])
    return scaler


def iter_batches(X, order: np.ndarray, batch_size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """``(idx, X[idx])`` for ``idx = order[s:s + batch_size]``, ``s = 0, batch_size, ...``: mini-batches in the
    given order. For a :class:`FeatureFile`, whole runs of consecutive batches (up to ``chunk_rows`` rows) are read
    at once, in file order; each batch holds the same rows, in the same order, as in memory."""
    n = len(order)
    if not isinstance(X, FeatureFile):
        for start in range(0, n, batch_size):
            idx = order[start:start + batch_size]
            yield idx, X[idx]
        return
    step = max(1, X.chunk_rows // batch_size) * batch_size
    for first in range(0, n, step):
        buf, inv = X._read(order[first:first + step])
        for start in range(0, len(inv), batch_size):
            yield order[first + start:first + start + batch_size], buf[inv[start:start + batch_size]]
        del buf, inv  # before the next read: one chunk held at a time


def map_chunks(X, fn, chunk_rows: int) -> Iterator:
    """``fn(rows)`` for consecutive row blocks of ``X``, in order, at most ``chunk_rows`` rows each (a FeatureFile's
    own ``chunk_rows`` if smaller). ``fn`` maps a float32 (m, d) ndarray to a per-row result of length m (ndarray or
    tensor). An ndarray's blocks are views; a :class:`FeatureFile`'s are read in file order, and ``fn``'s rows are
    put back in the view's order, so no block is held twice."""
    if not isinstance(X, FeatureFile):
        for start in range(0, X.shape[0], chunk_rows):
            yield fn(X[start:start + chunk_rows])
        return
    step = min(chunk_rows, X.chunk_rows)
    for start in range(0, len(X), step):
        buf, inv = X._read(np.arange(start, min(start + step, len(X))))
        out = fn(buf)
        del buf
        yield out if np.array_equal(inv, np.arange(inv.size)) else out[inv]
