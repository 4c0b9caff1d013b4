"""Summarizers behind the ``Summarizer`` port: extractive (offline), OpenAI-compatible HTTP, and Bedrock.

Module import stays light: httpx and botocore are imported only when a model summarizer is used.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from agent_memory.providers.http import JsonEndpoint
from agent_memory.providers.ports import DEFAULT_PROMPT_TEMPLATE, Summarizer, SummarizerError, Turn
from agent_memory.providers.prompt import build_prompt, validate_prompt_template
from agent_memory.runtime.budget import ModelBudget
from agent_memory.runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)

from ..limits import MAX_SUMMARY_SENTENCE_CHARS

if TYPE_CHECKING:
    import httpx

__all__ = [
    "API_KEY_MAX_AGE_S",
    "SUMMARIZER_KINDS",
    "BedrockSummarizer",
    "ExtractiveSummarizer",
    "OpenAICompatibleSummarizer",
    "api_key_from_secrets_manager",
    "api_key_from_ssm",
    "build_summarizer",
    "clear_api_key_cache",
]

SUMMARIZER_KINDS = ("extractive", "openai", "bedrock")

# --------------------------------------------------------------------------------------------------------------
# Extractive
# --------------------------------------------------------------------------------------------------------------

_I = re.IGNORECASE
_FACT = re.compile(
    r"\bmy name(?:'s| is)\b|\bcall me\b|\bi am\b|\bi'm\b|\bi live\b|\bi(?:'ve| have) lived\b|\ballerg|"
    r"\bintoleran|\bi (?:really )?(?:prefer|like|love|hate|dislike|enjoy|work|study|own|have|was born|moved)\b|"
    r"\bi (?:don't|do not|can't|cannot|never) (?:eat|drink|like|fly|drive)\b|\bmy \w+(?: \w+){0,3} (?:is|are|was)\b|"
    r"\bi'm (?:from|based)\b|\bi am (?:from|based)\b|\bbirthday\b",
    _I,
)
_DECISION = re.compile(
    r"\bdecided?\b|\bdecision\b|\blet's\b|\blet us\b|\bwe'll\b|\bwe will\b|\bi'll\b|\bagreed?\b|\bconfirm(?:ed|s)?\b|"
    r"\bbook(?:ed|ing)?\b|\breserved?\b|\bscheduled?\b|\bsettled on\b|\bgoing with\b|\bchose\b|\bchosen\b",
    _I,
)
_REQUEST = re.compile(
    r"\?|\bplease\b|\bcan you\b|\bcould you\b|\bwould you\b|\bremind me\b|\bi need\b|\bi want\b|\bi'd like\b|"
    r"\bdon't forget\b|\bmake sure\b|\bto-?do\b",
    _I,
)
_MONTHS = "january|february|march|april|june|july|august|september|october|november|december"
_MONTH_ABBR = "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec"
_DATE = re.compile(
    rf"\b\d{{4}}-\d{{2}}-\d{{2}}\b|\b\d{{1,2}}/\d{{1,2}}(?:/\d{{2,4}})?\b|\b(?:{_MONTHS})\b|"
    rf"\b(?:{_MONTH_ABBR})\.? ?\d{{1,2}}\b|\b\d{{1,2}} (?:{_MONTH_ABBR})\b|"
    r"\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)s?\b|\btomorrow\b|\btonight\b|\btoday\b|"
    r"\byesterday\b|\bnext (?:week|month|year)\b|\b\d{1,2}:\d{2}\b|\b\d{1,2} ?(?:am|pm)\b",
    _I,
)
_MAY = re.compile(r"\bMay\b(?! I\b)")  # the month, not "May I ..."
_NUMBER = re.compile(r"\d")
_WORD = re.compile(r"[A-Za-z][\w'-]*")
_NOT_NAMES = frozenset({"I", "I'm", "I'll", "I've", "I'd"})
_CHIT_CHAT_WORDS = """
    ok okay k kk alright allright right sure yes yeah yep yup no nope nah fine good great cool nice awesome perfect
    excellent wonderful lovely thanks thank thx ty cheers you your you're youre welcome np problem anytime hello hi
    hey hiya howdy morning afternoon evening night goodnight bye goodbye later see soon got it understood noted
    sounds lol haha hmm hm oh ah wow indeed totally absolutely of course much very so a lot glad happy to help
    helping pleasure me too and the for that is it's its all set done thing i i'm am doing well pretty not bad
