"""Question sources by name, the hash split, HonestyBench dataset groups.

``SOURCES`` is the registry of question sources (the one registry shape, :class:`elical.registry.Registry`):
``facts`` (embedded), ``mmlu`` (a directory of MMLU CSVs; the unseen task) and ``qa-folder`` (any folder in the
HonestyBench QA layout, addressed by its name). Each entry is the dataset spec that owns its special cases:

- ``dataset``: the dataset name it serves (None: ``qa-folder``, every other name); a folder of that name under
  ``--data-dir`` wins over it;
- ``needs`` and ``options``: the arguments it needs and the command-line option that gives each;
- ``own_split``: its questions carry their own ``split`` (MMLU's test split), never cut by the hash;
- ``answers``: ``"choices"`` when correctness is read from lettered choices (MMLU), else ``"aliases"``.

:func:`elical.data.sources.load_dataset` and ``elical build`` resolve a dataset name through it
(:func:`elical.data.sources.source_of`); no other module checks a dataset's name.
"""

from elical.registry import Registry

__all__ = ["SOURCES"]

SOURCES = Registry("question source")
SOURCES.add("facts", "elical.data.facts:load_facts", accepts=(), dataset="facts", options={}, own_split=False,
            answers="aliases",
            summary="6,324 factual questions made offline from knowledge packages, frozen in a data file (embedded)")
SOURCES.add("mmlu", lambda mmlu_dir: _mmlu(mmlu_dir), needs=("mmlu_dir",), accepts=(), dataset="mmlu",
            options={"mmlu_dir": "--mmlu-dir"}, own_split=True, answers="choices", example="../shared/data/mmlu",
            summary="MMLU's test split as free-form QA with lettered choices (the unseen task)")
SOURCES.add("qa-folder", "elical.data.sources:read_qa_folder", needs=("data_dir", "name"), accepts=(), dataset=None,
            options={"data_dir": "--data-dir"}, own_split=False, answers="aliases",
            summary="<data_dir>/<name>/<split>.jsonl with {question, answer: [aliases]} lines")


def _mmlu(mmlu_dir):
    from elical.data.mmlu import load_mmlu

    return load_mmlu(mmlu_dir, "test")
