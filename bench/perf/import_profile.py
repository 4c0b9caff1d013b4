"""Where a handler's first response spends its import, beyond the floor's: ``-X importtime`` of one fresh process
per handler (as ``bench.perf.first_response`` runs it: the runtime's interpreter and environment, the layer's packages,
one real API Gateway event against a moto server), minus every module the floor (``import boto3; client``) also
imports. Prints each handler's extra self time and its largest modules, the minimum of ``--runs`` processes.

    .venv/bin/python -m bench.perf.import_profile [--runs 3] [--only get_session …] [--top 15]
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess

import local  # noqa: F401 - puts the shared layer on sys.path
from bench.perf.first_response import (
    HANDLER,
    LAYER,
    QUIET,
    Case,
    cases,
    event_for,
    handler_file,
    lambda_env,
    prepared,
    start_state,
)
from local.server import LOCAL_BUCKET, LOCAL_TABLE, free_port, local_names
from local.template import function_environment, load_template, provision

FLOOR = "import boto3; boto3.client('dynamodb')"


def self_times(stderr: str) -> dict[str, int]:
    """Microseconds of self time per module from ``-X importtime`` output (a module imported twice: summed)."""
    times: dict[str, int] = {}
    for line in stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        parts = line.removeprefix("import time:").split("|")
        if len(parts) != 3 or not parts[0].strip().isdigit():
            continue
        name = parts[2].strip()
        times[name] = times.get(name, 0) + int(parts[0])
    return times


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--top", type=int, default=15)
    args = parser.parse_args()

    import boto3
    from moto.server import ThreadedMotoServer

    from tests.support.layer_env import layer_packages, runtime_venv

    python = str(runtime_venv() / "bin" / "python")
    packages = str(layer_packages())
    template = load_template()
    port = free_port()
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": "/tmp",
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        "AWS_ENDPOINT_URL": endpoint,
    }
    try:
        session = boto3.Session(aws_access_key_id="bench", aws_secret_access_key="bench", region_name="us-east-1")
        provision(
            template,
            session.client("dynamodb", endpoint_url=endpoint),
            session.client("s3", endpoint_url=endpoint),
            LOCAL_TABLE,
            LOCAL_BUCKET,
        )
        names = local_names(template)

        def importtime(case: Case) -> dict[str, int]:
            code = HANDLER.format(
                layer=str(LAYER), packages=packages, path=str(handler_file(template, case.function)), preload=""
            )
            case_env = {**env, **function_environment(template, case.function, names), **QUIET, **lambda_env(case)}
            out = subprocess.run(
                [python, "-I", "-X", "importtime", "-c", code],
                input=json.dumps(event_for(case, template)),
                capture_output=True,
                text=True,
                env=case_env,
                check=True,
            )
            return self_times(out.stderr)

        for made in start_state():
            importtime(made)
        floor_modules: set[str] = set()
        for _ in range(args.runs):
            out = subprocess.run(
                [python, "-I", "-X", "importtime", "-c", FLOOR], capture_output=True, text=True, env=env, check=True
            )
            floor_modules |= set(self_times(out.stderr))
        for case in cases():
            if args.only and case.name not in args.only:
                continue
            best: dict[str, int] = {}
            for _ in range(args.runs):
                request, setups = prepared(case)
                for made in setups:
                    importtime(made)
                for name, us in importtime(request).items():
                    if name not in floor_modules:
                        best[name] = min(best.get(name, us), us)
            ours = sum(us for name, us in best.items() if name.startswith("agent_memory"))
            print(
                f"{case.name}: {sum(best.values()) / 1000:.1f} ms of self time in {len(best)} modules the floor does "
                f"not import ({ours / 1000:.1f} ms in agent_memory's); minimum of {args.runs}"
            )
            for name, us in sorted(best.items(), key=lambda kv: -kv[1])[: args.top]:
                print(f"  {us / 1000:6.2f} ms  {name}")
    finally:
        server.stop()


if __name__ == "__main__":
    main()
