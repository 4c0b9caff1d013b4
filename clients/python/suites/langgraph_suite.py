"""LangGraph's own test suites with ``RemoteCheckpointSaver`` beside LangGraph's in-memory saver: which tests pass
with LangGraph's ``MemorySaverAssertImmutable`` (an ``InMemorySaver``, as LangGraph's conftest builds it) and fail
with the remote saver over `make run`. A developer tool, not part of `make test`.

LangGraph's tests parametrize the checkpointer through the ``sync_checkpointer`` and ``async_checkpointer``
fixtures of ``libs/langgraph/tests/conftest.py``. This script copies those tests to a temporary folder, replaces
``conftest.py``, ``conftest_checkpointer.py`` and ``conftest_store.py`` so that two checkpointers run, ``memory``
and ``remote`` (stores and caches in memory only: no docker, postgres, redis or sqlite), starts the local server
once (as the client's tests do: ``clients/python/tests/conftest.py::local_server``), runs pytest on each chosen
file in the client's environment and prints, per file, the tests passed and failed with each saver and those that
pass with ``memory`` but fail with ``remote``, with the first line of their failure. Only the tests that take a
checkpointer fixture run (``--all`` runs the others too). The ``--swap`` files (the DeltaChannel ones) build
``InMemorySaver()`` themselves: in their copy it is replaced by a factory of the saver under test, and each runs
twice, once per checkpointer.

Getting LangGraph's tests (any checkout of langchain-ai/langgraph; run against the *installed* langgraph, so a
test that also fails with ``memory`` is a version skew, not a saver bug)::

    git -C LANGGRAPH_REPO archive HEAD libs/langgraph/tests | tar -x -C /tmp/lg

Running it (from the repository's root, in the client's environment ``.venv-client``)::

    .venv-client/bin/python clients/python/suites/langgraph_suite.py --tests /tmp/lg/libs/langgraph/tests
    .venv-client/bin/python clients/python/suites/langgraph_suite.py --tests ... --files test_time_travel.py -k fork

``syrupy`` and ``pytest-mock`` are imported by LangGraph's tests; ``pytest-timeout`` bounds each test
(``--timeout``): all three are pinned in the client's test requirements, so ``make test`` installs them. The
server runs in the project's environment ``.venv`` (``make .venv``).
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CLIENT_TESTS = HERE.parent / "tests"
DEFAULT_FILES = [
    "test_time_travel.py",
    "test_time_travel_async.py",
    "test_subgraph_persistence.py",
    "test_subgraph_persistence_async.py",
    "test_interruption.py",
    "test_pregel.py",
    "test_pregel_async.py",
    "test_large_cases.py",
    "test_large_cases_async.py",
    "test_checkpoint_migration.py",
    "test_pydantic.py",
]
# Files whose tests build InMemorySaver() themselves (no checkpointer fixture): the harness swaps it for the saver
# under test and runs the file once per checkpointer.
DEFAULT_SWAP = [
    "test_delta_channel_exit_mode.py",
    "test_delta_channel_id_stability.py",
    "test_delta_channel_supersteps_bound.py",
    "test_delta_channel_update_state.py",
]
REQUIRED = {"syrupy": "syrupy", "pytest_mock": "pytest-mock", "anyio": "anyio", "langgraph": "langgraph"}
CHECKPOINTERS = ("memory", "remote")
FAILED = ("failed", "error")

# --- what replaces LangGraph's conftest files in the copy ------------------------------------------------------

CONFTEST = '''"""Written by clients/python/suites/langgraph_suite.py: LangGraph's fixtures with the checkpointers
"memory" (LangGraph's MemorySaverAssertImmutable) and "remote" (RemoteCheckpointSaver over LG_SUITE_URL), stores and
caches in memory only; records each test's outcome in LG_SUITE_RESULTS (JSON lines)."""

import json
import os
from collections.abc import AsyncIterator, Iterator
from uuid import UUID

import pytest
from langgraph.cache.base import BaseCache
from langgraph.cache.memory import InMemoryCache
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore
from pytest_mock import MockerFixture

from langgraph.types import Durability
from tests.conftest_checkpointer import _acheckpointer_remote, _checkpointer_memory, _checkpointer_remote
from tests.conftest_store import _store_memory

NO_DOCKER = True
CHECKPOINTERS = [c for c in os.environ.get("LG_SUITE_CHECKPOINTERS", "memory,remote").split(",") if c]
_FIXTURES = ("sync_checkpointer", "async_checkpointer")


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture()
def deterministic_uuids(mocker: MockerFixture) -> MockerFixture:
    side_effect = (UUID(f"00000000-0000-4000-8000-{i:012}", version=4) for i in range(10000))
    return mocker.patch("uuid.uuid4", side_effect=side_effect)


@pytest.fixture(params=["sync", "async", "exit"])
def durability(request: pytest.FixtureRequest) -> Durability:
    return request.param


@pytest.fixture(scope="function", params=["memory"])
def cache(request: pytest.FixtureRequest) -> Iterator[BaseCache]:
    yield InMemoryCache()


@pytest.fixture(scope="function", params=["in_memory"])
def sync_store(request: pytest.FixtureRequest) -> Iterator[BaseStore]:
    with _store_memory() as store:
        yield store


@pytest.fixture(scope="function", params=["in_memory"])
async def async_store(request: pytest.FixtureRequest) -> AsyncIterator[BaseStore]:
    with _store_memory() as store:
        yield store


@pytest.fixture(scope="function", params=CHECKPOINTERS)
def sync_checkpointer(request: pytest.FixtureRequest) -> Iterator[BaseCheckpointSaver]:
    if request.param == "memory":
        with _checkpointer_memory() as checkpointer:
            yield checkpointer
    elif request.param == "remote":
        with _checkpointer_remote() as checkpointer:
            yield checkpointer
    else:
        raise NotImplementedError(f"Unknown checkpointer: {request.param}")


@pytest.fixture(scope="function", params=CHECKPOINTERS)
async def async_checkpointer(request: pytest.FixtureRequest) -> AsyncIterator[BaseCheckpointSaver]:
    if request.param == "memory":
        with _checkpointer_memory() as checkpointer:
            yield checkpointer
    elif request.param == "remote":
        async with _acheckpointer_remote() as checkpointer:
            yield checkpointer
    else:
        raise NotImplementedError(f"Unknown checkpointer: {request.param}")


# --- the harness's bookkeeping -------------------------------------------------------------------------------

_ITEMS: dict = {}


def _checkpointer_of(item) -> str | None:
    callspec = getattr(item, "callspec", None)
    for name in _FIXTURES if callspec is not None else ():
        if name in callspec.params:
            return str(callspec.params[name])
    # A file whose InMemorySaver() the harness swapped: one run per checkpointer (LG_SUITE_SWAP).
    return os.environ.get("LG_SUITE_SWAP") or None


def _pair_key(nodeid: str, checkpointer: str | None) -> str:
    """The memory run's node id for this test (the remote run's "remote" parameter id read as "memory")."""
    if checkpointer != "remote" or "[" not in nodeid or os.environ.get("LG_SUITE_SWAP"):
        return nodeid
    head, _, ids = nodeid.partition("[")
    tokens = ids[:-1].split("-")
    return head + "[" + "-".join("memory" if t == "remote" else t for t in tokens) + "]"


def pytest_collection_modifyitems(config, items):
    keep, drop = [], []
    every = os.environ.get("LG_SUITE_ALL") == "1"
    for item in items:
        checkpointer = _checkpointer_of(item)
        (keep if every or checkpointer is not None else drop).append(item)
        _ITEMS[item.nodeid] = checkpointer
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _reason(report) -> str:
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple):  # a skip: (path, line, reason)
        return str(longrepr[2])
    crash = getattr(longrepr, "reprcrash", None)
    text = crash.message if crash is not None else str(longrepr)
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return (lines[0] if lines else "")[:300]


