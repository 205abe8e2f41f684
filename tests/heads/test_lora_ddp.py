"""Data-parallel training of the LoRA + linear head (elical.heads.distributed): the batch plan, the one-process
no-ops and, with the real SmolLM2 on real NQ questions, 2 processes x batch 4 against 1 process x batch 8.

The file is also the worker that ``accelerate launch`` starts (``python tests/heads/test_lora_ddp.py OUT ...``):
each process trains the same head on the same data, rank 0 saves it, every rank writes its own predictions.
"""

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from elical.heads.distributed import Replicas, local_device, main_process_first, replicas, step_batches

# 24 questions: 5 held out for early stopping (seeded; blocks of 2 and 3 per rank), 19 train: optimiser steps of
# 8, 8 and 3 prompts (with 2 x 4, rank 1 holds none of the last step's); 8 more only predicted
N_TRAIN, N_TEST = 24, 8


# ---------------------------------------------------------------------------------------------- the worker
def _targets(questions):
    """0.9 for "who" questions, 0.1 for the others: readable from the prompt, so training moves the validation
    loss below epoch 0's and the kept weights are trained ones (8 of the first 24 NQ questions ask "who")."""
    return np.array([0.9 if q["question"].startswith("who ") else 0.1 for q in questions], dtype=np.float64)


def _worker(out: str, data: str, batch_size: int, grad_accumulation: int) -> None:
    from elical.generation.base import build_prompt
    from elical.generation.models import load_model
    from elical.heads.lora import LoRAConfig, LoRAHead

    model, tok = load_model("smollm2-135m-instruct")
    lines = Path(data).read_text(encoding="utf-8").splitlines()[:N_TRAIN + N_TEST]
    questions = [json.loads(line) for line in lines]
    prompts = [build_prompt(tok, q["question"]) for q in questions]
    cfg = LoRAConfig(batch_size=batch_size, grad_accumulation=grad_accumulation, max_epochs=2, patience=2,
                     learning_rate=5e-4, head_learning_rate=5e-3, random_state=0)
    head = LoRAHead(model, tok, cfg, base_model="smollm2-135m-instruct")
    head.fit(prompts[:N_TRAIN], _targets(questions[:N_TRAIN]))
    head.save(Path(out) / "head")
    reps = replicas()
    result = {"rank": reps.rank, "world_size": reps.world_size, "predictions": head.predict(prompts).tolist(),
              "history": head.history_, "best_epoch": head.best_epoch_, "n_processes": head.n_processes_}
    (Path(out) / f"rank{reps.rank}.json").write_text(json.dumps(result), encoding="utf-8")


def _collectives(out: str) -> None:
    """Each helper of Replicas once, on rank-dependent inputs (no model): rank 0 holds 1 row and no gradient for
    the second parameter, rank 1 holds 2 rows and both gradients."""
    import torch

    reps = replicas()
    rows = reps.gather_rows(torch.arange(10.0 * reps.rank, 10.0 * reps.rank + 1 + reps.rank).reshape(-1, 1))
    params = [torch.nn.Parameter(torch.zeros(3)), torch.nn.Parameter(torch.zeros(2))]
    params[0].grad = torch.tensor([1.0, 2.0, 3.0]) * (reps.rank + 1)
    if reps.rank:
        params[1].grad = torch.tensor([5.0, 6.0])
    reps.sum_grads(params)
    weights = torch.nn.Parameter(torch.full((2,), float(reps.rank)))
    reps.broadcast_([weights])
    reps.check_same("data", ["a", "b"], np.arange(3.0))
    try:
        reps.check_same("data", ["a", f"b{reps.rank}"])
        error = None
    except ValueError as exc:
        error = str(exc)
    result = {"rows": rows.tolist(), "grads": [p.grad.tolist() for p in params], "weights": weights.tolist(),
              "error": error, "world_size": reps.world_size}
    (Path(out) / f"rank{reps.rank}.json").write_text(json.dumps(result), encoding="utf-8")


