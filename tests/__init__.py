"""The test suite: tiers (unit, contract, integration, faults, fuzz, infra) and their shared helpers (support)."""

import pytest

# The helpers outside test modules hold asserts too: pytest rewrites them as it rewrites a test module's, so that
# a helper's failing assert reports the values it compared (as when these helpers lived in test modules). Marked
# here, before any of them is imported.
pytest.register_assert_rewrite(
    "tests.support",
    "tests.unit.conversations",
    "tests.unit.parity",
    "tests.unit.search_corpus",
    "tests.faults.memory_storage",
    "tests.faults.session_storage",
)
