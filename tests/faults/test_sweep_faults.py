"""The compaction sweep's fan-out against moto, with faults injected below botocore's retries: the due listing gives
every shard of ``by_due`` its share, the dispatcher hands every listed session to the worker function (Lambda's
Invoke, asynchronous), and a throttle anywhere in the sweep (the listing, the Invoke, the summary's transaction,
the settle) loses no due mark: storage still holds it and the next run compacts the session, once."""

from __future__ import annotations

import json
from typing import Any

import pytest

from agent_memory.stores.dynamo.keys import due_shard
from agent_memory.stores.ports import SessionKey
from local.apigw import LambdaContext
from local.template import load_handler, load_template
from tests.support.api import Api
from tests.support.context_api import sweep

from .injector import FaultInjector, Reply, request_json, throttle
from .session_storage import chat, session_item, summaries

WORKER = "agent-memory-CompactWorkerFunction-EXAMPLE"


@pytest.fixture
def api(aws: dict[str, Any], faults: FaultInjector, monkeypatch: pytest.MonkeyPatch) -> Api:
    from agent_memory.composition import services
    from agent_memory.config import settings

    monkeypatch.setenv("COMPACTION_INTERVAL", "3")
    monkeypatch.setenv("EVENT_RETENTION_SIZE", "2")
    monkeypatch.setenv("TOKEN_THRESHOLD", "100000")
    settings.cache_clear()
    services.cache_clear()
    return Api()


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The dispatcher as deployed: it invokes the worker function instead of running the workers itself."""
    from agent_memory.composition import services
    from agent_memory.config import settings

    monkeypatch.setenv("COMPACTION_WORKER_FUNCTION", WORKER)
    settings.cache_clear()
    services.cache_clear()


@pytest.fixture
def short_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agent_memory.stores.dynamo.retries.WRITE_BUDGET_S", 1.5)


def sessions_in(shard: int, count: int, taken: set[str] | None = None) -> list[str]:
    """``count`` session ids of alice's whose due mark goes to ``shard``."""
    found: list[str] = []
    i = 0
    while len(found) < count:
        sid = f"s{i}"
        if due_shard(SessionKey("app", "alice", sid)) == f"DUE#{shard}" and sid not in (taken or set()):
            found.append(sid)
        i += 1
    return found


def due_marked(aws: dict[str, Any], sid: str) -> bool:
    item = session_item(aws, sid)
    return item is not None and "due" in item


def worker(event: dict[str, Any]) -> dict[str, Any]:
    """The worker function's handler, run on one Invoke's payload."""
    props = load_template()["Resources"]["CompactWorkerFunction"]["Properties"]

    class Code:
        code_uri = str(props["CodeUri"])
        handler = "app.lambda_handler"

    result: dict[str, Any] = load_handler(Code())(event, LambdaContext(function_name="compact_worker"))
    return result


# --- the listing ---------------------------------------------------------------------------------------------------


def test_a_busy_shard_does_not_starve_the_others(api: Api, aws: dict[str, Any]) -> None:
    from agent_memory.composition import services

    busy = sessions_in(0, 12)
    (lone,) = sessions_in(7, 1)
    for sid in [*busy, lone]:  # the lone session is marked last: the newest due of all
        api.create(session_id=sid)
        chat(api, sid, 1)
    listed = services().session_store.list_due(6)
    assert len(listed) == 6 and SessionKey("app", "alice", lone) in listed
    # The busy shard's oldest go first.
    assert [k.session_id for k in listed if k.session_id != lone] == busy[:5]


def test_the_listing_pages_through_a_shard(api: Api, aws: dict[str, Any], faults: FaultInjector) -> None:
    from agent_memory.composition import services

    sids = sessions_in(3, 5)
    for sid in sids:
        api.create(session_id=sid)
        chat(api, sid, 1)

    def one_item_pages(request: Any) -> Reply:
        # What DynamoDB does when a query's page reaches 1 MB: fewer items than asked, and where to go on.
        body = request_json(request)
        shard = body["ExpressionAttributeValues"][":d"]["S"]
        start = (body.get("ExclusiveStartKey") or {}).get("SK", {}).get("S")
        ours = sids if shard == "DUE#3" else []
        rest = ours[ours.index(start[2:]) + 1 :] if start else ours
        if not rest:
            return Reply(200, json.dumps({"Items": [], "Count": 0}).encode())
        item = {"PK": {"S": "U#app#alice"}, "SK": {"S": f"S#{rest[0]}"}, "due": {"S": shard}}
        page: dict[str, Any] = {"Items": [item], "Count": 1}
        if len(rest) > 1:
            page["LastEvaluatedKey"] = item
        return Reply(200, json.dumps(page).encode())

    faults.respond("Query", one_item_pages, times=-1)
    assert [k.session_id for k in services().session_store.list_due(100)] == sids


# --- the dispatcher and the worker function ---------------------------------------------------------------------------


def test_the_dispatcher_invokes_the_worker_with_every_due_session(
    api: Api, aws: dict[str, Any], faults: FaultInjector, deployed: None
) -> None:
    sids = [*sessions_in(1, 2), *sessions_in(6, 2)]
    for sid in sids:
        api.create(session_id=sid)
        chat(api, sid, 4)
    payloads: list[dict[str, Any]] = []

    def accepted(request: Any) -> Reply:
        assert request.headers["X-Amz-Invocation-Type"] == b"Event" and WORKER in request.url
        payloads.append(json.loads(request.body))
        return Reply(202, b"", {"x-amzn-requestid": "injected"})

    faults.respond("Invoke", accepted, times=-1)
    report = sweep()
    assert report["due"] == 4 and report["workers"] == 1 and report["compacted"] == 0  # started, not run here
    assert sorted(s for p in payloads for _, _, s in p["sessions"]) == sorted(sids)
    assert all(due_marked(aws, sid) for sid in sids)  # still due until the worker compacts them
    for payload in payloads:
        assert worker(payload)["compacted"] == len(payload["sessions"])
    assert all(len(summaries(api, sid)) == 1 and not due_marked(aws, sid) for sid in sids)


