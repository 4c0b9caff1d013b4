"""The layer is complete and holds nothing else: an interpreter with only what the layer's Makefile installs (plus
boto3, which the Lambda runtime has) imports every module of agent_memory, every import a function body makes
later, and every handler; and every distribution the layer ships is imported by them.

The development environment has everything (httpx, PyYAML, moto …), so an import the layer lacks passes every
other test and fails only when deployed. The layer's packages and the runtime's environment are built once per
version of the pins, the Makefile and Python (first run: about a minute, from the package registry) under
``.cache/`` and reused afterwards.
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
MAKEFILE = LAYER / "Makefile"
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


def cached(kind: str, key_parts: list[str]) -> tuple[Path, bool]:
    """``.cache/<kind>-<key>`` and whether it is complete; earlier keys' copies (a few hundred MB) are removed.

    Keyed on everything that decides the contents, so a change to any of them builds a new one instead of testing
    against stale packages.
    """
    key = hashlib.sha256("\n".join([*key_parts, sys.version.split()[0]]).encode()).hexdigest()[:16]
    path = ROOT / ".cache" / f"{kind}-{key}"
    if (path / ".complete").is_file():
        return path, True
    for stale in path.parent.glob(f"{kind}-*"):
        shutil.rmtree(stale, ignore_errors=True)
    return path, False


def runtime_venv() -> Path:
    """A virtual environment with what the Lambda runtime has: the interpreter, boto3 and its dependencies."""
    venv, complete = cached("runtime-venv", runtime_pins())
    if complete:
        return venv
    # ``-m venv`` from the project's interpreter builds on its base Python: the runtime's version, no packages.
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    install = subprocess.run(
        [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", *runtime_pins()],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert install.returncode == 0, f"pip install of boto3 failed:\n{install.stderr[-3000:]}"
    (venv / ".complete").write_text("")
    return venv


def layer_packages() -> Path:
    """The layer's third-party packages, installed by the layer's own Makefile (the recipe ``sam build`` runs),
    with the host's wheels instead of aarch64 ones: the directory Lambda would see as ``/opt/python``, minus
    agent_memory, which the probe takes from the source tree so that the test sees the current code.
    """
    artifacts, complete = cached("layer", [REQUIREMENTS.read_text(), MAKEFILE.read_text()])
    if complete:
        return artifacts / "python"
    build = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-C",
            str(LAYER),
            "packages",
            f"ARTIFACTS_DIR={artifacts}",
            "PLATFORM=",
            f"PYTHON={sys.executable}",
        ],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert build.returncode == 0, f"make packages failed:\n{build.stdout[-2000:]}{build.stderr[-3000:]}"
    (artifacts / ".complete").write_text("")
    return artifacts / "python"


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
