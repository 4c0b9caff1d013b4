"""Identifier rules and opaque page tokens."""

from __future__ import annotations

import base64
import json

import pytest

from agent_memory.errors import InvalidInput, UnprocessableInput
from agent_memory.policy.identifiers import validate_identifier
from agent_memory.policy.paging import AppCursor, UserCursor, _scope_tag, decode_page_token, encode_page_token


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _token(payload: object) -> str:
    return _b64(json.dumps(payload).encode())


# --- validate_identifier -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    ["a", "A1", "0", "user@example.com", "tenant:42", "x" * 128, "a.b-c_d", "9-z", "Z:@._-"],
)
def test_valid_identifiers_are_returned_unchanged(value: str) -> None:
    assert validate_identifier(value, "user_id") == value


@pytest.mark.parametrize(
    "value",
    ["", "-a", ".a", "_a", ":a", "@a", "a b", "a/b", "a#b", "é", "aé", "x" * 129, "a\n", "\na", " a", "a\x00"],
)
def test_invalid_identifiers_are_rejected_with_400_naming_the_field(value: str) -> None:
    with pytest.raises(InvalidInput) as info:
        validate_identifier(value, "session_id")
    assert info.value.field == "session_id"
    assert info.value.status == 400
    assert info.value.to_body()["error"]["field"] == "session_id"


@pytest.mark.parametrize("value", [None, 5, 1.5, b"abc", ["a"], {"a": 1}])
def test_non_strings_are_rejected(value: object) -> None:
    with pytest.raises(InvalidInput) as info:
        validate_identifier(value, "app_name")
    assert info.value.field == "app_name"


def test_error_class_can_be_chosen_for_body_fields() -> None:
    with pytest.raises(UnprocessableInput) as info:
        validate_identifier("-bad", "events[3].id", UnprocessableInput)
    assert info.value.status == 422
    assert info.value.field == "events[3].id"
    assert info.value.code == "validation_error"


def test_length_boundary_is_exactly_128() -> None:
    assert validate_identifier("a" + "b" * 127, "id") == "a" + "b" * 127
    with pytest.raises(InvalidInput):
        validate_identifier("a" + "b" * 128, "id")


# --- page tokens ---------------------------------------------------------------------------------------------


def at(session_id: str, update_time: float = 1000.5) -> UserCursor:
    return UserCursor(update_time, session_id)


@pytest.mark.parametrize("last", ["s1", "x" * 128, "user@example.com", "tenant:42"])
@pytest.mark.parametrize("update_time", [0.0, 1000.5, 1_796_138_098.665123, 1e-300])
def test_page_token_round_trips(last: str, update_time: float) -> None:
    token = encode_page_token("app", "bob", at(last, update_time))
    assert decode_page_token("app", "bob", token) == at(last, update_time)


def test_app_page_token_round_trips_and_is_not_a_users() -> None:
    token = encode_page_token("app", None, AppCursor("bob", "s1"))
    assert decode_page_token("app", None, token) == AppCursor("bob", "s1")
    with pytest.raises(InvalidInput):
        decode_page_token("app", "bob", token)
    with pytest.raises(InvalidInput):
        decode_page_token("app", None, encode_page_token("app", "bob", at("s1")))
    with pytest.raises(InvalidInput):
        decode_page_token("other", None, token)


@pytest.mark.parametrize("user", [None, "-bad", 5, "a/b"])
def test_app_page_token_with_a_bad_user_is_rejected(user: object) -> None:
    payload = {"v": 1, "after": "s1", "u": user, "scope": _scope_tag("app", "*")}
    with pytest.raises(InvalidInput) as info:
        decode_page_token("app", None, _token(payload))
    assert info.value.field == "next_token"


def test_page_token_is_url_safe_and_unpadded() -> None:
    token = encode_page_token("app", "bob", at("x" * 128))
    assert "=" not in token and "+" not in token and "/" not in token
    assert len(token) <= 1024


