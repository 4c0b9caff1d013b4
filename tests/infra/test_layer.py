"""The layer is complete and holds nothing else: an interpreter with only what the layer's Makefile installs (plus
boto3, which the Lambda runtime has) imports every module of agent_memory, every import a function body makes
later, and every handler; and every distribution the layer ships is imported by them.

The development environment has everything (httpx, PyYAML, moto …), so an import the layer lacks passes every
other test and fails only when deployed. The layer's packages and the runtime's environment are built once per
version of the pins, the Makefile and Python (first run: about a minute, from the package registry) under
``.cache/`` and reused afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.layer_env import LAYER, ROOT, layer_packages, runtime_venv

PROBE = Path(__file__).with_name("layer_probe.py")


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    python = runtime_venv() / "bin" / "python"
    packages = layer_packages()
    # -I: no PYTHONPATH, no user site-packages, not the probe's folder: only the layer and the venv.
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    result = subprocess.run(
        [str(python), "-I", str(PROBE), str(packages), str(LAYER), str(ROOT / "functions")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    answer: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return answer


def test_the_layer_imports_every_module_lazy_import_and_handler(probe: dict[str, Any]) -> None:
    assert probe["failures"] == []


def test_the_probe_saw_the_whole_package(probe: dict[str, Any]) -> None:
    # Guards the probe itself: a walk that found nothing would pass the test above.
    package_files = [p for p in (LAYER / "agent_memory").rglob("*.py")]
    assert probe["modules"] == len(package_files)
    assert probe["handlers"] == len(list((ROOT / "functions").glob("*/app.py"))) == 14  # one per template function
    assert probe["lazy"] > 0
    assert {"numpy", "onnxruntime", "tokenizers", "aws-lambda-powertools", "pydantic", "pyyaml"} <= set(probe["used"])
    assert set(probe["shipped"]) >= {"numpy", "onnxruntime", "httpx"}


def test_the_layer_ships_only_what_is_imported(probe: dict[str, Any]) -> None:
    # Installed without dependencies, so a distribution here is one requirements.txt names: an unused one is
    # dead weight in every function's package (huggingface-hub and its tree were 25 MB).
    assert sorted(set(probe["shipped"]) - set(probe["used"])) == []


def test_the_layer_ships_nothing_the_runtime_brings(probe: dict[str, Any]) -> None:
    # A second botocore in the layer would shadow the runtime's and pin it without anyone noticing.
    assert sorted(set(probe["shipped"]) & {"boto3", "botocore", "s3transfer", "urllib3", "python-dateutil"}) == []


def test_the_layer_leaves_room_under_lambdas_size_limit() -> None:
    # Lambda allows 250 MiB unzipped for a function and its layers. The host's wheels are the larger build (x86-64
    # numpy bundles a bigger OpenBLAS than aarch64: 177 against 155 MiB, `python -m bench.perf.layer_size`); a new
    # dependency that eats the last 50 MiB of room should be a decision, not an accident.
    packages = layer_packages()
    size = sum(f.stat().st_size for f in packages.rglob("*") if f.is_file())
    size += sum(f.stat().st_size for f in (LAYER / "agent_memory").rglob("*.py"))
    assert 50 * 1024 * 1024 < size < 200 * 1024 * 1024