"""
_CHIT_CHAT = frozenset(_CHIT_CHAT_WORDS.split())
_BOILERPLATE = re.compile(
    r"how (?:can|may) i (?:help|assist)|(?:is there )?anything else|let me know if|happy to help|"
    r"glad (?:i could|to) help|(?:can|may) i help",
    _I,
)
# what may surround a boilerplate phrase in a sentence that says nothing else ("Hello! How can I help you today?")
_FILLER_WORDS = "today with need more else anything i can do further questions question other any have if want"
_BOILERPLATE_FILLER = _CHIT_CHAT | frozenset(_FILLER_WORDS.split())
_SENTENCE_END = re.compile(r"[.!?…]+[\"')\]]*\s+")
_ABBREVIATIONS = frozenset({"mr.", "mrs.", "ms.", "dr.", "st.", "e.g.", "i.e.", "vs.", "etc.", "approx.", "jr."})
_AUTHOR_PREFIX = re.compile(r"^[^\s:][^:\n]{0,63}:\s+")
_TOOLS_LINE = re.compile(r"^\s*Tools used:\s*(.*)$", _I)
_TOOL_ITEM = re.compile(r"^([\w.:/@-]{1,128})(?:\s*×\s*(\d+))?$")

_ROLE_WEIGHT = {"user": 2.0, "assistant": 1.0, "system": 1.0, "tool": 0.5}
_PREVIOUS_WEIGHT = 3.0  # previous-summary sentences: user weight x 1.5 ...
_PREVIOUS_BONUS = 2.0  # ... plus a bonus, so rolled-up facts outrank new filler


def _split_sentences(text: str) -> list[str]:
    sentences: list[str] = []
    for line in text.replace("\r", "\n").split("\n"):
        line = " ".join(line.split())
        start = 0
        for match in _SENTENCE_END.finditer(line + " "):
            end = match.end()
            chunk = line[start:end].strip()
            last_word = chunk.rsplit(" ", 1)[-1]
            if last_word.lower() in _ABBREVIATIONS or re.fullmatch(r"[A-Z]\.", last_word):  # "Dr.", "J. Smith"
                continue
            if chunk:
                sentences.append(chunk)
            start = end
        rest = line[start:].strip()
        if rest:
            sentences.append(rest)
    return sentences


def _is_chit_chat(sentence: str) -> bool:
    """Greetings, thanks and acknowledgements, and service boilerplate that carries nothing else."""
    if _NUMBER.search(sentence):
        return False
    vocabulary = _CHIT_CHAT
    if _BOILERPLATE.search(sentence):
        sentence, vocabulary = _BOILERPLATE.sub(" ", sentence), _BOILERPLATE_FILLER
    return all(w.lower().strip("'") in vocabulary for w in _WORD.findall(sentence))


def _score(sentence: str) -> float:
    """Role-independent worth of a sentence: 0 for chit-chat, else a base plus one weight per feature."""
    normalised = sentence.replace("’", "'").replace("‘", "'")
    if _is_chit_chat(normalised):
        return 0.0
    score = 0.5
    if _FACT.search(normalised):
        score += 5.0
    if _DECISION.search(normalised):
        score += 3.0
    if _REQUEST.search(normalised):
        score += 3.0
    if _DATE.search(normalised) or _MAY.search(normalised):
        score += 2.0
    if _NUMBER.search(normalised):
        score += 1.0
    words = _WORD.findall(normalised)
    if any(w[0].isupper() and w not in _NOT_NAMES for w in words[1:]):
        score += 1.0
    return score


def _merge_tools_line(text: str, counts: dict[str, int]) -> bool:
    """Add the counts of a ``Tools used: a ×2, b ×1`` line to ``counts``; False if ``text`` is not such a line."""
    match = _TOOLS_LINE.match(text)
    if not match:
        return False
    parsed: list[tuple[str, int]] = []
    for item in match.group(1).strip().rstrip(".").split(","):
        tool = _TOOL_ITEM.match(item.strip())
        if not tool:
            return False
        parsed.append((tool.group(1), int(tool.group(2) or 0)))
    for name, count in parsed:
        counts[name] = counts.get(name, 0) + count
    return True


def _dedup_key(line: str) -> str:
    return " ".join(line.lower().split()).rstrip(".!?… ")


@dataclass
class _Candidate:
    index: int
    line: str
    score: float


class ExtractiveSummarizer:
    """Offline, deterministic summary: the highest-scoring sentences, in chronological order, within a budget.

    User facts outrank decisions and open requests, which outrank numbers, dates and names; chit-chat is dropped.
    Sentences of the previous summary are candidates too, ranked high, so facts survive repeated roll-ups; the
    ``Tools used: name ×count`` line is carried over and added to.
    """

    name = "extractive"

    def __init__(self, max_chars: int = 2000) -> None:
        if max_chars < 1:
            raise ValueError("max_chars must be at least 1")
        self.max_chars = max_chars

    def summarize(self, turns: list[Turn], previous_summary: str | None) -> str:
        tool_counts: dict[str, int] = {}
        candidates: dict[str, _Candidate] = {}
        index = 0

        def add(line: str, score: float) -> None:
            nonlocal index
            if score <= 0:
                return
            if len(line) > MAX_SUMMARY_SENTENCE_CHARS:
                line = line[: MAX_SUMMARY_SENTENCE_CHARS - 1] + "…"
            key = _dedup_key(line)
            if not key:
                return
            seen = candidates.get(key)
            if seen is None:
                candidates[key] = _Candidate(index, line, score)
                index += 1
            elif score > seen.score:
                seen.score = score

        for raw_line in (previous_summary or "").splitlines():
            if _merge_tools_line(raw_line, tool_counts):
                continue
            for sentence in _split_sentences(raw_line):
                if _merge_tools_line(sentence, tool_counts):
                    continue
                body = _AUTHOR_PREFIX.sub("", sentence, count=1)
                raw = _score(body)
                add(sentence, raw * _PREVIOUS_WEIGHT + _PREVIOUS_BONUS if raw > 0 else 0.0)

        for turn in turns:
            weight = _ROLE_WEIGHT.get(turn.role, 1.0)
            author = turn.author or turn.role or "unknown"
            for sentence in _split_sentences(turn.text):
                add(f"{author}: {sentence}", _score(sentence) * weight)
            for call in turn.tool_calls:
                tool_counts[call.name] = tool_counts.get(call.name, 0) + 1

        tools_line = ""
        if tool_counts:
            used = ", ".join(f"{name} ×{count}" if count else name for name, count in tool_counts.items())
            tools_line = f"Tools used: {used}"
            if len(tools_line) > self.max_chars // 2:
                tools_line = tools_line[: max(self.max_chars // 2 - 1, 0)] + "…"

        budget = self.max_chars - (len(tools_line) + 1 if tools_line else 0)
        chosen: list[_Candidate] = []
        for cand in sorted(candidates.values(), key=lambda c: (-c.score, c.index)):
            cost = len(cand.line) + (1 if chosen else 0)
            if cost <= budget:
                chosen.append(cand)
                budget -= cost
        lines = [c.line for c in sorted(chosen, key=lambda c: c.index)]
        if tools_line:
            lines.append(tools_line)
        return "\n".join(lines)[: self.max_chars]


# --------------------------------------------------------------------------------------------------------------
# OpenAI-compatible HTTP
# --------------------------------------------------------------------------------------------------------------


class OpenAICompatibleSummarizer:
    """Chat completions over HTTP: OpenAI, or any compatible server (vLLM, Ollama, LiteLLM, ...)."""

    name = "openai"

    def __init__(
        self,
        base_url: str,
        model: str,
        api_key_provider: Callable[[], str | None] | None = None,
        prompt_template: str = DEFAULT_PROMPT_TEMPLATE,
        transport: httpx.BaseTransport | None = None,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        budget: ModelBudget | None = None,
    ) -> None:
        if not base_url:
            raise ValueError("base_url is required")
        if not model:
            raise ValueError("model is required")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_provider = api_key_provider
        self.prompt_template = validate_prompt_template(prompt_template)
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._endpoint = JsonEndpoint(
            self.url,
            what="summarizer",
            error=SummarizerError,
            api_key_provider=api_key_provider,
            budget=budget,  # None: the budget of the use being served (budget.current())
            transport=transport,
        )

    def close(self) -> None:
        self._endpoint.close()

    def summarize(self, turns: list[Turn], previous_summary: str | None) -> str:
        return self.complete(build_prompt(self.prompt_template, turns, previous_summary))

    def complete(self, prompt: str, max_tokens: int | None = None) -> str:
        """The model's answer to ``prompt`` (one user message), within the budget; SummarizerError otherwise."""
        body = {
            "model": self.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": self.temperature,
            "max_tokens": max_tokens or self.max_tokens,
        }
        return self._content(self._endpoint.post(body, self._endpoint.headers()))

    @staticmethod
    def _content(response: httpx.Response) -> str:
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            detail = response.text[:200]
            raise SummarizerError(f"summarizer response has no choices[0].message.content: {detail}") from exc
        if not isinstance(content, str) or not content.strip():
            raise SummarizerError("summarizer returned empty content")
        return content.strip()