_OUTCOMES: dict = {}


def _record(nodeid: str, outcome: str, reason: str) -> None:
    path = os.environ.get("LG_SUITE_RESULTS")
    if not path:
        return
    checkpointer = _ITEMS.get(nodeid)
    line = {
        "nodeid": nodeid,
        "checkpointer": checkpointer,
        "key": _pair_key(nodeid, checkpointer),
        "outcome": outcome,
        "reason": reason,
    }
    with open(path, "a") as out:
        out.write(json.dumps(line) + "\\n")


def pytest_runtest_logreport(report):
    nodeid = report.nodeid
    state = _OUTCOMES.setdefault(nodeid, {"outcome": None, "reason": ""})
    if report.when == "setup":
        if report.failed:
            state.update(outcome="error", reason="setup: " + _reason(report))
        elif report.skipped:
            state.update(outcome="skipped", reason=_reason(report))
    elif report.when == "call":
        if hasattr(report, "wasxfail"):
            state.update(outcome="xfailed" if report.skipped else "xpassed", reason=str(report.wasxfail))
        elif report.failed:
            state.update(outcome="failed", reason=_reason(report))
        elif report.skipped:
            state.update(outcome="skipped", reason=_reason(report))
        else:
            state.update(outcome="passed", reason="")
    elif report.when == "teardown":
        if report.failed and state["outcome"] not in ("failed", "error"):
            state.update(outcome="error", reason="teardown: " + _reason(report))
        _record(nodeid, state["outcome"] or "error", state["reason"])
