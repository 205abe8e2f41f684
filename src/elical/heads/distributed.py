"""Data-parallel training of the LoRA + linear head over several processes (one model replica each).

The paper trains its LoRA + head on 560k questions with a 7B model on 4 GPUs (accelerate, effective batch 512,
bf16; Ni et al., arXiv 2510.17509, App.). Started by ``accelerate launch`` or ``torchrun`` (which set ``RANK``,
``WORLD_SIZE``, ``LOCAL_RANK``), :class:`elical.heads.lora.LoRAHead` trains data-parallel: every process draws
the same seeded permutation of the training prompts each epoch and takes a disjoint share of each optimiser
step's prompts (:func:`step_batches`); the gradients of the trainable weights are summed over the processes once
per optimiser step, every loss being divided by the number of prompts of the *whole* step, so a step of W
processes x b prompts makes the optimiser step of one process with W x b prompts (up to float rounding). The
standardisation statistics and the validation predictions are computed on disjoint blocks and gathered, so early
stopping, cross-validation and the kept checkpoint are decided on identical numbers on every process.

Why not ``Accelerator.prepare`` / ``DistributedDataParallel``: several heads share one base model, each with its
own named adapter that exists only while the head does (the cross-validation folds add and remove theirs), and a
process may hold no prompt in the last, partial step. DDP fixes its parameters when it wraps the model and needs a
forward pass on every process per step; one explicit all-reduce of the flattened gradients per optimiser step is
what DDP does under ``no_sync`` gradient accumulation, without those constraints. accelerate's ``PartialState``
sets up the process group (NCCL on GPUs, gloo on CPUs).

Without a launcher (``WORLD_SIZE`` unset or 1 and no process group), everything here is a no-op and nothing of
accelerate or ``torch.distributed`` is touched: one process trains exactly as before.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np

__all__ = ["Replicas", "replicas", "local_device", "main_process_first", "resolve_precision", "training_autocast",
           "step_batches", "DEFAULT_TIMEOUT_S"]

#: Seconds a process waits in a collective (e.g. the other ranks while rank 0 annotates in ``elical run``)
#: before the process group gives up; the environment variable ``ELICAL_DIST_TIMEOUT_S`` overrides it.
DEFAULT_TIMEOUT_S = 6 * 3600


@dataclass(frozen=True)
class Replicas:
    """The processes of a data-parallel run, as seen from one of them: ``rank`` in ``[0, world_size)``,
    ``local_rank`` its index on this machine (its GPU). ``world_size == 1``: one process, every method a no-op."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that writes files."""
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1

    def block(self, n: int) -> range:
        """This rank's contiguous block of ``range(n)``; the blocks of ranks 0, 1, ... tile it in order (sizes
        differ by at most one; a rank may get none when n < world_size)."""
        return range(n * self.rank // self.world_size, n * (self.rank + 1) // self.world_size)

    def sum_(self, tensor):
        """All-reduce ``tensor`` in place to its sum over the processes (every process gets the same bits);
        returns it."""
        if self.distributed:
            import torch.distributed as dist

            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
        return tensor

    def sum_grads(self, params: Sequence) -> None:
        """Sum the ``.grad`` of ``params`` over the processes, in one flattened all-reduce; a parameter without a
        gradient on this process (no prompt in this step) counts as zeros, and every one has a ``.grad`` after."""
        if not self.distributed or not params:
            return
        import torch

        flat = torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1) for p in params])
        self.sum_(flat)
        offset = 0
        for p in params:
            p.grad = flat[offset:offset + p.numel()].view_as(p).clone()
            offset += p.numel()

    def broadcast_(self, tensors: Sequence) -> None:
        """Overwrite ``tensors`` (parameters included) in place with rank 0's values."""
        if not self.distributed:
            return
        import torch
        import torch.distributed as dist

        with torch.no_grad():
            for t in tensors:
                buf = t.detach().contiguous()
                dist.broadcast(buf, src=0)
                if buf.data_ptr() != t.data_ptr():
                    t.detach().copy_(buf)

    def gather_rows(self, rows):
        """Concatenate every rank's ``rows`` (tensor of shape (m_rank, ...), same trailing shape and dtype on every
        rank, m_rank may differ and be 0) in rank order; every rank gets the same tensor of shape (sum m, ...)."""
        if not self.distributed:
            return rows
        import torch
        import torch.distributed as dist

        counts = [torch.zeros(1, dtype=torch.int64, device=rows.device) for _ in range(self.world_size)]
        dist.all_gather(counts, torch.tensor([rows.shape[0]], dtype=torch.int64, device=rows.device))
        counts = [int(c.item()) for c in counts]
        padded = rows.new_zeros((max(counts), *rows.shape[1:]))
        padded[:rows.shape[0]] = rows
        parts = [torch.empty_like(padded) for _ in range(self.world_size)]
        dist.all_gather(parts, padded)
        return torch.cat([part[:c] for part, c in zip(parts, counts)])

    def check_same(self, what: str, *values, device="cpu") -> None:
        """Raise ValueError unless ``values`` (ndarrays, or sequences of strings) are equal on every rank (compared
        by a SHA-1 digest): data parallelism needs every process to be given the same training data."""
        if not self.distributed:
            return
        import torch
        import torch.distributed as dist

        sha = hashlib.sha1()
        for value in values:
            if isinstance(value, np.ndarray):
                sha.update(f"{value.dtype}{value.shape}".encode())
                sha.update(np.ascontiguousarray(value).tobytes())
            else:
                for item in value:
                    sha.update(str(item).encode("utf-8") + b"\0")
            sha.update(b"\1")
        mine = torch.tensor([int.from_bytes(sha.digest()[:7], "little")], dtype=torch.int64, device=device)
        every = [torch.zeros_like(mine) for _ in range(self.world_size)]
        dist.all_gather(every, mine)
        if len({int(t.item()) for t in every}) != 1:
            raise ValueError(f"the {self.world_size} processes were given different {what}; every process of a "
                             "data-parallel run must call fit with the same data (each trains on its own share)")

    def barrier(self) -> None:
        if self.distributed:
            import torch.distributed as dist

            dist.barrier()


