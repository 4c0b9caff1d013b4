"""Fact extractors behind the ``FactExtractor`` port: the offline patterns (``policy/facts.py``), and a model
(the configured OpenAI-compatible or Bedrock summarizer) asked for JSON facts, falling back to the patterns."""

from __future__ import annotations

from agent_memory.policy.facts import extract_facts
from agent_memory.policy.profile import clean_facts


class ExtractiveFactExtractor:
    """Offline and deterministic: the patterns of ``policy/facts.py``."""

    name = "extractive"

    def extract(self, texts: list[str]) -> list[list[dict[str, str]]]:
        return [clean_facts(extract_facts(text)) for text in texts]
