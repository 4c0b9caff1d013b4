"""The documentation: the site builds without a warning, every page is in its nav, the README stays a front door,
and neither speaks of work items or work sessions instead of the software."""

from __future__ import annotations

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from local.template import ROOT

DOCS = ROOT / "docs"
README_MAX_LINES = 350
FORBIDDEN = re.compile(r"\bissues? \d+|\bthis stop\b", re.IGNORECASE)


def mkdocs() -> list[str]:
    beside = Path(sys.executable).with_name("mkdocs")
    if beside.exists():
        return [str(beside)]
    found = shutil.which("mkdocs")
    if found is None:
        pytest.fail("mkdocs is not installed: requirements-dev.txt pins it (make .venv/.installed)")
    return [found]


def nav_pages(nav: Any) -> set[str]:
    """Every page a nav names, at any depth (`- page.md`, `- Title: page.md`, `- Section: [...]`)."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, list):
        return set().union(*(nav_pages(item) for item in nav)) if nav else set()
    if isinstance(nav, dict):
        return set().union(*(nav_pages(value) for value in nav.values())) if nav else set()
    return set()


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1")
    result = subprocess.run(
        [*mkdocs(), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    # The home page is the README as it is now (local/docs_home.py): every command of its fenced blocks is there.
    home = html.unescape(re.sub(r"<[^>]+>", "", (tmp_path / "site" / "index.html").read_text()))
    readme = (ROOT / "README.md").read_text()
    commands = [line.split("#")[0].strip() for line in readme.splitlines() if line.startswith("make ")]
    assert commands and all(command in home for command in commands), commands
    assert (tmp_path / "site" / "openapi.json").is_file()


def test_every_page_is_in_the_nav() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert config["docs_dir"] == "docs"
    named = nav_pages(config["nav"])
    pages = {path.relative_to(DOCS).as_posix() for path in DOCS.rglob("*.md")}
    assert pages - named == set(), f"pages missing from mkdocs.yml's nav: {sorted(pages - named)}"
    assert named - pages == set(), f"the nav names pages that do not exist: {sorted(named - pages)}"


def test_decision_records_are_numbered_and_listed() -> None:
    records = sorted((DOCS / "decisions").glob("[0-9][0-9][0-9][0-9]-*.md"))
    assert records
    index = (DOCS / "decisions" / "index.md").read_text()
    for record in records:
        assert re.fullmatch(r"\d{4}-[a-z0-9]+(-[a-z0-9]+)*\.md", record.name), record.name
        text = record.read_text()
        for section in ("## Context", "## Decision", "## Consequences"):
            assert section in text, (record.name, section)
        assert f"({record.name})" in index, f"{record.name} is not listed in docs/decisions/index.md"


def test_the_readme_is_a_front_door() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines; move detail into docs/"
    text = "\n".join(lines)
    for command in ("make run", "make test"):
        assert command in text


@pytest.mark.parametrize(
    "path", [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))], ids=lambda p: str(Path(p).relative_to(ROOT))
)
def test_no_work_items_or_work_sessions(path: Path) -> None:
    found = [m.group(0) for m in FORBIDDEN.finditer(path.read_text())]
    assert not found, f"{path.relative_to(ROOT)} speaks of {found}: say what the software does instead"
