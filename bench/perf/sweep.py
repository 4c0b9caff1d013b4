"""Does the compaction sweep keep up with a million active sessions a day? A simulation on a simulated clock.

    .venv/bin/python -m bench.perf.sweep [--sessions-per-day 1000000] [--windows 4] [--workers 20] [--model-s 0]

The real pieces, against DynamoDB in moto (the deployed adapter: its ``by_due`` shards, its conditional writes):
the appends that mark sessions due (``SessionService.append_events``), the schedule's dispatcher
(``CompactionService.dispatch_due``: the due listing, the shares) and the workers (``run_sessions``: the planner,
the extractive summarizer, the summary's transaction, the settle). Simulated: the clock and Lambda.

- Time runs in 5-minute windows (the default ``CompactionSchedule``). In each window ``sessions-per-day / 288``
  sessions start; a session has ``--turns`` chat turns (a user event and a reply of ~300 characters), spread over
  ``--span`` windows, each window's turns appended in one request (the due mark is set once per window whatever
  the requests: ``if_not_exists``). At the defaults (12 turns, ``CompactionInterval`` 10) every session is due
  twice: with 6 turns, under the trigger (the sweep reads it and settles it), then with 12, past it (one summary).
- At each window's end the dispatcher runs; each share it starts is a worker Lambda with the function's 300 s
  (``Timeout``), all running side by side. A worker's time is its CPU here scaled to its 512 MB's vCPU share, plus
  6 ms per DynamoDB round trip (bench.perf.cost's assumption), plus ``--model-s`` per summary for a summarizer model
  (0: the extractive summarizer, whose CPU is counted). ``run_sessions`` sees that time run out as it would.
- A session's delay: from the start of the window in which its turns crossed the trigger (the worst case) to its
  summary's commit on the simulated clock.

Counted, not timed: requests, DynamoDB read and write units (bench.perf.cost's meter: item sizes, every index entry),
Lambda invocations and billed GB-seconds; priced at bench.perf.cost's list prices. The CPU part of a worker's time is
this machine's (shared): the request counts and units are exact, the seconds an estimate.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import random
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

import local  # noqa: F401 - puts the shared layer on sys.path
from bench.support.environment import bench_environment

# bench.perf.cost's meter reads items back from its own table name.
TABLE = "agent-memory-cost"
BUCKET = "agent-memory-cost-context"
WINDOW_S = 300  # rate(5 minutes)
RUNS_PER_DAY = 86_400 // WINDOW_S
WORKER_TIMEOUT_S = 300.0  # CompactWorkerFunction's Timeout
MEMORY_MB = 512  # the template's default MemorySize (neither sweep function sets its own)


@dataclass
class Window:
    index: int
    started: int = 0  # sessions that started in the window
    appended: int = 0  # sessions appended to (each marked due, unless it already was)
    events: int = 0  # events appended
    crossed: int = 0  # sessions whose turns crossed the trigger in the window
    listed: int = 0  # due sessions the dispatcher listed
    workers: int = 0
    compacted: int = 0
    settled_idle: int = 0  # listed, nothing to compact: settled
    failed: int = 0
    requests: float = 0.0  # the sweep's DynamoDB requests (on embedded: its port calls, as many as on DynamoDB)
    left_due: int = 0  # still due after the run (every shard's listing, uncounted)
    backlog: int = 0  # crossed the trigger, not compacted yet
    worker_s_max: float = 0.0
    delay_max_min: float = 0.0
    delays: list[float] = field(default_factory=list)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sessions-per-day", type=int, default=1_000_000)
    parser.add_argument("--windows", type=int, default=3, help="5-minute windows in which sessions start")
    parser.add_argument("--drain", type=int, default=1, help="windows after them with no new sessions")
    parser.add_argument("--turns", type=int, default=12, help="chat turns per session")
    parser.add_argument("--span", type=int, default=2, help="windows a session's turns are spread over")
    parser.add_argument("--workers", type=int, default=None, help="CompactionWorkers (default: the template's)")
    parser.add_argument("--model-s", type=float, default=0.0, help="seconds a summarizer model takes per summary")
    parser.add_argument(
        "--calibrate-per-day", type=int, default=8_640, help="the rate of the moto run that measures requests"
    )
    parser.add_argument("--moto-only", action="store_true", help="run only the (small) moto simulation")
    args = parser.parse_args()
    bench_environment(TABLE, BUCKET)
    small = argparse.Namespace(**(vars(args) | {"sessions_per_day": args.calibrate_per_day}))
    calibration = run(small, "moto")
    print_table(calibration, small)
    if args.moto_only:
        return
    scaled = run(args, "embedded", per_call=calibration["per_call"])
    print()
    print_table(scaled, args)
    print()
    print_day(scaled, calibration, args)


class CountingStore:
    """The session store, counting each port call and, on DynamoDB, the requests it made (the sweep's I/O)."""

    def __init__(self, store: Any, requests: Any = None) -> None:
        self._store = store
        self._requests = requests  # () -> requests made so far (DynamoDB), or None
        self.calls: Counter[str] = Counter()
        self.made: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        target = getattr(self._store, name)
        if not callable(target):
            return target

        def counted(*args: Any, **kwargs: Any) -> Any:
            before = self._requests() if self._requests else 0
            try:
                return target(*args, **kwargs)
            finally:
                self.calls[name] += 1
                if self._requests:
                    self.made[name] += self._requests() - before

        return counted


def run(args: argparse.Namespace, backend: str, per_call: dict[str, float] | None = None) -> dict[str, Any]:
    """Simulate ``args.windows`` + ``args.drain`` windows on ``backend`` (``moto``: DynamoDB, every request
    metered; ``embedded``: SQLite, each port call charged the DynamoDB requests ``per_call`` measured on moto)."""
    import tempfile

    from agent_memory.composition import Services, compaction_settings
    from agent_memory.config import Settings
    from agent_memory.limits import MIN_SESSIONS_PER_WORKER
    from agent_memory.models import Event
    from agent_memory.policy.compaction import SESSIONS_PER_WORKER
    from agent_memory.runtime.budget import SWEEP_RESERVE_S
    from agent_memory.service.compaction import CompactionOutcome, CompactionService
    from agent_memory.service.sessions import SessionService
    from agent_memory.stores.ports import SessionKey
    from bench.perf.cost import ROUND_TRIP_S, VCPU_MB, CountingSink, Meter, chat_text, table_indexes
    from local.inprocess import in_process_aws
    from local.template import load_template, parameter_defaults

    template = load_template()
    workers = args.workers or int(parameter_defaults(template)["CompactionWorkers"])
    rng = random.Random(14)
    per_window = round(args.sessions_per_day / RUNS_PER_DAY)
    per_turn_window = math.ceil(args.turns / args.span)

    class Quiet(Meter):
        """bench.perf.cost's meter, charging only the sweep (the load's appends are not what is measured)."""

        def _before(self, *a: Any, **k: Any) -> None:
            if self.current != "load":
                super()._before(*a, **k)

        def _after(self, *a: Any, **k: Any) -> None:
            if self.current != "load":
                super()._after(*a, **k)

    with contextlib.ExitStack() as stack:
        meter: Any = None
        if backend == "moto":
            clients = stack.enter_context(in_process_aws(TABLE, BUCKET))
            import boto3
            from moto.core.botocore_stubber import BotocoreStubber

            table_keys, indexes = table_indexes(template)
            meter = Quiet(boto3.client("dynamodb", region_name="us-east-1"), table_keys, indexes, CountingSink())
            meter.attach(clients["dynamodb"])
            serialized = BotocoreStubber.process_request

            def timed(self: Any, request: Any) -> Any:
                with meter.excluded():  # moto's emulation is not the worker's work
                    return serialized(self, request)

            BotocoreStubber.process_request = timed  # type: ignore[method-assign]
            stack.callback(setattr, BotocoreStubber, "process_request", serialized)
            wired = Services(Settings.from_env(), backend="aws")
            store = CountingStore(
                wired.session_store, lambda: sum(sum(u.requests.values()) for u in meter.usage.values())
            )
        else:
            data_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-sweep-"))
            wired = Services(Settings.from_env().model_copy(update={"data_dir": data_dir}), backend="embedded")
            stack.callback(wired.close)
            store = CountingStore(wired.session_store)
        cfg = wired.settings
        interval = cfg.compaction_interval
        sessions = SessionService(wired.session_store, None)
        summaries = Counter[str]()

        class Clock:
            window_end_min = 0.0
            worker_elapsed: Any = staticmethod(lambda: 0.0)

        compacted_at: dict[SessionKey, float] = {}

        class Recorded(CompactionService):
            def compact_session(self, key: SessionKey, *, force: bool) -> CompactionOutcome:
                outcome = super().compact_session(key, force=force)
                if outcome.compacted:
                    summaries["n"] += 1
                    compacted_at.setdefault(key, Clock.window_end_min + Clock.worker_elapsed() / 60)
                return outcome

        service = Recorded(store, wired.summarizer, compaction_settings(cfg))  # type: ignore[arg-type]
        usage = {"invocations": 0, "billed_s": 0.0, "requests": 0.0}
        worker_seconds: list[float] = []

        def requests_so_far() -> float:
            if meter is not None:
                return float(
                    sum(meter.usage["worker"].requests.values()) + sum(meter.usage["dispatch"].requests.values())
                )
            return sum(n * (per_call or {}).get(name, 1.0) for name, n in store.calls.items())

        class Workers:
            """Each share as a worker Lambda runs it: its own 300 s, spent as billed."""

            def start(self, keys: list[SessionKey]) -> dict[str, Any] | None:
                if meter is not None:
                    meter.current = "worker"
                excluded0 = meter.excluded_cpu if meter is not None else 0.0
                cpu0, requests0, summaries0 = time.process_time(), requests_so_far(), summaries["n"]

                def elapsed() -> float:
                    excluded = (meter.excluded_cpu if meter is not None else 0.0) - excluded0
                    cpu = time.process_time() - cpu0 - excluded
                    waits = (requests_so_far() - requests0) * ROUND_TRIP_S["dynamodb"]
                    model = float((summaries["n"] - summaries0) * args.model_s)
                    return float(cpu * max(1.0, VCPU_MB / MEMORY_MB) + waits + model)

                Clock.worker_elapsed = elapsed
                report = service.run_sessions(keys, lambda: WORKER_TIMEOUT_S - elapsed(), reserve_s=SWEEP_RESERVE_S)
                spent = elapsed()
                usage["invocations"] += 1
                usage["billed_s"] += spent
                worker_seconds.append(spent)
                if meter is not None:
                    meter.current = "dispatch"
                return asdict(report)

        started: list[tuple[int, str]] = []  # (first window, session id)
        crossed_in: dict[SessionKey, int] = {}
        results: list[Window] = []
        wall = time.perf_counter()
        for w in range(args.windows + args.drain):
            window = Window(w)
            if meter is not None:
                meter.current = "load"
            if w < args.windows:
                for i in range(per_window):
                    sid = f"s{w}-{i}"
                    sessions.create_session(app_name="bench", user_id=f"u{w}-{i}", session_id=sid)
                    started.append((w, sid))
                window.started = per_window
            for first, sid in started:
                done = (w - first) * per_turn_window
                turns = min(per_turn_window, args.turns - done)
                if w < first or turns <= 0:
                    continue
                events = []
                for t in range(done, done + turns):
                    for role, author in (("user", "user"), ("model", "agent")):
                        body = {
                            "id": f"{sid}-{t}-{author}",
                            "invocation_id": f"{sid}-inv{t}",
                            "author": author,
                            "timestamp": time.time(),
                            "content": {"role": role, "parts": [{"text": chat_text(rng)}]},
                        }
                        events.append(Event.model_validate(body))
                user = sid.replace("s", "u", 1)
                sessions.append_events(app_name="bench", user_id=user, session_id=sid, events=events)
                window.appended += 1
                window.events += len(events)
                if done < interval <= done + turns:
                    crossed_in[SessionKey("bench", user, sid)] = w
                    window.crossed += 1
            # The schedule runs at the window's end; its workers run side by side from there.
            Clock.window_end_min = (w + 1) * WINDOW_S / 60
            if meter is not None:
                meter.current = "dispatch"
            worker_seconds.clear()
            before = requests_so_far()
            report = service.dispatch_due(
                Workers(), workers=workers, per_worker=SESSIONS_PER_WORKER, min_share=MIN_SESSIONS_PER_WORKER
            )
            if meter is not None:
                meter.current = "load"
            # The dispatcher waits for its listing's round trips and one Invoke per worker (20 ms, as S3's).
            usage["invocations"] += 1
            usage["billed_s"] += report.workers * ROUND_TRIP_S["s3"]
            window.requests = requests_so_far() - before
            usage["requests"] += window.requests
            window.listed, window.workers = report.due, report.workers
            window.compacted = report.compacted
            window.settled_idle = report.settled - report.compacted
            window.failed = report.failed
            window.left_due = len(wired.session_store.list_due(10**7))
            window.worker_s_max = max(worker_seconds, default=0.0)
            window.delays = [
                compacted_at[k] - crossed_in[k] * WINDOW_S / 60
                for k in crossed_in
                if k in compacted_at and compacted_at[k] >= Clock.window_end_min
            ]
            window.delay_max_min = max(window.delays, default=0.0)
            window.backlog = sum(1 for k in crossed_in if k not in compacted_at)
            results.append(window)
            print(
                f"{backend} window {w}: {asdict(window) | {'delays': len(window.delays)}}", file=sys.stderr, flush=True
            )
        wall = time.perf_counter() - wall
        units: dict[str, float] = {}
        if meter is not None:
            both = [meter.usage["worker"], meter.usage["dispatch"]]
            units = {"wru": float(sum(sum(u.wru.values()) for u in both)), "rru": float(sum(u.rru for u in both))}
        return {
            "backend": backend,
            "workers": workers,
            "per_window": per_window,
            "results": results,
            "usage": usage,
            "units": units,
            "per_call": {name: store.made[name] / n for name, n in store.calls.items() if n} if meter else per_call,
            "wall_s": wall,
        }


def print_table(sim: dict[str, Any], args: argparse.Namespace) -> None:
    results: list[Window] = sim["results"]
    where = "DynamoDB in moto, every request metered" if sim["backend"] == "moto" else "SQLite (embedded)"
    model = f"a summarizer model of {args.model_s} s per summary" if args.model_s else "the extractive summarizer"
    print(
        f"{args.sessions_per_day:,} sessions a day on {where}: {sim['per_window']:,} start every 5 minutes, "
        f"{args.turns} turns each over {args.span} windows; CompactionWorkers {sim['workers']}, {model}; "
        f"{sim['wall_s'] / 60:.1f} min on the shared machine\n"
    )
    print(
        "| window | started | appended to (due) | crossed the trigger | listed due | workers | compacted "
        "| settled, nothing to do | failed | still due after | backlog | longest worker (s) | max delay (min) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        print(
            f"| {r.index} | {r.started:,} | {r.appended:,} | {r.crossed:,} | {r.listed:,} | {r.workers} "
            f"| {r.compacted:,} | {r.settled_idle:,} | {r.failed} | {r.left_due:,} | {r.backlog:,} "
            f"| {r.worker_s_max:.0f} | {r.delay_max_min:.1f} |"
        )
    compacted = max(1, sum(r.compacted for r in results))
    print(
        f"\nrequests per compacted session {sum(r.requests for r in results) / compacted:.1f}"
        + (
            f"; DynamoDB read units {sim['units']['rru'] / compacted:.1f}, "
            f"write units {sim['units']['wru'] / compacted:.1f}"
            if sim["units"]
            else ""
        )
        + f"; listed due per compaction {sum(r.listed for r in results) / compacted:.2f}"
    )


def print_day(scaled: dict[str, Any], calibration: dict[str, Any], args: argparse.Namespace) -> None:
    """A day at the scaled run's rate: its invocations and billed seconds, the calibration's units per session."""
    from bench.perf.cost import DYNAMODB_PER_M_RRU, DYNAMODB_PER_M_WRU, LAMBDA_ARM_PER_GB_S, LAMBDA_PER_M_REQUESTS

    runs = len(scaled["results"])
    per_day = RUNS_PER_DAY / runs
    compacted = sum(r.compacted for r in scaled["results"]) * per_day
    listed = sum(r.listed for r in scaled["results"]) * per_day
    calibrated = max(1, sum(r.compacted for r in calibration["results"]))
    rru = calibration["units"]["rru"] / calibrated * compacted
    # Each listed session was marked due by an append since its last settle: one by_due entry put (keys only).
    wru = calibration["units"]["wru"] / calibrated * compacted + listed
    invocations = scaled["usage"]["invocations"] * per_day
    gb_s = scaled["usage"]["billed_s"] * MEMORY_MB / 1024 * per_day
    lambda_usd = invocations * LAMBDA_PER_M_REQUESTS / 1e6 + gb_s * LAMBDA_ARM_PER_GB_S
    dynamo_usd = (wru * DYNAMODB_PER_M_WRU + rru * DYNAMODB_PER_M_RRU) / 1e6
    # The events the simulated windows appended (ramp-up and drain included), at the same scale as the costs.
    events = sum(r.events for r in scaled["results"]) * per_day
    print("| a day at this rate | |")
    print("|---|---:|")
    print(f"| compactions | {compacted:,.0f} |")
    print(f"| sessions listed due | {listed:,.0f} |")
    print(f"| Lambda invocations (dispatcher and workers) | {invocations:,.0f} |")
    print(f"| Lambda GB-seconds (512 MB) | {gb_s:,.0f} |")
    print(f"| Lambda USD | {lambda_usd:.2f} |")
    print(
        f"| DynamoDB USD ({rru / 1e6:.1f} M read units, {wru / 1e6:.1f} M write units with the due marks) "
        f"| {dynamo_usd:.2f} |"
    )
    print(
        f"| sweep USD per 1M appended events ({events:,.0f} a day) | {(lambda_usd + dynamo_usd) / events * 1e6:.2f} |"
    )


if __name__ == "__main__":
    main()
