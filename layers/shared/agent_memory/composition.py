"""The composition root: which adapter backs each port, and every service built from them, in one place.

Three backends, chosen by the ``BACKEND`` setting:

- ``aws`` (the deployed functions): DynamoDB for sessions, events, state, claims and the due index; S3 for
  offloaded payloads and long-term memory; EventBridge for domain events.
- ``embedded`` (``make run``, a single machine): one SQLite file for sessions, events, state, claims, the due
  index, the change feed and long-term memory, under ``DATA_DIR``; domain events go to the log.
- ``memory`` (unit tests): the in-memory adapters of ``stores/inmemory.py``.

Handlers call ``services()``, cached per process (per Lambda container). Each part is built on first use, so a
function that never searches never loads the embedder, and one that only reads sessions never builds an S3
client. The services themselves (``service/``) name no adapter: they get ports.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .config import Settings, settings
from .policy.quotas import Quotas
from .runtime import coldgc
from .stores.ports import (
    ChangeFeed,
    ClaimStore,
    EventPublisher,
    MemoryRecord,
    MemoryStore,
    SessionKey,
    SessionStore,
    SweepInvoker,
)

if TYPE_CHECKING:  # each service is imported when first built: a function imports only the ones it uses
    from .policy.compaction import CompactionSettings
    from .service.compaction import CompactionService
    from .service.context import ContextService
    from .service.memories import MemoryService
    from .service.sessions import SessionService

T = TypeVar("T")
BACKENDS = ("aws", "embedded", "memory")
DATABASE_FILE = "agent-memory.sqlite3"
# A sweep worker's time when it runs in the dispatcher's process (make run, the tests): what the local schedule
# gives an invocation.
INLINE_WORKER_BUDGET_S = 60.0


class Services:
    """The adapters and services of one backend; each built once, on first use (thread-safe)."""

    def __init__(self, cfg: Settings, backend: str | None = None) -> None:
        self.settings = cfg
        self.backend = backend or cfg.backend
        if self.backend not in BACKENDS:
            raise ValueError(f"BACKEND must be one of {', '.join(BACKENDS)}, not {self.backend!r}")
        self._built: dict[str, Any] = {}
        self._lock = threading.RLock()

    def _once(self, name: str, build: Callable[[], T]) -> T:
        with self._lock:
            if name not in self._built:
                self._built[name] = build()
            return self._built[name]  # type: ignore[no-any-return]

    def close(self) -> None:
        """Close what holds a file open (the embedded database); the services are not to be used afterwards."""
        with self._lock:
            database = self._built.pop("database", None)
            store = self._built.get("memory_store")
        for closable in (store, database):
            close = getattr(closable, "close", None)
            if close is not None:
                close()

    # --- adapters -------------------------------------------------------------------------------------------

    @property
    def data_dir(self) -> Path:
        return Path(self.settings.data_dir)

    def _database(self) -> Any:
        def build() -> Any:
            from .stores.sqlite.database import SqliteDatabase

            self.data_dir.mkdir(parents=True, exist_ok=True)
            return SqliteDatabase(self.data_dir / DATABASE_FILE)

        return self._once("database", build)

    @property
    def quotas(self) -> Quotas:
        """The per-user quotas the deployment's parameters set (0: none)."""
        cfg = self.settings
        return Quotas(
            sessions_per_user=cfg.max_sessions_per_user,
            events_per_session=cfg.max_events_per_session,
            memories_per_user=cfg.max_memories_per_user,
        )

    @property
    def session_store(self) -> SessionStore:
        def build() -> SessionStore:
            cfg = self.settings
            if self.backend == "aws":
                from .runtime.aws import client
                from .stores.dynamo.store import DynamoSessionStore
                from .stores.s3 import S3BlobStore

                return DynamoSessionStore(
                    client("dynamodb"),
                    cfg.table_name,
                    S3BlobStore(lambda: client("s3"), cfg.bucket_name),
                    offload_bytes=cfg.offload_bytes,
                    retention_days=cfg.retention_days,
                    quotas=self.quotas,
                )
            if self.backend == "embedded":
                from .stores.sqlite.store import SqliteSessionStore

                return SqliteSessionStore(self._database(), quotas=self.quotas)
            from .stores.inmemory import InMemorySessionStore

            return InMemorySessionStore(self.quotas)

        return self._once("session_store", build)

    @property
    def change_feed(self) -> ChangeFeed:
        """The session store's outbox, for the local pump; the AWS backend's feed is the table's stream."""
        store = self.session_store
        if self.backend == "aws" or not isinstance(store, ChangeFeed):
            raise ValueError("the aws backend's change feed is the DynamoDB stream, read by Lambda")
        return store

    @property
    def publisher(self) -> EventPublisher:
        def build() -> EventPublisher:
            if self.backend == "aws":
                from .runtime.aws import client
                from .stores.eventbridge import EventBridgePublisher

                return EventBridgePublisher(lambda: client("events"), self.settings.event_bus_name)
            if self.backend == "embedded":
                from .stores.log import LogPublisher

                return LogPublisher()
            from .stores.inmemory import InMemoryPublisher

            return InMemoryPublisher()

        return self._once("publisher", build)

    @property
    def claim_store(self) -> ClaimStore:
        def build() -> ClaimStore:
            if self.backend == "aws":
                from .runtime.aws import client
                from .stores.dynamo.claims import DynamoClaimStore

                return DynamoClaimStore(client("dynamodb"), self.settings.table_name)
            if self.backend == "embedded":
                from .stores.sqlite.claims import SqliteClaimStore

                return SqliteClaimStore(self._database())
            from .stores.inmemory import InMemoryClaimStore

            return InMemoryClaimStore()

        return self._once("claim_store", build)

    @property
    def embedder(self) -> Any:
        def build() -> Any:
            from .providers.embedders import build_embedder

            cfg = self.settings
            return build_embedder(
                cfg.embedder,
                model=cfg.embedder_model,
                endpoint=cfg.embedder_endpoint,
                api_key_parameter=cfg.embedder_api_key_parameter,
                api_key_secret=cfg.embedder_api_key_secret,
            )

        return self._once("embedder", build)

    def build_index(self, records: list[MemoryRecord]) -> Any:
        """The search index of ``records`` (what each memory store keeps beside them)."""
        from .search.index import SearchIndex
        from .search.types import Doc

        docs = [
            Doc(
                id=r.id,
                text=f"{r.author}: {r.text}",
                context=r.context,
                author=r.author,
                timestamp=r.timestamp,
                reply=r.reply,
            )
            for r in records
        ]
        return SearchIndex.build(docs, self.embedder)

    @property
    def memory_store(self) -> MemoryStore:
        def build() -> MemoryStore:
            if self.backend == "aws":
                from .runtime.aws import client
                from .stores.s3_memories import S3MemoryStore

                return S3MemoryStore(
                    lambda: client("s3"),
                    self.settings.bucket_name,
                    self.build_index,
                    _index_from_bytes,
                    _combine_indexes,
                )
            if self.backend == "embedded":
                from .stores.sqlite.memories import SqliteMemoryStore

                self._database()  # the file and its folder exist
                return SqliteMemoryStore(
                    self.data_dir / DATABASE_FILE, self.build_index, _index_from_bytes, _combine_indexes
                )
            from .stores.inmemory import InMemoryMemoryStore

            return InMemoryMemoryStore(self.build_index, _combine_indexes)

        return self._once("memory_store", build)

    # --- services -------------------------------------------------------------------------------------------

    @property
    def sessions(self) -> SessionService:
        from .service.sessions import SessionService

        return self._once("sessions", lambda: SessionService(self.session_store, self.publisher))

    @property
    def context(self) -> ContextService:
        # The memory service (and so the embedder and the memory store) is built only when a context asks for
        # memories or the profile.
        from .service.context import ContextService

        return self._once("context", lambda: ContextService(self.session_store, lambda: self.memories))

    @property
    def summarizer(self) -> Any:
        """The configured summarizer (``SUMMARIZER``): compaction's, and the profile's fact extractor's model."""

        def build() -> Any:
            from .providers.summarizers import build_summarizer

            cfg = self.settings
            return build_summarizer(
                cfg.summarizer,
                model=cfg.summarizer_model,
                endpoint=cfg.summarizer_endpoint,
                api_key_parameter=cfg.summarizer_api_key_parameter,
                api_key_secret=cfg.summarizer_api_key_secret,
                prompt_template=cfg.summarizer_prompt_template,
                max_chars=cfg.summary_max_chars,
            )

        return self._once("summarizer", build)

    @property
    def fact_extractor(self) -> Any:
        """What extracts the user's facts from each memory saved (the profile): the offline patterns with the
        extractive summarizer; the configured model (falling back to the patterns) with the others."""

        def build() -> Any:
            from .providers.facts import ExtractiveFactExtractor, ModelFactExtractor

            if (self.settings.summarizer or "").strip().lower() == "extractive":
                return ExtractiveFactExtractor()
            return ModelFactExtractor(self.summarizer)

        return self._once("fact_extractor", build)

    @property
    def compaction(self) -> CompactionService:
        def build() -> CompactionService:
            from .service.compaction import CompactionService

            return CompactionService(self.session_store, self.summarizer, compaction_settings(self.settings))

        return self._once("compaction", build)

    def preload_embedder(self) -> None:
        """Start loading the configured embedder's model in the background, when it has one to load (MiniLM):
        the search function calls this while its handler is imported (Lambda's init phase), and the memory
        service does when a search or a save begins, so that the load overlaps the rest of the cold start and the
        S3 reads of the first search instead of following them. A failed load leaves search lexical, as a failing
        embedder does."""
        preload = getattr(self.embedder, "preload", None)
        if callable(preload):
            preload()

    @property
    def sweep_invoker(self) -> SweepInvoker:
        """Where the compaction schedule's dispatcher starts its workers: the worker function, asynchronously, when
        ``COMPACTION_WORKER_FUNCTION`` names one; otherwise here, one share after the other (``make run``, tests)."""

        def build() -> SweepInvoker:
            function = self.settings.compaction_worker_function
            if self.backend == "aws" and function:
                from .runtime.aws import client
                from .stores.lambda_sweep import LambdaSweepInvoker

                return LambdaSweepInvoker(lambda: client("lambda"), function)
            from dataclasses import asdict

            from .runtime.budget import SWEEP_RESERVE_S
            from .stores.inmemory import InlineSweepInvoker

            def run(keys: list[SessionKey], remaining_s: Callable[[], float]) -> dict[str, Any]:
                return asdict(self.compaction.run_sessions(keys, remaining_s, reserve_s=SWEEP_RESERVE_S))

            return InlineSweepInvoker(run, INLINE_WORKER_BUDGET_S)

        return self._once("sweep_invoker", build)

    @property
    def memories(self) -> MemoryService:
        def build() -> MemoryService:
            from .service.memories import MemoryService

            # The session and claim stores are built when first used: a search never uses them. The embedder is
            # built, and its model starts loading, when a search or a save begins (``warm``), beside its reads,
            # not when the service is built: a deletion's forget (delete_events, delete_session) never embeds;
            # loading the model there cost its first response some 250 CPU ms, importing the embedders' module
            # (and its HTTP client's) some 4 M instructions.
            return MemoryService(
                lambda: self.session_store,
                self.memory_store,
                lambda: self.claim_store,
                lambda index, query, k, cut: _searched(index.search(query, k, embedder=self.embedder, min_score=cut)),
                default_policy=self.settings.autosave_policy_value(),
                quotas=self.quotas,
                facts=_DeferredFacts(lambda: self.fact_extractor),  # built by the first save, not by a search
                warm=self.preload_embedder,
            )

        return self._once("memories", build)


