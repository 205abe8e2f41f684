"""Seconds to fit a linear probe head (elical.heads.probe.ProbeHead) on 100,000 questions' hidden states.

Features are random float32 rows of 576 (SmolLM2-135M) and 3,584 (Qwen2.5-7B) dimensions; the target is a noisy
logistic function of a few directions, so early stopping behaves as on real self-consistency targets. The fit is
the full Eli-Only fit: standardisation, a seeded 20 % validation split, AdamW with warm-up, early stopping
(patience 10, at most 200 epochs), batch size 1024. Target: under 60 s for 576 features on 2 CPU cores.

    python benchmarks/head_training.py                    # 100k x 576 and 100k x 3584
    python benchmarks/head_training.py --dims 576 --n 20000
    python benchmarks/head_training.py --mmap --dims 3584    # from a features file: in memory vs memory-mapped

``--mmap`` writes the features to a safetensors file in a temporary directory (``elical.generation.features.
save_features``) and fits the head twice, each in a fresh process: on ``load_features(path)`` (the matrix in
memory) and on ``load_features(path, mmap=True)`` (read chunk by chunk, ``elical.heads.streaming``). It prints
wall time, CPU time (the fairer number on a shared machine), peak resident memory of each process (VmHWM, else ``ru_maxrss``; mapped file pages are released after
each chunk, so they do not count) and the largest difference between the two heads' predictions.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from matmul_rate import matmul_gflops


def make_data(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d), dtype=np.float32)
    X *= rng.uniform(0.5, 5.0, d).astype(np.float32)  # hidden states have very unequal scales
    w = np.zeros(d, dtype=np.float32)
    w[:8] = rng.standard_normal(8) / 2
    logits = (X @ w) / X[:, :8].std(axis=0).mean() + rng.standard_normal(n).astype(np.float32) * 0.5
    y = 1.0 / (1.0 + np.exp(-logits))
    return X, y.astype(np.float32)


def _peak_mib() -> float:
    """Peak resident memory of this process in MiB: VmHWM (Linux; reset by exec, unlike ru_maxrss, which a child
    inherits from the parent it was forked from), else ru_maxrss."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB elsewhere
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def _child(mode: str, path: str, targets: str, head_dir: str, args) -> None:
    """One fit in this fresh process: prints a JSON line with seconds and peak resident memory."""
    import numpy as np

    from elical.generation.features import load_features
    from elical.heads.probe import ProbeHead

    before = _peak_mib()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    cpu0 = usage.ru_utime + usage.ru_stime
    y = np.load(targets)
    t0 = time.perf_counter()
    _, X, _ = load_features(path, mmap=mode == "mmap")
    head = ProbeHead(kind="linear", batch_size=args.batch_size, max_epochs=args.max_epochs, random_state=args.seed)
    head.fit(X, y)
    seconds = time.perf_counter() - t0
    pred = head.predict(X)
    np.save(Path(head_dir) / f"pred-{mode}.npy", pred)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    print(json.dumps({"seconds": seconds, "cpu_s": usage.ru_utime + usage.ru_stime - cpu0, "peak_mib": _peak_mib(),
                      "before_mib": before, "epochs": head.n_epochs_,
                      "best_epoch": head.best_epoch_, "val_mse": head.best_val_loss_}))


def _mmap_benchmark(args, d: int) -> None:
    """Write n x d features to a file, then fit in memory and memory-mapped, each in its own process."""
    import numpy as np

    from elical.generation.features import save_features

    with tempfile.TemporaryDirectory(prefix="elical-head-bench-") as tmp:
        path, targets = os.path.join(tmp, "features.safetensors"), os.path.join(tmp, "y.npy")
        X, y = make_data(args.n, d, args.seed)
        save_features(path, [f"q{i}" for i in range(args.n)], X)
        np.save(targets, y)
        del X
        size = os.path.getsize(path) / 2**30
        print(f"features file: {args.n:,} x {d:,} float32 = {size:.2f} GiB (written just now: in the page cache)")
        results = {}
        for mode in ("memory", "mmap"):
            cmd = [sys.executable, __file__, "--_child", mode, path, targets, tmp, "--batch-size", str(args.batch_size),
                   "--max-epochs", str(args.max_epochs), "--seed", str(args.seed)]
            out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
            r = results[mode] = json.loads(out.strip().splitlines()[-1])
            label = "in memory      " if mode == "memory" else "memory-mapped  "
            print(f"{label}: {r['seconds']:.1f} s wall, {r['cpu_s']:.1f} s CPU ({r['epochs']} epochs, "
                  f"{r['cpu_s'] / max(r['epochs'], 1):.2f} CPU s/epoch, best epoch {r['best_epoch']}, validation MSE {r['val_mse']:.4f}); peak RSS "
                  f"{r['peak_mib']:,.0f} MiB ({r['before_mib']:,.0f} MiB after imports); load average "
                  f"{os.getloadavg()[0]:.1f}")
        diff = np.abs(np.load(os.path.join(tmp, "pred-memory.npy")) - np.load(os.path.join(tmp, "pred-mmap.npy")))
        print(f"largest difference between the two heads' predictions: {diff.max():.2e}")


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--_child":
        mode, path, targets, head_dir = sys.argv[2:6]
        p = argparse.ArgumentParser()
        for flag, default in (("--batch-size", 1024), ("--max-epochs", 200), ("--seed", 0)):
            p.add_argument(flag, type=int, default=default)
        return _child(mode, path, targets, head_dir, p.parse_args(sys.argv[6:]))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=100_000, help="questions (rows)")
    p.add_argument("--dims", default="576,3584", help="comma-separated feature sizes")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--max-epochs", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mmap", action="store_true", help="train from a features file: in memory vs memory-mapped")
    args = p.parse_args()

    import torch

    from elical.heads.probe import ProbeHead

    print(f"cores {os.cpu_count()}, torch threads {torch.get_num_threads()}, "
          f"load average before {os.getloadavg()[0]:.1f}")
    print(f"dense matmul (torch): {matmul_gflops():.1f} GFLOP/s (2048 x 2048 fp32, best timing)")
    for d in (int(v) for v in args.dims.split(",")):
        if args.mmap:
            _mmap_benchmark(args, d)
            continue
        X, y = make_data(args.n, d, args.seed)
        head = ProbeHead(kind="linear", batch_size=args.batch_size, max_epochs=args.max_epochs,
                         random_state=args.seed)
        t0 = time.perf_counter()
        head.fit(X, y)
        seconds = time.perf_counter() - t0
        print(f"linear probe, {args.n:,} x {d:,} features: {seconds:.1f} s "
              f"({head.n_epochs_} epochs, {seconds / max(head.n_epochs_, 1):.2f} s/epoch, best epoch "
              f"{head.best_epoch_}, validation MSE {head.best_val_loss_:.4f}); load average now "
              f"{os.getloadavg()[0]:.1f}")
        del X, y


if __name__ == "__main__":
    main()
