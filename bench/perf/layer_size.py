"""The size of what a function deploys: the shared layer built by its own Makefile (the recipe ``sam build``
runs) for the functions' architecture, unzipped and zipped, against Lambda's limits.

    .venv/bin/python -m bench.perf.layer_size [--platform aarch64|x86_64] [--top 12]

Lambda allows 250 MB unzipped for a function and all its layers together (each function's own code here is
a few kilobytes) and 50 MB zipped for a layer uploaded directly (``sam deploy`` uploads through S3, where the
unzipped limit is the one that binds). The table lists the largest top-level entries of the layer's
``python/`` folder (packages, with their ``.dist-info`` counted in), so the room left, and what would use it,
are visible. Needs the package registry the first time (aarch64 wheels), like ``sam build``.
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tempfile
import zipfile
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LAYER = ROOT / "layers" / "shared"
FUNCTIONS = ROOT / "functions"
# Lambda's quotas in bytes: "250 MB" is 262,144,000 bytes (250 MiB), "50 MB" is 52,428,800 (50 MiB).
UNZIPPED_LIMIT = 250 * 1024 * 1024
ZIPPED_LIMIT = 50 * 1024 * 1024


def tree_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file() and not f.is_symlink())


def zipped_bytes(path: Path) -> int:
    """The size of ``path``'s contents as a deflated zip, as ``sam build`` packages a layer."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for file in sorted(path.rglob("*")):
            if file.is_file() and not file.is_symlink():
                archive.write(file, file.relative_to(path))
    return buffer.tell()


def owner(entry: str) -> str:
    """A top-level entry's distribution: ``numpy-2.5.5.dist-info`` and ``numpy.libs`` count as ``numpy``."""
    for suffix in (".dist-info", ".libs", ".data"):
        if entry.endswith(suffix):
            entry = entry[: -len(suffix)]
            if suffix == ".dist-info":
                entry = entry.rsplit("-", 1)[0]
    return entry.lower().replace("-", "_")


def build(platform: str, artifacts: Path) -> Path:
    command = [
        "make",
        "--no-print-directory",
        "-C",
        str(LAYER),
        "build-SharedLayer",
        f"ARTIFACTS_DIR={artifacts}",
        f"PLATFORM={platform}",
        f"PYTHON={sys.executable}",
    ]
    subprocess.run(command, check=True, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    return artifacts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--platform", default="aarch64", help="aarch64 (the template's Architectures) or x86_64")
    parser.add_argument("--top", type=int, default=12)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        artifacts = build(args.platform, Path(folder))
        site = artifacts / "python"
        sizes: dict[str, int] = defaultdict(int)
        for entry in site.iterdir():
            sizes[owner(entry.name)] += tree_bytes(entry) if entry.is_dir() else entry.stat().st_size
        unzipped = tree_bytes(artifacts)
        zipped = zipped_bytes(artifacts)
    largest_function = max(tree_bytes(f) for f in FUNCTIONS.iterdir() if f.is_dir())
    mb = 1024 * 1024
    print(f"layer for {args.platform}, CPython {sys.version_info.major}.{sys.version_info.minor}\n")
    print("| | MiB | Lambda limit MiB | room MiB |")
    print("|---|---:|---:|---:|")
    total = unzipped + largest_function
    print(
        f"| layer + largest function, unzipped | {total / mb:.1f} | {UNZIPPED_LIMIT / mb:.0f} | "
        f"{(UNZIPPED_LIMIT - total) / mb:.1f} |"
    )
    print(
        f"| layer, zipped | {zipped / mb:.1f} | {ZIPPED_LIMIT / mb:.0f} (direct upload only) | "
        f"{(ZIPPED_LIMIT - zipped) / mb:.1f} |"
    )
    print("\n| largest parts of the layer (unzipped) | MiB |\n|---|---:|")
    for name, size in sorted(sizes.items(), key=lambda item: -item[1])[: args.top]:
        print(f"| {name} | {size / mb:.1f} |")


if __name__ == "__main__":
    main()
