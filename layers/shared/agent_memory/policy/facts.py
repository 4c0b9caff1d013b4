"""The offline fact extractor: stable facts a user states about themself, found by patterns (no model).

``extract_facts(text)`` reads one memory's text (what the user said) and returns the facts it states, each
``{"category", "text"}`` with ``category`` one of ``policy.profile.CATEGORIES`` and ``text`` a short phrase in the
third person without a subject ("Allergic to peanuts", "Likes hiking", "Lives in Porto", "Sister: Ana"). The
phrases are canonical, so that ``policy.profile`` can tell two statements of the same fact apart from two
conflicting ones ("Likes sushi" then "Dislikes sushi": the newest wins).

It is precise rather than exhaustive: questions, hypotheticals ("if I lived in …", "I would like …") and
reported speech are skipped, and an object is kept only when it is short. ``bench/quality/profile_facts.py`` measures
it against a labelled set of LoCoMo turns.
"""

from __future__ import annotations

import re

from ..limits import MAX_FACT_OBJECT_WORDS, MAX_FACT_SOURCE_CHARS, MAX_FACTS_PER_TEXT

_I = re.IGNORECASE
_APOSTROPHES = str.maketrans({"’": "'", "‘": "'", "`": "'"})
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|\n+")
# Where an object ends: punctuation, or a clause that starts something else.
_OBJECT_END = re.compile(
    r"[.,;:!?()\"\[\]]|\s[-–—]\s|\b(?:but|because|since|so|though|although|when|while|which|who|whereas|"
    r"and (?:i|i'm|i've|it|it's|that|we|they|he|she|my|now|then|also)|especially|lately|these days|nowadays|"
    r"right now|at the moment|anymore|any more|for (?:years|ages|a while|a long time)|if|yesterday|today|tonight|"
    r"tomorrow|ago|recently|(?:this|last|next) (?:week|weekend|month|year|morning|night|summer|winter|spring|fall))\b",
    _I,
)
_TRAILING = re.compile(r"(?:\s+(?:too|as well|also|a lot|so much|very much|a bunch|really|now|though|either))+$", _I)
_LEADING = re.compile(r"^(?:the|a|an|some|all|any)\s+", _I)
# A sentence that states nothing about the present self: a question, a wish, a condition, someone else's words.
_NOT_A_STATEMENT = re.compile(
    r"\?\s*$|^\s*(?:if|when|do|does|did|would|could|should|can|will|have|has|what|why|how|who|where|which)\b|"
    r"\b(?:if i|would|wish|hope|maybe|might|could|should|imagine|pretend|suppose|you said|he said|she said|"
    r"they said|do you|did you|have you|are you)\b",
    _I,
)
_NEGATED = re.compile(r"\b(?:not|never|no longer|don't|doesn't|didn't|do not|won't|isn't|wasn't)\b", _I)

_SUBJECT = r"\bi(?:'m| am| was|'ve| have| had)?"
_ADVERBS = r"(?:(?:really|truly|absolutely|totally|just|also|still|always|do|definitely|honestly|kind of|sort of)\s+)*"

_NAME_WORD = r"[A-Z][a-zA-Z'-]{1,30}"
_NAME = re.compile(
    r"\b(?i:my name is|my name's|call me|you can call me|people call me|i go by)\s+"
    rf"({_NAME_WORD}(?:\s+{_NAME_WORD})?)\b"
)
_NAME_IM = re.compile(rf"^(?i:hi|hello|hey)?[,!\s]*(?i:i'm|i am|this is)\s+({_NAME_WORD})\s*(?:[.!,]|$|here\b)")
_NOT_NAME_WORDS = """
    Sorry Fine Good Great Glad Happy Here Home Just Not Okay Ok Ready Really Sure So Very Well Back Busy Tired Excited
    Thrilled Still Also Always Going Doing Trying Working Looking Thinking Feeling Hoping Planning Currently Actually
    Totally Definitely Never Off On In At The A An Afraid Alright Done Lucky Proud Grateful Thankful Curious Interested
    Sad Bummed Stoked Super Pretty Quite Kinda Almost Finally Honestly Literally Learning Loving Starting
"""
_NOT_NAMES = frozenset(_NOT_NAME_WORDS.split())

