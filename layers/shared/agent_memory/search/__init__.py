"""Long-term memory search: lexical analysis, and the hybrid (BM25F + dense) index over saved memories."""

from agent_memory.search.index import DEFAULT_CONFIG, Doc, SearchConfig, SearchIndex
from agent_memory.search.lexical import tokenize

__all__ = ["DEFAULT_CONFIG", "Doc", "SearchConfig", "SearchIndex", "tokenize"]
