"""Fact extractors: a model (OpenAI-compatible over a mocked httpx transport, Bedrock through a Stubber) asked for
JSON facts, falling back to the offline patterns whenever the model fails, and wired by the composition root."""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest
from botocore.stub import Stubber

from agent_memory.composition import Services
from agent_memory.config import Settings
from agent_memory.edge.requests import MemoryText
from agent_memory.limits import MAX_FACT_MODEL_PROMPT_CHARS
from agent_memory.providers.facts import (
    FACTS_MAX_TOKENS,
    ExtractiveFactExtractor,
    ModelFactExtractor,
    parse_model_facts,
)
from agent_memory.providers.summarizers import BedrockSummarizer, OpenAICompatibleSummarizer
from agent_memory.runtime.budget import ModelBudget
from agent_memory.search import Doc, SearchIndex
from agent_memory.service.memories import MemoryService
from agent_memory.stores.inmemory import InMemoryClaimStore, InMemoryMemoryStore, InMemorySessionStore
from agent_memory.stores.ports import MemoryRecord
from tests.unit.bedrock_stub import converse_response


def answer(by_index: dict[int, list[dict[str, str]]], fenced: bool = False) -> str:
    text = json.dumps({"messages": [{"index": i, "facts": f} for i, f in by_index.items()]})
    return f"Here you go:\n```json\n{text}\n```" if fenced else text


def completion(content: str) -> dict[str, Any]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}


def openai(handler: Any, attempts: int = 2) -> OpenAICompatibleSummarizer:
    budget = ModelBudget("test", total_s=2.0 * attempts, attempts=attempts, backoff_s=0.0)
    return OpenAICompatibleSummarizer(
        "https://llm.example.com/v1", "gpt-test", transport=httpx.MockTransport(handler), budget=budget
    )


def test_the_model_is_asked_once_with_numbered_texts_and_its_json_facts_are_used() -> None:
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        facts = {
            0: [{"category": "allergy", "text": "Allergic to peanuts"}],
            2: [{"category": "hobby", "text": "Knits"}],
        }
        return httpx.Response(200, json=completion(answer(facts, fenced=True)))

    extractor = ModelFactExtractor(openai(handler))
    got = extractor.extract(["I can't have peanuts", "ok", "I knit {a lot}"])
    assert got == [
        [{"category": "allergy", "text": "Allergic to peanuts"}],
        [],
        [{"category": "other", "text": "Knits"}],
    ]
    (body,) = seen
    prompt = body["messages"][0]["content"]
    assert "[0] I can't have peanuts\n[1] ok\n[2] I knit {a lot}" in prompt and '"category"' in prompt
    assert body["max_tokens"] == FACTS_MAX_TOKENS and extractor.name == "model:openai"


@pytest.mark.parametrize(
    "reply",
    [
        httpx.Response(500, text="boom"),
        httpx.Response(429, text="slow down"),
        httpx.Response(200, json=completion("I found: the user likes peanuts")),
        httpx.Response(200, json=completion('{"facts": []}')),
        httpx.Response(200, json={"choices": []}),
    ],
    ids=["server-error", "throttled", "prose", "wrong-shape", "no-choices"],
)
def test_a_failing_model_falls_back_to_the_offline_facts_and_logs(
    reply: httpx.Response, caplog: pytest.LogCaptureFixture
) -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        return reply

    with caplog.at_level(logging.WARNING, logger="agent_memory.providers.facts"):
        got = ModelFactExtractor(openai(handler)).extract(["I'm allergic to cats", "hello"])
    assert got == [[{"category": "allergy", "text": "Allergic to cats"}], []]
    assert calls and any("offline extractor" in r.message for r in caplog.records)


def test_a_model_that_times_out_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("too slow", request=request)

    with caplog.at_level(logging.WARNING, logger="agent_memory.providers.facts"):
        got = ModelFactExtractor(openai(handler)).extract(["I live in Porto"])
    assert got == [[{"category": "place", "text": "Lives in Porto"}]]
    assert any("ReadTimeout" in str(getattr(r, "error", "")) for r in caplog.records)


