"""Finding a free port and asking whether `make run` answers on one: standard library only, so that a process
without the server's dependencies (the client's environment, which runs bench.perf.integration_reads) starts and
waits for the server the way ``local.server.spawn`` does."""

from __future__ import annotations

import http.client
import socket


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def answers(port: int) -> bool:
    """Whether the server on ``port`` is up: it answers 404 ``route_not_found`` on a path no route matches (and no
    handler is loaded for it)."""
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        try:
            connection.request("GET", "/-ready")
            return connection.getresponse().status == 404
        finally:
            connection.close()
    except OSError:
        return False