def replicas() -> Replicas:
    """The current data-parallel setting. An initialised ``torch.distributed`` process group is used as it is;
    otherwise, under ``accelerate launch`` / ``torchrun`` with ``WORLD_SIZE`` > 1, accelerate's ``PartialState``
    creates one (NCCL when CUDA is available and ``--cpu`` was not given, else gloo) with a timeout of
    ``ELICAL_DIST_TIMEOUT_S`` seconds (default :data:`DEFAULT_TIMEOUT_S`); otherwise one process."""
    world = int(os.environ.get("WORLD_SIZE", "1") or 1)
    dist = sys.modules.get("torch.distributed")  # never imports torch on the one-process path
    if dist is not None and dist.is_available() and dist.is_initialized():
        return Replicas(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0) or 0))
    if world <= 1:
        return Replicas()
    from datetime import timedelta

    import torch

    from elical.extras import require

    PartialState = require("accelerate", "distributed", "several processes (accelerate launch / torchrun)").PartialState

    cpu = os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes") or not torch.cuda.is_available()
    timeout = timedelta(seconds=float(os.environ.get("ELICAL_DIST_TIMEOUT_S", DEFAULT_TIMEOUT_S)))
    state = PartialState(cpu=cpu, timeout=timeout)
    return Replicas(state.process_index, state.num_processes, state.local_process_index)


def local_device(device: str, reps: Replicas | None = None) -> str:
    """The device of this process's model replica: ``"cuda"`` becomes ``"cuda:<local_rank>"`` under a launcher
    with several processes (one GPU each); other devices are returned as they are. Raises ValueError for
    ``"auto"`` (one model spread over several GPUs) with several processes: data parallelism keeps one whole
    replica per process."""
    reps = reps if reps is not None else replicas()
    if not reps.distributed:
        return device
    if device == "auto":
        raise ValueError("device 'auto' spreads one model over every GPU; with several processes (accelerate "
                         "launch / torchrun) each process holds a whole replica: use --device cuda")
    return f"cuda:{reps.local_rank}" if device == "cuda" else device


@contextlib.contextmanager
def main_process_first(reps: Replicas | None = None):
    """Run the block on rank 0 first; the other ranks wait at a barrier and run it after rank 0 has left it
    (e.g. they then find rank 0's finished annotation on disk instead of generating again). One process: no-op."""
    reps = reps if reps is not None else replicas()
    if not reps.is_main:
        reps.barrier()
    yield
    if reps.is_main:
        reps.barrier()


def resolve_precision(device, mixed_precision: str) -> str:
    """``"bf16"`` or ``"no"``: ``"auto"`` means bf16 on a CUDA device that supports it, full float32 elsewhere."""
    import torch

    if mixed_precision != "auto":
        return mixed_precision
    dev = torch.device(device)
    return "bf16" if dev.type == "cuda" and torch.cuda.is_bf16_supported() else "no"


def training_autocast(device, mixed_precision: str):
    """A context manager for the training forward passes: ``torch.autocast`` to bfloat16 when
    :func:`resolve_precision` says ``"bf16"`` (weights, gradients and optimiser stay float32, as accelerate's and
    the transformers Trainer's ``bf16``), else a no-op."""
    import torch

    if resolve_precision(device, mixed_precision) == "no":
        return contextlib.nullcontext()
    return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)


def step_batches(order: Sequence[int], batch_size: int, grad_accumulation: int, rank: int = 0,
                 world_size: int = 1) -> list[tuple[list[list[int]], int]]:
    """One epoch's optimiser steps as seen by ``rank``: ``[(micro_batches, step_size), ...]``.

    Each step takes the next ``batch_size * grad_accumulation * world_size`` indices of ``order`` (the last step
    fewer), cuts them into micro-batches of ``batch_size`` (one forward pass each) and deals micro-batch j to rank
    ``j % world_size``; ``step_size`` is the number of indices in the whole step (every rank divides its loss by
    it). The ranks' micro-batches are disjoint and together cover ``order``. With one process this is today's
    single-process grouping: consecutive batches of ``batch_size``, ``grad_accumulation`` per step.
    """
    per_step = batch_size * grad_accumulation * world_size
    steps = []
    for start in range(0, len(order), per_step):
        chunk = list(order[start:start + per_step])
        micro = [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
        steps.append((micro[rank::world_size], len(chunk)))
    return steps
