"""The dense matmul rate every benchmark prints beside its absolute times (machines differ: torch's 2048^2 fp32
matmul runs at 70 GFLOP/s on one 2-core machine and 228 on another), so a time can be read against the machine.

Imported by the benchmark scripts as a sibling module (``python benchmarks/<script>.py`` puts this folder on
``sys.path``)."""

from __future__ import annotations

import time


def matmul_gflops(n: int = 2048, reps: int = 4, trials: int = 3, device: str = "cpu", dtype=None) -> float:
    """GFLOP/s of torch's n x n matmul on ``device`` in ``dtype`` (default float32) with this process's thread
    count: the best of ``trials`` timings of ``reps`` products (synchronised on a GPU)."""
    import torch

    dtype = dtype or torch.float32
    gen = torch.Generator(device=device).manual_seed(0)
    a = torch.randn(n, n, generator=gen, device=device).to(dtype)
    b = torch.randn(n, n, generator=gen, device=device).to(dtype)
    sync = torch.cuda.synchronize if str(device).startswith("cuda") else (lambda: None)
    a @ b
    sync()
    best = float("inf")
    for _ in range(trials):
        t = time.perf_counter()
        for _ in range(reps):
            a @ b
        sync()
        best = min(best, time.perf_counter() - t)
    return 2 * n ** 3 * reps / best / 1e9
