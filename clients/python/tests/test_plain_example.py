"""examples/plain_python.py against `make run`: each step answers what the example says it shows."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import plain_python


def test_the_plain_python_example_shows_every_capability(server_url: str, app_name: str) -> None:
    result = plain_python.main(server_url, app_name=app_name)
    assert result["session"]["state"] == {"user:home": "Lisbon", "trip": "Porto"}
    assert result["stale_append"].startswith("refused")
    assert len(result["context"]) == len(plain_python.TURNS)
    assert result["compaction"] != "summarised"  # six events: all kept raw (the newest ten always are)
    assert result["context"][0] == f"user: {plain_python.TURNS[0][1]}"
    assert result["memories_saved"] >= 3  # the user's three turns (the assistant's are not saved by default)
    assert result["second_session_state"] == {"user:home": "Lisbon"}  # user: state carries over, session's not
    assert any("allergic to cats" in text for text in result["recalled"])
    assert any("cats" in fact for fact in result["profile"]), result["profile"]
