"""Retries (scripted transports, both clients): what is retried, how long it waits, and what is never replayed."""

from __future__ import annotations

import json
import uuid
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime

import httpx
import pytest
from support import Script, answer, mocked, session_json

from agent_memory_client.errors import (
    AlreadyExists,
    NotFound,
    PreconditionFailed,
    QuotaExceeded,
    RateLimited,
    RequestTimeout,
    ServerError,
    ServiceUnavailable,
    TransportError,
)

UNAVAILABLE = {"error": {"code": "service_unavailable", "message": "DynamoDB kept throttling"}}
GATEWAY_502 = {"message": "Internal server error"}
EVENT = {"author": "user", "content": {"role": "user", "parts": [{"text": "hi"}]}}


def stored(body: dict, seq: int = 1) -> dict:
    return {**body, "timestamp": 5.0, "seq": seq}


async def test_a_503_is_retried_after_its_retry_after(kind: str) -> None:
    script = Script(answer(503, UNAVAILABLE, {"Retry-After": "2"}), answer(200, session_json(), {"ETag": '"3"'}))
    client = mocked(kind, script)
    session = await client.call("get_session", "app", "u", "s1")
    assert session.version == 3  # from the ETag
    assert len(script.requests) == 2
    assert client.sleeps == [2.0]  # Retry-After (2 s) outweighs the jitter (at most 0.2 s)


async def test_retry_after_as_an_http_date(kind: str) -> None:
    when = datetime.now(timezone.utc) + timedelta(seconds=5)
    script = Script(answer(429, {"message": "Too Many Requests"}, {"Retry-After": format_datetime(when, usegmt=True)}))
    script.replies.append(answer(200, session_json()))
    client = mocked(kind, script)
    await client.call("get_session", "app", "u", "s1")
    assert len(client.sleeps) == 1 and 3.0 < client.sleeps[0] <= 5.0


async def test_backoff_is_exponential_with_full_jitter_and_capped(kind: str) -> None:
    script = Script(*[answer(429, {"message": "Too Many Requests"}) for _ in range(4)])
    client = mocked(kind, script, max_retries=3, backoff=8.0)
    with pytest.raises(RateLimited) as caught:
        await client.call("list_sessions", "app", "u")
    assert caught.value.code == "too_many_requests" and caught.value.status == 429
    assert len(script.requests) == 4  # the first attempt and 3 retries
    assert client.sleeps == [8.0, 16.0, 20.0]  # random() fixed at 1.0: the top of each range, capped at 20 s

    draws = iter([0.25, 0.5, 0.0])
    script = Script(*[answer(503, UNAVAILABLE) for _ in range(4)])
    client = mocked(kind, script, max_retries=3, backoff=1.0)
    client.client._core.random = lambda: next(draws)
    with pytest.raises(ServiceUnavailable):
        await client.call("list_sessions", "app", "u")
    assert client.sleeps == [0.25, 1.0, 0.0]  # a uniform draw below backoff * 2**attempt


async def test_a_retry_after_past_a_minute_is_left_to_the_caller(kind: str) -> None:
    script = Script(answer(503, UNAVAILABLE, {"Retry-After": "120"}))
    client = mocked(kind, script)
    with pytest.raises(ServiceUnavailable) as caught:
        await client.call("get_session", "app", "u", "s1")
    assert caught.value.retry_after == 120.0
    assert len(script.requests) == 1 and client.sleeps == []


async def test_connection_errors_and_timeouts_are_retried(kind: str) -> None:
    script = Script(httpx.ConnectError, httpx.ReadTimeout, httpx.RemoteProtocolError, answer(200, session_json()))
    client = mocked(kind, script)
    assert (await client.call("get_session", "app", "u", "s1")).id == "s1"
    assert len(script.requests) == 4 and len(client.sleeps) == 3


async def test_retries_stop_at_max_retries(kind: str) -> None:
    script = Script(httpx.ConnectError, httpx.ConnectError, httpx.ConnectError)
    client = mocked(kind, script, max_retries=2)
    with pytest.raises(TransportError) as caught:
        await client.call("get_session", "app", "u", "s1")
    assert caught.value.status is None and not isinstance(caught.value, RequestTimeout)
    assert isinstance(caught.value.__cause__, httpx.ConnectError)
    assert len(script.requests) == 3


