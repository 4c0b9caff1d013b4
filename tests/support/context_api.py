"""The context and compaction routes through the in-process API, and the scheduled compaction sweep's handler."""

from __future__ import annotations

from typing import Any

from local.apigw import LambdaContext
from local.template import load_handler, load_template, schedules
from tests.support.api import Api


def context(api: Api, sid: str, **query: Any) -> Any:
    reply = api.request("GET", f"/apps/app/users/alice/sessions/{sid}/context", query=query or None)
    assert reply.status == 200, reply.body
    return reply.body


def compact(api: Api, sid: str) -> Any:
    reply = api.request("POST", f"/apps/app/users/alice/sessions/{sid}/compact")
    assert reply.status == 200, reply.body
    return reply.body


def sweep() -> dict[str, Any]:
    (schedule,) = schedules(load_template(), {"CompactionSchedule": "rate(5 minutes)"})
    result: dict[str, Any] = load_handler(schedule)({"detail-type": "Scheduled Event"}, LambdaContext())
    return result
