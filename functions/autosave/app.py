"""DynamoDB stream → long-term memory: auto-save new events by the deployment's policy (partial batch failures)."""

from typing import Any, cast

from agent_memory.api import logger
from agent_memory.config import settings
from agent_memory.service.autosave import handle_stream_batch
from agent_memory.service.memories import default_memory_service
from agent_memory.service.sessions import default_session_service
from agent_memory.stores.dynamo import DynamoSessionStore

settings()  # start-up check of the configuration (an unparsable AUTOSAVE_POLICY stops the function here)


@logger.inject_lambda_context(clear_state=True)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    store = cast(DynamoSessionStore, default_session_service().store)
    return handle_stream_batch(
        event.get("Records", []),
        default_memory_service(),
        store.event_from_item,
        store.read_events,
        settings().autosave_policy_value(),
    )
