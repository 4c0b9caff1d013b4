"""``GET …/sessions/{session_id}/events``: events by id or by id prefix, end to end through API Gateway events and
moto."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.api import Api, text_event

EVENTS = "/apps/app/users/alice/sessions/s1/events"


def seeded(api: Api) -> None:
    assert api.create(session_id="s1").status == 201
    ids = ["cp-b", "cp-a", "m1", "cp-c"]
    assert api.append("s1", {"events": [text_event(i, id=i) for i in ids]}).status == 201


def get(api: Api, query: str) -> Any:
    return api.request("GET", f"{EVENTS}?{query}")


def test_named_ids_in_their_order_and_a_prefix_paged_in_id_order(api: Api) -> None:
    seeded(api)
    named = get(api, "id=m1&id=cp-a&id=gone")
    assert named.status == 200
    assert [e["id"] for e in named.body["events"]] == ["m1", "cp-a"] and named.body["unread"] == []
    assert named.body["events"][0]["content"]["parts"][0]["text"] == "m1" and named.body["events"][0]["seq"] == 3
    page = get(api, "id_prefix=cp-&order=desc&limit=2")
    assert [e["id"] for e in page.body["events"]] == ["cp-c", "cp-b"] and page.body["next_after_id"] == "cp-b"
    rest = get(api, f"id_prefix=cp-&order=desc&limit=2&after_id={page.body['next_after_id']}")
    assert [e["id"] for e in rest.body["events"]] == ["cp-a"] and rest.body["next_after_id"] is None
    every = get(api, "limit=10")
    assert [e["id"] for e in every.body["events"]] == ["cp-a", "cp-b", "cp-c", "m1"]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("id=-bad", "id"),
        ("id=a&id_prefix=b", "id"),
        ("id=a&order=desc", "id"),
        ("id_prefix=a%20b", "id_prefix"),
        ("id_prefix=" + "a" * 129, "id_prefix"),
        ("after_id=%2Fx", "after_id"),
        ("order=sideways", "order"),
        ("limit=0", "limit"),
        ("limit=1001", "limit"),
        ("&".join(f"id=e{i}" for i in range(101)), "id"),
    ],
)
def test_bad_parameters_answer_400_naming_the_parameter(api: Api, query: str, field: str) -> None:
    seeded(api)
    reply = get(api, query)
    assert reply.status == 400, reply.body
    assert reply.error["field"] == field


def test_a_missing_session_answers_404(api: Api) -> None:
    reply = get(api, "id=a")
    assert reply.status == 404 and reply.error["code"] == "session_not_found"


def test_after_summary_reads_the_summary_and_what_follows_what_it_covers(api: Api) -> None:
    assert api.create(session_id="long").status == 201
    for start in range(0, 60, 20):
        batch = [text_event(f"turn {i}", id=f"t{i:02}") for i in range(start, start + 20)]
        assert api.append("long", {"events": batch}).status == 201
    # No summary yet: the whole session.
    assert len(api.get("long", after_summary="true").body["events"]) == 60
    assert api.request("POST", "/apps/app/users/alice/sessions/long/compact").body["compacted"] is True
    whole = api.get("long").body["events"]
    summary = next(e for e in whole if (e.get("actions") or {}).get("compaction"))
    covered_end = max(
        e["seq"]
        for e in whole
        if e["timestamp"] <= summary["actions"]["compaction"]["end_timestamp"] and e is not summary
    )
    assert api.append("long", text_event("after", id="after")).status == 201
    window = api.get("long", after_summary="true").body
    assert [e["id"] for e in window["events"]] == [e["id"] for e in whole if e["seq"] > covered_end] + ["after"]
    assert window["events"][0]["id"].startswith("t") and summary["id"] in [e["id"] for e in window["events"]]
    assert len(window["events"]) < 20 and api.get("long", after_summary="maybe").status == 400


def test_named_events_past_the_response_cap_answer_the_rest_as_unread(api: Api) -> None:
    assert api.create(session_id="big").status == 201
    for n in range(14):  # 14 x 400 KB: past the 5 MB a response carries
        assert api.append("big", text_event("y" * 400_000, id=f"b{n:02}")).status == 201
    wanted = [f"b{n:02}" for n in range(14)] + ["absent"]
    first = api.request("GET", "/apps/app/users/alice/sessions/big/events?" + "&".join(f"id={i}" for i in wanted))
    assert first.status == 200 and len(first.raw) < 5_500_000
    answered = [e["id"] for e in first.body["events"]]
    assert answered and answered == wanted[: len(answered)]
    assert first.body["unread"] == wanted[len(answered) : 14]  # "absent" is not held: neither answered nor unread
    rest = api.request(
        "GET", "/apps/app/users/alice/sessions/big/events?" + "&".join(f"id={i}" for i in first.body["unread"])
    )
    assert rest.body["events"] and [e["id"] for e in rest.body["events"]] + rest.body["unread"] == first.body["unread"]
