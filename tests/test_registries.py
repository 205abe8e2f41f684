"""Every registered entry builds from its declared arguments (judges, estimators, heads, metrics, backends,
sources, statistics): a declaration that does not match its factory fails here, not in a user's run as a raw
TypeError; and a plug-in package adds an entry through an entry point."""

from pathlib import Path

import numpy as np
import pytest

from elical.records import read_records
from elical.registry import PLUGIN_GROUPS, Registry, load_plugins

RECORDS = read_records(Path(__file__).resolve().parent / "fixtures" / "smoke_run" / "records" / "annotations.jsonl")


def _exact(a, b):
    return a.strip().lower() == b.strip().lower()


@pytest.mark.parametrize("task", ["equivalence", "correctness"])
def test_every_judge_builds_from_its_declaration(task):
    from elical.judges import CORRECTNESS_JUDGES, EQUIVALENCE_JUDGES

    registry = EQUIVALENCE_JUDGES if task == "equivalence" else CORRECTNESS_JUDGES
    values = {"complete": lambda prompts: ["yes"] * len(prompts), "model_path": "/nonexistent/nli-model"}
    for name in registry:
        entry = registry[name]
        assert "accepts" in entry.info and "model_kw" in entry.info, name
        kwargs = {need: values[need] for need in entry.needs}
        if entry.info["model_kw"] and entry.info["model_kw"] not in entry.needs:
            assert entry.info["model_kw"] in entry.info["accepts"], name  # --judge-model reaches a real keyword
        try:
            judge = registry.create(name, **kwargs)
        except TypeError as exc:  # the declaration does not match the factory
            pytest.fail(f"{task} judge {name}: {exc}")
        except (ValueError, OSError):
            assert name == "nli"  # no NLI model offline: a clear error, not a TypeError
            continue
        assert callable(getattr(judge, "judge_many", None)) or callable(judge), name
        with pytest.raises(ValueError, match="takes no 'no_such_option'"):
            registry.create(name, **kwargs, no_such_option=1)


def test_a_judge_model_goes_only_to_the_judge_that_takes_one():
    # `elical run --correctness-judge normalized --judge-model X`: no TypeError, X goes to the equivalence judge only
    from elical.jobs.annotate import Annotator

    annotator = Annotator.default("/some/minilm", correctness="normalized", equivalence="learned")
    assert annotator.names["correctness"] == "normalized"
    assert str(annotator.semantic.encoder.model_path) == "/some/minilm"


def test_every_estimator_runs_from_its_declaration():
    from elical.estimators import ESTIMATORS, EstimatorContext, estimate, kind_of

    test = [r for r in RECORDS if r["split"] == "test"][:4]
    shared: dict = {}
    for name in ESTIMATORS:
        if kind_of(name) == "model":
            with pytest.raises(ValueError, match="queries the model"):
                estimate(name, test, EstimatorContext())
            continue
        conf = estimate(name, test, EstimatorContext(equivalent=_exact), shared).confidence
        assert conf.shape == (4,) and np.all((conf >= 0) & (conf <= 1)), name


def test_every_head_kind_builds():
    from elical.heads import HEADS

    for name in HEADS:
        given = {"random_state": 0, "model": object(), "tokenizer": object()}
        stages = HEADS.create(name, **{k: given[k] for k in HEADS[name].needs})
        assert stages.inputs == HEADS[name].info["inputs"], name


def test_every_backend_builds_or_says_what_is_missing():
    from elical.generation import BACKENDS
    from elical.generation.base import DecodingConfig

    built = BACKENDS.create("openai", model="smollm2", tokenizer=None, decoding=DecodingConfig(),
                            base_url="http://127.0.0.1:9/v1")
    assert built is not None
    with pytest.raises(ValueError, match="base_url"):
        BACKENDS.create("openai", model="smollm2", tokenizer=None, decoding=DecodingConfig())
    assert {"transformers", "vllm", "openai"} <= set(BACKENDS)  # transformers: built by every real-model test


def test_every_source_builds(shared_data):
    from elical.data import SOURCES
    from elical.data.sources import load_dataset, source_of

    given = {"mmlu_dir": shared_data / "mmlu", "data_dir": shared_data / "honestybench-qa", "name": "nq"}
    for name in SOURCES:
        entry = SOURCES[name]
        questions = SOURCES.create(name, **{need: given[need] for need in entry.needs})
        assert questions and {"id", "question"} <= set(questions[0]), name
        assert {"own_split", "answers", "options", "dataset"} <= set(entry.info), name
    assert source_of("mmlu").info["answers"] == "choices" and source_of("nq").name == "qa-folder"
    from elical.records import InputError

    with pytest.raises(InputError, match="needs --mmlu-dir"):
        load_dataset("mmlu")


def test_every_metric_and_statistic_resolves():
    from elical.estimators.stats import STATS
    from elical.evaluation.spec import metric_names, metric_spec

    for name in metric_names():
        assert metric_spec(name).compute is not None
    for name in STATS:
        assert callable(STATS[name].load())


class _EntryPoint:
    def __init__(self, name, fn):
        self.name, self.value, self._fn = name, f"tests:{name}", fn

    def load(self):
        return self._fn


def test_a_plugin_adds_an_estimator_through_an_entry_point():
    from elical.estimators import ESTIMATORS, estimate

    def register(registry: Registry):
        registry.add("Always-Half", lambda records, stats, ctx: np.full(len(records), 0.5),
                     summary="a plug-in's estimator", fields=())

    found = load_plugins(["elical.estimators"],
                         entry_points=lambda group: [_EntryPoint("half", register)] if group == "elical.estimators"
                         else [])
    try:
        assert found == ["elical.estimators:half"]
        assert estimate("Always-Half", RECORDS[:3]).confidence.tolist() == [0.5] * 3
    finally:
        ESTIMATORS.remove("Always-Half")
    broken = lambda group: [_EntryPoint("broken", lambda registry: 1 / 0)]  # noqa: E731
    with pytest.raises(ValueError, match="plug-in 'broken'"):
        load_plugins(["elical.metrics"], entry_points=broken)
    assert set(PLUGIN_GROUPS) >= {"elical.judges.correctness", "elical.estimators", "elical.metrics"}
