"""Cold start to the first response: a fresh interpreter imports one handler and answers one real request,
against the same DynamoDB endpoint as a floor of ``import boto3; boto3.client("dynamodb"); get_item``.

    .venv/bin/python -m bench.perf.first_response [--runs 9] [--only get_session append_event …] [--baseline DIR]
        [--preload MODULE …] [--instructions]

``--baseline DIR`` also runs every handler from another checkout's ``layers/shared`` and ``functions`` (e.g.
``git archive <commit> layers functions | tar -x -C DIR``), interleaved with this tree's, against the same
endpoint and floor: a before/after comparison that the machine's load hits alike. ``--preload MODULE …`` adds a
row per handler whose process imports those modules before the clock starts: what the first response would be if
importing them cost nothing (``--preload pydantic`` prices the validation library before any work to remove it).
``--instructions`` counts each first response's instructions under callgrind instead of timing it (below; it
counts a preload's import too).

Each measurement is a new process with what Lambda gives a function: its environment (the template's variables
and the function's name, as the runtime sets it), the runtime's interpreter with only boto3 and botocore (the
virtual environment ``tests/infra/test_layer.py`` builds), and the layer's packages as its Makefile installs them
(host wheels), the project's ``agent_memory`` first on the path. The clock starts
before the first import and stops when the handler returns (so the interpreter's own start, the same for
both, is left out). The endpoint is a moto server in this process, provisioned from the template; each
request is an API Gateway HTTP API (payload 2.0) event from ``local.apigw``, as ``make run`` builds it. Runs
are interleaved so that drift in the machine's load hits every row alike; the ratio to the floor is what to
compare (the goal: ≤ 1.2× for the session and context handlers, ≤ 2× for search).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import re
import statistics
import subprocess
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import local  # noqa: F401 - puts the shared layer on sys.path
from local.apigw import http_api_event
from local.server import LOCAL_BUCKET, LOCAL_TABLE, free_port, local_names
from local.template import function_environment, load_template, provision, routes

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "shared"
APP, USER, SESSION, COMPACTED = "bench", "u1", "s1", "s2"
QUIET = {"POWERTOOLS_METRICS_DISABLED": "true", "POWERTOOLS_LOG_LEVEL": "WARNING"}

FLOOR = (
    "import time; t = time.perf_counter(); cpu = time.process_time(); import boto3; "
    "c = boto3.client('dynamodb'); "
    "c.get_item(TableName={table!r}, Key={{'PK': {{'S': 'x'}}, 'SK': {{'S': 'y'}}}}); "
    "print(time.perf_counter() - t, 200, 0, time.process_time() - cpu)"
)
HANDLER = """
import sys
sys.path[:0] = [{layer!r}, {packages!r}]
{preload}
import time; t = time.perf_counter(); c = time.process_time()
import importlib.util, json
class Context:
    function_name = "bench"; memory_limit_in_mb = 1024; aws_request_id = "r"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:bench"
    def get_remaining_time_in_millis(self): return 29000
