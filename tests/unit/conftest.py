"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from agent_memory.providers.summarizers import clear_api_key_cache
from agent_memory.runtime.aws import reset_clients


@pytest.fixture
def clean_keys() -> Iterator[None]:
    """No client or API key cached by an earlier test, and none left for the next."""
    reset_clients()
    clear_api_key_cache()
    yield
    reset_clients()
    clear_api_key_cache()


@pytest.fixture
def bedrock() -> Iterator[tuple[Any, Stubber]]:
    """A bedrock-runtime client under a Stubber; every queued response must be used."""
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    with Stubber(client) as stubber:
        yield client, stubber
        stubber.assert_no_pending_responses()
