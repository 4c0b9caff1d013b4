"""What the repository tracks: a fresh clone must work on a machine that has never seen the project."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _tracked() -> list[tuple[str, str]]:
    """(mode, path) of every tracked file."""
    out = subprocess.run(["git", "ls-files", "-s"], cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return [(line.split()[0], line.split("\t", 1)[1]) for line in out.splitlines()]


def test_no_symlink_is_tracked() -> None:
    links = [path for mode, path in _tracked() if mode == "120000"]
    assert links == [], f"tracked symlinks break a fresh clone: {links}"


def test_no_virtual_environment_or_cache_is_tracked() -> None:
    bad = [
        path
        for _, path in _tracked()
        if any(
            part in {".venv", ".venv-client", "venv", "site-packages", "__pycache__", ".aws-sam", ".data", ".cache"}
            for part in Path(path).parts
        )
        or path.endswith(("pyvenv.cfg", ".sqlite3", ".sqlite3-wal", ".sqlite3-shm"))
    ]
    assert bad == [], f"generated files are tracked: {bad[:5]}"


def test_the_virtual_environment_is_ignored_as_file_or_folder(tmp_path: Path) -> None:
    # `.venv/` matches folders only: a `.venv` symlink (as an earlier commit had) would not be ignored. The
    # rules are checked in an empty repository, where `.venv` is neither a folder nor a link.
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / ".gitignore").write_text((ROOT / ".gitignore").read_text())
    # and make run's data, and the layer-only environment of tests/infra/test_layer.py
    for probe in (
        ".venv",
        ".venv/bin/python",
        ".venv-client/bin/python",
        ".data/agent-memory.sqlite3",
        ".cache/layer-venv-0/bin/python",
        "clients/python/build/lib/x.py",
        "clients/python/src/agent_memory_client.egg-info/PKG-INFO",
    ):
        result = subprocess.run(["git", "check-ignore", "-q", "--no-index", probe], cwd=tmp_path)
        assert result.returncode == 0, f"{probe} is not ignored"
