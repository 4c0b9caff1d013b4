"""EventBridge adapter of the EventPublisher port."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

SOURCE = "agent-memory"


class EventBridgePublisher:
    """``client`` is a factory: the client is built on first publish."""

    def __init__(self, client: Callable[[], Any], bus_name: str) -> None:
        self._client = client
        self._bus = bus_name

    def publish(self, detail_type: str, detail: dict[str, Any]) -> None:
        response = self._client().put_events(
            Entries=[
                {
                    "Source": SOURCE,
                    "DetailType": detail_type,
                    "Detail": json.dumps(detail),
                    "EventBusName": self._bus,
                }
            ]
        )
        if response.get("FailedEntryCount"):
            entry = response["Entries"][0]
            raise RuntimeError(
                f"EventBridge rejected {detail_type}: {entry.get('ErrorCode')} {entry.get('ErrorMessage')}"
            )