@pytest.mark.parametrize("status", [400, 404, 409, 412, 413, 422, 500])
async def test_other_errors_are_not_retried(kind: str, status: int) -> None:
    script = Script(answer(status, {"error": {"code": "x", "message": "no"}}))
    client = mocked(kind, script)
    with pytest.raises(Exception):  # noqa: B017 - the class is test_errors.py's subject; here: one attempt
        await client.call("append_event", "app", "u", "s1", dict(EVENT))
    assert len(script.requests) == 1


async def test_an_append_gets_its_id_before_the_first_attempt_and_resends_it(kind: str) -> None:
    # The first attempt may have been stored (its answer timed out): the retry must carry the same id, which
    # the service stores once.
    script = Script(
        httpx.ReadTimeout, answer(502, GATEWAY_502), lambda r: answer(201, stored(eval_json(r)), {"ETag": '"1"'})
    )
    client = mocked(kind, script)
    result = await client.call("append_event", "app", "u", "s1", dict(EVENT))
    bodies = script.bodies()
    assert bodies[0] == bodies[1] == bodies[2]
    assert uuid.UUID(bodies[0]["id"]) and result.events[0].id == bodies[0]["id"]
    assert result.version == 1
    batch = Script(httpx.ReadTimeout, lambda r: answer(201, {"events": [stored(e) for e in eval_json(r)["events"]]}))
    client = mocked(kind, batch)
    events = [dict(EVENT), {**EVENT, "id": "mine"}]
    result = await client.call("append_events", "app", "u", "s1", events)
    sent = batch.bodies()
    assert sent[0] == sent[1] and sent[0]["events"][1]["id"] == "mine" and sent[0]["events"][0]["id"]
    assert [e.id for e in result.events] == [e["id"] for e in sent[0]["events"]]
    assert "id" not in events[0]  # the caller's dict is not modified


def eval_json(request: httpx.Request) -> dict:
    return json.loads(request.content)


async def test_get_or_create_picks_the_id_so_that_a_retry_cannot_create_two(kind: str) -> None:
    script = Script(
        httpx.ReadTimeout, lambda r: answer(200, {**session_json(eval_json(r)["session_id"]), "created": False})
    )
    client = mocked(kind, script)
    session = await client.call("create_session", "app", "u", state={"k": 1})
    bodies = script.bodies()
    assert bodies[0] == bodies[1] and bodies[0]["state"] == {"k": 1}
    assert session.id == bodies[0]["session_id"] and uuid.UUID(session.id)


@pytest.mark.parametrize(
    "failure",
    [
        httpx.ReadTimeout,
        lambda r: answer(502, GATEWAY_502),
        lambda r: answer(504, {"message": "Endpoint request timed out"}),
    ],
)
async def test_a_strict_create_of_the_callers_id_is_not_replayed_once_it_may_have_landed(kind: str, failure) -> None:
    # A replay could answer already_exists for the session this very call created: the caller must decide.
    script = Script(failure)
    client = mocked(kind, script)
    with pytest.raises((RequestTimeout, ServerError)):
        await client.call("create_session", "app", "u", session_id="mine", strict=True)
    assert len(script.requests) == 1
    assert script.requests[0].headers["if-none-match"] == "*"


@pytest.mark.parametrize(
    "failure",
    [httpx.ConnectError, lambda r: answer(429, {"message": "Too Many Requests"}), lambda r: answer(503, UNAVAILABLE)],
)
async def test_a_strict_create_is_retried_when_the_service_did_nothing(kind: str, failure) -> None:
    script = Script(failure, answer(201, {**session_json("mine"), "created": True}))
    client = mocked(kind, script)
    session = await client.call("create_session", "app", "u", session_id="mine", strict=True)
    assert session.created is True and len(script.requests) == 2


