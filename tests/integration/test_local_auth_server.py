"""``make run AUTH=jwt`` over real HTTP: API Gateway's JWT authorizer in front of the handlers, locally."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from local.auth import mint
from local.server import spawned
from local.token import token_claims

UNAUTHORIZED = {"message": "Unauthorized"}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("jwt-data")


@pytest.fixture(scope="module")
def base_url(data_dir: Path) -> Iterator[str]:
    with spawned(data_dir=data_dir, auth="jwt") as url:
        yield url


def _as(data_dir: Path, user: str, *, admin: bool = False, app: str | None = None) -> dict[str, str]:
    """The headers of a caller holding a token ``python -m local.token --user <user>`` would print."""
    return {"authorization": f"Bearer {mint(data_dir, token_claims(user, admin=admin, app=app))}"}


def test_a_request_without_a_good_token_gets_api_gateways_401(base_url: str, data_dir: Path) -> None:
    path = "/apps/demo/users/alice/sessions"
    now = int(time.time())
    refused = {
        "no token": {},
        "not a token": {"authorization": "Bearer nope"},
        "expired": {"authorization": f"Bearer {mint(data_dir, {'sub': 'alice'}, now=now - 7200)}"},
        "wrong audience": {"authorization": f"Bearer {mint(data_dir, {'sub': 'alice'}, audience='other')}"},
        "wrong issuer": {"authorization": f"Bearer {mint(data_dir, {'sub': 'alice'}, issuer='https://x.example')}"},
    }
    with httpx.Client(base_url=base_url, timeout=30) as http:
        for case, headers in refused.items():
            for method in ("GET", "POST"):
                reply = http.request(method, path, headers=headers, json={"session_id": "s"})
                assert (reply.status_code, reply.json()) == (401, UNAUTHORIZED), (case, method)
        # Nothing was created by the refused POSTs.
        listed = http.get(path, headers=_as(data_dir, "alice"))
        assert listed.status_code == 200 and listed.json()["sessions"] == []


def test_a_token_for_alice_reads_and_writes_alices_memory(base_url: str, data_dir: Path) -> None:
    alice = _as(data_dir, "alice")
    with httpx.Client(base_url=base_url, timeout=30, headers=alice) as http:
        created = http.post("/apps/mine/users/alice/sessions", json={"session_id": "trip"})
        assert created.status_code == 201
        appended = http.post("/apps/mine/users/alice/sessions/trip/events", json={"role": "user", "content": "hi"})
        assert appended.status_code == 201
        got = http.get("/apps/mine/users/alice/sessions/trip")
        assert got.status_code == 200 and got.json()["events"][0]["content"]["parts"][0]["text"] == "hi"


def test_the_key_outlives_a_restart_so_do_the_tokens(tmp_path: Path) -> None:
    with spawned(data_dir=tmp_path, auth="jwt") as url:
        token = _as(tmp_path, "dora")
        created = httpx.post(f"{url}/apps/a/users/dora/sessions", json={"session_id": "s"}, headers=token, timeout=30)
        assert created.status_code == 201
    with spawned(data_dir=tmp_path, auth="jwt") as url:
        assert httpx.get(f"{url}/apps/a/users/dora/sessions/s", headers=token, timeout=30).status_code == 200
        assert httpx.get(f"{url}/apps/a/users/dora/sessions/s", timeout=30).status_code == 401


def test_alices_token_reaches_nothing_of_bobs_and_an_admin_token_lists_the_app(base_url: str, data_dir: Path) -> None:
    """The authorizer lets alice's token through; the functions, run with AUTH_MODE=jwt, bind it to alice."""
    with httpx.Client(base_url=base_url, timeout=30) as http:
        bob = _as(data_dir, "bob")
        assert http.post("/apps/shared/users/bob/sessions", json={"session_id": "b1"}, headers=bob).status_code == 201
        alice = _as(data_dir, "alice")
        for method, path in [
            ("GET", "/apps/shared/users/bob/sessions"),
            ("GET", "/apps/shared/users/bob/sessions/b1"),
            ("POST", "/apps/shared/users/bob/sessions/b1/events"),
            ("DELETE", "/apps/shared/users/bob/sessions/b1"),
            ("DELETE", "/apps/shared/users/bob/memories"),
            ("GET", "/apps/shared/sessions"),
        ]:
            body = {"role": "user", "content": "x"} if method == "POST" else None
            reply = http.request(method, path, headers=alice, json=body)
            assert reply.status_code == 403 and reply.json()["error"]["code"] == "forbidden", (method, path)
        assert http.get("/apps/shared/users/bob/sessions/b1", headers=bob).status_code == 200  # still there
        admin = _as(data_dir, "carol", admin=True)
        listed = http.get("/apps/shared/sessions", headers=admin)
        assert listed.status_code == 200
        assert [(s["user_id"], s["id"]) for s in listed.json()["sessions"]] == [("bob", "b1")]


def test_with_jwt_app_claim_set_a_token_reaches_only_its_own_app(tmp_path: Path) -> None:
    with spawned({"JWT_APP_CLAIM": "app"}, data_dir=tmp_path, auth="jwt") as url, httpx.Client(base_url=url) as http:
        bound = _as(tmp_path, "alice", app="mine")
        assert http.post("/apps/mine/users/alice/sessions", json={"session_id": "s"}, headers=bound).status_code == 201
        assert http.get("/apps/other/users/alice/sessions", headers=bound).status_code == 403
        assert http.get("/apps/mine/users/alice/sessions", headers=_as(tmp_path, "alice")).status_code == 403
