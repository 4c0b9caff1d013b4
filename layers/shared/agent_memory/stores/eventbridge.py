"""Adapters of the EventPublisher port: EventBridge (AWS), the log (embedded)."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

SOURCE = "agent-memory"
logger = logging.getLogger(__name__)


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


class LogPublisher:
    """The embedded backend's publisher: each domain event is a log line (there is no bus to hang work on)."""

    def publish(self, detail_type: str, detail: dict[str, Any]) -> None:
        logger.info("domain event", extra={"source": SOURCE, "detail_type": detail_type, "detail": detail})
