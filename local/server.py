"""``make run``: the whole API on http://127.0.0.1:3000 with no AWS account and no Docker.

Each request is matched against ``template.yaml``'s routes, turned into an API Gateway HTTP API (payload 2.0)
event and handed to the real handler of the function the template routes it to; the template's schedules and
its stream mapping run on timers. Two backends (``--backend`` / ``BACKEND``):

- ``embedded`` (the default): one SQLite file under ``--data-dir`` (``.data/``) holds everything, and survives
  restarts; its outbox feeds auto-save (``local/changefeed.py``). Fit for a single-machine deployment.
- ``moto``: an in-process moto server stands in for DynamoDB, S3 and EventBridge (the table and bucket created
  from the template), to watch the AWS adapters work; its data is gone when the server stops.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .apigw import LambdaContext, http_api_event, response_body
from .auth import AUDIENCE, ISSUER, UNAUTHORIZED_BODY, JwtAuthorizer, Unauthorized, auth_dir, jwt_authorizer_context
from .changefeed import start_change_feed
from .probe import answers
from .probe import free_port as free_port  # re-exported: the tests and benches take it from here
from .streams import start_stream_mappings
from .template import (
    Route,
    Schedule,
    function_environment,
    functions,
    load_handler,
    load_template,
    parameter_defaults,
    provision,
    routes,
    schedules,
)

LOCAL_TABLE = "agent-memory-local"
LOCAL_BUCKET = "agent-memory-local-context"

# The auto-save batching window of `make run` when AUTOSAVE_WINDOW_SECONDS does not name one. The template's
# window (AutoSaveBatchingWindowSeconds, 300 s) is a price lever: a deployment pays S3 writes per user per batch,
# so a longer window is cheaper there. Locally nothing is paid, and a developer trying auto-save expects to find
# a turn in search within seconds, not five minutes; the batch size stays the template's.
LOCAL_AUTOSAVE_WINDOW_S = 10.0


class LocalApi:
    """Routes requests to the template's handlers; with ``authorizer``, a JWT authorizer guards every route."""

    def __init__(self, template: dict[str, Any], authorizer: JwtAuthorizer | None = None) -> None:
        self.template = template
        self.routes = routes(template)
        self.authorizer = authorizer

    def handle(
        self, method: str, raw_path: str, headers: dict[str, str], body: bytes | None
    ) -> tuple[int, dict[str, str], bytes]:
        split = urlsplit(raw_path)
        path = split.path
        for route in self.routes:
            params = route.match(method, path)
            if params is not None:
                return self.invoke(route, path, params, split.query, headers, body)
        allowed = any(r.match(r.method, path) is not None for r in self.routes)
        status, code = (405, "method_not_allowed") if allowed else (404, "route_not_found")
        return _error(status, code, f"no route for {method} {path}")

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, Any]:
        """One JSON request without HTTP (benchmarks): the status and the parsed body (None when empty)."""
        status, _, payload = self.handle(method, path, {}, None if body is None else json.dumps(body).encode())
        return status, json.loads(payload) if payload else None

    def invoke(
        self,
        route: Route,
        path: str,
        params: dict[str, str],
        raw_query: str,
        headers: dict[str, str],
        body: bytes | None,
    ) -> tuple[int, dict[str, str], bytes]:
        context = None
        if self.authorizer is not None:
            # As API Gateway: a matched route's authorizer runs first; a refusal never reaches the function.
            try:
                context = jwt_authorizer_context(self.authorizer.authorize(headers))
            except Unauthorized as exc:
                print(f"401 {route.method} {path}: {exc}", file=sys.stderr)
                return _unauthorized()
        event = http_api_event(route, path, params, raw_query=raw_query, headers=headers, body=body, authorizer=context)
        response = load_handler(route)(event, LambdaContext(function_name=route.function))
        out_headers = {k.lower(): str(v) for k, v in (response.get("headers") or {}).items()}
        return int(response["statusCode"]), out_headers, response_body(response)


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, str], bytes]:
    """A response in the API's JSON error shape."""
    return (
        status,
        {"content-type": "application/json"},
        json.dumps({"error": {"code": code, "message": message}}).encode(),
    )


def _unauthorized() -> tuple[int, dict[str, str], bytes]:
    """API Gateway's answer when its JWT authorizer refuses a request (not the API's own error shape)."""
    return 401, {"content-type": "application/json", "www-authenticate": "Bearer"}, UNAUTHORIZED_BODY


