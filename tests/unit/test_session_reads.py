"""Reading sessions over the in-memory store: pages of events (by count and by size), tokens, and listings that fit
the response cap."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from agent_memory.errors import InvalidInput
from agent_memory.policy.state import ScopedDelta, split_delta
from agent_memory.service.sessions import SessionService
from agent_memory.stores.inmemory import InMemorySessionStore
from agent_memory.stores.ports import NewEvent, SessionKey, SessionRecord
from agent_memory.wire.jsonio import RESPONSE_CAP, dumps, wire_size

KEY = SessionKey("app", "alice", "s1")


@pytest.fixture
def store() -> InMemorySessionStore:
    return InMemorySessionStore()


@pytest.fixture
def service(store: InMemorySessionStore) -> SessionService:
    return SessionService(store, clock=lambda: 1000.0)


def create(store: InMemorySessionStore, key: SessionKey = KEY, state: dict[str, Any] | None = None) -> None:
    record = SessionRecord(key.app_name, key.user_id, key.session_id, create_time=1000.0, update_time=1000.0)
    store.create_session(record, split_delta(state or {}))


def append(store: InMemorySessionStore, count: int, text: str = "hi", key: SessionKey = KEY, start: int = 0) -> None:
    events = []
    for i in range(start, start + count):
        body = {"id": f"e{i}", "author": "user", "timestamp": 1000.0 + i, "content": {"parts": [{"text": text}]}}
        events.append(NewEvent(id=f"e{i}", timestamp=1000.0 + i, body=body, delta=ScopedDelta()))
    store.append_events(key, events, None)


def read_all(service: SessionService, **query: Any) -> list[list[int]]:
    """The seqs of every page, following next_token."""
    pages: list[list[int]] = []
    token = None
    while True:
        page = service.get_session("app", "alice", "s1", next_token=token, **query)
        assert wire_size(dumps(page)) <= RESPONSE_CAP
        pages.append([e["seq"] for e in page["events"]])
        token = page["next_token"]
        if token is None:
            return pages


def test_limit_pages_through_every_event_once_oldest_first(
    store: InMemorySessionStore, service: SessionService
) -> None:
    create(store)
    append(store, 25)
    assert read_all(service, limit=10) == [list(range(1, 11)), list(range(11, 21)), list(range(21, 26))]
    assert read_all(service, limit=25) == [list(range(1, 26))]
    assert read_all(service) == [list(range(1, 26))]


def test_an_empty_session_has_no_token(store: InMemorySessionStore, service: SessionService) -> None:
    create(store)
    assert read_all(service, limit=5) == [[]]
    append(store, 3)
    assert read_all(service, num_recent_events=0, limit=5) == [[]]


def test_num_recent_events_and_after_timestamp_combine_with_paging(
    store: InMemorySessionStore, service: SessionService
) -> None:
    create(store)
    append(store, 20)
    assert read_all(service, num_recent_events=7, limit=3) == [[14, 15, 16], [17, 18, 19], [20]]
    assert read_all(service, after_timestamp=1012.0, limit=4) == [[13, 14, 15, 16], [17, 18, 19, 20]]
    assert read_all(service, after_timestamp=1012.0, num_recent_events=5, limit=4) == [[16, 17, 18, 19], [20]]


def test_later_pages_stay_in_the_window_of_the_first(store: InMemorySessionStore, service: SessionService) -> None:
    create(store)
    append(store, 5)
    first = service.get_session("app", "alice", "s1", limit=3)
    append(store, 5, start=5)  # appended while the client pages
    second = service.get_session("app", "alice", "s1", limit=3, next_token=first["next_token"])
    assert [e["seq"] for e in second["events"]] == [4, 5] and second["next_token"] is None
    assert second["version"] == 2  # the session's own fields are current


def test_repeating_the_first_requests_filters_with_the_token_is_allowed_other_filters_are_not(
    store: InMemorySessionStore, service: SessionService
) -> None:
    create(store)
    append(store, 10)
    first = service.get_session("app", "alice", "s1", num_recent_events=6, limit=2)
    token = first["next_token"]
    same = service.get_session("app", "alice", "s1", num_recent_events=6, limit=2, next_token=token)
    assert [e["seq"] for e in same["events"]] == [7, 8]
    with pytest.raises(InvalidInput) as info:
        service.get_session("app", "alice", "s1", num_recent_events=5, limit=2, next_token=token)
    assert info.value.field == "next_token"
    with pytest.raises(InvalidInput):
        service.get_session("app", "alice", "s1", after_timestamp=1.0, limit=2, next_token=token)


def forge(token: str, **changes: Any) -> str:
    data = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    data.update(changes)
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def test_tokens_are_bound_to_the_session_and_its_incarnation(
    store: InMemorySessionStore, service: SessionService
) -> None:
    create(store)
    create(store, SessionKey("app", "alice", "s2"))
    create(store, SessionKey("app", "bob", "s1"))
    for key in (KEY, SessionKey("app", "alice", "s2"), SessionKey("app", "bob", "s1")):
        append(store, 4, key=key)
    token = service.get_session("app", "alice", "s1", limit=1)["next_token"]
    bad = [
        "garbage",
        "x" * 2000,
        forge(token, scope="0" * 16),
        forge(token, after=True),
        forge(token, after=3, until=2),
        forge(token, ts=float("nan")),
        forge(token, k="sessions"),
        service.list_sessions("app", "alice", limit=1)["next_token"],
    ]
    for forged in bad:
        with pytest.raises(InvalidInput) as info:
            service.get_session("app", "alice", "s1", next_token=forged)
        assert info.value.field == "next_token"
    for user, sid in (("alice", "s2"), ("bob", "s1")):
        with pytest.raises(InvalidInput):
            service.get_session("app", user, sid, next_token=token)
    # The same id re-created is another session: the old token does not reach into it.
    store.delete_session(KEY)
    record = SessionRecord("app", "alice", "s1", create_time=2000.0, update_time=2000.0)
    store.create_session(record, ScopedDelta())
    with pytest.raises(InvalidInput):
        service.get_session("app", "alice", "s1", next_token=token)


@pytest.mark.parametrize("limit", [0, -1, 1001])
def test_limit_out_of_range_is_invalid(store: InMemorySessionStore, service: SessionService, limit: int) -> None:
    create(store)
    with pytest.raises(InvalidInput) as info:
        service.get_session("app", "alice", "s1", limit=limit)
    assert info.value.field == "limit"


def test_a_session_too_large_for_one_response_pages_by_size(
    store: InMemorySessionStore, service: SessionService
) -> None:
    create(store)
    append(store, 24, text="x" * 300_000)  # 7.2 MB of events, no paging parameter
    pages = read_all(service)
    assert len(pages) == 2 and [seq for page in pages for seq in page] == list(range(1, 25))
    # Escaping counts: quotes double on the wire, so fewer of them fit a page.
    create(store, SessionKey("app", "alice", "q"))
    append(store, 10, text='"' * 300_000, key=SessionKey("app", "alice", "q"))
    page = service.get_session("app", "alice", "q")
    assert len(page["events"]) < 10 and page["next_token"] is not None
    assert wire_size(dumps(page)) <= RESPONSE_CAP


def test_an_event_too_large_for_any_response_reads_as_a_marker(
    store: InMemorySessionStore, service: SessionService
) -> None:
    create(store)
    append(store, 1)
    append(store, 1, text="\u4e00" * 1_000_000, start=1)  # 3 MB of UTF-8, 6 MB escaped
    append(store, 1, start=2)
    pages = []
    token = None
    while True:
        page = service.get_session("app", "alice", "s1", next_token=token)
        pages.append(page["events"])
        token = page["next_token"]
        if token is None:
            break
    events = [e for p in pages for e in p]
    assert [e["seq"] for e in events] == [1, 2, 3]
    assert events[1]["error_code"] == "event_too_large" and events[1]["id"] == "e1" and "content" not in events[1]
    assert events[2]["content"]["parts"][0]["text"] == "hi"


def test_a_listing_cuts_its_page_before_the_response_cap(store: InMemorySessionStore, service: SessionService) -> None:
    for i in range(40):
        create(store, SessionKey("app", "alice", f"s{i:02d}"), state={"blob": "y" * 300_000})
    seen: list[str] = []
    token = None
    pages = 0
    while True:
        page = service.list_sessions("app", "alice", limit=100, next_token=token)
        assert wire_size(dumps(page)) <= RESPONSE_CAP
        seen += [s["id"] for s in page["sessions"]]
        pages += 1
        token = page["next_token"]
        if token is None:
            break
    assert seen == [f"s{i:02d}" for i in range(40)] and pages == 3
