"""The composition root: one place names the adapters; services and handlers name none."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

from agent_memory.composition import Services
from agent_memory.config import Settings
from agent_memory.edge.requests import MemoryText
from agent_memory.stores.inmemory import InMemoryClaimStore, InMemoryMemoryStore, InMemorySessionStore

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "layers" / "shared" / "agent_memory"


def _imports(path: Path) -> set[str]:
    """Every module a file imports, as written (relative imports keep their dots)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_services_name_no_adapter() -> None:
    for path in sorted((PACKAGE / "service").glob("*.py")):
        stores = {m for m in _imports(path) if "stores" in m}
        assert stores <= {"..stores.ports"}, f"{path.name} imports {stores}"


def test_handlers_name_no_adapter_and_build_nothing_themselves() -> None:
    for path in sorted((ROOT / "functions").glob("*/app.py")):
        imported = _imports(path)
        assert not any(m.startswith("agent_memory.stores") for m in imported), f"{path}: {imported}"
        assert "agent_memory.composition" in imported, path
        assert "default_" not in path.read_text(), path


def test_the_memory_backend_builds_in_memory_adapters_and_working_services() -> None:
    wired = Services(Settings(embedder="none"), "memory")
    assert isinstance(wired.session_store, InMemorySessionStore)
    assert isinstance(wired.claim_store, InMemoryClaimStore)
    assert isinstance(wired.memory_store, InMemoryMemoryStore)
    session, created = wired.sessions.create_session(app_name="a", user_id="u", session_id="s", state=None)
    assert created and session["id"] == "s"
    saved = wired.memories.add_texts(app_name="a", user_id="u", memories=[MemoryText(text="the cat is called Miso")])
    assert saved["saved"] == 1
    found = wired.memories.search(app_name="a", user_id="u", query="cat name", top_k=3)
    assert "Miso" in found["memories"][0]["content"]["parts"][0]["text"]
    # Every service shares the one session store.
    assert wired.memories._sessions is wired.session_store is wired.sessions.store


def test_each_part_is_built_once_even_when_threads_ask_at_once() -> None:
    wired = Services(Settings(embedder="none"), "memory")
    start = threading.Barrier(8)
    seen: list[object] = []

    def ask() -> None:
        start.wait()
        seen.append(wired.sessions)
        seen.append(wired.session_store)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(s) for s in seen}) == 2


def test_an_unknown_backend_is_refused() -> None:
    with pytest.raises(ValueError, match="BACKEND"):
        Services(Settings(), "cloud")


def test_the_backend_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BACKEND", "memory")
    assert Services(Settings.from_env()).backend == "memory"


def test_the_embedded_backend_keeps_everything_in_one_file_under_data_dir(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from agent_memory.stores.log import LogPublisher
    from agent_memory.stores.sqlite.claims import SqliteClaimStore
    from agent_memory.stores.sqlite.memories import SqliteMemoryStore
    from agent_memory.stores.sqlite.store import SqliteSessionStore

    folder = tmp_path / "data"  # does not exist yet
    wired = Services(Settings(embedder="none", data_dir=str(folder)), "embedded")
    assert isinstance(wired.session_store, SqliteSessionStore)
    assert isinstance(wired.claim_store, SqliteClaimStore)
    assert isinstance(wired.memory_store, SqliteMemoryStore)
    assert isinstance(wired.publisher, LogPublisher)
    with caplog.at_level("INFO", logger="agent_memory.stores.log"):
        wired.sessions.create_session(app_name="a", user_id="u", session_id="s", state={"user:x": 1})
    assert any(getattr(r, "detail_type", None) == "SessionCreated" for r in caplog.records)
    wired.memories.add_texts(app_name="a", user_id="u", memories=[MemoryText(text="the cat is called Miso")])
    wired.close()
    assert [p.name for p in folder.iterdir() if p.suffix == ".sqlite3"] == ["agent-memory.sqlite3"]
    again = Services(Settings(embedder="none", data_dir=str(folder)), "embedded")
    assert again.sessions.get_session("a", "u", "s", None, None, None, None)["state"] == {"user:x": 1}
    found = again.memories.search(app_name="a", user_id="u", query="cat", top_k=1)["memories"]
    assert found[0]["content"]["parts"][0]["text"] == "the cat is called Miso"
    again.close()


def test_the_change_feed_is_the_outbox_locally_and_the_stream_in_aws() -> None:
    wired = Services(Settings(embedder="none"), "memory")
    assert wired.change_feed is wired.session_store
    with pytest.raises(ValueError, match="stream"):
        _ = Services(Settings(), "aws").change_feed
