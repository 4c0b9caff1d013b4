"""Summarizers: extractive (offline), OpenAI-compatible (httpx mock transport), Bedrock (Stubber), API keys (moto)."""

from __future__ import annotations

import json
from typing import Any

import boto3
import httpx
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from agent_memory.providers.ports import DEFAULT_PROMPT_TEMPLATE, SummarizerError, ToolCall, ToolResult, Turn
from agent_memory.providers.prompt import build_prompt, render_conversation, validate_prompt_template
from agent_memory.providers.summarizers import (
    BedrockSummarizer,
    ExtractiveSummarizer,
    OpenAICompatibleSummarizer,
    api_key_from_secrets_manager,
    api_key_from_ssm,
    build_summarizer,
)
from agent_memory.runtime.budget import ModelBudget
from tests.unit.bedrock_stub import converse_response

# --------------------------------------------------------------------------------------------------------------
# Fixtures
# --------------------------------------------------------------------------------------------------------------

FACTS = [
    "My name is Priya Raman.",
    "I'm allergic to peanuts.",
    "My flight is on 14 March 2025 at 7:45.",
    "Let's book the Hotel Lusitano.",
    "Can you remind me to renew my passport?",
]
CHIT_CHAT = ["ok", "thanks!", "hello", "Great, thanks.", "Sounds good!", "cool"]


def user(text: str, **kw: Any) -> Turn:
    return Turn(author="priya", role="user", text=text, **kw)


def agent(text: str = "", **kw: Any) -> Turn:
    return Turn(author="travel_agent", role="assistant", text=text, **kw)


def long_conversation() -> list[Turn]:
    """60 turns: the facts come first, then a tool call, then chit-chat and wordy assistant filler."""
    turns: list[Turn] = [
        user("hello"),
        agent("Hello! How can I help you today?"),
        user(FACTS[0] + " " + FACTS[1]),
        agent("Thank you."),
        user(FACTS[2]),
        agent(tool_calls=(ToolCall("get_weather", {"city": "Lisbon", "date": "2025-03-14"}),)),
        Turn(
            author="get_weather",
            role="tool",
            tool_results=(ToolResult("get_weather", {"forecast": "sunny", "high_c": 19}),),
        ),
        user(FACTS[3]),
        agent("You're welcome!"),
        user(FACTS[4]),
    ]
    i = 0
    while len(turns) < 60:
        turns.append(user(CHIT_CHAT[i % len(CHIT_CHAT)]))
        turns.append(
            agent(
                f"Here is some general background about catalogue section {i}, which currently lists {i * 7 + 3} "
                "entries of varying relevance to travellers in general."
            )
        )
        i += 1
    return turns


# --------------------------------------------------------------------------------------------------------------
# Extractive
# --------------------------------------------------------------------------------------------------------------


def test_extractive_keeps_buried_facts_decisions_and_requests_within_budget() -> None:
    turns = long_conversation()
    assert len(turns) == 60
    summary = ExtractiveSummarizer(max_chars=1000).summarize(turns, None)
    assert len(summary) <= 1000
    for needle in (
        "Priya Raman",
        "allergic to peanuts",
        "14 March 2025",
        "7:45",
        "Hotel Lusitano",
        "remind me to renew my passport",
    ):
        assert needle in summary, needle
    # the filler does not all fit: the budget forced a choice, and the facts won it
    filler_total = sum(len(t.text) for t in turns if t.text.startswith("Here is some general background"))
    assert filler_total > 1000
    assert summary.count("catalogue section") < 20


def test_extractive_lists_tools_used_with_counts() -> None:
    turns = [*long_conversation(), agent(tool_calls=(ToolCall("get_weather", {"city": "Porto"}), ToolCall("search")))]
    summary = ExtractiveSummarizer().summarize(turns, None)
    tools_lines = [line for line in summary.splitlines() if line.startswith("Tools used:")]
    assert tools_lines == ["Tools used: get_weather ×2, search ×1"]


def test_extractive_drops_chit_chat() -> None:
    summary = ExtractiveSummarizer().summarize(long_conversation(), None)
    lines = summary.splitlines()
    for chat in CHIT_CHAT:
        assert f"priya: {chat}" not in lines
    assert "thanks" not in summary.lower()
    assert "hello" not in summary.lower()
    assert "welcome" not in summary.lower()
    assert "How can I help" not in summary  # service boilerplate, even phrased as a question
    assert ExtractiveSummarizer().summarize([user(c) for c in CHIT_CHAT], None) == ""


