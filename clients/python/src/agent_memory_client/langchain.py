"""LangChain / LangGraph integration: a checkpointer, a chat message history and a store over agent memory.

```python
from agent_memory_client import AsyncClient, Client
from agent_memory_client.langchain import RemoteCheckpointSaver, RemoteChatMessageHistory, RemoteStore

client = Client("http://127.0.0.1:3000")
graph = builder.compile(
    checkpointer=RemoteCheckpointSaver(client, app_name="my_app", user_id="alice"),
    store=RemoteStore(client, app_name="my_app"),
)
graph.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t-1"}})
```

- :class:`RemoteCheckpointSaver` (``checkpointer.py``): a LangGraph thread is a session (``thread_id`` is its id,
  under the saver's app and user). Checkpoints, channel values and pending writes are events of that session read
  by id, a few requests per read whatever the thread's length; the graph's messages are events too, as ADK writes
  them (text, function calls and responses), so the service's context route, compaction and long-term memory see
  the conversation. ``delete_thread`` deletes the session.
- :class:`RemoteChatMessageHistory`: LangChain's ``BaseChatMessageHistory`` over one session.
- :class:`RemoteStore`: LangGraph's ``BaseStore`` over long-term memory. A namespace's first label is the user
  (``("alice", "preferences")``); items are kept in that user's ``langgraph-store`` session's state (get, list,
  filter) and, for search by query, saved to the user's long-term memory.

Every class takes a sync :class:`~agent_memory_client.Client` for the sync methods and/or an
:class:`~agent_memory_client.AsyncClient` for the async ones; an async method without an ``AsyncClient`` runs the
sync one in a thread.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timezone
from typing import Any, TypeVar

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from . import AsyncClient, Client
from . import models as wire
from .errors import NotFound

__all__ = [
    "RemoteChatMessageHistory",
    "RemoteCheckpointSaver",
    "RemoteStore",
    "event_to_message",
    "message_to_event",
]

T = TypeVar("T")
_BATCH = 100  # events per append: the service's maximum
_EVENT_INDEX = re.compile(r"events\[(\d+)\]")
_LANGCHAIN = "langchain"  # custom_metadata key of what a message needs to come back exactly
_LANGGRAPH = "langgraph"  # custom_metadata key naming a checkpointer event
_PAYLOAD = "langgraph_payload"  # the event field holding the serialized checkpoint or writes


def _digest(*parts: str, size: int = 40) -> str:
    return hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:size]


def _now() -> str:
    # datetime.UTC is Python 3.11+; the client supports 3.10.
    return datetime.now(timezone.utc).isoformat()


async def _in_thread(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    return await asyncio.to_thread(function, *args, **kwargs)


def _dicts(events: Iterable[wire.Event]) -> list[dict[str, Any]]:
    return [event.model_dump(mode="json", exclude_none=True) for event in events]


# --- messages <-> events --------------------------------------------------------------------------------------

_CONTENT_ROLE = {"human": "user", "ai": "model", "tool": "user", "function": "user", "system": "system"}
_AUTHOR = {"human": "user", "ai": "assistant", "tool": "tool", "function": "tool", "system": "system"}
_METADATA_ROOM = 90_000  # custom_metadata is bounded (100,000 bytes): extras that do not fit are left out


def _json_size(value: Any) -> int:
    try:
        return len(json.dumps(value, ensure_ascii=False, default=str))
    except (TypeError, ValueError):
        return _METADATA_ROOM + 1


def message_to_event(message: BaseMessage, *, event_id: str | None = None) -> dict[str, Any]:
    """A LangChain message as an event: text parts, tool calls as ``function_call`` parts, a tool message as a
    ``function_response``; what else the message needs to come back exactly goes to ``custom_metadata``."""
    kind = message.type
    parts: list[dict[str, Any]] = []
    blocks = message.content if isinstance(message.content, list) else None
    if isinstance(message.content, str):
        text_parts = [message.content] if message.content else []
    else:
        text_parts = [
            block if isinstance(block, str) else str(block.get("text", ""))
            for block in message.content
            if isinstance(block, str) or (isinstance(block, dict) and block.get("type") == "text")
        ]
    if kind in ("tool", "function"):
        parts.append(
            {
                "function_response": {
                    "id": getattr(message, "tool_call_id", None),
                    "name": message.name,
                    "response": {"result": message.content if isinstance(message.content, str) else blocks},
                }
            }
        )
    else:
        parts.extend({"text": text} for text in text_parts)
    for call in getattr(message, "tool_calls", None) or []:
        parts.append({"function_call": {"id": call.get("id"), "name": call["name"], "args": call.get("args") or {}}})

    meta: dict[str, Any] = {"type": kind}
    for name in ("id", "name", "tool_call_id", "role", "status"):
        value = getattr(message, name, None)
        if value is not None and not (name == "status" and value == "success"):
            meta[name] = value
    if blocks is not None:
        meta["content"] = blocks
    if getattr(message, "example", False):
        meta["example"] = True
    # The fields no part of the event holds: kept while they fit the event's metadata (a response's metadata or a
    # tool's artifact can be large; the message's content and calls are stored whatever their size).
    for name in ("additional_kwargs", "response_metadata", "usage_metadata", "invalid_tool_calls", "artifact"):
        value = getattr(message, name, None)
        if value is not None and value != {} and value != [] and _json_size(meta) + _json_size(value) < _METADATA_ROOM:
            meta[name] = json.loads(json.dumps(value, default=str))
    event: dict[str, Any] = {
        "author": _AUTHOR.get(kind, getattr(message, "role", None) or "user"),
        "content": {"role": _CONTENT_ROLE.get(kind, "user"), "parts": parts},
        "custom_metadata": {_LANGCHAIN: meta},
    }
    if event_id is not None:
        event["id"] = event_id
    return event


def _text(parts: list[dict[str, Any]]) -> str:
    return "".join(part["text"] for part in parts if isinstance(part.get("text"), str) and not part.get("thought"))


def event_to_message(event: dict[str, Any]) -> BaseMessage | None:
    """The LangChain message an event holds: exactly the one written by :func:`message_to_event`; for another
    client's event (an ADK agent's) the closest message; None for an event with nothing to say (a checkpoint, a
    state change, a compaction summary)."""
    content = event.get("content") or {}
    parts: list[dict[str, Any]] = [p for p in content.get("parts") or [] if isinstance(p, dict)]
    meta = (event.get("custom_metadata") or {}).get(_LANGCHAIN)
    calls = [p["function_call"] for p in parts if isinstance(p.get("function_call"), dict)]
    tool_calls = [
        {"id": c.get("id"), "name": c.get("name") or "", "args": c.get("args") or {}, "type": "tool_call"}
        for c in calls
    ]
    responses = [p["function_response"] for p in parts if isinstance(p.get("function_response"), dict)]
    if isinstance(meta, dict):
        kind = meta.get("type")
        body: Any = meta["content"] if "content" in meta else _text(parts)
        common: dict[str, Any] = {
            key: meta[key] for key in ("id", "name", "additional_kwargs", "response_metadata") if key in meta
        }
        example = {"example": True} if meta.get("example") else {}
        if kind in ("tool", "function") and responses:
            result = (responses[0].get("response") or {}).get("result")
            body = meta["content"] if "content" in meta else (result if isinstance(result, str) else json.dumps(result))
            if kind == "function":
                return FunctionMessage(content=body, **common)
            extra = {key: meta[key] for key in ("status", "artifact") if key in meta}
            return ToolMessage(content=body, tool_call_id=meta.get("tool_call_id") or "", **common, **extra)
        if kind == "ai":
            extra = {key: meta[key] for key in ("usage_metadata", "invalid_tool_calls") if key in meta}
            return AIMessage(content=body, tool_calls=tool_calls, **common, **example, **extra)
        if kind == "system":
            return SystemMessage(content=body, **common)
        if kind == "chat":
            return ChatMessage(content=body, role=meta.get("role") or "user", **common)
        return HumanMessage(content=body, **common, **example)
    if (event.get("actions") or {}).get("compaction") or not parts:
        return None
    ident = {"id": event["id"]} if event.get("id") else {}
    if responses:
        response = responses[0]
        result = response.get("response")
        text = result.get("result") if isinstance(result, dict) and isinstance(result.get("result"), str) else None
        return ToolMessage(
            content=text if text is not None else json.dumps(result),
            tool_call_id=response.get("id") or "",
            name=response.get("name"),
            **ident,
        )
    text = _text(parts)
    if not text and not tool_calls:
        return None
    role = content.get("role")
    author = event.get("author")
    if role in ("system", "developer") or author in ("system", "developer"):
        return SystemMessage(content=text, **ident)
    if author == "user" or (role == "user" and author in (None, "", "user")):
        return HumanMessage(content=text, **ident)
    return AIMessage(content=text, tool_calls=tool_calls, name=author if author else None, **ident)


def events_to_messages(events: Iterable[dict[str, Any]]) -> list[BaseMessage]:
    """The messages of a session's events, in order."""
    messages = (event_to_message(event) for event in events)
    return [message for message in messages if message is not None]


