"""`make smoke` against `make run`: the same script a deployment is checked with, so it cannot rot."""

from __future__ import annotations

import subprocess
import sys

from local.server import free_port, spawned
from local.template import ROOT


def test_smoke_passes_against_make_run() -> None:
    with spawned() as url:
        result = subprocess.run(
            [sys.executable, "-m", "local.smoke", "--url", url], cwd=ROOT, capture_output=True, text=True, timeout=120
        )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("ok  step") == 11 and "all steps passed" in result.stdout
    assert "unsigned" in result.stdout


def test_smoke_stops_at_the_first_failed_step_with_a_message() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    result = subprocess.run(
        [sys.executable, "-m", "local.smoke", "--url", url, "--timeout", "5"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert "FAILED step 1/11 create session" in result.stderr and "ConnectError" in result.stderr
    assert "ok  step" not in result.stdout