'''

CONFTEST_CHECKPOINTER = '''"""Written by clients/python/suites/langgraph_suite.py: LangGraph's in-memory saver as
LangGraph's conftest builds it, and RemoteCheckpointSaver over the local server LG_SUITE_URL (an app of its own per
test)."""

import os
import secrets
from contextlib import asynccontextmanager, contextmanager

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from agent_memory_client import AsyncClient, Client
from agent_memory_client.langchain import RemoteCheckpointSaver

pytest.register_assert_rewrite("tests.memory_assert")

from tests.memory_assert import MemorySaverAssertImmutable  # noqa: E402

STRICT_MSGPACK = os.getenv("LANGGRAPH_STRICT_MSGPACK", "false").lower() in ("1", "true", "yes")


def _strict_msgpack_serde() -> JsonPlusSerializer:
    return JsonPlusSerializer(allowed_msgpack_modules=None)


@contextmanager
def _checkpointer_memory():
    if STRICT_MSGPACK:
        yield MemorySaverAssertImmutable(serde=_strict_msgpack_serde())
    else:
        yield MemorySaverAssertImmutable()


def _app_name() -> str:
    # Not uuid4: some tests patch it (deterministic_uuids).
    return "lgsuite-" + secrets.token_hex(8)


@contextmanager
def _checkpointer_remote():
    url = os.environ["LG_SUITE_URL"]
    with Client(url) as client:
        saver = RemoteCheckpointSaver(client, app_name=_app_name(), async_client=AsyncClient(url))
        if STRICT_MSGPACK:
            saver.serde = _strict_msgpack_serde()
        yield saver


_SHARED: dict = {}


def _suite_saver():
    """What the harness puts in place of InMemorySaver() in a swapped file: InMemorySaver (LG_SUITE_SWAP=memory,
    the test as written) or a RemoteCheckpointSaver of an app of its own (clients shared by the process)."""
    if os.environ.get("LG_SUITE_SWAP") != "remote":
        from langgraph.checkpoint.memory import InMemorySaver

        return InMemorySaver()
    url = os.environ["LG_SUITE_URL"]
    if not _SHARED:
        _SHARED.update(client=Client(url), async_client=AsyncClient(url))
    return RemoteCheckpointSaver(_SHARED["client"], app_name=_app_name(), async_client=_SHARED["async_client"])


