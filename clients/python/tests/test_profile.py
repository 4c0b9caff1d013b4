"""``get_profile`` against `make run`, through both clients: the facts saved memories state, with their memory ids,
and a forgotten memory's facts gone."""

from __future__ import annotations

import pytest
from support import Driver

from agent_memory_client.errors import BadRequest
from agent_memory_client.models import Profile


async def test_the_profile_follows_what_is_saved_and_forgotten(kind: str, server_url: str, app_name: str) -> None:
    client = Driver(kind, server_url)
    empty = await client.call("get_profile", app_name, "u1")
    assert isinstance(empty, Profile) and (empty.app_name, empty.user_id) == (app_name, "u1")
    assert empty.facts == [] and empty.memory_count == 0
    texts = ["My name is Ana and I love hiking", "I am allergic to peanuts", "I live in Lisbon"]
    assert (await client.call("save_memories", app_name, "u1", memories=texts)).saved == 3
    profile = await client.call("get_profile", app_name, "u1")
    assert [f.text for f in profile.facts] == ["Name: Ana", "Allergic to peanuts", "Loves hiking", "Lives in Lisbon"]
    assert profile.memory_count == 3 and [f.text for f in profile.by_category("allergy")] == ["Allergic to peanuts"]
    (allergy,) = profile.by_category("allergy")
    hits = await client.call("search_memories", app_name, "u1", "peanuts", top_k=1)
    assert allergy.memory_ids == [hits[0].id] and allergy.updated_at and allergy.updated_at.endswith("Z")
    await client.call("forget_memory", app_name, "u1", hits[0].id)
    after = await client.call("get_profile", app_name, "u1")
    assert [f.text for f in after.facts] == ["Name: Ana", "Loves hiking", "Lives in Lisbon"]
    assert (await client.call("get_profile", app_name, "u2")).facts == []  # another user's
    await client.call("forget_memories", app_name, "u1")
    assert (await client.call("get_profile", app_name, "u1")).facts == []
    with pytest.raises(BadRequest):
        await client.call("get_profile", app_name, " ")
    await client.close()
