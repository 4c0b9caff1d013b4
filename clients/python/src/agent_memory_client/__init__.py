"""Python client for serverless agent memory: sessions, context and long-term memory over HTTP.

``Client`` and ``AsyncClient`` have the same methods; errors are in ``agent_memory_client.errors``, the typed
answers in ``agent_memory_client.models``.
"""

from ._version import __version__
from .client import AsyncClient, Client
from .errors import AgentMemoryError
from .models import (
    AppendResult,
    CompactResult,
    Context,
    Event,
    EventsPage,
    MemoryEntry,
    Profile,
    ProfileFact,
    SaveResult,
    Session,
    SessionPage,
)

__all__ = [
    "AgentMemoryError",
    "AppendResult",
    "AsyncClient",
    "Client",
    "CompactResult",
    "Context",
    "Event",
    "EventsPage",
    "MemoryEntry",
    "Profile",
    "ProfileFact",
    "SaveResult",
    "Session",
    "SessionPage",
    "__version__",
]
