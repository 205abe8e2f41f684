"""Dataset groups of HonestyBench: the one place that says which datasets are in-domain, out-of-domain or unseen.

Ni et al. (arXiv 2510.17509, Sec. 5) train on five in-domain QA sets, test on those and on five out-of-domain
sets, and keep MMLU as an unseen task. The protocol rule that follows (``DESIGN.md``): training pools come from
in-domain datasets only; out-of-domain sets and MMLU are evaluation only. Results are aggregated per group
(in-domain and out-of-domain weighted by test size, MMLU alone).

Names are the folder names of the released HonestyBench (``tq`` is TriviaQA) plus the embedded ``facts`` set,
which plays an in-domain role (short factual questions, like PopQA in the paper but generated offline).

A dataset in no group (a user's own folder) is evaluation only unless the user names it on purpose
(``elical run --pool-datasets NAME``): :func:`pool_eligible`.
"""

from __future__ import annotations

from typing import Iterable

__all__ = ["IN_DOMAIN", "OUT_OF_DOMAIN", "UNSEEN", "GROUPS", "group_of", "pool_eligible"]

IN_DOMAIN: tuple[str, ...] = ("nq", "tq", "hq", "2wikimultihopqa", "pararel_patterns", "facts")
OUT_OF_DOMAIN: tuple[str, ...] = ("squad", "web_questions", "complex_web_questions", "musique", "popqa")
UNSEEN: tuple[str, ...] = ("mmlu",)
GROUPS: dict[str, tuple[str, ...]] = {"in_domain": IN_DOMAIN, "out_of_domain": OUT_OF_DOMAIN, "unseen": UNSEEN}


_ALIASES = {"triviaqa": "tq"}  # long names of the released folder names


def group_of(name: str) -> str | None:
    """``"in_domain"``, ``"out_of_domain"``, ``"unseen"``, or None for a dataset in no group. Case-insensitive;
    ``triviaqa`` is ``tq``, and any name starting with ``mmlu`` (``mmlu_test``) is the unseen task."""
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key.startswith("mmlu"):
        return "unseen"
    for group, names in GROUPS.items():
        if key in names:
            return group
    return None


def pool_eligible(name: str, extra_pool: Iterable[str] = ()) -> bool:
    """Whether ``name`` may feed a training pool: in-domain, or in no group and named in ``extra_pool``.

    Out-of-domain and unseen datasets never may; :func:`elical.data.sources.select_run_questions` refuses
    them in ``extra_pool``."""
    group = group_of(name)
    return group == "in_domain" or (group is None and name in set(extra_pool))
