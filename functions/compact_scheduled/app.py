"""EventBridge schedule: the compaction sweep's dispatcher. It lists the due sessions (every shard its share,
oldest first) and starts the workers (``CompactWorkerFunction``, asynchronously) on shares of them."""

from dataclasses import asdict
from typing import Any

from aws_lambda_powertools.metrics import MetricUnit

from agent_memory.composition import services
from agent_memory.config import settings
from agent_memory.edge.api import logger, metrics
from agent_memory.limits import MIN_SESSIONS_PER_WORKER
from agent_memory.policy.compaction import SESSIONS_PER_WORKER
from agent_memory.runtime import budget, coldgc

settings()  # start-up check: a prompt template without {conversation_history} stops the function here


@logger.inject_lambda_context(clear_state=True)
@metrics.log_metrics(raise_on_empty_metrics=False)
def lambda_handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    coldgc.resume()  # the import ran without garbage collection (coldgc.py); a background job's work collects
    # Workers that run in this process (no worker function configured: make run) get the background budget too.
    with budget.invocation(context, budget.BACKGROUND):
        wired = services()
        report = wired.compaction.dispatch_due(
            wired.sweep_invoker,
            workers=wired.settings.compaction_workers,
            per_worker=SESSIONS_PER_WORKER,
            min_share=MIN_SESSIONS_PER_WORKER,
        )
    metrics.add_metric(name="CompactionsDue", unit=MetricUnit.Count, value=report.due)
    metrics.add_metric(name="Compactions", unit=MetricUnit.Count, value=report.compacted)
    # A share whose worker could not be started is as many sessions not compacted this run.
    metrics.add_metric(name="CompactionFailures", unit=MetricUnit.Count, value=report.failed + report.shares_failed)
    logger.info("compaction sweep dispatched", extra=asdict(report))
    return asdict(report)
