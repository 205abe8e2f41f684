"""``elical run``'s options are declared once (elical.jobs.config): the parser, the config and config.json agree,
and ``--resume`` continues a run directory's saved preset and options."""

import json
import os
from dataclasses import asdict, fields

import pytest

from elical.cli import _config_from_args, _parser
from elical.jobs.config import PRESETS, RunConfig
from elical.jobs.run import check_run_dir, prepare_run_dir
from elical.records import InputError

# The option names as they were before the declaration moved (cli.py at da70ab4), plus --max-new-tokens.
OLD_FLAGS = {"--preset", "--model", "--data-dir", "--mmlu-dir", "--datasets", "--pool-datasets", "--n-train",
             "--n-eval", "--n-samples", "--k", "--target", "--head", "--layer", "--pooling", "--controls",
             "--control-model", "--stream-features", "--batch-size", "--device", "--backend", "--base-url",
             "--api-key-env", "--tensor-parallel-size", "--vllm-arg", "--seed", "--output", "--correctness-judge",
             "--equivalence-judge", "--judge-model", "--judge-base-url", "--judge-with-qa-model",
             "--no-model-estimators", "--build-dir", "--resume", "--quiet"}


def _args(*argv):
    return _parser().parse_args(["run", *argv])


def _run_parser():
    return _parser()._subparsers._group_actions[0].choices["run"]


def test_the_option_names_are_the_old_ones_plus_max_new_tokens():
    flags = {s for a in _run_parser()._actions for s in a.option_strings} - {"-h", "--help"}
    # --honestybench, --rejudge, --alignment-protocol: the released-files path (docs/models.md)
    assert flags == OLD_FLAGS | {"--max-new-tokens", "--honestybench", "--rejudge", "--alignment-protocol",
                                 "--request-timeout", "--max-retries", "--concurrency"}


def test_defaults_are_the_presets():
    assert _config_from_args(_args()) == RunConfig()
    smoke = _config_from_args(_args("--preset", "smoke"))
    assert (smoke.preset, smoke.n_train, smoke.n_eval, smoke.n_samples, smoke.max_new_tokens, smoke.k_values,
            smoke.n_bootstrap) == ("smoke", 48, 32, 3, 12, (8, 24), 200)
    d = RunConfig()
    assert (d.n_train, d.n_eval, d.n_samples, d.max_new_tokens, d.k_values, d.batch_size, d.layer, d.pooling,
            d.correctness_judge, d.equivalence_judge, d.model_estimators) == \
        (600, 300, 5, 20, (16, 64, 256), 32, -1, "last", "learned", "learned", True)


def test_every_option_reaches_its_field(tmp_path):
    cfg = _config_from_args(_args(
        "--preset", "smoke", "--model", "m", "--datasets", "nq, hq", "--data-dir", "d", "--mmlu-dir", "mm",
        "--pool-datasets", "mine", "--n-train", "40", "--n-eval", "11", "--n-samples", "4", "--max-new-tokens", "9",
        "--batch-size", "8", "--backend", "openai", "--base-url", "http://h/v1", "--api-key-env", "KEY",
        "--tensor-parallel-size", "2", "--vllm-arg", "a=1", "--vllm-arg", "b=2", "--k", "4,16", "--head", "mlp",
        "--target", "greedy", "--layer", "8,15,-1", "--pooling", "mean,last", "--controls", "--control-model", "c",
        "--seed", "3", "--device", "cuda:1", "--judge-model", "jm", "--correctness-judge", "token-f1",
        "--equivalence-judge", "rouge-l", "--judge-base-url", "http://j/v1", "--judge-with-qa-model",
        "--build-dir", "b", "--no-model-estimators", "--stream-features", "--honestybench", "hb", "--rejudge",
        "--alignment-protocol", "paper", "--request-timeout", "7.5", "--max-retries", "2", "--concurrency", "3"))
    expected = RunConfig(
        preset="smoke", model="m", datasets=("nq", "hq"), data_dir=os.path.abspath("d"),
        mmlu_dir=os.path.abspath("mm"), pool_datasets=("mine",), n_train=40, n_eval=11, n_samples=4,
        max_new_tokens=9, batch_size=8, backend="openai", base_url="http://h/v1", api_key_env="KEY",
        tensor_parallel_size=2, vllm_args=("a=1", "b=2"), k_values=(4, 16), head="mlp", target="greedy", layer=8,
        layers=(8, 15, -1), pooling="last,mean", controls=True, control_model="c", seed=3, device="cuda:1",
        semantic_model="jm", correctness_judge="token-f1", equivalence_judge="rouge-l", judge_base_url="http://j/v1",
        judge_with_qa_model=True, build_dir=os.path.abspath("b"), model_estimators=False, stream_features=True,
        honestybench=os.path.abspath("hb"), rejudge=True, alignment_protocol="paper",
        request_timeout=7.5, max_retries=2, concurrency=3,
        dev_fraction=0.2, n_bootstrap=200)  # the last two have no option: the smoke preset's
    assert cfg == expected
    # every field but the two without an option differs from the smoke preset, so none was dropped on the way
    assert {f.name for f in fields(RunConfig) if getattr(cfg, f.name) == getattr(PRESETS["smoke"], f.name)} == \
        {"preset", "dev_fraction", "n_bootstrap"}
    # --max-new-tokens is recorded in config.json
    run_dir = prepare_run_dir(tmp_path / "run", cfg, resume=False)
    assert json.loads((run_dir / "config.json").read_text())["max_new_tokens"] == 9