def test_texts_past_the_models_share_are_extracted_offline() -> None:
    asked: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        prompt = json.loads(request.content)["messages"][0]["content"]
        asked.append(prompt)
        return httpx.Response(200, json=completion(answer({0: [{"category": "other", "text": "from the model"}]})))

    # each ~MAX_FACT_MODEL_PROMPT_CHARS chars, clipped to MAX_FACT_MODEL_TEXT_CHARS per text
    long = "x " * (MAX_FACT_MODEL_PROMPT_CHARS // 2 - 10)
    texts = [long] * 20 + ["I am vegan"]
    got = ModelFactExtractor(openai(handler)).extract(texts)
    assert len(asked) == 1 and len(got) == 21
    assert got[0] == [{"category": "other", "text": "from the model"}]
    assert got[-1] == [{"category": "diet", "text": "Vegan"}]  # not sent: the offline extractor's


def test_parse_model_facts_ignores_what_is_not_well_formed() -> None:
    text = json.dumps(
        {
            "messages": [
                {"index": 0, "facts": [{"category": "name", "text": "Name: Ana"}, {"text": ""}, "x"]},
                {"index": 5, "facts": [{"category": "name", "text": "out of range"}]},
                {"index": True, "facts": [{"category": "name", "text": "a bool is no index"}]},
                {"index": 1, "facts": "nope"},
                {
                    "index": 0,
                    "facts": [{"category": "name", "text": "Name: Ana"}, {"category": "diet", "text": "Vegan"}],
                },
            ]
        }
    )
    assert parse_model_facts(text, 2) == [
        [{"category": "name", "text": "Name: Ana"}, {"category": "diet", "text": "Vegan"}],
        [],
    ]
    for bad in ("no json here", "[1, 2]", '{"messages": 3}', "{not json}"):
        with pytest.raises(ValueError):
            parse_model_facts(bad, 1)


def test_bedrock_answers_json_facts(bedrock: tuple[Any, Stubber]) -> None:
    client, stubber = bedrock
    stubber.add_response("converse", converse_response(answer({0: [{"category": "work", "text": "Works as a pilot"}]})))
    extractor = ModelFactExtractor(BedrockSummarizer("model-x", client_factory=lambda: client))
    assert extractor.extract(["I fly planes for a living"]) == [[{"category": "work", "text": "Works as a pilot"}]]


def test_bedrock_throttled_falls_back(bedrock: tuple[Any, Stubber]) -> None:
    client, stubber = bedrock
    stubber.add_client_error("converse", service_error_code="ThrottlingException", http_status_code=429)
    extractor = ModelFactExtractor(BedrockSummarizer("model-x", client_factory=lambda: client))
    assert extractor.extract(["I'm a nurse"]) == [[{"category": "work", "text": "Works as nurse"}]]


def build(records: list[MemoryRecord]) -> SearchIndex:
    return SearchIndex.build([Doc(r.id, f"{r.author}: {r.text}", r.context) for r in records], None)


def test_a_save_stores_the_models_facts_and_a_model_failure_does_not_fail_it() -> None:
    replies = iter(
        [
            httpx.Response(200, json=completion(answer({0: [{"category": "preference", "text": "Likes jazz"}]}))),
            httpx.Response(503, text="down"),
            httpx.Response(503, text="down"),
        ]
    )
    memories = InMemoryMemoryStore(build, SearchIndex.combine)
    service = MemoryService(
        InMemorySessionStore(),
        memories,
        InMemoryClaimStore(),
        lambda index, q, k, cut: index.search(q, k, min_score=cut),
        facts=ModelFactExtractor(openai(lambda request: next(replies))),
    )
    assert service.add_texts(app_name="a", user_id="u", memories=[MemoryText(text="jazz is my thing")])["saved"] == 1
    assert service.add_texts(app_name="a", user_id="u", memories=[MemoryText(text="I hate rain")])["saved"] == 1
    assert [f["text"] for f in service.profile("a", "u")["facts"]] == ["Dislikes rain", "Likes jazz"]


def test_the_composition_root_wires_the_configured_summarizer_as_the_extractor() -> None:
    offline = Services(Settings(embedder="none"), "memory")
    assert isinstance(offline.fact_extractor, ExtractiveFactExtractor)
    model = Services(
        Settings(embedder="none", summarizer="openai", summarizer_model="m", summarizer_endpoint="https://x/v1"),
        "memory",
    )
    facts = model.memories._facts  # the configured extractor, built on first use (a search never builds it)
    assert "fact_extractor" not in model._built
    assert facts.name == "model:openai"
    extractor = model.fact_extractor
    assert isinstance(extractor, ModelFactExtractor) and extractor.model is model.summarizer
