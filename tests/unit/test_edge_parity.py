"""The edge without pydantic answers exactly as Powertools' pydantic validation does.

``params.py`` takes a body-less route's parameters without pydantic when it is sure of them and leaves everything
else to Powertools' pydantic validation. Here every route of the table gets the same generated requests (the fuzz
tier's hostile ones: paths, query strings, headers and bodies) twice: through the project's resolver (``api``),
and through an oracle that is Powertools' own validated resolver over the route table's evaluated signatures, the
way every request was read before. A 4xx must be the same status and the same JSON body (code, message, field);
a request both take must reach the handler with the same arguments, of the same types.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_memory.edge import params
from tests.support.strategies import SESSIONS, Request, encode, requests_for, states
from tests.unit.parity import TABLE, TEMPLATE_ROUTES, answered_alike, gateway_event, route_handler

LEAN = {"taken": 0, "left": 0}


@pytest.fixture(autouse=True, scope="module")
def _count_lean() -> Any:
    real = params.arguments

    def counted(*args: Any, **kwargs: Any) -> Any:
        found = real(*args, **kwargs)
        LEAN["taken" if found is not None else "left"] += 1
        if found is not None and found.get("body") is not None:
            LEAN["bodies"] = LEAN.get("bodies", 0) + 1
            if isinstance(found["body"], params.Search):
                LEAN["searches"] = LEAN.get("searches", 0) + 1
            if isinstance(found["body"], (params.SaveSession, params.SaveTexts)):
                LEAN["saves"] = LEAN.get("saves", 0) + 1
        return found

    params.arguments = counted  # type: ignore[assignment]
    yield
    params.arguments = real  # type: ignore[assignment]


@pytest.mark.parametrize("key", [k for k in TABLE if k in TEMPLATE_ROUTES])
def test_every_route_answers_as_powertools_pydantic_validation_did(key: str) -> None:
    @settings(
        max_examples=120,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(requests_for(TEMPLATE_ROUTES[key]))
    def check(request: Request) -> None:
        if gateway_event(request) is not None:
            answered_alike(request)

    check()


CREATE = "POST /apps/{app_name}/users/{user_id}/sessions"


def _create_bodies() -> st.SearchStrategy[Any]:
    """Create bodies mostly of the shape params.py takes, at its edges: ids valid or nearly, states of every kind."""
    edges = st.sampled_from(("a" * 128, "a" * 129, "-x", "s\n", "s1 ", "é"))
    ids = st.integers(0, 3).flatmap(lambda i: edges if i == 0 else st.sampled_from(SESSIONS))
    plain = st.one_of(
        st.integers(-(10**6), 10**6), st.text(max_size=10), st.booleans(), st.none(), st.floats(-1e6, 1e6)
    )
    mapping = st.dictionaries(st.text(max_size=8), plain, max_size=4)
    state = st.one_of(mapping, mapping, st.none(), states())
    fields = st.fixed_dictionaries({}, optional={"session_id": ids, "state": state})
    odd = st.fixed_dictionaries({"sessionId": ids}, optional={"session_id": ids, "x": plain})
    return st.one_of(fields, fields, fields, odd, fields.map(lambda b: [b]), st.none())


@settings(max_examples=300, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(_create_bodies(), st.sampled_from((None, "*", "W/*")))
def test_the_create_body_is_read_as_pydantic_reads_it(body: Any, if_none_match: str | None) -> None:
    headers = (("content-type", "application/json"),) + ((("if-none-match", if_none_match),) if if_none_match else ())
    data = None if body is None else encode(body)
    answered_alike(Request(CREATE, "POST", "/apps/fz/users/u1/sessions", "", headers, data))


SEARCH = "POST /apps/{app_name}/users/{user_id}/memories/search"


def _mostly(common: st.SearchStrategy[Any], *edges: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``common`` three draws in four, else one of ``edges`` (a plain one_of draws the edges far more often)."""
    return st.integers(0, 3).flatmap(lambda i: st.one_of(*edges) if i == 0 else common)


