"""vLLM engine options on the command line: ``--tensor-parallel-size`` and repeated ``--vllm-arg key=value`` reach
``vllm.LLM`` unchanged (a stand-in ``vllm`` module records its keyword arguments, since vLLM needs a GPU), bad
values stop ``elical build`` / ``elical run`` with exit code 2 and a message naming the option before anything is
written, and ``--shard i/n`` builds with the vllm backend merge into the complete set of records."""
from __future__ import annotations

import dataclasses
import json
import sys
import types
from typing import Literal, Optional

import pytest

from elical.cli import _config_from_args, _parser, main
from elical.generation.backends import check_vllm_options, parse_vllm_args
from elical.jobs.build import BuildConfig, plan_units, shard_part
from elical.records import InputError, read_records

BUILD = ["build", "--datasets", "facts", "--split", "test", "--limit", "6", "--n-samples", "2",
         "--max-new-tokens", "6", "--batch-size", "2", "--backend", "vllm", "--quiet"]


@dataclasses.dataclass
class EngineArgs:
    """The shape of vllm.EngineArgs: a dataclass whose (string) annotations give each option's type."""

    model: str = ""
    tensor_parallel_size: int = 1
    data_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    max_model_len: Optional[int] = None
    enforce_eager: bool = False
    dtype: Literal["auto", "half", "bfloat16", "float32"] = "auto"
    enable_prefix_caching: Optional[bool] = None
    compilation_config: Optional[dict] = None
    seed: int | None = 0


def _fake_vllm(tokenizer=None):
    """A ``vllm`` module: LLM records its keyword arguments and answers "Paris" (+ newline) to every request."""
    created = []

    class SamplingParams:
        def __init__(self, **kw):
            self.__dict__.update(kw)

    class LLM:
        def __init__(self, model, tokenizer=None, tensor_parallel_size: int = 1, dtype: str = "auto",
                     seed: int = 0, gpu_memory_utilization: float = 0.9, **kwargs):
            self.kwargs = dict(model=model, tensor_parallel_size=tensor_parallel_size, dtype=dtype, seed=seed,
                               gpu_memory_utilization=gpu_memory_utilization, **kwargs)
            created.append(self)

        def get_tokenizer(self):
            return tokenizer

        def generate(self, prompts, params, use_tqdm=True):
            ids = tokenizer("Paris", add_special_tokens=False)["input_ids"]
            stop = tokenizer.encode("\n", add_special_tokens=False)[0]

            def one():
                toks = list(ids) + [stop]
                return types.SimpleNamespace(text="Paris", token_ids=toks, logprobs=[
                    {t: types.SimpleNamespace(logprob=-0.25)} for t in toks])

            return [types.SimpleNamespace(outputs=[one() for _ in range(sp.n)]) for sp in params]

    module = types.ModuleType("vllm")
    module.LLM, module.SamplingParams, module.EngineArgs = LLM, SamplingParams, EngineArgs
    return module, created


def test_parse_vllm_args_values_by_hand():
    got = parse_vllm_args(["gpu-memory-utilization=0.85", "max_model_len=4096", "enforce_eager=true",
                           "dtype=bfloat16", "seed=none", 'compilation_config={"level": 3}', "quantization=fp8",
                           "swap_space=-2", "kv_cache_dtype="], tensor_parallel_size=4)
    assert got == {"tensor_parallel_size": 4, "gpu_memory_utilization": 0.85, "max_model_len": 4096,
                   "enforce_eager": True, "dtype": "bfloat16", "seed": None, "compilation_config": {"level": 3},
                   "quantization": "fp8", "swap_space": -2, "kv_cache_dtype": ""}
    assert type(got["max_model_len"]) is int and type(got["gpu_memory_utilization"]) is float
    assert parse_vllm_args([]) == {}
    for items, tp, field in ((["foo"], None, "--vllm-arg"), (["=3"], None, "--vllm-arg"),
                             (["a b=1"], None, "--vllm-arg"), (["model=x"], None, "model"),
                             (["dtype=half", "dtype=float16"], None, "dtype"),
                             (["tensor_parallel_size=2"], 2, "tensor_parallel_size"),
                             (["compilation_config={level: 3}"], None, "compilation_config"),
                             ([], 0, "--tensor-parallel-size")):
        with pytest.raises(InputError) as exc:
            parse_vllm_args(items, tp)
        assert exc.value.field == field


def test_check_vllm_options_against_the_installed_signature(monkeypatch):
    module, _ = _fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", module)
    ok = {"tensor_parallel_size": 2, "data_parallel_size": 2, "gpu_memory_utilization": 1, "max_model_len": None,
          "enforce_eager": False, "dtype": "half", "compilation_config": {"level": 3}, "seed": 3}
    assert check_vllm_options(dict(ok)) == ok
    for options, message in (({"gpu_memory_utilisation": 0.8}, "did you mean gpu_memory_utilization"),
                             ({"max_model_len": 4096.5}, "expected int or None"),
                             ({"gpu_memory_utilization": "high"}, "expected float"),
                             ({"enforce_eager": 1}, "expected bool"),
                             ({"tensor_parallel_size": True}, "expected int")):
        with pytest.raises(InputError, match=message):
            check_vllm_options(options)
    monkeypatch.setitem(sys.modules, "vllm", None)  # not installed: a usage error, before anything is written
    with pytest.raises(InputError, match=r"pip install .elical\[vllm\]"):
        check_vllm_options({})


