"""The run as a list of stages, and the one fingerprint/resume helper of ``elical run``.

A :class:`Stage` declares what it reads and writes (names of the shared :class:`RunState`), when it runs and
which ranks run it; :func:`run_stages` runs them in order, times each, and checks the declarations (a stage may
read only what an earlier stage wrote or the state started with). :func:`resume_stage` is the resume rule: a
stage's saved output is reused exactly when the fingerprint of its inputs (derived from what it reads: record
fields, configuration values, files) equals the one recorded in ``stages.json`` when it was written.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Callable

from elical.records import write_json_atomic

__all__ = ["Stage", "RunState", "run_stages", "stage_fingerprint", "resume_stage", "MANIFEST"]

#: The file of a run directory that records each resumable stage's input fingerprint.
MANIFEST = "stages.json"


class RunState(SimpleNamespace):
    """What the stages share: the configuration, the run directory and each stage's outputs, by name."""


@dataclass(frozen=True)
class Stage:
    """One stage of the run. ``fn(state)`` returns {name: value} for every name of ``writes``; ``reads``: the
    state names it uses; ``when(state)``: whether it runs (default always); ``all_ranks``: whether every rank of
    a distributed run runs it (default rank 0 only; the others wait at the barrier); ``timing``: the key of its
    wall time in results.json."""

    name: str
    fn: Callable[[RunState], dict]
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    timing: str | None = None
    when: Callable[[RunState], bool] | None = None
    all_ranks: bool = False


def run_stages(stages: list[Stage], state: RunState, is_main: bool = True) -> RunState:
    """Run ``stages`` in order on ``state``; ``state.timings`` gets each timed stage's seconds. A stage that does
    not run (``when`` false, or not this rank's) sets its ``writes`` to None. Raises RuntimeError when a stage
    reads a name nothing before it provides or returns other names than it declared (a programming error)."""
    known = set(vars(state))
    for stage in stages:
        missing = [r for r in stage.reads if r not in known]
        if missing:
            raise RuntimeError(f"stage {stage.name!r} reads {missing}, which no earlier stage writes")
        active = (is_main or stage.all_ranks) and (stage.when is None or stage.when(state))
        t0 = time.time()
        out = stage.fn(state) if active else dict.fromkeys(stage.writes)
        if set(out) != set(stage.writes):
            raise RuntimeError(f"stage {stage.name!r} wrote {sorted(out)}, declared {sorted(stage.writes)}")
        for key, value in out.items():
            setattr(state, key, value)
        known |= set(stage.writes)
        if active and stage.timing:
            state.timings[stage.timing] = time.time() - t0
    return state


def stage_fingerprint(inputs) -> str:
    """SHA-1 hex digest of a stage's inputs (anything JSON can write; keys sorted, other objects by ``str``)."""
    return hashlib.sha1(json.dumps(inputs, sort_keys=True, default=str).encode("utf-8")).hexdigest()


def resume_stage(run_dir: Path, name: str, inputs, *, load: Callable, compute: Callable, save: Callable,
                 legacy: bool = False):
    """The output of stage ``name``: ``load()`` when ``stages.json`` records the fingerprint of ``inputs`` for it
    (and ``load`` returns something other than None), else ``compute()``, then ``save(output)`` and the new
    fingerprint recorded. ``legacy``: a directory written before ``stages.json`` existed (no entry for the
    stage) may reuse what ``load`` returns (``load`` checks it), and the fingerprint is recorded then."""
    path = Path(run_dir) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        manifest = {}
    fingerprint = stage_fingerprint(inputs)
    if manifest.get(name) == fingerprint or (legacy and name not in manifest):
        out = load()
        if out is not None:
            if manifest.get(name) != fingerprint:
                write_json_atomic(path, {**manifest, name: fingerprint})
            return out
    out = compute()
    save(out)
    write_json_atomic(path, {**manifest, name: fingerprint})
    return out
