"""Configuration: one settings object read from the environment (the template's parameters set it)."""

from __future__ import annotations

import functools
import json
import os
from typing import Any, Literal

from pydantic import BaseModel, Field, field_validator

# Settings whose empty value means "none" rather than "the default": the template passes an empty parameter through
# (JwtAdminScope "" turns the admin scope off; left unset, the default scope applies).
_BLANK_IS_A_VALUE = frozenset({"jwt_app_claim", "jwt_admin_scope", "jwt_admin_group"})


class Settings(BaseModel):
    backend: str = Field(default="aws", description="aws | embedded (make run, one machine) | memory (unit tests)")
    data_dir: str = Field(default=".data", description="where the embedded backend keeps its SQLite file (DATA_DIR)")
    table_name: str = Field(default="agent-memory", description="DynamoDB table (TABLE_NAME)")
    bucket_name: str = Field(default="agent-memory-context", description="S3 context bucket (BUCKET_NAME)")
    event_bus_name: str = Field(default="default", description="EventBridge bus for SessionCreated (EVENT_BUS_NAME)")
    retention_days: int = Field(default=0, ge=0, description="TTL of sessions and events in days; 0 keeps forever")
    offload_bytes: int = Field(default=350_000, ge=1, description="events larger than this go to S3")
    # Per-user quotas (0 disables one); exceeding one answers 429 quota_exceeded, a larger body 413.
    max_sessions_per_user: int = Field(default=10_000, ge=0, description="sessions a user may hold")
    max_events_per_session: int = Field(default=100_000, ge=0, description="events a session may hold")
    max_memories_per_user: int = Field(default=100_000, ge=0, description="memory records a user may hold")
    max_request_bytes: int = Field(default=1_048_576, ge=0, description="largest request body, in bytes")
    # Compaction (see policy/compaction.py).
    compaction_interval: int = Field(default=10, ge=1, description="new invocations that trigger a compaction")
    overlap_size: int = Field(default=1, ge=0, description="earlier invocations re-read by a new summary")
    token_threshold: int = Field(default=8000, ge=1, description="estimated tokens that trigger a compaction")
    event_retention_size: int = Field(default=10, ge=0, description="raw events every compaction keeps")
    summarizer: str = Field(default="extractive", description="extractive | openai | bedrock")
    summarizer_model: str | None = Field(default=None, description="model name or Bedrock model id")
    summarizer_endpoint: str | None = Field(default=None, description="OpenAI-compatible base URL (…/v1)")
    summarizer_api_key_parameter: str | None = Field(default=None, description="SSM SecureString with the key")
    summarizer_api_key_secret: str | None = Field(default=None, description="Secrets Manager secret with the key")
    summarizer_prompt_template: str | None = Field(default=None, description="must contain {conversation_history}")
    summary_max_chars: int = Field(default=2000, ge=100, description="length limit of an extractive summary")
    # The compaction schedule's fan-out (service/compaction.py dispatch_due): the worker function the dispatcher
    # invokes asynchronously (empty: the workers run in the dispatcher's process, as in make run) and how many.
    compaction_worker_function: str = Field(default="", description="sweep worker function; empty runs in-process")
    compaction_workers: int = Field(default=20, ge=1, description="most sweep workers one scheduled run starts")
    # Long-term memory.
    autosave_policy: str = Field(default="default", description="off | default | all | a custom policy as JSON")
    embedder: str = Field(default="minilm", description="minilm (offline) | bedrock | openai | none")
    embedder_model: str | None = Field(default=None, description="embedding model name or Bedrock model id")
    embedder_endpoint: str | None = Field(default=None, description="OpenAI-compatible base URL (…/v1)")
    embedder_api_key_parameter: str | None = Field(default=None, description="SSM SecureString with the key")
    embedder_api_key_secret: str | None = Field(default=None, description="Secrets Manager secret with the key")
    # Who may call what (policy/access.py): the template's AuthMode and Jwt* parameters.
    auth_mode: Literal["iam", "jwt"] = Field(default="iam", description="iam (AWS_IAM authorizer) | jwt")
    jwt_user_claim: str = Field(default="sub", min_length=1, description="the claim a path's user_id must equal")
    jwt_app_claim: str = Field(default="", description="when set, the claim a path's app_name must equal")
    jwt_admin_scope: str = Field(default="agent-memory/admin", description="a scope that makes a caller admin")
    jwt_admin_group: str = Field(default="", description="a cognito:groups group that makes a caller admin")

    @field_validator("summarizer_prompt_template")
    @classmethod
    def _template_has_placeholder(cls, value: str | None) -> str | None:
        from .providers.prompt import validate_prompt_template

        return None if value is None else validate_prompt_template(value)

    @field_validator("autosave_policy")
    @classmethod
    def _policy_parses(cls, value: str) -> str:
        from .policy.autosave import parse_policy

        raw = value.strip()
        if raw != "off":
            try:
                parse_policy(json.loads(raw) if raw.startswith("{") else raw)
            except Exception as exc:
                raise ValueError(f"AUTOSAVE_POLICY is not a valid policy: {exc}") from exc
        return value

    def autosave_policy_value(self) -> str | dict[str, Any]:
        """The auto-save policy: a preset name, ``off``, or a custom policy object given as JSON."""
        value = self.autosave_policy.strip()
        if value.startswith("{"):
            parsed = json.loads(value)
            if not isinstance(parsed, dict):
                raise ValueError("AUTOSAVE_POLICY JSON must be an object")
            return parsed
        return value

    @classmethod
    def from_env(cls) -> Settings:
        """Read every field from its upper-case environment variable (TABLE_NAME, COMPACTION_INTERVAL, …)."""
        env = os.environ
        values = {
            name: env[name.upper()]
            for name in cls.model_fields
            if env.get(name.upper()) or (name in _BLANK_IS_A_VALUE and name.upper() in env)
        }
        return cls.model_validate(values)


@functools.cache
def settings() -> Settings:
    return Settings.from_env()