# --------------------------------------------------------------------------------------------------------------
# Bedrock
# --------------------------------------------------------------------------------------------------------------


class BedrockSummarizer:
    """Amazon Bedrock through the Converse API (any model that supports it)."""

    name = "bedrock"

    def __init__(
        self,
        model_id: str,
        client_factory: Callable[[], Any] | None = None,
        prompt_template: str = DEFAULT_PROMPT_TEMPLATE,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        budget: ModelBudget | None = None,
    ) -> None:
        if not model_id:
            raise ValueError("model_id is required")
        self.model_id = model_id
        self.client_factory = client_factory  # None: a client whose timeouts and retries fit the budget
        self.budget = budget
        self.prompt_template = validate_prompt_template(prompt_template)
        self.max_tokens = max_tokens
        self.temperature = temperature

    def summarize(self, turns: list[Turn], previous_summary: str | None) -> str:
        return self.complete(build_prompt(self.prompt_template, turns, previous_summary))

    def complete(self, prompt: str, max_tokens: int | None = None) -> str:
        """The model's answer to ``prompt`` (one user message), within the budget; SummarizerError otherwise."""
        from botocore.exceptions import BotoCoreError, ClientError

        from agent_memory.runtime import aws

        try:
            client = self.client_factory() if self.client_factory else aws.model_client("bedrock-runtime", self.budget)
            if client is None:
                message = f"summarizer bedrock ({self.model_id}): no time left in the budget"
                raise SummarizerError(message, kind="timeout")
            response = client.converse(
                modelId=self.model_id,
                messages=[{"role": "user", "content": [{"text": prompt}]}],
                inferenceConfig={"maxTokens": max_tokens or self.max_tokens, "temperature": self.temperature},
            )
        except (ClientError, BotoCoreError) as exc:
            kind, reason = aws.model_failure(exc)
            raise SummarizerError(f"summarizer bedrock ({self.model_id}) failed: {reason}", kind=kind) from exc
        try:
            blocks = response["output"]["message"]["content"]
            text = "".join(b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str))
        except (KeyError, TypeError) as exc:
            raise SummarizerError("bedrock response has no output.message.content") from exc
        if not text.strip():
            raise SummarizerError("bedrock returned no text")
        return text.strip()


