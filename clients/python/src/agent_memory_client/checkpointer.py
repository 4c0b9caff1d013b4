"""LangGraph's checkpointer over agent memory sessions (``RemoteCheckpointSaver``; imported from
``agent_memory_client.langchain``).

A thread is a session of the saver's app and user. Everything the saver stores is an event of that session,
under an id that says what it holds, so that each read asks for exactly the events it needs (the service reads
events by id, or a page of an id prefix's in id order) and none grows with the thread's length:

- ``lgc-{ns}-{checkpoint id}``: a checkpoint (without its channel values) and its metadata. LangGraph's checkpoint
  ids sort in the order they were made, so the latest checkpoint of a namespace is the greatest id of its prefix;
- ``lgb-{ns}-{digest of channel and version}``: one channel value, stored once per version (versions never
  collide across forks: ``get_next_version``);
- ``lgw-{ns}-{checkpoint id}-{nonce}``: one ``put_writes`` call's pending writes for that checkpoint;
- ``lgm-{digest of the message id}``: the graph's messages (the ``messages_key`` channel) as conversation events,
  text, tool calls and results as ADK writes them, so that the service's context, compaction and long-term memory
  see the conversation. With a ``DeltaChannel`` (no value stored in most checkpoints) they come from the writes.

``{ns}`` is a digest of the checkpoint namespace. A checkpoint's tuple is three reads: the checkpoint event, its
channels' values by id, its writes by prefix; ``list`` reads a page of checkpoints, their values and their writes
in three as well.
"""

from __future__ import annotations

import json
import random
import re
import secrets
from collections.abc import AsyncIterator, Generator, Iterable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

from . import AsyncClient, Client
from .errors import EventIdConflict, NotFound

try:
    from langgraph.checkpoint.base import writes_sort_key
except ImportError:  # langgraph-checkpoint before 4: the order LangGraph applies a super-step's writes in

    def writes_sort_key(task_path: str, task_id: str = "", idx: int = 0) -> tuple[str, str, int]:
        return (task_path, task_id, idx)


from .langchain import (
    _LANGCHAIN,
    _LANGGRAPH,
    _PAYLOAD,
    _digest,
    _either_client,
    _in_thread,
    _sync_client,
    _typed,
    _untyped,
    message_to_event,
)

__all__ = ["RemoteCheckpointSaver"]

_BATCH = 100  # events per append: the service's maximum
_PAGE = 20  # checkpoints per page of a listing
_WRITES_PAGE = 1000  # events per page of a writes read: the service's maximum
_HISTORY_PAGE = 100  # checkpoints per page of a DeltaChannel history walk
_EVENT_INDEX = re.compile(r"events\[(\d+)\]")
# A checkpoint id that can stand in an event id as it is (LangGraph's are UUIDs); another is digested.
_SAFE_ID = re.compile(r"[A-Za-z0-9._:@-]{1,80}")

# A read the saver asks for: ("ids", [event ids]) or ("page", events_page keyword arguments). The drivers
# (``_drive`` and ``_adrive``) answer it with the events (a list of dicts) or the page, None when there is no
# session.
Request = tuple[str, Any]
Flow = Generator[Request, Any, Any]


def _ns_key(ns: str) -> str:
    return _digest("ns", ns, size=12)


def _cid_key(checkpoint_id: str) -> str:
    return checkpoint_id if _SAFE_ID.fullmatch(checkpoint_id) else "x" + _digest(checkpoint_id)


def checkpoint_event_id(ns: str, checkpoint_id: str) -> str:
    return f"lgc-{_ns_key(ns)}-{_cid_key(checkpoint_id)}"


def blob_event_id(ns: str, channel: str, version: Any) -> str:
    return f"lgb-{_ns_key(ns)}-{_digest(channel, json.dumps(version))}"


def writes_prefix(ns: str, checkpoint_id: str) -> str:
    return f"lgw-{_ns_key(ns)}-{_cid_key(checkpoint_id)}-"


def message_event_id(message_id: str) -> str:
    return "lgm-" + _digest("message", message_id)


def _configurable(config: RunnableConfig | None) -> dict[str, Any]:
    return dict((config or {}).get("configurable") or {})


def _matches(metadata: Mapping[str, Any], filter: dict[str, Any] | None) -> bool:
    return not filter or all(metadata.get(key) == value for key, value in filter.items())


def _tag(event: dict[str, Any]) -> dict[str, Any]:
    tag = (event.get("custom_metadata") or {}).get(_LANGGRAPH)
    return tag if isinstance(tag, dict) else {}