if __name__ == "__main__":
    if sys.argv[1] == "--collectives":
        _collectives(sys.argv[2])
    else:
        _worker(sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():  # no rank exits while its peer still talks to it
        dist.barrier()
        dist.destroy_process_group()
    sys.exit(0)


# ---------------------------------------------------------------------------------------------- fast tests
@pytest.mark.parametrize("n,b,a,w", [(19, 4, 1, 2), (19, 8, 1, 1), (23, 2, 3, 3), (5, 4, 1, 4), (16, 4, 2, 2)])
def test_step_batches_deal_each_step_disjointly_and_cover_the_epoch(n, b, a, w):
    order = list(np.random.default_rng(n).permutation(n))
    plans = [step_batches(order, b, a, r, w) for r in range(w)]
    assert len({len(p) for p in plans}) == 1  # every rank takes part in every optimiser step
    seen = []
    for s in range(len(plans[0])):
        sizes = {p[s][1] for p in plans}
        step = [i for p in plans for batch in p[s][0] for i in batch]
        assert sizes == {len(step)} and set(step) == set(order[s * b * a * w:(s + 1) * b * a * w])
        assert all(len(batch) <= b for p in plans for batch in p[s][0])
        seen += step
    assert sorted(seen) == sorted(order) and len(seen) == n


def test_one_process_plan_is_the_single_process_grouping():
    # consecutive batches of batch_size, grad_accumulation of them per step (LoRAHead before data parallelism)
    order = list(range(11))
    assert step_batches(order, 2, 2) == [([[0, 1], [2, 3]], 4), ([[4, 5], [6, 7]], 4), ([[8, 9], [10]], 3)]


def test_without_a_launcher_everything_is_one_process(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    reps = replicas()
    assert reps == Replicas() and reps.is_main and not reps.distributed
    assert list(reps.block(5)) == [0, 1, 2, 3, 4] and local_device("cuda") == "cuda"
    with main_process_first(reps):  # no barrier to wait at
        pass
    assert [list(Replicas(r, 3).block(7)) for r in range(3)] == [[0, 1], [2, 3], [4, 5, 6]]
    assert [list(Replicas(r, 4).block(2)) for r in range(4)] == [[], [0], [], [1]]  # some ranks get none
    with pytest.raises(ValueError, match="--device cuda"):
        local_device("auto", Replicas(0, 2))
    assert local_device("cuda", Replicas(1, 2, local_rank=1)) == "cuda:1"


def test_mixed_precision_is_checked_and_float32_on_a_cpu():
    from elical.heads.distributed import resolve_precision
    from elical.heads.lora import LoRAConfig

    assert LoRAConfig().mixed_precision == "auto" and resolve_precision("cpu", "auto") == "no"
    with pytest.raises(ValueError, match="mixed_precision"):
        LoRAConfig(mixed_precision="fp8")


# ---------------------------------------------------------------------------------------------- 2 processes
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(out: Path, data: Path | None, batch_size: int, processes: int) -> subprocess.Popen:
    """Start the worker (``data`` None: the collectives check): without a launcher for one process, under torchrun
    (gloo on the CPU) for several."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false",
           "HF_HUB_OFFLINE": "1"}
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(name, None)
    out.mkdir(parents=True, exist_ok=True)
    args = [__file__, str(out), str(data), str(batch_size), "1"] if data else [__file__, "--collectives", str(out)]
    if processes == 1:  # the plain one-process path
        cmd = [sys.executable, *args]
    else:  # as `torchrun --nproc_per_node 2 -m elical run ...` (`accelerate launch --cpu` needs mpirun for 2)
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(processes),
               "--master_addr", "127.0.0.1", "--master_port", str(_free_port()), *args]
    log = open(out.parent / f"{out.name}.log", "w")
    return subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)


def _results(proc: subprocess.Popen, out: Path, processes: int) -> list[dict]:
    assert proc.wait(timeout=1200) == 0, (out.parent / f"{out.name}.log").read_text()[-4000:]
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(processes)]


@pytest.mark.slow  # no model, but two torch processes: 36 s on 2 idle cores, over a minute on busy ones
def test_collectives_with_two_processes_on_gloo(tmp_path):
    ranks = _results(_launch(tmp_path / "c", None, 0, processes=2), tmp_path / "c", 2)
    for r in ranks:
        assert r["world_size"] == 2 and r["rows"] == [[0.0], [10.0], [11.0]]  # rank order, uneven blocks
        assert r["grads"] == [[3.0, 6.0, 9.0], [5.0, 6.0]]  # summed; a missing gradient counts as zeros
        assert r["weights"] == [0.0, 0.0]  # rank 0's
        assert "different data" in r["error"]  # both ranks refuse, neither hangs


@pytest.mark.slow
def test_two_processes_train_the_head_of_one_process_with_twice_the_batch(shared_data, tmp_path):
    """2 processes x 4 prompts per step (gloo, real SmolLM2, 24 real NQ questions, 2 epochs, holdout early stopping)
    against 1 process x 8 on the same data and seed. Measured: predictions within 1.2e-6, adapter weights within
    1.8e-6 (lora_B entries of about 1e-3), validation MSE within 3e-8; the difference is float rounding of batches
    of other shapes (with 1 process x 4 x 2 accumulated, the same forward passes, everything agrees bit for bit)."""
    from safetensors.torch import load_file

    data = shared_data / "honestybench-qa" / "nq" / "test.jsonl"
    out_two, out_one = tmp_path / "two", tmp_path / "one"
    procs = [_launch(out_two, data, 4, processes=2), _launch(out_one, data, 8, processes=1)]  # side by side
    try:
        two, (one,) = _results(procs[0], out_two, 2), _results(procs[1], out_one, 1)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()

    # the ranks agree bit for bit, and rank 0 alone wrote the head
    assert [r["world_size"] for r in two] == [2, 2] and two[0]["n_processes"] == 2 and one["n_processes"] == 1
    assert two[0]["predictions"] == two[1]["predictions"] and two[0]["history"] == two[1]["history"]
    assert sorted(p.name for p in (out_two / "head").iterdir()) == [
        "adapter_config.json", "adapter_model.safetensors", "head.json", "head.safetensors"]
    assert json.loads((out_two / "head" / "head.json").read_text())["fitted"]["n_processes_"] == 2

    # the same epochs, the same early-stopping decision (a trained epoch, not the initial weights), the same losses
    assert [h[0] for h in two[0]["history"]] == [h[0] for h in one["history"]] == [0, 1, 2]
    assert two[0]["best_epoch"] == one["best_epoch"] >= 1
    np.testing.assert_allclose(np.array([h[1:] for h in two[0]["history"]], dtype=float),
                               np.array([h[1:] for h in one["history"]], dtype=float), rtol=1e-4)
    np.testing.assert_allclose(two[0]["predictions"], one["predictions"], atol=1e-4, rtol=0)
    for name in ("adapter_model.safetensors", "head.safetensors"):
        a, b = load_file(str(out_two / "head" / name)), load_file(str(out_one / "head" / name))
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_allclose(a[key].numpy(), b[key].numpy(), atol=1e-4, rtol=0, err_msg=key)