@pytest.mark.parametrize("extra, message", [
    (["--vllm-arg", "gpu_memory_utilization"], "expected key=value"),
    (["--vllm-arg", "gpu_memory_utilization=high"], "expected float"),
    (["--vllm-arg", "max_num_seq=8"], "not an option of vllm.LLM"),
    (["--tensor-parallel-size", "0"], "positive integer"),
    (["--tensor-parallel-size", "2", "--vllm-arg", "tensor_parallel_size=2"], "given twice"),
])
def test_bad_vllm_options_exit_2_before_anything_is_written(monkeypatch, tmp_path, capsys, extra, message):
    module, created = _fake_vllm()
    monkeypatch.setitem(sys.modules, "vllm", module)
    out = tmp_path / "b"
    assert main([*BUILD, "--output", str(out), *extra]) == 2
    assert message in capsys.readouterr().err and not out.exists() and not created
    assert main(["run", "--preset", "smoke", "--backend", "vllm", "--output", str(tmp_path / "r"), *extra]) == 2
    assert message in capsys.readouterr().err and not (tmp_path / "r").exists() and not created


def test_vllm_options_need_the_vllm_backend(tmp_path, capsys):
    assert main([*BUILD[:-3], "--tensor-parallel-size", "2", "--output", str(tmp_path / "b")]) == 2
    assert "options of the vllm backend, not of 'transformers'" in capsys.readouterr().err
    assert main(["run", "--vllm-arg", "dtype=half", "--output", str(tmp_path / "r")]) == 2
    assert "options of the vllm backend" in capsys.readouterr().err
    assert not (tmp_path / "b").exists() and not (tmp_path / "r").exists()
    with pytest.raises(SystemExit) as exc:  # argparse: not an integer
        main([*BUILD, "--tensor-parallel-size", "two", "--output", str(tmp_path / "b")])
    assert exc.value.code == 2


def test_run_options_reach_vllm_llm_unchanged(monkeypatch, smollm2):
    from elical.generation.base import DecodingConfig
    from elical.jobs.run import _backend_options, _make_generator

    _, tok = smollm2
    module, created = _fake_vllm(tok)
    monkeypatch.setitem(sys.modules, "vllm", module)
    args = _parser().parse_args(["run", "--backend", "vllm", "--tensor-parallel-size", "4", "--vllm-arg",
                                 "max-model-len=2048", "--vllm-arg", "data_parallel_size=2", "--vllm-arg",
                                 "enable_prefix_caching=false"])
    cfg = _config_from_args(args)
    assert (cfg.tensor_parallel_size, cfg.vllm_args) == (4, ("max-model-len=2048", "data_parallel_size=2",
                                                             "enable_prefix_caching=false"))
    options = _backend_options(cfg)
    assert options == {"tensor_parallel_size": 4, "max_model_len": 2048, "data_parallel_size": 2,
                       "enable_prefix_caching": False}
    _make_generator(cfg, None, tok, DecodingConfig(), options)
    (llm,) = created
    assert {k: v for k, v in llm.kwargs.items() if k not in ("model", "dtype", "seed", "gpu_memory_utilization")} \
        == options  # prefix caching stays off when asked
    assert type(llm.kwargs["max_model_len"]) is int and llm.kwargs["enable_prefix_caching"] is False


def test_sharded_vllm_builds_pass_the_options_and_merge(monkeypatch, tmp_path, smollm2):
    _, tok = smollm2
    module, created = _fake_vllm(tok)
    monkeypatch.setitem(sys.modules, "vllm", module)
    out = tmp_path / "b"
    extra = ["--tensor-parallel-size", "2", "--vllm-arg", "gpu_memory_utilization=0.85", "--vllm-arg",
             "max_model_len=4096", "--vllm-arg", "enforce_eager=true", "--vllm-arg", "dtype=bfloat16"]
    for i in (2, 1):
        assert main([*BUILD, "--output", str(out), "--shard", f"{i}/2", *extra]) == 0
    assert len(created) == 2
    for llm in created:
        assert llm.kwargs == {"model": llm.kwargs["model"], "tensor_parallel_size": 2, "gpu_memory_utilization": 0.85,
                              "max_model_len": 4096, "enforce_eager": True, "dtype": "bfloat16", "seed": 0,
                              "enable_prefix_caching": True}
    cfg = BuildConfig(datasets=("facts",), split="test", limit=6, n_samples=2, max_new_tokens=6, batch_size=2,
                      backend="vllm")
    (unit,) = plan_units(cfg, log=lambda *_: None)
    for i in (1, 2):  # each shard holds its own whole batches: questions 1-2 and 5-6, then 3-4
        shard = read_records(out / "facts" / f"test.shard-{i}-of-2.jsonl")
        assert [r["id"] for r in shard] == [q["id"] for q in shard_part(unit.questions, 2, (i, 2))]
        assert all(r["greedy_response"] == "Paris" and r["sampling_response"] == ["Paris"] * 2 for r in shard)
    assert json.loads((out / "build.json").read_text())["backend"] == "vllm"  # engine options are not in it
    assert "tensor_parallel_size" not in (out / "build.json").read_text()
    assert main(["merge", str(out)]) == 0
    from elical.generation.features import load_features

    ids, X, _ = load_features(out / "facts" / "test.features.safetensors")
    assert ids == [q["id"] for q in unit.questions] and X.shape == (6, 576)
    assert [r["id"] for r in read_records(out / "facts" / "test.jsonl")] == ids
