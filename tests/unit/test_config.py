"""Settings: a plain class (no pydantic on a cold start) that still validates what the environment gives it."""

from __future__ import annotations

import pytest

from agent_memory.config import FIELDS, Settings


def test_defaults_are_the_tables_and_environment_text_becomes_numbers() -> None:
    defaults = Settings()
    assert defaults.model_dump() == {name: spec.default for name, spec in FIELDS.items()}
    configured = Settings.model_validate({"compaction_interval": "3", "retention_days": " 7 ", "auth_mode": "jwt"})
    assert (configured.compaction_interval, configured.retention_days, configured.auth_mode) == (3, 7, "jwt")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("compaction_interval", "0"),  # ge=1
        ("max_sessions_per_user", "-1"),  # ge=0
        ("offload_bytes", "1.5"),
        ("offload_bytes", "ten"),
        ("offload_bytes", True),
        ("auth_mode", "cookie"),
        ("jwt_user_claim", ""),  # min_length=1
        ("summarizer_prompt_template", "no placeholder"),
        ("autosave_policy", "no such policy"),
        ("autosave_policy", "Default"),  # preset names are exact
        ("autosave_policy", '{"preset": "all", "roles": "everyone"}'),
        ("no_such_setting", "x"),
    ],
)
def test_a_bad_value_is_a_value_error_naming_it(name: str, value: object) -> None:
    with pytest.raises(ValueError):
        Settings.model_validate({name: value})


def test_settings_are_read_only_and_a_copy_is_validated_again() -> None:
    settings = Settings(embedder="none")
    with pytest.raises(AttributeError):
        settings.embedder = "minilm"  # type: ignore[misc]
    copy = settings.model_copy(update={"data_dir": "/tmp/x"})
    assert (copy.data_dir, copy.embedder, settings.data_dir) == ("/tmp/x", "none", ".data")
    assert copy != settings and copy == Settings(embedder="none", data_dir="/tmp/x")
    with pytest.raises(ValueError):
        settings.model_copy(update={"compaction_workers": 0})


def test_from_env_reads_upper_case_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKEN_THRESHOLD", "123")
    monkeypatch.setenv("SUMMARIZER_MODEL", "m")
    monkeypatch.setenv("EMBEDDER", "")  # empty: the default
    read = Settings.from_env()
    assert (read.token_threshold, read.summarizer_model, read.embedder) == (123, "m", "minilm")


def test_every_preset_is_a_valid_autosave_policy_and_the_presets_are_the_policy_s() -> None:
    from agent_memory.policy import PRESETS
    from agent_memory.policy.autosave import parse_policy

    for name in PRESETS:  # accepted by name alone (no policy code imported), and parsed by the policy code
        assert Settings(autosave_policy=name).autosave_policy == name
        assert parse_policy(name).preset == name
