"""Fact extractors behind the ``FactExtractor`` port: the offline patterns (``policy/facts.py``), and a model
(the configured OpenAI-compatible or Bedrock summarizer) asked for JSON facts, falling back to the patterns.

A model extractor makes one call per save, within the use's model budget (``budget.py``: the request's or auto-save's),
for the first ``MAX_FACT_MODEL_PROMPT_CHARS`` of the new texts (each clipped to ``MAX_FACT_MODEL_TEXT_CHARS``); texts
beyond that, and every text of a call that fails (timeout, throttle, an answer that is not the JSON asked for), get the
offline extractor's facts instead, and the failure is logged: a save never fails for its profile.
"""

from __future__ import annotations

import json
import logging
import re
from typing import Any, Protocol

from agent_memory.policy.facts import extract_facts
from agent_memory.policy.profile import CATEGORIES, clean_facts
from agent_memory.providers.prompt import clip

from ..limits import MAX_FACT_MODEL_PROMPT_CHARS, MAX_FACT_MODEL_TEXT_CHARS

logger = logging.getLogger(__name__)

FACTS_MAX_TOKENS = 2048

FACTS_PROMPT = (
    "You build a user's profile from things the user said to an AI assistant. For each numbered message below, "
    "list the stable facts the user states about themself: their name, preferences and likes, dislikes, "
    "allergies, diet, places they live, lived or visited, people and pets in their life (with names and "
    "relations), and their work or studies. Skip plans, moods, questions, one-off events, and anything said "
    "about someone else only. Write each fact as a short phrase without a subject, for example "
    '"Name: Ana", "Allergic to peanuts", "Vegetarian", "Likes hiking", "Dislikes sushi", "Lives in Porto", '
    '"Visited Japan", "Sister: Ana", "Works as a nurse".\n'
    f"Categories: {', '.join(CATEGORIES)}.\n"
    "Answer with JSON only, no prose, in this shape (leave out messages without facts):\n"
    '{{"messages": [{{"index": 0, "facts": [{{"category": "allergy", "text": "Allergic to peanuts"}}]}}]}}\n\n'
    "Messages:\n{messages}\n"
)


class Completer(Protocol):
    """What a model summarizer offers the extractor: one prompt in, the model's text out (or ``ModelFailure``)."""

    name: str

    def complete(self, prompt: str, max_tokens: int | None = None) -> str: ...


class ExtractiveFactExtractor:
    """Offline and deterministic: the patterns of ``policy/facts.py``."""

    name = "extractive"

    def extract(self, texts: list[str]) -> list[list[dict[str, str]]]:
        return [clean_facts(extract_facts(text)) for text in texts]


_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


def parse_model_facts(answer: str, count: int) -> list[list[dict[str, str]]]:
    """The facts per message of a model's answer (see ``FACTS_PROMPT``); ValueError when it is not that JSON.

    Tolerates a fenced or prefixed answer (the outermost ``{…}`` is read); an index out of range, or facts that
    are not well formed, are ignored (``clean_facts``)."""
    match = _JSON_OBJECT.search(answer)
    if match is None:
        raise ValueError("the model's answer holds no JSON object")
    data: Any = json.loads(match.group(0))
    messages = data.get("messages") if isinstance(data, dict) else None
    if not isinstance(messages, list):
        raise ValueError("the model's answer has no messages list")
    out: list[list[dict[str, str]]] = [[] for _ in range(count)]
    for item in messages:
        if not isinstance(item, dict):
            continue
        index = item.get("index")
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < count:
            continue
        out[index] = clean_facts([*out[index], *clean_facts(item.get("facts"))])
    return out


class ModelFactExtractor:
    """A model's facts (``FACTS_PROMPT``), the offline extractor's where the model is not asked or fails."""

    def __init__(self, model: Completer, fallback: ExtractiveFactExtractor | None = None) -> None:
        self.model = model
        self.name = f"model:{model.name}"
        self.fallback = fallback or ExtractiveFactExtractor()

    def extract(self, texts: list[str]) -> list[list[dict[str, str]]]:
        asked: list[int] = []
        used = 0
        for i, text in enumerate(texts):
            size = min(len(text), MAX_FACT_MODEL_TEXT_CHARS)
            if used + size > MAX_FACT_MODEL_PROMPT_CHARS and asked:
                break
            asked.append(i)
            used += size
        out = self.fallback.extract(texts[len(asked) :])
        if len(asked) < len(texts):
            logger.info("facts of %d texts past the model's share extracted offline", len(texts) - len(asked))
        try:
            found = self._ask([texts[i] for i in asked])
        except Exception as exc:  # a model failure (ModelFailure), or an answer that is not the JSON asked for
            logger.warning(
                "fact extraction by the model failed; the offline extractor's facts are stored",
                extra={"extractor": self.name, "error": f"{type(exc).__name__}: {exc}"[:300]},
            )
            found = self.fallback.extract([texts[i] for i in asked])
        return [*found, *out]

    def _ask(self, texts: list[str]) -> list[list[dict[str, str]]]:
        if not texts:
            return []
        numbered = "\n".join(
            f"[{i}] {' '.join(clip(t, MAX_FACT_MODEL_TEXT_CHARS).split())}" for i, t in enumerate(texts)
        )
        answer = self.model.complete(FACTS_PROMPT.format(messages=numbered), max_tokens=FACTS_MAX_TOKENS)
        return parse_model_facts(answer, len(texts))
