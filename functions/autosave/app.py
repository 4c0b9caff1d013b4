"""Change feed → long-term memory: auto-save new events by the deployment's policy (partial batch failures);
and the offloaded payloads of events the retention's TTL removed, deleted.

In AWS the feed is the table's DynamoDB stream; embedded (``make run``), the SQLite outbox hands this handler
records of the same shape. The session store's adapter reads them (``changes``).
"""

from typing import Any

from agent_memory.composition import services
from agent_memory.config import settings
from agent_memory.edge.api import logger
from agent_memory.runtime import budget, coldgc
from agent_memory.service.autosave import SAVE_RESERVE_S, handle_feed

# Model calls (a remote embedder, facts by a model) end this long before the timeout, so that the save they are
# part of still has the time for its writes (``SAVE_RESERVE_S`` is what a save is started with at the least);
# ``budget.scaled_reserve`` shortens it for an invocation given less than the function's 300 s (a local emulation).
MODEL_RESERVE_S = SAVE_RESERVE_S / 2

settings()  # start-up check of the configuration (an unparsable AUTOSAVE_POLICY stops the function here)


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    coldgc.resume()  # the import ran without garbage collection (coldgc.py); a background job's work collects
    wired = services()
    # a remote embedder gets the background budget per session, and none runs past the function's timeout: a
    # session it could not save in time is reported as failed and retried from there; a batch holding more users
    # than the function has time for reports those not reached (large batches: the window cuts them)
    with budget.invocation(context, budget.BACKGROUND, reserve_s=budget.scaled_reserve(context, MODEL_RESERVE_S)):
        return handle_feed(
            event.get("Records", []),
            wired.session_store,
            wired.memories,
            settings().autosave_policy_value(),
            lambda: budget.remaining_s(context),
        )
