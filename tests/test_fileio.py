"""elical.fileio: the one atomic, fsynced write every writer uses."""

import os

import pytest

from elical import fileio
from elical.fileio import atomic_path, write_text_atomic


def test_writes_replaces_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "sub" / "a.json"
    write_text_atomic(target, "one\n")
    write_text_atomic(target, "two ü\n")
    assert target.read_bytes() == "two ü\n".encode("utf-8")
    assert sorted(p.name for p in target.parent.iterdir()) == ["a.json"]


def test_an_error_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "a.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("killed while writing")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["a.txt"]


def test_no_overwrite_refuses_an_existing_file(tmp_path):
    target = tmp_path / "out.jsonl"
    write_text_atomic(target, "first\n", overwrite=False)
    with pytest.raises(FileExistsError):
        write_text_atomic(target, "second\n", overwrite=False)
    assert target.read_text() == "first\n" and len(list(tmp_path.iterdir())) == 1


def test_the_file_and_its_directory_are_fsynced_before_and_after_the_rename(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else fd))
        real_fsync(fd)

    def replace(a, b):
        events.append(("replace", str(b)))
        real_replace(a, b)

    monkeypatch.setattr(fileio.os, "fsync", fsync)
    monkeypatch.setattr(fileio.os, "replace", replace)
    target = tmp_path / "r.json"
    write_text_atomic(target, "{}")
    kinds = [e[0] for e in events]
    assert kinds == ["fsync", "replace", "fsync"]
    if os.path.exists("/proc/self/fd"):
        assert events[0][1].endswith(".tmp") and events[2][1] == str(tmp_path)