def test_extractive_keeps_chronological_order_and_prefixes_authors() -> None:
    summary = ExtractiveSummarizer().summarize(long_conversation(), None)
    positions = [summary.index(fact) for fact in FACTS]
    assert positions == sorted(positions)
    assert "priya: My name is Priya Raman." in summary.splitlines()


def test_extractive_is_deterministic() -> None:
    turns = long_conversation()
    first = ExtractiveSummarizer(max_chars=800).summarize(turns, "user: I live in Lisbon.")
    second = ExtractiveSummarizer(max_chars=800).summarize(list(turns), "user: I live in Lisbon.")
    assert first == second


def test_extractive_deduplicates_repeated_sentences() -> None:
    turns = [user("I'm allergic to peanuts."), agent("Noted."), user("I'm allergic to peanuts.")]
    summary = ExtractiveSummarizer().summarize(turns, "priya: I'm allergic to peanuts.")
    assert summary.count("allergic to peanuts") == 1


@pytest.mark.parametrize("max_chars", [1, 40, 120, 500, 2000])
def test_extractive_respects_max_chars(max_chars: int) -> None:
    turns = [*long_conversation(), user("x" * 5000 + " is my locker code 12345")]
    summary = ExtractiveSummarizer(max_chars=max_chars).summarize(turns, "priya: " + "I prefer aisle seats. " * 200)
    assert len(summary) <= max_chars


def test_extractive_rejects_non_positive_budget() -> None:
    with pytest.raises(ValueError, match="max_chars"):
        ExtractiveSummarizer(max_chars=0)


def test_extractive_previous_summary_facts_survive_roll_ups() -> None:
    summarizer = ExtractiveSummarizer(max_chars=1000)
    summary = summarizer.summarize(long_conversation(), None)
    for round_no in range(3):
        new_turns = [
            user(f"I live in Porto now, street number {round_no}.") if round_no == 0 else user("ok"),
            *[
                agent(f"Background entry {round_no}-{k} lists {k * 11} items in total for travellers.")
                for k in range(30)
            ],
            agent(tool_calls=(ToolCall("get_weather", {"city": "Porto"}),)),
        ]
        summary = summarizer.summarize(new_turns, summary)
        assert len(summary) <= 1000
        for needle in ("Priya Raman", "allergic to peanuts", "14 March 2025", "Hotel Lusitano", "renew my passport"):
            assert needle in summary, (round_no, needle)
        assert "I live in Porto now" in summary
    # the tool counts accumulate across roll-ups: 1 from the first summary + 3 new calls
    assert "Tools used: get_weather ×4" in summary.splitlines()


def test_extractive_previous_summary_outranks_a_flood_of_new_facts() -> None:
    previous = "priya: I'm allergic to peanuts.\npriya: My name is Priya Raman."
    flood = [user(f"I like museum number {k} in the old town.") for k in range(40)]
    summary = ExtractiveSummarizer(max_chars=420).summarize(flood, previous)
    assert len(summary) <= 420
    assert "priya: I'm allergic to peanuts." in summary.splitlines()
    assert "priya: My name is Priya Raman." in summary.splitlines()
    assert "museum number 0 " in summary  # new facts fill the rest of the budget, oldest first
    assert "museum number 39 " not in summary


def test_extractive_folds_in_a_model_written_previous_summary() -> None:
    previous = "The user is Priya Raman. She is vegetarian and prefers window seats. Tools used: search ×2"
    summary = ExtractiveSummarizer().summarize([user("thanks"), agent("I'll check flights on Friday.")], previous)
    assert "The user is Priya Raman." in summary
    assert "prefers window seats" in summary
    assert "travel_agent: I'll check flights on Friday." in summary
    assert summary.splitlines()[-1] == "Tools used: search ×2"


# --------------------------------------------------------------------------------------------------------------
# Prompt
# --------------------------------------------------------------------------------------------------------------


