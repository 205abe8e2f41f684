"""Correctness and equivalence judges for free-form answers, and their one registry.

Two questions are asked of every generated answer (HonestyBench, Ni et al., arXiv 2510.17509, Sec. 3):

* **correctness** — does the answer give a gold alias? (default "span-contains", `SpanCorrectnessJudge`);
* **equivalence** — does a sampled answer agree with the greedy answer? (default "span",
  `SpanEquivalenceJudge`: the ``consistency_judgement`` behind self-consistency and Consis-Sem).

Both receive the question. Modules: `base` (interfaces, input checks), `text` (normalization, numbers, F1,
ROUGE-L), `rules` (exact / contains / lexical judges), `semantic` (embedding), `span` (question-aware answer
spans, the defaults), `choices` (MMLU lettered choices), `nli`, `llm`. Judges are made by name from
`JUDGES` (`make_equivalence_judge`, `make_correctness_judge`); the CLI's choices read it too. Measured
agreement with hand labels: docs/benchmarks.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import import_module
from typing import Callable

# Public names, imported on first use so that reading the registry (the CLI's choices) stays cheap.
_HOMES = {
    "base": ("PairJudge", "CorrectnessBase", "AliasCorrectnessJudge"),
    "choices": ("mmlu_choice", "mmlu_correct"),
    "rules": ("CorrectnessJudge", "LexicalConsistency", "LexicalEquivalenceJudge", "contains_match", "exact_match"),
    "semantic": ("SemanticEquivalenceJudge",),
    "span": ("SpanCorrectnessJudge", "SpanEquivalenceJudge", "answer_span"),
    "text": ("normalize_answer", "numbers_in", "rouge_l", "token_f1"),
}
_WHERE = {name: module for module, names in _HOMES.items() for name in names}


def __getattr__(name: str):
    if name in _WHERE:
        return getattr(import_module(f"elical.judges.{_WHERE[name]}"), name)
    raise AttributeError(f"module 'elical.judges' has no attribute {name!r}")

__all__ = [
    "JudgeSpec", "JUDGES", "JUDGE_NAMES", "DEFAULT_CORRECTNESS", "DEFAULT_EQUIVALENCE", "make_equivalence_judge",
    "make_correctness_judge", "equivalence_names", "correctness_names", "normalize_answer", "exact_match",
    "contains_match", "token_f1", "rouge_l", "numbers_in", "answer_span", "mmlu_correct", "mmlu_choice",
    "PairJudge", "CorrectnessBase", "CorrectnessJudge", "LexicalConsistency", "LexicalEquivalenceJudge",
    "AliasCorrectnessJudge", "SemanticEquivalenceJudge", "SpanEquivalenceJudge", "SpanCorrectnessJudge",
]  # fmt: skip


@dataclass(frozen=True)
class JudgeSpec:
    """A judge by name: how to make it for each task, and what it needs.

    equivalence / correctness : factory ``(**kw) -> judge`` for that task, or None when the judge does not do it.
    needs : keywords the factories require (``"model_path"``: a local model directory; ``"complete"``: a text
        completion backend); a judge with needs does not run offline out of the box.
    model_kw : the keyword that receives the CLI's ``--judge-model`` (None: the judge takes no model).
    summary : one line for help texts and tables.
    """

    equivalence: Callable | None
    correctness: Callable | None
    needs: tuple[str, ...] = ()
    model_kw: str | None = None
    summary: str = ""

    @property
    def offline(self) -> bool:
        """Runs with nothing but this package (no model directory, no server)."""
        return not self.needs


def _lexical(kind: str) -> JudgeSpec:
    def equivalence(**kw):
        from elical.judges.rules import LexicalEquivalenceJudge

        return LexicalEquivalenceJudge(kind, **kw)

    def correctness(**kw):
        from elical.judges.base import AliasCorrectnessJudge
        from elical.judges.rules import CorrectnessJudge

        return CorrectnessJudge(kind, **kw) if kind in ("exact", "contains") else \
            AliasCorrectnessJudge(equivalence(**kw))

    return JudgeSpec(equivalence, correctness, summary=f"{kind} (string rule, numbers first)")


def _embedding(**kw):
    from elical.judges.semantic import SemanticEquivalenceJudge

    return SemanticEquivalenceJudge(**kw)


def _embedding_correctness(**kw):
    from elical.judges.base import AliasCorrectnessJudge

    return AliasCorrectnessJudge(_embedding(**kw))


def _span(**kw):
    from elical.judges.span import SpanEquivalenceJudge

    return SpanEquivalenceJudge(**kw)


def _span_correctness(**kw):
    from elical.judges.span import SpanCorrectnessJudge

    return SpanCorrectnessJudge(**kw)


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


JUDGES: dict[str, JudgeSpec] = {
    "exact": _lexical("exact"),
    "contains": _lexical("contains"),
    "token-f1": _lexical("token-f1"),
    "rouge-l": _lexical("rouge-l"),
    "embedding": JudgeSpec(_embedding, _embedding_correctness, model_kw="model_path",
                           summary="whole-answer MiniLM cosine >= 0.88"),
    "span": JudgeSpec(_span, _span_correctness, model_kw="model_path",
                      summary="answer spans beyond the question (default equivalence)"),
    "span-contains": JudgeSpec(None, _span_correctness,
                               summary="gold alias within the answer span (default correctness)"),
    "nli": JudgeSpec(_nli_equivalence, _nli_correctness, needs=("model_path",), model_kw="model_path",
                     summary="bidirectional entailment with a local NLI model"),
    "llm": JudgeSpec(_llm("equivalence"), _llm("correctness"), needs=("complete",),
                     summary="a judge language model (never the QA model unless asked)"),
}
JUDGE_NAMES = tuple(JUDGES)
DEFAULT_EQUIVALENCE = "span"
DEFAULT_CORRECTNESS = "span-contains"


def equivalence_names() -> list[str]:
    """Names of the judges that decide equivalence (CLI choices)."""
    return [n for n, s in JUDGES.items() if s.equivalence is not None]


def correctness_names() -> list[str]:
    """Names of the judges that decide correctness (CLI choices)."""
    return [n for n, s in JUDGES.items() if s.correctness is not None]


def _spec(name: str, task: str) -> Callable:
    spec = JUDGES.get(name)
    factory = getattr(spec, task, None)
    if factory is None:
        names = equivalence_names() if task == "equivalence" else correctness_names()
        raise ValueError(f"unknown {task} judge {name!r}; choose one of {', '.join(names)}")
    return factory


def make_equivalence_judge(name: str, **kw):
    """An equivalence judge by name (see `JUDGES`), with ``judge_many(pairs, questions=None)`` and
    ``judge(greedy, samples, question=None)``.

    kw go to the factory: lexical ones take ``threshold``; "embedding" / "span" ``model_path``, ``threshold``,
    ``device``, ``batch_size``; "nli" requires ``model_path``; "llm" requires ``complete``.
    Raises ValueError for an unknown name (the message lists the names), TypeError for unknown keywords.
    """
    return _spec(name, "equivalence")(**kw)


def make_correctness_judge(name: str, **kw):
    """A correctness judge by name (see `JUDGES`): ``judge_many([(response, aliases), ...], questions=None)``
    and ``judge(responses, aliases, question=None)`` (also callable so), 0/1 arrays.

    "exact" / "contains": `CorrectnessJudge`; "token-f1" / "rouge-l" / "embedding" / "nli": equivalent to any
    alias (`AliasCorrectnessJudge`; NLI with ``direction="forward"``); "span" / "span-contains":
    `SpanCorrectnessJudge`; "llm": `elical.judges.llm.LLMJudge` in correctness mode.
    Raises ValueError for an unknown name, TypeError for unknown keywords.
    """
    return _spec(name, "correctness")(**kw)
