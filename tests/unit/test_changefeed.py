"""The local change-feed pump: batches by size or window, retries from the first failed record, never loses one."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from local.changefeed import MAX_ATTEMPTS, FeedPump
from local.streams import StreamMapping


class ListOutbox:
    """The outbox protocol over a list (the SQLite store's is contract-tested with the store)."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []
        self.last_id = 0

    def add(self, n: int, at: float = 0.0) -> None:
        for _ in range(n):
            self.last_id += 1
            self.rows.append({"dynamodb": {"SequenceNumber": str(self.last_id), "ApproximateCreationDateTime": at}})

    def read_changes(self, after: int, limit: int) -> list[dict[str, Any]]:
        return [r for r in self.rows if int(r["dynamodb"]["SequenceNumber"]) > after][:limit]

    def ack_changes(self, up_to: int) -> None:
        self.rows = [r for r in self.rows if int(r["dynamodb"]["SequenceNumber"]) > up_to]


@dataclass
class Handler:
    """A function module on disk whose answers the test scripts (as the template's CodeUri/Handler name it)."""

    folder: Path

    def script(self, failures: list[list[str]]) -> None:
        (self.folder / "answers.json").write_text(json.dumps(failures))

    def calls(self) -> list[list[str]]:
        path = self.folder / "calls.json"
        return json.loads(path.read_text()) if path.exists() else []


@pytest.fixture
def handler(tmp_path: Path) -> Handler:
    module = tmp_path / f"feedfn_{tmp_path.name}"  # load_handler caches a module by its folder's name
    module.mkdir()
    (module / "app.py").write_text(
        "import json, pathlib\n"
        "HERE = pathlib.Path(__file__).parent\n"
        "def lambda_handler(event, context):\n"
        "    seqs = [r['dynamodb']['SequenceNumber'] for r in event['Records']]\n"
        "    calls = json.loads((HERE / 'calls.json').read_text()) if (HERE / 'calls.json').exists() else []\n"
        "    (HERE / 'calls.json').write_text(json.dumps(calls + [seqs]))\n"
        "    answers = json.loads((HERE / 'answers.json').read_text()) if (HERE / 'answers.json').exists() else []\n"
        "    failed = answers[len(calls)] if len(calls) < len(answers) else []\n"
        "    return {'batchItemFailures': [{'itemIdentifier': s} for s in failed]}\n"
    )
    return Handler(module)


def pump(handler: Handler, outbox: ListOutbox, batch_size: int = 3, window_s: float = 10.0) -> FeedPump:
    mapping = StreamMapping("FeedFn", str(handler.folder), "app.lambda_handler", batch_size, window_s, None)
    return FeedPump(mapping, outbox, window_s)


def test_a_batch_waits_for_its_size_or_its_window(handler: Handler) -> None:
    outbox = ListOutbox()
    feed = pump(handler, outbox)
    outbox.add(2, at=100.0)
    assert feed.step(now=105.0) == 0  # two of three, window not over
    assert feed.step(now=111.0) == 2  # the window is over: what there is goes
    outbox.add(4, at=200.0)
    assert feed.step(now=200.5) == 3  # a full batch goes at once
    assert handler.calls() == [["1", "2"], ["3", "4", "5"]]
    assert [r["dynamodb"]["SequenceNumber"] for r in outbox.rows] == ["6"]


def test_failed_records_are_handed_over_again_from_the_first_failed_one(handler: Handler) -> None:
    outbox = ListOutbox()
    feed = pump(handler, outbox)
    outbox.add(3, at=0.0)
    handler.script([["2", "3"]])
    assert feed.step(now=100.0) == 1  # only the record before the first failure is taken
    assert feed.step(now=100.5) == 0  # the retry waits
    assert feed.step(now=200.0) == 2
    assert handler.calls() == [["1", "2", "3"], ["2", "3"]]
    assert outbox.rows == []


def test_a_record_that_keeps_failing_is_dropped_after_max_attempts(handler: Handler) -> None:
    outbox = ListOutbox()
    feed = pump(handler, outbox, batch_size=2)
    outbox.add(2, at=0.0)
    handler.script([["1"]] * MAX_ATTEMPTS)
    now = 100.0
    taken = 0
    for _ in range(MAX_ATTEMPTS):
        taken += feed.step(now=now)
        now += 1000.0
    assert taken == 1 and [r["dynamodb"]["SequenceNumber"] for r in outbox.rows] == ["2"]
    assert feed.step(now=now) == 1  # the next record goes on
    assert len(handler.calls()) == MAX_ATTEMPTS + 1
