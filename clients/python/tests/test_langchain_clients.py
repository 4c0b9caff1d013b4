"""The integrations need a client, and their sync methods a sync one: a clear TypeError, not an AttributeError."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from agent_memory_client import AsyncClient
from agent_memory_client.langchain import RemoteChatMessageHistory, RemoteCheckpointSaver, RemoteStore

BUILDERS: dict[str, Callable[..., Any]] = {
    "history": lambda **c: RemoteChatMessageHistory(app_name="a", user_id="u", session_id="s", **c),
    "checkpointer": lambda **c: RemoteCheckpointSaver(app_name="a", user_id="u", **c),
    "store": lambda **c: RemoteStore(app_name="a", user_id="u", **c),
}
SYNC_CALLS: dict[str, Callable[[Any], Any]] = {
    "history": lambda h: h.messages,
    "checkpointer": lambda s: s.get_tuple({"configurable": {"thread_id": "t"}}),
    "store": lambda s: s.get(("u",), "k"),
}


@pytest.mark.parametrize("what", sorted(BUILDERS))
def test_an_integration_without_any_client_is_refused(what: str) -> None:
    with pytest.raises(TypeError, match="pass client"):
        BUILDERS[what]()


@pytest.mark.parametrize("what", sorted(BUILDERS))
async def test_a_sync_method_without_a_sync_client_names_the_async_ones(what: str) -> None:
    async with AsyncClient("http://127.0.0.1:9") as client:
        built = BUILDERS[what](async_client=client)
        with pytest.raises(TypeError, match=f"this {what} has no sync Client: use the async methods"):
            SYNC_CALLS[what](built)
