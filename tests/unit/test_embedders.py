"""Embedders: MiniLM (the real int8 model), OpenAI-compatible (httpx mock transport), Bedrock Titan (Stubber)."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import boto3
import httpx
import numpy as np
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber
from moto import mock_aws

from agent_memory.providers.embedders import (
    BedrockTitanEmbedder,
    EmbedderError,
    MiniLMEmbedder,
    OpenAICompatibleEmbedder,
    build_embedder,
)
from agent_memory.runtime.budget import ModelBudget

ROOT = Path(__file__).resolve().parents[2]

# --------------------------------------------------------------------------------------------------------------
# MiniLM
# --------------------------------------------------------------------------------------------------------------

FAST = ModelBudget("test", total_s=15.0, attempts=3, backoff_s=0.0)  # 3 attempts of 5 s, no pauses


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def test_minilm_shape_dtype_and_unit_norm(minilm: MiniLMEmbedder) -> None:
    texts = ["I went to the support group yesterday.", "My car broke down.", "ok"]
    vectors = minilm.embed(texts)
    assert vectors.shape == (3, 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert minilm.embed([]).shape == (0, 384)


def test_minilm_similar_sentences_score_higher_than_unrelated(minilm: MiniLMEmbedder) -> None:
    dog, puppy, taxes = minilm.embed(["A dog is playing in the park.", "A puppy runs on the grass.", "File taxes."])
    assert float(dog @ puppy) > float(dog @ taxes) + 0.3


def test_minilm_is_padding_invariant(minilm: MiniLMEmbedder) -> None:
    short = "I like cats."
    long = "This much longer sentence about something else entirely has many more tokens than the short one. " * 3
    alone = minilm.embed([short])[0]
    batched = minilm.embed([long, short, "x"])
    np.testing.assert_allclose(batched[1], alone, atol=1e-4)
    # order within a batch (texts are sorted by length internally) does not change which row is which
    np.testing.assert_allclose(minilm.embed([short, long])[1], batched[0], atol=1e-4)


def test_minilm_truncates_long_texts(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed(["word " * 2000])
    assert vectors.shape == (1, 384) and np.isfinite(vectors).all()


def test_embedders_module_import_is_light() -> None:
    code = (
        "import sys; sys.path.insert(0, 'layers/shared'); import agent_memory.providers.embedders; "
        "heavy = [m for m in ('onnxruntime', 'tokenizers', 'httpx', 'botocore', 'numpy') if m in sys.modules]; "
        "print(heavy)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# --------------------------------------------------------------------------------------------------------------
# OpenAI-compatible
# --------------------------------------------------------------------------------------------------------------


def _openai_response(request: httpx.Request, scale: float = 3.0) -> httpx.Response:
    body = json.loads(request.content)
    data = [{"index": i, "embedding": [scale * (i + 1), 0.0, scale]} for i in range(len(body["input"]))]
    return httpx.Response(200, json={"object": "list", "data": list(reversed(data)), "model": body["model"]})


def test_openai_request_shape_and_normalised_vectors() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return _openai_response(request)

    embedder = OpenAICompatibleEmbedder(
        "https://llm.example/v1/", "text-embedding-3-small", lambda: "sk-test", transport=httpx.MockTransport(handler)
    )
    vectors = embedder.embed(["first", "second"])
    (request,) = seen
    assert request.method == "POST"
    assert str(request.url) == "https://llm.example/v1/embeddings"
    assert request.headers["Authorization"] == "Bearer sk-test"
    assert json.loads(request.content) == {"model": "text-embedding-3-small", "input": ["first", "second"]}
    assert vectors.shape == (2, 3) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)
    # rows follow the response's "index", not its order
    np.testing.assert_allclose(vectors[0], np.array([1.0, 0.0, 1.0]) / np.sqrt(2), atol=1e-6)
    assert embedder.dim == 3 and embedder.name == "openai:text-embedding-3-small"


def test_openai_retries_on_500_then_succeeds() -> None:
    statuses = [500, 429]

    def handler(request: httpx.Request) -> httpx.Response:
        if statuses:
            return httpx.Response(statuses.pop(0), text="busy")
        return _openai_response(request)

    embedder = OpenAICompatibleEmbedder("https://x/v1", "m", transport=httpx.MockTransport(handler), budget=FAST)
    assert embedder.embed(["a"]).shape == (1, 3)
    assert statuses == []


def test_openai_retries_timeouts_then_gives_up() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        raise httpx.ReadTimeout("slow", request=request)

    embedder = OpenAICompatibleEmbedder("https://x/v1", "m", transport=httpx.MockTransport(handler), budget=FAST)
    with pytest.raises(EmbedderError, match="3 attempt"):
        embedder.embed(["a"])
    assert calls == 3


def test_openai_error_on_400_without_retry() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(400, json={"error": {"message": "bad model"}})

    embedder = OpenAICompatibleEmbedder("https://x/v1", "m", transport=httpx.MockTransport(handler), budget=FAST)
    with pytest.raises(EmbedderError, match="HTTP 400"):
        embedder.embed(["a"])
    assert calls == 1


@pytest.mark.parametrize(
    ("payload", "texts"),
    [
        ({"data": [{"index": 0, "embedding": [1.0, 2.0]}]}, ["a", "b"]),  # one vector for two texts
        ({"nope": 1}, ["a"]),
        ({"data": [{"index": 0, "embedding": "abc"}]}, ["a"]),  # base64 encoding_format
    ],
)
def test_openai_bad_responses_are_embedder_errors(payload: dict[str, Any], texts: list[str]) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=payload))
    embedder = OpenAICompatibleEmbedder("https://x/v1", "m", transport=transport, budget=FAST)
    with pytest.raises(EmbedderError):
        embedder.embed(texts)


def test_openai_dimension_mismatch_is_an_error() -> None:
    embedder = OpenAICompatibleEmbedder("https://x/v1", "m", transport=httpx.MockTransport(_openai_response), dim=8)
    with pytest.raises(EmbedderError, match="expected 8"):
        embedder.embed(["a"])


# --------------------------------------------------------------------------------------------------------------
# Bedrock Titan
# --------------------------------------------------------------------------------------------------------------


def _titan_body(vector: list[float]) -> StreamingBody:
    data = json.dumps({"embedding": vector, "inputTextTokenCount": 3}).encode()
    return StreamingBody(io.BytesIO(data), len(data))


def test_bedrock_titan_invoke_model_per_text() -> None:
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    embedder = BedrockTitanEmbedder(dim=256, client_factory=lambda: client)
    with Stubber(client) as stub:
        for text, vector in (("hello", [3.0] + [0.0] * 255), ("world", [0.0, 4.0] + [0.0] * 254)):
            stub.add_response(
                "invoke_model",
                {"body": _titan_body(vector), "contentType": "application/json"},
                expected_params={
                    "modelId": "amazon.titan-embed-text-v2:0",
                    "body": json.dumps({"inputText": text, "dimensions": 256, "normalize": True}),
                    "contentType": "application/json",
                    "accept": "application/json",
                },
            )
        vectors = embedder.embed(["hello", "world"])
        stub.assert_no_pending_responses()
    assert vectors.shape == (2, 256)
    assert vectors[0, 0] == pytest.approx(1.0) and vectors[1, 1] == pytest.approx(1.0)


def test_bedrock_client_error_is_embedder_error() -> None:
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    embedder = BedrockTitanEmbedder(client_factory=lambda: client)
    with Stubber(client) as stub:
        stub.add_client_error("invoke_model", service_error_code="ThrottlingException", http_status_code=429)
        with pytest.raises(EmbedderError, match="ThrottlingException"):
            embedder.embed(["hello"])


def test_bedrock_wrong_dimension_is_embedder_error() -> None:
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    embedder = BedrockTitanEmbedder(dim=512, client_factory=lambda: client)
    with Stubber(client) as stub:
        stub.add_response("invoke_model", {"body": _titan_body([1.0] * 256), "contentType": "application/json"})
        with pytest.raises(EmbedderError, match="512"):
            embedder.embed(["hello"])


def test_bedrock_rejects_unsupported_dimensions() -> None:
    with pytest.raises(ValueError):
        BedrockTitanEmbedder(dim=384)


# --------------------------------------------------------------------------------------------------------------
# Factory
# --------------------------------------------------------------------------------------------------------------


def test_build_embedder_kinds() -> None:
    assert build_embedder("none") is None
    assert build_embedder("") is None
    assert isinstance(build_embedder("minilm"), MiniLMEmbedder)
    bedrock = build_embedder("bedrock", dim=512)
    assert isinstance(bedrock, BedrockTitanEmbedder) and bedrock.dim == 512
    assert bedrock.model_id == "amazon.titan-embed-text-v2:0"
    openai = build_embedder("openai", model="m", endpoint="https://x/v1")
    assert isinstance(openai, OpenAICompatibleEmbedder) and openai.api_key_provider is None
    with pytest.raises(ValueError, match="endpoint"):
        build_embedder("openai", model="m")
    with pytest.raises(ValueError, match="not both"):
        build_embedder("openai", model="m", endpoint="https://x/v1", api_key_parameter="/p", api_key_secret="s")
    with pytest.raises(ValueError, match="unknown embedder"):
        build_embedder("word2vec")


def test_build_embedder_openai_key_from_ssm() -> None:
    with mock_aws():
        boto3.client("ssm").put_parameter(Name="/agent-memory/embed-key", Value="sk-ssm", Type="SecureString")
        embedder = build_embedder(
            "openai", model="m", endpoint="https://x/v1", api_key_parameter="/agent-memory/embed-key"
        )
        assert isinstance(embedder, OpenAICompatibleEmbedder)
        assert embedder.api_key_provider is not None
        assert embedder.api_key_provider() == "sk-ssm"
