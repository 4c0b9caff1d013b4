"""The documentation site's home page is the README (an mkdocs hook, named in mkdocs.yml), so the two never drift.

Its links are rewritten for the site: ``docs/x.md`` becomes ``x.md``; a file outside ``docs/`` (which the site does
not hold) is named rather than linked. ``docs/index.md`` is only the page's place in the site.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_LINK_OUTSIDE_DOCS = re.compile(r"\[([^\]]+)\]\((?!docs/|https?:|#)([^)\s]+)\)")


def home() -> str:
    """The README as the site's home page."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    text = _LINK_OUTSIDE_DOCS.sub(
        lambda m: m.group(1) if m.group(1) == m.group(2) else f"{m.group(1)} (`{m.group(2)}`)", text
    )
    return text.replace("](docs/", "](")


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    """mkdocs' hook: the home page's Markdown is the README's."""
    return home() if page.file.src_path == "index.md" else markdown
