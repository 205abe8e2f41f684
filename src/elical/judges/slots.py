"""What fills the asked slot, for two kinds of question where the answer word is easy to name but hard to find
by the words beyond the question (helpers of `elical.judges.span`):

* **typed questions** ("In which country ...?", "On which continent ...?", "In which US state ...?"): the first
  country / continent / state an answer names (`asked_type`, `first_entity`), read from pycountry's names, a
  few common forms ("UK", "Holland", "South Korea") and demonyms ("French" -> France, "Japanese" -> Japan:
  GUIDELINE rule 6). The granularity is set by the question (rule 3): "East Africa" names no country, "Amsterdam,
  Netherlands" and "the Netherlands" both name the Netherlands;
* **choice questions** ("Who is younger, Ann Lee or Bo Li?", "Which plant, A or B, can be found ...?"): the
  option an answer picks (`choice_options`, `picked_option`, rule 13): the option it names first, provided it
  also says the question's predicate (the comparative "younger" / "youngest", or a content word of the question
  outside the options); a text that only describes one option picks nothing.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from typing import Sequence

from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

from elical.judges.text import find_spans, tokens

__all__ = ["asked_type", "entities", "first_entity", "choice_options", "picked_option", "ends_with_place",
           "place_words", "less_specific", "hedged", "question_place", "places_only", "slot_equivalent",
           "slot_correct"]

_COUNTRY_EXTRA = {
    "US": ["United States", "United States of America"], "GB": ["United Kingdom", "Great Britain", "Britain",
    "England", "Scotland", "Wales", "Northern Ireland"], "RU": ["Russia", "Soviet Union", "USSR"],
    "CZ": ["Czech Republic", "Czechia", "Czech"], "KR": ["South Korea", "Korea"], "KP": ["North Korea"],
    "VN": ["Vietnam"], "IR": ["Iran", "Persia"], "SY": ["Syria"], "LA": ["Laos"], "BO": ["Bolivia"],
    "VE": ["Venezuela"], "TZ": ["Tanzania"], "MD": ["Moldova"], "TW": ["Taiwan"], "CG": ["Congo",
    "Republic of the Congo"], "CD": ["Democratic Republic of the Congo", "DR Congo", "DRC", "Zaire"],
    "CI": ["Ivory Coast", "Cote d'Ivoire"], "MM": ["Burma"], "NL": ["Holland", "the Netherlands"],
    "VA": ["Vatican", "Vatican City"], "PS": ["Palestine"], "MK": ["Macedonia"], "SZ": ["Swaziland"],
    "CV": ["Cape Verde"], "TL": ["East Timor"], "TR": ["Turkey"], "BN": ["Brunei"], "FM": ["Micronesia"],
    "XK": ["Kosovo"], "AE": ["UAE", "Emirates"], "DDR": ["East Germany"], "BRD": ["West Germany"],
}
# Demonyms and adjectives that no suffix rule forms from the name ("French", "Dutch", "Swiss").
_DEMONYMS = {
    "FR": "french", "GB": "british english scottish welsh briton", "NL": "dutch", "CH": "swiss",
    "AR": "argentine argentinian", "DK": "danish dane", "SE": "swedish swede", "FI": "finnish finn",
    "PL": "polish", "ES": "spanish spaniard", "PT": "portuguese", "GR": "greek", "TR": "turkish", "IE": "irish",
    "NO": "norwegian", "PE": "peruvian", "PH": "filipino philippine", "TH": "thai", "LB": "lebanese",
    "BE": "belgian", "HN": "honduran", "CY": "cypriot", "AF": "afghan", "MG": "malagasy", "GH": "ghanaian",
    "CG": "congolese", "SK": "slovak", "SI": "slovene", "BS": "bahamian", "BB": "barbadian", "PA": "panamanian",
    "SV": "salvadoran", "MC": "monegasque", "MM": "burmese", "LA": "lao laotian", "UZ": "uzbek",
    "KZ": "kazakh", "KG": "kyrgyz", "TJ": "tajik", "TM": "turkmen", "SO": "somali", "MZ": "mozambican",
    "LU": "luxembourgish", "SA": "saudi", "US": "american", "DO": "dominican", "IS": "icelandic",
    "CZ": "czech", "NZ": "kiwi", "MA": "moroccan", "IL": "israeli", "IR": "persian", "VN": "vietnamese",
}
_SUFFIXES = ("n", "an", "ian", "ean", "ese", "i", "ic", "")
_CONTINENTS = {
    "AF": ["Africa", "African"], "AS": ["Asia", "Asian", "Asia-Pacific", "Middle East"],
    "EU": ["Europe", "European"], "NA": ["North America", "North American", "Central America"],
    "SA": ["South America", "South American", "Latin America"], "OC": ["Oceania", "Australasia"],
    "AN": ["Antarctica", "Antarctic"],
}
# Read as a name before any shorter one inside it ("South Africa" is no continent, "New Mexico" no country).
_LONGER = {"ZA": ["South Africa", "South African"], "CF": ["Central African Republic"]}
_WATERS = ("Indian Ocean", "South China Sea", "East China Sea", "Gulf of Mexico", "Irish Sea", "English Channel",
           "Philippine Sea", "Arabian Sea", "Norwegian Sea", "Sea of Japan", "Gulf of Thailand", "Java Sea")
_TYPES = (("country", re.compile(r"\b(?:which|what) (?:\w+ )?(?:country|nation)\b"
                                 r"|\bcountry of (?:origin|citizenship)\b|\bcitizenship\b|\bnationality\b")),
          ("continent", re.compile(r"\bcontinent\b")),
          ("state", re.compile(r"\b(?:which|what) (?:us |u\.s\. |american )?state\b")))
_CASED = [(re.compile(r"\bU\.?S\.?A?\b\.?"), " United States "), (re.compile(r"\bU\.?K\.?\b"), " United Kingdom ")]


@functools.lru_cache(maxsize=1)
def _table() -> tuple[dict, int]:
    """{name tokens: (type, code)} and the longest name in tokens."""
    import pycountry

    out: dict[tuple, tuple[str, str]] = {}

    def add(kind, code, name, keep=True):
        key = tuple(tokens(name))
        if key and (keep or key not in out):
            out.setdefault(key, (kind, code))

    for code, names in _LONGER.items():
        for n in names:
            add("country", code, n)
    for n in _WATERS:  # no country: "the Indian Ocean" is not India
        add("water", n, n)
    for sub in pycountry.subdivisions.get(country_code="US"):
        if sub.type == "State" or sub.name == "District of Columbia":
            add("state", sub.code[3:], sub.name)
    for code, names in _CONTINENTS.items():
        for n in names:
            add("continent", code, n)
    names = {}
    for rec in pycountry.countries:
        names.setdefault(rec.alpha_2, []).extend(
            n for n in (getattr(rec, "common_name", None), rec.name, getattr(rec, "official_name", None))
            if n and "," not in n and "(" not in n)
    for code, extra in _COUNTRY_EXTRA.items():
        names.setdefault(code, []).extend(extra)
    for code, words in _DEMONYMS.items():
        for w in words.split():
            add("country", code, w)
    for code, ns in names.items():
        for n in ns:
            add("country", code, n)
    # regular demonyms ("Japan" -> "Japanese", "Italy" -> "Italian", "Sri Lanka" -> "Sri Lankan"); the longer
    # name claims a form first ("Nigerian" is Nigeria's, not Niger's)
    for code, n in sorted(((c, n) for c, ns in names.items() for n in ns), key=lambda cn: -len(tokens(cn[1])[-1])):
        toks = tokens(n)
        last = toks[-1]
        if len(last) < 4:
            continue
        stems = {last, last[:-1]} if last[-1] in "aeiouy" else {last}
        for st in stems:
            for suf in _SUFFIXES:
                if st + suf != last and (suf or last[-1] == "y"):
                    add("country", code, " ".join([*toks[:-1], st + suf]), keep=False)
    return out, max(len(k) for k in out)


def asked_type(question: str | None) -> str | None:
    """"country", "continent" or "state" when the question asks for one, else None."""
    if not question:
        return None
    q = question.casefold()
    return next((kind for kind, rx in _TYPES if rx.search(q)), None)


def _cased(text: str) -> str:
    text = re.sub(r"(?<=\w)['’]s\b", "", text)  # "China's" -> "China"
    for rx, repl in _CASED:
        text = rx.sub(repl, text)
    return text


def _matches(toks: Sequence[str]) -> list[tuple[str, str, int, int]]:
    """(type, code, start, end) of each typed name in ``toks``, longest match first."""
    return list(_matches_of(tuple(toks)))


@functools.lru_cache(maxsize=1 << 16)  # the judges read the same answers many times
def _matches_of(toks: tuple[str, ...]) -> tuple[tuple[str, str, int, int], ...]:
    table, longest = _table()
    out, i = [], 0
    while i < len(toks):
        for n in range(min(longest, len(toks) - i), 0, -1):
            hit = table.get(tuple(toks[i:i + n]))
            if hit:
                out.append((*hit, i, i + n))
                i += n
                break
        else:
            i += 1
    return tuple(out)


def entities(text: str) -> list[tuple[str, str, int]]:
    """The typed names in ``text``, in order, longest match first: (type, code, token position)."""
    return [(kind, code, start) for kind, code, start, _ in _matches(tokens(_cased(text)))]


def place_words(words) -> set[int]:
    """Positions of the tokens ``words`` that belong to a country, continent or US state name."""
    return {i for _, _, start, end in _matches(list(words)) for i in range(start, end)}


def ends_with_place(text: str) -> bool:
    """``text`` ends with a whole country, continent or US state name ("... in the state of California")."""
    toks = tokens(_cased(text))
    found = _matches(toks)
    return bool(found) and found[-1][3] == len(toks)


def first_entity(text: str, kind: str, question: str | None = None) -> tuple[str | None, bool]:
    """The first ``kind`` entity of ``text`` not named in the question, and whether it is listed with another
    one of that kind ("France and Belgium", "Europe or Africa": a hedge, rule 4)."""
    asked = {c for k, c, _ in entities(question or "") if k == kind}
    found = [(c, i) for k, c, i in entities(text) if k == kind and c not in asked]
    if not found:
        return None, False
    code, pos = found[0]
    toks = tokens(_cased(text))
    others = [i for c, i in found[1:] if c != code]
    hedge = any(0 < i - pos <= 6 and {"and", "or"} & set(toks[pos:i]) and "of" not in toks[pos:i] for i in others)
    return code, hedge


_WHERE = re.compile(r"^\s*where\b")


def less_specific(short: Sequence[str], long_: Sequence[str], question: str | None, long_text: str = "") -> bool:
    """For a "where" question, ``short`` names only countries / continents / states and ``long_`` adds another
    name ("the Netherlands" vs "Amsterdam, Netherlands" for "Where was X born?", GUIDELINE rule 3): a word of
    ``long_`` outside every place name that ``long_text`` (the longer answer) writes capitalized, as a name."""
    if not question or not _WHERE.search(question.casefold()) or len(place_words(short)) < len(short):
        return False
    places = place_words(long_)
    extra = {w for i, w in enumerate(long_) if i not in places}
    return bool(extra & {t for m in re.finditer(r"\b[A-Z][\w'’-]*", long_text) for t in tokens(m.group())})


def question_place(words: Sequence[str], question: str | None) -> bool:
    """``words`` are wholly names of places the question names ("Republic of Uganda" for "... of Uganda?")."""
    found = _matches(list(words))
    asked = {code for _, code, _ in entities(question or "")}
    return bool(found) and sum(e - s for _, _, s, e in found) == len(words) and all(c in asked for _, c, _, _ in found)


_NAME = r"(?:[A-Z][\w'’-]+\s+)*[A-Z][\w'’-]+"


def hedged(text: str, words: Sequence[str]) -> bool:
    """``words`` occur in ``text`` coordinated with another name ("Pakistan and northern India", "Europe or
    Africa"): a list of candidates is not one answer (rule 4). A name that contains ``words`` itself is no
    other candidate ("Microsoft Technologies and Microsoft")."""
    if not words:
        return False
    phrase = r"\W+".join(re.escape(w) for w in words)
    pattern = (rf"(?P<before>{_NAME})\s*,?\s+(?:and|or)\s+(?:\w+\s+)?(?i:{phrase})\b"
               rf"|\b(?i:{phrase})\s*,?\s+(?:and|or)\s+(?:the\s+)?(?P<after>{_NAME})")
    folded = "".join(ch for ch in unicodedata.normalize("NFKD", text) if unicodedata.category(ch) != "Mn")
    own = set(words)
    return any(not own & set(tokens(m.group("before") or m.group("after"))) for m in re.finditer(pattern, folded))


# A question that asks for a city or a currency: an answer naming only countries / continents / states (or
# their demonyms) leaves the slot empty ("Zimbabwe is a country in East Africa" for its capital, rules 3, 10);
# one that asks for a language or a code is not answered by continents alone ("Botswana is a country in Africa";
# a demonym may be the language: "French").
_FINER = re.compile(
    r"\b(?:capital(?: city)? of|(?:which|what) (?:city|town|currency)|currency (?:of|is)|in what city)\b")
_NOT_A_CONTINENT = re.compile(r"\b(?:language|languages|spoken|(?:calling|dialling|dialing|country) code|domain)\b")


def places_only(words: Sequence[str], question: str | None) -> bool:
    """For a question asking a currency (a city), ``words`` (an answer span) name only countries, continents or
    US states (and a continent); for one asking a language or a code, only continents: the asked slot is not
    filled."""
    q = (question or "").casefold()
    if not words or asked_type(question):
        return False
    # "South America" loses its direction word to the answer frame: a lone "America(s)" is a continent here
    found = list(_matches(list(words))) + [
        ("continent", "AM", i, i + 1) for i, w in enumerate(words) if w in ("america", "americas")]
    if sum(e - s for _, _, s, e in found) < len(words):
        return False
    if _NOT_A_CONTINENT.search(q):
        return all(kind == "continent" for kind, _, _, _ in found)
    # a country can be a city ("Monaco", "Singapore"), a continent cannot
    return bool(_FINER.search(q)) and ("currency" in q or any(kind == "continent" for kind, _, _, _ in found))


# ---------------------------------------------------------------- choice questions

_COMPARATIVE = re.compile(
    r"\b(first|earlier|earliest|later|latest|last|older|oldest|younger|youngest|more|most|less|least|fewer|"
    r"longer|shorter|larger|largest|bigger|biggest|smaller|smallest|higher|highest|lower|taller|farther|"
    r"further|closer|newer|newest|before|after|greater|greatest|better|best|longest|shortest|tallest|heavier|"
    r"heaviest|faster|fastest|slower|deeper|wider|richer)\b")
_SIBLINGS = {"more": "most", "less": "least", "first": "earlier earliest before", "earlier": "first earliest before",
             "later": "latest after last", "last": "later latest after", "fewer": "fewest less least"}


_LEAD = re.compile(r"(?i:who|which|what|whose|is|are|was|were|did|does|do)\b.*?\s(?=(?:[A-Z][\w'’.!-]*\s+)*"
                   r"[A-Z][\w'’.!-]*$)")


def choice_options(question: str | None) -> tuple[list[tuple[str, ...]], set[str]] | None:
    """The two options of a choice question (token tuples) and the predicate words an answer must say to pick
    one; None for other questions."""
    if not question:
        return None
    for clause in re.split(r"[,;:?]", question):
        parts = re.split(r"\s+or\s+", clause.strip())
        if len(parts) != 2:
            continue
        lead = _LEAD.match(parts[0])  # no comma before the options: "Who ... longer Eric Gaffney or Pearl Jam?"
        if lead:
            parts[0] = parts[0][lead.end():]
        opts = [tuple(t for t in tokens(re.sub(r"^(?:the|either)\s+", "", p.strip(), flags=re.I)))
                for p in parts]
        if not all(opts) or opts[0] == opts[1] or len(opts[0]) > 8 or len(opts[1]) > 8:
            continue
        rest = tokens(question.replace(clause, " ") + " " + (lead.group() if lead else ""))
        comp = [m.group(1) for m in _COMPARATIVE.finditer(" ".join(rest))
                if m.group(1) not in ENGLISH_STOP_WORDS - {"more", "most", "less", "first", "last", "before",
                                                           "after", "fewer", "further"}]
        if comp:
            w = comp[0]
            pred = {w, *_SIBLINGS.get(w, "").split(), re.sub(r"er$", "est", w), re.sub(r"est$", "er", w), "than"}
        else:  # "Which plant, A or B, can be found in ...": a content word after the type noun
            words = [t for t in rest if t not in ENGLISH_STOP_WORDS and t not in {"which", "who", "what"}]
            pred = set(words[1:] if rest and rest[0] in {"which", "what"} else words)
        return opts, pred - {""}
    return None


_ANSWER_IS = re.compile(
    r"^(?:the\s+)?answer\b(?:\s+to\s+(?:this|the|your)\s+question)?(?:\s+is)?\s*[:\-–—]?\s*", re.I)
_LABEL = re.compile(r"([A-Z][a-z]+):\s*")  # "Title: Bo Li"


def picked_option(text: str, options: list[tuple[str, ...]], predicate: set[str]) -> int | None:
    """Index of the option ``text`` picks (the one it names first), or None when it names neither option or
    does not say the predicate (a description of one option is no pick, rule 13)."""
    text = _ANSWER_IS.sub("", text.strip())  # "The answer to this question is: Bo Li."
    label = _LABEL.match(text)
    if label and label.group(1).casefold() not in {t for opt in options for t in opt}:  # not "Perri: a film"
        text = text[label.end():]
    head = re.split(r"\s*(?:[.!;:](?:\s|$)| [-–—] )", text, maxsplit=1)[0]
    head = tuple(tokens(re.sub(r"^(?:the)\b\W*", "", head, flags=re.I)))
    if head in options:  # a bare name as the answer ("Bo Li." / "Bo Li - the elder one")
        return options.index(head)
    toks = tokens(text)
    if not predicate & set(toks):
        return None
    first = []
    for k, opt in enumerate(options):
        spans = find_spans(opt, toks)
        if not spans:  # a distinctive word of the option ("Washington" for "Draymond Washington")
            other = set(options[1 - k])
            spans = [(i, i + 1) for i, t in enumerate(toks)
                     if t in opt and t not in other and t not in ENGLISH_STOP_WORDS and len(t) > 3]
        if spans:
            first.append((spans[0][0], k, spans[0][1]))
    if len(first) == 2:  # "A or B is a board game": both options joined, no pick (rule 13)
        (_, _, e1), (s2, _, _) = sorted(first)
        if s2 - e1 <= 1 and set(toks[e1:s2]) <= {"or", "and"}:
            return None
    return min(first)[1] if first else None


# ---------------------------------------------------------------- verdicts


def slot_equivalent(a: str, b: str, question: str | None) -> int | None:
    """1 / 0 when the question's slot decides the pair (both answers pick the same option / name the same first
    entity of the asked type, unhedged), None when it does not (no choice or typed question, or neither answer
    fills the slot)."""
    choice = choice_options(question)
    if choice:
        pa, pb = picked_option(a, *choice), picked_option(b, *choice)
        return int(pa is not None and pa == pb)  # neither picks: no answer (rules 5, 13)
    kind = asked_type(question)
    if kind:
        (ea, ha), (eb, hb) = first_entity(a, kind, question), first_entity(b, kind, question)
        if ea or eb:
            return int(ea == eb and not ha and not hb)
    return None


def slot_correct(response: str, alias: str, question: str | None) -> bool | None:
    """Whether ``response`` fills the slot with ``alias`` (an option of a choice question, or an entity of the
    asked type), None when the slot does not decide (the alias is neither, or the response names no entity of
    the type)."""
    choice = choice_options(question)
    if choice:
        want = tuple(tokens(re.sub(r"^(?:the)\s+", "", alias.strip(), flags=re.I)))
        hits = [k for k, opt in enumerate(choice[0]) if want and (find_spans(want, opt) or find_spans(opt, want))]
        if len(hits) == 1:
            return picked_option(response, *choice) == hits[0]
    kind = asked_type(question)
    if kind:
        code, _ = first_entity(alias, kind)
        if code:
            got, hedge = first_entity(response, kind, question)
            if got:
                return got == code and not hedge
    return None
