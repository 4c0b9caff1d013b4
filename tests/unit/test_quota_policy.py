"""The quota decisions: a limit of n holds n, refuses the n+1st, names itself; 0 is no limit."""

from __future__ import annotations

import pytest

from agent_memory.errors import QuotaExceeded
from agent_memory.policy.quotas import Quotas


def test_a_limit_holds_exactly_its_count() -> None:
    quotas = Quotas(sessions_per_user=2, events_per_session=3, memories_per_user=4)
    quotas.check_sessions(1)
    with pytest.raises(QuotaExceeded) as refused:
        quotas.check_sessions(2)
    assert (refused.value.status, refused.value.code, refused.value.field) == (
        429,
        "quota_exceeded",
        "sessions_per_user",
    )
    assert refused.value.to_body()["error"]["message"].endswith("limit sessions_per_user = 2")
    quotas.check_events(0, 3)
    with pytest.raises(QuotaExceeded, match="limit events_per_session = 3"):
        quotas.check_events(1, 3)
    quotas.check_memories(4, 0)  # nothing new (a resend) at the limit is never refused
    with pytest.raises(QuotaExceeded, match="limit memories_per_user = 4"):
        quotas.check_memories(4, 1)


def test_zero_is_no_limit() -> None:
    quotas = Quotas()
    quotas.check_sessions(10**9)
    quotas.check_events(10**9, 100)
    quotas.check_memories(10**9, 100)
