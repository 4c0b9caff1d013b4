"""Long-term memory search: lexical analysis, and the hybrid (BM25F + dense) index over saved memories."""

from agent_memory.search.index import SearchIndex
from agent_memory.search.lexical import tokenize
from agent_memory.search.types import DEFAULT_CONFIG, Doc, SearchConfig

__all__ = ["DEFAULT_CONFIG", "Doc", "SearchConfig", "SearchIndex", "tokenize"]
