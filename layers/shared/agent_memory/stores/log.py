"""The embedded backend's EventPublisher: each domain event is a log line (there is no bus to hang work on)."""

from __future__ import annotations

import logging
from typing import Any

from .eventbridge import SOURCE

logger = logging.getLogger(__name__)


class LogPublisher:
    def publish(self, detail_type: str, detail: dict[str, Any]) -> None:
        logger.info("domain event", extra={"source": SOURCE, "detail_type": detail_type, "detail": detail})