def _dump(event: Any) -> dict[str, Any]:
    data: dict[str, Any] = event.model_dump(mode="json", exclude_none=True)
    return data


def _messages_in(value: Any) -> list[BaseMessage]:
    """The messages a channel value or a write holds (a message, or a list of them; other items ignored)."""
    items = value if isinstance(value, (list, tuple)) else [value]
    return [item for item in items if isinstance(item, BaseMessage)]


class _Writes:
    """A checkpoint's pending writes, from its writes events in the order they were appended: a regular write is
    kept once (the first), a special one (error, interrupt, resume) replaced by a later one, as LangGraph's own
    savers keep them."""

    def __init__(self) -> None:
        self.by_key: dict[tuple[str, int], tuple[str, list[str], str]] = {}

    def add(self, event: dict[str, Any]) -> None:
        tag = _tag(event)
        task_id = str(tag.get("task_id"))
        for idx, channel, value in (event.get(_PAYLOAD) or {}).get("writes", []):
            key = (task_id, int(idx))
            if key[1] >= 0 and key in self.by_key:
                continue
            self.by_key[key] = (channel, value, str(tag.get("task_path", "")))

    def pending(self, serde: Any) -> list[PendingWrite]:
        ordered = sorted(self.by_key.items(), key=lambda item: writes_sort_key(item[1][2], *item[0]))
        return [(task_id, channel, _untyped(serde, value)) for (task_id, _), (channel, value, _) in ordered]


def _group_writes(events: Iterable[dict[str, Any]]) -> dict[str, _Writes]:
    grouped: dict[str, _Writes] = {}
    for event in sorted(events, key=lambda e: int(e.get("seq") or 0)):
        tag = _tag(event)
        if tag.get("kind") == "writes":
            grouped.setdefault(str(tag.get("checkpoint_id")), _Writes()).add(event)
    return grouped