def _search_bodies() -> st.SearchStrategy[Any]:
    """Search bodies mostly of the shape params.py takes, at its edges: queries around their bounds and blank ones,
    top_k and min_score inside, on and past their bounds, as integers, floats, booleans, strings and null."""
    queries = _mostly(
        st.text(min_size=1, max_size=12).filter(str.strip),
        st.sampled_from(("", " ", "\t\n", "a", " a ", "é", "\u2003", "\x00", "q" * 10_000, "q" * 10_001)),
        st.integers(0, 9),
        st.none(),
        st.lists(st.text(max_size=3), max_size=2),
    )
    counts = _mostly(
        st.integers(1, 100),
        st.integers(-2, 102),
        st.sampled_from((1, 5, 100, 101, 0, -1, 2**63, True, False, 5.0, 1.5, "5", None)),
    )
    scores = _mostly(
        st.one_of(st.floats(0.0, 1.0), st.sampled_from((0, 1, 0.0, -0.0, 1.0, 1e-300, None))),
        st.floats(-0.5, 1.5),
        st.sampled_from((2, -1, 1.0000001, True, False, "0.5", [0.5])),
        st.floats(allow_nan=True, allow_infinity=True),
    )
    fields = st.fixed_dictionaries({"query": queries}, optional={"top_k": counts, "min_score": scores})
    partial = st.fixed_dictionaries({}, optional={"top_k": counts, "min_score": scores})
    odd = st.fixed_dictionaries(
        {"query": queries}, optional={"topK": counts, "minScore": scores, "x": st.integers(), "QUERY": queries}
    )
    return _mostly(fields, partial, odd, fields.map(lambda b: [b]), st.none())


@settings(max_examples=400, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(_search_bodies())
def test_the_search_body_is_read_as_pydantic_reads_it(body: Any) -> None:
    data = None if body is None else encode(body)
    headers = (("content-type", "application/json"),)
    answered_alike(Request(SEARCH, "POST", "/apps/fz/users/u1/memories/search", "", headers, data))


SAVE = "POST /apps/{app_name}/users/{user_id}/memories"


def _save_bodies() -> st.SearchStrategy[Any]:
    """Save bodies mostly of the two shapes params.py takes, at their edges: texts around their bounds, times as
    numbers and ISO strings in and out of range, session ids valid or nearly, and the shapes it leaves."""
    texts = _mostly(
        st.text(min_size=1, max_size=12).filter(str.strip),
        st.sampled_from(("", " ", "\n", "é", "t" * 20_000, "t" * 20_001)),
        st.integers(0, 9),
        st.none(),
    )
    times = _mostly(
        st.one_of(st.floats(0, 2e9), st.integers(0, 2 * 10**9), st.sampled_from(("2024-01-01", "1700000000.5"))),
        st.sampled_from((-1, 253_402_300_799, 253_402_300_800, 1e300, True, None, "soon", "2024-01-01T00:00:00+05:00")),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=6),
    )
    item = _mostly(
        st.fixed_dictionaries({"text": texts}, optional={"timestamp": times}),
        st.fixed_dictionaries({"text": texts}, optional={"metadata": st.none() | st.just({"k": 1}), "x": texts}),
        st.fixed_dictionaries({}, optional={"timestamp": times}),
        texts,
    )
    memories = _mostly(
        st.lists(item, min_size=1, max_size=4),
        st.just([]),
        st.lists(st.fixed_dictionaries({"text": st.just("t")}), min_size=100, max_size=101),
        item,
    )
    ids = _mostly(st.sampled_from(SESSIONS), st.sampled_from(("a" * 128, "a" * 129, "-x", "", "é")), st.integers())
    plain = st.one_of(
        st.fixed_dictionaries({"memories": memories}),
        st.fixed_dictionaries({"session_id": ids}),
        st.fixed_dictionaries({"sessionId": ids}),
    )
    odd = st.one_of(
        st.fixed_dictionaries({"session_id": ids, "sessionId": ids}),
        st.fixed_dictionaries({"session_id": ids, "policy": st.sampled_from((None, "default", {"preset": "all"}))}),
        st.fixed_dictionaries({"memories": memories, "session_id": ids}),
        st.fixed_dictionaries({"events": st.just([])}),
    )
    return _mostly(plain, odd, plain.map(lambda b: [b]), st.none(), st.just({}))


