"""`make run` under a realistic load, over real HTTP: does it stay flat, small, caught up, and keep its data?

    .venv/bin/python -m bench.perf.local_scale [--backend embedded|moto] [--events 10000] [--batch 50] [--sessions 20]

Starts `make run`'s server in its own process (``local.server.spawn``, the backend ``make run`` would use,
with the template's auto-save settings), creates ``--sessions`` sessions and appends ``--events`` chat events
of ~300 characters, alternating user and assistant, in batches of ``--batch`` spread round-robin over the
sessions. Reports:

- the median latency of the first 20 and the last 20 batches, and their ratio (flat is 1.0);
- the server's peak resident memory (``VmHWM`` of its process) and its RSS at the end of the load;
- the auto-save lag: after the load, one more user event with a unique phrase is appended, and the search
  route is asked for it every second until it comes back (the backlog of the load and the batching window
  included);
- a restart: the server is stopped and started again on the same data, and every event is read back through
  the paged GET (the moto backend keeps nothing: it reports what it lost).
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

from local.server import spawn

WORDS = [
    "flight",
    "hotel",
    "museum",
    "river",
    "coffee",
    "train",
    "ticket",
    "dinner",
    "booking",
    "garden",
    "budget",
    "weekend",
    "meeting",
    "music",
    "paint",
    "bicycle",
    "mountain",
    "recipe",
    "lemon",
    "harbour",
    "library",
    "concert",
    "passport",
    "umbrella",
    "market",
    "sunrise",
    "bridge",
    "castle",
    "violin",
    "tomato",
    "jacket",
    "island",
    "tennis",
    "desert",
    "lantern",
    "cinema",
    "ferry",
    "chapter",
    "puzzle",
    "orchard",
    "pepper",
]


def chat_text(rng: random.Random, size: int = 300) -> str:
    words: list[str] = []
    while sum(len(w) + 1 for w in words) < size:
        words.append(rng.choice(WORDS))
    return " ".join(words).capitalize() + "."


def rss_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def all_event_ids(http: httpx.Client, base: str, session: str) -> list[str]:
    ids: list[str] = []
    token: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 1000, **({"next_token": token} if token else {})}
        reply = http.get(f"{base}/{session}", params=params)
        if reply.status_code == 404:
            return ids
        reply.raise_for_status()
        body = reply.json()
        ids += [e["id"] for e in body["events"]]
        token = body.get("next_token")
        if not token:
            return ids


def run(backend: str, events: int, batch: int, sessions: int, lag_limit_s: float, timeout_s: float) -> dict[str, Any]:
    rng = random.Random(7)
    base = "/apps/bench/users/scale/sessions"
    names = [f"s{i:02d}" for i in range(sessions)]
    latencies: list[float] = []
    appended: dict[str, list[str]] = {n: [] for n in names}
    result: dict[str, Any] = {"backend": backend}
    with tempfile.TemporaryDirectory(prefix="agent-memory-scale-") as folder:
        data_dir = Path(folder)
        with (
            spawn(backend=backend, data_dir=data_dir, startup_s=120) as server,
            httpx.Client(base_url=server.url, timeout=120) as http,
        ):
            peak_rss = 0
            done = threading.Event()

            def sample() -> None:
                nonlocal peak_rss
                while not done.wait(0.5):
                    peak_rss = max(peak_rss, rss_kib(server.pid, "VmRSS"))

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            for name in names:
                http.post(base, json={"session_id": name}).raise_for_status()
            turn = 0
            for b in range(events // batch):
                name = names[b % sessions]
                body: list[dict[str, Any]] = []
                for _ in range(batch):
                    role = "user" if turn % 2 == 0 else "assistant"
                    body.append({"id": f"e{turn:06d}", "role": role, "content": chat_text(rng), "turn_id": turn // 2})
                    turn += 1
                started = time.perf_counter()
                try:
                    reply = http.post(f"{base}/{name}/events", json={"events": body})
                except httpx.TimeoutException:
                    result["stopped"] = f"batch {b + 1} got no answer within {timeout_s:.0f} s"
                    latencies.append(timeout_s)
                    break
                latencies.append(time.perf_counter() - started)
                reply.raise_for_status()
                appended[name] += [e["id"] for e in body]
                if latencies[-1] > timeout_s / 2:
                    result["stopped"] = f"batch {b + 1} took {latencies[-1]:.0f} s"
                    break
            result["load_rss_mib"] = rss_kib(server.pid, "VmRSS") / 1024
            # The auto-save lag of one new event, the load's backlog included.
            phrase = "quokka lighthouse 4471"
            probe = {"id": "probe", "role": "user", "content": f"My locker code is {phrase}.", "turn_id": "probe"}
            http.post(f"{base}/{names[0]}/events", json=probe).raise_for_status()
            appended[names[0]].append("probe")
            started = time.monotonic()
            lag: float | None = None
            while time.monotonic() - started < lag_limit_s:
                found = http.get("/apps/bench/users/scale/memories/search", params={"query": phrase, "top_k": 3})
                if found.status_code == 200 and any(
                    phrase in m["content"]["parts"][0]["text"] for m in found.json()["memories"]
                ):
                    lag = time.monotonic() - started
                    break
                time.sleep(1)
            result["autosave_lag_s"] = lag
            done.set()
            sampler.join()
            result["peak_rss_mib"] = max(peak_rss, rss_kib(server.pid, "VmHWM")) / 1024
        with (
            spawn(backend=backend, data_dir=data_dir, startup_s=120) as server,
            httpx.Client(base_url=server.url, timeout=120) as http,
        ):
            kept = sum(len(set(all_event_ids(http, base, n)) & set(ids)) for n, ids in appended.items())
    first, last = statistics.median(latencies[:20]), statistics.median(latencies[-20:])
    result |= {
        "first_ms": first * 1000,
        "last_ms": last * 1000,
        "ratio": last / first,
        "events": sum(len(v) for v in appended.values()),
        "kept": kept,
        "batches": len(latencies),
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--backend", choices=["embedded", "moto"], action="append")
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=50)
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--lag-limit", type=float, default=600.0, help="stop waiting for auto-save after this long")
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="a batch with no answer this long (or taking half) ends the load"
    )
    args = parser.parse_args()
    rows = [
        run(b, args.events, args.batch, args.sessions, args.lag_limit, args.timeout)
        for b in args.backend or ["embedded"]
    ]
    print(f"{args.events:,} events of ~300 characters, batches of {args.batch} over {args.sessions} sessions\n")
    print(
        "| backend | first 20 batches, median ms | last 20, median ms | last / first | peak RSS MiB | "
        "auto-save lag s | events kept after restart |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        lag = "not within the limit" if r["autosave_lag_s"] is None else f"{r['autosave_lag_s']:.0f}"
        print(
            f"| {r['backend']} | {r['first_ms']:.0f} | {r['last_ms']:.0f} | {r['ratio']:.2f} | "
            f"{r['peak_rss_mib']:.0f} | {lag} | {r['kept']:,} of {r['events']:,} |"
        )
    for r in rows:
        if "stopped" in r:
            print(f"\n{r['backend']}: the load stopped after {r['batches']} batches: {r['stopped']}")


if __name__ == "__main__":
    main()
