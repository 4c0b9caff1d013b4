"""The compaction sweep's worker, invoked asynchronously by the schedule's dispatcher (``compact_scheduled``) with a
share of the due sessions: ``{"sessions": [[app_name, user_id, session_id], …]}``. It compacts them within its
time budget; what it has no time for, and any session that fails, stays due for the next run."""

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from agent_memory.composition import services
from agent_memory.config import settings
from agent_memory.edge.api import logger, metrics
from agent_memory.runtime import budget, coldgc
from agent_memory.service.compaction import share_keys

settings()  # start-up check: a prompt template without {conversation_history} stops the function here


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics(raise_on_empty_metrics=False)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    coldgc.resume()  # the import ran without garbage collection (coldgc.py); a background job's work collects
    # each session's model call gets the background budget, and none runs past the function's timeout
    with budget.invocation(context, budget.BACKGROUND):
        report = services().compaction.run_sessions(
            share_keys(event.get("sessions")),
            lambda: context.get_remaining_time_in_millis() / 1000,
            reserve_s=budget.SWEEP_RESERVE_S,
        )
    metrics.add_metric(name="Compactions", unit=MetricUnit.Count, value=report.compacted)
    metrics.add_metric(name="CompactionFailures", unit=MetricUnit.Count, value=report.failed)
    logger.info("compaction sweep worker", extra=asdict(report))
    return asdict(report)