_ALLERGY = [
    re.compile(rf"{_SUBJECT}\s+{_ADVERBS}(?:severely |deathly |very |highly |mildly )?allergic to\s+(?P<o>.+)", _I),
    re.compile(
        r"\bi have (?:an? )?(?:(?:severe|mild|bad|serious|slight|deadly|terrible)\s+)?(?P<o>[\w -]{2,40}?) allergy\b",
        _I,
    ),
    re.compile(r"\bmy (?P<o>[\w -]{2,40}?) allerg(?:y|ies)\b", _I),
    re.compile(r"\b(?:allergies|allergy) (?:to|is|are)\s+(?P<o>.+)", _I),
]
_DIET_WORDS = (
    r"vegetarian|vegan|pescatarian|pescetarian|gluten[- ]free|dairy[- ]free|lactose[- ]intolerant|"
    r"keto|kosher|halal|celiac|coeliac|diabetic|teetotal(?:er)?|sober|paleo|plant[- ]based"
)
_DIET = [
    re.compile(
        rf"{_SUBJECT}\s+{_ADVERBS}(?:(?:a|an|fully|strictly|strict|mostly|full|committed|lifelong|now)\s+)*(?P<o>{_DIET_WORDS})\b",
        _I,
    ),
    re.compile(
        rf"\bi(?: eat| follow| keep| am on|'m on| went| have gone|'ve gone)\s+(?:a |an )?(?P<o>{_DIET_WORDS})", _I
    ),
    re.compile(r"\bi(?:'m| am) on an? (?P<o>[\w -]{2,30}?) diet\b", _I),
    re.compile(r"\bi (?:don't|do not|never|can't|cannot|no longer) (?:eat|drink)\s+(?P<o>.+)", _I),
    re.compile(r"\bi(?:'m| am) (?:lactose|gluten) intolerant\b()(?P<o>)", _I),
]
_LIKE_VERBS = {
    "love": "Loves",
    "loved": "Loves",
    "adore": "Loves",
    "like": "Likes",
    "enjoy": "Enjoys",
    "prefer": "Prefers",
}
_LIKE = re.compile(rf"\bi\s+{_ADVERBS}(?P<v>love|loved|adore|like|enjoy|prefer)\s+(?P<o>.+)", _I)
# What the user says makes them happy: "Dancing makes me so happy", "Blue calms me", "Art gives me a sense of …".
_JOY = re.compile(
    r"^(?:and |but |also |plus |honestly )?(?P<o>[A-Za-z][\w -]{1,30}?) (?:really |always |just |truly )?"
    r"(?:makes? me (?:so |really |very )?happy|brings? me (?:so much |such |a lot of |great )?joy|calms? me|"
    r"relaxes me|gives? me (?:a sense of \w+|joy|peace|happiness|energy))",
    _I,
)
_OTHERS = re.compile(r"\b(?:my|your|his|her|their|our|it|that|this|they|you|he|she|we|seeing|being|having)\b", _I)
_HOBBIES = [
    (re.compile(r"\bi (?:also |still |sometimes |often )?play (?:the )?(?P<o>[a-z][\w -]+)", _I), "Plays"),
    (
        re.compile(
            r"\b(?:i |just |recently )*(?:started|began|took up) "
            r"(?:doing|learning|taking|practicing|practising|playing) (?P<o>.+)",
            _I,
        ),
        "Does",
    ),
    (
        re.compile(r"(?:^|\bi (?:also )?|\bbeen (?:busy )?)volunteer(?:s|ing|ed)? (?:at|for|with) (?P<o>.+)", _I),
        "Volunteers at",
    ),
    (re.compile(r"\b(?:i |just |recently )*started helping(?: out)? (?:at|with|for) (?P<o>.+)", _I), "Helps with"),
]
_NOT_HOBBY = re.compile(r"^(?:with|at|in|on|for|around|along|a bit|a lot|it|games? with)\b", _I)
_FAN = re.compile(
    rf"\bi(?:'m| am)\s+{_ADVERBS}(?:a\s+)?(?:big |huge |great |real |massive )?"
    r"(?:fan of|into|passionate about|obsessed with|crazy about|keen on|fond of)\s+(?P<o>.+)",
    _I,
)
_FAVOURITE = re.compile(
    r"\bmy (?:all[- ]time |absolute )?fav(?:ou?rite)?\s+(?P<k>[\w -]{2,30}?)\s+"
    r"(?:is|are|has to be|would be)\s+(?P<o>.+)",
    _I,
)
_DISLIKE = [
    re.compile(
        rf"\bi\s+{_ADVERBS}(?:hate|dislike|detest|loathe|can't stand|cannot stand|can't bear|don't like|do not like|"
        r"don't enjoy|do not enjoy|don't care for|really don't like|am not a fan of|'m not a fan of|"
        r"am not into|'m not into)\s+(?P<o>.+)",
        _I,
    ),
    re.compile(r"\bi(?:'m| am) not (?:a )?(?:big |huge )?fan of\s+(?P<o>.+)", _I),
]
_PLACES = [
    (re.compile(r"\bi(?:'ve| have)? (?:been )?liv(?:e|ing) in\s+(?P<o>.+)", _I), "Lives in"),
    (re.compile(r"\bi(?:'m| am) (?:currently )?(?:living|based|located|settled) in\s+(?P<o>.+)", _I), "Lives in"),
    (re.compile(r"\bi (?:just |recently )?(?:moved|relocated) to\s+(?P<o>.+)", _I), "Moved to"),
    (re.compile(r"\bi(?:'m| am| come) (?:originally )?from\s+(?P<o>.+)", _I), "Is from"),
    (re.compile(r"\bi grew up in\s+(?P<o>.+)", _I), "Grew up in"),
    (re.compile(r"\bi was born in\s+(?P<o>.+)", _I), "Was born in"),
    (re.compile(r"\bi (?:used to live|lived) in\s+(?P<o>.+)", _I), "Lived in"),
    (
        re.compile(
            r"\bi(?:'ve| have)? (?:just |recently |once |already )?(?:visited|been to|traveled to|travelled to|"
            r"went to|took a trip to|was in)\s+(?P<o>.+)",
            _I,
        ),
        "Visited",
    ),
    (re.compile(r"\bmy hometown is\s+(?P<o>.+)", _I), "Is from"),
]
_RELATIONS = (
    r"wife|husband|partner|spouse|fianc[eé]e?|boyfriend|girlfriend|sister|brother|mom|mother|mum|dad|father|son|"
    r"daughter|grandma|grandmother|grandpa|grandfather|aunt|uncle|cousin|niece|nephew|friend|best friend|"
    r"roommate|boss|colleague|coworker|co-worker|neighbou?r|mentor|kid|child|baby|dog|cat|puppy|kitten|pet|"
    r"step(?:mom|mother|dad|father|son|daughter|sister|brother)|guinea pig|hamster|rabbit|bunny|bird|parrot|fish|"
    r"turtle|horse|snake|lizard"
)
_PERSON = [
    re.compile(
        r"\b(?i:my (?:(?:older|younger|little|big|elder|twin|best|oldest|youngest|new|old|late)\s+)?"
        rf"(?P<r>{_RELATIONS})"
        rf"(?:'s name is| is named| is called| named| called|,)?)\s+(?P<o>{_NAME_WORD})\b"
    ),
    re.compile(
        rf"\b(?i:i have an? (?:(?:older|younger|little|big|elder|twin|new)\s+)?(?P<r>{_RELATIONS}) "
        rf"(?:named|called))\s+(?P<o>{_NAME_WORD})\b"
    ),
    re.compile(
        rf"\b(?i:i(?:'m| am) (?:married to|engaged to|dating|seeing))\s+(?P<o>{_NAME_WORD})\b()(?P<r>)",
    ),
    re.compile(rf"\b(?P<o>{_NAME_WORD}), (?i:my (?:(?:little|new|old|sweet)\s+)?(?P<r>{_RELATIONS}))\b"),
    re.compile(
        r"\bi have (?P<n>a|an|one|two|three|four|five|\d) (?P<r>kids?|children|child|sons?|daughters?|sisters?|"
        r"brothers?|dogs?|cats?|siblings?|grandchildren|grandkids)\b",
        _I,
    ),
]
# Someone the user names by relation only: "my kids", "my husband".
_KIN = re.compile(
    r"\bmy (?P<r>kids|children|husband|wife|partner|boyfriend|girlfriend|fianc[eé]e?|sons?|daughters?|grandkids|"
    r"grandchildren)\b",
    _I,
)
_NOT_PERSON_NAMES = _NOT_NAMES | frozenset({"I", "It", "He", "She", "They", "We", "You", "This", "That", "My"})
_JOBS = (
    r"engineer|developer|programmer|teacher|nurse|doctor|physician|surgeon|lawyer|attorney|designer|manager|"
    r"accountant|architect|chef|cook|writer|author|journalist|artist|painter|musician|photographer|scientist|"
    r"researcher|professor|lecturer|student|consultant|analyst|dentist|pharmacist|therapist|counselou?r|"
    r"social worker|firefighter|police officer|pilot|driver|electrician|plumber|carpenter|mechanic|farmer|"
    r"librarian|veterinarian|vet|entrepreneur|founder|freelancer|barista|waiter|waitress|cashier|"
    r"salesperson|marketer|recruiter|editor|translator|economist|psychologist|intern|retiree|retired"
)
_WORK = [
    (
        re.compile(
            r"\bmy (?:own )?(?P<o>business|biz|store|shop|studio|dance studio|company|startup|start-up|restaurant|"
            r"bakery|cafe|firm|practice|clinic|salon|agency)\b",
            _I,
        ),
        "Runs own",
    ),
    (re.compile(r"\bmy (?:old |former |new |previous |current )?job (?:at|with|in) (?P<o>.+)", _I), "Job at"),
    (re.compile(r"\bi(?:'ve| have)? (?:been )?work(?:s|ing|ed)? (?:as an?|as)\s+(?P<o>.+)", _I), "Works as"),
    (re.compile(r"\bi(?:'m| am) (?:currently )?working (?:as an?|as)\s+(?P<o>.+)", _I), "Works as"),
    (
        re.compile(r"\bi(?:'ve| have)? (?:been )?work(?:s|ing)? (?:at|for)\s+(?P<o>.+)", _I),
        "Works at",
    ),
    (re.compile(r"\bi(?:'m| am) (?:currently )?working (?:at|for)\s+(?P<o>.+)", _I), "Works at"),
    (re.compile(r"\bi(?:'ve| have)? (?:been )?work(?:s|ing)? in\s+(?P<o>.+)", _I), "Works in"),
    (re.compile(r"\bmy (?:job|profession|occupation) is\s+(?P<o>.+)", _I), "Works as"),
    (
        re.compile(
            rf"\bi(?:'m| am) (?:an? )?(?P<o>(?:[\w-]+ ){{0,2}}(?:{_JOBS}))\b(?! of\b)",
            _I,
        ),
        "Is a",
    ),
    (re.compile(r"\bi(?:'m| am) studying\s+(?P<o>.+)", _I), "Studies"),
    (re.compile(r"\bi study\s+(?P<o>.+)", _I), "Studies"),
    (re.compile(r"\bi(?:'m| am) (?:a student|studying) at\s+(?P<o>.+)", _I), "Studies at"),
]
# Objects that make no fact: pronouns, vague stand-ins, and "to" + a verb of thinking.
_VAGUE = re.compile(
    r"^(?:it|this|that|them|those|these|you|him|her|us|me|myself|things?|stuff|something|everything|anything|"
    r"nothing|one|ones|how|what|when|where|why|who|which|here|there|to (?:think|know|say|see|hear|believe|imagine|"
    r"ask|tell|make sure|help|chat|talk)|the (?:idea|way|fact|thought|feeling)|so|too|very|a lot|more|most|"
    r"the most|being|doing|having|getting|going)\b",
    _I,
)