def test_a_throttled_invoke_loses_no_due_mark(
    api: Api, aws: dict[str, Any], faults: FaultInjector, deployed: None
) -> None:
    api.create(session_id="s1")
    chat(api, "s1", 4)
    faults.fail(
        "Invoke",
        Reply(429, b'{"Type":"User","message":"Rate exceeded"}', {"x-amzn-ErrorType": "TooManyRequestsException"}),
        times=-1,
    )
    report = sweep()
    assert report["shares_failed"] == 1 and report["workers"] == 0
    assert faults.calls.count("Invoke") == 4  # the first and botocore's 3 retries, then the share is given up
    assert due_marked(aws, "s1") and summaries(api, "s1") == []
    faults.clear()
    payloads: list[dict[str, Any]] = []
    faults.respond("Invoke", lambda r: payloads.append(json.loads(r.body)) or Reply(202, b""), times=-1)
    assert sweep()["workers"] == 1
    assert worker(payloads[0])["compacted"] == 1 and len(summaries(api, "s1")) == 1


# --- throttles inside the sweep ----------------------------------------------------------------------------------


def test_a_throttled_listing_fails_the_run_and_loses_nothing(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: None
) -> None:
    from agent_memory.errors import ServiceUnavailable

    api.create(session_id="s1")
    chat(api, "s1", 4)
    faults.fail("Query", throttle(), times=-1, when=lambda r: request_json(r).get("IndexName") == "by_due")
    with pytest.raises(ServiceUnavailable):
        sweep()  # the function fails (its Errors alarm); the schedule runs it again
    faults.clear()
    assert due_marked(aws, "s1")
    assert sweep()["compacted"] == 1 and len(summaries(api, "s1")) == 1


def test_a_throttled_summary_write_loses_no_due_mark(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: None
) -> None:
    sids = sessions_in(2, 3)
    for sid in sids:
        api.create(session_id=sid)
        chat(api, sid, 4)
    faults.fail("TransactWriteItems", throttle(), times=-1)
    report = sweep()
    assert report["failed"] == 3 and report["compacted"] == 0
    faults.clear()
    assert all(due_marked(aws, sid) and summaries(api, sid) == [] for sid in sids)
    assert sweep()["compacted"] == 3
    assert all(len(summaries(api, sid)) == 1 and not due_marked(aws, sid) for sid in sids)


def test_a_throttled_settle_keeps_the_session_due_and_stores_one_summary(
    api: Api, aws: dict[str, Any], faults: FaultInjector, short_budget: None
) -> None:
    api.create(session_id="s1")
    chat(api, "s1", 4)
    # The settle is the sweep's only UpdateItem: its summary lands, the due mark cannot be removed.
    faults.fail("UpdateItem", throttle(), times=-1)
    report = sweep()
    assert report["compacted"] == 1 and report["failed"] == 1 and report["settled"] == 0
    faults.clear()
    assert due_marked(aws, "s1") and len(summaries(api, "s1")) == 1
    again = sweep()
    assert again["due"] == 1 and again["compacted"] == 0 and again["settled"] == 1
    assert not due_marked(aws, "s1") and len(summaries(api, "s1")) == 1


def test_a_share_delivered_twice_stores_one_summary(api: Api, aws: dict[str, Any], faults: FaultInjector) -> None:
    api.create(session_id="s1")
    chat(api, "s1", 4)
    event = {"sessions": [["app", "alice", "s1"]]}
    assert worker(event)["compacted"] == 1
    assert worker(event) | {"failures": []} == worker(event) and worker(event)["compacted"] == 0
    assert len(summaries(api, "s1")) == 1 and not due_marked(aws, "s1")


def test_the_worker_skips_what_is_not_a_session_key(api: Api, aws: dict[str, Any], faults: FaultInjector) -> None:
    api.create(session_id="s1")
    chat(api, "s1", 4)
    event = {"sessions": [["app", "alice", "s1"], ["app", "alice"], ["app", "al ice", "s2"], "s3", [1, 2, 3]]}
    report = worker(event)
    assert report["due"] == 1 and report["compacted"] == 1


def test_a_share_too_large_for_one_invoke_is_split(aws: dict[str, Any], faults: FaultInjector) -> None:
    from agent_memory.limits import MAX_SWEEP_PAYLOAD_BYTES
    from agent_memory.runtime.aws import client
    from agent_memory.stores.lambda_sweep import LambdaSweepInvoker, sweep_payload

    # A worker's 500 sessions fit one Invoke even with 128-character identifiers (the longest allowed) ...
    keys = [SessionKey("a" * 128, "u" * 124 + f"{i:04d}", "s" * 128) for i in range(700)]
    assert len(sweep_payload(keys[:500])) <= MAX_SWEEP_PAYLOAD_BYTES
    # ... and a larger share goes in as many as it takes, each under Lambda's 256 KB for an async Invoke.
    assert len(sweep_payload(keys)) > MAX_SWEEP_PAYLOAD_BYTES
    bodies: list[bytes] = []
    faults.respond("Invoke", lambda r: bodies.append(r.body) or Reply(202, b""), times=-1)
    LambdaSweepInvoker(lambda: client("lambda"), WORKER).start(keys)
    assert len(bodies) == 2 and all(len(b) <= MAX_SWEEP_PAYLOAD_BYTES for b in bodies)
    sent = [SessionKey(*k) for b in bodies for k in json.loads(b)["sessions"]]
    assert sent == keys