# --------------------------------------------------------------------------------------------------------------
# API keys (SSM Parameter Store / Secrets Manager), read through Powertools parameters and cached for a while
# --------------------------------------------------------------------------------------------------------------

# How long a fetched API key is used before it is read again: a rotated key is in use within this long, and a
# busy function reads the key once per container every five minutes, not once per model call.
API_KEY_MAX_AGE_S = 300


def _key_from_value(value: str) -> str:
    """The secret itself, or its ``api_key`` field when the secret is a JSON object."""
    value = value.strip()
    if value.startswith("{"):
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict) and isinstance(parsed.get("api_key"), str):
            return str(parsed["api_key"]).strip()
    return value


# One Powertools provider (and so one cache) per boto3 client: the providers use the project's clients (short
# timeouts, standard retries; reset_clients() in tests gives new ones), not Powertools' own default clients.
@functools.cache
def _ssm_provider(client: Any) -> Any:
    from aws_lambda_powertools.utilities.parameters import SSMProvider

    return SSMProvider(boto3_client=client)


@functools.cache
def _secrets_provider(client: Any) -> Any:
    from aws_lambda_powertools.utilities.parameters import SecretsProvider

    return SecretsProvider(boto3_client=client)


def _ssm_value(parameter_name: str) -> str:
    from agent_memory.runtime import aws

    value = _ssm_provider(aws.client("ssm")).get(parameter_name, decrypt=True, max_age=API_KEY_MAX_AGE_S)
    return _key_from_value(str(value))


