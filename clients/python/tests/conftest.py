"""The client's tests run against `make run`: the project's local server, started once per test session in a
child process with the project's own environment (`.venv`, which `make test` builds first), on free ports and a
fresh data folder. Set AGENT_MEMORY_URL to run them against another server instead (a deployed stack's ApiUrl:
the client signs with SigV4 from the standard credential chain).
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
SERVER_PYTHON = Path(os.environ.get("AGENT_MEMORY_SERVER_PYTHON", ROOT / ".venv" / "bin" / "python"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(port: int) -> bool:
    # The server answers 404 route_not_found on a path no route matches: up, and no handler loaded yet.
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
        try:
            connection.request("GET", "/-ready")
            return connection.getresponse().status == 404
        finally:
            connection.close()
    except OSError:
        return False


@contextlib.contextmanager
def local_server(
    extra_env: dict[str, str] | None = None, startup_s: float = 90, auth: str = "iam", data_dir: Path | None = None
) -> Iterator[str]:
    """`make run` (embedded backend) in a child process; yields its base URL, then stops it.

    ``auth`` as `make run AUTH=…`; ``data_dir`` (else a temporary folder) holds the data and, with ``auth="jwt"``,
    the signing key `python -m local.token --data-dir` mints with."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "VIRTUAL_ENV", "PYTHON"))}
    env |= {"PYTHONUNBUFFERED": "1"} | (extra_env or {})
    with tempfile.TemporaryDirectory(prefix="agent-memory-client-") as folder, open(Path(folder) / "log", "w+") as log:
        command = [str(SERVER_PYTHON), "-m", "local.server", "--port", str(port), "--backend", "embedded"]
        command += ["--data-dir", str(data_dir or Path(folder) / "data"), "--moto-port", str(_free_port())]
        command += ["--auth", auth]
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, text=True)
        try:
            deadline = time.monotonic() + startup_s
            while not _answers(port):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    raise RuntimeError(f"local server did not start:\n{log.read()[-5000:]}")
                time.sleep(0.1)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """The API under test: AGENT_MEMORY_URL, else `make run` started for this test session."""
    if url := os.environ.get("AGENT_MEMORY_URL"):
        yield url.rstrip("/")
        return
    with local_server() as url:
        yield url


@pytest.fixture
def app_name() -> str:
    """An app of this test's own: tests share one server, so each works in a namespace nobody else uses."""
    return f"app-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["sync", "async"])
def kind(request: pytest.FixtureRequest) -> str:
    """Which client a test drives: both run every test that takes this fixture."""
    return str(request.param)
