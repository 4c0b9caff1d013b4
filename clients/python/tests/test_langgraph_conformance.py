"""LangGraph's own checkpointer conformance suite (langgraph-checkpoint-conformance) against RemoteCheckpointSaver
over `make run`: every capability, the extended ones (delete_for_runs, copy_thread, prune) included, detected and
passed, with the async client and with the sync one (the async methods then run the sync ones in a thread)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

from agent_memory_client import AsyncClient, Client
from agent_memory_client.langchain import RemoteCheckpointSaver


@pytest.mark.parametrize("client_kind", ["async", "sync"])
async def test_every_capability_of_the_conformance_suite_passes(server_url: str, client_kind: str) -> None:
    @checkpointer_test(name="RemoteCheckpointSaver")
    async def saver() -> AsyncIterator[RemoteCheckpointSaver]:
        # A fresh app per capability suite, as the suite expects a fresh checkpointer (delete_for_runs and
        # list(None) see every thread of the saver's app and user).
        app = f"conformance-{uuid.uuid4().hex[:12]}"
        if client_kind == "async":
            async with AsyncClient(server_url) as client:
                yield RemoteCheckpointSaver(app_name=app, async_client=client)
        else:
            with Client(server_url) as sync_client:
                yield RemoteCheckpointSaver(sync_client, app_name=app)

    report = await validate(saver)
    failures = {
        name: [failure[:2000] for failure in result.failures]
        for name, result in report.results.items()
        if result.passed is not True
    }
    assert not failures, failures
    assert {name for name, result in report.results.items() if result.detected} == {c.value for c in ALL_CAPABILITIES}
    assert report.conformance_level() == "FULL"
