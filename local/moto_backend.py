"""moto as the local AWS: a server whose requests are applied one at a time.

moto keeps its state in plain dicts and is not safe under concurrent requests ("dictionary changed size during
iteration"). DynamoDB and S3 apply each request atomically; so does this server, by holding a lock while moto
handles a request. Requests from concurrent clients still interleave between requests, which is what the
service's concurrency handling (conditional writes, retries) is about.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.threaded_moto_server import ThreadedMotoServer
from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server

MOTO_LOCK = threading.RLock()


def serialized(app: Callable[..., Iterable[bytes]]) -> Callable[..., list[bytes]]:
    """Wrap a WSGI app so that one request at a time runs inside it (the body is read under the lock too)."""

    def wrapper(environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with MOTO_LOCK:
            return list(app(environ, start_response))

    return wrapper


class SerializedMotoServer(ThreadedMotoServer):
    def _server_entry(self) -> None:
        app = serialized(DomainDispatcherApplication(create_backend_app))
        self._server = make_server(self._ip_address, self._port, app, True, request_handler=MotoRequestHandler)
        self._server_ready_event.set()
        self._server.serve_forever()
