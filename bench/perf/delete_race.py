"""A deletion racing a save, over real HTTP against `make run`: does the deleted text stay anywhere?

    .venv/bin/python -m bench.perf.delete_race [--backend embedded|moto] [--trials 100]

Each trial, in a session of its own: the user says "I am allergic to <token>" (event ``secret``, a token no other
text holds) and eight more turns; then ``POST …/memories {"session_id", "policy": "all"}`` and, 0-300 ms later (a
delay drawn per trial), ``DELETE …/events/secret``, each from a thread of its own. Once both answered, and again
after the auto-save window has passed, the trial looks for the token: a search with ``min_score=0`` and
``top_k=100``, the user's profile, the session's export and, on the embedded backend, the raw bytes of the database
file and its write-ahead log. A trial leaks when any of them holds it. Prints a table per backend: trials, leaks by
where, and the delete and save answers seen.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from local.server import spawn

TURNS = [
    "We are planning a trip to Porto in May.",
    "A quiet hotel near the river would be lovely.",
    "My sister will come along for the first week.",
    "We like long walks and small restaurants.",
    "The budget is about 150 euros a night.",
    "Trains are better than flights for us.",
    "We would like one day in the Douro valley.",
    "Please remind me to book the train tickets.",
]


def trial(http: httpx.Client, app: str, user: str, delay_s: float) -> tuple[str, str, dict[str, int]]:
    token = "tok" + uuid.uuid4().hex[:10]
    session = f"s-{uuid.uuid4().hex[:8]}"
    base = f"/apps/{app}/users/{user}"
    http.post(f"{base}/sessions", json={"session_id": session}).raise_for_status()
    events = [{"id": "secret", "role": "user", "content": f"I am allergic to {token}."}]
    events += [{"id": f"t{i}", "role": "user", "content": text} for i, text in enumerate(TURNS)]
    http.post(f"{base}/sessions/{session}/events", json={"events": events}).raise_for_status()
    statuses: dict[str, int] = {}

    def save() -> None:
        statuses["save"] = http.post(f"{base}/memories", json={"session_id": session, "policy": "all"}).status_code

    def delete() -> None:
        time.sleep(delay_s)
        statuses["delete"] = http.delete(f"{base}/sessions/{session}/events/secret").status_code

    threads = [threading.Thread(target=save), threading.Thread(target=delete)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return token, session, statuses


def leaks(http: httpx.Client, app: str, user: str, token: str, session: str, files: list[Path]) -> set[str]:
    base = f"/apps/{app}/users/{user}"
    found: set[str] = set()
    hits = http.post(f"{base}/memories/search", json={"query": f"allergic {token}", "top_k": 100, "min_score": 0})
    if token in hits.text:
        found.add("search")
    if token in http.get(f"{base}/profile").text:
        found.add("profile")
    if token in http.get(f"{base}/sessions/{session}/export", params={"limit": 1000}).text:
        found.add("export")
    if any(p.exists() and token.encode() in p.read_bytes() for p in files):
        found.add("raw storage")
    return found


def run(backend: str, trials: int, settle_s: float) -> dict[str, Any]:
    rng = random.Random(11)
    app, user = "race", f"u-{uuid.uuid4().hex[:6]}"
    leaked: dict[str, int] = {}
    leaking: set[int] = set()  # the trials whose token was found anywhere, at either look
    answers: dict[str, int] = {}
    with tempfile.TemporaryDirectory(prefix="agent-memory-race-") as folder:
        data = Path(folder)
        files = [data / "agent-memory.sqlite3", data / "agent-memory.sqlite3-wal"] if backend == "embedded" else []
        env = {"AUTOSAVE_WINDOW_SECONDS": "1"}
        with (
            spawn(env, backend=backend, data_dir=data, startup_s=120) as server,
            httpx.Client(base_url=server.url, timeout=60) as http,
        ):
            tokens = []
            for n in range(trials):
                token, session, statuses = trial(http, app, user, rng.uniform(0, 0.3))
                tokens.append((token, session))
                for name, status in statuses.items():
                    answers[f"{name} {status}"] = answers.get(f"{name} {status}", 0) + 1
                for where in leaks(http, app, user, token, session, files):
                    leaked[f"{where} (at once)"] = leaked.get(f"{where} (at once)", 0) + 1
                    leaking.add(n)
            time.sleep(settle_s)  # auto-save's window and batch have passed: what it saves late shows now
            for n, (token, session) in enumerate(tokens):
                for where in leaks(http, app, user, token, session, files):
                    later = f"{where} (after {settle_s:.0f} s)"
                    leaked[later] = leaked.get(later, 0) + 1
                    leaking.add(n)
    return {"backend": backend, "trials": trials, "leaking": len(leaking), "leaked": leaked, "answers": answers}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--backend", choices=["embedded", "moto"], action="append", help="both when not given")
    parser.add_argument("--trials", type=int, default=100)
    parser.add_argument("--settle", type=float, default=20.0, help="seconds to wait before the second look")
    args = parser.parse_args()
    print("| backend | trials | trials leaking | where | answers |")
    print("|---|---:|---:|---|---|")
    for backend in args.backend or ["embedded", "moto"]:
        result = run(backend, args.trials, args.settle)
        where = ", ".join(f"{k}: {v}" for k, v in sorted(result["leaked"].items())) or "nowhere"
        answers = ", ".join(f"{k}: {v}" for k, v in sorted(result["answers"].items()))
        print(f"| {backend} | {result['trials']} | {result['leaking']} | {where} | {answers} |")


if __name__ == "__main__":
    main()
