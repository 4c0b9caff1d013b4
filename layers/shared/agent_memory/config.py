"""Configuration: one settings object read from the environment (the template's parameters set it)."""

from __future__ import annotations

import functools
import json
import os
import re
from typing import Any, Literal

from .policy import PRESETS
from .runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)

# Settings whose empty value means "none" rather than "the default": the template passes an empty parameter through
# (JwtAdminScope "" turns the admin scope off; left unset, the default scope applies).
_BLANK_IS_A_VALUE = frozenset({"jwt_app_claim", "jwt_admin_scope", "jwt_admin_group"})


@dataclass(frozen=True)
class _Field:
    """One setting: its type (as written), default, bounds and description."""

    type: str  # "str", "int", "str | None" or a Literal
    default: Any
    description: str = ""
    ge: int | None = None
    min_length: int | None = None


FIELDS: dict[str, _Field] = {
    "backend": _Field("str", default="aws", description="aws | embedded (make run, one machine) | memory (unit tests)"),
    "data_dir": _Field(
        "str", default=".data", description="where the embedded backend keeps its SQLite file (DATA_DIR)"
    ),
    "table_name": _Field("str", default="agent-memory", description="DynamoDB table (TABLE_NAME)"),
    "bucket_name": _Field("str", default="agent-memory-context", description="S3 context bucket (BUCKET_NAME)"),
    "event_bus_name": _Field(
        "str", default="default", description="EventBridge bus for SessionCreated (EVENT_BUS_NAME)"
    ),
    "retention_days": _Field("int", default=0, ge=0, description="TTL of sessions and events in days; 0 keeps forever"),
    "offload_bytes": _Field("int", default=350_000, ge=1, description="events larger than this go to S3"),
    # Per-user quotas (0 disables one); exceeding one answers 429 quota_exceeded, a larger body 413.
    "max_sessions_per_user": _Field("int", default=10_000, ge=0, description="sessions a user may hold"),
    "max_events_per_session": _Field("int", default=100_000, ge=0, description="events a session may hold"),
    "max_memories_per_user": _Field("int", default=100_000, ge=0, description="memory records a user may hold"),
    "max_request_bytes": _Field("int", default=1_048_576, ge=0, description="largest request body, in bytes"),
    # Compaction (see policy/compaction.py).
    "compaction_interval": _Field("int", default=10, ge=1, description="new invocations that trigger a compaction"),
    "overlap_size": _Field("int", default=1, ge=0, description="earlier invocations re-read by a new summary"),
    "token_threshold": _Field("int", default=8000, ge=1, description="estimated tokens that trigger a compaction"),
    "event_retention_size": _Field("int", default=10, ge=0, description="raw events every compaction keeps"),
    "summarizer": _Field("str", default="extractive", description="extractive | openai | bedrock"),
    "summarizer_model": _Field("str | None", default=None, description="model name or Bedrock model id"),
    "summarizer_endpoint": _Field("str | None", default=None, description="OpenAI-compatible base URL (…/v1)"),
    "summarizer_api_key_parameter": _Field("str | None", default=None, description="SSM SecureString with the key"),
    "summarizer_api_key_secret": _Field("str | None", default=None, description="Secrets Manager secret with the key"),
    "summarizer_prompt_template": _Field("str | None", default=None, description="must contain {conversation_history}"),
    "summary_max_chars": _Field("int", default=2000, ge=100, description="length limit of an extractive summary"),
    # The compaction schedule's fan-out (service/compaction.py dispatch_due): the worker function the dispatcher
    # invokes asynchronously (empty: the workers run in the dispatcher's process, as in make run) and how many.
    "compaction_worker_function": _Field("str", default="", description="sweep worker function; empty runs in-process"),
    "compaction_workers": _Field("int", default=20, ge=1, description="most sweep workers one scheduled run starts"),
    # Long-term memory.
    "autosave_policy": _Field("str", default="default", description="off | default | all | a custom policy as JSON"),
    "embedder": _Field("str", default="minilm", description="minilm (offline) | bedrock | openai | none"),
    "embedder_model": _Field("str | None", default=None, description="embedding model name or Bedrock model id"),
    "embedder_endpoint": _Field("str | None", default=None, description="OpenAI-compatible base URL (…/v1)"),
    "embedder_api_key_parameter": _Field("str | None", default=None, description="SSM SecureString with the key"),
    "embedder_api_key_secret": _Field("str | None", default=None, description="Secrets Manager secret with the key"),
    # Who may call what (policy/access.py): the template's AuthMode and Jwt* parameters.
    "auth_mode": _Field('Literal["iam", "jwt"]', default="iam", description="iam (AWS_IAM authorizer) | jwt"),
    "jwt_user_claim": _Field("str", default="sub", min_length=1, description="the claim a path's user_id must equal"),
    "jwt_app_claim": _Field("str", default="", description="when set, the claim a path's app_name must equal"),
    "jwt_admin_scope": _Field("str", default="agent-memory/admin", description="a scope that makes a caller admin"),
    "jwt_admin_group": _Field("str", default="", description="a cognito:groups group that makes a caller admin"),
}
_CHOICES = {"auth_mode": ("iam", "jwt")}


