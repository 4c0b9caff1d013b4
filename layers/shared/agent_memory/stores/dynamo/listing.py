"""Reading sessions: one session with its state, a user's sessions, an app's sessions, user and app state.

A session being deleted (``deleting``) is gone for readers, one being imported (``importing``) not there yet.
"""

from __future__ import annotations

import copy
from typing import Any

from ..ports import AppCursor, SessionKey, SessionRecord, UserCursor
from .items import record_from_item, state_from_item
from .keys import STATE_SK, S, app_pk, events_pk, session_key, session_pk
from .retries import Budget
from .table import Table


def _hidden_from_readers(item: dict[str, Any] | None) -> bool:
    return item is None or "deleting" in item or "importing" in item


def get_user_state(table: Table, app_name: str, user_id: str) -> dict[str, Any]:
    key = (session_pk(app_name, user_id), STATE_SK)
    return state_from_item(table.get_items([key]).get(key, {}))


def get_app_state(table: Table, app_name: str) -> dict[str, Any]:
    key = (app_pk(app_name), STATE_SK)
    return state_from_item(table.get_items([key]).get(key, {}))


def get_session(table: Table, key: SessionKey) -> SessionRecord | None:
    """The session item, its state item and the user's and app's state items: one consistent BatchGetItem."""
    pk = session_pk(key.app_name, key.user_id)
    own = (pk, f"S#{key.session_id}")
    state_key = (events_pk(key), STATE_SK)
    user_key, app_key = (pk, STATE_SK), (app_pk(key.app_name), STATE_SK)
    found = table.get_items([own, state_key, user_key, app_key])
    session = found.get(own)
    if session is None or _hidden_from_readers(session):
        return None
    record = record_from_item(session, state_item=found.get(state_key))
    record.user_state = state_from_item(found.get(user_key, {}))
    record.app_state = state_from_item(found.get(app_key, {}))
    return record


def get_session_for_compaction(table: Table, key: SessionKey) -> SessionRecord | None:
    """The session item alone, by an eventually consistent GetItem: half a read unit (a session item is ~0.5
    KB), where ``get_session``'s consistent BatchGetItem of it, its state item and the user's and app's state
    items costs four. A compaction uses none of the states, and every field it plans on is checked again by
    the consistent read its write is conditioned on (the append's watermark, ``clear_due``'s version): a
    stale record makes a plan that stores nothing, and the session stays due for the next sweep."""
    item = (
        Budget().call(table.db.get_item, TableName=table.name, Key=session_key(key), ConsistentRead=False).get("Item")
    )
    if item is None or _hidden_from_readers(item):
        return None
    return record_from_item(item, with_state=False)


def list_sessions(
    table: Table, app_name: str, user_id: str, limit: int, after: UserCursor | None
) -> tuple[list[SessionRecord], UserCursor | None]:
    """Reads every item of the user's partition (their sessions and user state; an index ordered by update time
    would cost every append a write) and keeps the ``limit`` + 1 first after ``after``: the read grows with
    the user's session count, the memory with the page."""
    keep = max(0, limit) + 1
    candidates, user_item = _user_partition(table, app_name, user_id, after, keep)
    user_state = state_from_item(user_item)
    # The app's state and the page's session state items: one BatchGetItem.
    app_key = (app_pk(app_name), STATE_SK)
    page = [
        (item, (events_pk(SessionKey(app_name, user_id, item["SK"]["S"][2:])), STATE_SK))
        for _, item in candidates[:limit]
    ]
    found = table.get_items([app_key, *(state_key for _, state_key in page)]) if candidates else {}
    app_state = state_from_item(found.get(app_key, {}))
    records = []
    for item, state_key in page:
        record = record_from_item(item, state_item=found.get(state_key))
        record.user_state, record.app_state = copy.deepcopy(user_state), copy.deepcopy(app_state)
        records.append(record)
    return records, (UserCursor.of(records[-1]) if len(candidates) > limit and records else None)


def _user_partition(
    table: Table, app_name: str, user_id: str, after: UserCursor | None, keep: int
) -> tuple[list[tuple[UserCursor, dict[str, Any]]], dict[str, Any]]:
    """The ``keep`` first session items after ``after`` in cursor order, and the user's state item ({}: none)."""
    params: dict[str, Any] = {
        "TableName": table.name,
        "KeyConditionExpression": "PK = :pk",
        "ExpressionAttributeValues": {":pk": S(session_pk(app_name, user_id))},
        "ConsistentRead": True,
    }
    budget = Budget()
    candidates: list[tuple[UserCursor, dict[str, Any]]] = []
    user_item: dict[str, Any] = {}
    while True:
        response = budget.call(table.db.query, **params)
        for item in response.get("Items", []):
            sk = item["SK"]["S"]
            if sk == STATE_SK:
                user_item = item
            elif sk.startswith("S#") and not _hidden_from_readers(item):
                cursor = UserCursor.of(record_from_item(item, with_state=False))
                if after is None or cursor > after:
                    candidates.append((cursor, item))
        if len(candidates) > 4 * keep:
            candidates = sorted(candidates, key=lambda c: c[0])[:keep]
        if "LastEvaluatedKey" not in response:
            break
        params["ExclusiveStartKey"] = response["LastEvaluatedKey"]
    return sorted(candidates, key=lambda c: c[0])[:keep], user_item


def list_app_sessions(
    table: Table, app_name: str, limit: int, after: AppCursor | None
) -> tuple[list[SessionRecord], AppCursor | None]:
    """The sparse ``by_app`` index (written at create and delete only, never by an append) gives the page's
    keys in (user, session) order; one BatchGetItem reads the sessions and their users' and app's state. The
    index is eventually consistent: a session created a moment ago may be missing from the page, one being
    deleted is left out when its item says so."""
    key_condition = "app_pk = :app"
    values: dict[str, Any] = {":app": S(app_name)}
    if after is not None:
        # "#" sorts below every identifier character: "{user}#{session}" orders by user, then session.
        key_condition += " AND app_sk > :after"
        values[":after"] = S(f"{after.user_id}#{after.session_id}")
    response = Budget().call(
        table.db.query,
        TableName=table.name,
        IndexName="by_app",
        KeyConditionExpression=key_condition,
        ExpressionAttributeValues=values,
        Limit=max(0, limit) + 1,
    )
    listed = [(item["PK"]["S"], item["SK"]["S"]) for item in response.get("Items", [])]
    more = len(listed) > limit or ("LastEvaluatedKey" in response and bool(listed))
    page = listed[:limit]
    if not page:
        return [], None
    app_key = (app_pk(app_name), STATE_SK)
    state_keys = {(pk, sk): (f"E#{pk[2:]}#{sk[2:]}", STATE_SK) for pk, sk in page}
    found = table.get_items([*page, *((pk, STATE_SK) for pk, _ in page), app_key, *state_keys.values()])
    app_state = state_from_item(found.get(app_key, {}))
    records = []
    for pk, sk in page:
        item = found.get((pk, sk))
        if item is None or _hidden_from_readers(item):
            continue
        record = record_from_item(item, state_item=found.get(state_keys[(pk, sk)]))
        record.user_state = state_from_item(found.get((pk, STATE_SK), {}))
        record.app_state = copy.deepcopy(app_state)
        records.append(record)
    # Resume after the page's last key even when its session was left out.
    _, _, last_user = page[-1][0].split("#", 2)
    return records, (AppCursor(last_user, page[-1][1][2:]) if more else None)
