"""Wall time of `elical run` for two source trees, side by side: both runs start together, one core each, so the
machine's load is the same for both and the ratio is fair. Prints each run's stage timings (results.json) and
torch's 2048^2 fp32 matmul rate on one core, measured in the same process before the runs.

Usage (the commit before a change in a worktree, this checkout as the new one):

    git worktree add /tmp/elical-old <commit>
    python benchmarks/run_walltime.py --old /tmp/elical-old/src --new src --output /tmp/walltime [--preset default]

Each run is `python -m elical.cli run --preset P --output OUT/<old|new> --quiet` with PYTHONPATH set to the tree, so
both use this environment's packages. Writes OUT/walltime.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from matmul_rate import matmul_gflops


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True, help="src directory of the old tree (holds elical/)")
    ap.add_argument("--new", required=True, help="src directory of the new tree")
    ap.add_argument("--output", required=True, help="directory for the two run directories and walltime.json")
    ap.add_argument("--preset", default="default")
    args = ap.parse_args()
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    import torch

    torch.set_num_threads(1)
    rate = matmul_gflops(trials=5)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    procs, starts = {}, {}
    for name, src in (("old", args.old), ("new", args.new)):
        cmd = [sys.executable, "-c", "import torch, sys; torch.set_num_threads(1); from elical.cli import main; "
               "sys.exit(main(sys.argv[1:]))", "run", "--preset", args.preset, "--output", str(out / name),
               "--quiet"]
        starts[name] = time.perf_counter()
        procs[name] = subprocess.Popen(cmd, env={**env, "PYTHONPATH": str(Path(src).resolve())},
                                       stdout=subprocess.DEVNULL, stderr=open(out / f"{name}.log", "w"))
    report = {"preset": args.preset, "matmul_gflops_1_thread": round(rate, 1), "runs": {}}
    ends = {}
    while len(ends) < len(procs):  # each run's own end, whichever finishes first
        for name, p in procs.items():
            if name not in ends and p.poll() is not None:
                ends[name] = time.perf_counter()
        time.sleep(1.0)
    for name, p in procs.items():
        rc = p.returncode
        wall = ends[name] - starts[name]
        res = json.loads((out / name / "results.json").read_text()) if rc == 0 else {}
        report["runs"][name] = {"returncode": rc, "wall_s": round(wall, 1),
                                "timings": {k: round(v, 1) for k, v in res.get("timings", {}).items()}}
    if all(r["returncode"] == 0 for r in report["runs"].values()):
        report["new_over_old"] = round(report["runs"]["new"]["wall_s"] / report["runs"]["old"]["wall_s"], 3)
    (out / "walltime.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