def _either_client(client: Client | None, async_client: AsyncClient | None) -> tuple[Client | None, AsyncClient | None]:
    """The sync and async clients an integration was given; at least one is needed."""
    if client is None and async_client is None:
        raise TypeError("pass client (a Client) and/or async_client (an AsyncClient)")
    return client, async_client


def _sync_client(client: Client | None, what: str, hint: str = "") -> Client:
    """The sync client, for the sync methods of ``what``; an integration built with only an AsyncClient has none."""
    if client is None:
        raise TypeError(f"this {what} has no sync Client: use the async methods{' ' + hint if hint else ''}")
    return client


# --- chat message history -------------------------------------------------------------------------------------


class RemoteChatMessageHistory(BaseChatMessageHistory):
    """LangChain's chat message history over one session: messages in (appended as events), messages out (every
    event with something to say, including an ADK agent's), ``clear`` deletes the messages (the session and its
    state stay)."""

    def __init__(
        self,
        client: Client | None = None,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        async_client: AsyncClient | None = None,
    ) -> None:
        self.client, self.async_client = _either_client(client, async_client)
        self.app_name = app_name
        self.user_id = user_id
        self.session_id = session_id

    def _sync(self) -> Client:
        return _sync_client(self.client, "history")

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The session's messages, oldest first ([] when the session does not exist)."""
        try:
            session = self._sync().get_session(self.app_name, self.user_id, self.session_id)
        except NotFound:
            return []
        return events_to_messages(_dicts(session.events))

    async def aget_messages(self) -> list[BaseMessage]:
        """The session's messages, oldest first."""
        if self.async_client is None:
            return await _in_thread(lambda: self.messages)
        try:
            session = await self.async_client.get_session(self.app_name, self.user_id, self.session_id)
        except NotFound:
            return []
        return events_to_messages(_dicts(session.events))

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages (creating the session on first use), in batches of 100."""
        client = self._sync()
        events = [message_to_event(message) for message in messages]
        for start in range(0, len(events), _BATCH):
            batch = events[start : start + _BATCH]
            try:
                client.append_events(self.app_name, self.user_id, self.session_id, batch)
            except NotFound:
                client.create_session(self.app_name, self.user_id, session_id=self.session_id)
                client.append_events(self.app_name, self.user_id, self.session_id, batch)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages (creating the session on first use)."""
        if self.async_client is None:
            await _in_thread(self.add_messages, messages)
            return
        events = [message_to_event(message) for message in messages]
        for start in range(0, len(events), _BATCH):
            batch = events[start : start + _BATCH]
            try:
                await self.async_client.append_events(self.app_name, self.user_id, self.session_id, batch)
            except NotFound:
                await self.async_client.create_session(self.app_name, self.user_id, session_id=self.session_id)
                await self.async_client.append_events(self.app_name, self.user_id, self.session_id, batch)

    def clear(self) -> None:
        """Delete every message (``clear_events``): the session stays, with its state; the messages' summaries,
        payloads and the memories saved from them go too. Nothing to do when the session does not exist."""
        with contextlib.suppress(NotFound):
            self._sync().clear_events(self.app_name, self.user_id, self.session_id)

    async def aclear(self) -> None:
        """See ``clear``."""
        if self.async_client is None:
            await _in_thread(self.clear)
            return
        with contextlib.suppress(NotFound):
            await self.async_client.clear_events(self.app_name, self.user_id, self.session_id)


