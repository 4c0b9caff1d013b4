"""Every bound of the service, in one place: what a client may send, what a response may carry, and the caps the
services and stores work within.

The edge (``edge/params.py``, ``edge/bounds.py``, ``edge/requests.py``) declares request fields with the client
bounds, so they are validated before a handler runs and documented in the OpenAPI schema; the services and the
stores import the same names. Plain numbers only: this module imports nothing, so any layer may use it and a cold
start pays nothing for it.
"""

from __future__ import annotations

from typing import Final

# --- what a client may send ------------------------------------------------------------------------------------
MAX_BODY_BYTES: Final = 6_000_000  # Lambda's request payload limit: a larger body never reaches a deployed function
MAX_BATCH: Final = 100  # events in one append, memories in one save
MAX_STATE_BYTES: Final = 300_000  # a session's own state and each state delta (fits the 400 KB session item)
# Keys of one state delta (or a create's state): each is a clause of one DynamoDB update expression, which DynamoDB
# bounds at 4 KB (about 250 keys; moto's parser gave out at 156); well inside it, with the append's own clauses.
MAX_STATE_KEYS: Final = 100
MAX_METADATA_BYTES: Final = 100_000  # custom_metadata, a chat message's metadata, a memory's metadata, a policy
MAX_TOOL_JSON_BYTES: Final = 2_000_000  # a function call's args, a function response's response
MAX_MEMO_BYTES: Final = 65_536  # a session's memo (PUT …/memo, exports)
MAX_QUERY_CHARS: Final = 10_000  # a memory search query
MAX_MEMORY_TEXT: Final = 20_000  # one directly added memory text
MAX_PARAMETER_CHARS: Final = 4_096  # any other query parameter or header
MAX_NEXT_TOKEN: Final = 1024  # an opaque page token
MAX_TOP_K: Final = 100  # memories one search returns
MAX_PAGE: Final = 100  # sessions one listing page returns
MAX_EVENT_PAGE: Final = 1000  # events one read returns
MAX_CONTEXT_MEMORIES: Final = 50  # recalled memories folded into one context
MAX_SYSTEM_MESSAGES: Final = 20  # base system messages of one context
MAX_SYSTEM_CHARS: Final = 200_000  # all base system messages of one context together

# JSON values: what DynamoDB can hold, and nesting every consumer stays well inside the recursion limit for.
MAX_DOCUMENT_DEPTH: Final = 64  # a whole request body; bounded fields inside it allow MAX_VALUE_DEPTH
MAX_VALUE_DEPTH: Final = 32  # state, metadata, tool arguments (DynamoDB's own limit for nested attributes)
MAX_INT_DIGITS: Final = 38  # DynamoDB numbers carry 38 significant digits
MAX_NUMBER: Final = 9.9999999999999999999999999999999999999e125  # DynamoDB's largest magnitude
MIN_NUMBER: Final = 1e-130  # DynamoDB's smallest non-zero magnitude

# Times a client may send, in seconds since the epoch: both DynamoDB numbers and Python datetimes hold them.
MIN_TIMESTAMP: Final = 0.0
MAX_TIMESTAMP: Final = 253_402_300_799.0  # 9999-12-31T23:59:59Z, the last second a datetime holds

# --- what is read back -----------------------------------------------------------------------------------------
# Stored JSON decodes to plain values down to this depth (deeper subtrees stay text): deeper than anything the
# write path accepts, shallow enough for copy.deepcopy, the C encoder and pydantic.
MAX_STORED_JSON_DEPTH: Final = 64
# What a datetime holds (0001-01-01T00:00:00Z to 9999-12-31T23:59:59Z): stored times are clamped into it.
MIN_DATETIME_SECONDS: Final = -62135596800.0
MAX_DATETIME_SECONDS: Final = 253402300799.0

# --- long-term memory and the profile ---------------------------------------------------------------------------
MAX_FACT_SOURCE_CHARS: Final = 4000  # what a long memory is read of for facts (stated early; the rest is cost)
MAX_FACT_OBJECT_WORDS: Final = 8  # words of one extracted fact's object
MAX_FACTS_PER_TEXT: Final = 12
MAX_FACT_CHARS: Final = 200  # one profile fact
MAX_FACTS_PER_MEMORY: Final = 20
MAX_FACT_MODEL_TEXT_CHARS: Final = 2000  # each text a fact model is given
MAX_FACT_MODEL_PROMPT_CHARS: Final = 24000  # all texts of one fact model call
MAX_SUMMARY_SENTENCE_CHARS: Final = 400  # one sentence the offline summarizer keeps

# --- time budgets and the sweep ---------------------------------------------------------------------------------
MIN_ATTEMPT_S: Final = 1.0  # the shortest attempt a model call is given
MIN_SESSIONS_PER_WORKER: Final = 50  # the sweep fans out only past this many due sessions a worker
MAX_SWEEP_PAYLOAD_BYTES: Final = 250_000  # an asynchronous Lambda invocation's payload (256 KB, with room)

# --- stores ------------------------------------------------------------------------------------------------------
MAX_TRANSACT_ITEMS: Final = 100  # DynamoDB's actions in one TransactWriteItems
MAX_TRANSACT_BYTES: Final = 3_500_000  # under DynamoDB's 4 MB a transaction, with room for the request's framing
MAX_SEQ: Final = 2**62  # a session's seq counter: far past any session, inside every store's integer
# A counter a client may set (an imported version, last_seq, seq): 2^50, so that the appends after it (2^53 - 2^50 of
# them) keep it within 2^53, the integers every store and JSON client holds exactly (DynamoDB numbers are read back
# through floats, JavaScript has nothing larger).
MAX_CLIENT_COUNTER: Final = 2**50
MAX_SEGMENTS: Final = 8  # small append-only segments of a user's memory on S3 before a save merges them
# What the memory caches of a warm process may hold (stores/cache.py): this share of the function's memory, and at
# least this many bytes.
MAX_MEMORY_CACHE_SHARE: Final = 0.35
MIN_MEMORY_CACHE_BYTES: Final = 32 * 1024 * 1024
MAX_PARTS: Final = 8  # parts of a user's memory in the embedded store before a save merges them
MAX_TERM_FREQUENCY: Final = 65_535  # a word's count in one memory, as the index stores it (uint16)
