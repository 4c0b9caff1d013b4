"""Lexical analysis for search: unicode word tokens, English stop words, and the Porter stemmer.

``tokenize`` lowercases (casefold) and strips accents, splits on anything that is not a letter or digit (an
apostrophe inside a word is kept, then a possessive ``'s`` dropped), drops stop words, and stems. Runs of CJK
characters (no spaces between words) become overlapping character bigrams. No dependencies.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

__all__ = [
    "STOP_WORDS",
    "asked_months",
    "author_words",
    "mentions_time",
    "named_words",
    "neutral_names",
    "stem",
    "temporal_question",
    "tokenize",
]

# A classic English list (close to the one of Lucene/NLTK), plus the words of questions ("what did she ...")
# and of chat filler, which carry nothing for retrieval. Contractions appear without their apostrophe.
STOP_WORDS = frozenset(
    """
    a about above after again against all also am an and any are aren arent as at be because been before being below
    between both but by can cannot cant could couldn couldnt did didn didnt do does doesn doesnt doing don dont down
    during each either else ever few for from further had hadn hadnt has hasn hasnt have haven havent having he hed
    hell hes her here heres hers herself him himself his how hows however i id ill im ive if in into is isn isnt it
    its itself just let lets ll me might mightn more most must mustn my myself neither no nor not now o of off on
    once only or other ought our ours ourselves out over own re s same shan shant she shed shell shes should shouldn
    shouldnt so some such t than that thats the their theirs them themselves then there theres these they theyd
    theyll theyre theyve this those through to too under until up upon us ve very was wasn wasnt we wed well were
    weren werent weve what whats when whens where wheres which while who whom whos whose why whys will with won wont
    would wouldn wouldnt y you youd youll your youre yours yourself yourselves youve yes yeah yep oh ok okay hey hi
    hello wow um uh hmm lol haha thanks thank please
    """.split()  # noqa: SIM905 - a word list, not a sentence
)

# letters and digits, plus the combining marks that \w misses (accents, Indic and Thai vowel signs)
_LETTER = r"(?:[^\W_]|[\u0300-\u036f\u0900-\u0dff\u0e00-\u0eff\u1000-\u109f])"
_WORD = re.compile(rf"{_LETTER}+(?:'{_LETTER}+)*")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+")


def tokenize(text: str) -> list[str]:
    """Index terms of ``text``, in order (repeats kept): lowercase, no accents, no stop words, stemmed."""
    if not text:
        return []
    out: list[str] = []
    for word in _WORD.findall(_fold(text)):
        if word.isascii():
            _add_word(word, out)
            continue
        start = 0
        for match in _CJK.finditer(word):  # split a token mixing scripts at its CJK runs
            if match.start() > start:
                _add_word(word[start : match.start()], out)
            run = match.group()
            out.extend([run] if len(run) == 1 else [run[i : i + 2] for i in range(len(run) - 1)])
            start = match.end()
        if start < len(word):
            _add_word(word[start:], out)
    return out


def _add_word(word: str, out: list[str]) -> None:
    if "'" in word:
        if word.endswith("'s"):
            word = word[:-2]
        word = word.replace("'", "")
    if word and word not in STOP_WORDS:
        out.append(_stem_cached(word))


def _fold(text: str) -> str:
    """Casefold, compatibility forms unified, curly apostrophes straight, accents on Latin letters dropped."""
    text = text.casefold().replace("’", "'")
    if text.isascii():
        return text
    kept: list[str] = []
    latin = False
    for c in unicodedata.normalize("NFKD", text):
        if unicodedata.combining(c):
            if latin:  # an accent on a Latin letter; marks of other scripts (kana voicing, Indic vowels) stay
                continue
        else:
            latin = c < "\u0250"
        kept.append(c)
    return unicodedata.normalize("NFC", "".join(kept))


@functools.lru_cache(maxsize=65536)
def _stem_cached(word: str) -> str:
    return stem(word)


# --------------------------------------------------------------------------------------------------------------
# Retrieval signals beyond the words: who said a memory, and whether it says when something happened
# --------------------------------------------------------------------------------------------------------------

# Words that place an event in time: relative days and periods, weekdays, months, years, "ago", "since". General
# English, written before looking at how it scores (no LoCoMo phrase was added for its questions).
_MONTHS = "january february march april may june july august september october november december"
_TIME_WORDS = (
    "yesterday today tonight tomorrow ago recently lately earlier later since weekend "
    "monday tuesday wednesday thursday friday saturday sunday " + _MONTHS
)
_TIME = re.compile(
    r"\b(?:" + "|".join(_TIME_WORDS.split()) + r")\b"
    r"|\b(?:last|next|this|past|coming|few|couple of|other) (?:day|days|night|week|weeks|month|months|year|years|"
    r"weekend|morning|afternoon|evening|summer|winter|spring|fall|autumn|time)\b"
    r"|\b(?:19|20)\d\d\b"
    r"|\b(?:\d+|a|an|one|two|three|four|five|six|seven|eight|nine|ten|few|several) (?:days?|weeks?|months?|years?)\b",
    re.IGNORECASE,
)
# A question asking when something happened, or for how long.
_WHEN = re.compile(
    r"^\W*when\b|\bwhen (?:did|was|were|is|are|will|does|do|has|had|would)\b|\bhow long\b|"
    r"\b(?:what|which) (?:year|month|day|date|week|weekend|time of year)\b|\bhow many (?:years|months|weeks|days)\b|"
    r"\bsince when\b",
    re.IGNORECASE,
)


# A month a query names, with the day and the year when given ("on 7 July, 2023", "in December 2023", "in June",
# "May 23, 2023"). "May" alone is the verb as often as the month: it counts only beside a day or a year.
_MONTH_NUMBERS = {name: i + 1 for i, name in enumerate(_MONTHS.split())}
_ASKED_MONTH = re.compile(
    r"\b(?:(\d{1,2})(?:st|nd|rd|th)?\s+(?:of\s+)?)?(" + "|".join(_MONTHS.split()) + r")\b"
    r"(?:\s+(\d{1,2})(?:st|nd|rd|th)?\b)?(?:,?\s+((?:19|20)\d\d)\b)?",
    re.IGNORECASE,
)


def asked_months(query: str) -> list[tuple[int | None, int]]:
    """The (year or None, month) pairs ``query`` names: ``"on 7 July, 2023"`` -> ``[(2023, 7)]``,
    ``"in June"`` -> ``[(None, 6)]``; a bare "may" is not May."""
    out: list[tuple[int | None, int]] = []
    for match in _ASKED_MONTH.finditer(query or ""):
        day_before, month, day_after, year = match.groups()
        if month.lower() == "may" and not (day_before or day_after or year):
            continue
        pair = (int(year) if year else None, _MONTH_NUMBERS[month.lower()])
        if pair not in out:
            out.append(pair)
    return out


def mentions_time(text: str) -> bool:
    """Whether ``text`` places something in time ("yesterday", "last week", "in May", "3 years ago", "2022")."""
    return bool(text) and _TIME.search(text) is not None


def temporal_question(query: str) -> bool:
    """Whether ``query`` asks when something happened or how long ago ("When did ...", "How long has ...")."""
    return bool(query) and _WHEN.search(query) is not None


# Authors that are roles or programs, not people: a query saying "user" or "model" names none of them.
_ROLE_AUTHORS = frozenset(["user", "model", "assistant", "system", "tool", "agent", "bot", "ai"])


def author_words(author: str) -> list[str]:
    """The words that name an author in a query: its words casefolded, unstemmed, stop words out
    (``"Caroline"`` -> ``["caroline"]``, ``"Dr. Ann Lee"`` -> ``["dr", "ann", "lee"]``). None for an author that
    is a role or a program rather than a person's name (``user``, ``model``, an ADK agent's identifier such as
    ``travel_agent`` or ``bot2``): "travel" in a query must not prefer everything that agent said."""
    if not author or "_" in author or any(c.isdigit() for c in author):
        return []
    words = [w for w in named_words(author) if w not in STOP_WORDS]
    return [] if not words or " ".join(words) in _ROLE_AUTHORS else words


def named_words(text: str) -> list[str]:
    """``text``'s words as ``author_words`` writes them (casefolded, unstemmed, a possessive ``'s`` dropped)."""
    out = []
    for word in _WORD.findall(_fold(text)) if text else []:
        if word.endswith("'s"):
            word = word[:-2]
        word = word.replace("'", "")
        if word:
            out.append(word)
    return out


# A word of the original text (case kept), a straight or curly apostrophe inside it: what ``named_words`` reads.
_RAW_WORD = re.compile(rf"{_LETTER}+(?:['\u2019]{_LETTER}+)*")
_NAME_GAP = re.compile(r"[\s.]*")  # between two words of one name ("Ann Lee", "Dr. Lee")


def neutral_names(text: str, names: Iterable[str]) -> str:
    """``text`` with each run of words naming one of ``names`` (words as ``named_words`` writes them) replaced by
    "they", or "their" where the run ends in a possessive: ``"What do Melanie's kids like?"`` with
    ``{"melanie"}`` -> ``"What do their kids like?"``. The other words are kept as they are."""
    wanted = set(names)
    if not text or not wanted:
        return text
    out: list[str] = []
    done = 0  # text[:done] is in out
    run_end = -1  # end of the name run being replaced, or -1
    for match in _RAW_WORD.finditer(text):
        words = named_words(match.group())
        if len(words) != 1 or words[0] not in wanted:
            run_end = -1
            continue
        possessive = _fold(match.group()).endswith("'s")
        if run_end >= 0 and _NAME_GAP.fullmatch(text, run_end, match.start()):
            out[-1] = "their" if possessive else "they"  # the run's next word: one pronoun for the whole name
        else:
            out.append(text[done : match.start()])
            out.append("their" if possessive else "they")
        done = run_end = match.end()
    out.append(text[done:])
    return "".join(out)


# --------------------------------------------------------------------------------------------------------------
# The Porter stemmer (M.F. Porter, "An algorithm for suffix stripping", 1980), for lowercase ASCII words
# --------------------------------------------------------------------------------------------------------------


def _is_consonant(word: str, i: int) -> bool:
    c = word[i]
    if c in "aeiou":
        return False
    if c == "y":
        return i == 0 or not _is_consonant(word, i - 1)
    return True


def _measure(stem_: str) -> int:
    """m in [C](VC)^m[V]: the number of vowel-consonant sequences."""
    m = 0
    previous_vowel = False
    for i in range(len(stem_)):
        vowel = not _is_consonant(stem_, i)
        if previous_vowel and not vowel:
            m += 1
        previous_vowel = vowel
    return m


def _has_vowel(stem_: str) -> bool:
    return any(not _is_consonant(stem_, i) for i in range(len(stem_)))


def _ends_double_consonant(word: str) -> bool:
    return len(word) >= 2 and word[-1] == word[-2] and _is_consonant(word, len(word) - 1)


def _cvc(word: str) -> bool:
    """consonant-vowel-consonant at the end, the last not w, x or y (hop -> hope, not hoop)."""
    if len(word) < 3:
        return False
    n = len(word)
    return (
        _is_consonant(word, n - 3)
        and not _is_consonant(word, n - 2)
        and _is_consonant(word, n - 1)
        and word[-1] not in "wxy"
    )


_STEP2 = (
    ("ational", "ate"),
    ("tional", "tion"),
    ("enci", "ence"),
    ("anci", "ance"),
    ("izer", "ize"),
    ("bli", "ble"),
    ("alli", "al"),
    ("entli", "ent"),
    ("eli", "e"),
    ("ousli", "ous"),
    ("ization", "ize"),
    ("ation", "ate"),
    ("ator", "ate"),
    ("alism", "al"),
    ("iveness", "ive"),
    ("fulness", "ful"),
    ("ousness", "ous"),
    ("aliti", "al"),
    ("iviti", "ive"),
    ("biliti", "ble"),
    ("logi", "log"),
)
_STEP3 = (
    ("icate", "ic"),
    ("ative", ""),
    ("alize", "al"),
    ("iciti", "ic"),
    ("ical", "ic"),
    ("ful", ""),
    ("ness", ""),
)
_STEP4 = (
    "al",
    "ance",
    "ence",
    "er",
    "ic",
    "able",
    "ible",
    "ant",
    "ement",
    "ment",
    "ent",
    "ion",
    "ou",
    "ism",
    "ate",
    "iti",
    "ous",
    "ive",
    "ize",
)


def stem(word: str) -> str:
    """The Porter stem of a lowercase word; words that are short or not plain ASCII letters are returned as-is."""
    if len(word) <= 2 or not (word.isascii() and word.isalpha()):
        return word
    w = word
    # step 1a: plurals
    if w.endswith("sses") or w.endswith("ies"):
        w = w[:-2]
    elif w.endswith("ss"):
        pass
    elif w.endswith("s"):
        w = w[:-1]
    # step 1b: -ed, -ing
    step1b_cleanup = False
    if w.endswith("eed"):
        if _measure(w[:-3]) > 0:
            w = w[:-1]
    elif w.endswith("ed") and _has_vowel(w[:-2]):
        w = w[:-2]
        step1b_cleanup = True
    elif w.endswith("ing") and _has_vowel(w[:-3]):
        w = w[:-3]
        step1b_cleanup = True
    if step1b_cleanup:
        if w.endswith(("at", "bl", "iz")):
            w += "e"
        elif _ends_double_consonant(w) and w[-1] not in "lsz":
            w = w[:-1]
        elif _measure(w) == 1 and _cvc(w):
            w += "e"
    # step 1c: y -> i after a vowel-containing stem
    if w.endswith("y") and _has_vowel(w[:-1]):
        w = w[:-1] + "i"
    # step 2 and 3: double and single suffixes, when the stem has m > 0
    for table in (_STEP2, _STEP3):
        for suffix, replacement in table:
            if w.endswith(suffix):
                base = w[: -len(suffix)]
                if _measure(base) > 0:
                    w = base + replacement
                break
    # step 4: drop a suffix when the stem has m > 1
    for suffix in _STEP4:
        if w.endswith(suffix):
            base = w[: -len(suffix)]
            if _measure(base) > 1 and (suffix != "ion" or base.endswith(("s", "t"))):
                w = base
            break
    # step 5a: final e
    if w.endswith("e"):
        base = w[:-1]
        m = _measure(base)
        if m > 1 or (m == 1 and not _cvc(base)):
            w = base
    # step 5b: -ll -> -l when m > 1
    if _measure(w) > 1 and _ends_double_consonant(w) and w.endswith("l"):
        w = w[:-1]
    return w
