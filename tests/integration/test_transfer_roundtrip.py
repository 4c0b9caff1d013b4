"""Export → import → export gives the same bytes but for the ids changed, in JSON and in YAML, for generated sessions:
tool call/result pairs, Unicode anywhere (keys too), values nested deep, summaries and the watermark, state in every
scope, a memo, and bodies large enough that DynamoDB keeps them in S3. Through the template's routes (moto)."""

from __future__ import annotations

import itertools
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.api import Api

# JSON text without lone surrogates (a request cannot carry them; the parser refuses the escape).
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
KEYS = st.text(st.characters(exclude_categories=("Cs",)), min_size=1, max_size=12)
NUMBERS = st.one_of(
    st.integers(min_value=-(10**18), max_value=10**18),
    st.floats(min_value=-1e100, max_value=1e100, allow_nan=False).filter(lambda x: x == 0 or abs(x) > 1e-100),
)
# Times DynamoDB numbers hold (no subnormal floats), with sub-second digits.
TIMES = st.integers(min_value=0, max_value=2_000_000_000_000_000).map(lambda us: us / 1_000_000)
SCALARS = st.one_of(st.none(), st.booleans(), NUMBERS, TEXT)


def nested(depth: int) -> st.SearchStrategy[Any]:
    """A JSON value; one branch of it goes ``depth`` levels down (the bounds allow 32 inside an event field)."""
    leaf = st.recursive(
        SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3), max_leaves=8
    )
    value: st.SearchStrategy[Any] = leaf
    for _ in range(depth):
        value = st.one_of(st.lists(value, min_size=1, max_size=2), st.dictionaries(KEYS, value, min_size=1, max_size=2))
    return value


OBJECTS = st.dictionaries(KEYS.filter(lambda k: not k.startswith(("app:", "user:", "temp:"))), SCALARS, max_size=4)
_ids = itertools.count()


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """An export document as a client could hold one (the first import normalises it; the test compares the
    exports that follow)."""
    events: list[dict[str, Any]] = []
    seq = 0
    ts = draw(TIMES)
    summary: tuple[str, int] | None = None
    big_at = draw(st.one_of(st.none(), st.integers(min_value=0, max_value=5)))
    for i in range(draw(st.integers(min_value=0, max_value=6))):
        seq += draw(st.integers(min_value=1, max_value=3))  # gaps: deleted events, a rewind
        ts = round(ts + draw(TIMES) % 1000, 6)
        kind = draw(st.sampled_from(["text", "tool", "summary"]))
        event: dict[str, Any] = {"id": f"e{i}", "invocation_id": draw(TEXT), "author": "user", "timestamp": ts}
        if kind == "text":
            # 360,000 bytes of UTF-8: over the 350 KB offload threshold, under the tests' MaxRequestBytes (1 MB)
            text = "ü" * 180_000 if big_at == i else draw(TEXT)
            event["content"] = {"role": "user", "parts": [{"text": text}]}
            event["custom_metadata"] = {"deep": draw(nested(draw(st.integers(min_value=0, max_value=20))))}
            event["actions"] = {"state_delta": draw(OBJECTS)}
        elif kind == "tool":
            call_id = f"call-{i}"
            args = draw(st.dictionaries(KEYS, nested(draw(st.integers(min_value=0, max_value=25))), max_size=2))
            event["author"] = "agent"
            event["content"] = {
                "role": "model",
                "parts": [{"function_call": {"id": call_id, "name": "tool", "args": args}}],
            }
            events.append(event | {"seq": seq})
            seq += 1
            event = {
                "id": f"r{i}",
                "author": "agent",
                "timestamp": ts,
                "content": {
                    "role": "user",
                    "parts": [{"function_response": {"id": call_id, "name": "tool", "response": {"r": draw(TEXT)}}}],
                },
            }
        else:
            event["author"] = "agent_memory"
            event["actions"] = {
                "compaction": {
                    "start_timestamp": 0.0,
                    "end_timestamp": ts,
                    "compacted_content": {"role": "model", "parts": [{"text": draw(TEXT)}]},
                }
            }
            summary = (f"e{i}", max(0, seq - 1))
        events.append(event | {"seq": seq})
    last_seq = seq + draw(st.integers(min_value=0, max_value=2))
    return {
        "format": "agent-memory/session@1",
        "app_name": "app",
        "user_id": "alice",
        "session_id": "gen",
        "create_time": draw(TIMES),
        "last_update_time": ts,
        "version": draw(st.integers(min_value=0, max_value=10**6)),
        "last_seq": last_seq,
        "state": {"session": draw(OBJECTS), "user": draw(OBJECTS), "app": draw(OBJECTS)},
        "memo": draw(st.dictionaries(KEYS, nested(draw(st.integers(min_value=0, max_value=10))), max_size=3)),
        "compaction": {
            "summary_event_id": summary[0] if summary else None,
            "end_seq": summary[1] if summary else draw(st.integers(min_value=0, max_value=last_seq)),
        },
        "events": events,
    }


def export(api: Api, user: str, sid: str, fmt: str) -> str:
    reply = api.request("GET", f"/apps/app/users/{user}/sessions/{sid}/export", query={"format": fmt})
    assert reply.status == 200, reply.raw[:500]
    return reply.raw.decode()


def import_(api: Api, user: str, sid: str, text: str, fmt: str) -> None:
    reply = api.request(
        "POST",
        f"/apps/app/users/{user}/sessions/import",
        raw=text,
        query={"session_id": sid},
        headers={"content-type": f"application/{fmt}"},
    )
    assert reply.status == 201, reply.raw[:2000]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=documents(), fmt=st.sampled_from(["json", "yaml"]))
def test_export_import_export_is_byte_identical(api: Api, document: dict[str, Any], fmt: str) -> None:
    n = next(_ids)
    # Every example in users of its own: the app's state is shared by all (later examples set their own keys).
    first_user, second_user = f"a{n}", f"b{n}"
    import_(api, first_user, "one", json.dumps(document, ensure_ascii=False), "json")
    first = export(api, first_user, "one", fmt)
    import_(api, second_user, "two", first, fmt)
    second = export(api, second_user, "two", fmt)
    third_doc = json.loads(export(api, second_user, "two", "json"))
    app_state = third_doc["state"]["app"]
    if fmt == "json":
        expected = first.replace(f'"user_id":"{first_user}"', f'"user_id":"{second_user}"', 1).replace(
            '"session_id":"one"', '"session_id":"two"', 1
        )
    else:
        expected = first.replace(f"user_id: {first_user}\n", f"user_id: {second_user}\n", 1).replace(
            "session_id: one\n", "session_id: two\n", 1
        )
    # The app's state is the app's: both exports hold what it was when each was read.
    assert app_state == json.loads(export(api, first_user, "one", "json"))["state"]["app"]
    assert second == expected
