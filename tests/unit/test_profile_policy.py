"""The user profile's pure parts: the offline fact extractor, aggregation, and the profile's text."""

from __future__ import annotations

import pytest

from agent_memory.policy.facts import extract_facts
from agent_memory.policy.profile import PROFILE_HEADER, Source, aggregate, clean_facts, profile_text


def facts(text: str) -> list[tuple[str, str]]:
    return [(f["category"], f["text"]) for f in extract_facts(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("My name is Caroline.", ("name", "Name: Caroline")),
        ("my name's Tom Baker", ("name", "Name: Tom Baker")),
        ("Please, call me Liz", ("name", "Name: Liz")),
        ("Hi, I'm Tom!", ("name", "Name: Tom")),
        ("I'm allergic to peanuts", ("allergy", "Allergic to peanuts")),
        ("I am severely allergic to shellfish, so be careful", ("allergy", "Allergic to shellfish")),
        ("I have a severe shellfish allergy", ("allergy", "Allergic to shellfish")),
        ("My cat allergy is acting up again", ("allergy", "Allergic to cat")),
        ("I am vegetarian", ("diet", "Vegetarian")),
        ("I'm a strict vegan these days", ("diet", "Vegan")),
        ("I don't eat pork.", ("diet", "Does not eat pork")),
        ("I never drink alcohol", ("diet", "Does not drink alcohol")),
        ("I'm lactose intolerant", ("diet", "Lactose intolerant")),
        ("I'm on a keto diet", ("diet", "Keto")),
        ("I love hiking in the mountains", ("preference", "Loves hiking in the mountains")),
        ("I really enjoy painting landscapes.", ("preference", "Enjoys painting landscapes")),
        ("I'm a big fan of jazz", ("preference", "Likes jazz")),
        ("I'm really into pottery lately", ("preference", "Likes pottery")),
        ("My favorite book is Dune", ("preference", "Favorite book: Dune")),
        ("I prefer window seats", ("preference", "Prefers window seats")),
        ("I hate cilantro, it tastes like soap", ("dislike", "Dislikes cilantro")),
        ("I don't like horror movies", ("dislike", "Dislikes horror movies")),
        ("I can't stand loud music", ("dislike", "Dislikes loud music")),
        ("I'm not a fan of crowds", ("dislike", "Dislikes crowds")),
        ("I live in Porto with my sister", ("place", "Lives in Porto")),
        ("I moved to New York City last year", ("place", "Moved to New York City")),
        ("I'm originally from Sweden", ("place", "Is from Sweden")),
        ("I grew up in the countryside", ("place", "Grew up in countryside")),
        ("I was born in Lisbon in 1990", ("place", "Was born in Lisbon")),
        ("I visited Paris in May", ("place", "Visited Paris")),
        ("I've been to the Isle of Man twice", ("place", "Visited Isle of Man")),
        ("My sister Ana is visiting", ("person", "Sister: Ana")),
        ("my husband's name is Mark", ("person", "Husband: Mark")),
        ("I have a dog named Max", ("person", "Dog: Max")),
        ("I'm married to Sam", ("person", "Partner: Sam")),
        ("I have two kids", ("person", "Has two kids")),
        ("I work as a nurse", ("work", "Works as nurse")),
        ("I'm a software engineer", ("work", "Works as software engineer")),
        ("I've been working at Google for years", ("work", "Works at Google")),
        ("I'm studying psychology", ("work", "Studies psychology")),
        ("Dancing makes me so happy", ("preference", "Likes dancing")),
        ("Blue calms me, so I paint with it", ("preference", "Likes blue")),
        ("Art gives me a sense of freedom", ("preference", "Likes art")),
        ("And yup, I do- Oscar, my guinea pig.", ("person", "Guinea pig: Oscar")),
        ("I took my kids to the park", ("person", "Has kids")),
        ("My husband cooked tonight", ("person", "Has a husband")),
        ("Yeah, I play the clarinet!", ("preference", "Plays clarinet")),
        ("Just started doing aerial yoga, it's great", ("preference", "Does aerial yoga")),
        ("Been busy volunteering at the animal shelter", ("other", "Volunteers at animal shelter")),
        ("Running my own bakery is hard", ("work", "Runs own bakery")),
        ("I lost my job at Acme Corp this month", ("work", "Job at Acme Corp")),
        ('I loved "Becoming Nicole" by Amy Ellis Nutt', ("preference", "Loves Becoming Nicole")),
    ],
)
def test_the_offline_extractor_finds_each_kind_of_fact_in_many_phrasings(text: str, expected: tuple[str, str]) -> None:
    assert expected in facts(text)


