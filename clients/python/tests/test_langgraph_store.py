"""RemoteStore (LangGraph's BaseStore over long-term memory) against `make run`: put, get, search by query and by
filter, delete, list_namespaces; sync and async; and a graph node that reads and writes it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore

from agent_memory_client import AsyncClient, Client
from agent_memory_client.langchain import RemoteStore


@pytest.fixture
def client(server_url: str) -> Iterator[Client]:
    with Client(server_url) as client:
        yield client


def test_put_get_delete(client: Client, app_name: str) -> None:
    store = RemoteStore(client, app_name=app_name)
    assert store.get(("alice", "prefs"), "drink") is None

    store.put(("alice", "prefs"), "drink", {"text": "Alice drinks green tea", "strength": 2})
    item = store.get(("alice", "prefs"), "drink")
    assert item is not None
    assert item.value == {"text": "Alice drinks green tea", "strength": 2}
    assert item.namespace == ("alice", "prefs") and item.key == "drink"
    created = item.created_at

    store.put(("alice", "prefs"), "drink", {"text": "Alice drinks black coffee", "strength": 5})
    updated = store.get(("alice", "prefs"), "drink")
    assert updated is not None and updated.value["strength"] == 5
    assert updated.created_at == created and updated.updated_at > created
    # Namespaces and users are separate.
    assert store.get(("alice", "work"), "drink") is None
    assert store.get(("bob", "prefs"), "drink") is None

    store.delete(("alice", "prefs"), "drink")
    assert store.get(("alice", "prefs"), "drink") is None


def test_search_by_query_finds_the_current_value_only(client: Client, app_name: str) -> None:
    store = RemoteStore(client, app_name=app_name)
    store.put(("alice", "prefs"), "drink", {"text": "Alice drinks green tea every morning"})
    store.put(("alice", "prefs"), "city", {"text": "Alice lives in Lisbon near the river"})
    store.put(("alice", "trips"), "next", {"text": "Next trip: Porto by train"})
    store.put(("bob", "prefs"), "drink", {"text": "Bob drinks green tea too"})

    hits = store.search(("alice",), query="green tea")
    assert [(h.namespace, h.key) for h in hits][:1] == [(("alice", "prefs"), "drink")]
    assert all(h.namespace[0] == "alice" for h in hits)
    assert hits[0].score is not None and 0 < hits[0].score <= 1

    # A value replaced or deleted is never found by its old text: a hit is the item as it is now.
    store.put(("alice", "prefs"), "drink", {"text": "Alice switched to espresso"})
    old = store.search(("alice",), query="green tea every morning")
    assert all(h.value == {"text": "Alice switched to espresso"} for h in old if h.key == "drink")
    assert [h.key for h in store.search(("alice", "prefs"), query="espresso")][:1] == ["drink"]
    store.delete(("alice", "prefs"), "drink")
    assert all(h.key != "drink" for h in store.search(("alice",), query="espresso"))

    # The prefix narrows the namespace; a query matching nothing finds nothing.
    assert all(h.namespace == ("alice", "trips") for h in store.search(("alice", "trips"), query="Porto train"))
    assert store.search(("alice",), query="quantum chromodynamics lattice") == []


def test_search_without_query_lists_and_filters(client: Client, app_name: str) -> None:
    store = RemoteStore(client, app_name=app_name)
    for i in range(5):
        store.put(
            ("carol", "notes"),
            f"n{i}",
            {"text": f"note {i}", "rank": i, "kind": "odd" if i % 2 else "even"},
            index=False,
        )

    listed = store.search(("carol", "notes"))
    assert [h.key for h in listed] == ["n4", "n3", "n2", "n1", "n0"]  # most recently updated first
    assert [h.key for h in store.search(("carol",), filter={"kind": "odd"})] == ["n3", "n1"]
    assert [h.key for h in store.search(("carol",), filter={"rank": {"$gte": 3}})] == ["n4", "n3"]
    assert [h.key for h in store.search(("carol",), limit=2, offset=1)] == ["n3", "n2"]
    # index=False: not in long-term memory.
    assert store.search(("carol",), query="note") == []


def test_list_namespaces(client: Client, app_name: str) -> None:
    store = RemoteStore(client, app_name=app_name)
    store.put(("dan", "prefs"), "a", {"text": "x"}, index=False)
    store.put(("dan", "trips", "2026"), "b", {"text": "y"}, index=False)
    store.put(("erin", "prefs"), "c", {"text": "z"}, index=False)

    assert store.list_namespaces(prefix=("dan",)) == [("dan", "prefs"), ("dan", "trips", "2026")]
    assert store.list_namespaces(prefix=("dan",), max_depth=2) == [("dan", "prefs"), ("dan", "trips")]
    # Every user of the app (the app-wide session listing).
    assert store.list_namespaces(suffix=("prefs",)) == [("dan", "prefs"), ("erin", "prefs")]


async def test_async_store(server_url: str, app_name: str) -> None:
    async with AsyncClient(server_url) as client:
        store = RemoteStore(async_client=client, app_name=app_name, user_id="frank")
        await store.aput(("prefs",), "drink", {"text": "Frank drinks mint tea"})
        item = await store.aget(("prefs",), "drink")
        assert item is not None and item.value == {"text": "Frank drinks mint tea"}
        assert [h.key for h in await store.asearch(("prefs",), query="mint tea")][:1] == ["drink"]
        assert [h.key for h in await store.asearch(("prefs",))] == ["drink"]
        assert await store.alist_namespaces() == [("prefs",)]
        await store.adelete(("prefs",), "drink")
        assert await store.aget(("prefs",), "drink") is None


class Turn(TypedDict):
    user_id: str
    text: str
    recalled: list[str]


def test_a_graph_node_uses_the_store(client: Client, app_name: str) -> None:
    def remember_and_recall(state: Turn, store: BaseStore) -> dict[str, Any]:
        namespace = (state["user_id"], "memories")
        recalled = [h.value["text"] for h in store.search(namespace, query=state["text"], limit=3)]
        store.put(namespace, f"m{len(store.search(namespace))}", {"text": state["text"]})
        return {"recalled": recalled}

    builder = StateGraph(Turn)
    builder.add_node("remember_and_recall", remember_and_recall)
    builder.add_edge(START, "remember_and_recall")
    builder.add_edge("remember_and_recall", END)
    graph = builder.compile(store=RemoteStore(client, app_name=app_name))

    assert graph.invoke({"user_id": "gina", "text": "My dog is called Pixel", "recalled": []})["recalled"] == []
    out = graph.invoke({"user_id": "gina", "text": "What is my dog called?", "recalled": []})
    assert out["recalled"][:1] == ["My dog is called Pixel"]