class RemoteCheckpointSaver(BaseCheckpointSaver[str]):  # type: ignore[misc]
    """LangGraph's checkpointer over agent memory sessions: ``thread_id`` is a session of ``app_name`` and
    ``user_id``; checkpoints, channel values, pending writes and the graph's messages (the ``messages_key``
    channel) are its events. Sync methods need ``client``, async ones ``async_client`` (or run the sync ones in a
    thread). Reads and writes are a few requests each, whatever the thread's length."""

    def __init__(
        self,
        client: Client | None = None,
        *,
        app_name: str,
        user_id: str = "langgraph",
        async_client: AsyncClient | None = None,
        messages_key: str = "messages",
        serde: Any = None,
    ) -> None:
        super().__init__(serde=serde)
        self.client, self.async_client = _either_client(client, async_client)
        self.app_name = app_name
        self.user_id = user_id
        self.messages_key = messages_key
        # Message events known to be in each thread (from the values read and the appends made): a put appends
        # only the others.
        self._recorded: dict[str, set[str]] = {}
        # Messages written to the messages channel, by (thread, namespace, checkpoint): with a DeltaChannel the
        # next checkpoint holds no value, and its put records them from here.
        self._written: dict[tuple[str, str, str], list[BaseMessage]] = {}

    def get_next_version(self, current: str | int | None, channel: Any = None) -> str:
        """The channel's next version: its counter, then a random tail, as InMemorySaver and the Postgres saver make
        them. Values are stored by (namespace, channel, version): two branches forked from one checkpoint write the
        same counter, and the tail keeps one branch's values from replacing the other's. Versions sort by counter."""
        if current is None:
            counter = 0
        elif isinstance(current, int):
            counter = current
        else:
            counter = int(str(current).split(".")[0])
        return f"{counter + 1:032}.{random.random():016}"

    def _sync(self) -> Client:
        return _sync_client(self.client, "checkpointer", "(ainvoke, astream)")

    # --- drivers: run a flow's reads with the sync or the async client ----------------------------------------

    def _drive(self, thread_id: str, flow: Flow) -> Any:
        client = self._sync()
        try:
            request = next(flow)
            while True:
                kind, args = request
                try:
                    if kind == "ids":
                        answer: Any = [
                            _dump(e) for e in client.get_events(self.app_name, self.user_id, thread_id, args)
                        ]
                    else:
                        answer = client.events_page(self.app_name, self.user_id, thread_id, **args)
                except NotFound:
                    answer = None
                request = flow.send(answer)
        except StopIteration as stop:
            return stop.value

    async def _adrive(self, thread_id: str, flow: Flow) -> Any:
        client = self.async_client
        if client is None:
            return await _in_thread(self._drive, thread_id, flow)
        try:
            request = next(flow)
            while True:
                kind, args = request
                try:
                    if kind == "ids":
                        answer: Any = [
                            _dump(e) for e in await client.get_events(self.app_name, self.user_id, thread_id, args)
                        ]
                    else:
                        answer = await client.events_page(self.app_name, self.user_id, thread_id, **args)
                except NotFound:
                    answer = None
                request = flow.send(answer)
        except StopIteration as stop:
            return stop.value

    # --- reading --------------------------------------------------------------------------------------------

    def _page(self, **args: Any) -> Flow:
        """A page of events by id prefix: (events as dicts, next_after_id); ([], None) without a session."""
        page = yield ("page", args)
        if page is None:
            return [], None
        return [_dump(e) for e in page.events], page.next_after_id

    def _all_of_prefix(self, prefix: str, *, after_id: str | None = None, descending: bool = False) -> Flow:
        events: list[dict[str, Any]] = []
        while True:
            page, after_id = yield from self._page(
                id_prefix=prefix, after_id=after_id, descending=descending, limit=_WRITES_PAGE
            )
            events.extend(page)
            if after_id is None:
                return events

    def _tuples(self, thread_id: str, checkpoints: list[dict[str, Any]]) -> Flow:
        """The tuples of checkpoint events of one namespace (newest first, as a listing pages them): their values
        by id in one read, their writes by prefix (one checkpoint) or as one range of ids (a page)."""
        if not checkpoints:
            return []
        ns = str(_tag(checkpoints[0]).get("ns", ""))
        decoded = [_untyped(self.serde, (c.get(_PAYLOAD) or {})["checkpoint"]) for c in checkpoints]
        wanted = {
            blob_event_id(ns, channel, version)
            for checkpoint in decoded
            for channel, version in checkpoint["channel_versions"].items()
        }
        blobs: dict[str, dict[str, Any]] = {}
        if wanted:
            found = yield ("ids", sorted(wanted))
            blobs = {str(e["id"]): e for e in found or []}
        cids = [str(_tag(c)["checkpoint_id"]) for c in checkpoints]
        if len(checkpoints) == 1:
            writes_events = yield from self._all_of_prefix(writes_prefix(ns, cids[0]))
        else:
            writes_events = yield from self._writes_between(ns, cids)
        writes = _group_writes(writes_events)
        tuples = []
        for event, checkpoint, cid in zip(checkpoints, decoded, cids, strict=True):
            tag = _tag(event)
            values: dict[str, Any] = {}
            for channel, version in checkpoint["channel_versions"].items():
                blob = blobs.get(blob_event_id(ns, channel, version))
                if blob is not None:
                    values[channel] = _untyped(self.serde, (blob.get(_PAYLOAD) or {})["value"])
            if self.messages_key in values:
                recorded = self._recorded.setdefault(thread_id, set())
                recorded.update(message_event_id(m.id) for m in _messages_in(values[self.messages_key]) if m.id)
            parent = tag.get("parent_checkpoint_id")
            tuples.append(
                CheckpointTuple(
                    config=self._config(thread_id, ns, cid),
                    checkpoint={**checkpoint, "channel_values": values},
                    metadata=_untyped(self.serde, (event.get(_PAYLOAD) or {})["metadata"]),
                    parent_config=self._config(thread_id, ns, str(parent)) if parent else None,
                    pending_writes=writes[cid].pending(self.serde) if cid in writes else [],
                )
            )
        return tuples

    def _writes_between(self, ns: str, cids: list[str]) -> Flow:
        """The writes events of checkpoints whose ids run from ``max(cids)`` down to ``min(cids)``: their ids are
        one range of the namespace's writes prefix, read newest first until past the oldest."""
        prefix = f"lgw-{_ns_key(ns)}-"
        keys = sorted(_cid_key(c) for c in cids)
        start = prefix + keys[-1] + "."  # above every writes id of the newest checkpoint ("." > "-")
        stop = prefix + keys[0] + "-"  # below it: the oldest checkpoint's writes are read
        events: list[dict[str, Any]] = []
        after: str | None = start
        while after is not None:
            page, after = yield from self._page(id_prefix=prefix, after_id=after, descending=True, limit=_WRITES_PAGE)
            for event in page:
                if str(event["id"]) < stop:
                    return events
                events.append(event)
        return events

    def _config(self, thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}

    def _get_flow(self, config: RunnableConfig) -> Flow:
        conf = _configurable(config)
        thread_id = str(conf["thread_id"])
        ns = str(conf.get("checkpoint_ns", ""))
        checkpoint_id = get_checkpoint_id(config)
        if checkpoint_id:
            found = yield ("ids", [checkpoint_event_id(ns, checkpoint_id)])
            events = [e for e in found or [] if _tag(e).get("checkpoint_id") == checkpoint_id]
        else:
            events, _ = yield from self._page(id_prefix=f"lgc-{_ns_key(ns)}-", descending=True, limit=1)
        if not events:
            return None
        tuples = yield from self._tuples(thread_id, events[:1])
        return tuples[0]

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint ``config`` names (``checkpoint_id``), or the namespace's latest; None when there is none.
        Three reads, whatever the thread's length."""
        return self._drive(str(config["configurable"]["thread_id"]), self._get_flow(config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async ``get_tuple``."""
        return await self._adrive(str(config["configurable"]["thread_id"]), self._get_flow(config))

    def _list_page(
        self, thread_id: str, ns: str | None, after_id: str | None, size: int
    ) -> Generator[Request, Any, tuple[list[CheckpointTuple], str | None]]:
        """One page of a thread's checkpoints, newest first (of one namespace, or of every one, namespace by
        namespace), and where the next page starts."""
        prefix = "lgc-" if ns is None else f"lgc-{_ns_key(ns)}-"
        events, after = yield from self._page(id_prefix=prefix, after_id=after_id, descending=True, limit=size)
        tuples: list[CheckpointTuple] = []
        by_ns: dict[str, list[dict[str, Any]]] = {}
        for event in events:
            by_ns.setdefault(str(_tag(event).get("ns", "")), []).append(event)
        for group in by_ns.values():
            tuples.extend((yield from self._tuples(thread_id, group)))
        order = {str(e["id"]): n for n, e in enumerate(events)}
        tuples.sort(
            key=lambda t: order[
                checkpoint_event_id(
                    t.config["configurable"]["checkpoint_ns"], t.config["configurable"]["checkpoint_id"]
                )
            ]
        )
        return tuples, after

    def _list_start(
        self, config: RunnableConfig | None, before: RunnableConfig | None
    ) -> tuple[str | None, str | None]:
        """The namespace a listing reads (None: every one) and the id it starts after."""
        conf = _configurable(config)
        ns = conf.get("checkpoint_ns")
        before_id = get_checkpoint_id(before) if before else None
        if ns is not None and before_id:
            return str(ns), checkpoint_event_id(str(ns), before_id)
        return (None if ns is None else str(ns)), None

    def _wanted(
        self, found: CheckpointTuple, config: RunnableConfig | None, filter: dict[str, Any] | None, before: Any
    ) -> bool:
        wanted_id = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        checkpoint_id = found.config["configurable"]["checkpoint_id"]
        if (wanted_id and checkpoint_id != wanted_id) or (before_id and checkpoint_id >= before_id):
            return False
        return _matches(found.metadata, filter)

    # --- writing --------------------------------------------------------------------------------------------

    def _put_events(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> tuple[str, list[dict[str, Any]], RunnableConfig]:
        conf = _configurable(config)
        thread_id = str(conf["thread_id"])
        ns = str(conf.get("checkpoint_ns", ""))
        parent_id = conf.get("checkpoint_id")
        values = checkpoint["channel_values"]
        stored = {k: v for k, v in checkpoint.items() if k != "channel_values"}
        events: list[dict[str, Any]] = []
        if self.messages_key in new_versions:
            messages = values.get(self.messages_key)
            if isinstance(messages, list):
                events.extend(self._message_events(thread_id, messages))
            else:
                # A DeltaChannel stores no value here: the messages are those written for the parent checkpoint.
                written = self._written.pop((thread_id, ns, str(parent_id)), [])
                events.extend(self._message_events(thread_id, written))
        for channel, version in new_versions.items():
            if channel in values:
                events.append(
                    {
                        "id": blob_event_id(ns, channel, version),
                        "author": "langgraph",
                        "custom_metadata": {
                            _LANGGRAPH: {"kind": "value", "ns": ns, "channel": channel, "version": version}
                        },
                        _PAYLOAD: {"value": _typed(self.serde, values[channel])},
                    }
                )
        run_id = str(metadata.get("run_id") or "")
        events.append(
            {
                "id": checkpoint_event_id(ns, checkpoint["id"]),
                "author": "langgraph",
                "invocation_id": run_id,
                "custom_metadata": {
                    _LANGGRAPH: {
                        "kind": "checkpoint",
                        "ns": ns,
                        "checkpoint_id": checkpoint["id"],
                        "parent_checkpoint_id": parent_id,
                        "step": metadata.get("step"),
                        "source": metadata.get("source"),
                        "run_id": run_id,
                        "stored": sorted(channel for channel in new_versions if channel in values),
                    }
                },
                _PAYLOAD: {
                    "checkpoint": _typed(self.serde, stored),
                    "metadata": _typed(self.serde, get_checkpoint_metadata(config, metadata)),
                },
            }
        )
        return thread_id, events, self._config(thread_id, ns, checkpoint["id"])

    def _message_events(self, thread_id: str, messages: Iterable[BaseMessage]) -> list[dict[str, Any]]:
        recorded = self._recorded.setdefault(thread_id, set())
        events = []
        for message in messages:
            if isinstance(message, BaseMessage) and message.id:
                event_id = message_event_id(message.id)
                if event_id not in recorded:
                    events.append(message_to_event(message, event_id=event_id))
        return events

    def _writes_event(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str
    ) -> tuple[str, dict[str, Any]]:
        conf = _configurable(config)
        thread_id = str(conf["thread_id"])
        ns = str(conf.get("checkpoint_ns", ""))
        checkpoint_id = str(conf["checkpoint_id"])
        payload = [
            [WRITES_IDX_MAP.get(channel, idx), channel, _typed(self.serde, value)]
            for idx, (channel, value) in enumerate(writes)
        ]
        written = [m for channel, value in writes if channel == self.messages_key for m in _messages_in(value)]
        if written:
            self._written.setdefault((thread_id, ns, checkpoint_id), []).extend(written)
        event = {
            # A nonce from the OS, not uuid.uuid4: an application (LangGraph's own tests among them) may patch uuid4
            # to make its ids deterministic; the saver then took ids meant for the graph's messages, and its writes
            # events for one checkpoint all had the same id (an event id conflict on the second put_writes).
            "id": writes_prefix(ns, checkpoint_id) + secrets.token_hex(8),
            "author": "langgraph",
            "custom_metadata": {
                _LANGGRAPH: {
                    "kind": "writes",
                    "ns": ns,
                    "checkpoint_id": checkpoint_id,
                    "task_id": task_id,
                    "task_path": task_path,
                }
            },
            _PAYLOAD: {"writes": payload},
        }
        return thread_id, event

    def _appended(self, thread_id: str, events: list[dict[str, Any]]) -> None:
        self._recorded.setdefault(thread_id, set()).update(
            str(e["id"]) for e in events if _LANGCHAIN in (e.get("custom_metadata") or {})
        )

    def _append(self, thread_id: str, events: list[dict[str, Any]]) -> None:
        client = self._sync()
        for start in range(0, len(events), _BATCH):
            batch = events[start : start + _BATCH]
            while batch:
                try:
                    client.append_events(self.app_name, self.user_id, thread_id, batch, minimal=True)
                    break
                except NotFound:
                    client.create_session(self.app_name, self.user_id, session_id=thread_id)
                except EventIdConflict as exc:
                    batch, replaced = _resolve_conflict(batch, exc)
                    if replaced is not None:
                        client.delete_event(self.app_name, self.user_id, thread_id, replaced)
            self._appended(thread_id, batch)

    async def _aappend(self, thread_id: str, events: list[dict[str, Any]]) -> None:
        client = self.async_client
        if client is None:
            await _in_thread(self._append, thread_id, events)
            return
        for start in range(0, len(events), _BATCH):
            batch = events[start : start + _BATCH]
            while batch:
                try:
                    await client.append_events(self.app_name, self.user_id, thread_id, batch, minimal=True)
                    break
                except NotFound:
                    await client.create_session(self.app_name, self.user_id, session_id=thread_id)
                except EventIdConflict as exc:
                    batch, replaced = _resolve_conflict(batch, exc)
                    if replaced is not None:
                        await client.delete_event(self.app_name, self.user_id, thread_id, replaced)
            self._appended(thread_id, batch)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Store a checkpoint, the values of the channels in ``new_versions`` and the graph's new messages (one
        append, unless the messages are more than a batch)."""
        thread_id, events, next_config = self._put_events(config, checkpoint, metadata, new_versions)
        self._append(thread_id, events)
        return next_config

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Async ``put``."""
        thread_id, events, next_config = self._put_events(config, checkpoint, metadata, new_versions)
        await self._aappend(thread_id, events)
        return next_config

    def put_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Store a task's pending writes for the checkpoint ``config`` names."""
        thread_id, event = self._writes_event(config, writes, task_id, task_path)
        self._append(thread_id, [event])

    async def aput_writes(
        self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = ""
    ) -> None:
        """Async ``put_writes``."""
        thread_id, event = self._writes_event(config, writes, task_id, task_path)
        await self._aappend(thread_id, [event])

    # --- deleting and copying -------------------------------------------------------------------------------

    def _forget(self, thread_id: str) -> None:
        self._recorded.pop(thread_id, None)
        for key in [k for k in self._written if k[0] == thread_id]:
            del self._written[key]

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread: its session, checkpoints, writes and messages."""
        self._sync().delete_session(self.app_name, self.user_id, thread_id)
        self._forget(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        """Async ``delete_thread``."""
        if self.async_client is None:
            await _in_thread(self.delete_thread, thread_id)
            return
        await self.async_client.delete_session(self.app_name, self.user_id, thread_id)
        self._forget(thread_id)

    def _thread_ids(self) -> list[str]:
        return [s.id for s in self._sync().iter_sessions(self.app_name, self.user_id)]

    async def _athread_ids(self) -> list[str]:
        if self.async_client is None:
            return await _in_thread(self._thread_ids)
        return [s.id async for s in self.async_client.iter_sessions(self.app_name, self.user_id)]

    def _doomed_by_runs(self, run_ids: set[str]) -> Flow:
        """The ids of a thread's checkpoints made by these runs, with their writes."""
        checkpoints = yield from self._all_of_prefix("lgc-")
        doomed: list[str] = []
        for event in checkpoints:
            tag = _tag(event)
            if str(tag.get("run_id") or event.get("invocation_id") or "") in run_ids:
                doomed.append(str(event["id"]))
                writes = yield from self._all_of_prefix(
                    writes_prefix(str(tag.get("ns", "")), str(tag.get("checkpoint_id")))
                )
                doomed.extend(str(w["id"]) for w in writes)
        return doomed

    def _doomed_by_pruning(self, keep_latest: bool) -> Flow:
        """The ids of a thread's checkpoints, writes and values that pruning removes: every one (``delete``), or
        all but each namespace's latest checkpoint, the ancestors it needs for a value it does not hold itself
        (a DeltaChannel's, rebuilt from its ancestors' writes) and what those hold."""
        checkpoints = yield from self._all_of_prefix("lgc-")
        values = yield from self._all_of_prefix("lgb-")
        writes = yield from self._all_of_prefix("lgw-")
        kept: set[str] = set()
        if keep_latest:
            by_id = {str(e["id"]): e for e in checkpoints}
            latest: dict[str, dict[str, Any]] = {}
            for event in checkpoints:  # id order: the last of each namespace is its latest
                latest[str(_tag(event).get("ns", ""))] = event
            stored = {str(e["id"]) for e in values}
            for ns, event in latest.items():
                versions = _untyped(self.serde, (event.get(_PAYLOAD) or {})["checkpoint"])["channel_versions"]
                missing = {ch for ch, v in versions.items() if blob_event_id(ns, ch, v) not in stored}
                cursor: dict[str, Any] | None = event
                while cursor is not None:
                    kept.add(str(cursor["id"]))
                    own = _untyped(self.serde, (cursor.get(_PAYLOAD) or {})["checkpoint"])["channel_versions"]
                    missing -= {ch for ch, v in own.items() if blob_event_id(ns, ch, v) in stored}
                    parent = _tag(cursor).get("parent_checkpoint_id")
                    cursor = by_id.get(checkpoint_event_id(ns, str(parent))) if parent and missing else None
            needed: set[str] = set()
            for event in checkpoints:
                if str(event["id"]) in kept:
                    ns = str(_tag(event).get("ns", ""))
                    own = _untyped(self.serde, (event.get(_PAYLOAD) or {})["checkpoint"])["channel_versions"]
                    needed.update(blob_event_id(ns, ch, v) for ch, v in own.items())
            kept_writes = {
                writes_prefix(str(_tag(e).get("ns", "")), str(_tag(e).get("checkpoint_id")))
                for e in checkpoints
                if str(e["id"]) in kept
            }
            kept |= needed | {
                str(w["id"]) for w in writes if str(w["id"])[: str(w["id"]).rfind("-") + 1] in kept_writes
            }
        return [str(e["id"]) for e in [*checkpoints, *values, *writes] if str(e["id"]) not in kept]

    def _delete_events(self, thread_id: str, ids: list[str]) -> None:
        client = self._sync()
        for event_id in ids:
            try:
                client.delete_event(self.app_name, self.user_id, thread_id, event_id)
            except NotFound:
                continue  # gone already (a concurrent delete)

    async def _adelete_events(self, thread_id: str, ids: list[str]) -> None:
        client = self.async_client
        if client is None:
            await _in_thread(self._delete_events, thread_id, ids)
            return
        for event_id in ids:
            try:
                await client.delete_event(self.app_name, self.user_id, thread_id, event_id)
            except NotFound:
                continue

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints these runs made, with their pending writes, in every thread of this app and
        user. Values stay (a later checkpoint may hold the same version), as do the messages (the conversation)."""
        wanted = set(map(str, run_ids))
        if not wanted:
            return
        for thread_id in self._thread_ids():
            self._delete_events(thread_id, self._drive(thread_id, self._doomed_by_runs(wanted)))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async ``delete_for_runs``."""
        wanted = set(map(str, run_ids))
        if not wanted:
            return
        for thread_id in await self._athread_ids():
            await self._adelete_events(thread_id, await self._adrive(thread_id, self._doomed_by_runs(wanted)))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keep each namespace's latest checkpoint (and, for a value it does not hold, such as a
        DeltaChannel's, the ancestors back to one that does), its writes and values; ``delete``: every
        checkpoint. The conversation (message events) stays either way."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown pruning strategy {strategy!r}: keep_latest or delete")
        for thread_id in thread_ids:
            doomed = self._drive(thread_id, self._doomed_by_pruning(strategy == "keep_latest"))
            self._delete_events(thread_id, doomed)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async ``prune``."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown pruning strategy {strategy!r}: keep_latest or delete")
        for thread_id in thread_ids:
            doomed = await self._adrive(thread_id, self._doomed_by_pruning(strategy == "keep_latest"))
            await self._adelete_events(thread_id, doomed)

    def _copy_events(self, source_thread_id: str) -> list[dict[str, Any]]:
        session = self._sync().get_session(self.app_name, self.user_id, source_thread_id)
        return _copied(_dump(e) for e in session.events)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, value, write and message of a thread to another (created when missing)."""
        try:
            events = self._copy_events(source_thread_id)
        except NotFound:
            return
        self._append(target_thread_id, events)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async ``copy_thread``."""
        if self.async_client is None:
            await _in_thread(self.copy_thread, source_thread_id, target_thread_id)
            return
        try:
            session = await self.async_client.get_session(self.app_name, self.user_id, source_thread_id)
        except NotFound:
            return
        await self._aappend(target_thread_id, _copied(_dump(e) for e in session.events))

    # --- DeltaChannel -----------------------------------------------------------------------------------------

    def _history_flow(self, config: RunnableConfig, channels: Sequence[str]) -> Flow:
        """The parent chain of ``config``'s checkpoint, walked on pages of the namespace's checkpoints (no values
        read), back to the nearest ancestor holding each channel's value; then the chain's writes as one range
        of ids and the seeds by id. A few reads, whatever the thread's length."""
        conf = _configurable(config)
        ns = str(conf.get("checkpoint_ns", ""))
        target = yield from self._get_flow(config)
        if target is None:
            return {c: {"writes": []} for c in channels}
        remaining = set(channels)
        chain: list[str] = []  # checkpoint ids, from the target's parent back
        seeds: dict[str, str] = {}  # channel -> the value's event id
        known: dict[str, dict[str, Any]] = {}
        cursor = (target.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        prefix = f"lgc-{_ns_key(ns)}-"
        after = checkpoint_event_id(ns, target.config["configurable"]["checkpoint_id"])
        exhausted = False
        while cursor and remaining:
            event = known.get(cursor)
            if event is None and not exhausted:
                page, after = yield from self._page(
                    id_prefix=prefix, after_id=after, descending=True, limit=_HISTORY_PAGE
                )
                known.update((str(_tag(e)["checkpoint_id"]), e) for e in page)
                exhausted = after is None
                continue
            if event is None:  # off the pages read (an ancestor with an id out of order): by id
                found = yield ("ids", [checkpoint_event_id(ns, cursor)])
                if not found:
                    break
                event = found[0]
            chain.append(cursor)
            tag = _tag(event)
            # A channel whose value this checkpoint's put stored: that value is the seed. (One whose version did
            # not change here has had no write since the ancestor that stored it: the walk goes on to it.)
            stored = set(tag.get("stored") or []) & remaining
            if stored:
                versions = _untyped(self.serde, (event.get(_PAYLOAD) or {})["checkpoint"])["channel_versions"]
                for ch in stored:
                    seeds[ch] = blob_event_id(ns, ch, versions[ch])
                remaining -= stored
            cursor = tag.get("parent_checkpoint_id")
        writes = _group_writes((yield from self._writes_between(ns, chain)) if chain else [])
        values: dict[str, Any] = {}
        if seeds:
            found = yield ("ids", sorted(set(seeds.values())))
            values = {str(e["id"]): _untyped(self.serde, (e.get(_PAYLOAD) or {})["value"]) for e in found or []}
        collected: dict[str, list[PendingWrite]] = {c: [] for c in channels}
        for cid in chain:  # newest first; each checkpoint's writes reversed, the whole reversed at the end
            for write in reversed(writes[cid].pending(self.serde) if cid in writes else []):
                if write[1] in collected:
                    collected[write[1]].append(write)
        result: dict[str, Any] = {}
        for ch in channels:
            entry: dict[str, Any] = {"writes": list(reversed(collected[ch]))}
            if ch in seeds and seeds[ch] in values:
                entry["seed"] = values[seeds[ch]]
            result[ch] = entry
        return result

    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, Any]:
        """The writes and seed of each DeltaChannel since its nearest stored value on the parent chain (LangGraph's
        contract), read in a few requests rather than a tuple per ancestor."""
        if not channels:
            return {}
        history: Mapping[str, Any] = self._drive(
            str(config["configurable"]["thread_id"]), self._history_flow(config, channels)
        )
        return history

    async def aget_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, Any]:
        """Async ``get_delta_channel_history``."""
        if not channels:
            return {}
        history: Mapping[str, Any] = await self._adrive(
            str(config["configurable"]["thread_id"]), self._history_flow(config, channels)
        )
        return history

    # --- listing (last: the method named list shadows the builtin in the class body) --------------------

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """The checkpoints of a thread (``config``'s, else every thread of this app and user), newest first, read
        a page at a time."""
        if config is not None and get_checkpoint_id(config):
            found = self.get_tuple(config)
            if found is not None and self._wanted(found, config, filter, before) and limit != 0:
                yield found
            return
        thread_ids = [str(config["configurable"]["thread_id"])] if config is not None else self._thread_ids()
        count = 0
        ns, start = self._list_start(config, before)
        for thread_id in thread_ids:
            after: str | None = start
            while True:
                size = _PAGE if limit is None else max(1, min(_PAGE, limit - count))
                page, after = self._drive(thread_id, self._list_page(thread_id, ns, after, size))
                for found in page:
                    if not self._wanted(found, config, filter, before):
                        continue
                    if limit is not None and count >= limit:
                        return
                    count += 1
                    yield found
                if after is None or (limit is not None and count >= limit):
                    break

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        """Async ``list``."""
        if config is not None and get_checkpoint_id(config):
            found = await self.aget_tuple(config)
            if found is not None and self._wanted(found, config, filter, before) and limit != 0:
                yield found
            return
        thread_ids = [str(config["configurable"]["thread_id"])] if config is not None else await self._athread_ids()
        count = 0
        ns, start = self._list_start(config, before)
        for thread_id in thread_ids:
            after: str | None = start
            while True:
                size = _PAGE if limit is None else max(1, min(_PAGE, limit - count))
                page, after = await self._adrive(thread_id, self._list_page(thread_id, ns, after, size))
                for found in page:
                    if not self._wanted(found, config, filter, before):
                        continue
                    if limit is not None and count >= limit:
                        return
                    count += 1
                    yield found
                if after is None or (limit is not None and count >= limit):
                    break


