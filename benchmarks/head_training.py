"""Seconds to fit a linear probe head (elical.heads.probe.ProbeHead) on 100,000 questions' hidden states.

Features are random float32 rows of 576 (SmolLM2-135M) and 3,584 (Qwen2.5-7B) dimensions; the target is a noisy
logistic function of a few directions, so early stopping behaves as on real self-consistency targets. The fit is
the full Eli-Only fit: standardisation, a seeded 20 % validation split, AdamW with warm-up, early stopping
(patience 10, at most 200 epochs), batch size 1024. Target: under 60 s for 576 features on 2 CPU cores.

    python benchmarks/head_training.py                    # 100k x 576 and 100k x 3584
    python benchmarks/head_training.py --dims 576 --n 20000
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


def make_data(n: int, d: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d), dtype=np.float32)
    X *= rng.uniform(0.5, 5.0, d).astype(np.float32)  # hidden states have very unequal scales
    w = np.zeros(d, dtype=np.float32)
    w[:8] = rng.standard_normal(8) / 2
    logits = (X @ w) / X[:, :8].std(axis=0).mean() + rng.standard_normal(n).astype(np.float32) * 0.5
    y = 1.0 / (1.0 + np.exp(-logits))
    return X, y.astype(np.float32)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=100_000, help="questions (rows)")
    p.add_argument("--dims", default="576,3584", help="comma-separated feature sizes")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--max-epochs", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    import torch

    from elical.heads.probe import ProbeHead

    print(f"cores {os.cpu_count()}, torch threads {torch.get_num_threads()}, "
          f"load average before {os.getloadavg()[0]:.1f}")
    for d in (int(v) for v in args.dims.split(",")):
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