def _sentences(text: str) -> list[str]:
    text = text.translate(_APOSTROPHES)[:MAX_FACT_SOURCE_CHARS]
    return [s.strip() for s in _SENTENCE.split(text) if s and s.strip()]


_QUOTED = re.compile(r'^\s*"([^"]{2,60})"')


def _object(raw: str) -> str | None:
    """The object of a statement: the words up to where the clause ends, tidied; None when it says nothing."""
    cut = _OBJECT_END.search(raw)
    words = (raw[: cut.start()] if cut else raw).strip()
    if quoted := _QUOTED.match(raw):  # a title: "Becoming Nicole"
        return quoted.group(1).strip()
    words = _TRAILING.sub("", words).strip(" '\"-")
    words = _LEADING.sub("", words) if len(words.split()) > 1 else words
    if not words or _VAGUE.match(words) or len(words.split()) > MAX_FACT_OBJECT_WORDS:
        return None
    return words


_PLACE_NAME = re.compile(r"^(?:the )?[A-Z][\w'.-]*(?:\s+(?:of|de|do|da|du|del|la|le|the|upon|[A-Z][\w'.-]*))*")
_AFTER_PLACE_WORDS = """in on at for with and to from by near during when where while as a an the twice
    once again before last this next every recently ago yesterday today years months weeks days"""