def _where(found: CheckpointTuple) -> tuple[str, str]:
    conf = found.config["configurable"]
    return str(conf["checkpoint_ns"]), str(conf["checkpoint_id"])


def _copied(events: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """A thread's checkpointer and message events as another thread's appends take them (the service's own
    fields and events left out)."""
    kept = []
    for event in events:
        meta = event.get("custom_metadata") or {}
        if _LANGGRAPH not in meta and _LANGCHAIN not in meta:
            continue
        kept.append({k: v for k, v in event.items() if k not in ("seq",)})
    return kept


def _resolve_conflict(batch: list[dict[str, Any]], exc: EventIdConflict) -> tuple[list[dict[str, Any]], str | None]:
    """What to do about an event whose id is stored with another body: a message keeps its first form in the
    conversation (the event is left out of the batch); a checkpoint or a value put again replaces the stored one,
    as LangGraph's savers overwrite (the stored event is deleted, the batch sent again)."""
    match = _EVENT_INDEX.search(exc.field or "")
    index = int(match.group(1)) if match else (0 if len(batch) == 1 and exc.field == "id" else -1)
    if not 0 <= index < len(batch):
        raise exc
    meta = batch[index].get("custom_metadata") or {}
    if _LANGCHAIN in meta:
        return batch[:index] + batch[index + 1 :], None
    if _tag(batch[index]).get("kind") in ("checkpoint", "value"):
        return batch, str(batch[index]["id"])
    raise exc
