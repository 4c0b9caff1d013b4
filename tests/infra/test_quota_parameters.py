"""The quota parameters: each reaches every function's environment and means there what its default says."""

from __future__ import annotations

import pytest

from agent_memory.config import Settings
from local.template import ROOT, load_template

TEMPLATE = load_template()
QUOTAS = {
    "MaxSessionsPerUser": ("MAX_SESSIONS_PER_USER", 10_000),
    "MaxEventsPerSession": ("MAX_EVENTS_PER_SESSION", 100_000),
    "MaxMemoriesPerUser": ("MAX_MEMORIES_PER_USER", 100_000),
    "MaxRequestBytes": ("MAX_REQUEST_BYTES", 1_048_576),
}


@pytest.mark.parametrize("parameter", sorted(QUOTAS))
def test_a_quota_parameter_sets_its_setting_with_the_same_safe_default(parameter: str) -> None:
    env, default = QUOTAS[parameter]
    declared = TEMPLATE["Parameters"][parameter]
    assert declared["Type"] == "Number" and declared["MinValue"] == 0  # 0 disables the quota
    assert int(declared["Default"]) == default
    variables = TEMPLATE["Globals"]["Function"]["Environment"]["Variables"]
    assert variables[env] == {"Ref": parameter}  # Globals: every function, the edge and auto-save included
    field = Settings.model_fields[env.lower()]
    assert field.default == default
    assert Settings.model_validate({env.lower(): "0"}).model_dump()[env.lower()] == 0
    with pytest.raises(ValueError):
        Settings.model_validate({env.lower(): "-1"})


def test_the_docs_document_each_quota_and_its_answer() -> None:
    configuration = (ROOT / "docs" / "configuration.md").read_text()
    api = (ROOT / "docs" / "api.md").read_text()
    for parameter, (env, _) in QUOTAS.items():
        assert f"`{parameter}`" in configuration and f"`{env}`" in configuration, parameter
    for needle in ("quota_exceeded", "sessions_per_user", "events_per_session", "memories_per_user"):
        assert needle in configuration, needle
        assert needle in api, needle
