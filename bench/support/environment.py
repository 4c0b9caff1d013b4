"""The process environment every benchmark runs in: moto in process, fake credentials, quiet Powertools."""

from __future__ import annotations

import os


def bench_environment(table: str, bucket: str, **extra: str) -> None:
    """Point the service at ``table`` and ``bucket`` in moto (never a real account) and set ``extra``."""
    os.environ.update(
        {
            "AWS_ACCESS_KEY_ID": "bench",
            "AWS_SECRET_ACCESS_KEY": "bench",
            "AWS_DEFAULT_REGION": "us-east-1",
            "TABLE_NAME": table,
            "BUCKET_NAME": bucket,
            "POWERTOOLS_METRICS_DISABLED": "true",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            **extra,
        }
    )
    os.environ.pop("AWS_ENDPOINT_URL", None)
