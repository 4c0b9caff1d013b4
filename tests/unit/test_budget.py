"""The model-call time budget: its arithmetic, how it shrinks to a Lambda context's deadline, and that every
function that calls a model fits its budget inside the template's Timeout."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_memory.errors import ModelFailure
from agent_memory.providers.embedders import EmbedderError, OpenAICompatibleEmbedder
from agent_memory.providers.ports import SummarizerError
from agent_memory.providers.summarizers import OpenAICompatibleSummarizer
from agent_memory.runtime import budget
from agent_memory.runtime.budget import BACKGROUND, REQUEST, ModelBudget
from local.template import function_environment, load_template, parameter_defaults

ROOT = Path(__file__).resolve().parents[2]
API_GATEWAY_LIMIT_S = 30  # an HTTP API integration answers 503 after 30 s, whatever the function does


class Context:
    """What handlers read of the Lambda context: the time left."""

    def __init__(self, remaining_s: float) -> None:
        self.deadline = time.monotonic() + remaining_s

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


@pytest.mark.parametrize("use", [REQUEST, BACKGROUND])
def test_attempts_timeouts_and_backoff_add_up_to_the_budget(use: ModelBudget) -> None:
    assert use.attempts >= 2  # a transient 5xx or a dropped connection gets a second chance
    spent = use.attempts * use.attempt_timeout_s + use.backoff_total_s
    assert spent == pytest.approx(use.total_s)
    assert use.plan(None) == (use.attempts, use.attempt_timeout_s)


def test_the_numbers_the_readme_gives() -> None:
    assert (REQUEST.total_s, REQUEST.attempts, REQUEST.attempt_timeout_s) == (20.0, 2, 9.5)
    assert (BACKGROUND.total_s, BACKGROUND.attempts, BACKGROUND.attempt_timeout_s) == (60.0, 2, 29.5)


def test_a_plan_shrinks_to_the_time_left() -> None:
    assert REQUEST.plan(30.0) == (2, 9.5)
    assert REQUEST.plan(12.0) == (2, 5.5)  # both attempts, shorter: (12 - 1 s of backoff) / 2
    attempts, timeout = REQUEST.plan(2.5) or (0, 0.0)
    assert attempts == 1 and timeout == pytest.approx(2.5)  # no room for a pause and a second try
    assert REQUEST.plan(0.5) is None


def test_a_budget_that_leaves_no_time_per_attempt_is_refused() -> None:
    with pytest.raises(ValueError):
        ModelBudget("tiny", total_s=2.0, attempts=3)


def _function_uses(template: dict[str, Any]) -> dict[str, str]:
    """Each function that calls a model (a summarizer or an embedder in its environment), by use."""
    names = {**parameter_defaults(template), **{k: k for k in template["Resources"]}}
    uses: dict[str, str] = {}
    for logical_id, resource in template["Resources"].items():
        if resource["Type"] != "AWS::Serverless::Function":
            continue
        env = function_environment(template, logical_id, names)
        if "SUMMARIZER" not in env and "EMBEDDER" not in env:
            continue
        events = {e["Type"] for e in resource["Properties"].get("Events", {}).values()}
        uses[logical_id] = "request" if "HttpApi" in events else "background"
    return uses


def test_every_function_fits_its_model_budget_in_its_timeout() -> None:
    template = load_template()
    default_timeout = template["Globals"]["Function"]["Timeout"]
    uses = _function_uses(template)
    assert set(uses.values()) == {"request", "background"} and len(uses) >= 6
    for logical_id, use in uses.items():
        props = template["Resources"][logical_id]["Properties"]
        timeout = props.get("Timeout", default_timeout)
        code = (ROOT / props["CodeUri"] / "app.py").read_text()
        if use == "request":
            assert timeout < API_GATEWAY_LIMIT_S, logical_id
            assert REQUEST.total_s + budget.ANSWER_RESERVE_S <= timeout, logical_id
            assert "lambda_entry(app)" in code, logical_id  # which opens the REQUEST budget per request
        else:
            assert BACKGROUND.total_s + budget.SWEEP_RESERVE_S <= timeout, logical_id
            assert "budget.invocation(context, budget.BACKGROUND" in code, logical_id  # auto-save adds reserve_s


def test_outside_an_invocation_the_request_budget_applies_without_a_deadline() -> None:
    assert budget.current() is REQUEST
    assert budget.deadline() - time.monotonic() == pytest.approx(REQUEST.total_s, abs=0.5)


def test_an_invocation_sets_the_use_and_ends_before_the_functions_timeout() -> None:
    with budget.invocation(Context(300), BACKGROUND):
        assert budget.current() is BACKGROUND
        assert budget.deadline() - time.monotonic() == pytest.approx(BACKGROUND.total_s, abs=0.5)
    with budget.invocation(Context(12), REQUEST):
        # 12 s left, 5 s kept to answer: 7 s for the model, not 20
        assert budget.deadline() - time.monotonic() == pytest.approx(12 - budget.ANSWER_RESERVE_S, abs=0.5)
    assert budget.current() is REQUEST
    with budget.invocation(object(), BACKGROUND):  # no usable context: the budget alone
        assert budget.deadline() - time.monotonic() == pytest.approx(BACKGROUND.total_s, abs=0.5)


def _completion(request: httpx.Request) -> httpx.Response:
    return httpx.Response(200, json={"choices": [{"message": {"content": "a summary"}}]})


def test_each_attempt_is_sent_with_the_budgets_timeout() -> None:
    timeouts: list[dict[str, float]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        timeouts.append(request.extensions["timeout"])
        return _completion(request)

    summarizer = OpenAICompatibleSummarizer("https://llm.example/v1", "m", transport=httpx.MockTransport(handler))
    with budget.invocation(Context(29), REQUEST):
        assert summarizer.summarize([], None) == "a summary"
    with budget.invocation(Context(300), BACKGROUND):
        summarizer.summarize([], None)
    assert timeouts[0]["read"] == pytest.approx(9.5, abs=0.1) and timeouts[0]["connect"] == budget.CONNECT_TIMEOUT_S
    assert timeouts[1]["read"] == pytest.approx(29.5, abs=0.1)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """A fake ``time.monotonic`` (and ``time.sleep`` advancing it): model calls take time without waiting."""
    now = [1000.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    monkeypatch.setattr(time, "sleep", lambda s: now.__setitem__(0, now[0] + s))
    return now


def test_a_call_never_passes_the_invocations_deadline(clock: list[float]) -> None:
    timeouts: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        timeouts.append(request.extensions["timeout"]["read"])
        clock[0] += timeouts[-1]  # a timeout takes all its time
        raise httpx.ReadTimeout("slow", request=request)

    summarizer = OpenAICompatibleSummarizer("https://llm.example/v1", "m", transport=httpx.MockTransport(handler))
    with budget.invocation(Context(8), REQUEST), pytest.raises(SummarizerError) as caught:
        summarizer.summarize([], None)
    # 8 s left, 5 kept to answer: one attempt of 3 s; the second would start past the deadline
    assert timeouts == [pytest.approx(3.0, abs=0.01)]
    assert (caught.value.status, caught.value.code) == (504, "model_timeout")


def test_a_quick_failure_is_retried_within_what_is_left(clock: list[float]) -> None:
    timeouts: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        timeouts.append(request.extensions["timeout"]["read"])
        return httpx.Response(503) if len(timeouts) == 1 else _completion(request)

    summarizer = OpenAICompatibleSummarizer("https://llm.example/v1", "m", transport=httpx.MockTransport(handler))
    with budget.invocation(Context(10), REQUEST):
        assert summarizer.summarize([], None) == "a summary"
    assert timeouts == [pytest.approx(5.0, abs=0.01), pytest.approx(4.0, abs=0.01)]  # 5 s left, 1 s pause


def test_no_time_left_is_a_timeout_without_a_request() -> None:
    calls: list[httpx.Request] = []
    embedder = OpenAICompatibleEmbedder(
        "https://emb.example/v1", "m", transport=httpx.MockTransport(lambda r: calls.append(r) or _completion(r))
    )
    with budget.invocation(Context(5.5), REQUEST), pytest.raises(EmbedderError) as caught:
        embedder.embed(["hello"])
    assert calls == [] and caught.value.kind == "timeout" and caught.value.status == 504


def test_one_budget_covers_every_batch_of_an_embedding_call(clock: list[float]) -> None:
    timeouts: list[float] = []

    def handler(request: httpx.Request) -> httpx.Response:
        timeouts.append(request.extensions["timeout"]["read"])
        clock[0] += 8.0  # each batch takes 8 s
        return httpx.Response(200, json={"data": [{"index": 0, "embedding": [1.0, 0.0]}]})

    embedder = OpenAICompatibleEmbedder("https://emb.example/v1", "m", transport=httpx.MockTransport(handler))
    embedder.batch_size = 1
    with pytest.raises(EmbedderError) as caught:
        embedder.embed(["a", "b", "c", "d"])
    # 20 s for the call: 9.5 s, 9.5 s, then the 4 s left; the fourth batch has none
    assert timeouts == [9.5, 9.5, 4.0]
    assert caught.value.kind == "timeout"


@pytest.mark.parametrize(
    ("answer", "kind", "status", "code"),
    [
        (httpx.ReadTimeout, "timeout", 504, "model_timeout"),
        (httpx.ConnectTimeout, "timeout", 504, "model_timeout"),
        (httpx.ConnectError, "error", 502, "model_error"),
        (500, "error", 502, "model_error"),
        (504, "timeout", 504, "model_timeout"),
        (429, "busy", 503, "service_unavailable"),
        (401, "error", 502, "model_error"),
    ],
)
def test_failures_are_classified_and_name_the_provider_never_the_key(
    answer: Any, kind: str, status: int, code: str
) -> None:
    key = "sk-very-secret-0123"

    def handler(request: httpx.Request) -> httpx.Response:
        if isinstance(answer, int):
            return httpx.Response(answer, json={"error": {"message": f"Incorrect API key provided: {key}"}})
        raise answer("boom", request=request)

    fast = ModelBudget("test", total_s=4.0, attempts=2, backoff_s=0.0)
    summarizer = OpenAICompatibleSummarizer(
        "https://llm.example/v1", "m", lambda: key, transport=httpx.MockTransport(handler), budget=fast
    )
    with pytest.raises(ModelFailure) as caught:
        summarizer.summarize([], None)
    error = caught.value
    assert (error.kind, error.status, error.code) == (kind, status, code)
    assert "summarizer openai (llm.example)" in error.message
    assert key not in error.message and key not in str(error.to_body())


def _bedrock_errors() -> list[tuple[Exception, str, int]]:
    from botocore.exceptions import ClientError, EndpointConnectionError, ReadTimeoutError

    def client_error(code: str, status: int) -> ClientError:
        return ClientError(
            {"Error": {"Code": code, "Message": "m"}, "ResponseMetadata": {"HTTPStatusCode": status}}, "X"
        )

    return [
        (ReadTimeoutError(endpoint_url="https://bedrock-runtime"), "timeout", 504),
        (client_error("ModelTimeoutException", 408), "timeout", 504),
        (client_error("ThrottlingException", 429), "busy", 503),
        (client_error("ServiceUnavailableException", 503), "busy", 503),
        (client_error("AccessDeniedException", 403), "error", 502),
        (client_error("ValidationException", 400), "error", 502),
        (EndpointConnectionError(endpoint_url="https://bedrock-runtime"), "error", 502),
    ]


@pytest.mark.parametrize(("exc", "kind", "status"), _bedrock_errors())
def test_bedrock_failures_are_classified_for_both_providers(exc: Exception, kind: str, status: int) -> None:
    from agent_memory.providers.embedders import BedrockTitanEmbedder
    from agent_memory.providers.summarizers import BedrockSummarizer

    class Failing:
        def converse(self, **kwargs: Any) -> Any:
            raise exc

        def invoke_model(self, **kwargs: Any) -> Any:
            raise exc

    calls: list[Any] = [
        lambda: BedrockSummarizer("m", client_factory=Failing).summarize([], None),
        lambda: BedrockTitanEmbedder(client_factory=Failing).embed(["x"]),
    ]
    for call in calls:
        with pytest.raises(ModelFailure) as caught:
            call()
        assert (caught.value.kind, caught.value.status) == (kind, status)
        assert "bedrock" in caught.value.message


def test_bedrock_clients_fit_the_time_left() -> None:
    from agent_memory.runtime import aws

    full = aws.model_client("bedrock-runtime", BACKGROUND)
    assert full is not None
    assert (full.meta.config.read_timeout, full.meta.config.retries["total_max_attempts"]) == (29, 2)
    with budget.invocation(Context(9), REQUEST):
        short = aws.model_client("bedrock-runtime")  # 4 s for the model: two attempts of 1.5 s (1 s, in whole seconds)
        assert (
            short is not None
            and short.meta.config.read_timeout == 1
            and short.meta.config.retries["total_max_attempts"] == 2
        )
    with budget.invocation(Context(5.5), REQUEST):
        assert aws.model_client("bedrock-runtime") is None


def test_a_scaled_reserve_is_its_cap_a_tenth_of_a_short_invocation_and_never_below_the_answer_reserve() -> None:
    assert budget.scaled_reserve(Context(600), 30.0) == 30.0  # the cap: the function given its full time
    assert budget.scaled_reserve(Context(120), 30.0) == pytest.approx(12.0, abs=0.05)  # a local emulation's context
    assert budget.scaled_reserve(Context(10), 30.0) == budget.ANSWER_RESERVE_S
    assert budget.scaled_reserve(object(), 30.0) == budget.ANSWER_RESERVE_S  # no context: no deadline to scale
    assert budget.remaining_s(object()) is None and budget.remaining_s(Context(2)) == pytest.approx(2.0, abs=0.05)