def _secret_value(secret_id: str) -> str:
    from agent_memory.runtime import aws

    secret = _secrets_provider(aws.client("secretsmanager")).get(secret_id, max_age=API_KEY_MAX_AGE_S)
    if not isinstance(secret, str):
        raise ValueError(f"secret {secret_id!r} has no SecretString")
    return _key_from_value(secret)


def clear_api_key_cache() -> None:
    """Forget fetched API keys (tests; a rotated key is read again after ``API_KEY_MAX_AGE_S`` anyway)."""
    for provider in (_ssm_provider, _secrets_provider):
        provider.cache_clear()


def api_key_from_ssm(parameter_name: str) -> Callable[[], str]:
    """A provider reading a (SecureString) SSM parameter on call, cached per container for ``API_KEY_MAX_AGE_S``.

    A failed read is not cached: the next call tries again."""
    return functools.partial(_ssm_value, parameter_name)


def api_key_from_secrets_manager(secret_id: str) -> Callable[[], str]:
    """A provider reading a Secrets Manager secret (plain, or JSON with ``api_key``) on call, cached per container
    for ``API_KEY_MAX_AGE_S``; a failed read is not cached."""
    return functools.partial(_secret_value, secret_id)


# --------------------------------------------------------------------------------------------------------------
# Factory
# --------------------------------------------------------------------------------------------------------------


def build_summarizer(
    kind: str,
    *,
    model: str | None,
    endpoint: str | None,
    api_key_parameter: str | None,
    api_key_secret: str | None,
    prompt_template: str | None,
    max_chars: int = 2000,
) -> Summarizer:
    """The summarizer for ``kind`` (extractive | openai | bedrock). Empty strings count as unset.

    The API key of an OpenAI-compatible endpoint comes only from SSM (``api_key_parameter``) or Secrets Manager
    (``api_key_secret``), never from a plain environment variable; neither means no Authorization header.
    """
    normalised = (kind or "").strip().lower()
    template = prompt_template if prompt_template and prompt_template.strip() else DEFAULT_PROMPT_TEMPLATE
    if normalised == "extractive":
        return ExtractiveSummarizer(max_chars=max_chars)
    if normalised == "openai":
        if not endpoint:
            raise ValueError("summarizer 'openai' needs an endpoint (base URL such as https://api.openai.com/v1)")
        if not model:
            raise ValueError("summarizer 'openai' needs a model name")
        if api_key_parameter and api_key_secret:
            raise ValueError("give the summarizer API key as an SSM parameter or a Secrets Manager secret, not both")
        provider: Callable[[], str | None] | None = None
        if api_key_parameter:
            provider = api_key_from_ssm(api_key_parameter)
        elif api_key_secret:
            provider = api_key_from_secrets_manager(api_key_secret)
        return OpenAICompatibleSummarizer(endpoint, model, provider, prompt_template=validate_prompt_template(template))
    if normalised == "bedrock":
        if not model:
            raise ValueError("summarizer 'bedrock' needs a model id (e.g. anthropic.claude-3-haiku-20240307-v1:0)")
        return BedrockSummarizer(model, prompt_template=validate_prompt_template(template))
    raise ValueError(f"unknown summarizer kind {kind!r}; expected one of {', '.join(SUMMARIZER_KINDS)}")
