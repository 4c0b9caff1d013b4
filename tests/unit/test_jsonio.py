"""Stored JSON decodes without failing a read, and responses splice what was kept verbatim."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest

from agent_memory.limits import MAX_DATETIME_SECONDS, MAX_STORED_JSON_DEPTH, MIN_DATETIME_SECONDS
from agent_memory.wire.jsonio import RawJSON, Unreadable, dumps, load_stored, readable_timestamp, wire_size


def nested(depth: int, leaf: str = "1") -> str:
    return "[" * depth + leaf + "]" * depth


def depth_of(value: Any) -> int:
    depth = 0
    while isinstance(value, list):
        depth += 1
        value = value[0] if value else None
    return depth


@pytest.mark.parametrize("depth", [1, MAX_STORED_JSON_DEPTH])
def test_values_within_the_depth_decode_as_python_values(depth: int) -> None:
    value = load_stored(nested(depth))
    assert depth_of(value) == depth


@pytest.mark.parametrize("depth", [MAX_STORED_JSON_DEPTH + 1, 900, 5_000, 50_000])
def test_deeper_values_decode_without_recursion_and_come_back_verbatim(depth: int) -> None:
    text = '{"a":' + nested(depth) + ',"b":"k"}'
    value = load_stored(text, verbatim=True)
    assert value["b"] == "k"
    # Built down to the bound (the object is level 1), the rest kept as text.
    assert depth_of(value["a"]) == MAX_STORED_JSON_DEPTH - 1
    copy.deepcopy(value)  # safe to walk
    assert dumps(value) == text


def test_deep_subtrees_read_as_their_text_for_code_that_walks_events() -> None:
    text = '{"args":' + nested(200) + "}"
    value = load_stored(text)
    inner: Any = value["args"]
    for _ in range(MAX_STORED_JSON_DEPTH - 2):  # down to the list at level MAX_STORED_JSON_DEPTH
        inner = inner[0]
    assert inner == [nested(200 - (MAX_STORED_JSON_DEPTH - 1))]
    json.dumps(value)  # plain values: any encoder takes them


def test_brackets_and_escapes_inside_strings_are_no_nesting() -> None:
    text = json.dumps({"s": "[" * 500 + '\\"{' * 100, "t": ['"]]]\\'] * 3})
    assert load_stored(text) == json.loads(text)


@pytest.mark.parametrize(
    "text",
    ["", "{", '{"a":1', "[1,]", '{"a" 1}', "nope", nested(900)[:-1], nested(900).replace("]", "}", 1), '"\\x"'],
)
def test_text_that_is_not_json_is_unreadable(text: str) -> None:
    with pytest.raises(Unreadable):
        load_stored(text)


def test_bytes_that_are_not_utf8_are_unreadable() -> None:
    with pytest.raises(Unreadable):
        load_stored(b'{"a":"\xff"}')


def test_numbers_no_float_holds_keep_their_text_and_nan_reads_as_null() -> None:
    digits = "9" * 5_000
    value = load_stored(f"[NaN,Infinity,-Infinity,1e400,1.5,{digits}]", verbatim=True)
    assert value == [None, None, None, RawJSON("1e400"), 1.5, RawJSON(digits)]
    assert dumps(value) == f"[null,null,null,1e400,1.5,{digits}]"
    assert load_stored("[1e400]") == ["1e400"]


def test_a_lone_surrogate_is_escaped_on_output() -> None:
    value = load_stored('{"s":"\\ud800"}')
    text = dumps(value)
    text.encode("utf-8")
    assert json.loads(text) == {"s": "\ud800"}


def test_dumps_cannot_be_fooled_by_a_string_that_looks_like_a_placeholder() -> None:
    value = {"raw": RawJSON("[1]"), "s": "\x00raw:0000000000000000:0"}
    assert json.loads(dumps(value)) == {"raw": [1], "s": "\x00raw:0000000000000000:0"}


def test_wire_size_counts_the_escaping_lambda_adds() -> None:
    assert wire_size("abc") == 5
    assert wire_size('"') == len(json.dumps('"'))
    assert wire_size("é") == len('"\\u00e9"')


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (1700000000.5, 1700000000.5),
        (1700000000, 1700000000),
        (-1e12, MIN_DATETIME_SECONDS),
        (1e20, MAX_DATETIME_SECONDS),
        (float("nan"), 7.0),
        (float("inf"), 7.0),
        (True, 7.0),
        ("1700000000", 7.0),
        (None, 7.0),
    ],
)
def test_readable_timestamp_is_one_a_datetime_holds(value: Any, expected: float) -> None:
    assert readable_timestamp(value, 7.0) == expected


def random_json(rng: random.Random, depth: int = 0) -> Any:
    kind = rng.randrange(8 if depth < 6 else 5)
    if kind == 0:
        return rng.choice([True, False, None])
    if kind == 1:
        return rng.randint(-(10**20), 10**20)
    if kind == 2:
        return rng.uniform(-1e6, 1e6) * rng.choice([1, 1e-300, 1e300])
    if kind in (3, 4):
        alphabet = 'ab "\\/[]{}:,\n\t\u00e9\u4e00\U0001f600\x01'
        return "".join(rng.choice(alphabet) for _ in range(rng.randrange(12)))
    if kind in (5, 6):
        return [random_json(rng, depth + 1) for _ in range(rng.randrange(4))]
    return {random_json(rng, 6) if rng.random() < 0.5 else "k": random_json(rng, depth + 1) for _ in range(3)}


@pytest.mark.parametrize("seed", range(40))
def test_the_iterative_decoder_reads_what_the_c_decoder_reads(seed: int) -> None:
    rng = random.Random(seed)
    value = [random_json(rng) for _ in range(5)]
    for pretty in (False, True):  # whitespace as other writers leave it
        inner = json.dumps(value, ensure_ascii=rng.random() < 0.5, indent=2 if pretty else None)
        # A deep sibling sends the text to the iterative decoder; the value sits at a random depth, built above
        # MAX_STORED_JSON_DEPTH and kept as text below it.
        wrap = rng.randrange(MAX_STORED_JSON_DEPTH + 2)
        text = "[" + nested(MAX_STORED_JSON_DEPTH + 5) + ",\n" + "[" * wrap + inner + "]" * wrap + "]"
        decoded = load_stored(text, verbatim=True)
        assert json.loads(dumps(decoded)) == json.loads(text)
        json.dumps(load_stored(text))


@pytest.mark.parametrize("seed", range(40))
def test_damaged_text_is_unreadable_or_reads_as_json_says(seed: int) -> None:
    rng = random.Random(1000 + seed)
    good = "[" + nested(MAX_STORED_JSON_DEPTH + 3) + "," + json.dumps([random_json(rng) for _ in range(4)]) + "]"
    for _ in range(20):
        i = rng.randrange(len(good))
        damaged = good[:i] + rng.choice(['"', "\\\\", "]", "}", ",", ":", "x", "", "1", "[", "{"]) + good[i + 1 :]
        try:
            decoded = load_stored(damaged, verbatim=True)
        except Unreadable:
            with pytest.raises(ValueError):
                json.loads(damaged)  # the C decoder refuses it too (ValueError covers its JSONDecodeError)
            continue
        assert json.loads(dumps(decoded)) == json.loads(damaged)