def test_render_conversation_shows_authors_texts_tool_calls_and_results() -> None:
    rendered = render_conversation(
        [
            user("What's the weather in Lisbon?"),
            agent("Let me check.", tool_calls=(ToolCall("get_weather", {"city": "Lisbon"}),)),
            Turn(author="weather_tool", role="tool", tool_results=(ToolResult("get_weather", {"high_c": 19}),)),
        ]
    )
    assert rendered.splitlines() == [
        "[priya] What's the weather in Lisbon?",
        "[travel_agent] Let me check.",
        '[travel_agent] called get_weather({"city":"Lisbon"})',
        '[weather_tool] get_weather returned: {"high_c":19}',
    ]


def test_render_conversation_clips_long_tool_payloads() -> None:
    big = {"blob": "z" * 2000}
    rendered = render_conversation(
        [agent(tool_calls=(ToolCall("upload", big),)), agent(tool_results=(ToolResult("upload", "y" * 3000),))],
        max_tool_payload_chars=100,
    )
    call_line, result_line = rendered.splitlines()
    full_args = json.dumps(big, separators=(",", ":"))
    assert call_line.startswith('[travel_agent] called upload({"blob":"zzz')
    assert f"… [clipped {len(full_args) - 100} chars])" in call_line
    assert len(call_line) < 200
    assert result_line.endswith(f"… [clipped {3002 - 100} chars]")  # the JSON string has its two quotes
    assert "z" * 500 not in rendered


def test_validate_prompt_template_requires_conversation_history() -> None:
    with pytest.raises(ValueError, match=r"\{conversation_history\}"):
        validate_prompt_template("Summarise this: {previous_summary}")
    with pytest.raises(ValueError, match=r"\{conversation_history\}"):
        validate_prompt_template("Escaped is not a placeholder: {{conversation_history}}")


@pytest.mark.parametrize(
    "template",
    [
        "History: {conversation_history} and a stray } brace",
        "History: {conversation_history} and a stray { brace",
        "History: {conversation_history} for {user_name}",
        "History: {conversation_history} {0}",
        'JSON please: {"summary": "..."} {conversation_history}',
    ],
)
def test_validate_prompt_template_rejects_templates_that_cannot_be_filled(template: str) -> None:
    with pytest.raises(ValueError, match="prompt template"):
        validate_prompt_template(template)


def test_validate_prompt_template_accepts_default_and_escaped_braces() -> None:
    assert validate_prompt_template(DEFAULT_PROMPT_TEMPLATE) == DEFAULT_PROMPT_TEMPLATE
    template = 'Reply as {{"summary": "..."}}.\n{conversation_history}'
    assert validate_prompt_template(template) == template


def test_build_prompt_fills_conversation_and_previous_summary() -> None:
    prompt = build_prompt(DEFAULT_PROMPT_TEMPLATE, [user("I'm allergic to peanuts.")], "Name: Priya.")
    assert "[priya] I'm allergic to peanuts." in prompt
    assert "Previous summary:\nName: Priya." in prompt
    assert "(none)" in build_prompt(DEFAULT_PROMPT_TEMPLATE, [], None)


# --------------------------------------------------------------------------------------------------------------
# OpenAI-compatible
# --------------------------------------------------------------------------------------------------------------


def completion(content: str) -> dict[str, Any]:
    return {
        "id": "x",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
    }


def fast_budget(max_retries: int = 2) -> ModelBudget:
    """``max_retries + 1`` attempts of 5 s each, without pauses between them."""
    return ModelBudget("test", total_s=5.0 * (max_retries + 1), attempts=max_retries + 1, backoff_s=0.0)


def openai(handler: Any, max_retries: int = 2, **kw: Any) -> OpenAICompatibleSummarizer:
    kw.setdefault("api_key_provider", lambda: "sk-test")
    return OpenAICompatibleSummarizer(
        "https://llm.example.com/v1/",
        "gpt-test",
        transport=httpx.MockTransport(handler),
        budget=fast_budget(max_retries),
        **kw,
    )


