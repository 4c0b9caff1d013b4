"""Items as stored and as read: event bodies (compressed or not), session records, state, memos, hidden ranges.

Reads never fail on what is stored (whatever anyone holding the table wrote): JSON is decoded by
``jsonio.load_stored`` (any depth, any number); a state key whose value does not read is left out with a warning;
an event whose body does not read (or whose S3 payload is gone) reads as a marker event with ``error_code``
``unreadable_event``; times outside what a datetime holds are clamped into it.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import zlib
from typing import Any

from ...runtime.aws import error_code
from ...runtime.lazyclass import dataclass  # processed on first instance (lazyclass.py)
from ...wire.jsonio import Unreadable, load_stored, readable_timestamp, unreadable_event
from ..ports import BlobStore, SeqRange, SessionRecord
from .keys import (
    CLAIM_TIME_ATTR,
    COMPRESSED_BODY_ATTR,
    MEMO_ATTR,
    PAYLOAD_MISSING_META,
    STATE_ATTR_PREFIX,
    TIME_MAX_ATTR,
    TIME_SKEW_ATTR,
    N,
    S,
    number_attr,
    string_attr,
    whole_attr,
)
from .sizes import item_size

logger = logging.getLogger(__name__)

# An event's body is stored zlib-compressed, binary, in place of its JSON text ``body``, when that takes fewer
# write units (DynamoDB bills an item by its size rounded up to 1 KB; ``by_seq`` projects ALL, so its entry shrinks
# too): a compaction's ~2.5 KB summary, a tool result. An item that is one unit as it stands (a chat turn) is not
# compressed, and a body under ``_COMPRESS_MIN_BYTES`` is not even sized.
_COMPRESS_MIN_BYTES = 512
_KB = 1024
# A compressed body inflates to at most this (more reads as an unreadable event): no stored item inflates past the
# memory of a function. An inline body is under the offload threshold, 350 KB by default.
_INFLATE_MAX_BYTES = 16 * 1024 * 1024
# The preset dictionary of every ``bz`` (zlib's FDICT: its header names the dictionary by its Adler-32): the JSON
# an ADK event and a compaction event are made of, not their text, most likely strings last. It saves ~150 bytes an
# event, the skeleton's share; a summary of 2,000 characters needs it to fit one unit. NEVER edit it: stored items
# inflate with it; another dictionary is a new constant, chosen on read by the Adler-32 in the header.
ZDICT = (
    b'"usage_metadata":{"prompt_token_count":,"candidates_token_count":,"total_token_count":},"grounding_metadata":'
    b'"partial":false,"turn_complete":true,"branch":"","long_running_tool_ids":[],"error_code":"error_message":'
    b'"artifact_delta":{},"transfer_to_agent":"escalate":"requested_auth_configs":{},"skip_summarization":'
    b'"function_call":{"id":"","name":"","args":{}}},"function_response":{"id":"","name":"","response":{}}},'
    b'"content":{"role":"user","parts":[{"text":"'
    b'"custom_metadata":{"agent_memory:compaction":{"start_seq":,"end_seq":,"event_count":,"trigger":"interval",'
    b'"summarizer":"extractive"}}}'
    b'{"id":"","invocation_id":"compaction-","author":"system","timestamp":,"actions":{"state_delta":{},'
    b'"compaction":{"start_timestamp":,"end_timestamp":,"compacted_content":{"role":"model","parts":[{"text":"user: '
)


@dataclass(frozen=True)
class TimeOrder:
    """How far a session's event timestamps stray below their order by seq: ``top`` the greatest timestamp stored,
    ``skew`` the most any event's timestamp was below the greatest one before it (0 while they only grew). So an
    event whose timestamp is below ``T - skew`` has only events before it (by seq) that are below ``T``: a
    newest-first read of ``by_seq`` finds every event at or after ``T`` and stops there (``reads.seqs_since``)."""

    top: float
    skew: float

    def after(self, timestamps: list[float]) -> TimeOrder:
        top, skew = self.top, self.skew
        for ts in timestamps:
            skew = max(skew, top - ts)
            top = max(top, ts)
        return TimeOrder(top, skew)

    def attributes(self) -> dict[str, Any]:
        return {TIME_MAX_ATTR: N(self.top), TIME_SKEW_ATTR: N(self.skew)}

    @staticmethod
    def of(item: dict[str, Any]) -> TimeOrder | None:
        top = number_attr(item, TIME_MAX_ATTR)
        return None if top is None else TimeOrder(top, number_attr(item, TIME_SKEW_ATTR) or 0.0)


# --- event bodies -------------------------------------------------------------------------------------------------


def with_body(item: dict[str, Any], text: str) -> dict[str, Any]:
    """``item`` (every other attribute set) with the event's JSON ``text``: as ``body``, or zlib-compressed as
    ``bz`` when that makes the item (and its ``by_seq`` entry) fewer 1 KB write units."""
    data = text.encode()
    if len(data) >= _COMPRESS_MIN_BYTES:
        rest = item_size(item)
        plain = -(-(rest + 4 + len(data)) // _KB)  # "body"
        if plain > 1:
            deflater = zlib.compressobj(zdict=ZDICT)
            packed = deflater.compress(data) + deflater.flush()
            if -(-(rest + 2 + len(packed)) // _KB) < plain:  # "bz"
                item[COMPRESSED_BODY_ATTR] = {"B": packed}
                return item
    item["body"] = S(text)
    return item


def with_payload(item: dict[str, Any], blob_key: str, body: dict[str, Any]) -> dict[str, Any]:
    """``item`` naming its event's body offloaded to S3 under ``blob_key``, with a stub of the body: enough to
    answer with a marker event should the payload ever be missing."""
    item["blob"] = S(blob_key)
    stub = {k: body[k] for k in ("author", "invocation_id") if k in body}
    item["stub"] = S(json.dumps(stub, separators=(",", ":"), ensure_ascii=False))
    return item


def inflate(value: Any) -> bytes:
    """A ``bz`` value as stored (bytes from boto3; base64 text in a Lambda stream record) inflated; Unreadable
    when it does not inflate (or inflates past ``_INFLATE_MAX_BYTES``)."""
    try:
        packed = base64.b64decode(value, validate=True) if isinstance(value, str) else bytes(value)
        inflater = zlib.decompressobj(zdict=ZDICT)  # (a stream without FDICT inflates as well)
        data = inflater.decompress(packed, _INFLATE_MAX_BYTES)
    except (binascii.Error, ValueError, TypeError, zlib.error) as exc:
        raise Unreadable(f"its compressed body does not inflate ({exc})") from exc
    if inflater.unconsumed_tail:
        raise Unreadable(f"its compressed body inflates past {_INFLATE_MAX_BYTES} bytes")
    if not inflater.eof:
        raise Unreadable("its compressed body is truncated")
    return data


def event_ts(item: dict[str, Any]) -> float | None:
    """An event item's timestamp."""
    return number_attr(item, "t")