def test_bad_values_are_refused_by_the_parser(capsys):
    for argv in (["--n-train", "0"], ["--max-new-tokens", "-1"], ["--k", "4,x"], ["--head", "nope"]):
        with pytest.raises(SystemExit) as exc:
            _args(*argv)
        assert exc.value.code == 2
    with pytest.raises(InputError, match="--data-dir needs --datasets"):
        _config_from_args(_args("--data-dir", "d"))


def test_resume_reads_the_saved_preset_and_options(tmp_path):
    out = tmp_path / "run"
    first = _config_from_args(_args("--preset", "smoke", "--n-train", "40", "--layer", "all", "--output", str(out)))
    prepare_run_dir(out, first, resume=False)
    (out / "records").mkdir()  # a started run: the directory is not empty
    again = _config_from_args(_args("--output", str(out), "--resume"))
    assert again == first and again.layers == "all" and again.k_values == (8, 24)
    check_run_dir(out, again, resume=True)
    # a speed option may change
    faster = _config_from_args(_args("--output", str(out), "--resume", "--batch-size", "4"))
    assert faster.batch_size == 4 and faster.n_train == 40
    check_run_dir(out, faster, resume=True)
    # an explicit option that differs from the saved one is refused, naming the field, nothing written
    before = (out / "config.json").read_text()
    for argv, field in ((["--n-train", "41"], "n_train"), (["--preset", "default"], "preset"),
                        (["--max-new-tokens", "5"], "max_new_tokens")):
        cfg = _config_from_args(_args("--output", str(out), "--resume", *argv))
        with pytest.raises(InputError, match=f"{field}: "):
            check_run_dir(out, cfg, resume=True)
    assert (out / "config.json").read_text() == before
    # without --resume the preset is the default, as before
    assert _config_from_args(_args("--output", str(out))) == RunConfig()


def test_resume_with_an_unreadable_config_names_the_file(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / "config.json").write_text("{not json")
    with pytest.raises(InputError, match="config.json"):
        _config_from_args(_args("--output", str(out), "--resume"))


def test_a_removed_judge_is_a_clear_error(tmp_path, capsys):
    """span / span-contains were removed (issue 20): the options, the judge factories and a run directory that
    names one say so and how to re-judge (`elical judge DIR --output NEW`), with exit code 2."""
    from elical.cli import main
    from elical.judges import make_correctness_judge

    for argv in (["run", "--equivalence-judge", "span"], ["run", "--correctness-judge", "span-contains"],
                 ["judge", str(tmp_path), "--output", str(tmp_path / "x"), "--equivalence-judge", "span"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "was removed" in err and "elical judge DIR --output NEW" in err and "invalid choice" not in err
    with pytest.raises(ValueError, match=r"'span-contains' was removed .* use 'learned'"):
        make_correctness_judge("span-contains")
    out = tmp_path / "run"
    prepare_run_dir(out, PRESETS["smoke"], resume=False)
    (out / "records").mkdir()
    saved = json.loads((out / "config.json").read_text())
    (out / "config.json").write_text(json.dumps({**saved, "equivalence_judge": "span"}))
    assert main(["run", "--output", str(out), "--resume", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"{out / 'config.json'}: field 'equivalence_judge': equivalence judge 'span' was removed" in err
    assert f"elical judge {out} --output NEW" in err and not (out / "results.json").exists()


def test_saved_config_roundtrips_through_json(tmp_path):
    from elical.jobs.config import saved_config

    cfg = RunConfig(layers=(8, -1), vllm_args=("a=1",), pool_datasets=("x",))
    (tmp_path / "config.json").write_text(json.dumps(asdict(cfg)))
    assert saved_config(tmp_path) == cfg


def test_study_passes_on_the_same_declared_options():
    from elical.jobs.config import given_options
    from elical.study.command import _RUN_OPTIONS

    args = _parser().parse_args(["study", "--preset", "smoke", "--model", "m", "--head", "mlp", "--layer", "8,-1",
                                 "--pooling", "mean", "--judge-model", "jm", "--batch-size", "4", "--backend",
                                 "openai", "--base-url", "http://h/v1", "--equivalence-judge", "nli",
                                 "--correctness-judge", "exact", "--judge-base-url", "http://j/v1", "--device", "cuda"])
    assert given_options(args, _RUN_OPTIONS) == {
        "model": "m", "head": "mlp", "layer": 8, "layers": (8, -1), "pooling": "mean", "semantic_model": "jm",
        "batch_size": 4, "backend": "openai", "base_url": "http://h/v1", "equivalence_judge": "nli",
        "correctness_judge": "exact", "judge_base_url": "http://j/v1", "device": "cuda"}
    assert given_options(_parser().parse_args(["study", "--preset", "cpu"]), _RUN_OPTIONS) == {}  # not the preset
    released = _parser().parse_args(["study", "--honestybench", "hb", "--rejudge", "--alignment-protocol", "paper"])
    assert given_options(released, _RUN_OPTIONS) == {"honestybench": os.path.abspath("hb"), "rejudge": True,
                                                     "alignment_protocol": "paper"}
    for argv in (["--head", "lora"], ["--batch-size", "0"]):  # the study fits probe heads only
        with pytest.raises(SystemExit):
            _parser().parse_args(["study", *argv])
