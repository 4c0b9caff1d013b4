"""Bedrock answers for stubbed clients (the ``bedrock`` fixture in conftest.py)."""

from __future__ import annotations

from typing import Any


def converse_response(*texts: str) -> dict[str, Any]:
    """A Bedrock Converse answer holding ``texts`` as the assistant's content blocks."""
    return {
        "output": {"message": {"role": "assistant", "content": [{"text": t} for t in texts]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
        "metrics": {"latencyMs": 12},
    }
