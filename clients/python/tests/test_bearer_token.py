"""`bearer_token=` against `make run AUTH=jwt`: tokens minted by `python -m local.token`, checked by the local
server as API Gateway's JWT authorizer checks them."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import ROOT, SERVER_PYTHON, local_server

from agent_memory_client import AsyncClient, Client, errors


@pytest.fixture(scope="module")
def jwt_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """`make run AUTH=jwt` for this module: its URL and the data folder that holds its signing key."""
    data_dir = tmp_path_factory.mktemp("jwt")
    with local_server(auth="jwt", data_dir=data_dir) as url:
        yield url, data_dir


def token(data_dir: Path, user: str, *extra: str) -> str:
    """What `.venv/bin/python -m local.token --user <user>` prints."""
    command = [str(SERVER_PYTHON), "-m", "local.token", "--user", user, "--data-dir", str(data_dir), *extra]
    return subprocess.run(command, cwd=ROOT, check=True, capture_output=True, text=True).stdout.strip()


def test_a_bearer_token_reaches_its_own_users_memory(jwt_server: tuple[str, Path], app_name: str) -> None:
    url, data_dir = jwt_server
    with Client(url, bearer_token=token(data_dir, "alice")) as alice:
        alice.create_session(app_name, "alice", session_id="s1")
        alice.append_event(app_name, "alice", "s1", {"role": "user", "content": "hello"})
        assert [e.id for e in alice.get_session(app_name, "alice", "s1").events] != []
        assert [s.id for s in alice.list_sessions(app_name, "alice").sessions] == ["s1"]


async def test_the_async_client_sends_it_too(jwt_server: tuple[str, Path], app_name: str) -> None:
    url, data_dir = jwt_server
    async with AsyncClient(url, bearer_token=token(data_dir, "alice")) as alice:
        await alice.create_session(app_name, "alice", session_id="s1")
        assert [s.id for s in (await alice.list_sessions(app_name, "alice")).sessions] == ["s1"]


def test_no_token_or_an_expired_one_is_unauthorized(jwt_server: tuple[str, Path], app_name: str) -> None:
    url, data_dir = jwt_server
    for client in (Client(url), Client(url, bearer_token=token(data_dir, "alice", "--expires-in", "-60"))):
        with client, pytest.raises(errors.Unauthorized) as info:
            client.list_sessions(app_name, "alice")
        assert info.value.status == 401 and info.value.message == "Unauthorized"


def test_alices_token_cannot_reach_bobs_memory_an_admin_token_lists_the_app(
    jwt_server: tuple[str, Path], app_name: str
) -> None:
    url, data_dir = jwt_server
    with (
        Client(url, bearer_token=token(data_dir, "bob")) as bob,
        Client(url, bearer_token=token(data_dir, "alice")) as alice,
        Client(url, bearer_token=token(data_dir, "root", "--admin")) as admin,
    ):
        bob.create_session(app_name, "bob", session_id="b1")
        for call in (
            lambda: alice.get_session(app_name, "bob", "b1"),
            lambda: alice.list_sessions(app_name, "bob"),
            lambda: alice.append_event(app_name, "bob", "b1", {"role": "user", "content": "mine now"}),
            lambda: alice.delete_session(app_name, "bob", "b1"),
            lambda: alice.list_sessions(app_name),
        ):
            with pytest.raises(errors.Forbidden) as info:
                call()
            assert info.value.status == 403 and info.value.code == "forbidden"
        assert len(bob.get_session(app_name, "bob", "b1").events) == 0  # alice's append never landed
        assert [(s.user_id, s.id) for s in admin.list_sessions(app_name).sessions] == [("bob", "b1")]