def test_openai_posts_chat_completion_and_returns_stripped_content() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=completion("  Priya is allergic to peanuts.\n"))

    result = openai(handler, max_tokens=256, temperature=0.2).summarize(
        [user("I'm allergic to peanuts.")], "Name: Priya Raman."
    )
    assert result == "Priya is allergic to peanuts."
    (request,) = seen
    assert request.method == "POST"
    assert str(request.url) == "https://llm.example.com/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer sk-test"
    body = json.loads(request.content)
    assert body["model"] == "gpt-test"
    assert body["max_tokens"] == 256 and body["temperature"] == 0.2
    (message,) = body["messages"]
    assert message["role"] == "user"
    assert "[priya] I'm allergic to peanuts." in message["content"]
    assert "Name: Priya Raman." in message["content"]


def test_openai_sends_no_authorization_without_a_key() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=completion("ok summary"))

    assert openai(handler, api_key_provider=lambda: None).summarize([user("hi")], None) == "ok summary"
    assert "authorization" not in seen[0].headers


@pytest.mark.parametrize("status", [500, 502, 503, 429])
def test_openai_retries_server_errors_and_throttles_then_succeeds(status: int) -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls < 3:
            return httpx.Response(status, json={"error": "try later"})
        return httpx.Response(200, json=completion("third time lucky"))

    assert openai(handler, max_retries=2).summarize([user("hi there")], None) == "third time lucky"
    assert calls == 3


def test_openai_gives_up_after_max_retries_on_server_errors() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(503, text="overloaded")

    with pytest.raises(SummarizerError, match="503"):
        openai(handler, max_retries=3).summarize([user("hi there")], None)
    assert calls == 4


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_openai_client_errors_raise_without_retry(status: int) -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(status, json={"error": {"message": "nope"}})

    with pytest.raises(SummarizerError, match=str(status)):
        openai(handler, max_retries=5).summarize([user("hi there")], None)
    assert calls == 1


def test_openai_retries_timeouts_then_raises_summarizer_error() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.ReadTimeout("timed out", request=request)

    with pytest.raises(SummarizerError, match="ReadTimeout"):
        openai(handler, max_retries=2).summarize([user("hi there")], None)
    assert calls == 3


def test_openai_retries_connection_errors_then_succeeds() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(200, json=completion("connected"))

    assert openai(handler).summarize([user("hi there")], None) == "connected"
    assert calls == 2


@pytest.mark.parametrize(
    "payload",
    [
        {"choices": []},
        {"choices": [{"message": {}}]},
        {"choices": [{"message": {"content": None}}]},
        {"choices": [{"message": {"content": "   "}}]},
        {"error": "weird"},
    ],
)
def test_openai_response_without_content_raises(payload: dict[str, Any]) -> None:
    with pytest.raises(SummarizerError):
        openai(lambda request: httpx.Response(200, json=payload)).summarize([user("hi there")], None)


def test_openai_non_json_response_raises() -> None:
    with pytest.raises(SummarizerError):
        openai(lambda request: httpx.Response(200, text="<html>gateway</html>")).summarize([user("hi")], None)


def test_openai_key_provider_failure_is_a_summarizer_error_without_the_key() -> None:
    def provider() -> str:
        raise RuntimeError("ssm unavailable")

    with pytest.raises(SummarizerError, match="API key"):
        openai(lambda request: httpx.Response(200, json=completion("x")), api_key_provider=provider).summarize(
            [user("hi")], None
        )


def test_openai_rejects_a_bad_template() -> None:
    with pytest.raises(ValueError, match=r"\{conversation_history\}"):
        OpenAICompatibleSummarizer("https://x/v1", "m", lambda: None, prompt_template="no placeholder")


# --------------------------------------------------------------------------------------------------------------
# Bedrock
# --------------------------------------------------------------------------------------------------------------

MODEL_ID = "anthropic.claude-3-haiku-20240307-v1:0"


def test_bedrock_converse_returns_concatenated_text(bedrock: tuple[Any, Stubber]) -> None:
    client, stubber = bedrock
    turns = [user("I'm allergic to peanuts.")]
    prompt = build_prompt(DEFAULT_PROMPT_TEMPLATE, turns, "Name: Priya.")
    assert "[priya] I'm allergic to peanuts." in prompt
    stubber.add_response(
        "converse",
        converse_response("Priya is allergic ", "to peanuts.\n"),
        {
            "modelId": MODEL_ID,
            "messages": [{"role": "user", "content": [{"text": prompt}]}],
            "inferenceConfig": {"maxTokens": 300, "temperature": 0.0},
        },
    )
    summarizer = BedrockSummarizer(MODEL_ID, client_factory=lambda: client, max_tokens=300)
    assert summarizer.summarize(turns, "Name: Priya.") == "Priya is allergic to peanuts."


