"""Timeouts against a real socket that accepts requests and never answers, and a port nobody listens on."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest
from support import Driver

from agent_memory_client.errors import RequestTimeout, TransportError


class Silent:
    """A TCP server that reads each request and never answers; counts the requests it received."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.requests = 0
        self.open: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.05)
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(1)
            try:
                if conn.recv(65536):
                    self.requests += 1
            except OSError:
                pass
            self.open.append(conn)  # held open, never answered

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        for conn in self.open:
            conn.close()
        self.sock.close()


@pytest.fixture
def silent() -> Iterator[Silent]:
    server = Silent()
    yield server
    server.close()


async def test_each_attempt_times_out_and_is_retried(kind: str, silent: Silent) -> None:
    client = Driver(kind, silent.url, timeout=0.3, max_retries=2, backoff=0.0)
    started = time.monotonic()
    with pytest.raises(RequestTimeout) as caught:
        await client.call("get_session", "app", "u", "s1")
    elapsed = time.monotonic() - started
    assert silent.requests == 3 and len(client.sleeps) == 2
    assert caught.value.status is None and caught.value.code == "timeout"
    assert 0.9 <= elapsed < 5  # three read timeouts of 0.3 s, not the default 10 s
    await client.close()


async def test_a_request_that_may_have_landed_is_not_replayed_when_that_is_unsafe(kind: str, silent: Silent) -> None:
    client = Driver(kind, silent.url, timeout=0.3, max_retries=3, backoff=0.0)
    with pytest.raises(RequestTimeout):
        await client.call("create_session", "app", "u", session_id="mine", strict=True)
    assert silent.requests == 1 and client.sleeps == []
    await client.close()


async def test_a_refused_connection_is_retried_then_raised(kind: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nobody listens there
    client = Driver(kind, f"http://127.0.0.1:{port}", timeout=1, max_retries=2, backoff=0.0)
    with pytest.raises(TransportError) as caught:
        await client.call("create_session", "app", "u", session_id="mine", strict=True)  # never sent: retried
    assert not isinstance(caught.value, RequestTimeout) and "ConnectError" in caught.value.message
    assert caught.value.code == "connection_error"
    assert len(client.sleeps) == 2
    await client.close()
