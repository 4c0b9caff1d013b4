"""The hardened YAML reader and the writer of exports: any JSON tree written reads back as itself; YAML's graph
features (aliases, anchors, tags, merge keys, timestamps) never come out of the reader."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent_memory.errors import PayloadTooLarge
from agent_memory.policy.state import ScopedDelta
from agent_memory.service.transfer import SessionTransfer
from agent_memory.stores.inmemory import InMemorySessionStore
from agent_memory.stores.ports import NewEvent, SessionKey, SessionRecord
from agent_memory.wire.jsonvalues import JsonRejected
from agent_memory.wire.yamlio import content_type_is_yaml, dump_yaml, parse_yaml_body

TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=30)
JSON = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(10**30), max_value=10**30),
        st.floats(allow_nan=False, allow_infinity=False, min_value=-1e100, max_value=1e100).filter(
            lambda x: x == 0 or abs(x) > 1e-100
        ),
        TEXT,
    ),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4),
    max_leaves=25,
)


@settings(max_examples=400, deadline=None)  # a busy machine must not fail it by time
@given(value=st.dictionaries(TEXT, JSON, max_size=5))
def test_every_json_tree_written_reads_back_as_itself(value: dict[str, Any]) -> None:
    text = dump_yaml(value)
    assert parse_yaml_body(text) == value
    assert dump_yaml(parse_yaml_body(text)) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a: 2024-01-01\n", {"a": "2024-01-01"}),  # no timestamps
        ("<<: {b: 1}\n", {"<<": {"b": 1}}),  # no merge keys
        ("a: [1, 2.5, null, true, x]\n", {"a": [1, 2.5, None, True, "x"]}),
        ('{"json": "is YAML too", "n": 1}', {"json": "is YAML too", "n": 1}),
    ],
)
def test_yaml_reads_as_json_types(text: str, expected: Any) -> None:
    assert parse_yaml_body(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "a: &x 1\nb: *x\n",
        "a: &x 1\n",
        "a: !!python/object/apply:os.system [echo]\n",
        "a: !!binary aGk=\n",
        "a: !local x\n",
        "!!map {a: 1}\n",
        "a: 1\na: 2\n",
        "? [1]\n: x\n",
        "1: x\n",
        "a: .inf\n",
        "a: 1.0e+400\n",
        "a: 123456789012345678901234567890123456789\n",
        "[" * 65 + "]" * 65,
        "a: 1\n---\nb: 2\n",
        "a: [1\n",
    ],
)
def test_refused_yaml(text: str) -> None:
    with pytest.raises(JsonRejected):
        parse_yaml_body(text)


def test_a_billion_laughs_is_refused_before_anything_expands() -> None:
    lines = ['l0: &l0 ["lol"]'] + [f"l{i}: &l{i} [{','.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 10)]
    with pytest.raises(JsonRejected, match="anchors"):
        parse_yaml_body("\n".join(lines))


@pytest.mark.parametrize(
    ("value", "yaml"),
    [
        ("application/yaml", True),
        ("application/x-yaml; charset=utf-8", True),
        ("Text/YAML", True),
        ("application/json", False),
        (None, False),
        ("", False),
    ],
)
def test_content_types(value: str | None, yaml: bool) -> None:
    assert content_type_is_yaml(value) is yaml


def test_an_export_past_the_response_cap_is_413(monkeypatch: pytest.MonkeyPatch) -> None:
    store = InMemorySessionStore()
    store.create_session(SessionRecord("app", "u", "s", create_time=1.0, update_time=1.0), ScopedDelta())
    body = {"id": "e1", "author": "user", "timestamp": 2.0, "content": {"parts": [{"text": "x" * 2_000}]}}
    store.append_events(
        SessionKey("app", "u", "s"),
        [NewEvent("e1", 2.0, body, ScopedDelta())],
        None,
    )
    transfer = SessionTransfer(store)
    assert transfer.export_session("app", "u", "s")["events"][0]["id"] == "e1"
    monkeypatch.setattr("agent_memory.service.transfer.RESPONSE_CAP", 1_000)
    with pytest.raises(PayloadTooLarge):
        transfer.export_session("app", "u", "s")


def test_exports_are_read_by_libyaml_with_the_same_resolution() -> None:
    """libyaml parses (the layer's PyYAML has it) and the loader resolves as the Python one does: a 900 KB export
    reads to the same tree with either parser, dates left strings."""
    import yaml

    from agent_memory.wire import yamlio

    assert yaml.__with_libyaml__ and yamlio._LOADER is not yamlio._JsonLoader
    document = {
        "events": [
            {"id": f"e{i}", "seq": i + 1, "content": {"parts": [{"text": "word " * 30}]}, "d": "2024-01-01"}
            for i in range(2500)
        ]
    }
    text = yaml.safe_dump(document)
    assert yamlio.parse_yaml_body(text) == yaml.load(text, Loader=yamlio._JsonLoader) == document
