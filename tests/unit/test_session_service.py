"""SessionService over the in-memory store: validation, get-or-create, paging and append rules."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter

from agent_memory.edge.requests import AppendRequest, CreateSessionRequest, EventBatch
from agent_memory.errors import (
    AlreadyExists,
    EventIdConflict,
    InvalidInput,
    PreconditionFailed,
    SessionNotFound,
    UnprocessableInput,
)
from agent_memory.limits import MAX_BATCH
from agent_memory.service.sessions import AppendOutcome, SessionService, parse_timestamp
from agent_memory.stores.inmemory import InMemoryPublisher, InMemorySessionStore
from tests.unit.edge import through_edge

NOW = 1000.0


class ExplodingPublisher:
    def __init__(self) -> None:
        self.calls = 0

    def publish(self, detail_type: str, detail: dict[str, Any]) -> None:
        self.calls += 1
        raise RuntimeError("event bus down")


@pytest.fixture
def store() -> InMemorySessionStore:
    return InMemorySessionStore()


@pytest.fixture
def publisher() -> InMemoryPublisher:
    return InMemoryPublisher()


@pytest.fixture
def service(store: InMemorySessionStore, publisher: InMemoryPublisher) -> SessionService:
    return SessionService(store, publisher, clock=lambda: NOW)


@pytest.fixture
def session(service: SessionService) -> SessionService:
    """The service with session (app, bob, s1) created."""
    create(service, "app", "bob", {"session_id": "s1"})
    return service


APPEND: TypeAdapter[Any] = TypeAdapter(AppendRequest)


def create(service: SessionService, app: str, user: str, body: Any = None) -> tuple[dict[str, Any], bool]:
    """What the create handler does: the body through CreateSessionRequest, then the service."""
    request = CreateSessionRequest() if body is None else through_edge(body, TypeAdapter(CreateSessionRequest))
    return service.create_session(app_name=app, user_id=user, session_id=request.session_id, state=request.state)


def append(
    service: SessionService, app: str, user: str, sid: str, body: Any, if_match: str | None = None
) -> AppendOutcome:
    """What the append handler does: the body through AppendRequest, then the service."""
    request = through_edge(body, APPEND)
    single = not isinstance(request, EventBatch)
    events = [request] if single else request.events
    return service.append_events(
        app_name=app, user_id=user, session_id=sid, events=events, if_match=if_match, single=single
    )


def is_batch(body: Any) -> bool:
    return isinstance(APPEND.validate_python(body), EventBatch)


def msg(text: str = "hi", **extra: Any) -> dict[str, Any]:
    return {"author": "user", "content": {"role": "user", "parts": [{"text": text}]}, **extra}


# --- create ----------------------------------------------------------------------------------------------------


def test_create_is_get_or_create(service: SessionService, publisher: InMemoryPublisher) -> None:
    data, created = create(service, "app", "bob", {"session_id": "s1", "state": {"a": 1}})
    assert created is True
    assert data["created"] is True
    assert data["id"] == "s1" and data["app_name"] == "app" and data["user_id"] == "bob"
    assert data["state"] == {"a": 1}
    assert data["create_time"] == NOW and data["last_update_time"] == NOW
    assert data["version"] == 0 and data["events"] == []

    again, created_again = create(service, "app", "bob", {"session_id": "s1", "state": {"a": 2}})
    assert created_again is False
    assert again["created"] is False
    assert again["state"] == {"a": 1}  # existing session untouched

    assert publisher.published == [
        ("SessionCreated", {"app_name": "app", "user_id": "bob", "session_id": "s1", "create_time": NOW})
    ]


def test_create_accepts_camel_case_session_id(service: SessionService) -> None:
    data, created = create(service, "app", "bob", {"sessionId": "camel-1"})
    assert created and data["id"] == "camel-1"


@pytest.mark.parametrize("body", [None, {}, {"state": {}}])
def test_create_without_session_id_generates_one(service: SessionService, body: Any) -> None:
    first, created = create(service, "app", "bob", body)
    second, _ = create(service, "app", "bob", body)
    assert created
    assert first["id"] and second["id"] and first["id"] != second["id"]
    assert len(service.list_sessions("app", "bob")["sessions"]) == 2


def test_create_splits_state_by_scope_and_drops_temp(service: SessionService, store: InMemorySessionStore) -> None:
    data, _ = create(
        service,
        "app",
        "bob",
        {"session_id": "s1", "state": {"k": 1, "user:name": "Bob", "app:tier": "pro", "temp:x": 9}},
    )
    assert data["state"] == {"k": 1, "user:name": "Bob", "app:tier": "pro"}
    # user state is shared by the user's other sessions, app state by everyone in the app
    other, _ = create(service, "app", "bob", {"session_id": "s2"})
    assert other["state"] == {"user:name": "Bob", "app:tier": "pro"}
    carol, _ = create(service, "app", "carol", {"session_id": "s1"})
    assert carol["state"] == {"app:tier": "pro"}


def test_publisher_failure_does_not_fail_create(store: InMemorySessionStore) -> None:
    publisher = ExplodingPublisher()
    service = SessionService(store, publisher, clock=lambda: NOW)
    data, created = create(service, "app", "bob", {"session_id": "s1"})
    assert created and data["id"] == "s1"
    assert publisher.calls == 1
    assert service.get_session("app", "bob", "s1")["id"] == "s1"


def test_no_publish_when_not_created(session: SessionService, publisher: InMemoryPublisher) -> None:
    publisher.published.clear()
    create(session, "app", "bob", {"session_id": "s1"})
    assert publisher.published == []


def test_create_without_publisher(store: InMemorySessionStore) -> None:
    service = SessionService(store, None, clock=lambda: NOW)
    _, created = create(service, "app", "bob", {"session_id": "s1"})
    assert created


@pytest.mark.parametrize("body", [[], "s1", 5, ["session_id"], True])
def test_create_body_must_be_object(service: SessionService, body: Any) -> None:
    with pytest.raises(UnprocessableInput) as info:
        create(service, "app", "bob", body)
    assert info.value.field == "body"
    assert info.value.status == 422


def test_create_unknown_field_is_named(service: SessionService) -> None:
    with pytest.raises(UnprocessableInput) as info:
        create(service, "app", "bob", {"session_id": "s1", "zeta": 1, "alpha": 2})
    assert info.value.field == "zeta"  # the first unknown one, in the body's order
    assert service.list_sessions("app", "bob")["sessions"] == []


@pytest.mark.parametrize("session_id", ["-bad", "a b", "", "x" * 129, 5, ["s1"]])
@pytest.mark.parametrize("key", ["session_id", "sessionId"])
def test_create_bad_session_id_is_422(service: SessionService, key: str, session_id: Any) -> None:
    with pytest.raises(UnprocessableInput) as info:
        create(service, "app", "bob", {key: session_id})
    assert info.value.field == "session_id"
    assert info.value.status == 422


@pytest.mark.parametrize("state", ["x", [1], 5, True])
def test_create_state_must_be_object(service: SessionService, state: Any) -> None:
    with pytest.raises(UnprocessableInput) as info:
        create(service, "app", "bob", {"session_id": "s1", "state": state})
    assert info.value.field == "state"
    assert service.list_sessions("app", "bob")["sessions"] == []


@pytest.mark.parametrize(("app", "user", "field"), [("-x", "bob", "app_name"), ("app", "a/b", "user_id")])
def test_create_bad_path_identifiers_are_400(service: SessionService, app: str, user: str, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        create(service, app, user, {"session_id": "s1"})
    assert info.value.field == field
    assert info.value.status == 400


# --- get -------------------------------------------------------------------------------------------------------


def test_get_missing_session_is_404(service: SessionService) -> None:
    with pytest.raises(SessionNotFound) as info:
        service.get_session("app", "bob", "nope")
    assert info.value.status == 404
    assert info.value.field == "session_id"


def test_get_is_scoped_to_the_user(session: SessionService) -> None:
    with pytest.raises(SessionNotFound):
        session.get_session("app", "alice", "s1")
    with pytest.raises(SessionNotFound):
        session.get_session("other", "bob", "s1")


@pytest.mark.parametrize(
    ("app", "user", "sid", "field"),
    [("a b", "bob", "s1", "app_name"), ("app", "", "s1", "user_id"), ("app", "bob", "s/1", "session_id")],
)
def test_get_bad_path_identifiers_are_400(service: SessionService, app: str, user: str, sid: str, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        service.get_session(app, user, sid)
    assert info.value.field == field


def test_get_num_recent_events_negative_is_rejected(session: SessionService) -> None:
    with pytest.raises(InvalidInput) as info:
        session.get_session("app", "bob", "s1", num_recent_events=-1)
    assert info.value.field == "num_recent_events"


def _seed_events(service: SessionService) -> None:
    append(service, "app", "bob", "s1", {"events": [msg(f"m{i}", timestamp=1000.0 + i) for i in range(5)]})


@pytest.mark.parametrize(("n", "expected"), [(None, 5), (0, 0), (2, 2), (10, 5)])
def test_get_num_recent_events(session: SessionService, n: int | None, expected: int) -> None:
    _seed_events(session)
    events = session.get_session("app", "bob", "s1", num_recent_events=n)["events"]
    assert len(events) == expected
    if expected:
        assert events[-1]["content"]["parts"][0]["text"] == "m4"
        assert [e["seq"] for e in events] == list(range(6 - expected, 6))


@pytest.mark.parametrize(
    "after",
    [1002.0, 1002, "1002", "1002.0", "1970-01-01T00:16:42Z", "1970-01-01T00:16:42+00:00", "1970-01-01T01:16:42+01:00"],
)
def test_get_after_timestamp_formats(session: SessionService, after: Any) -> None:
    _seed_events(session)
    events = session.get_session("app", "bob", "s1", after_timestamp=after)["events"]
    assert [e["timestamp"] for e in events] == [1002.0, 1003.0, 1004.0]


@pytest.mark.parametrize("after", ["yesterday", "", "2024-13-45T00:00:00Z", "12:00 pm"])
def test_get_after_timestamp_garbage_is_rejected(session: SessionService, after: str) -> None:
    with pytest.raises(InvalidInput) as info:
        session.get_session("app", "bob", "s1", after_timestamp=after)
    assert info.value.field == "after_timestamp"


def test_parse_timestamp_direct() -> None:
    assert parse_timestamp(None, "t") is None
    assert parse_timestamp(5, "t") == 5.0
    assert isinstance(parse_timestamp(5, "t"), float)
    assert parse_timestamp("2024-01-01T00:00:00Z", "t") == 1704067200.0
    with pytest.raises(InvalidInput) as info:
        parse_timestamp("nope", "my_field")
    assert info.value.field == "my_field"


def test_get_combines_after_timestamp_and_num_recent(session: SessionService) -> None:
    _seed_events(session)
    events = session.get_session("app", "bob", "s1", num_recent_events=1, after_timestamp=1001)["events"]
    assert [e["timestamp"] for e in events] == [1004.0]


# --- list ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("limit", [0, -1, 101, 1000])
def test_list_limit_bounds(service: SessionService, limit: int) -> None:
    with pytest.raises(InvalidInput) as info:
        service.list_sessions("app", "bob", limit=limit)
    assert info.value.field == "limit"


def test_list_default_page_is_20(service: SessionService) -> None:
    for i in range(25):
        create(service, "app", "bob", {"session_id": f"s{i:02d}"})
    page = service.list_sessions("app", "bob")
    assert len(page["sessions"]) == 20
    assert page["next_token"] is not None
    rest = service.list_sessions("app", "bob", next_token=page["next_token"])
    assert [s["id"] for s in rest["sessions"]] == [f"s{i:02d}" for i in range(20, 25)]
    assert rest["next_token"] is None


@pytest.mark.parametrize("limit", [1, 100])
def test_list_limit_edges_are_accepted(service: SessionService, limit: int) -> None:
    for i in range(3):
        create(service, "app", "bob", {"session_id": f"s{i}"})
    assert len(service.list_sessions("app", "bob", limit=limit)["sessions"]) == min(limit, 3)


def test_list_pages_through_everything_without_events(service: SessionService) -> None:
    ids = [f"s{i}" for i in range(5)]
    for sid in ids:
        create(service, "app", "bob", {"session_id": sid})
    create(service, "app", "alice", {"session_id": "other"})
    seen: list[str] = []
    token = None
    while True:
        page = service.list_sessions("app", "bob", limit=2, next_token=token)
        assert all("events" not in s for s in page["sessions"])
        seen += [s["id"] for s in page["sessions"]]
        token = page["next_token"]
        if token is None:
            break
    assert seen == ids


def test_list_rejects_token_from_another_user(service: SessionService) -> None:
    for i in range(3):
        create(service, "app", "bob", {"session_id": f"s{i}"})
    token = service.list_sessions("app", "bob", limit=1)["next_token"]
    assert token is not None
    with pytest.raises(InvalidInput) as info:
        service.list_sessions("app", "alice", next_token=token)
    assert info.value.field == "next_token"


def test_list_bad_identifiers(service: SessionService) -> None:
    with pytest.raises(InvalidInput) as info:
        service.list_sessions("app", "b b")
    assert info.value.field == "user_id"


# --- delete ----------------------------------------------------------------------------------------------------


def test_delete_is_idempotent(session: SessionService) -> None:
    session.delete_session("app", "bob", "s1")
    session.delete_session("app", "bob", "s1")
    with pytest.raises(SessionNotFound):
        session.get_session("app", "bob", "s1")


def test_delete_bad_identifier(service: SessionService) -> None:
    with pytest.raises(InvalidInput) as info:
        service.delete_session("app", "bob", "-s")
    assert info.value.field == "session_id"


# --- append ----------------------------------------------------------------------------------------------------


def test_append_single_event(session: SessionService) -> None:
    outcome = append(session, "app", "bob", "s1", msg("hello"))
    assert not is_batch(msg("hello"))
    assert outcome.created is True
    assert outcome.version == 1
    assert len(outcome.events) == 1
    stored = outcome.events[0]
    assert stored["seq"] == 1
    assert stored["content"]["parts"] == [{"text": "hello"}]
    assert stored["timestamp"] == NOW
    assert isinstance(stored["id"], str) and stored["id"]


def test_append_batch(session: SessionService) -> None:
    outcome = append(session, "app", "bob", "s1", {"events": [msg("a"), msg("b"), msg("c")]})
    assert is_batch({"events": [msg("a")]})
    assert outcome.created is True
    assert outcome.version == 1  # one append, one version
    assert [e["seq"] for e in outcome.events] == [1, 2, 3]
    assert [e["content"]["parts"][0]["text"] for e in outcome.events] == ["a", "b", "c"]
    assert len({e["id"] for e in outcome.events}) == 3


def test_append_batch_of_max_size_is_accepted(session: SessionService) -> None:
    outcome = append(session, "app", "bob", "s1", {"events": [msg(str(i)) for i in range(MAX_BATCH)]})
    assert len(outcome.events) == MAX_BATCH == 100


def test_append_batch_too_large(session: SessionService) -> None:
    with pytest.raises(UnprocessableInput) as info:
        append(session, "app", "bob", "s1", {"events": [msg(str(i)) for i in range(101)]})
    assert info.value.field == "events"
    assert session.get_session("app", "bob", "s1")["events"] == []


@pytest.mark.parametrize("events", [[], None, "x", {"a": 1}])
def test_append_events_must_be_non_empty_list(session: SessionService, events: Any) -> None:
    with pytest.raises(UnprocessableInput) as info:
        append(session, "app", "bob", "s1", {"events": events})
    assert info.value.field == "events"


def test_append_events_beside_other_keys(session: SessionService) -> None:
    with pytest.raises(UnprocessableInput) as info:
        append(session, "app", "bob", "s1", {"events": [msg()], "zzz": 1, "extra": 2})
    assert info.value.field == "zzz"  # the first unknown one, in the body's order


def test_events_key_on_an_adk_event_is_an_extra_field(session: SessionService) -> None:
    outcome = append(session, "app", "bob", "s1", msg("x", events=[1, 2]))
    assert not is_batch(msg("x", events=[1, 2]))
    assert outcome.events[0]["events"] == [1, 2]


@pytest.mark.parametrize("body", [[], "hello", None, 5])
def test_append_body_must_be_object(session: SessionService, body: Any) -> None:
    with pytest.raises(UnprocessableInput) as info:
        append(session, "app", "bob", "s1", body)
    assert info.value.field == "body"


def test_append_batch_item_not_object(session: SessionService) -> None:
    with pytest.raises(UnprocessableInput) as info:
        append(session, "app", "bob", "s1", {"events": [msg(), "nope"]})
    assert info.value.field == "events[1]"
    assert session.get_session("app", "bob", "s1")["events"] == []  # nothing stored from a bad batch


def test_append_validation_error_names_the_field(session: SessionService) -> None:
    with pytest.raises(UnprocessableInput) as info:
        append(session, "app", "bob", "s1", {"author": "u", "content": {"parts": [{"text": 5}]}})
    assert info.value.field == "content.parts[0].text"
    with pytest.raises(UnprocessableInput) as info:
        append(session, "app", "bob", "s1", {"events": [msg(), {"author": "u", "timestamp": "soon"}]})
    assert info.value.field == "events[1].timestamp"


def test_append_chat_message(session: SessionService) -> None:
    outcome = append(
        session, "app", "bob", "s1", {"role": "assistant", "content": "hi there", "turn_id": "t1", "metadata": {"x": 1}}
    )
    stored = outcome.events[0]
    assert stored["author"] == "assistant"
    assert stored["content"] == {"role": "model", "parts": [{"text": "hi there"}]}
    assert stored["turn_id"] == "t1"
    assert stored["metadata"] == {"x": 1}
    assert stored["timestamp"] == NOW


def test_append_chat_messages_in_a_batch(session: SessionService) -> None:
    outcome = append(
        session,
        "app",
        "bob",
        "s1",
        {
            "events": [
                {"role": "user", "content": "weather?"},
                {"role": "assistant", "tool_calls": [{"id": "c1", "function": {"name": "w", "arguments": "{}"}}]},
                {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
            ]
        },
    )
    parts = [e["content"]["parts"][0] for e in outcome.events]
    assert parts[0] == {"text": "weather?"}
    assert parts[1] == {"function_call": {"id": "c1", "name": "w", "args": {}}}
    assert parts[2] == {"function_response": {"id": "c1", "response": {"result": "sunny"}}}


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"role": "robot", "content": "x"}, "body"),
        ({"role": "user", "content": 5}, "body"),
        ({"events": [msg(), {"role": "robot"}]}, "events[1]"),
    ],
)
def test_append_bad_chat_message_is_422(session: SessionService, body: dict[str, Any], field: str) -> None:
    with pytest.raises(UnprocessableInput) as info:
        append(session, "app", "bob", "s1", body)
    assert info.value.field == field


def test_append_ignores_client_seq(session: SessionService) -> None:
    outcome = append(session, "app", "bob", "s1", {"events": [msg("a", seq=99), msg("b", seq=-5)]})
    assert [e["seq"] for e in outcome.events] == [1, 2]


def test_append_fills_id_and_timestamp_from_the_clock_but_keeps_given_ones(session: SessionService) -> None:
    outcome = append(session, "app", "bob", "s1", {"events": [msg("a"), msg("b", id="mine", timestamp=5.5)]})
    assert outcome.events[0]["timestamp"] == NOW
    assert outcome.events[1]["id"] == "mine"
    assert outcome.events[1]["timestamp"] == 5.5


@pytest.mark.parametrize(
    ("body", "field"), [(msg(id="bad id"), "id"), ({"events": [msg(), msg(id="-x")]}, "events[1].id")]
)
def test_append_bad_event_id(session: SessionService, body: dict[str, Any], field: str) -> None:
    with pytest.raises(UnprocessableInput) as info:
        append(session, "app", "bob", "s1", body)
    assert info.value.field == field


def test_append_strips_temp_state_and_applies_deltas(session: SessionService) -> None:
    outcome = append(
        session,
        "app",
        "bob",
        "s1",
        msg(actions={"stateDelta": {"temp:scratch": 1, "k": 2, "user:u": 3, "app:a": 4}}),
    )
    assert outcome.events[0]["actions"]["state_delta"] == {"k": 2, "user:u": 3, "app:a": 4}
    got = session.get_session("app", "bob", "s1")
    assert got["state"] == {"k": 2, "user:u": 3, "app:a": 4}
    assert got["events"][0]["actions"]["state_delta"] == {"k": 2, "user:u": 3, "app:a": 4}
    assert got["version"] == 1


def test_append_duplicate_id_is_not_stored_twice(session: SessionService) -> None:
    first = append(session, "app", "bob", "s1", msg("a", id="e1"))
    again = append(session, "app", "bob", "s1", msg("a", id="e1"))  # a resend: the server fills the time
    assert first.created is True and again.created is False
    assert again.version == first.version == 1
    assert again.events == first.events
    assert len(session.get_session("app", "bob", "s1")["events"]) == 1


def test_append_reused_id_with_another_body_is_a_conflict(session: SessionService) -> None:
    append(session, "app", "bob", "s1", msg("a", id="e1"))
    with pytest.raises(EventIdConflict) as single:
        append(session, "app", "bob", "s1", msg("changed", id="e1"))
    assert single.value.field == "id"
    with pytest.raises(EventIdConflict) as batch:
        append(session, "app", "bob", "s1", {"events": [msg("b", id="e2"), msg("changed", id="e1")]})
    assert batch.value.field == "events[1].id"
    events = session.get_session("app", "bob", "s1")["events"]
    assert [(e["id"], e["content"]["parts"][0]["text"]) for e in events] == [("e1", "a")]


def test_append_batch_partly_duplicate_is_created(session: SessionService) -> None:
    append(session, "app", "bob", "s1", msg("a", id="e1"))
    outcome = append(session, "app", "bob", "s1", {"events": [msg("a", id="e1"), msg("b", id="e2")]})
    assert outcome.created is True
    assert [e["seq"] for e in outcome.events] == [1, 2]
    assert outcome.version == 2


def test_append_to_missing_session(service: SessionService) -> None:
    with pytest.raises(SessionNotFound):
        append(service, "app", "bob", "nope", msg())


def test_append_with_current_if_match(session: SessionService) -> None:
    assert append(session, "app", "bob", "s1", msg("a"), if_match='"0"').version == 1
    assert append(session, "app", "bob", "s1", msg("b"), if_match='"0", "1"').version == 2
    with pytest.raises(PreconditionFailed):  # RFC 9110 strong comparison: a weak tag never matches
        append(session, "app", "bob", "s1", msg("c"), if_match='W/"2"')
    with pytest.raises(PreconditionFailed):  # tags compare as text: "02" is not the ETag "2"
        append(session, "app", "bob", "s1", msg("c"), if_match='"02"')
    assert session.get_session("app", "bob", "s1")["version"] == 2


def test_append_with_stale_if_match_stores_nothing(session: SessionService) -> None:
    append(session, "app", "bob", "s1", msg("a"))
    with pytest.raises(PreconditionFailed):
        append(session, "app", "bob", "s1", msg("b", actions={"stateDelta": {"k": 1}}), if_match='"0"')
    got = session.get_session("app", "bob", "s1")
    assert [e["content"]["parts"][0]["text"] for e in got["events"]] == ["a"]
    assert got["version"] == 1
    assert got["state"] == {}


def test_append_with_unparseable_if_match_stores_nothing(session: SessionService) -> None:
    with pytest.raises(PreconditionFailed):
        append(session, "app", "bob", "s1", msg(), if_match='"abc"')
    assert session.get_session("app", "bob", "s1")["events"] == []


def test_append_if_match_star_on_missing_session(service: SessionService) -> None:
    with pytest.raises(SessionNotFound):
        append(service, "app", "bob", "nope", msg(), if_match="*")


def test_append_if_match_star_on_existing_session(session: SessionService) -> None:
    append(session, "app", "bob", "s1", msg("a"))
    assert append(session, "app", "bob", "s1", msg("b"), if_match="*").version == 2


@pytest.mark.parametrize(
    ("app", "user", "sid", "field"),
    [("", "bob", "s1", "app_name"), ("app", "b#b", "s1", "user_id"), ("app", "bob", "é", "session_id")],
)
def test_append_bad_path_identifiers(session: SessionService, app: str, user: str, sid: str, field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        append(session, app, user, sid, msg())
    assert info.value.field == field
    assert info.value.status == 400


def test_update_time_follows_newest_event(session: SessionService) -> None:
    append(session, "app", "bob", "s1", msg(timestamp=1500.0))
    append(session, "app", "bob", "s1", msg(timestamp=1200.0))
    assert session.get_session("app", "bob", "s1")["last_update_time"] == 1500.0


# --- strict create, state reads, the app-wide listing ---------------------------------------------------------


def test_strict_create_refuses_an_existing_id_and_publishes_nothing(
    service: SessionService, publisher: InMemoryPublisher
) -> None:
    created, _ = service.create_session(app_name="app", user_id="bob", session_id="s1", if_none_match="*")
    assert created["created"] is True
    published = len(publisher.published)
    with pytest.raises(AlreadyExists) as info:
        service.create_session(app_name="app", user_id="bob", session_id="s1", state={"user:x": 1}, if_none_match="*")
    assert (info.value.status, info.value.code, info.value.field) == (409, "already_exists", "session_id")
    assert len(publisher.published) == published
    assert service.get_user_state("app", "bob")["state"] == {}


@pytest.mark.parametrize("value", ['"1"', "W/*", "", "* *"])
def test_if_none_match_other_than_star_is_invalid(service: SessionService, value: str) -> None:
    with pytest.raises(InvalidInput) as info:
        service.create_session(app_name="app", user_id="bob", session_id="s1", if_none_match=value)
    assert info.value.field == "If-None-Match"


def test_state_reads_carry_their_prefixes_and_never_miss(service: SessionService) -> None:
    assert service.get_user_state("app", "bob") == {"app_name": "app", "user_id": "bob", "state": {}}
    create(service, "app", "bob", {"session_id": "s1", "state": {"user:a": 1, "app:b": 2, "c": 3}})
    assert service.get_user_state("app", "bob")["state"] == {"user:a": 1}
    assert service.get_app_state("app") == {"app_name": "app", "state": {"app:b": 2}}
    with pytest.raises(InvalidInput):
        service.get_user_state("app", "b b")
    with pytest.raises(InvalidInput):
        service.get_app_state("a/b")


def test_the_app_wide_listing_pages_by_user_then_id_and_its_token_is_its_own(service: SessionService) -> None:
    for user in ["carol", "bob"]:
        for sid in ["s2", "s1"]:
            create(service, "app", user, {"session_id": sid})
    seen: list[tuple[str, str]] = []
    token = None
    while True:
        page = service.list_sessions("app", None, limit=3, next_token=token)
        seen += [(s["user_id"], s["id"]) for s in page["sessions"]]
        token = page["next_token"]
        if token is None:
            break
    assert seen == [("bob", "s1"), ("bob", "s2"), ("carol", "s1"), ("carol", "s2")]
    app_token = service.list_sessions("app", None, limit=1)["next_token"]
    with pytest.raises(InvalidInput):
        service.list_sessions("app", "bob", next_token=app_token)
