"""The compaction sweep's fan-out when deployed: each share of the due sessions goes to the worker function as an
asynchronous invocation (``InvocationType=Event``).

Lambda queues the event and answers 202 at once, so the schedule's dispatcher starts every share within seconds
whatever the shares hold; the worker function's ``EventInvokeConfig`` keeps a queued share no longer than one
schedule period and never retries it (the sessions a lost share held are still due: the next run lists them).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..limits import MAX_SWEEP_PAYLOAD_BYTES
from .ports import SessionKey

# Lambda's limit for an asynchronous invocation's payload (256 KB), with a margin for the JSON around the keys.


def sweep_payload(keys: list[SessionKey]) -> bytes:
    """The worker's event: ``{"sessions": [[app_name, user_id, session_id], …]}``."""
    return json.dumps(
        {"sessions": [[k.app_name, k.user_id, k.session_id] for k in keys]}, separators=(",", ":")
    ).encode()


class LambdaSweepInvoker:
    def __init__(self, lambda_client: Callable[[], Any], function_name: str) -> None:
        self._client = lambda_client
        self._function_name = function_name

    def start(self, keys: list[SessionKey]) -> dict[str, Any] | None:
        payload = sweep_payload(keys)
        if len(payload) > MAX_SWEEP_PAYLOAD_BYTES:
            # Identifiers are at most 128 characters each: 500 keys fit; a larger share is split here.
            half = len(keys) // 2
            self.start(keys[:half])
            return self.start(keys[half:])
        # botocore's standard retries cover a throttled or failed Invoke; what still fails is raised to the
        # dispatcher, which counts the share failed (its sessions stay due).
        self._client().invoke(FunctionName=self._function_name, InvocationType="Event", Payload=payload)
        return None