@pytest.mark.parametrize(
    "text",
    [
        "Would you like to go?",
        "Do you live in Porto?",
        "If I lived in Paris I would love it",
        "I like to think so",
        "I went to the gym",
        "I'm fine, thanks",
        "I'm so excited about the trip!",
        "I'm a really good cook",
        "I'd like to book a table",
        "I love it!",
        "She said she is allergic to cats",
        "Maybe I'm allergic to something",
        "I went to an LGBTQ conference two days ago",
        "Seeing my students improve makes me so happy",
        "",
    ],
)
def test_the_offline_extractor_finds_nothing_in_questions_wishes_and_vague_statements(text: str) -> None:
    assert facts(text) == []


def test_a_negated_like_is_not_a_preference() -> None:
    assert ("preference", "Likes mushrooms") not in facts("I don't like mushrooms")
    assert facts("I don't like mushrooms") == [("dislike", "Dislikes mushrooms")]


def test_playing_with_someone_is_no_hobby_but_says_who_they_are() -> None:
    assert facts("I play with my kids") == [("person", "Has kids")]


def test_several_facts_in_one_text_in_order_each_once() -> None:
    got = facts("My name is Caroline and I love hiking. I love hiking! I live in Porto.")
    assert got == [("name", "Name: Caroline"), ("preference", "Loves hiking"), ("place", "Lives in Porto")]


def test_clean_facts_keeps_only_well_formed_facts() -> None:
    raw = [
        {"category": "ALLERGY", "text": "  Allergic   to peanuts "},
        {"category": "hobby", "text": "Plays chess"},
        {"category": "allergy", "text": "allergic to peanuts"},
        {"category": "name"},
        {"text": 3},
        "Likes tea",
        {"category": "work", "text": "x" * 500},
    ]
    cleaned = clean_facts(raw)
    assert cleaned[:2] == [
        {"category": "allergy", "text": "Allergic to peanuts"},
        {"category": "other", "text": "Plays chess"},
    ]
    assert len(cleaned) == 3 and cleaned[2]["category"] == "work" and len(cleaned[2]["text"]) == 200
    assert clean_facts({"facts": []}) == [] and clean_facts(None) == []


def fact(category: str, text: str) -> dict[str, str]:
    return {"category": category, "text": text}


def test_aggregate_merges_repeats_and_the_newest_wins_single_valued_slots() -> None:
    sources = [
        Source(
            "m1",
            10.0,
            [fact("name", "Name: Bob"), fact("preference", "Likes sushi"), fact("allergy", "Allergic to nuts")],
        ),
        Source("m2", 20.0, [fact("allergy", "allergic to  nuts"), fact("place", "Lives in Porto")]),
        Source(
            "m3",
            30.0,
            [fact("name", "Name: Robert"), fact("dislike", "Dislikes sushi"), fact("place", "Moved to Lisbon")],
        ),
        Source("m4", 5.0, [fact("place", "Visited Rome"), fact("other", "Plays chess")]),
    ]
    got = aggregate(sources)
    assert [(f["category"], f["text"], f["memory_ids"], f["updated_at"]) for f in got] == [
        ("name", "Name: Robert", ["m3"], 30.0),
        ("allergy", "allergic to  nuts", ["m1", "m2"], 20.0),
        ("dislike", "Dislikes sushi", ["m3"], 30.0),
        ("place", "Moved to Lisbon", ["m3"], 30.0),
        ("place", "Visited Rome", ["m4"], 5.0),
        ("other", "Plays chess", ["m4"], 5.0),
    ]


def test_aggregate_of_nothing_is_empty() -> None:
    assert aggregate([]) == [] and aggregate([Source("m1", 1.0, [])]) == []


def test_profile_text_renders_the_first_facts_or_nothing() -> None:
    profile = {"facts": [{"text": "Name: Bob"}, {"text": "Allergic to nuts"}, {"text": "Likes tea"}]}
    assert profile_text(profile) == f"{PROFILE_HEADER}\n- Name: Bob\n- Allergic to nuts\n- Likes tea"
    assert profile_text(profile, max_facts=2) == f"{PROFILE_HEADER}\n- Name: Bob\n- Allergic to nuts"
    assert profile_text(profile, max_facts=0) == "" and profile_text({"facts": []}) == ""
    assert PROFILE_HEADER == "What is known about the user:"