_AFTER_PLACE = frozenset(_AFTER_PLACE_WORDS.split())
_NOT_JOB_WORDS_TEXT = "good great bad terrible really very huge big real total proper decent awful better"
_NOT_JOB_WORDS = frozenset(_NOT_JOB_WORDS_TEXT.split())


def _place(obj: str) -> str | None:
    """A named place as its capitalised words ("Porto", "New York", "the Isle of Man"); a common noun place
    ("the countryside") as its first three words."""
    match = _PLACE_NAME.match(obj)
    if match is None:
        return " ".join(obj.split()[:3]) or None
    name = re.sub(r"(?:\s+(?:of|de|do|da|du|del|la|le|the|upon))+$", "", match.group(0))
    following = obj[match.end() :].split()
    if following and following[0].isalpha() and following[0].islower() and following[0] not in _AFTER_PLACE:
        return None  # a name that qualifies a noun ("an LGBTQ conference"): an event, not a place
    return name or None


def _cap(phrase: str) -> str:
    return phrase[:1].upper() + phrase[1:]


def _sentence_facts(sentence: str) -> list[tuple[str, str]]:
    facts: list[tuple[str, str]] = []
    if not sentence or _NOT_A_STATEMENT.search(sentence):
        return facts
    for match in (_NAME.search(sentence), _NAME_IM.search(sentence)):
        if match and match.group(1).split()[0] not in _NOT_NAMES:
            facts.append(("name", f"Name: {match.group(1)}"))
            break
    for pattern in _ALLERGY:
        if (match := pattern.search(sentence)) and (obj := _object(match.group("o"))):
            facts.append(("allergy", f"Allergic to {obj}"))
            break
    for pattern in _DIET:
        match = pattern.search(sentence)
        if match is None:
            continue
        if not match.group("o"):  # "I'm lactose intolerant"
            facts.append(("diet", _cap(match.group(0).split(" ", 1)[1].removeprefix("am ").removeprefix("'m "))))
            break
        obj = _object(match.group("o"))
        if obj is None:
            continue
        if re.search(r"\b(?:don't|do not|never|can't|cannot|no longer)\b", match.group(0), _I):
            verb = "drink" if re.search(r"\bdrink\b", match.group(0), _I) else "eat"
            facts.append(("diet", f"Does not {verb} {obj}"))
        elif "diet" in match.group(0).lower():
            facts.append(("diet", f"On a {obj} diet"))
        else:
            facts.append(("diet", _cap(obj.lower()) if obj.lower() != obj else _cap(obj)))
        break
    disliked = False
    for pattern in _DISLIKE:
        if (match := pattern.search(sentence)) and (obj := _object(match.group("o"))):
            facts.append(("dislike", f"Dislikes {obj}"))
            disliked = True
            break
    if not disliked:
        match = _LIKE.search(sentence)
        prefix = sentence[: match.start()] if match else ""
        if match and not _NEGATED.search(prefix[-20:]) and (obj := _object(match.group("o"))):
            if not re.match(r"(?:to )?(?:be|have|get|go back|try|do)\b", obj, _I) or len(obj.split()) > 1:
                facts.append(("preference", f"{_LIKE_VERBS[match.group('v').lower()]} {obj}"))
        elif (match := _FAN.search(sentence)) and (obj := _object(match.group("o"))):
            facts.append(("preference", f"Likes {obj}"))
        if (match := _FAVOURITE.search(sentence)) and (obj := _object(match.group("o"))):
            facts.append(("preference", f"Favorite {match.group('k').strip().lower()}: {obj}"))
        if (match := _JOY.search(sentence)) and (obj := _object(match.group("o"))) and not _OTHERS.search(obj):
            facts.append(("preference", f"Likes {obj[:1].lower() + obj[1:] if obj[1:2].islower() else obj}"))
    for pattern, verb in _HOBBIES:
        match = pattern.search(sentence)
        if match and not _NOT_HOBBY.match(match.group("o")) and (obj := _object(match.group("o"))):
            facts.append(("preference" if verb in ("Plays", "Does") else "other", f"{verb} {obj}"))
            break
    for pattern, verb in _PLACES:
        match = pattern.search(sentence)
        if match and (obj := _object(match.group("o"))):
            if verb == "Visited" and not obj[:1].isupper():  # "went to the gym": only named places
                continue
            common = re.match(r"(?:a |an |the )?(?:city|town|village|countryside|suburbs|country)\b", obj, _I)
            if verb in ("Lives in", "Moved to", "Is from", "Grew up in") and not obj[:1].isupper() and not common:
                continue
            if (place := _place(obj)) is not None:
                facts.append(("place", f"{verb} {place}"))
            break
    for pattern in _PERSON:
        match = pattern.search(sentence)
        if match is None:
            continue
        groups = match.groupdict()
        if groups.get("n"):
            facts.append(("person", f"Has {match.group('n')} {match.group('r')}".replace("Has a ", "Has a ")))
            break
        name = match.group("o")
        if name in _NOT_PERSON_NAMES:
            continue
        relation = (groups.get("r") or "partner").lower()
        facts.append(("person", f"{_cap(relation)}: {name}"))
        break
    else:
        if match := _KIN.search(sentence):
            relation = match.group("r").lower()
            plural = relation.endswith("s") or relation in ("children", "grandchildren")
            facts.append(("person", f"Has {relation}" if plural else f"Has a {relation}"))
    for pattern, verb in _WORK:
        match = pattern.search(sentence)
        if match is None or _NEGATED.search(sentence[: match.start()][-15:]):
            continue
        obj = _object(match.group("o"))
        if obj is None:
            continue
        if verb == "Is a":
            if obj.split()[0].lower() in _NOT_JOB_WORDS:
                continue
            facts.append(("work", "Retired" if obj.lower() in ("retired", "retiree") else f"Works as {obj.lower()}"))
        else:
            facts.append(("work", f"{verb} {obj}"))
        break
    return facts


def extract_facts(text: str) -> list[dict[str, str]]:
    """The facts ``text`` (a user's words) states about the user, each ``{"category", "text"}``, in order, once."""
    seen: set[str] = set()
    out: list[dict[str, str]] = []
    for sentence in _sentences(text):
        for category, phrase in _sentence_facts(sentence):
            phrase = " ".join(phrase.split())
            key = phrase.lower()
            if key not in seen:
                seen.add(key)
                out.append({"category": category, "text": phrase})
            if len(out) >= MAX_FACTS_PER_TEXT:
                return out
    return out