class _DeferredFacts:
    """The configured fact extractor, built when a save first extracts: the offline one compiles its patterns
    when imported (about 15 ms of a search function's cold start, which never extracts)."""

    def __init__(self, build: Callable[[], Any]) -> None:
        self._build = build

    @property
    def name(self) -> str:
        return str(self._build().name)

    @name.setter
    def name(self, value: str) -> None:  # the protocol's attribute is settable; the built extractor's is set
        self._build().name = value

    def extract(self, texts: list[str]) -> list[list[dict[str, str]]]:
        extracted: list[list[dict[str, str]]] = self._build().extract(texts)
        return extracted


def compaction_settings(cfg: Settings) -> CompactionSettings:
    """The compaction policy's settings from the deployment's."""
    from .policy.compaction import CompactionSettings

    return CompactionSettings(
        compaction_interval=cfg.compaction_interval,
        overlap_size=cfg.overlap_size,
        token_threshold=cfg.token_threshold,
        event_retention_size=cfg.event_retention_size,
    )


@functools.cache
def services() -> Services:
    """The process's services, built from the environment's settings (one per Lambda container)."""
    return Services(settings())


# The cold start's pause of the garbage collector (coldgc.py): a search function's first index search resumes it.
AHEAD_OF_REQUESTS = coldgc.AHEAD_OF_REQUESTS
_ColdGCPause = coldgc._ColdGCPause
_cold_gc = coldgc._cold_gc


