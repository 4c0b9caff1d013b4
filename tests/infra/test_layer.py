"""The layer is complete: an interpreter with only the layer's requirements (plus boto3, which the Lambda runtime
has) imports every module of agent_memory, every import a function body makes later, and every handler.

The development environment has everything (httpx, PyYAML, moto …), so an import the layer lacks passes every
other test and fails only when deployed. The layer-only environment is built once per version of the pins and
Python (first run: about a minute, from the package registry) under ``.cache/`` and reused afterwards.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "shared"
REQUIREMENTS = LAYER / "requirements.txt"
PROBE = Path(__file__).with_name("layer_probe.py")
# What the Lambda Python runtime brings besides the layer; pinned as the development environment pins them.
RUNTIME_PACKAGES = ("boto3", "botocore")


def runtime_pins() -> list[str]:
    """``boto3==…`` and ``botocore==…`` as requirements-dev.txt pins them."""
    dev = (ROOT / "requirements-dev.txt").read_text()
    pins = []
    for name in RUNTIME_PACKAGES:
        found = re.search(rf"^{name}==(\S+)$", dev, re.MULTILINE)
        assert found, f"requirements-dev.txt pins no {name}"
        pins.append(f"{name}=={found.group(1)}")
    return pins


def layer_venv() -> Path:
    """The layer-only virtual environment, built when missing (or half-built by an interrupted run).

    Keyed on the layer's requirements, the runtime pins and the Python version, so a change to any of them
    builds a new one instead of testing against stale packages.
    """
    key = hashlib.sha256(
        "\n".join([REQUIREMENTS.read_text(), *runtime_pins(), sys.version.split()[0]]).encode()
    ).hexdigest()[:16]
    venv = ROOT / ".cache" / f"layer-venv-{key}"
    done = venv / ".complete"
    if done.is_file():
        return venv
    for stale in venv.parent.glob("layer-venv-*"):  # earlier pins' environments (each a few hundred MB)
        shutil.rmtree(stale, ignore_errors=True)
    # ``-m venv`` from the project's interpreter builds on its base Python: the runtime's version, no packages.
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "-r", str(REQUIREMENTS), *runtime_pins()],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert install.returncode == 0, f"pip install of the layer's requirements failed:\n{install.stderr[-3000:]}"
    done.write_text("")
    return venv


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    python = layer_venv() / "bin" / "python"
    # -I: no PYTHONPATH, no user site-packages, not the probe's folder: only the layer and the venv.
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "AWS_DEFAULT_REGION": "us-east-1",
    }
    result = subprocess.run(
        [str(python), "-I", str(PROBE), str(LAYER), str(ROOT / "functions")],
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
    assert probe["handlers"] == len(list((ROOT / "functions").glob("*/app.py"))) == 12
    assert probe["lazy"] > 0
    assert {"numpy", "onnxruntime", "tokenizers", "aws-lambda-powertools", "pydantic"} <= set(probe["used"])