def read_event(blobs: BlobStore, item: dict[str, Any], *, verbatim: bool = False) -> dict[str, Any]:
    """An event item (as a Query or a stream record holds it) as event JSON, its body read from S3 if offloaded.

    Never fails on what is stored (see the module): an unreadable body or a missing payload gives a marker
    event; the time is one a datetime holds. S3 faults (throttling, 5xx) still raise.
    """
    try:
        if "blob" in item:
            data: str | bytes = blobs.get(item["blob"]["S"])
        elif COMPRESSED_BODY_ATTR in item:
            data = inflate(item[COMPRESSED_BODY_ATTR]["B"])
        else:
            data = item["body"]["S"]
        body = load_stored(data, verbatim=verbatim)
        if not isinstance(body, dict):
            raise Unreadable(f"a JSON {type(body).__name__}, not an object")
    except Unreadable as exc:
        return _unreadable(item, f"its body is not a JSON object ({exc})", exc)
    except (KeyError, TypeError) as exc:  # no body attribute, or no payload (BlobMissing is a KeyError)
        if "blob" in item:
            return _unreadable(item, "its payload is missing from storage", exc, payload_missing=True)
        return _unreadable(item, "its item holds no body", exc)
    except Exception as exc:
        if error_code(exc) not in ("NoSuchKey", "404"):
            raise
        return _unreadable(item, "its payload is missing from storage", exc, payload_missing=True)
    body["seq"] = whole_attr(item, "seq")
    if not isinstance(body.get("id"), str):
        body["id"] = unreadable_marker(item, "")["id"]
    body["timestamp"] = readable_timestamp(body.get("timestamp"), readable_timestamp(event_ts(item)))
    return body


def _unreadable(
    item: dict[str, Any], reason: str, exc: BaseException, *, payload_missing: bool = False
) -> dict[str, Any]:
    marker = unreadable_marker(item, reason[:200], payload_missing=payload_missing)
    logger.warning(
        "stored event does not read; answered as a marker event",
        extra={"pk": item.get("PK", {}).get("S"), "event_id": marker["id"], "error": str(exc)[:200]},
    )
    return marker