spec = importlib.util.spec_from_file_location("app", {path!r})
m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)
answer = m.lambda_handler(json.loads(sys.stdin.read()), Context())
print(time.perf_counter() - t, answer["statusCode"], len(answer.get("body") or ""), time.process_time() - c)
"""


@dataclass(frozen=True)
class Case:
    name: str
    function: str  # the template's logical id
    method: str
    path: str
    body: Any = None
    query: dict[str, str] | None = None


def cases() -> list[Case]:
    base = f"/apps/{APP}/users/{USER}/sessions"
    return [
        Case("create_session", "CreateSessionFunction", "POST", base, {}),
        Case("get_session", "GetSessionFunction", "GET", f"{base}/{SESSION}"),
        Case(
            "append_event",
            "AppendEventFunction",
            "POST",
            f"{base}/{SESSION}/events",
            {"author": "user", "content": {"role": "user", "parts": [{"text": "hello again"}]}},
        ),
        Case("list_sessions", "ListSessionsFunction", "GET", base),
        Case("get_context", "GetContextFunction", "GET", f"{base}/{SESSION}/context", query={"max_messages": "20"}),
        # The three below act on state made for each run (``prepared``): a session of its own to delete, an event
        # of its own to delete, new events to compact.
        Case("delete_session", "DeleteSessionFunction", "DELETE", base + "/{fresh}"),
        Case("delete_event", "DeleteEventsFunction", "DELETE", f"{base}/{SESSION}/events/{{fresh}}"),
        Case("compact_session", "CompactSessionFunction", "POST", f"{base}/{COMPACTED}/compact"),
        Case(
            "search_memories",
            "SearchMemoriesFunction",
            "POST",
            f"/apps/{APP}/users/{USER}/memories/search",
            {"query": "where is the trip"},
        ),
    ]


def chat(count: int, prefix: str) -> dict[str, Any]:
    """An append body of ``count`` chat turns, alternating user and model, with ids starting with ``prefix``."""
    events = []
    for i in range(count):
        role = "user" if i % 2 == 0 else "model"
        text = f"turn {i}: what we said about the trip to Lisbon in May, and what to pack for it"
        events.append({"id": f"{prefix}-{i}", "author": role, "content": {"role": role, "parts": [{"text": text}]}})
    return {"events": events}


def start_state() -> list[Case]:
    """The requests (through the handlers, before any measurement) that make what the cases read: the session the
    reads and the append use, the one compacted with twenty turns, and memories for the search to find (so that it
    loads the model and the index)."""
    base = f"/apps/{APP}/users/{USER}/sessions"
    texts = [f"the trip to {city} in {month}" for city in ("Lisbon", "Porto", "Oslo") for month in ("May", "June")]
    return [
        Case("create", "CreateSessionFunction", "POST", base, {"session_id": SESSION}),
        Case("create", "CreateSessionFunction", "POST", base, {"session_id": COMPACTED}),
        Case("append", "AppendEventFunction", "POST", f"{base}/{COMPACTED}/events", chat(20, "start")),
        Case(
            "save",
            "SaveMemoriesFunction",
            "POST",
            f"/apps/{APP}/users/{USER}/memories",
            {"memories": [{"text": t} for t in texts]},
        ),
    ]


def prepared(case: Case) -> tuple[Case, list[Case]]:
    """The request one run of ``case`` sends, and the requests (through the handlers, outside the clock) that
    make the state it acts on: a new session for each create, a session with events for each delete, an event
    for each event deletion, ten new events for each compaction (outside the retained tail, so every run really
    compacts)."""
    fresh = f"cold-{uuid.uuid4().hex[:12]}"
    base = f"/apps/{APP}/users/{USER}/sessions"
    request = Case(case.name, case.function, case.method, case.path.replace("{fresh}", fresh), case.body, case.query)
    append = "AppendEventFunction"
    if case.name == "create_session":
        return Case(case.name, case.function, case.method, case.path, {"session_id": fresh}), []
    if case.name == "delete_session":
        create = Case("create", "CreateSessionFunction", "POST", base, {"session_id": fresh, "state": {"k": "v"}})
        return request, [create, Case("append", append, "POST", f"{base}/{fresh}/events", chat(6, fresh))]
    if case.name == "delete_event":
        event = {"id": fresh, "author": "user", "content": {"role": "user", "parts": [{"text": "to be deleted"}]}}
        return request, [Case("append", append, "POST", f"{base}/{SESSION}/events", event)]
    if case.name == "compact_session":
        return request, [Case("append", append, "POST", f"{base}/{COMPACTED}/events", chat(10, fresh))]
    return request, []


def lambda_env(case: Case) -> dict[str, str]:
    """What Lambda's runtime sets besides the template's variables that the layer reads: the function's name (in a
    Lambda function on demand, the cold start runs without garbage collection: ``agent_memory/runtime/coldgc.py``)."""
    return {"AWS_LAMBDA_FUNCTION_NAME": case.function, "AWS_LAMBDA_INITIALIZATION_TYPE": "on-demand"}


def event_for(case: Case, template: dict[str, Any]) -> dict[str, Any]:
    for route in routes(template):
        params = route.match(case.method, case.path) if route.function == case.function else None
        if params is not None:
            body = json.dumps(case.body) if case.body is not None else None
            headers = {"content-type": "application/json"} if body is not None else {}
            return http_api_event(route, case.path, params, query=case.query, headers=headers, body=body)
    raise LookupError(f"no route of {case.function} for {case.method} {case.path}")


def handler_file(template: dict[str, Any], function: str, tree: Path = ROOT) -> Path:
    route = next(r for r in routes(template) if r.function == function)
    return tree / route.code_uri / f"{route.handler.rsplit('.', 1)[0]}.py"


# ``--instructions``: the process under callgrind, which counts the instructions it executes whatever else the
# machine does (the same count run after run, with hashing seeded: PYTHONHASHSEED). It ends at once after printing
# (``os._exit``), so that the count stops at the first response as the clock does, not after the interpreter's
# teardown of everything imported; the interpreter's own start, the same for every script, is measured on an
# empty script and taken off.
CALLGRIND = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
EXIT_NOW = "\nimport os, sys; sys.stdout.flush(); os._exit(0)\n"
EMPTY = "print(0, 200, 0, 0)"
_COLLECTED = re.compile(r"Collected\s*:\s*([0-9]+)")


def run(
    command: list[str], env: dict[str, str], stdin: str = "", *, instructions: bool = False
) -> tuple[float, int, int, float]:
    """Seconds to the answer, its status, its body's length, and the CPU seconds the process spent on it; with
    ``instructions``, the process runs under callgrind and the last value is the instructions it executed."""
    if instructions:
        command = [*CALLGRIND, *command[:-1], command[-1] + EXIT_NOW]
        env = {**env, "PYTHONHASHSEED": "0"}
    out = subprocess.run(command, input=stdin, capture_output=True, text=True, env=env, check=False)
    lines = out.stdout.strip().splitlines()
    if out.returncode != 0 or not lines:
        raise RuntimeError(f"{command[:2]} failed:\n{out.stderr[-2000:]}")
    seconds, status, size, cpu = lines[-1].split()
    if instructions:
        found = _COLLECTED.findall(out.stderr)
        if not found:
            raise RuntimeError(f"callgrind printed no count:\n{out.stderr[-2000:]}")
        return float(seconds), int(status), int(size), float(found[-1])
    return float(seconds), int(status), int(size), float(cpu)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=9)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--baseline", type=Path, default=None, help="another checkout to compare, interleaved")
    parser.add_argument("--preload", nargs="*", default=[], help="modules imported before the clock starts")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="count instructions under callgrind instead of timing (the machine's load does not move them)",
    )
    args = parser.parse_args()
    trees = {"": ROOT} if args.baseline is None else {"": ROOT, " (baseline)": args.baseline.resolve()}
    preloaded = f" (preloaded: {', '.join(args.preload)})"
    # suffix -> (tree, modules imported before the clock)
    variants: dict[str, tuple[Path, list[str]]] = {suffix: (tree, []) for suffix, tree in trees.items()}
    if args.preload:
        variants[preloaded] = (ROOT, args.preload)

    from moto.server import ThreadedMotoServer

    from tests.support.layer_env import layer_packages, runtime_venv

    python = str(runtime_venv() / "bin" / "python")
    packages = str(layer_packages())
    template = load_template()
    port = free_port()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # moto's per-request access log
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": os.environ.get("HOME", "/tmp"),
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_ENDPOINT_URL": endpoint,
    }
    try:
        import boto3

        session = boto3.Session(aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1")
        dynamodb = session.client("dynamodb", endpoint_url=endpoint)
        s3 = session.client("s3", endpoint_url=endpoint)
        provision(template, dynamodb, s3, LOCAL_TABLE, LOCAL_BUCKET)
        names = local_names(template)
        selected = [c for c in cases() if not args.only or c.name in args.only]
        code, envs = {}, {}
        for c in selected:
            for suffix, (tree, modules) in variants.items():
                code[c.name + suffix] = HANDLER.format(
                    layer=str(tree / "layers" / "shared"),
                    packages=packages,
                    path=str(handler_file(template, c.function, tree)),
                    preload="".join(f"import {m}\n" for m in modules),
                )
                envs[c.name + suffix] = {
                    **env,
                    **function_environment(template, c.function, names),
                    **QUIET,
                    **lambda_env(c),
                }

        def answer(c: Case) -> None:
            """``c`` answered by this tree's handler (state for the measured requests, outside the clock)."""
            script = HANDLER.format(
                layer=str(LAYER), packages=packages, path=str(handler_file(template, c.function)), preload=""
            )
            environment = {**env, **function_environment(template, c.function, names), **QUIET, **lambda_env(c)}
            _, status, _, _ = run([python, "-I", "-c", script], environment, json.dumps(event_for(c, template)))
            assert status < 300, (c.name, c.path, status)

        for c in start_state():
            answer(c)
        samples: dict[str, list[float]] = {"floor": []}
        cpu: dict[str, list[float]] = {"floor": []}
        statuses: dict[str, set[int]] = {}
        sizes: dict[str, int] = {}
        counted = args.instructions
        if counted:
            # Bytecode first, for every tree compared: a tree fresh from ``git archive`` would otherwise count its
            # modules' compilation in its first runs (the layer Lambda runs ships its bytecode compiled).
            for tree, _ in variants.values():
                subprocess.run(
                    [python, "-m", "compileall", "-q", str(tree / "layers" / "shared"), str(tree / "functions")],
                    check=True,
                    capture_output=True,
                )
        for _ in range(args.runs):
            if counted:
                _, _, _, start = run([python, "-I", "-c", EMPTY], env, instructions=True)
                cpu.setdefault("interpreter start", []).append(start)
            seconds, _, _, used = run([python, "-I", "-c", FLOOR.format(table=LOCAL_TABLE)], env, instructions=counted)
            samples["floor"].append(seconds)
            cpu["floor"].append(used)
            for case in selected:
                for suffix in variants:
                    name = case.name + suffix
                    request, setups = prepared(case)
                    for made in setups:
                        answer(made)
                    event = event_for(request, template)
                    seconds, status, size, used = run(
                        [python, "-I", "-c", code[name]], envs[name], json.dumps(event), instructions=counted
                    )
                    samples.setdefault(name, []).append(seconds)
                    cpu.setdefault(name, []).append(used)
                    statuses.setdefault(name, set()).add(status)
                    sizes[name] = size
    finally:
        server.stop()
    if args.instructions:
        print_instructions(cpu, statuses, args.runs)
        return
    floor = statistics.median(samples.pop("floor"))
    floor_cpu = statistics.median(cpu.pop("floor"))
    print(
        f"floor `import boto3; client('dynamodb'); get_item`: {floor * 1000:.0f} ms, {floor_cpu * 1000:.0f} CPU ms "
        f"(median of {args.runs})\n"
    )
    # CPU time: what the process itself spent (imports, set-up, its side of the calls), which a loaded machine
    # inflates less than the wall clock; the endpoint's time is in the wall clock only.
    print("| handler | first response ms (median) | ratio to floor | CPU ms | CPU ratio | status | response bytes |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for name, values in samples.items():
        median, used = statistics.median(values), statistics.median(cpu[name])
        print(
            f"| {name} | {median * 1000:.0f} | {median / floor:.2f} | {used * 1000:.0f} | {used / floor_cpu:.2f} | "
            f"{', '.join(map(str, sorted(statuses[name])))} | {sizes[name]} |"
        )


def print_instructions(counts: dict[str, list[float]], statuses: dict[str, set[int]], runs: int) -> None:
    """Each script's instructions beyond the interpreter's start, and their ratio to the floor's (the median of
    ``runs``; the spread between runs is printed so that a count that moved shows)."""
    start = statistics.median(counts.pop("interpreter start"))
    beyond = {name: [v - start for v in values] for name, values in counts.items()}
    floor = statistics.median(beyond.pop("floor"))
    print(
        f"floor `import boto3; client('dynamodb'); get_item`: {floor / 1e6:.1f} M instructions beyond the "
        f"interpreter's start ({start / 1e6:.1f} M), under callgrind (median of {runs})\n"
    )
    print("| handler | M instructions (median) | spread between runs | ratio to floor | status |")
    print("|---|---:|---:|---:|---|")
    for name, values in beyond.items():
        median = statistics.median(values)
        print(
            f"| {name} | {median / 1e6:.1f} | {(max(values) - min(values)) / 1e6:.1f} | {median / floor:.2f} | "
            f"{', '.join(map(str, sorted(statuses[name])))} |"
        )


if __name__ == "__main__":
    main()
