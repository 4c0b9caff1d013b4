"""API keys of model endpoints are read through Powertools parameters (moto SSM / Secrets Manager): cached for
API_KEY_MAX_AGE_S, then read again, so a rotated key is in use without a redeploy or a cold start."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta

import boto3
import pytest
from moto import mock_aws

from agent_memory.providers.summarizers import (
    API_KEY_MAX_AGE_S,
    api_key_from_secrets_manager,
    api_key_from_ssm,
)


@pytest.fixture
def later(monkeypatch: pytest.MonkeyPatch) -> Callable[[float], None]:
    """Move the clock Powertools' parameter cache reads (its ``datetime.now()``) forward by some seconds."""
    import aws_lambda_powertools.utilities.parameters.base as base

    shift = timedelta()

    class Clock(datetime):
        @classmethod
        def now(cls, tz: object = None) -> Clock:  # type: ignore[override]
            moved = datetime.now(tz) + shift  # type: ignore[arg-type]
            return cls.fromtimestamp(moved.timestamp(), moved.tzinfo)

    monkeypatch.setattr(base, "datetime", Clock)

    def advance(seconds: float) -> None:
        nonlocal shift
        shift += timedelta(seconds=seconds)

    return advance


def calls_of(service: str) -> list[str]:
    from agent_memory.runtime import aws

    calls: list[str] = []
    aws.client(service).meta.events.register("before-call.*.*", lambda model, **_: calls.append(model.name))
    return calls


def test_keys_are_kept_five_minutes() -> None:
    assert API_KEY_MAX_AGE_S == 300


@mock_aws
def test_rotated_ssm_key_is_read_after_max_age(clean_keys: None, later: Callable[[float], None]) -> None:
    ssm = boto3.client("ssm")
    ssm.put_parameter(Name="/agent-memory/llm-key", Value="sk-old", Type="SecureString")
    calls = calls_of("ssm")
    provider = api_key_from_ssm("/agent-memory/llm-key")
    assert provider() == "sk-old"
    ssm.put_parameter(Name="/agent-memory/llm-key", Value="sk-new", Type="SecureString", Overwrite=True)
    later(API_KEY_MAX_AGE_S - 5)
    assert provider() == "sk-old"  # within max_age: the cached key, no call
    assert calls == ["GetParameter"]
    later(10)
    assert provider() == "sk-new"
    assert calls == ["GetParameter", "GetParameter"]
    assert api_key_from_ssm("/agent-memory/llm-key")() == "sk-new"  # one cache per container, not per provider
    assert len(calls) == 2


@mock_aws
def test_rotated_secret_is_read_after_max_age(clean_keys: None, later: Callable[[float], None]) -> None:
    secrets = boto3.client("secretsmanager")
    secrets.create_secret(Name="llm-key", SecretString=json.dumps({"api_key": "sk-old"}))
    calls = calls_of("secretsmanager")
    provider = api_key_from_secrets_manager("llm-key")
    assert provider() == "sk-old"
    secrets.put_secret_value(SecretId="llm-key", SecretString=json.dumps({"api_key": "sk-new"}))
    assert provider() == "sk-old"
    later(API_KEY_MAX_AGE_S + 1)
    assert provider() == "sk-new"
    assert calls == ["GetSecretValue", "GetSecretValue"]


@mock_aws
def test_ssm_key_is_read_decrypted(clean_keys: None) -> None:
    # moto stores a SecureString as given but answers a read without WithDecryption with a placeholder value.
    boto3.client("ssm").put_parameter(Name="plain-name-key", Value=" sk-x \n", Type="SecureString")
    calls: list[dict[str, object]] = []
    from agent_memory.runtime import aws

    aws.client("ssm").meta.events.register(
        "provide-client-params.ssm.GetParameter", lambda params, **_: calls.append(params)
    )
    assert api_key_from_ssm("plain-name-key")() == "sk-x"
    assert calls == [{"Name": "plain-name-key", "WithDecryption": True}]


@mock_aws
def test_secret_without_a_string_is_refused(clean_keys: None) -> None:
    boto3.client("secretsmanager").create_secret(Name="binary-key", SecretBinary=b"\x00\x01")
    with pytest.raises(ValueError, match="no SecretString"):
        api_key_from_secrets_manager("binary-key")()