def _coerce(name: str, spec: _Field, value: Any) -> Any:
    """``value`` as the setting's type (environment values arrive as text); ValueError naming the setting."""
    if value is None and "None" in spec.type:
        return None
    if spec.type == "int":
        if isinstance(value, bool):
            raise ValueError(f"{name}: a boolean is not a number")
        if isinstance(value, str):
            text = value.strip()
            if not re.fullmatch(r"[+-]?[0-9]+", text):
                raise ValueError(f"{name}: must be a whole number, not {value!r}")
            value = int(text)
        if not isinstance(value, int):
            raise ValueError(f"{name}: must be a whole number, not {value!r}")
        if spec.ge is not None and value < spec.ge:
            raise ValueError(f"{name}: must be at least {spec.ge}, not {value}")
        return value
    if not isinstance(value, str):
        raise ValueError(f"{name}: must be text, not {value!r}")
    if name in _CHOICES and value not in _CHOICES[name]:
        raise ValueError(f"{name}: must be one of {', '.join(_CHOICES[name])}, not {value!r}")
    if spec.min_length is not None and len(value) < spec.min_length:
        raise ValueError(f"{name}: must not be empty")
    return value


class Settings:
    """The settings, validated when made (ValueError naming the setting). A plain class: every function reads
    them on its cold start, which pydantic would cost more than the first request."""

    model_fields = FIELDS  # the table above (pydantic's name for it: tests and benches read the defaults)

    backend: str
    data_dir: str
    table_name: str
    bucket_name: str
    event_bus_name: str
    retention_days: int
    offload_bytes: int
    max_sessions_per_user: int
    max_events_per_session: int
    max_memories_per_user: int
    max_request_bytes: int
    compaction_interval: int
    overlap_size: int
    token_threshold: int
    event_retention_size: int
    summarizer: str
    summarizer_model: str | None
    summarizer_endpoint: str | None
    summarizer_api_key_parameter: str | None
    summarizer_api_key_secret: str | None
    summarizer_prompt_template: str | None
    summary_max_chars: int
    compaction_worker_function: str
    compaction_workers: int
    autosave_policy: str
    embedder: str
    embedder_model: str | None
    embedder_endpoint: str | None
    embedder_api_key_parameter: str | None
    embedder_api_key_secret: str | None
    auth_mode: Literal["iam", "jwt"]
    jwt_user_claim: str
    jwt_app_claim: str
    jwt_admin_scope: str
    jwt_admin_group: str

    def __init__(self, **values: Any) -> None:
        unknown = sorted(set(values) - set(FIELDS))
        if unknown:
            raise ValueError(f"unknown settings: {', '.join(unknown)}")
        for name, spec in FIELDS.items():
            object.__setattr__(self, name, _coerce(name, spec, values.get(name, spec.default)))
        if self.summarizer_prompt_template is not None:
            from .providers.prompt import validate_prompt_template

            object.__setattr__(
                self, "summarizer_prompt_template", validate_prompt_template(self.summarizer_prompt_template)
            )
        raw = self.autosave_policy.strip()
        if "autosave_policy" in values and raw != "off" and raw not in PRESETS:  # a preset or the default: valid
            from .policy.autosave import parse_policy

            try:
                parse_policy(json.loads(raw) if raw.startswith("{") else raw)
            except Exception as exc:
                raise ValueError(f"AUTOSAVE_POLICY is not a valid policy: {exc}") from exc

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Settings are read-only: make new ones (model_copy)")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Settings) and self.model_dump() == other.model_dump()

    def __repr__(self) -> str:
        return "Settings(" + ", ".join(f"{k}={v!r}" for k, v in self.model_dump().items()) + ")"

    @classmethod
    def model_validate(cls, values: dict[str, Any]) -> Settings:
        return cls(**values)

    def model_dump(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in FIELDS}

    def model_copy(self, *, update: dict[str, Any] | None = None) -> Settings:
        """New settings: these with ``update`` applied (validated again)."""
        return Settings(**{**self.model_dump(), **(update or {})})

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
        return cls(**values)


@functools.cache
def settings() -> Settings:
    return Settings.from_env()