def pause_gc_for_first_search() -> None:
    """Pause the garbage collector until the first search's index search returns (at most
    ``coldgc.COLD_GC_PAUSE_S``), if the layer's import has not already (``coldgc``: a Lambda function on demand).

    Before a cold search function's first answer Python collects about 60 times, 60 ms of wall time at 100,000
    records, some 40 of them after the handler's import (botocore's service models, the index's parts): the
    objects are young and live on, so each collection finds next to nothing to free. Garbage made meanwhile (a
    cycle is rare on this path) is collected once the collector is back."""
    _cold_gc.pause()


def _searched(found: list[tuple[str, float]]) -> list[tuple[str, float]]:
    _cold_gc.resume()
    return found


def _index_from_bytes(*args: Any, **kwargs: Any) -> Any:
    """``SearchIndex.from_bytes``, imported when a stored index is first read: the search index (and numpy with
    it) stays out of a function that builds the memory store but reads no index (a deletion with nothing saved)."""
    from .search.index import SearchIndex

    return SearchIndex.from_bytes(*args, **kwargs)


def _combine_indexes(*args: Any, **kwargs: Any) -> Any:
    """``SearchIndex.combine``, imported when first used (as ``_index_from_bytes``)."""
    from .search.index import SearchIndex

    return SearchIndex.combine(*args, **kwargs)


def preload_embedder() -> None:
    """For a handler's import: start loading the embedder's model in the background (``Services.
    preload_embedder``); under provisioned concurrency or SnapStart, whose init runs ahead of any request, load it
    before returning instead, since a background thread would be frozen with the environment and finish on
    the first request. On demand it also pauses the garbage collector until the first search
    (``pause_gc_for_first_search``). Never raises: a configuration error or a failed load is the first request's
    to report (a 500, or lexical search), not the module import's."""
    try:
        wired = services()
        if os.environ.get("AWS_LAMBDA_INITIALIZATION_TYPE") in AHEAD_OF_REQUESTS:
            warm_up = getattr(wired.embedder, "warm_up", None)
            if callable(warm_up):
                warm_up()
            return
        pause_gc_for_first_search()  # on demand: the first request follows the init at once
        wired.preload_embedder()
    except Exception as exc:
        logging.getLogger(__name__).warning("could not start loading the embedder (%s: %s)", type(exc).__name__, exc)