def test_bedrock_client_error_becomes_summarizer_error(bedrock: tuple[Any, Stubber]) -> None:
    client, stubber = bedrock
    stubber.add_client_error("converse", service_error_code="ThrottlingException", http_status_code=429)
    with pytest.raises(SummarizerError, match="ThrottlingException"):
        BedrockSummarizer(MODEL_ID, client_factory=lambda: client).summarize([user("hi")], None)


def test_bedrock_empty_output_is_a_summarizer_error(bedrock: tuple[Any, Stubber]) -> None:
    client, stubber = bedrock
    stubber.add_response("converse", converse_response())
    with pytest.raises(SummarizerError):
        BedrockSummarizer(MODEL_ID, client_factory=lambda: client).summarize([user("hi")], None)


def test_bedrock_default_client_fits_the_request_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    import agent_memory.runtime.aws

    requested: list[tuple[str, int, int]] = []

    class FakeClient:
        def converse(self, **kwargs: Any) -> dict[str, Any]:
            return converse_response("summary text")

    def fake_client(service: str, read_timeout_s: int, attempts: int) -> FakeClient:
        requested.append((service, read_timeout_s, attempts))
        return FakeClient()

    monkeypatch.setattr(agent_memory.runtime.aws, "_model_client", fake_client)
    assert BedrockSummarizer(MODEL_ID).summarize([user("hi")], None) == "summary text"
    assert requested == [("bedrock-runtime", 9, 2)]  # REQUEST: 2 attempts of 9.5 s, read timeout in whole seconds


# --------------------------------------------------------------------------------------------------------------
# API key providers
# --------------------------------------------------------------------------------------------------------------


def count_calls(service: str) -> list[str]:
    from agent_memory.runtime import aws

    calls: list[str] = []
    aws.client(service).meta.events.register("before-call.*.*", lambda model, **_: calls.append(model.name))
    return calls


@mock_aws
def test_api_key_from_ssm_reads_secure_string_once(clean_keys: None) -> None:
    boto3.client("ssm").put_parameter(Name="/agent-memory/llm-key", Value="sk-ssm", Type="SecureString")
    calls = count_calls("ssm")
    provider = api_key_from_ssm("/agent-memory/llm-key")
    assert provider() == "sk-ssm"
    boto3.client("ssm").delete_parameter(Name="/agent-memory/llm-key")
    assert provider() == "sk-ssm"
    assert api_key_from_ssm("/agent-memory/llm-key")() == "sk-ssm"  # cached per container, not per provider
    assert calls == ["GetParameter"]


@mock_aws
def test_api_key_from_secrets_manager_plain_string(clean_keys: None) -> None:
    boto3.client("secretsmanager").create_secret(Name="llm-key", SecretString="sk-plain")
    calls = count_calls("secretsmanager")
    provider = api_key_from_secrets_manager("llm-key")
    assert provider() == "sk-plain"
    assert provider() == "sk-plain"
    assert calls == ["GetSecretValue"]


@mock_aws
def test_api_key_from_secrets_manager_json_with_api_key(clean_keys: None) -> None:
    secrets = boto3.client("secretsmanager")
    secrets.create_secret(Name="llm-json", SecretString=json.dumps({"api_key": "sk-json", "org": "acme"}))
    provider = api_key_from_secrets_manager("llm-json")
    assert provider() == "sk-json"
    secrets.delete_secret(SecretId="llm-json", ForceDeleteWithoutRecovery=True)
    assert provider() == "sk-json"


@mock_aws
def test_api_key_failure_is_not_cached(clean_keys: None) -> None:
    provider = api_key_from_ssm("/missing")
    with pytest.raises(Exception, match="ParameterNotFound"):
        provider()
    boto3.client("ssm").put_parameter(Name="/missing", Value="sk-late", Type="SecureString")
    assert provider() == "sk-late"


