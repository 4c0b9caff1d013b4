"""Configuration: one settings object read from the environment (the template's parameters set it)."""

from __future__ import annotations

import functools
import os

from pydantic import BaseModel, Field


class Settings(BaseModel):
    table_name: str = Field(default="agent-memory", description="DynamoDB table (TABLE_NAME)")
    bucket_name: str = Field(default="agent-memory-context", description="S3 context bucket (BUCKET_NAME)")
    event_bus_name: str = Field(default="default", description="EventBridge bus for SessionCreated (EVENT_BUS_NAME)")
    retention_days: int = Field(default=0, ge=0, description="TTL of sessions and events in days; 0 keeps forever")
    offload_bytes: int = Field(default=350_000, ge=1, description="events larger than this go to S3")

    @classmethod
    def from_env(cls) -> Settings:
        env = os.environ
        values: dict[str, object] = {}
        for field, var in (
            ("table_name", "TABLE_NAME"),
            ("bucket_name", "BUCKET_NAME"),
            ("event_bus_name", "EVENT_BUS_NAME"),
            ("retention_days", "RETENTION_DAYS"),
            ("offload_bytes", "OFFLOAD_BYTES"),
        ):
            if env.get(var):
                values[field] = env[var]
        return cls.model_validate(values)


@functools.cache
def settings() -> Settings:
    return Settings.from_env()
