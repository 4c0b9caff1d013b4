"""What a deployed function's interpreter sees, built on this machine: the layer's third-party packages as its
Makefile installs them, and a virtual environment with only what the Lambda runtime brings (boto3). Built once
per version of the pins, the Makefile and Python under ``.cache/`` and reused; for tests/infra/test_layer.py and
the benchmarks that run the handlers in that environment (bench/perf/first_response.py,
bench/perf/import_profile.py)."""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "shared"
REQUIREMENTS = LAYER / "requirements.txt"
MAKEFILE = LAYER / "Makefile"
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
