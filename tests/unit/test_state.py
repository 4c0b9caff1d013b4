"""State scopes: app:, user:, temp: and session keys."""

from __future__ import annotations

from agent_memory.policy.state import ScopedDelta, merge_deltas, merged_state, split_delta, strip_temp


def test_split_delta_routes_keys_by_scope_and_strips_prefixes() -> None:
    delta = {"app:tier": "pro", "user:name": "Ann", "temp:scratch": 1, "count": 3, "nested": {"a": [1, 2]}}
    scoped = split_delta(delta)
    assert scoped.app == {"tier": "pro"}
    assert scoped.user == {"name": "Ann"}
    assert scoped.session == {"count": 3, "nested": {"a": [1, 2]}}


def test_split_delta_drops_only_temp_keys() -> None:
    scoped = split_delta({"temp:a": 1, "temp:b": 2})
    assert scoped == ScopedDelta()
    assert not scoped


def test_split_delta_keeps_none_values() -> None:
    scoped = split_delta({"app:x": None, "user:y": None, "z": None})
    assert (scoped.app, scoped.user, scoped.session) == ({"x": None}, {"y": None}, {"z": None})


def test_split_delta_prefixes_are_case_sensitive_and_only_at_start() -> None:
    scoped = split_delta({"APP:x": 1, "User:y": 2, "my_app:z": 3, "xtemp:w": 4})
    assert scoped.app == {} and scoped.user == {}
    assert scoped.session == {"APP:x": 1, "User:y": 2, "my_app:z": 3, "xtemp:w": 4}


def test_split_delta_only_strips_one_prefix() -> None:
    scoped = split_delta({"app:user:x": 1, "user:app:y": 2})
    assert scoped.app == {"user:x": 1}
    assert scoped.user == {"app:y": 2}


def test_split_delta_does_not_mutate_input() -> None:
    delta = {"app:a": 1, "temp:t": 2, "s": 3}
    split_delta(delta)
    assert delta == {"app:a": 1, "temp:t": 2, "s": 3}


def test_strip_temp_removes_temp_keys_and_keeps_prefixes_of_others() -> None:
    delta = {"temp:x": 1, "app:a": 2, "user:u": 3, "s": 4}
    assert strip_temp(delta) == {"app:a": 2, "user:u": 3, "s": 4}
    assert delta == {"temp:x": 1, "app:a": 2, "user:u": 3, "s": 4}


def test_strip_temp_of_empty_is_empty() -> None:
    assert strip_temp({}) == {}


def test_merge_deltas_later_wins_key_by_key() -> None:
    first = split_delta({"app:a": 1, "user:u": "old", "s": 1, "keep": True})
    second = split_delta({"app:a": 2, "user:v": "new", "s": 2})
    third = split_delta({"s": 3})
    merged = merge_deltas([first, second, third])
    assert merged.app == {"a": 2}
    assert merged.user == {"u": "old", "v": "new"}
    assert merged.session == {"s": 3, "keep": True}


def test_merge_deltas_does_not_mutate_inputs() -> None:
    first = split_delta({"s": 1})
    second = split_delta({"s": 2})
    merge_deltas([first, second])
    assert first.session == {"s": 1}
    assert second.session == {"s": 2}


def test_merge_of_nothing_is_empty() -> None:
    merged = merge_deltas([])
    assert merged == ScopedDelta()
    assert not merged


def test_merged_state_re_adds_prefixes() -> None:
    state = merged_state({"count": 1}, {"name": "Ann"}, {"tier": "pro"})
    assert state == {"count": 1, "user:name": "Ann", "app:tier": "pro"}


def test_merged_state_is_inverse_of_split_delta() -> None:
    delta = {"count": 1, "user:name": "Ann", "app:tier": "pro"}
    scoped = split_delta(delta)
    assert merged_state(scoped.session, scoped.user, scoped.app) == delta


def test_merged_state_does_not_mutate_session_dict() -> None:
    session = {"a": 1}
    merged_state(session, {"u": 1}, {"x": 1})
    assert session == {"a": 1}


def test_scoped_delta_truthiness() -> None:
    assert not ScopedDelta()
    assert ScopedDelta(app={"a": 1})
    assert ScopedDelta(user={"u": None})
    assert ScopedDelta(session={"s": 0})
    assert not ScopedDelta(app={}, user={}, session={})