# --- checkpointer ---------------------------------------------------------------------------------------------


def _typed(serde: Any, value: Any) -> list[str]:
    kind, data = serde.dumps_typed(value)
    return [kind, base64.b64encode(data).decode("ascii")]


def _untyped(serde: Any, value: list[str]) -> Any:
    return serde.loads_typed((value[0], base64.b64decode(value[1])))


# --- store ----------------------------------------------------------------------------------------------------

STORE_SESSION = "langgraph-store"
_ITEM_PREFIX = "lgs:"  # session state keys of the store's items (never app:/user:/temp:)
_STORE_META = "langgraph_store"


def _item_key(label: Sequence[str], key: str) -> str:
    return _ITEM_PREFIX + json.dumps([*label, key], ensure_ascii=False)


def _parse_item_key(state_key: str) -> tuple[tuple[str, ...], str] | None:
    if not state_key.startswith(_ITEM_PREFIX):
        return None
    try:
        path = json.loads(state_key[len(_ITEM_PREFIX) :])
    except ValueError:
        return None
    if not isinstance(path, list) or not path or not all(isinstance(p, str) for p in path):
        return None
    return tuple(path[:-1]), path[-1]


_OPERATORS: dict[str, Callable[[Any, Any], bool]] = {
    "$eq": lambda a, b: bool(a == b),
    "$ne": lambda a, b: bool(a != b),
    "$gt": lambda a, b: a is not None and bool(a > b),
    "$gte": lambda a, b: a is not None and bool(a >= b),
    "$lt": lambda a, b: a is not None and bool(a < b),
    "$lte": lambda a, b: a is not None and bool(a <= b),
}


