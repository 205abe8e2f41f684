"""Correctness and equivalence judges for free-form answers, and their one registry.

Two questions are asked of every generated answer (HonestyBench, Ni et al., arXiv 2510.17509, Sec. 3):

* **correctness** — does the answer give a gold alias? (default "learned", `LearnedCorrectnessJudge`);
* **equivalence** — does a sampled answer agree with the greedy answer? (default "learned",
  `LearnedEquivalenceJudge`: the ``consistency_judgement`` behind self-consistency and Consis-Sem; "learned-ce"
  runs its cross-encoder on nearly every pair: about three times the CPU, since the ninth round not clearly more
  accurate).
  The learned judges measured better than the rules on the question styles the rules were not written on
  (docs/benchmarks.md, "Judges"). The hand-written rule judges "span" / "span-contains" (the earlier defaults)
  were removed (last in commit 3e9e417): naming them is an error that says how to re-judge (`REMOVED_JUDGES`).

Both receive the question. Modules: `base` (interfaces, input checks), `text` (normalization, numbers, F1,
ROUGE-L), `rules` (exact / contains / lexical judges), `semantic` (embedding), `extract` (answer extraction; the
"normalized" alias-containment floor), `features` and
`learned` (the "learned" classifiers over features, weights shipped in ``learned_weights.json``),
`cross_encoder` (the learned equivalence judge's MiniLM cross-encoder, ``learned_cross_encoder.safetensors``),
`choices` (MMLU lettered choices), `nli`, `llm`, `explain` (``elical judge-explain``). Judges are made by name from
`EQUIVALENCE_JUDGES` / `CORRECTNESS_JUDGES` (`make_equivalence_judge`, `make_correctness_judge`); the CLI's
choices read it too. Measured agreement with hand labels: docs/benchmarks.md.
"""

from __future__ import annotations

from importlib import import_module

from elical.registry import Registry, UnknownNameError

# Public names, imported on first use so that reading the registry (the CLI's choices) stays cheap.
_HOMES = {
    "base": ("PairJudge", "CorrectnessBase", "AliasCorrectnessJudge"),
    "choices": ("mmlu_choice", "mmlu_correct"),
    "extract": ("NormalizedCorrectnessJudge", "extract"),
    "learned": ("LearnedEquivalenceJudge", "LearnedCrossEncoderEquivalenceJudge", "LearnedCorrectnessJudge"),
    "rules": ("CorrectnessJudge", "LexicalConsistency", "LexicalEquivalenceJudge", "contains_match", "exact_match"),
    "semantic": ("SemanticEquivalenceJudge",),
    "text": ("normalize_answer", "numbers_in", "rouge_l", "token_f1"),
}
_WHERE = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"elical.judges.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'elical.judges' has no attribute {name!r}")

__all__ = [
    "EQUIVALENCE_JUDGES", "CORRECTNESS_JUDGES", "JUDGE_NAMES", "judge_model_kw", "DEFAULT_CORRECTNESS",
    "DEFAULT_EQUIVALENCE", "REMOVED_JUDGES", "removed_judge", "make_equivalence_judge", "make_correctness_judge",
    "equivalence_names", "correctness_names", "normalize_answer", "exact_match", "contains_match", "token_f1",
    "rouge_l", "numbers_in", "mmlu_correct", "mmlu_choice", "PairJudge", "CorrectnessBase", "CorrectnessJudge",
    "LexicalConsistency", "LexicalEquivalenceJudge", "AliasCorrectnessJudge", "SemanticEquivalenceJudge",
    "NormalizedCorrectnessJudge", "LearnedEquivalenceJudge", "LearnedCorrectnessJudge", "extract",
]  # fmt: skip


def _lexical(kind: str):
    def equivalence(**kw):
        from elical.judges.rules import LexicalEquivalenceJudge

        return LexicalEquivalenceJudge(kind, **kw)

    def correctness(**kw):
        from elical.judges.base import AliasCorrectnessJudge
        from elical.judges.rules import CorrectnessJudge

        return CorrectnessJudge(kind, **kw) if kind in ("exact", "contains") else \
            AliasCorrectnessJudge(equivalence(**kw))

    return equivalence, correctness


def _embedding(**kw):
    from elical.judges.semantic import SemanticEquivalenceJudge

    return SemanticEquivalenceJudge(**kw)


