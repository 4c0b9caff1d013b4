"""The server the client's tests run against is `make run` from this checkout, answering in the project's shape."""

from __future__ import annotations

import httpx


def test_the_test_server_is_make_run_answering_the_projects_error_shape(server_url: str) -> None:
    answer = httpx.get(f"{server_url}/no/such/route", timeout=10)
    assert answer.status_code == 404
    assert answer.json()["error"]["code"] == "route_not_found"


def test_the_test_server_stores_a_session(server_url: str, app_name: str) -> None:
    created = httpx.post(f"{server_url}/apps/{app_name}/users/u1/sessions", json={"session_id": "s1"}, timeout=30)
    assert created.status_code == 201
    listed = httpx.get(f"{server_url}/apps/{app_name}/users/u1/sessions", timeout=30).json()
    assert [s["id"] for s in listed["sessions"]] == ["s1"]
