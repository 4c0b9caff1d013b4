"""Change feed → long-term memory: auto-save new events by the deployment's policy (partial batch failures).

In AWS the feed is the table's DynamoDB stream; embedded (``make run``), the SQLite outbox hands this handler
records of the same shape. The session store's adapter reads them (``changes``).
"""

from typing import Any

from agent_memory import budget
from agent_memory.api import logger
from agent_memory.composition import services
from agent_memory.config import settings
from agent_memory.service.autosave import SAVE_RESERVE_S, handle_changes

# Model calls (a remote embedder, facts by a model) end this long before the timeout, so that the save they are
# part of still has the time for its writes (``SAVE_RESERVE_S`` is what a save is started with at the least); a
# tenth of the invocation's time when it is given less than the function's 300 s (a local emulation), never less
# than the budget's usual reserve.
MODEL_RESERVE_S = SAVE_RESERVE_S / 2

settings()  # start-up check of the configuration (an unparsable AUTOSAVE_POLICY stops the function here)


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    wired = services()
    store = wired.session_store
    # a remote embedder gets the background budget per session, and none runs past the function's timeout: a
    # session it could not save in time is reported as failed and retried from there; a batch holding more users
    # than the function has time for reports those not reached (large batches: the window cuts them)

    def time_left_s() -> float | None:
        left = budget.remaining_ms(context)
        return None if left is None else left / 1000

    left = time_left_s()
    reserve = budget.ANSWER_RESERVE_S if left is None else max(budget.ANSWER_RESERVE_S, min(MODEL_RESERVE_S, left / 10))
    with budget.invocation(context, budget.BACKGROUND, reserve_s=reserve):
        return handle_changes(
            store.changes(event.get("Records", [])),
            wired.memories,
            store.read_events,
            settings().autosave_policy_value(),
            time_left_s,
        )
