"""Record the real SmolLM2 run behind tests/data/smoke_run/ (run once; about a minute on 2 CPU cores).

    python tests/data/make_smoke_run.py

Runs `elical run` with SMOKE_RUN_CONFIG (the smoke preset on 32 pool and 16 evaluation `facts` questions, no
model-based estimators) and keeps what the tests need to train heads and compute estimators without generating:
config.json, records/annotations.jsonl and features/hidden_states.safetensors. The tests that read it
(tests/test_sweep.py, tests/test_estimators.py) resume the copy with the same configuration, so the heads, estimators
and metrics are always those of the current code; only the model's answers and hidden states are recorded.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

HERE = Path(__file__).resolve().parent
TARGET = HERE / "smoke_run"


def smoke_run_config():
    """The configuration of the recorded run (also what a test passes to resume its copy)."""
    from elical.jobs.run import PRESETS

    return replace(PRESETS["smoke"], n_train=32, n_eval=16, k_values=(8,), n_bootstrap=1, model_estimators=False)


def main() -> None:
    from elical.jobs.run import run

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        run(smoke_run_config(), out, progress=True)
        if TARGET.exists():
            shutil.rmtree(TARGET)
        for rel in ("config.json", "records/annotations.jsonl", "features/hidden_states.safetensors"):
            (TARGET / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(out / rel, TARGET / rel)
    print(f"recorded {TARGET}", file=sys.stderr)


if __name__ == "__main__":
    main()
