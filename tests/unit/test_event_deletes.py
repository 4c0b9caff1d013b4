"""SessionService's deletes over the in-memory store: planning again when the session moves under a plan, the
forget hook, and the input rules."""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.errors import Conflict, InvalidInput, ToolPairConflict
from agent_memory.models import Event
from agent_memory.service.sessions import SessionService
from agent_memory.stores.inmemory import InMemorySessionStore
from agent_memory.stores.ports import DeleteResult, Deletion, SessionKey

KEY = SessionKey("app", "u", "s")


def ev(event_id: str, parts: list[dict[str, Any]]) -> Event:
    return Event.model_validate({"id": event_id, "author": "agent", "content": {"role": "model", "parts": parts}})


class AppendsDuringTheFirstDelete(InMemorySessionStore):
    """Another writer appends a tool result between the service's plan and its commit, ``races`` times."""

    def __init__(self, service: list[SessionService], races: int = 1) -> None:
        super().__init__()
        self.service = service
        self.races = races

    def delete_events(self, key: SessionKey, deletion: Deletion, expected_version: int | None) -> DeleteResult:
        if self.races:
            self.races -= 1
            self.service[0].append_events(
                app_name="app",
                user_id="u",
                session_id="s",
                events=[ev(f"late{self.races}", [{"function_response": {"id": "c1", "name": "t", "response": {}}}])],
            )
        return super().delete_events(key, deletion, expected_version)


def setup(races: int = 1) -> tuple[SessionService, AppendsDuringTheFirstDelete]:
    holder: list[SessionService] = []
    store = AppendsDuringTheFirstDelete(holder, races)
    service = SessionService(store)
    holder.append(service)
    service.create_session(app_name="app", user_id="u", session_id="s")
    service.append_events(
        app_name="app",
        user_id="u",
        session_id="s",
        events=[ev("call", [{"function_call": {"id": "c1", "name": "t", "args": {}}}]), ev("x", [{"text": "x"}])],
    )
    return service, store


def test_a_partner_appended_between_plan_and_commit_is_deleted_too() -> None:
    service, _ = setup()
    forgotten: list[str] = []
    answer = service.delete_event(
        app_name="app", user_id="u", session_id="s", event_id="call", forget=lambda key, ids: forgotten.extend(ids)
    )
    # The first plan (call alone) met the late result at commit: planned again, the pair deleted together.
    assert answer["deleted"] == ["call", "late0"]
    assert sorted(forgotten) == ["call", "late0"]
    left = service.get_session("app", "u", "s")["events"]
    assert [e["id"] for e in left] == ["x"]


def test_a_session_that_never_stops_moving_answers_409() -> None:
    service, _ = setup(races=100)
    with pytest.raises(Conflict):
        service.delete_event(app_name="app", user_id="u", session_id="s", event_id="x")


def test_reject_names_the_partner_and_bad_parameters_are_400() -> None:
    service, _ = setup(races=0)
    result = ev("result", [{"function_response": {"id": "c1", "name": "t", "response": {}}}])
    service.append_events(app_name="app", user_id="u", session_id="s", events=[result])
    with pytest.raises(ToolPairConflict) as split:
        service.delete_event(app_name="app", user_id="u", session_id="s", event_id="call", pairs="reject")
    assert "'result'" in split.value.message and split.value.field == "event_id"
    assert service.delete_event(app_name="app", user_id="u", session_id="s", event_id="x", pairs="reject")[
        "deleted"
    ] == ["x"]
    with pytest.raises(InvalidInput):
        service.clear_events(app_name="app", user_id="u", session_id="s", before_seq=0)
    with pytest.raises(InvalidInput):
        service.clear_events(app_name="app", user_id="u", session_id="s", before_seq=1, before_invocation_id="i")
