"""The fault tier: moto in-process with a fault injector between botocore and moto."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from .injector import FaultInjector


@pytest.fixture
def faults(aws: dict[str, Any]) -> Iterator[FaultInjector]:
    injector = FaultInjector().install()
    try:
        yield injector
    finally:
        injector.uninstall()
