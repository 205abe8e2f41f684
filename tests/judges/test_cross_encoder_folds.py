"""benchmarks/judge_cross_encoder.py's saved folds: a fold is only read back against the rows it was saved for."""

import json
from pathlib import Path

import numpy as np
import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "judge_cross_encoder.py"


@pytest.fixture(scope="module")
def script(load_script):
    return load_script(SCRIPT)


def _rows(*texts):
    return [{"question": "Q?", "a": t, "b": "x"} for t in texts]


def test_fold_reads_back_against_its_rows(script, tmp_path):
    rows = _rows("one", "two", "three")
    fold = np.array([[2, 0], [0.9, 0.1], [0.8, 0.2], [0.7, 0.3]])
    np.save(tmp_path / "fold0.npy", fold)
    (tmp_path / "fold0.keys.json").write_text(json.dumps(script.row_keys([rows[2], rows[0]])))
    assert np.array_equal(script.load_fold(tmp_path / "fold0.npy", rows), fold)
    # the sets changed: a row inserted before them moves every index by one
    with pytest.raises(SystemExit, match="fold0.npy: saved for other labelled rows.*--folds 0"):
        script.load_fold(tmp_path / "fold0.npy", _rows("new", "one", "two", "three"))
    # fewer rows than the fold indexes
    with pytest.raises(SystemExit, match="re-run it"):
        script.load_fold(tmp_path / "fold0.npy", rows[:2])


def test_fold_without_keys_is_refused(script, tmp_path):
    np.save(tmp_path / "fold3.npy", np.array([[0.0], [0.5], [0.5], [0.5]]))
    with pytest.raises(SystemExit, match="no fold3.keys.json.*--folds 3"):
        script.load_fold(tmp_path / "fold3.npy", _rows("one"))


def test_row_keys_tell_rows_apart(script):
    keys = script.row_keys(_rows("one", "two") + [{"question": "Q2?", "a": "one", "b": "x"}])
    assert len(set(keys)) == 3 and all(len(k) == 12 for k in keys)
