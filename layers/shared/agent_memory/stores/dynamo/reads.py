"""Reading a session's events: pages oldest first, the newest N, by time, and tails read newest first.

The local secondary index ``by_seq`` orders a session's events by sequence number; a seq whose put never landed
stays a hole, so reads never assume consecutive seqs. A read by time (``after_timestamp``) uses ``by_seq`` too,
newest first, down to where the session's time order (``tmax``, ``tskew``) says no older event can qualify.
"""

from __future__ import annotations

from typing import Any

from ...errors import ServiceUnavailable
from ...limits import MAX_SEQ
from ...wire.jsonio import event_size
from ..ports import EventQuery, IdQuery, SeqRange, SessionKey, Tail, TailNeed, id_order, in_ranges, tail_query
from .items import TimeOrder, event_ts, hidden_ranges, visible_segments
from .keys import QUERY_LIMIT_MAX, TIME_MAX_ATTR, TIME_SKEW_ATTR, N, S, events_pk, whole_attr
from .retries import Budget
from .table import Table, by_seq

# A paged read of the newest N events reads them newest first in one query when N is at most this (items in
# memory: at most this many); a larger N finds its window's first seq first (no bodies), then pages forward.
_BACKWARD_READ_MAX = 100
# The first page of a newest-first read for an after_timestamp query (``seqs_since``); each next one doubles.
_SINCE_FIRST_PAGE = 8
# A read that met a deletion committing under it (``dels`` moved) reads again, at most this often.
_READ_ATTEMPTS = 5


class _Page:
    """Events read for one query, oldest first, up to its ``limit`` and ``max_bytes``."""

    def __init__(self, table: Table, query: EventQuery) -> None:
        self.table = table
        self.query = query
        self.events: list[dict[str, Any]] = []
        self.size = 0

    def take(self, items: list[dict[str, Any]]) -> bool:
        """Read ``items`` in order into the page; True once it is full (later items are never read)."""
        query = self.query
        for item in items:
            event = self.table.read_event(item, verbatim=query.verbatim)
            self.events.append(event)
            if query.limit is not None and len(self.events) >= query.limit:
                return True
            if query.max_bytes is not None:
                self.size += event_size(event)
                if self.size >= query.max_bytes:
                    return True
        return False


def deletion_marks(table: Table, key: SessionKey, *, counter_only: bool = False) -> tuple[int, list[SeqRange]]:
    """The session's deletion count and the seq ranges of its deletions not purged yet."""
    item = table.session_attributes(key, "dels" if counter_only else "dels, hide")
    return whole_attr(item, "dels"), hidden_ranges(item)


def read_events(table: Table, key: SessionKey, query: EventQuery) -> list[dict[str, Any]]:
    """Reads the session item's deletion marks (``dels``, ``hide``) before (unless the query brings them from the
    caller's record: ``EventQuery.marks``) and after the events: the seq ranges of a deletion not purged yet are
    left out of the Queries, and a deletion that committed while the events were read (its purge may have removed
    part of them under the read) makes the read start again. So no read ever shows part of a deletion, whatever
    its size."""
    if query.num_recent == 0 or query.limit == 0:
        return []
    known = query.marks
    for _ in range(_READ_ATTEMPTS):
        # The caller's marks, read with its record a moment ago, save the first read (once: a retry reads).
        deletions, hidden = (known[0], list(known[1])) if known is not None else deletion_marks(table, key)
        known = None
        events = _read_visible(table, key, query, hidden)
        if query.unchecked or deletion_marks(table, key, counter_only=True)[0] == deletions:
            return events
    raise ServiceUnavailable("the session's events kept being deleted while they were read; retry", retry_after=1)


def read_events_by_id(table: Table, key: SessionKey, query: IdQuery) -> list[dict[str, Any]]:
    """Named events by BatchGetItem on their keys (``V#{id}``), a prefix's by a Query of the session's partition
    between ``V#{prefix}`` and the end of its range, in the query's direction; between two reads of the deletion
    marks, as ``read_events``."""
    if query.limit == 0:
        return []
    known = query.marks
    for _ in range(_READ_ATTEMPTS):
        deletions, hidden = (known[0], list(known[1])) if known is not None else deletion_marks(table, key)
        known = None
        events = _read_by_id(table, key, query, hidden)
        if deletion_marks(table, key, counter_only=True)[0] == deletions:
            return events
    raise ServiceUnavailable("the session's events kept being deleted while they were read; retry", retry_after=1)


# Greater than every character an event id may hold ([A-Za-z0-9._:@-]); "," is less than all of them.
_PAST_ID_CHARS = "~"
_BEFORE_ID_CHARS = ","