async def test_a_strict_create_that_finds_its_own_generated_id_returns_the_session(kind: str) -> None:
    script = Script(
        answer(504, {"message": "Endpoint request timed out"}),  # the first attempt created it; its answer was lost
        answer(409, {"error": {"code": "already_exists", "message": "session exists"}}),
        lambda r: answer(200, session_json(r.url.path.rsplit("/", 1)[1]), {"ETag": '"0"'}),
    )
    client = mocked(kind, script)
    session = await client.call("create_session", "app", "u", strict=True)
    created_id = script.bodies()[0]["session_id"]
    assert session.id == created_id and session.created is True
    assert script.requests[2].method == "GET"
    # Without a lost answer, already_exists is the caller's to handle.
    script = Script(answer(409, {"error": {"code": "already_exists", "message": "session exists"}}))
    with pytest.raises(AlreadyExists):
        await mocked(kind, script).call("create_session", "app", "u", strict=True)


def tail(*events: dict, version: int) -> httpx.Response:
    return answer(200, session_json(version=version, events=list(events)), {"ETag": f'"{version}"'})


async def test_a_conditional_append_whose_answer_was_lost_is_recognised_on_its_412(kind: str) -> None:
    # Attempt 1 lands (version 4 -> 5), its answer is lost; attempt 2 meets If-Match "4" != 5: 412. The client
    # reads the tail, finds its event last (a compaction summary after it aside) and returns it.
    compaction = {"id": "c", "author": "memory", "actions": {"compaction": {"start_timestamp": 1, "end_timestamp": 2}}}
    script = Script(
        httpx.ReadTimeout,
        answer(412, {"error": {"code": "precondition_failed", "message": "stale", "field": "If-Match"}}),
        lambda r: tail({"id": "older"}, {"id": sent_id(script), "author": "user", "seq": 7}, compaction, version=5),
    )
    client = mocked(kind, script)
    result = await client.call("append_event", "app", "u", "s1", dict(EVENT), if_match=4)
    assert script.requests[0].headers["if-match"] == '"4"'
    assert [e.id for e in result.events] == [sent_id(script)] and result.events[0].seq == 7
    assert result.version == 5
    assert "num_recent_events=9" in str(script.requests[2].url)


def sent_id(script: Script) -> str:
    return str(script.bodies()[0]["id"])


async def test_a_conditional_append_raises_412_when_another_write_followed_or_it_never_landed(kind: str) -> None:
    failed = answer(412, {"error": {"code": "precondition_failed", "message": "stale"}})
    script = Script(
        httpx.ReadTimeout, failed, lambda r: tail({"id": sent_id(script)}, {"id": "someone-else"}, version=6)
    )
    with pytest.raises(PreconditionFailed):
        await mocked(kind, script).call("append_event", "app", "u", "s1", dict(EVENT), if_match=4)
    script = Script(httpx.ReadTimeout, failed, lambda r: tail({"id": "someone-else"}, version=5))
    with pytest.raises(PreconditionFailed):
        await mocked(kind, script).call("append_event", "app", "u", "s1", dict(EVENT), if_match=4)
    # A 412 on the first attempt is the answer: no read.
    script = Script(failed)
    with pytest.raises(PreconditionFailed):
        await mocked(kind, script).call("append_event", "app", "u", "s1", dict(EVENT), if_match=4)
    assert len(script.requests) == 1


async def test_a_404_during_recovery_is_raised(kind: str) -> None:
    script = Script(
        httpx.ReadTimeout,
        answer(412, {"error": {"code": "precondition_failed", "message": "stale"}}),
        answer(404, {"error": {"code": "session_not_found", "message": "gone"}}),
    )
    with pytest.raises(NotFound):
        await mocked(kind, script).call("append_event", "app", "u", "s1", dict(EVENT), if_match=4)


async def test_a_success_that_is_not_json_is_an_error(kind: str) -> None:
    script = Script(httpx.Response(200, content=b"<html>proxy</html>", headers={"content-type": "text/html"}))
    with pytest.raises(ServerError) as caught:
        await mocked(kind, script).call("get_session", "app", "u", "s1")
    assert caught.value.code == "invalid_response"


async def test_a_quota_exceeded_429_is_not_retried(kind: str) -> None:
    body = {"error": {"code": "quota_exceeded", "message": "limit sessions_per_user = 2", "field": "sessions_per_user"}}
    script = Script(answer(429, body))
    client = mocked(kind, script)
    with pytest.raises(QuotaExceeded) as caught:
        await client.call("create_session", "app", "u", session_id="s3")
    assert caught.value.field == "sessions_per_user" and caught.value.status == 429
    assert len(script.requests) == 1 and client.sleeps == []
