"""The cached clients share one boto3 session (a second client on a cold start costs a fraction of a new
session), keep their own event hooks, and are built again, from a new session, after ``reset_clients()``."""

from __future__ import annotations

import threading
from typing import Any

import botocore.session
import pytest

from agent_memory import aws


def count_sessions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A list that grows by one for every botocore session made from now on."""
    made: list[int] = []
    init = botocore.session.Session.__init__

    def counting(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(1)
        init(self, *args, **kwargs)

    monkeypatch.setattr(botocore.session.Session, "__init__", counting)
    return made


def test_clients_of_several_services_come_from_one_session(clean_keys: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    made = count_sessions(monkeypatch)
    dynamodb, events = aws.client("dynamodb"), aws.client("events")
    model = aws._model_client("bedrock-runtime", 3, 2)
    assert len(made) == 1
    assert aws.client("dynamodb") is dynamodb
    assert {c.meta.service_model.service_name for c in (dynamodb, events, model)} == {
        "dynamodb",
        "events",
        "bedrock-runtime",
    }
    # each client's hooks are its own (tests register on one client to count its calls)
    assert events.meta.events is not dynamodb.meta.events


def test_reset_clients_starts_a_new_session(clean_keys: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:1")
    first = aws.client("dynamodb")
    aws.reset_clients()
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:2")
    made = count_sessions(monkeypatch)
    second = aws.client("dynamodb")
    assert second is not first and len(made) == 1
    assert second.meta.endpoint_url == "http://127.0.0.1:2"


def test_threads_building_clients_at_once_get_working_clients(
    clean_keys: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    built: dict[str, Any] = {}
    services = ("dynamodb", "s3", "events", "ssm", "secretsmanager", "sts")

    def build(service: str) -> None:
        built[service] = aws.client(service)

    threads = [threading.Thread(target=build, args=(s,)) for s in services]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(built) == sorted(services)
    assert all(callable(getattr(c, "close", None)) for c in built.values())
