"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from agent_memory.aws import reset_clients
from agent_memory.providers.summarizers import clear_api_key_cache


@pytest.fixture
def clean_keys() -> Iterator[None]:
    """No client or API key cached by an earlier test, and none left for the next."""
    reset_clients()
    clear_api_key_cache()
    yield
    reset_clients()
    clear_api_key_cache()
