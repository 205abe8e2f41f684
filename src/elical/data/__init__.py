"""Question sources by name, the hash split, HonestyBench dataset groups.

``SOURCES`` is the registry of question sources (the one registry shape, :class:`elical.registry.Registry`):
``facts`` (embedded), ``mmlu`` (a directory of MMLU CSVs; the unseen task) and ``qa-folder`` (any folder in the
HonestyBench QA layout, addressed by its name). :func:`elical.data.sources.load_dataset` resolves a dataset name
through it.
"""

from elical.registry import Registry

__all__ = ["SOURCES"]

SOURCES = Registry("question source")
SOURCES.add("facts", "elical.data.facts:load_facts",
            summary="6,324 factual questions made offline from knowledge packages, frozen in a data file (embedded)")
SOURCES.add("mmlu", lambda mmlu_dir: _mmlu(mmlu_dir), needs=("mmlu_dir",),
            summary="MMLU's test split as free-form QA with lettered choices (the unseen task)")
SOURCES.add("qa-folder", "elical.data.sources:read_qa_folder", needs=("data_dir", "name"),
            summary="<data_dir>/<name>/<split>.jsonl with {question, answer: [aliases]} lines")


def _mmlu(mmlu_dir):
    from elical.data.mmlu import load_mmlu

    return load_mmlu(mmlu_dir, "test")