@mock_aws
def test_openai_summarizer_reads_key_from_ssm(clean_keys: None) -> None:
    boto3.client("ssm").put_parameter(Name="/k", Value="sk-from-ssm", Type="SecureString")
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"])
        return httpx.Response(200, json=completion("summary"))

    summarizer = openai(handler, api_key_provider=api_key_from_ssm("/k"))
    summarizer.summarize([user("hi")], None)
    summarizer.summarize([user("hi again")], None)
    assert seen == ["Bearer sk-from-ssm", "Bearer sk-from-ssm"]


# --------------------------------------------------------------------------------------------------------------
# build_summarizer
# --------------------------------------------------------------------------------------------------------------

NONE: dict[str, Any] = {
    "model": None,
    "endpoint": None,
    "api_key_parameter": None,
    "api_key_secret": None,
    "prompt_template": None,
}


def test_build_extractive() -> None:
    summarizer = build_summarizer("extractive", **{**NONE, "max_chars": 321})
    assert isinstance(summarizer, ExtractiveSummarizer)
    assert summarizer.name == "extractive" and summarizer.max_chars == 321


@mock_aws
def test_build_openai_with_ssm_key(clean_keys: None) -> None:
    boto3.client("ssm").put_parameter(Name="/k", Value="sk-1", Type="SecureString")
    summarizer = build_summarizer(
        "openai", **{**NONE, "model": "gpt-4o-mini", "endpoint": "https://api.example/v1/", "api_key_parameter": "/k"}
    )
    assert isinstance(summarizer, OpenAICompatibleSummarizer)
    assert summarizer.name == "openai"
    assert summarizer.url == "https://api.example/v1/chat/completions"
    assert summarizer.model == "gpt-4o-mini"
    assert summarizer.api_key_provider is not None and summarizer.api_key_provider() == "sk-1"
    assert summarizer.prompt_template == DEFAULT_PROMPT_TEMPLATE


@mock_aws
def test_build_openai_with_secret_and_custom_template(clean_keys: None) -> None:
    boto3.client("secretsmanager").create_secret(Name="s", SecretString='{"api_key": "sk-2"}')
    template = "Summarise:\n{conversation_history}"
    summarizer = build_summarizer(
        "OpenAI",
        **{**NONE, "model": "m", "endpoint": "http://vllm:8000/v1", "api_key_secret": "s", "prompt_template": template},
    )
    assert isinstance(summarizer, OpenAICompatibleSummarizer)
    assert summarizer.api_key_provider is not None and summarizer.api_key_provider() == "sk-2"
    assert summarizer.prompt_template == template


def test_build_openai_without_key_has_no_provider() -> None:
    summarizer = build_summarizer("openai", **{**NONE, "model": "llama3", "endpoint": "http://ollama:11434/v1"})
    assert isinstance(summarizer, OpenAICompatibleSummarizer)
    assert summarizer.api_key_provider is None


def test_build_bedrock() -> None:
    summarizer = build_summarizer("bedrock", **{**NONE, "model": MODEL_ID})
    assert isinstance(summarizer, BedrockSummarizer)
    assert summarizer.name == "bedrock" and summarizer.model_id == MODEL_ID


@pytest.mark.parametrize(
    ("kind", "overrides", "message"),
    [
        ("gpt", {}, "unknown summarizer kind"),
        ("", {}, "unknown summarizer kind"),
        ("openai", {"model": "m"}, "endpoint"),
        ("openai", {"endpoint": "https://x/v1"}, "model"),
        (
            "openai",
            {"model": "m", "endpoint": "https://x/v1", "api_key_parameter": "/a", "api_key_secret": "b"},
            "not both",
        ),
        ("bedrock", {}, "model"),
        (
            "openai",
            {"model": "m", "endpoint": "https://x/v1", "prompt_template": "Summarise please"},
            r"\{conversation_history\}",
        ),
        ("bedrock", {"model": MODEL_ID, "prompt_template": "{previous_summary} only"}, r"\{conversation_history\}"),
        ("bedrock", {"model": MODEL_ID, "prompt_template": "{conversation_history} {oops"}, "prompt template"),
    ],
)
def test_build_summarizer_rejects_bad_configuration(kind: str, overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        build_summarizer(kind, **{**NONE, **overrides})


def test_build_extractive_ignores_the_prompt_template() -> None:
    summarizer = build_summarizer("extractive", **{**NONE, "prompt_template": "no placeholder here"})
    assert isinstance(summarizer, ExtractiveSummarizer)