def _embedding_correctness(**kw):
    from elical.judges.base import AliasCorrectnessJudge

    return AliasCorrectnessJudge(_embedding(**kw))


def _normalized(**kw):
    from elical.judges.extract import NormalizedCorrectnessJudge

    return NormalizedCorrectnessJudge(**kw)


def _learned(task: str):
    def make(**kw):
        from elical.judges import learned

        return {"equivalence": learned.LearnedEquivalenceJudge, "correctness": learned.LearnedCorrectnessJudge,
                "equivalence-ce": learned.LearnedCrossEncoderEquivalenceJudge}[task](**kw)

    return make


def _nli_equivalence(**kw):
    from elical.judges.nli import NLIEquivalenceJudge

    return NLIEquivalenceJudge(**kw)


def _nli_correctness(**kw):
    from elical.judges.base import AliasCorrectnessJudge

    kw.setdefault("direction", "forward")  # a longer correct answer need not be entailed by the bare alias
    return AliasCorrectnessJudge(_nli_equivalence(**kw))


def _llm(mode: str):
    def make(**kw):
        from elical.judges.llm import LLMJudge

        return LLMJudge(mode=mode, **kw)

    return make


# Two registries of the one shape (elical.registry): a judge name may decide equivalence, correctness or both.
# info["model_kw"]: the keyword that receives the CLI's --judge-model (None: the judge takes no model);
# info["accepts"]: the optional keywords of its factory (Registry.create refuses any other with a clear error).
EQUIVALENCE_JUDGES = Registry("equivalence judge")
CORRECTNESS_JUDGES = Registry("correctness judge")
_MINILM = ("model_path", "threshold", "device", "batch_size")
_NLI = ("device", "batch_size", "threshold", "question_aware", "direction", "max_length")
_LLM = ("batch_size", "unparsed_value")
for _kind in ("exact", "contains", "token-f1", "rouge-l"):
    _eq, _corr = _lexical(_kind)
    EQUIVALENCE_JUDGES.add(_kind, _eq, summary=f"{_kind} (string rule, numbers first)", model_kw=None,
                           accepts=("threshold",))
    CORRECTNESS_JUDGES.add(_kind, _corr, summary=f"{_kind} of the answer against each alias", model_kw=None,
                           accepts=() if _kind in ("exact", "contains") else ("threshold",))
EQUIVALENCE_JUDGES.add("embedding", _embedding, summary="whole-answer MiniLM cosine >= 0.88", model_kw="model_path",
                       accepts=_MINILM)
CORRECTNESS_JUDGES.add("embedding", _embedding_correctness, summary="MiniLM cosine with any alias",
                       model_kw="model_path", accepts=_MINILM)
CORRECTNESS_JUDGES.add("normalized", _normalized, summary="SQuAD-normalised alias containment, numbers as values, "
                       "non-answers never correct (the floor)", model_kw=None, accepts=())
_LEARNED = ("model_path", "weights", "threshold", "device", "batch_size")
EQUIVALENCE_JUDGES.add("learned", _learned("equivalence"), model_kw="model_path", accepts=_LEARNED,
                       summary="classifier over overlap/salient-word/number/echo/MiniLM features (default equivalence)")
EQUIVALENCE_JUDGES.add("learned-ce", _learned("equivalence-ce"), model_kw="model_path", accepts=_LEARNED,
                       summary="learned, the MiniLM cross-encoder on nearly every pair (~3x CPU, not clearly better)")
CORRECTNESS_JUDGES.add("learned", _learned("correctness"), model_kw="model_path", accepts=_LEARNED,
                       summary="classifier over alias-overlap/number/echo/MiniLM features, max over aliases")
EQUIVALENCE_JUDGES.add("nli", _nli_equivalence, needs=("model_path",),
                       summary="bidirectional entailment with a local NLI model", model_kw="model_path", accepts=_NLI)
CORRECTNESS_JUDGES.add("nli", _nli_correctness, needs=("model_path",),
                       summary="the answer entails an alias (local NLI model)", model_kw="model_path", accepts=_NLI)
EQUIVALENCE_JUDGES.add("llm", _llm("equivalence"), needs=("complete",),
                       summary="a judge language model (never the QA model unless asked)", model_kw=None, accepts=_LLM)