def test_page_token_for_another_user_is_rejected() -> None:
    token = encode_page_token("app", "bob", at("s1"))
    with pytest.raises(InvalidInput) as info:
        decode_page_token("app", "alice", token)
    assert info.value.field == "next_token"
    assert info.value.status == 400


def test_page_token_for_another_app_is_rejected() -> None:
    token = encode_page_token("app", "bob", at("s1"))
    with pytest.raises(InvalidInput) as info:
        decode_page_token("other", "bob", token)
    assert info.value.field == "next_token"


def test_scope_does_not_collide_when_app_and_user_boundaries_shift() -> None:
    token = encode_page_token("ab", "c", at("s1"))
    with pytest.raises(InvalidInput):
        decode_page_token("a", "bc", token)


def _valid_scope_payload(**overrides: object) -> dict[str, object]:
    payload: dict[str, object] = {"v": 1, "after": "s1", "t": 1000.5, "scope": _scope_tag("app", "bob")}
    payload.update(overrides)
    return payload


@pytest.mark.parametrize(
    "token",
    [
        pytest.param("", id="empty"),
        pytest.param("!!!not-a-token!!!", id="garbage"),
        pytest.param("é", id="non-ascii"),
        pytest.param(encode_page_token("app", "bob", at("s1"))[:-6], id="truncated"),
        pytest.param("A" * 1025, id="too-long"),
        pytest.param(_b64(b"not json at all"), id="base64-of-non-json"),
        pytest.param(_b64(b"\xff\xfe\x00garbage"), id="base64-of-binary"),
        pytest.param(_token(["s1"]), id="json-not-object"),
        pytest.param(_token(_valid_scope_payload(v=2)), id="wrong-version"),
        pytest.param(_token({"after": "s1", "scope": _scope_tag("app", "bob")}), id="missing-version"),
        pytest.param(_token(_valid_scope_payload(scope="0" * 16)), id="wrong-scope"),
        pytest.param(_token(_valid_scope_payload(after="-bad")), id="after-invalid"),
        pytest.param(_token(_valid_scope_payload(after="a/b")), id="after-slash"),
        pytest.param(_token(_valid_scope_payload(after=5)), id="after-not-string"),
        pytest.param(_token(_valid_scope_payload(after=None)), id="after-null"),
        pytest.param(_token({"v": 1, "t": 1.0, "scope": _scope_tag("app", "bob")}), id="after-missing"),
        pytest.param(_token({"v": 1, "after": "s1", "scope": _scope_tag("app", "bob")}), id="time-missing"),
        pytest.param(_token(_valid_scope_payload(t="1000")), id="time-not-number"),
        pytest.param(_token(_valid_scope_payload(t=True)), id="time-bool"),
        pytest.param("eyJ2IjoxLCJhZnRlciI6InMxIiwidCI6TmFOfQ", id="time-nan"),
    ],
)
def test_malformed_page_tokens_are_rejected(token: str) -> None:
    with pytest.raises(InvalidInput) as info:
        decode_page_token("app", "bob", token)
    assert info.value.field == "next_token"
    assert info.value.status == 400


def test_hand_made_token_with_correct_scope_is_accepted() -> None:
    # The format is documented by the module: the check is the scope, not a secret.
    assert decode_page_token("app", "bob", _token(_valid_scope_payload(after="zzz"))) == at("zzz")


def _padded_token(raw_len: int) -> str:
    """A valid token for (app, bob) whose JSON is padded with whitespace to ``raw_len`` bytes."""
    raw = json.dumps(_valid_scope_payload()).encode()
    raw = raw[:-1] + b" " * (raw_len - len(raw)) + b"}"
    assert len(raw) == raw_len
    return _b64(raw)


def test_length_limit_is_1024_characters() -> None:
    at_limit = _padded_token(768)  # 768 bytes -> exactly 1024 base64 characters
    assert len(at_limit) == 1024
    assert decode_page_token("app", "bob", at_limit) == at("s1")
    over = _padded_token(769)
    assert len(over) > 1024
    with pytest.raises(InvalidInput) as info:
        decode_page_token("app", "bob", over)
    assert info.value.field == "next_token"