@settings(max_examples=400, derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(_save_bodies())
def test_the_save_body_is_read_as_pydantic_reads_it(body: Any) -> None:
    data = None if body is None else encode(body)
    headers = (("content-type", "application/json"),)
    answered_alike(Request(SAVE, "POST", "/apps/fz/users/u1/memories", "", headers, data))


def test_a_common_search_body_is_read_without_pydantic_as_pydantic_reads_it() -> None:
    handler = route_handler(TABLE[SEARCH])
    taken = params.arguments(
        handler, {"app_name": "a", "user_id": "u"}, None, None, {}, lambda: {"query": "x", "min_score": 1}
    )
    assert taken is not None and taken["body"].model_dump() == {"query": "x", "top_k": 5, "min_score": 1.0}
    assert type(taken["body"].min_score) is float
    for refused in ({"query": "x", "top_k": True}, {"query": " "}, {"top_k": 5}, {"query": "x", "topK": 5}, None):
        assert params.arguments(handler, {"app_name": "a", "user_id": "u"}, None, None, {}, lambda r=refused: r) is None


@pytest.fixture(scope="module", autouse=True)
def the_lean_reading_takes_many_requests_and_leaves_many() -> Iterator[None]:
    """The parity of this module is not vacuous: once its tests ran in this process (whatever their order),
    params.py took (and so was compared on) many requests, and left some. Judged when they all ran here (about
    3,900 requests): a ``-k`` selection, or pytest-xdist spreading the module over processes, runs a share."""
    yield
    if LEAN["taken"] + LEAN["left"] < 3500:
        return
    assert LEAN["taken"] > 1000 and LEAN["left"] > 500, LEAN
    assert LEAN.get("bodies", 0) > 40, LEAN  # create's and search's bodies taken without pydantic
    assert LEAN.get("searches", 0) > 100, LEAN
    assert LEAN.get("saves", 0) > 100, LEAN


def test_a_body_less_route_is_read_without_pydantic_and_a_body_route_with_it() -> None:
    session = TABLE["GET /apps/{app_name}/users/{user_id}/sessions/{session_id}"]
    append = TABLE["POST /apps/{app_name}/users/{user_id}/sessions/{session_id}/events"]
    create = TABLE["POST /apps/{app_name}/users/{user_id}/sessions"]
    search = TABLE[SEARCH]
    assert params.plan(route_handler(session)).lean and params.plan(route_handler(create)).lean
    assert params.plan(route_handler(search)).lean and params.plan(route_handler(append)).lean
    assert not params.plan(route_handler(TABLE["POST /apps/{app_name}/users/{user_id}/sessions/import"])).lean
    assert params.arguments(
        route_handler(session),
        {"app_name": "a", "user_id": "u", "session_id": "s"},
        {"limit": "5", "after_timestamp": "2024-01-01T00:00:00"},
        "limit=5&after_timestamp=2024-01-01T00:00:00",
        {},
    ) == {
        "app_name": "a",
        "user_id": "u",
        "session_id": "s",
        "num_recent_events": None,
        "after_timestamp": 1704067200.0,
        "limit": 5,
        "next_token": None,
        "after_summary": False,
    }


def test_params_specs_name_types_the_models_declare() -> None:
    from agent_memory.edge import requests

    assert set(params.SPECS) <= set(vars(requests)), "a spec names a type requests.py does not declare"