@asynccontextmanager
async def _acheckpointer_remote():
    url = os.environ["LG_SUITE_URL"]
    with Client(url) as client:
        async with AsyncClient(url) as async_client:
            saver = RemoteCheckpointSaver(client, app_name=_app_name(), async_client=async_client)
            if STRICT_MSGPACK:
                saver.serde = _strict_msgpack_serde()
            yield saver
'''

CONFTEST_STORE = '''"""Written by clients/python/suites/langgraph_suite.py: the in-memory store only."""

from contextlib import contextmanager

from langgraph.store.memory import InMemoryStore


@contextmanager
def _store_memory():
    yield InMemoryStore()
'''

PYTEST_INI = """[pytest]
addopts = --strict-markers --snapshot-warn-unused -p no:asyncio -p no:cacheprovider
"""


# --- preparing the copy --------------------------------------------------------------------------------------


def missing_packages() -> list[str]:
    return [package for module, package in REQUIRED.items() if importlib.util.find_spec(module) is None]


def copy_snapshots_for_remote(text: str) -> str:
    """A syrupy ``.ambr`` file with each snapshot of a ``[memory…]`` test also under the ``[remote…]`` name: the
    snapshots hold the graph's drawing or schema, the same whatever the saver."""
    header, *blocks = re.split(r"(?m)^(?=# name: )", text)
    extra = []
    for block in blocks:
        first, _, rest = block.partition("\n")
        name = first[len("# name: ") :]
        if "[" in name:
            head, _, ids = name.partition("[")
            tokens = ids.split("-")
            if "memory" in tokens or any(t.startswith("memory]") for t in tokens):
                remote = "-".join("remote" + t[len("memory") :] if t.startswith("memory") else t for t in tokens)
                extra.append(f"# name: {head}[{remote}\n{rest}")
    return header + "".join(blocks) + "".join(extra)


def swap_in_memory_saver(source: str) -> str:
    """A test module with each ``InMemorySaver()`` made ``_suite_saver()`` (the saver LG_SUITE_SWAP names),
    imported after the module's docstring and ``__future__`` imports."""
    tree = ast.parse(source)
    line = 0
    for node in tree.body:
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        future = isinstance(node, ast.ImportFrom) and node.module == "__future__"
        if not (docstring or future):
            break
        line = node.end_lineno or line
    lines = re.sub(r"\bInMemorySaver\(\)", "_suite_saver()", source).splitlines(keepends=True)
    lines.insert(line, "from tests.conftest_checkpointer import _suite_saver\n")
    return "".join(lines)


def prepare(tests: Path, work: Path, swap: list[str]) -> Path:
    """A copy of LangGraph's tests folder, as package ``tests`` of ``work``, with the harness's conftest files
    and the ``swap`` files' ``InMemorySaver()`` swapped."""
    target = work / "tests"
    shutil.copytree(tests, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    (target / "__init__.py").touch()
    (target / "conftest.py").write_text(CONFTEST)
    (target / "conftest_checkpointer.py").write_text(CONFTEST_CHECKPOINTER)
    (target / "conftest_store.py").write_text(CONFTEST_STORE)
    for snapshot in (target / "__snapshots__").glob("*.ambr"):
        snapshot.write_text(copy_snapshots_for_remote(snapshot.read_text()))
    for name in swap:
        (target / name).write_text(swap_in_memory_saver((target / name).read_text()))
    (work / "pytest.ini").write_text(PYTEST_INI)
    return target


@contextlib.contextmanager
def server(url: str | None) -> Iterator[str]:
    """The server under test: ``url``, else the local server started as the client's tests start it."""
    if url:
        yield url.rstrip("/")
        return
    spec = importlib.util.spec_from_file_location("_client_tests_conftest", CLIENT_TESTS / "conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    with module.local_server() as started:
        yield started


# --- running and reporting -----------------------------------------------------------------------------------


@dataclass
class FileResult:
    name: str
    rows: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    exit_code: int | None = None
    note: str = ""

    def counts(self, checkpointer: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.rows:
            if row["checkpointer"] == checkpointer:
                counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
        return counts

    def remote_only_failures(self) -> list[dict[str, Any]]:
        memory = {row["key"]: row for row in self.rows if row["checkpointer"] == "memory"}
        return [
            row
            for row in self.rows
            if row["checkpointer"] == "remote"
            and row["outcome"] in FAILED
            and memory.get(row["key"], {}).get("outcome") == "passed"
        ]

    def memory_only_failures(self) -> list[dict[str, Any]]:
        remote = {row["key"]: row for row in self.rows if row["checkpointer"] == "remote"}
        return [
            row
            for row in self.rows
            if row["checkpointer"] == "memory"
            and row["outcome"] in FAILED
            and remote.get(row["key"], {}).get("outcome") == "passed"
        ]


def run_file(
    work: Path, name: str, url: str, args: argparse.Namespace, timeout_plugin: bool, swap: str | None = None
) -> FileResult:
    """One pytest run of one file (of a swapped file, with ``swap`` the checkpointer it runs with)."""
    label = name + (f".{swap}" if swap else "")
    results = work / f"{label}.results.jsonl"
    command = [sys.executable, "-m", "pytest", f"tests/{name}", "-q", "-rN", "--tb=short", "-p", "no:cacheprovider"]
    if args.k:
        command += ["-k", args.k]
    if timeout_plugin and args.timeout:
        command += [f"--timeout={args.timeout}"]
    command += args.pytest_arg
    env = dict(os.environ)
    env |= {
        "LG_SUITE_URL": url,
        "LG_SUITE_RESULTS": str(results),
        "LG_SUITE_CHECKPOINTERS": ",".join(args.checkpointers),
        "NO_DOCKER": "true",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    if args.all:
        env["LG_SUITE_ALL"] = "1"
    if swap:
        env["LG_SUITE_SWAP"] = swap
    result = FileResult(name + (" (swapped)" if swap else ""))
    started = time.monotonic()
    with open(work / f"{label}.log", "w") as log:
        try:
            proc = subprocess.run(
                command, cwd=work, env=env, stdout=log, stderr=subprocess.STDOUT, timeout=args.file_timeout
            )
            result.exit_code = proc.returncode
        except subprocess.TimeoutExpired:
            result.note = f"stopped after {args.file_timeout}s (--file-timeout): partial results"
    result.seconds = time.monotonic() - started
    if results.exists():
        result.rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    if result.exit_code not in (0, 1) and not result.note:
        result.note = f"pytest exited {result.exit_code}: see {work / (label + '.log')}"
    return result


def run_swapped(work: Path, name: str, url: str, args: argparse.Namespace, timeout_plugin: bool) -> FileResult:
    """A swapped file run once per checkpointer, as one result."""
    runs = [run_file(work, name, url, args, timeout_plugin, swap) for swap in args.checkpointers]
    merged = FileResult(runs[0].name, note="; ".join(r.note for r in runs if r.note))
    for run in runs:
        merged.rows += run.rows
        merged.seconds += run.seconds
    return merged


def _cell(counts: dict[str, int]) -> str:
    if not counts:
        return "-"
    text = f"{counts.get('passed', 0)} / {counts.get('failed', 0) + counts.get('error', 0)}"
    others = [f"{counts[k]} {k}" for k in ("skipped", "xfailed", "xpassed") if counts.get(k)]
    return text + (f" ({', '.join(others)})" if others else "")


def report(results: list[FileResult], checkpointers: list[str]) -> str:
    lines = ["## LangGraph's tests: passed / failed per checkpointer", ""]
    header = "| file | " + " | ".join(checkpointers) + " | remote-only failures | seconds |"
    lines += [header, "|" + " --- |" * (len(checkpointers) + 3)]
    for r in results:
        cells = [_cell(r.counts(c)) for c in checkpointers]
        lines.append(f"| {r.name} | " + " | ".join(cells) + f" | {len(r.remote_only_failures())} | {r.seconds:.0f} |")
    notes = [f"- {r.name}: {r.note}" for r in results if r.note]
    if notes:
        lines += ["", *notes]
    for r in results:
        failures = r.remote_only_failures()
        if failures:
            lines += ["", f"### {r.name}: pass with memory, fail with remote ({len(failures)})", ""]
            lines += [f"- `{row['nodeid'].split('::', 1)[-1]}` ({row['outcome']}): {row['reason']}" for row in failures]
        backwards = r.memory_only_failures()
        if backwards:
            lines += ["", f"### {r.name}: fail with memory, pass with remote ({len(backwards)})", ""]
            lines += [f"- `{row['nodeid'].split('::', 1)[-1]}`: {row['reason']}" for row in backwards]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--tests", type=Path, required=True, help="LangGraph's libs/langgraph/tests folder")
    parser.add_argument("--files", nargs="*", default=DEFAULT_FILES, help="test files of that folder to run")
    parser.add_argument(
        "--swap", nargs="*", default=DEFAULT_SWAP, help="test files whose own InMemorySaver() to swap (none: --swap)"
    )
    parser.add_argument("--checkpointers", nargs="+", default=list(CHECKPOINTERS), choices=CHECKPOINTERS)
    parser.add_argument("-k", help="pytest -k expression (a subset of the tests)")
    parser.add_argument("--all", action="store_true", help="also run the tests that take no checkpointer fixture")
    parser.add_argument("--server-url", help="a running server instead of starting the local one")
    parser.add_argument("--timeout", type=int, default=120, help="seconds per test (with pytest-timeout)")
    parser.add_argument("--file-timeout", type=int, default=1800, help="seconds per file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, results)")
    parser.add_argument("--output", type=Path, help="also write the Markdown report to this file")
    parser.add_argument("--pytest-arg", action="append", default=[], help="one more pytest argument (repeatable)")
    args = parser.parse_args(argv)

    missing = missing_packages()
    if missing:
        print(
            f"missing packages for LangGraph's tests: {', '.join(missing)}\n"
            f"install them into this environment ({sys.executable}):\n"
            f"  {sys.executable} -m pip install {' '.join(missing)}",
            file=sys.stderr,
        )
        return 2
    if importlib.util.find_spec("agent_memory_client") is None:
        print(f"agent_memory_client is not in {sys.executable}: make .venv-client/.installed", file=sys.stderr)
        return 2
    if not (args.tests / "conftest.py").exists():
        print(f"{args.tests} is not LangGraph's tests folder (no conftest.py)", file=sys.stderr)
        return 2
    files = [f for f in args.files if (args.tests / f).exists()]
    swap = [f for f in args.swap if (args.tests / f).exists() and f not in files]
    for absent in sorted(set(args.files + args.swap) - set(files + swap)):
        print(f"skipping {absent}: not in {args.tests} (or in --files too)", file=sys.stderr)
    timeout_plugin = importlib.util.find_spec("pytest_timeout") is not None
    if not timeout_plugin:
        print("pytest-timeout is not installed: tests run without a per-test timeout", file=sys.stderr)

    from importlib.metadata import version

    work = Path(tempfile.mkdtemp(prefix="langgraph-suite-"))
    try:
        prepare(args.tests, work, swap)
        print(
            f"langgraph {version('langgraph')}, langgraph-checkpoint {version('langgraph-checkpoint')}; tests from "
            f"{args.tests}; work folder {work}",
            file=sys.stderr,
        )
        results = []
        with server(args.server_url if "remote" in args.checkpointers else "http://unused") as url:
            for name in files + swap:
                print(f"running {name} ...", file=sys.stderr, flush=True)
                if name in swap:
                    result = run_swapped(work, name, url, args, timeout_plugin)
                else:
                    result = run_file(work, name, url, args, timeout_plugin)
                results.append(result)
                print(f"  {name}: {len(result.rows)} tests in {result.seconds:.0f}s", file=sys.stderr, flush=True)
        text = report(results, args.checkpointers)
        print(text)
        if args.output:
            args.output.write_text(text + "\n")
        failed = any(r.remote_only_failures() for r in results)
        return 1 if failed else 0
    finally:
        if args.keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