def unreadable_marker(item: dict[str, Any], reason: str, *, payload_missing: bool = False) -> dict[str, Any]:
    """What an event item that does not read reads as (``jsonio.unreadable_event``, with the author and invocation
    of the stub an offloaded event keeps). A missing offloaded payload is also marked in ``custom_metadata``
    (``PAYLOAD_MISSING_META``)."""
    sk = item.get("SK", {}).get("S", "")
    try:
        stub = json.loads(item["stub"]["S"]) if "stub" in item else {}
    except (KeyError, TypeError, ValueError):
        stub = {}
    event_id = sk[2:] if sk.startswith("V#") else sk
    marker = unreadable_event(
        event_id, whole_attr(item, "seq"), event_ts(item), reason, stub=stub if isinstance(stub, dict) else {}
    )
    if payload_missing:
        marker["custom_metadata"] = {PAYLOAD_MISSING_META: True}
    return marker


# --- sessions and state --------------------------------------------------------------------------------------------


def state_from_item(item: dict[str, Any]) -> dict[str, Any]:
    """The ``st:`` attributes of an item as state; a value that does not read is left out (logged), never fatal.

    Values come back verbatim (``RawJSON`` past ``jsonio.MAX_DEPTH``): state only ever goes into responses.
    """
    state: dict[str, Any] = {}
    for name, value in item.items():
        if not name.startswith(STATE_ATTR_PREFIX):
            continue
        try:
            text = value["S"]
            state[name[len(STATE_ATTR_PREFIX) :]] = load_stored(text, verbatim=True)
        except (KeyError, TypeError, Unreadable) as exc:
            logger.warning(
                "stored state value does not read; left out",
                extra={"pk": item.get("PK", {}).get("S"), "attribute": name, "error": str(exc)[:200]},
            )
    return state


def session_state(item: dict[str, Any], state_item: dict[str, Any] | None) -> dict[str, Any]:
    """The session's state: its state item's. A state item of another incarnation (an earlier session of the id
    whose purge has not reached it yet) is not the session's."""
    if state_item is None or string_attr(state_item, "inc") != string_attr(item, "inc"):
        return {}
    return state_from_item(state_item)


def record_from_item(
    item: dict[str, Any], *, with_state: bool = True, state_item: dict[str, Any] | None = None
) -> SessionRecord:
    """A session item (and its state item) as a record; identifiers come from the keys, so a damaged item still
    reads."""
    _, app_name, user_id = item["PK"]["S"].split("#", 2)
    create_time = readable_timestamp(number_attr(item, "create_time"))
    return SessionRecord(
        app_name=app_name,
        user_id=user_id,
        session_id=item["SK"]["S"][2:],
        create_time=float(create_time),
        update_time=float(readable_timestamp(number_attr(item, "update_time"), create_time)),
        version=whole_attr(item, "version"),
        last_seq=whole_attr(item, "last_seq"),
        state=session_state(item, state_item) if with_state else {},
        summary_event_id=item["cmp_id"].get("S") if "cmp_id" in item else None,
        summary_end_seq=whole_attr(item, "cmp_end"),
        incarnation=string_attr(item, "inc"),
        memo=_memo_from_item(item) if with_state else {},
        deletions=whole_attr(item, "dels"),
        hidden=tuple(hidden_ranges(item)),
        claimed_at=number_attr(item, CLAIM_TIME_ATTR),
    )


def _memo_from_item(item: dict[str, Any]) -> dict[str, Any]:
    """The session's memo (``{}`` when none was written); one that does not read is left out (logged)."""
    if MEMO_ATTR not in item:
        return {}
    try:
        memo = load_stored(item[MEMO_ATTR]["S"], verbatim=True)
    except (KeyError, TypeError, Unreadable) as exc:
        logger.warning(
            "stored memo does not read; left out", extra={"pk": item.get("PK", {}).get("S"), "error": str(exc)[:200]}
        )
        return {}
    return memo if isinstance(memo, dict) else {}


# --- hidden seq ranges (deletions committed, not purged yet) -------------------------------------------------------


def hidden_ranges(item: dict[str, Any]) -> list[SeqRange]:
    """The seq ranges a session item's ``hide`` holds (deletions committed, not purged yet)."""
    try:
        ranges = json.loads(item["hide"]["S"])
        return [(int(lo), int(hi)) for lo, hi in ranges]
    except (KeyError, TypeError, ValueError):
        return []


def hide_json(ranges: list[SeqRange]) -> str:
    """``hide``'s value for ``ranges``: always written alike, so that a conditional write can name it."""
    return json.dumps(ranges, separators=(",", ":"))


def visible_segments(low: int, high: int, hidden: list[SeqRange]) -> list[SeqRange]:
    """``low``..``high`` without the ``hidden`` ranges, as ascending inclusive segments."""
    segments: list[SeqRange] = []
    start = low
    for lo, hi in sorted(hidden):
        if hi < start or lo > high:
            continue
        if lo > start:
            segments.append((start, lo - 1))
        start = max(start, hi + 1)
        if start > high:
            break
    if start <= high:
        segments.append((start, high))
    return segments
