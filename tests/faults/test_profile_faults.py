"""The user profile under faults injected below botocore's retries: facts ride in the memory save's own writes,
so after any fault and a retry each record holds its facts once and the profile lists each fact once; a forget
that a fault interrupts already leaves the profile without the forgotten facts. Storage is read after each."""

from __future__ import annotations

from typing import Any

import pytest

from agent_memory.service.memories import text_memory_id
from agent_memory.stores.s3_memories import decode_part
from tests.support.api import Api
from tests.support.aws import BUCKET
from tests.support.memory_objects import inline_records

from .injector import FaultInjector, s3_error
from .memory_storage import BASE, SAVE_FAULTS, assert_unavailable, manifest, named_parts, save, stored_bytes

PROFILE = "/apps/app/users/alice/profile"
TEXTS = ["I am allergic to peanuts", "My sister Ana lives in Porto. I am allergic to peanuts", "I play the oboe"]


@pytest.fixture(autouse=True)
def _short_budget_and_lexical(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("agent_memory.runtime.aws.WRITE_BUDGET_S", 3.0)
    monkeypatch.setattr("agent_memory.stores.dynamo.retries.WRITE_BUDGET_S", 3.0)
    monkeypatch.setenv("EMBEDDER", "none")
    monkeypatch.setenv("AUTOSAVE_POLICY", "default")


@pytest.fixture
def api(aws: dict[str, Any]) -> Api:
    return Api()


def stored_facts(aws: dict[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    """(record id, its facts' texts) for every record the manifest's parts and inline records hold, as stored."""
    out = [(r.id, tuple(f["text"] for f in r.facts or [])) for r in inline_records(manifest(aws))]
    for key in named_parts(aws):
        records, _ = decode_part(aws["s3"].get_object(Bucket=BUCKET, Key=key)["Body"].read())
        out += [(r.id, tuple(f["text"] for f in r.facts or [])) for r in records]
    return sorted(out)


def profile(api: Api) -> dict[str, list[str]]:
    reply = api.request("GET", PROFILE)
    assert reply.status == 200, reply.body
    return {f["text"]: f["memory_ids"] for f in reply.body["facts"]}


@pytest.mark.parametrize("name", list(SAVE_FAULTS))
def test_after_any_save_fault_and_a_retry_each_fact_is_stored_and_listed_once(
    api: Api, aws: dict[str, Any], faults: FaultInjector, name: str
) -> None:
    assert save(api, {"memories": [{"text": TEXTS[0]}]}).status == 200  # a manifest exists: conditional writes
    inject, _ = SAVE_FAULTS[name]
    inject(faults)
    body = {"memories": [{"text": t} for t in TEXTS[1:]]}
    save(api, body)
    faults.clear()
    assert save(api, body).status == 200
    ids = [text_memory_id(t) for t in TEXTS]
    assert stored_facts(aws) == sorted(
        [
            (ids[0], ("Allergic to peanuts",)),
            (ids[1], ("Sister: Ana", "Allergic to peanuts")),  # the sister lives in Porto, not the user
            (ids[2], ("Plays oboe",)),
        ]
    )
    assert profile(api) == {
        "Allergic to peanuts": sorted(ids[:2]),
        "Sister: Ana": [ids[1]],
        "Plays oboe": [ids[2]],
    }


@pytest.mark.usefixtures("parts_only")
def test_a_forget_a_fault_interrupts_already_leaves_the_profile_and_its_retry_deletes_the_text(
    api: Api, aws: dict[str, Any], faults: FaultInjector
) -> None:
    save(api, {"memories": [{"text": t} for t in TEXTS]})
    target = text_memory_id(TEXTS[1])
    faults.fail("DeleteObjects", s3_error(), times=-1)
    assert_unavailable(api.request("DELETE", f"{BASE}/{target}"))
    faults.clear()
    assert manifest(aws)["pending_delete"] and b"Sister: Ana" in stored_bytes(aws)  # the old part is still there
    assert profile(api) == {"Allergic to peanuts": [text_memory_id(TEXTS[0])], "Plays oboe": [text_memory_id(TEXTS[2])]}
    assert api.request("DELETE", f"{BASE}/{target}").status == 204
    assert b"Sister: Ana" not in stored_bytes(aws) and b"Porto" not in stored_bytes(aws)