def _joined(items: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Request headers as API Gateway's payload 2.0 gives them: names in lower case, repeats joined by commas."""
    joined: dict[str, str] = {}
    for name, value in items:
        key = name.lower()
        joined[key] = f"{joined[key]},{value}" if key in joined else value
    return joined


def configure_environment(template: dict[str, Any], endpoint: str | None) -> None:
    """Point boto3 at moto (when ``endpoint``) and give the process the functions' environment from the template."""
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    if endpoint:
        os.environ.update(
            {"AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "local", "AWS_SECRET_ACCESS_KEY": "local"}
        )
    for function in functions(template):
        for name, value in function_environment(template, function, local_names(template)).items():
            os.environ.setdefault(name, value)  # the caller's environment overrides the template's defaults


def local_names(template: dict[str, Any]) -> dict[str, str]:
    """What ``!Ref`` resolves to locally: parameter defaults, the local table and bucket; no sweep worker function,
    so the compaction schedule's dispatcher runs its workers in this process (``Services.sweep_invoker``)."""
    return parameter_defaults(template) | {
        "MemoryTable": LOCAL_TABLE,
        "ContextBucket": LOCAL_BUCKET,
        "CompactWorkerFunction": "",
    }


def start_schedules(template: dict[str, Any], every_s: float, stop: threading.Event) -> list[threading.Thread]:
    """Run the template's scheduled functions every ``every_s`` seconds (EventBridge schedules, locally)."""
    threads = []
    for schedule in schedules(template, local_names(template)):

        def tick(schedule: Schedule = schedule) -> None:
            handler = load_handler(schedule)
            while not stop.wait(every_s):
                event = {
                    "version": "0",
                    "id": str(uuid.uuid4()),
                    "detail-type": "Scheduled Event",
                    "source": "aws.events",
                    "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    "resources": [f"local:{schedule.function}"],
                    "detail": {},
                }
                try:
                    result = handler(event, LambdaContext(function_name=schedule.function, deadline=time.time() + 60))
                    if result and (result.get("compacted") or result.get("failed")):
                        print(f"schedule {schedule.function}: {result}", file=sys.stderr)
                except Exception as exc:  # keep the timer alive; the error is in the log
                    print(f"schedule {schedule.function} failed: {exc!r}", file=sys.stderr)

        thread = threading.Thread(target=tick, name=f"schedule-{schedule.function}", daemon=True)
        thread.start()
        threads.append(thread)
    return threads


def _import_shared_extensions() -> None:
    """Import numpy once, here, before any thread starts. Handlers import it lazily (the search index, the
    embedders), and its C extension fails when two threads import it at once ("cannot import name
    '__cpu_features__' from partially initialized module"): two first requests, or a request and the change feed's
    auto-save, would race. Handler modules themselves load under ``load_handler``'s lock."""
    with contextlib.suppress(ImportError):
        importlib.import_module("numpy")


BACKENDS = ("embedded", "moto")
AUTH_MODES = ("iam", "jwt")


# The embedded backend's lock: one server per data folder (a second one, or ``make wipe``, would lose writes).
LOCK_FILE = ".lock"


class DataDirInUse(SystemExit):
    """Another process holds the data folder's lock."""


def lock_data_dir(data_dir: str) -> Any:
    """Take the data folder's exclusive lock (``flock``), created 0700 with its files 0600 (the server's umask is
    077; files an older server made readable are narrowed). Returns the open lock file, held until the process
    ends. ``DataDirInUse`` (one line, exit status 1) when another server, or ``make wipe``, holds it."""
    import fcntl

    folder = Path(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o700)
    lock = open(folder / LOCK_FILE, "a+")  # noqa: SIM115 (held for the process's life)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        lock.seek(0)
        holder = lock.read().strip() or "another process"
        lock.close()
        raise DataDirInUse(
            f"{data_dir} is in use by {holder}: stop that server first (one server per DATA_DIR)"
        ) from None
    lock.seek(0)
    lock.truncate()
    lock.write(f"pid {os.getpid()}")
    lock.flush()
    for path in folder.iterdir():
        if path.is_file():
            path.chmod(0o600)
    return lock


class _Server(ThreadingHTTPServer):
    # The listen backlog: connections a burst opens before the accept loop takes them (socketserver's default,
    # 5, left clients of a 128-connection burst unanswered or reset).
    request_queue_size = 1024
    daemon_threads = True


def start(
    host: str,
    port: int,
    backend: str = "embedded",
    data_dir: str = ".data",
    moto_port: int | None = None,
    auth: str = "iam",
) -> tuple[ThreadingHTTPServer, Callable[[], None]]:
    """Start the backend and the API (in background threads); return the API server and a function that stops
    everything.

    ``auth``: ``iam`` (every request arrives as the IAM caller ``local``, as today) or ``jwt`` (API Gateway's JWT
    authorizer emulated with the local key under ``data_dir``, and the functions run with ``AUTH_MODE=jwt``).
    """
    import logging

    if backend not in BACKENDS:
        raise SystemExit(f"--backend must be one of {', '.join(BACKENDS)}, not {backend!r}")
    if auth not in AUTH_MODES:
        raise SystemExit(f"--auth must be one of {', '.join(AUTH_MODES)}, not {auth!r}")
    template = load_template()
    _import_shared_extensions()
    # The functions run in the mode the server emulates, as the template's AuthMode sets it for both (whatever the
    # caller's environment says); the Jwt* settings keep the caller's values, else the template's defaults.
    os.environ["AUTH_MODE"] = auth
    authorizer = JwtAuthorizer.from_data_dir(data_dir) if auth == "jwt" else None
    stop = threading.Event()
    window = os.environ.get("AUTOSAVE_WINDOW_SECONDS")
    window_s = float(window) if window else LOCAL_AUTOSAVE_WINDOW_S
    if backend == "moto":
        from .moto_backend import SerializedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's per-request access log
        moto_port = moto_port or free_port()
        moto = SerializedMotoServer(ip_address="127.0.0.1", port=moto_port, verbose=False)
        moto.start()
        # The table and bucket are the ones provisioned here, whatever the caller's environment names.
        os.environ.update({"BACKEND": "aws", "TABLE_NAME": LOCAL_TABLE, "BUCKET_NAME": LOCAL_BUCKET})
        configure_environment(template, f"http://127.0.0.1:{moto_port}")
        from agent_memory.runtime.aws import client, reset_clients

        reset_clients()
        provision(template, client("dynamodb"), client("s3"), LOCAL_TABLE, LOCAL_BUCKET)
        start_stream_mappings(
            template,
            local_names(template),
            client("dynamodb"),
            client("dynamodbstreams"),
            LOCAL_TABLE,
            window_s,
            stop,
        )
        stop_backend: Callable[[], None] = moto.stop
    else:
        held = lock_data_dir(data_dir)
        os.environ.update({"BACKEND": "embedded", "DATA_DIR": str(Path(data_dir).resolve())})
        configure_environment(template, None)
        from agent_memory.composition import services

        services.cache_clear()
        wired = services()
        start_change_feed(template, local_names(template), wired.change_feed, window_s, stop)

        def stop_backend() -> None:
            wired.close()
            held.close()

    api = LocalApi(template, authorizer)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        # TCP_NODELAY: headers and body go out in two writes; with Nagle on, a keep-alive client's delayed ACK
        # held every answer ~40 ms (bench/perf/client_overhead.py: ~45 ms -> 2-7 ms per call).
        disable_nagle_algorithm = True

        def _serve(self) -> None:
            try:
                length = int(self.headers.get("content-length") or 0)
            except ValueError:
                length = -1
            if length < 0:
                self.close_connection = True  # where the body ends is unknown: nothing more can be read
                status, headers, payload = _error(400, "invalid_input", "Content-Length is not a byte count")
            else:
                body = self.rfile.read(length) if length else None
                try:
                    status, headers, payload = api.handle(self.command, self.path, _joined(self.headers.items()), body)
                except Exception:
                    # A Lambda that raises is answered 500 by API Gateway; never leave the client without an answer.
                    traceback.print_exc()
                    status, headers, payload = _error(500, "internal_error", "the handler raised; see the server log")
            self.send_response(status)
            for key, value in headers.items():
                if key not in {"content-length", "connection"}:
                    self.send_header(key, value)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(payload)

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

        def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
            """A request the HTTP layer refused (a malformed request line or header, a method no route has):
            answered as the API answers errors, JSON naming what was wrong, and the connection closed."""
            self.close_connection = True
            # A line that names no HTTP version is taken for HTTP/0.9, which has no status line: answer with one.
            if getattr(self, "request_version", "HTTP/0.9") == "HTTP/0.9":
                self.request_version = "HTTP/1.0"
            payload = json.dumps({"error": {"code": "invalid_request", "message": message or ""}}).encode()
            with contextlib.suppress(OSError):
                self.send_response(code, message)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.send_header("connection", "close")
                self.end_headers()
                if getattr(self, "command", None) != "HEAD":
                    self.wfile.write(payload)

        def log_message(self, format: str, *args: Any) -> None:
            # A malformed request line leaves command and path unset.
            command, path = getattr(self, "command", None) or "-", getattr(self, "path", None) or "-"
            sys.stderr.write(f"{command} {path} -> {args[1] if len(args) > 1 else format % args}\n")

    server = _Server((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    start_schedules(template, float(os.environ.get("SCHEDULE_SECONDS", "10")), stop)

    def shutdown() -> None:
        server.shutdown()
        stop.set()
        stop_backend()

    return server, shutdown


@dataclass(frozen=True)
class Spawned:
    url: str
    pid: int


@contextlib.contextmanager
def spawned(
    extra_env: dict[str, str] | None = None,
    startup_s: float = 60,
    log_path: Path | None = None,
    backend: str = "embedded",
    data_dir: Path | None = None,
    auth: str = "iam",
    extra_args: list[str] | None = None,
) -> Iterator[str]:
    """``make run`` in a child process on free ports (tests, benchmarks); yields its base URL, then stops it.
    See ``spawn``."""
    with spawn(extra_env, startup_s, log_path, backend, data_dir, auth, extra_args) as server:
        yield server.url


@contextlib.contextmanager
def spawn(
    extra_env: dict[str, str] | None = None,
    startup_s: float = 60,
    log_path: Path | None = None,
    backend: str = "embedded",
    data_dir: Path | None = None,
    auth: str = "iam",
    extra_args: list[str] | None = None,
) -> Iterator[Spawned]:
    """``make run`` in a child process on free ports (tests, benchmarks); yields its URL and process id, then
    stops it.

    ``backend`` as ``make run BACKEND=…`` and ``auth`` as ``make run AUTH=…``; the embedded backend keeps its data
    (and ``auth="jwt"`` its signing key: mint with ``local.auth.mint(data_dir, …)``) in ``data_dir`` (else in a
    temporary folder removed afterwards; pass a folder to see data survive a restart). ``extra_args`` are added to
    the server's command line.

    The child gets this environment without its AWS settings (it makes its own), plus ``extra_env``. Its output
    goes to ``log_path`` (else a temporary file), not a pipe nobody reads (a full pipe would stop the server); the
    file's tail is in the error when the server does not come up. Readiness is probed on a path no route
    matches, so no handler is loaded before the caller's first request.
    """
    port = free_port()
    # Unbuffered: the log file holds each line as it is written (a reader can match log lines to requests).
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | {"PYTHONUNBUFFERED": "1"}
    env |= extra_env or {}
    root = Path(__file__).resolve().parent.parent
    with contextlib.ExitStack() as stack:
        folder = data_dir or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="agent-memory-")))
        log = stack.enter_context(open(log_path, "w+") if log_path else tempfile.TemporaryFile("w+"))  # noqa: SIM115
        command = [sys.executable, "-m", "local.server", "--port", str(port), "--backend", backend]
        command += ["--data-dir", str(folder), "--moto-port", str(free_port()), "--auth", auth, *(extra_args or [])]
        proc = subprocess.Popen(
            command,
            cwd=root,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            deadline = time.monotonic() + startup_s
            while not answers(port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"local server did not start:\n{log.read()[-5000:]}")
                time.sleep(0.1)
            yield Spawned(f"http://127.0.0.1:{port}", proc.pid)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--host", default=os.environ.get("HOST", "127.0.0.1"), help="bind address (0.0.0.0: all)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("PORT", "3000")))
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default=os.environ.get("BACKEND", "embedded"),
        help="embedded: SQLite under --data-dir, kept across restarts (default); moto: DynamoDB and S3 on moto",
    )
    parser.add_argument(
        "--data-dir", default=os.environ.get("DATA_DIR", ".data"), help="where the embedded backend keeps its data"
    )
    parser.add_argument(
        "--auth",
        choices=AUTH_MODES,
        default=os.environ.get("AUTH") or "iam",
        help="iam: no token asked (as AuthMode=iam); jwt: bearer tokens from python -m local.token (AuthMode=jwt)",
    )
    parser.add_argument("--moto-port", type=int, default=int(os.environ.get("MOTO_PORT", "0")) or None)
    parser.add_argument(
        "--schedule-seconds",
        type=float,
        default=float(os.environ.get("SCHEDULE_SECONDS", "10")),
        help="how often the scheduled functions (the compaction sweep) run; EventBridge would use the template's",
    )
    args = parser.parse_args(argv)
    os.umask(0o077)  # what the server creates (the database, its log, keys) is the user's alone
    os.environ["SCHEDULE_SECONDS"] = str(args.schedule_seconds)
    # A terminated server (``kill``, a test's child process) shuts down as on Ctrl-C: the data file is closed.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    _, shutdown = start(args.host, args.port, args.backend, args.data_dir, args.moto_port, args.auth)
    where = (
        f"moto on {os.environ['AWS_ENDPOINT_URL']}" if args.backend == "moto" else f"data in {os.environ['DATA_DIR']}"
    )
    print(f"agent memory API on http://{args.host}:{args.port}  ({args.backend}: {where})", flush=True)
    if args.auth == "jwt":
        print(
            f"  auth: jwt (issuer {ISSUER}, audience {AUDIENCE}, key in {auth_dir(args.data_dir)}); a token:"
            f" .venv/bin/python -m local.token --user alice --data-dir {args.data_dir}",
            flush=True,
        )
    for route in api_routes():
        print(f"  {route.method:6} {route.path}")
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
    finally:
        shutdown()


def api_routes() -> list[Route]:
    return routes(load_template())


if __name__ == "__main__":
    main()