def _read_by_id(table: Table, key: SessionKey, query: IdQuery, hidden: list[SeqRange]) -> list[dict[str, Any]]:
    def visible(item: dict[str, Any]) -> bool:
        return not in_ranges(whole_attr(item, "seq"), hidden)

    if query.ids:
        stored = table.stored_items(key, list(dict.fromkeys(query.ids)), Budget())
        events = [table.read_event(item, verbatim=query.verbatim) for item in stored.values() if visible(item)]
        return id_order(events, query)
    low, high = "V#" + query.prefix, "V#" + query.prefix + _PAST_ID_CHARS
    if query.after_id is not None:
        # Strictly after after_id in the query's order; no id holds a "," (a range's inclusive bound).
        if query.descending:
            high = min(high, "V#" + query.after_id)
        else:
            low = max(low, "V#" + query.after_id + _BEFORE_ID_CHARS)
    if low > high:
        return []
    params: dict[str, Any] = {
        "KeyConditionExpression": "PK = :pk AND SK BETWEEN :lo AND :hi",
        "ExpressionAttributeValues": {":pk": S(events_pk(key)), ":lo": S(low), ":hi": S(high)},
        "ScanIndexForward": not query.descending,
    }
    page = _Page(table, EventQuery(limit=query.limit, max_bytes=query.max_bytes, verbatim=query.verbatim))
    while True:
        if query.limit is not None:
            # One more than the page needs: a descending range includes after_id itself, dropped here.
            params["Limit"] = min(query.limit - len(page.events) + 1, QUERY_LIMIT_MAX)
        response = table.db.query(TableName=table.name, ConsistentRead=True, **params)
        page_items = [
            item
            for item in response.get("Items", [])
            if visible(item) and item["SK"]["S"] != "V#" + (query.after_id or "")
        ]
        if page.take(page_items) or "LastEvaluatedKey" not in response:
            return page.events
        params["ExclusiveStartKey"] = response["LastEvaluatedKey"]


def _read_visible(table: Table, key: SessionKey, query: EventQuery, hidden: list[SeqRange]) -> list[dict[str, Any]]:
    pk = events_pk(key)
    low = (query.after_seq or 0) + 1
    high = query.up_to_seq if query.up_to_seq is not None else MAX_SEQ
    if low > high:
        return []
    paged = query.limit is not None or query.max_bytes is not None
    if query.after_timestamp is not None:
        ts = float(query.after_timestamp)
        if query.after_seq is None or query.num_recent is not None:
            # Where the selection starts (and ends): the seqs of the events at or after the time, read
            # without bodies; pages after the first resume from their seq instead.
            seqs = sorted(s for s in seqs_since(table, key, ts, low, high, hidden) if not in_ranges(s, hidden))
            if query.num_recent is not None:
                seqs = seqs[-query.num_recent :]
            if not seqs:
                return []
            low, high = seqs[0], seqs[-1]
        return _read_forward(table, pk, low, high, query, ts, hidden)
    if query.num_recent is not None:
        if not paged or query.num_recent <= _BACKWARD_READ_MAX:
            # Newest first, stop after num_recent: one query reads the items, then the page is taken from
            # the oldest of them (payloads in S3 fetched only as far as the page goes).
            items = _newest(table, pk, low, high, hidden, {}, query.num_recent)
            items.reverse()
            page = _Page(table, query)
            page.take(items)
            return page.events
        # A page of the newest num_recent starts at the oldest of them: find its seq without reading bodies.
        newest = _newest(table, pk, low, high, hidden, {"ProjectionExpression": "seq"}, query.num_recent)
        if not newest:
            return []
        low = int(newest[-1]["seq"]["N"])
    return _read_forward(table, pk, low, high, query, None, hidden)


def _newest(
    table: Table, pk: str, low: int, high: int, hidden: list[SeqRange], extra: dict[str, Any], limit: int | None
) -> list[dict[str, Any]]:
    """Up to ``limit`` items with low <= seq <= high outside ``hidden``, newest first."""
    items: list[dict[str, Any]] = []
    for a, b in reversed(visible_segments(low, high, hidden)):
        left = None if limit is None else limit - len(items)
        if left is not None and left <= 0:
            break
        items += table.query_all(by_seq(pk, a, b) | {"ScanIndexForward": False} | extra, left)
    return items


