"""Hypothesis strategies for hostile requests to every route of the template.

A request is drawn whole (method, path, query string, headers, body bytes) so that it can be sent over real
HTTP exactly as drawn, and printed as a reproducer. Most of each request is plausible (known ids, the route's
own fields) so that it gets past the first check and reaches storage; one or more parts are hostile: path
segments, query values, ``If-Match`` forms, bodies that are not UTF-8, nested 5,000 deep, hold 4,300+ digit
integers, NaN, lone surrogates, booleans for numbers, huge strings, both spellings of a field, chat messages
with an integer ``turn_id``, batches, ids reused with another body, memories with timestamps no datetime holds.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from hypothesis import strategies as st

from local.template import Route

APPS = ("fz", "fz2")
USERS = ("u1", "u2", "u3")
SESSIONS = ("s1", "s2", "s3", "s4", "s5")
EVENT_IDS = tuple(f"e{i}" for i in range(8))  # few, so that ids are reused, with another body or the same

# Placeholders swapped for raw JSON text after json.dumps: what the encoder cannot write (4,300+ digit
# integers, nesting past its recursion limit) or would not (a body truncated mid-way).
_RAW = "\u0000raw:"


@dataclass(frozen=True)
class Request:
    route: str  # the template's route key: "POST /apps/{app_name}/..."
    method: str
    path: str  # percent-encoded, as sent
    query: str  # the raw query string, as sent
    headers: tuple[tuple[str, str], ...]
    body: bytes | None

    @property
    def target(self) -> str:
        return self.path + (f"?{self.query}" if self.query else "")

    def reproducer(self, limit: int = 300) -> str:
        """The request as one line a reader can replay (long bodies cut)."""
        body = "" if self.body is None else repr(self.body[:limit]) + ("…" if len(self.body) > limit else "")
        headers = "".join(f" -H '{k}: {v}'" for k, v in self.headers)
        return f"{self.method} {self.target}{headers} {body}".rstrip()


# --- path segments and query values ----------------------------------------------------------------------

_HOSTILE_SEGMENTS = (
    "..",
    ".",
    "%2F",
    "%00",
    "%FF",
    "%ED%A0%80",  # a lone surrogate, UTF-8 encoded
    "%C3%28",  # invalid UTF-8
    "a%20b",
    "%3Cscript%3E",
    "%24%7Bjndi%3Aldap%7D",
    "%E2%80%AE",  # right-to-left override
    "x" * 300,
    "y" * 5000,
    "%C3%A9t%C3%A9",
    "#",
    "U%23x",  # '#': the store's key separator
    "S%23x",
    "a%23b%23c",
    "~",
    "null",
    "-",
)


def _segment(pool: tuple[str, ...]) -> st.SearchStrategy[str]:
    hostile = st.one_of(
        st.sampled_from(_HOSTILE_SEGMENTS),
        st.text(min_size=1, max_size=40).map(lambda s: quote(s, safe="")),
    )
    return st.integers(0, 9).flatmap(lambda i: hostile if i == 0 else st.sampled_from(pool))


_QUERY_VALUES = (
    "",
    "0",
    "1",
    "-1",
    "1.0",
    "2.5",
    "1e3",
    "1e400",
    "9" * 40,
    "9" * 5000,
    "NaN",
    "nan",
    "inf",
    "-Infinity",
    "true",
    "false",
    "null",
    "%FF",
    "%ED%A0%80",
    "%00",
    "0x10",
    "1_000",
    "%20%201",
    "１",  # a full-width digit
    "2024-01-01T00:00:00Z",
    "9999-12-31T23:59:59Z",
    "0001-01-01T00:00:00",
    "-1e12",
    "1e20",
    "1e200",
    "openai",
    "full",
    "adk",
    "bogus",
    "json",
    "yaml",
    "s1",
    "e1",
    "asc",
    "desc",
    "lgc-",
    "e1%2Ce2",  # one value holding a comma: API Gateway's join of a repeated parameter
)


def _query_value() -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(_QUERY_VALUES),
        st.integers(-5, 200).map(str),
        st.text(max_size=30).map(lambda s: quote(s, safe="")),
    )


def _query(params: tuple[str, ...]) -> st.SearchStrategy[str]:
    known = st.lists(st.tuples(st.sampled_from(params), _query_value()), max_size=4) if params else st.just([])
    junk = st.lists(st.tuples(st.sampled_from(("x", "limit", "%FF", "a[]", "")), _query_value()), max_size=1)

    def join(pairs: list[tuple[str, str]]) -> str:
        return "&".join(f"{k}={v}" for k, v in pairs)

    # Repeats of one name arrive joined by commas (API Gateway); the lists above repeat names on their own.
    return st.tuples(known, junk).map(lambda kj: join(kj[0] + kj[1]))


# --- headers ---------------------------------------------------------------------------------------------

_IF_MATCH = (
    '"0"',
    '"1"',
    '"2"',
    '"5"',
    'W/"1"',
    'W/"5"',
    '"05"',
    '"01"',
    "*",
    '"1", "2"',
    '"9", "1"',
    '"1",W/"2"',
    "1",
    '"abc"',
    '""',
    "",
    '"-1"',
    '"1.0"',
    '"' + "9" * 400 + '"',
    '"\u00e9"',
)


# A strict create sends "*"; anything else is refused (400), never a 5xx.
_IF_NONE_MATCH = ("*", "*", "*\t*", '"1"', "W/*", "**", "", '"*"', "*, *", "\u00e9")


def _headers(with_if_match: bool) -> st.SearchStrategy[tuple[tuple[str, str], ...]]:
    content_type = st.sampled_from(
        (
            "application/json",
            "application/json",
            "text/plain",
            "application/json; charset=latin-1",
            "",
            "application/yaml",
        )
    )
    if_match = st.one_of(st.none(), st.sampled_from(_IF_MATCH)) if with_if_match else st.none()
    if_none_match = st.one_of(st.none(), st.sampled_from(_IF_NONE_MATCH)) if with_if_match else st.none()

    def build(ct: str, im: str | None, inm: str | None) -> tuple[tuple[str, str], ...]:
        headers = [("content-type", ct)] if ct else []
        if im is not None:
            headers.append(("if-match", im.encode("utf-8").decode("latin-1")))
        if inm is not None:
            headers.append(("if-none-match", inm.encode("utf-8").decode("latin-1")))
        return tuple(headers)

    return st.builds(build, content_type, if_match, if_none_match)


# --- JSON values -----------------------------------------------------------------------------------------

_SURROGATES = ("\ud800", "\udfff", "a\ud83d", "\udc00z")


def _deep(depth: int, kind: str) -> str:
    """Raw JSON text nested ``depth`` levels (past what ``json.dumps`` will write)."""
    if kind == "list":
        return "[" * depth + "1" + "]" * depth
    return '{"a":' * depth + "1" + "}" * depth


def raw(text: str) -> str:
    """A string that the encoder below writes as ``text`` itself, unquoted."""
    return _RAW + text


def scalars() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-(2**70), 2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=20),
        st.sampled_from(_SURROGATES),
        st.integers(4300, 5000).map(lambda n: raw("7" * n)),  # past Python's int-string conversion limit
        st.sampled_from((raw("1e400"), raw("-1e400"), raw("1E-400"), raw("0.1e99999"))),
    )


def json_values(max_leaves: int = 12) -> st.SearchStrategy[Any]:
    return st.recursive(
        scalars(),
        lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)),
        max_leaves=max_leaves,
    )


def nested() -> st.SearchStrategy[Any]:
    """A value nested deep: near and past any sensible bound (32), around DynamoDB's and json's limits."""
    return st.builds(
        lambda depth, kind: raw(_deep(depth, kind)),
        st.sampled_from((33, 64, 200, 255, 256, 300, 900, 1100, 5000)),
        st.sampled_from(("list", "dict")),
    )


def values() -> st.SearchStrategy[Any]:
    return st.integers(0, 9).flatmap(lambda i: nested() if i == 0 else json_values())


def huge_strings(one_in: int = 25) -> st.SearchStrategy[str]:
    """One time in ``one_in`` a string of hundreds of KB (past DynamoDB's item limit, past the offload
    threshold); otherwise a short one, so that a run sends megabytes, not gigabytes."""
    huge = st.builds(lambda n, c: c * n, st.sampled_from((70_000, 300_000, 420_000)), st.sampled_from("xé"))
    return st.integers(1, one_in).flatmap(lambda i: huge if i == 1 else st.text(max_size=30))


def _state_keys() -> st.SearchStrategy[str]:
    return st.one_of(
        st.builds(
            lambda p, k: p + k, st.sampled_from(("", "app:", "user:", "temp:", "APP:", "app", ":")), st.text(max_size=6)
        ),
        st.sampled_from(("", "st:x", "a" * 300, "\ud800", "app:\ud800")),
    )


def states() -> st.SearchStrategy[Any]:
    mapping = st.dictionaries(_state_keys(), values(), max_size=4)
    return st.one_of(mapping, mapping, mapping, st.none(), json_values(4))


_TIMESTAMPS = (
    raw("-1e12"),
    raw("1e20"),
    raw("1e200"),
    raw("1e400"),
    raw("NaN"),
    raw("Infinity"),
    raw("-Infinity"),
    True,
    False,
    "NaN",
    "not a date",
    "2024-02-30T00:00:00Z",
    "9999-12-31T23:59:59+14:00",
    "0001-01-01T00:00:00-14:00",
    "",
    -1,
    0,
    1.5,
    253402300800,  # year 10000
    [],
    {},
)


# Integers at the edges of what the stores hold: JSON clients and DynamoDB's reads through floats (2^53), SQLite's and
# Python's 64-bit conversions (2^63), the service's own counters' bound (2^50), and past all of them.
_EDGE_INTEGERS = (2**50, 2**50 + 1, 2**53 - 1, 2**53, 2**53 + 1, 2**62, 2**63 - 1, 2**63, 2**64, -(2**63), 10**38)


def edge_integers() -> st.SearchStrategy[int]:
    return st.sampled_from(_EDGE_INTEGERS)


def timestamps() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.floats(1.6e9, 1.9e9),
        st.sampled_from(_TIMESTAMPS),
        st.floats(allow_nan=False, allow_infinity=False),
        edge_integers(),
        st.sampled_from(("1700000000", "1.7e9")),  # numbers spelt as strings: refused
    )


# --- the routes' bodies ----------------------------------------------------------------------------------


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(st.just(_ABSENT), strategy)


_ABSENT = object()


def _object(**fields: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    """A JSON object whose fields may each be absent; ``unknown`` adds a field the route does not know."""
    return st.fixed_dictionaries({k: _maybe(v) for k, v in fields.items()}).map(
        lambda d: {k: v for k, v in d.items() if v is not _ABSENT}
    )


def _parts() -> st.SearchStrategy[Any]:
    text = st.one_of(st.text(max_size=40), st.sampled_from(_SURROGATES), huge_strings(), st.integers(), st.none())
    part = st.one_of(
        _object(text=text, thought=st.one_of(st.booleans(), st.integers())),
        _object(functionCall=_object(id=st.text(max_size=5), name=st.text(max_size=10), args=values())),
        _object(function_call=_object(name=st.text(max_size=10), args=values())),
        _object(function_response=_object(id=st.text(max_size=5), name=st.text(max_size=10), response=values())),
        _object(
            inline_data=_object(mime_type=st.text(max_size=10), data=st.one_of(st.text(max_size=20), st.just("!!")))
        ),
        json_values(4),
    )
    return st.one_of(st.lists(part, max_size=4), json_values(3))


def adk_events() -> st.SearchStrategy[dict[str, Any]]:
    delta = states()
    return _object(
        id=st.one_of(st.sampled_from(EVENT_IDS), st.text(max_size=10), st.integers(), st.just("")),
        invocation_id=st.one_of(st.text(max_size=8), st.integers()),
        invocationId=st.text(max_size=8),
        author=st.one_of(st.sampled_from(("user", "model", "agent", "system", "")), st.integers()),
        timestamp=timestamps(),
        content=st.one_of(_object(role=st.sampled_from(("user", "model", "x")), parts=_parts()), json_values(3)),
        actions=st.one_of(
            _object(state_delta=delta, stateDelta=delta, artifact_delta=json_values(3), compaction=json_values(3)),
            json_values(3),
        ),
        custom_metadata=values(),
        customMetadata=values(),
        turn_id=st.one_of(st.integers(), st.text(max_size=5), st.floats(), st.booleans()),
        seq=st.one_of(st.integers(), st.floats(), edge_integers()),
        long_running_tool_ids=st.one_of(st.lists(st.text(max_size=4), max_size=3), json_values(2)),
        partial=st.one_of(st.booleans(), st.integers()),
    )


def chat_messages() -> st.SearchStrategy[dict[str, Any]]:
    tool_call = _object(
        id=st.text(max_size=6),
        type=st.sampled_from(("function", "x")),
        function=_object(
            name=st.text(max_size=10),
            arguments=st.one_of(st.text(max_size=20), values().map(lambda v: json.dumps(v, default=str)), values()),
        ),
    )
    return _object(
        role=st.one_of(
            st.sampled_from(("user", "assistant", "tool", "system", "developer", "function", "")), st.integers()
        ),
        content=st.one_of(
            st.text(max_size=60), huge_strings(), st.none(), json_values(3), st.sampled_from(_SURROGATES)
        ),
        turn_id=st.one_of(st.integers(-(2**64), 2**64), st.text(max_size=5), st.floats(), st.booleans(), st.just(2)),
        timestamp=timestamps(),
        metadata=st.one_of(_object(interrupted=st.one_of(st.booleans(), st.integers()), original=values()), values()),
        name=st.one_of(st.text(max_size=10), st.integers()),
        tool_calls=st.one_of(st.lists(tool_call, max_size=3), json_values(2)),
        tool_call_id=st.one_of(st.text(max_size=6), st.integers()),
        id=st.sampled_from(EVENT_IDS),
    ).map(lambda m: m if "role" in m else {**m, "role": "assistant"})


def events() -> st.SearchStrategy[Any]:
    one = st.one_of(adk_events(), chat_messages())
    batch = st.builds(
        lambda evs, extra: {"events": evs, **extra},
        st.one_of(
            st.lists(one, max_size=6), st.lists(st.just({"role": "user", "content": "hi"}), min_size=99, max_size=130)
        ),
        st.one_of(st.just({}), st.dictionaries(st.sampled_from(("x", "events ")), json_values(2), max_size=1)),
    )
    big = st.builds(lambda text, e: {**e, "role": "user", "content": text}, huge_strings(one_in=1), chat_messages())
    return rarely(poisons(), rarely(big, st.one_of(one, one, batch, json_values(3)), one_in=25), one_in=5)


def poisons() -> st.SearchStrategy[dict[str, Any]]:
    """An otherwise valid event carrying one deeply nested value: in state at each scope, in its metadata, in a
    tool call's arguments. Stored, such a value once made every later read of the session (or, through
    ``app:`` state, of every session of the app) fail."""
    deep = st.builds(
        lambda d, k: raw(_deep(d, k)), st.sampled_from((255, 256, 300, 900)), st.sampled_from(("list", "dict"))
    )
    in_state = st.builds(
        lambda scope, v: {"author": "user", "actions": {"state_delta": {f"{scope}poison": v}}},
        st.sampled_from(("", "user:", "app:")),
        deep,
    )
    in_metadata = st.builds(lambda v: {"role": "user", "content": "hi", "metadata": {"m": v}}, deep)
    in_custom = st.builds(lambda v: {"author": "user", "custom_metadata": {"m": v}}, deep)
    in_arguments = st.builds(
        lambda v: {"author": "model", "content": {"parts": [{"function_call": {"name": "f", "args": {"a": v}}}]}}, deep
    )
    return st.one_of(in_state, in_metadata, in_custom, in_arguments)


def session_bodies() -> st.SearchStrategy[Any]:
    ids = st.one_of(st.sampled_from(SESSIONS), st.text(max_size=12), st.integers(), st.just(""), st.just("x" * 200))
    big_state = st.builds(lambda s: {"big": s}, huge_strings(one_in=3))
    poison = st.builds(
        lambda sid, scope, v: {"session_id": sid, "state": {f"{scope}poison": v}},
        st.sampled_from(SESSIONS),
        st.sampled_from(("", "user:", "app:")),
        nested(),
    )
    usual = st.one_of(
        _object(session_id=ids, sessionId=ids, state=st.one_of(states(), big_state), x=json_values(2)),
        json_values(3),
    )
    return rarely(poison, usual, one_in=8)


def rarely(unusual: st.SearchStrategy[Any], usual: st.SearchStrategy[Any], one_in: int) -> st.SearchStrategy[Any]:
    """``unusual`` one time in ``one_in`` (hypothesis alone favours small examples and would rarely draw it)."""
    return st.integers(1, one_in).flatmap(lambda i: unusual if i == 1 else usual)


def import_bodies() -> st.SearchStrategy[Any]:
    """Export documents (``POST …/sessions/import``): mostly of the right shape with fields drawn hostile (ids
    reused, seqs out of order, events that are not events, a watermark naming nothing, deep values, a memo too
    large); sent as JSON, or with a YAML content type, as YAML (JSON text is YAML's flow style)."""
    event = st.builds(
        lambda e, eid, seq: {**e, "id": eid, "seq": seq} if isinstance(e, dict) else e,
        st.one_of(adk_events(), poisons(), json_values(2)),
        st.sampled_from(EVENT_IDS),
        st.one_of(st.integers(-1, 6), st.just(True), st.just(2.0), edge_integers()),
    )
    ids = st.one_of(st.sampled_from(SESSIONS), st.just("import"), st.text(max_size=8), st.integers())
    counts = st.one_of(st.integers(-1, 8), st.just(True), st.just("3"), edge_integers())
    document = _object(
        format=st.sampled_from(("agent-memory/session@1", "agent-memory/session@1", "agent-memory/session@2", "")),
        app_name=st.sampled_from(APPS),
        user_id=st.sampled_from(USERS),
        session_id=ids,
        create_time=timestamps(),
        last_update_time=timestamps(),
        version=counts,
        last_seq=counts,
        state=st.one_of(_object(session=states(), user=states(), app=states()), json_values(2)),
        memo=st.one_of(states(), st.builds(lambda t: {"big": t}, huge_strings(one_in=2)), json_values(1)),
        compaction=_object(summary_event_id=st.one_of(st.none(), st.sampled_from(EVENT_IDS)), end_seq=counts),
        events=st.one_of(st.lists(event, max_size=5), json_values(1)),
    )
    return st.one_of(document, document, document, json_values(3))


def memo_bodies() -> st.SearchStrategy[Any]:
    """``PUT …/memo``: ``{"memo": {...}}`` with hostile memos (deep, huge, not an object), or anything."""
    memo = st.one_of(states(), nested(), st.builds(lambda t: {"big": t}, huge_strings(one_in=2)), json_values(2))
    return st.one_of(_object(memo=memo, x=json_values(1)), json_values(3))


def memory_bodies() -> st.SearchStrategy[Any]:
    memory = _object(
        text=st.one_of(
            st.text(max_size=60), huge_strings(), st.sampled_from(_SURROGATES), st.integers(), st.just("  ")
        ),
        metadata=values(),
        timestamp=timestamps(),
        extra=st.integers(),
    )
    big = st.builds(lambda text: {"memories": [{"text": text}]}, huge_strings(one_in=1))
    usual = st.one_of(
        _object(
            session_id=st.sampled_from(SESSIONS),
            sessionId=st.text(max_size=5),
            policy=st.one_of(st.sampled_from(("default", "all", "none", "user", "bogus")), json_values(3)),
        ),
        st.builds(
            lambda ms: {"memories": ms},
            st.one_of(st.lists(memory, max_size=5), st.lists(st.just({"text": "note"}), min_size=101, max_size=102)),
        ),
        # explicit events: the append route's events, with or without a session and a policy
        st.builds(
            lambda evs, scope: {"events": evs, **scope},
            st.one_of(
                st.lists(st.one_of(adk_events(), chat_messages(), poisons()), max_size=4),
                st.lists(st.just({"role": "user", "content": "hi"}), min_size=100, max_size=101),
            ),
            _object(session_id=st.one_of(st.sampled_from(SESSIONS), st.text(max_size=5)), policy=st.just("all")),
        ),
        json_values(3),
    )
    return rarely(big, usual, one_in=25)


def search_bodies() -> st.SearchStrategy[Any]:
    big = st.builds(lambda text: {"query": text}, huge_strings(one_in=1))
    return rarely(big, _search_bodies(), one_in=25)


def _search_bodies() -> st.SearchStrategy[Any]:
    return st.one_of(
        _object(
            query=st.one_of(
                st.text(max_size=40),
                huge_strings(),
                st.sampled_from(_SURROGATES),
                st.integers(),
                st.none(),
                st.just(""),
            ),
            top_k=st.one_of(
                st.integers(-3, 200), st.floats(), st.booleans(), st.sampled_from((raw("1e400"), raw("7" * 4400), "5"))
            ),
            min_score=st.one_of(st.floats(), st.integers(-2, 3), st.booleans(), st.sampled_from((raw("1e400"), "0.5"))),
            x=json_values(2),
        ),
        json_values(3),
    )


def context_bodies() -> st.SearchStrategy[Any]:
    """``POST …/context``: the context's parameters as a body, long system prompts among them."""
    budget = st.one_of(st.integers(-3, 400), st.floats(), st.booleans(), st.sampled_from((raw("1e400"), "5")))
    usual = st.one_of(
        _object(
            system=st.one_of(
                st.lists(st.one_of(st.text(max_size=40), st.just(""), st.sampled_from(_SURROGATES)), max_size=4),
                st.lists(st.just("rule"), min_size=20, max_size=22),
                st.text(max_size=10),
                st.integers(),
            ),
            format=st.one_of(st.sampled_from(("openai", "full", "adk", "bogus")), st.integers()),
            max_tokens=budget,
            max_messages=budget,
            max_chars=budget,
            keep_first=st.one_of(st.booleans(), st.sampled_from(("true", 1))),
            memories=st.one_of(st.integers(-2, 60), st.floats(), st.booleans(), st.just("3")),
            memory_query=st.one_of(st.text(max_size=30), st.just(""), st.integers(), st.none()),
            memory_min_score=st.one_of(st.floats(), st.integers(-2, 3), st.booleans()),
            profile=st.one_of(st.booleans(), st.sampled_from(("yes", 0))),
        ),
        json_values(3),
    )
    big = st.builds(lambda text: {"system": [text]}, huge_strings(one_in=1))
    return rarely(big, usual, one_in=25)


# --- bodies to bytes -------------------------------------------------------------------------------------


def encode(value: Any) -> bytes:
    """JSON text of ``value``: NaN and Infinity as their tokens, lone surrogates as ``\\ud800`` escapes, and the
    placeholders of :func:`raw` as their raw text."""
    replacements: dict[str, str] = {}

    def swap(v: Any) -> Any:
        if isinstance(v, str) and v.startswith(_RAW):
            marker = f"__raw{len(replacements)}__"
            replacements[f'"{marker}"'] = v[len(_RAW) :]
            return marker
        if isinstance(v, list):
            return [swap(x) for x in v]
        if isinstance(v, dict):
            return {swap(k) if isinstance(k, str) and not k.startswith(_RAW) else k: swap(x) for k, x in v.items()}
        return v

    text = json.dumps(swap(value), allow_nan=True)
    for marker, raw_text in replacements.items():
        text = text.replace(marker, raw_text, 1)
    return text.encode("utf-8", "surrogatepass")


_HOSTILE_BODIES = (
    b"",
    b"   ",
    b"{",
    b"{nope",
    b"null",
    b"true",
    b"[]",
    b"{}",
    b'"\\ud800"',
    b"NaN",
    b"Infinity",
    b"1e400",
    ("7" * 4400).encode(),
    ("[" * 5000 + "]" * 5000).encode(),
    ('{"a":' * 5000 + "1" + "}" * 5000).encode(),
    b"\xff\xfe{}",
    b'{"session_id": "\xc3\x28"}',
    b'{"role": "user", "content": "\xed\xa0\x80"}',
    b'{"a": 1} trailing',
    b'{"a": 1, "a": 2}',
    b"\x00",
)


def bodies(route_body: st.SearchStrategy[Any]) -> st.SearchStrategy[bytes | None]:
    """A route's body, usually valid JSON of its shape, sometimes mangled: cut short, not UTF-8, replaced."""

    def mangle(data: bytes, how: int, at: int) -> bytes:
        cut = at % (len(data) + 1)
        if how == 0:
            return data[:cut]
        if how == 1:
            return data[:cut] + b"\xff" + data[cut:]
        return data[:cut] + b"\xed\xa0\x80" + data[cut:]

    encoded = route_body.map(encode)
    mangled = st.builds(mangle, encoded, st.integers(0, 2), st.integers(0, 10_000))
    return st.integers(0, 19).flatmap(
        lambda i: (
            st.sampled_from(_HOSTILE_BODIES) if i == 0 else mangled if i == 1 else st.none() if i == 2 else encoded
        )
    )


# --- one strategy per route ------------------------------------------------------------------------------

_QUERY_PARAMS = {
    "GET /apps/{app_name}/users/{user_id}/sessions/{session_id}": (
        "num_recent_events",
        "after_timestamp",
        "limit",
        "next_token",
        "after_summary",
    ),
    "GET /apps/{app_name}/users/{user_id}/sessions/{session_id}/events": (
        "id",
        "id_prefix",
        "after_id",
        "order",
        "limit",
    ),
    "GET /apps/{app_name}/users/{user_id}/sessions": ("limit", "next_token"),
    "GET /apps/{app_name}/sessions": ("limit", "next_token"),
    "GET /apps/{app_name}/users/{user_id}/sessions/{session_id}/context": (
        "format",
        "max_tokens",
        "max_messages",
        "max_chars",
        "keep_first",
        "start_with_user",
        "include_summary",
        "system",
        "memories",
        "memory_query",
        "memory_min_score",
        "profile",
    ),
    "GET /apps/{app_name}/users/{user_id}/memories/search": ("query", "top_k", "min_score"),
    "GET /apps/{app_name}/users/{user_id}/sessions/{session_id}/export": ("format", "limit", "next_token"),
    "POST /apps/{app_name}/users/{user_id}/sessions/import": ("session_id", "replace"),
    "DELETE /apps/{app_name}/users/{user_id}/sessions/{session_id}/events/{event_id}": ("pairs",),
    "DELETE /apps/{app_name}/users/{user_id}/sessions/{session_id}/events": ("before_seq", "before_invocation_id"),
}

_BODIES: dict[str, st.SearchStrategy[Any]] = {
    "POST /apps/{app_name}/users/{user_id}/sessions": session_bodies(),
    "POST /apps/{app_name}/users/{user_id}/sessions/{session_id}/events": events(),
    "POST /apps/{app_name}/users/{user_id}/memories": memory_bodies(),
    "POST /apps/{app_name}/users/{user_id}/memories/search": search_bodies(),
    "POST /apps/{app_name}/users/{user_id}/sessions/{session_id}/context": context_bodies(),
    "POST /apps/{app_name}/users/{user_id}/sessions/import": import_bodies(),
    "PUT /apps/{app_name}/users/{user_id}/sessions/{session_id}/memo": memo_bodies(),
}

_POOLS = {
    "app_name": APPS,
    "user_id": USERS,
    "session_id": SESSIONS,
    "memory_id": ("m1", "mem-x", "0" * 64),
    "event_id": ("e1", "evt-1", "u1"),
}


def requests_for(route: Route) -> st.SearchStrategy[Request]:
    """Hostile requests to ``route``: its path with drawn segments, its query parameters, headers and body."""
    names = [part[1:-1] for part in route.path.split("/") if part.startswith("{")]
    segments = st.fixed_dictionaries({n: _segment(_POOLS.get(n, ("x",))) for n in names})
    body_shape = _BODIES.get(route.route_key)
    body = (
        bodies(body_shape)
        if body_shape is not None
        else st.one_of(st.none(), st.none(), st.none(), bodies(json_values(3)))
    )

    def build(seg: dict[str, str], query: str, headers: tuple[tuple[str, str], ...], data: bytes | None) -> Request:
        path = route.path
        for name, value in seg.items():
            path = path.replace("{" + name + "}", value)
        if data is None:
            headers = tuple(h for h in headers if h[0] != "content-type")
        return Request(route.route_key, route.method, path, query, headers, data)

    return st.builds(
        build, segments, _query(_QUERY_PARAMS.get(route.route_key, ())), _headers(route.method == "POST"), body
    )