def _compare(value: Any, condition: Any) -> bool:
    """LangGraph's filter semantics: a value, or ``{"$op": operand, ...}`` (all must hold)."""
    if isinstance(condition, dict) and condition and all(str(k).startswith("$") for k in condition):
        try:
            return all(_OPERATORS[op](value, operand) for op, operand in condition.items())
        except (KeyError, TypeError):
            return False
    return bool(value == condition)


def _filtered(value: dict[str, Any], filter: dict[str, Any] | None) -> bool:
    return not filter or all(_compare(value.get(key), condition) for key, condition in filter.items())


def _memory_text(value: dict[str, Any], fields: Sequence[str] | None) -> str:
    if fields:
        texts = [value.get(name) for name in fields]
        return "\n".join(t if isinstance(t, str) else json.dumps(t, ensure_ascii=False) for t in texts if t is not None)
    for name in ("text", "content", "memory", "data"):
        if isinstance(value.get(name), str):
            return str(value[name])
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


class RemoteStore(BaseStore):  # type: ignore[misc]
    """LangGraph's ``BaseStore`` over agent memory: a namespace's first label is the user (``user_id`` fixed: the
    whole namespace is a label of that user's items), the app is the store's.

    ``put`` keeps the item in the user's ``langgraph-store`` session state and (unless ``index=False``) saves its
    text to the user's long-term memory: the fields ``index`` names, else the value's ``text`` / ``content`` /
    ``memory`` / ``data`` string, else the value as JSON. ``search`` with a ``query`` is a memory search (scores
    as the service gives them, its threshold applied); without one it lists the namespace's items, newest first.
    A memory of an item since changed or deleted is never returned (and is forgotten when a search meets it).
    """

    supports_ttl = False

    def __init__(
        self,
        client: Client | None = None,
        *,
        app_name: str,
        user_id: str | None = None,
        async_client: AsyncClient | None = None,
        min_score: float | None = None,
    ) -> None:
        self.client, self.async_client = _either_client(client, async_client)
        self.app_name = app_name
        self.user_id = user_id
        self.min_score = min_score

    def _sync(self) -> Client:
        return _sync_client(self.client, "store")

    def _scope(self, namespace: tuple[str, ...]) -> tuple[str, tuple[str, ...]]:
        if self.user_id is not None:
            return self.user_id, tuple(namespace)
        if not namespace:
            raise ValueError("a namespace starts with the user id (or give the store a user_id)")
        return namespace[0], tuple(namespace[1:])

    def _namespace(self, user_id: str, label: tuple[str, ...]) -> tuple[str, ...]:
        return label if self.user_id is not None else (user_id, *label)

    # --- the ops, sync --------------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops in order (LangGraph's store interface)."""
        return [self._op(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the ops in order (async)."""
        if self.async_client is None:
            return await _in_thread(self.batch, list(ops))
        return [await self._aop(op) for op in ops]

    def _items(self, user_id: str) -> dict[str, Any]:
        try:
            session = self._sync().get_session(self.app_name, user_id, STORE_SESSION, num_recent_events=0)
        except NotFound:
            return {}
        return session.state

    async def _aitems(self, user_id: str) -> dict[str, Any]:
        assert self.async_client is not None
        try:
            session = await self.async_client.get_session(self.app_name, user_id, STORE_SESSION, num_recent_events=0)
        except NotFound:
            return {}
        return session.state

    def _op(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            user_id, label = self._scope(op.namespace)
            return self._item(user_id, label, op.key, self._items(user_id).get(_item_key(label, op.key)))
        if isinstance(op, PutOp):
            user_id, label = self._scope(op.namespace)
            delta, memory = self._put_plan(user_id, label, op, self._items(user_id))
            client = self._sync()
            try:
                client.append_event(self.app_name, user_id, STORE_SESSION, _state_event(delta))
            except NotFound:
                client.create_session(self.app_name, user_id, session_id=STORE_SESSION)
                client.append_event(self.app_name, user_id, STORE_SESSION, _state_event(delta))
            if memory is not None:
                client.save_memories(self.app_name, user_id, session_id=STORE_SESSION, events=[memory])
            return None
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"unknown store op {type(op).__name__}")

    async def _aop(self, op: Op) -> Result:
        assert self.async_client is not None
        client = self.async_client
        if isinstance(op, GetOp):
            user_id, label = self._scope(op.namespace)
            return self._item(user_id, label, op.key, (await self._aitems(user_id)).get(_item_key(label, op.key)))
        if isinstance(op, PutOp):
            user_id, label = self._scope(op.namespace)
            delta, memory = self._put_plan(user_id, label, op, await self._aitems(user_id))
            try:
                await client.append_event(self.app_name, user_id, STORE_SESSION, _state_event(delta))
            except NotFound:
                await client.create_session(self.app_name, user_id, session_id=STORE_SESSION)
                await client.append_event(self.app_name, user_id, STORE_SESSION, _state_event(delta))
            if memory is not None:
                await client.save_memories(self.app_name, user_id, session_id=STORE_SESSION, events=[memory])
            return None
        if isinstance(op, SearchOp | ListNamespacesOp):
            # Searches read several users' state or memories: the sync path, in a thread, keeps one implementation.
            if self.client is not None:
                return await _in_thread(self._op, op)
            return await self._asearch_or_list(op)
        raise TypeError(f"unknown store op {type(op).__name__}")

    # --- items ----------------------------------------------------------------------------------------------

    def _item(self, user_id: str, label: tuple[str, ...], key: str, stored: Any) -> Item | None:
        if not isinstance(stored, dict) or not isinstance(stored.get("value"), dict):
            return None
        return Item(
            value=stored["value"],
            key=key,
            namespace=self._namespace(user_id, label),
            created_at=datetime.fromisoformat(stored["created_at"]),
            updated_at=datetime.fromisoformat(stored["updated_at"]),
        )

    def _put_plan(
        self, user_id: str, label: tuple[str, ...], op: PutOp, items: dict[str, Any]
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        state_key = _item_key(label, op.key)
        if op.value is None:
            return {state_key: None}, None
        now = _now()
        previous = items.get(state_key)
        created = previous["created_at"] if isinstance(previous, dict) and "created_at" in previous else now
        value = json.loads(json.dumps(op.value, default=str))
        # A revision per put, not per value: a memory forgotten as stale never blocks the same value put again.
        revision = _digest(json.dumps(value, sort_keys=True), now, size=16)
        delta = {state_key: {"value": value, "created_at": created, "updated_at": now, "revision": revision}}
        if op.index is False:
            return delta, None
        fields = list(op.index) if isinstance(op.index, list) else None
        memory = {
            "id": "lgs-" + _digest(state_key, revision),
            "author": "user",
            "content": {"role": "user", "parts": [{"text": _memory_text(value, fields)}]},
            "custom_metadata": {_STORE_META: {"namespace": list(label), "key": op.key, "revision": revision}},
        }
        return delta, memory

    def _search(self, op: SearchOp) -> list[SearchItem]:
        users = self._users(op.namespace_prefix)
        found: list[SearchItem] = []
        for user_id in users:
            items = self._items(user_id)
            if op.query:
                found.extend(self._memory_hits(user_id, op, items))
            else:
                found.extend(self._listed_items(user_id, op, items))
        if not op.query:
            found.sort(key=lambda item: item.updated_at, reverse=True)
        else:
            found.sort(key=lambda item: item.score or 0.0, reverse=True)
        return found[op.offset : op.offset + op.limit]

    async def _asearch_or_list(self, op: SearchOp | ListNamespacesOp) -> Result:
        # Only reached without a sync client: the same logic, reading through the async client.
        assert self.async_client is not None
        sync_view = _AsyncBacked(self, self.async_client)
        return await sync_view.run(op)

    def _users(self, prefix: tuple[str, ...]) -> list[str]:
        if self.user_id is not None:
            return [self.user_id]
        if prefix and prefix[0] != "*":
            return [prefix[0]]
        return sorted({s.user_id for s in self._sync().iter_sessions(self.app_name) if s.id == STORE_SESSION})

    def _label_matches(self, user_id: str, label: tuple[str, ...], prefix: tuple[str, ...]) -> bool:
        namespace = self._namespace(user_id, label)
        return len(namespace) >= len(prefix) and all(p in ("*", n) for p, n in zip(prefix, namespace, strict=False))

    def _listed_items(self, user_id: str, op: SearchOp, items: dict[str, Any]) -> list[SearchItem]:
        out: list[SearchItem] = []
        for state_key, stored in items.items():
            parsed = _parse_item_key(state_key)
            if parsed is None:
                continue
            label, key = parsed
            item = self._item(user_id, label, key, stored)
            if item is None or not self._label_matches(user_id, label, op.namespace_prefix):
                continue
            if _filtered(item.value, op.filter):
                out.append(_search_item(item, None))
        return out

    def _memory_hits(self, user_id: str, op: SearchOp, items: dict[str, Any]) -> list[SearchItem]:
        assert op.query is not None
        top_k = min(100, 2 * (op.offset + op.limit) + 5)  # room for memories of other namespaces and stale ones
        hits = self._sync().search_memories(self.app_name, user_id, op.query, top_k=top_k, min_score=self.min_score)
        out, stale = self._hits(user_id, op, items, hits)
        for memory_id in stale:
            self._sync().forget_memory(self.app_name, user_id, memory_id)
        return out

    def _hits(
        self, user_id: str, op: SearchOp, items: dict[str, Any], hits: list[wire.MemoryEntry]
    ) -> tuple[list[SearchItem], list[str]]:
        out: list[SearchItem] = []
        stale: list[str] = []
        for hit in hits:
            tag = hit.custom_metadata.get(_STORE_META)
            if not isinstance(tag, dict):
                continue  # a memory the store did not write (an agent's): not an item
            label = tuple(tag.get("namespace") or ())
            key = str(tag.get("key"))
            stored = items.get(_item_key(label, key))
            if not isinstance(stored, dict) or stored.get("revision") != tag.get("revision"):
                stale.append(hit.id)
                continue
            item = self._item(user_id, label, key, stored)
            if item is None or not self._label_matches(user_id, label, op.namespace_prefix):
                continue
            if _filtered(item.value, op.filter):
                out.append(_search_item(item, hit.score))
        return out, stale

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix: tuple[str, ...] = ()
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix":
                prefix = tuple(condition.path)
        namespaces: set[tuple[str, ...]] = set()
        for user_id in self._users(prefix):
            for state_key, stored in self._items(user_id).items():
                parsed = _parse_item_key(state_key)
                if parsed is not None and isinstance(stored, dict) and stored.get("value") is not None:
                    namespaces.add(self._namespace(user_id, parsed[0]))
        return _select_namespaces(namespaces, op)


def _state_event(delta: dict[str, Any]) -> dict[str, Any]:
    return {"author": "langgraph-store", "actions": {"state_delta": delta}}


def _search_item(item: Item, score: float | None) -> SearchItem:
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=score,
    )


def _select_namespaces(namespaces: set[tuple[str, ...]], op: ListNamespacesOp) -> list[tuple[str, ...]]:
    def matches(namespace: tuple[str, ...]) -> bool:
        for condition in op.match_conditions or ():
            path = tuple(condition.path)
            if len(namespace) < len(path):
                return False
            part = (
                namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
            )
            if not all(p in ("*", n) for p, n in zip(path, part, strict=True)):
                return False
        return True

    selected = {ns[: op.max_depth] if op.max_depth is not None else ns for ns in namespaces if matches(ns)}
    return sorted(selected)[op.offset : op.offset + op.limit]


class _AsyncBacked:
    """Searches and namespace listings for a store that has only an AsyncClient: the sync store's logic, with
    its reads prefetched through the async client."""

    def __init__(self, store: RemoteStore, client: AsyncClient) -> None:
        self.store = store
        self.client = client

    async def _users(self, prefix: tuple[str, ...]) -> list[str]:
        if self.store.user_id is not None:
            return [self.store.user_id]
        if prefix and prefix[0] != "*":
            return [prefix[0]]
        users = {s.user_id async for s in self.client.iter_sessions(self.store.app_name) if s.id == STORE_SESSION}
        return sorted(users)

    async def run(self, op: SearchOp | ListNamespacesOp) -> Result:
        store = self.store
        if isinstance(op, ListNamespacesOp):
            prefix = next((tuple(c.path) for c in op.match_conditions or () if c.match_type == "prefix"), ())
            namespaces: set[tuple[str, ...]] = set()
            for user_id in await self._users(prefix):
                for state_key, stored in (await store._aitems(user_id)).items():
                    parsed = _parse_item_key(state_key)
                    if parsed is not None and isinstance(stored, dict) and stored.get("value") is not None:
                        namespaces.add(store._namespace(user_id, parsed[0]))
            return _select_namespaces(namespaces, op)
        found: list[SearchItem] = []
        for user_id in await self._users(op.namespace_prefix):
            items = await store._aitems(user_id)
            if not op.query:
                found.extend(store._listed_items(user_id, op, items))
                continue
            top_k = min(100, 2 * (op.offset + op.limit) + 5)
            hits = await self.client.search_memories(
                store.app_name, user_id, op.query, top_k=top_k, min_score=store.min_score
            )
            out, stale = store._hits(user_id, op, items, hits)
            for memory_id in stale:
                await self.client.forget_memory(store.app_name, user_id, memory_id)
            found.extend(out)
        found.sort(key=(lambda i: i.score or 0.0) if op.query else (lambda i: i.updated_at), reverse=True)
        return found[op.offset : op.offset + op.limit]


# The checkpointer lives in its own module, which builds on this one's message conversion.
from .checkpointer import RemoteCheckpointSaver  # noqa: E402
