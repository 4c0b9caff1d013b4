"""Cold start: time to import each handler module in a fresh process, against a boto3 baseline.

    .venv/bin/python -m bench.perf.cold_start [--runs N]

Each measurement is a new interpreter (as a new Lambda container is) importing one handler module; the
baseline is `import boto3; boto3.client("dynamodb")` measured the same way in the same run. The table shows
medians and the ratio handler / baseline, which does not depend on the speed of the machine.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "shared"

BASELINE = "import boto3; boto3.client('dynamodb', region_name='us-east-1')"
HANDLER = (
    "import importlib.util, sys; sys.path.insert(0, {layer!r}); "
    "spec = importlib.util.spec_from_file_location('app', {path!r}); "
    "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m); m.lambda_handler"
)
# What a first request adds: wiring the service builds the DynamoDB client (S3 and EventBridge stay lazy).
WIRED = "; from agent_memory.composition import services; services().sessions"
TIMER = "import time; t = time.perf_counter(); {code}; print(time.perf_counter() - t)"


def _time(code: str) -> float:
    env = {
        "POWERTOOLS_SERVICE_NAME": "bench",
        "POWERTOOLS_METRICS_NAMESPACE": "bench",
        "AWS_DEFAULT_REGION": "us-east-1",
        "PATH": "/usr/bin:/bin",
    }
    out = subprocess.run(
        [sys.executable, "-c", TIMER.format(code=code)], capture_output=True, text=True, check=True, env=env
    )
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    handlers = sorted((ROOT / "functions").glob("*/app.py"))
    samples: dict[str, list[float]] = {"baseline": []}
    for _ in range(args.runs):  # interleaved, so that drift in machine load hits every row alike
        samples["baseline"].append(_time(BASELINE))
        for h in handlers:
            code = HANDLER.format(layer=str(LAYER), path=str(h))
            samples.setdefault(h.parent.name, []).append(_time(code))
            samples.setdefault(f"{h.parent.name} + service wiring", []).append(_time(code + WIRED))
    base = statistics.median(samples.pop("baseline"))
    print(f"baseline `{BASELINE}`: {base * 1000:.0f} ms (median of {args.runs} fresh processes)\n")
    print("| handler module | ms | ratio to baseline |")
    print("|---|---:|---:|")
    for name, values in sorted(samples.items()):
        median = statistics.median(values)
        print(f"| {name} | {median * 1000:.0f} | {median / base:.2f} |")


if __name__ == "__main__":
    main()
