"""The summarizer port and the conversation it summarises."""

from __future__ import annotations

from dataclasses import field
from typing import Any, Protocol

from agent_memory.errors import ModelFailure
from agent_memory.runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)

DEFAULT_PROMPT_TEMPLATE = (
    "You maintain the running summary of a conversation between a user and an AI agent. Write a concise "
    "summary that keeps everything the agent will need later: the user's stated facts and preferences, names, "
    "numbers, dates, decisions taken, open requests and questions, and which tools were used with what "
    "results. Fold the previous summary (if any) into the new one; do not drop facts from it. Write plain "
    "sentences, no preamble.\n\n"
    "Previous summary:\n{previous_summary}\n\n"
    "Conversation:\n{conversation_history}\n"
)


@dataclass(frozen=True)
class ToolCall:
    name: str
    args: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ToolResult:
    name: str
    result: Any = None


@dataclass(frozen=True)
class Turn:
    """One event as a summarizer sees it: who spoke, what they said, which tools were called or answered."""

    author: str
    role: str  # user | assistant | system | tool
    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_results: tuple[ToolResult, ...] = ()
    timestamp: float | None = None


class Summarizer(Protocol):
    """Summarise ``turns`` into text, folding in ``previous_summary`` (the rolled-up summary so far)."""

    name: str

    def summarize(self, turns: list[Turn], previous_summary: str | None) -> str: ...


class SummarizerError(ModelFailure):
    """A summarizer could not produce a summary (timeout, throttle, bad response): the session is left as it
    was and compaction is tried again later; on demand, the request answers 504, 503 or 502 (``ModelFailure``)."""


class FactExtractor(Protocol):
    """Extract the stable facts about the user that each text states (``policy/profile.py``): one list of
    ``{"category", "text"}`` per text, in order. Never raises for a model's failure: an extractor backed by a
    model falls back to the offline patterns and logs it (a save must not fail for its profile)."""

    name: str

    def extract(self, texts: list[str]) -> list[list[dict[str, str]]]: ...