CORRECTNESS_JUDGES.add("llm", _llm("correctness"), needs=("complete",),
                       summary="a judge language model (never the QA model unless asked)", model_kw=None, accepts=_LLM)
JUDGE_NAMES = tuple(dict.fromkeys([*CORRECTNESS_JUDGES, *EQUIVALENCE_JUDGES]))
DEFAULT_EQUIVALENCE = "learned"
DEFAULT_CORRECTNESS = "learned"
#: Judge names no longer registered -> the last commit that had them (the hand-written rule judges, issue 20).
REMOVED_JUDGES = {"span": "3e9e417", "span-contains": "3e9e417"}


def removed_judge(name: str, task: str, directory: str = "DIR") -> str | None:
    """Why ``name`` is not a ``task`` ("equivalence" / "correctness") judge when it is one of `REMOVED_JUDGES`: a
    message naming the replacement and how to re-judge the answers stored in ``directory``; None for any other
    name."""
    if name not in REMOVED_JUDGES:
        return None
    default = DEFAULT_EQUIVALENCE if task == "equivalence" else DEFAULT_CORRECTNESS
    return (f"{task} judge {name!r} was removed (the hand-written rule judges, last in commit "
            f"{REMOVED_JUDGES[name]}); use {default!r} (the default) or another of "
            f"{', '.join(EQUIVALENCE_JUDGES if task == 'equivalence' else CORRECTNESS_JUDGES)}; re-judge stored "
            f"answers with the learned judges: elical judge {directory} --output NEW")


def equivalence_names() -> list[str]:
    """Names of the judges that decide equivalence (CLI choices)."""
    return EQUIVALENCE_JUDGES.names()


def correctness_names() -> list[str]:
    """Names of the judges that decide correctness (CLI choices)."""
    return CORRECTNESS_JUDGES.names()


def judge_model_kw(name: str, task: str | None = None) -> str | None:
    """The keyword through which judge ``name`` takes a local model directory (``--judge-model``), or None.
    ``task``: "equivalence" or "correctness" (the same name may take a model for one and not the other); None:
    either."""
    registries = {"equivalence": (EQUIVALENCE_JUDGES,), "correctness": (CORRECTNESS_JUDGES,)}.get(
        task, (EQUIVALENCE_JUDGES, CORRECTNESS_JUDGES))
    for registry in registries:
        if name in registry and registry[name].info.get("model_kw"):
            return registry[name].info["model_kw"]
    return None


def make_equivalence_judge(name: str, **kw):
    """An equivalence judge by name (see `EQUIVALENCE_JUDGES`), with ``judge_many(pairs, questions=None)`` and
    ``judge(greedy, samples, question=None)``.

    kw go to the factory: lexical ones take ``threshold``; "embedding" / "learned" ``model_path``,
    ``threshold``, ``device``, ``batch_size`` ("learned" also ``weights``, a JSON file); "nli" requires
    ``model_path``; "llm" requires ``complete``.
    Raises ValueError for an unknown name (the message lists the names; for a removed one, `removed_judge`) or a
    keyword the judge does not take (the message lists those it takes).
    """
    if name in REMOVED_JUDGES:
        raise UnknownNameError(removed_judge(name, "equivalence"))
    return EQUIVALENCE_JUDGES.create(name, **kw)


def make_correctness_judge(name: str, **kw):
    """A correctness judge by name (see `CORRECTNESS_JUDGES`): ``judge_many([(response, aliases), ...], questions=None)``
    and ``judge(responses, aliases, question=None)`` (also callable so), 0/1 arrays.

    "exact" / "contains": `CorrectnessJudge`; "token-f1" / "rouge-l" / "embedding" / "nli": equivalent to any
    alias (`AliasCorrectnessJudge`; NLI with ``direction="forward"``); "normalized":
    `elical.judges.extract.NormalizedCorrectnessJudge` (the floor);
    "learned": `elical.judges.learned.LearnedCorrectnessJudge`; "llm": `elical.judges.llm.LLMJudge` in correctness mode.
    Raises ValueError for an unknown name (a removed one: `removed_judge`) or a keyword the judge does not take (the
    message lists those it takes).
    """
    if name in REMOVED_JUDGES:
        raise UnknownNameError(removed_judge(name, "correctness"))
    return CORRECTNESS_JUDGES.create(name, **kw)