def seqs_since(table: Table, key: SessionKey, ts: float, low: int, high: int, hidden: list[SeqRange]) -> list[int]:
    """The seqs in [low, high] of the events whose timestamp is at or after ``ts``: the session's newest events
    first from ``by_seq``, down to the first one below ``ts - skew`` (``TimeOrder``), so the read is about as long
    as the answer while timestamps follow the seqs. No session item: none."""
    pk = events_pk(key)
    order = TimeOrder.of(table.session_attributes(key, f"{TIME_MAX_ATTR}, {TIME_SKEW_ATTR}"))
    if order is None:
        return []
    stop = ts - order.skew
    found: list[int] = []
    # Pages that double from a small first one: a Query without a Limit reads (and is charged for) up to
    # 1 MB of items past the stop, one with a fixed small Limit takes many round trips for a long answer.
    limit = _SINCE_FIRST_PAGE
    for a, b in reversed(visible_segments(low, high, hidden)):
        newest = by_seq(pk, a, b) | {"ScanIndexForward": False, "ProjectionExpression": "seq, t"}
        while True:
            newest["Limit"] = limit
            limit = min(limit * 2, QUERY_LIMIT_MAX)
            page = table.db.query(TableName=table.name, ConsistentRead=True, **newest)
            for item in page.get("Items", []):
                at = event_ts(item)
                if at is not None and at >= ts:
                    found.append(whole_attr(item, "seq"))
                elif at is not None and at < stop:
                    return found
            if "LastEvaluatedKey" not in page:
                break
            newest["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    return found


def _read_forward(
    table: Table,
    pk: str,
    low: int,
    high: int,
    query: EventQuery,
    after_timestamp: float | None,
    hidden: list[SeqRange],
) -> list[dict[str, Any]]:
    """Events with low <= seq <= high (and a timestamp >= after_timestamp) outside ``hidden``, oldest first,
    stopping at the query's ``limit`` and ``max_bytes``: a page reads about the items it returns, and no payload
    past its end."""
    page = _Page(table, query)
    for a, b in visible_segments(low, high, hidden):
        params = by_seq(pk, a, b)
        if after_timestamp is not None:
            params["FilterExpression"] = "t >= :ts"
            params["ExpressionAttributeValues"][":ts"] = N(after_timestamp)
        while True:
            if query.limit is not None:
                params["Limit"] = min(query.limit - len(page.events), QUERY_LIMIT_MAX)
            response = table.db.query(TableName=table.name, ConsistentRead=True, **params)
            if page.take(response.get("Items", [])):
                return page.events
            if "LastEvaluatedKey" not in response:
                break
            params["ExclusiveStartKey"] = response["LastEvaluatedKey"]
    return page.events


# --- tails ---------------------------------------------------------------------------------------------------------


def read_tail(table: Table, key: SessionKey, query: EventQuery, need: TailNeed) -> Tail:
    """Newest-first Queries of ``by_seq`` (``ScanIndexForward=False``, ``Limit`` the page ``need`` asks for),
    between the deletion marks' reads as ``read_events`` does (the caller's marks save the first), so that the
    pages are one view: a deletion committed meanwhile makes the read start again."""
    tail_query(query)
    known = query.marks
    for _ in range(_READ_ATTEMPTS):
        deletions, hidden = (known[0], list(known[1])) if known is not None else deletion_marks(table, key)
        known = None
        tail = _read_tail(table, key, query, hidden, need)
        if deletion_marks(table, key, counter_only=True)[0] == deletions:
            return tail
    raise ServiceUnavailable("the session's events kept being deleted while they were read; retry", retry_after=1)


def _read_tail(table: Table, key: SessionKey, query: EventQuery, hidden: list[SeqRange], need: TailNeed) -> Tail:
    pk = events_pk(key)
    low = (query.after_seq or 0) + 1
    high = query.up_to_seq if query.up_to_seq is not None else MAX_SEQ
    if low > high:
        return Tail(events=[])
    segments = list(reversed(visible_segments(low, high, hidden)))  # newest first
    events: list[dict[str, Any]] = []
    below = high + 1  # the oldest seq read so far (seqs below it are not read)
    start: dict[str, Any] | None = None
    more = need([])
    if more <= 0:
        return Tail(events=[])
    while more > 0:
        left = more
        while left > 0 and segments:
            a, b = segments[0]
            params = by_seq(pk, a, b) | {"ScanIndexForward": False, "Limit": min(left, QUERY_LIMIT_MAX)}
            if start is not None:
                params["ExclusiveStartKey"] = start
            response = table.db.query(TableName=table.name, ConsistentRead=True, **params)
            items = response.get("Items", [])
            # Payloads in S3 are fetched for these items only.
            events = [table.read_event(item, verbatim=query.verbatim) for item in reversed(items)] + events
            if items:
                below = whole_attr(items[-1], "seq")
            left -= len(items)
            start = response.get("LastEvaluatedKey")
            if start is None:
                segments.pop(0)
        if not segments:
            return Tail(events=events)  # the selection's oldest event is read
        more = need(events)
    return Tail(events=events, older=_count_before(table, pk, low, below - 1, hidden))


def _count_before(table: Table, pk: str, low: int, high: int, hidden: list[SeqRange]) -> int:
    """How many events a tail left unread, without reading them: the seqs from the oldest stored one (one
    Query, one item) through ``high``, less the pending deletions. Events deleted and purged between them are
    counted too (no item says where they were)."""
    segments = visible_segments(low, high, hidden)
    for i, (a, b) in enumerate(segments):
        first = table.query_all(by_seq(pk, a, b) | {"ProjectionExpression": "seq"}, 1)
        if first:
            oldest = whole_attr(first[0], "seq")
            return (b - oldest + 1) + sum(hi - lo + 1 for lo, hi in segments[i + 1 :])
    return 0
