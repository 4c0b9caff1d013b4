"""bench.perf.cost's pricing rules: DynamoDB's item size formula and which index entries a write touches."""

from __future__ import annotations

from typing import Any

from agent_memory.stores.dynamo.sizes import item_size, value_size
from bench.perf.cost import Index, item_kind, table_indexes
from local.template import load_template


def test_sizes_follow_dynamodbs_formula() -> None:
    assert value_size({"S": "héllo"}) == 6  # UTF-8 bytes
    assert value_size({"N": "123"}) == 3  # two digits per byte, plus one
    assert value_size({"N": "1000"}) == 2  # trailing zeros do not count
    assert value_size({"N": "-12.5"}) == 3
    assert value_size({"BOOL": True}) == 1 and value_size({"NULL": True}) == 1
    assert value_size({"L": []}) == 3 and value_size({"M": {}}) == 3
    assert value_size({"L": [{"S": "ab"}]}) == 3 + 1 + 2
    assert value_size({"M": {"k": {"S": "ab"}}}) == 3 + 1 + 1 + 2
    assert item_size({"PK": {"S": "U#a#b"}, "seq": {"N": "12"}}) == 2 + 5 + 3 + 2


def test_indexes_are_read_from_the_template() -> None:
    keys, indexes = table_indexes(load_template())
    assert keys == ("PK", "SK")
    by_name = {i.name: i for i in indexes}
    assert by_name["by_seq"] == Index("by_seq", ("seq",), "ALL")
    assert by_name["by_ts"] == Index("by_ts", ("ts",), "ALL")
    assert by_name["by_due"] == Index("by_due", ("due", "due_since"), "KEYS_ONLY")


def test_a_sparse_index_holds_only_items_with_its_keys() -> None:
    due = Index("by_due", ("due", "due_since"), "KEYS_ONLY")
    session = {"PK": {"S": "U#a#u"}, "SK": {"S": "S#s"}, "version": {"N": "3"}}
    assert due.entry(session, ("PK", "SK")) is None
    marked = session | {"due": {"S": "DUE#1"}, "due_since": {"N": "5"}}
    assert due.entry(marked, ("PK", "SK")) == {k: v for k, v in marked.items() if k != "version"}
    assert item_kind(session) == "session" and item_kind({"SK": {"S": "V#e1"}}) == "event"


def _record(i: int, size: int = 100) -> dict[str, object]:
    return {"n": i, "pad": "x" * size}


def test_the_stream_batcher_closes_a_batch_by_count_window_or_payload_whichever_first() -> None:
    from bench.perf.cost import PAYLOAD_LIMIT_BYTES, StreamBatcher

    # by the count: 3 records arrive in a second, the batch of 3 closes when the third does
    b = StreamBatcher(batch_size=3, window_s=300)
    for i in range(4):
        b.add(i * 0.5, _record(i))
    assert [[r["n"] for r in batch] for batch in b.due(now=2.0)] == [[0, 1, 2]]
    # by the window: the 4th record's batch stays open until 300 s after it, then closes with what came
    b.add(100.0, _record(4))
    assert list(b.due(now=300.0)) == []
    assert [[r["n"] for r in batch] for batch in b.due(now=301.5)] == [[3, 4]]
    # a record past the window opens the next batch
    b = StreamBatcher(batch_size=1000, window_s=60)
    for at in (0.0, 30.0, 61.0):
        b.add(at, _record(int(at)))
    assert [[r["n"] for r in batch] for batch in b.due(now=200.0)] == [[0, 30], [61]]
    # by the payload: records of ~1 MB, six do not fit in 6 MB
    b = StreamBatcher(batch_size=1000, window_s=300)
    for i in range(7):
        b.add(float(i), _record(i, size=PAYLOAD_LIMIT_BYTES // 6))
    assert [len(batch) for batch in b.due(now=6.0)] == [5]
    assert b.closed_by == {"payload": 1}


def test_platform_lines_are_priced_as_the_template_configures_them() -> None:
    import copy

    from bench.perf.cost import PLATFORM_LOG_BYTES, platform_log_bytes

    template = load_template()
    assert platform_log_bytes(template, "AppendEventFunction") == 0  # JSON, SystemLogLevel WARN at LogLevel INFO
    quiet = copy.deepcopy(template)
    quiet["Parameters"]["LogLevel"]["Default"] = "WARNING"  # the Text format: the platform lines are back
    assert platform_log_bytes(quiet, "AppendEventFunction") == PLATFORM_LOG_BYTES
    del template["Globals"]["Function"]["LoggingConfig"]
    assert platform_log_bytes(template, "AppendEventFunction") == PLATFORM_LOG_BYTES


def test_the_3_wru_design_halves_only_what_a_transaction_wrote_and_drops_the_lsis() -> None:
    from bench.perf.cost import ROUND_TRIP_S, design_append

    def usage(wru: dict[str, float], wru_tx: dict[str, float], transactions: int) -> dict[str, object]:
        return {
            "wru": wru,
            "wru_tx": wru_tx,
            "billed_s": 1.0,
            "requests": {"dynamodb:TransactWriteItems": transactions},
        }

    result: dict[str, Any] = {
        "appended": 10,
        "usage": {
            # 10 appends: event and session in a transaction (2 + 2), an entry in each LSI, a due mark
            "append": usage(
                {"event": 20, "session": 20, "index by_seq": 10, "index by_ts": 10, "index by_due": 1},
                {"event": 20, "session": 20},
                10,
            ),
            # one compaction (a 3 KB event, in a transaction) and one settling UpdateItem outside any
            "sweep": usage({"event": 6, "session": 3, "index by_seq": 3}, {"event": 6, "session": 2}, 1),
        },
        "storage": {"events": 11, "table_bytes": 1000, "index_bytes": 900, "index_bytes_by": {"by_seq": 400}},
    }
    design = design_append(result)
    append, sweep = design["usage"]["append"], design["usage"]["sweep"]
    assert append["wru"] == {"event": 10, "session": 10, "index by_due": 1, "id": 10}  # 3.1 WRU an append
    assert sweep["wru"] == {"event": 3, "session": 2, "id": 1}  # the settling write stays 1 WRU
    assert append["requests"] == {"dynamodb:PutItem": 20, "dynamodb:UpdateItem": 10}
    assert append["billed_s"] == 1.0 + 20 * ROUND_TRIP_S["dynamodb"]
    assert design["storage"]["index_bytes"] == 500 and design["storage"]["table_bytes"] == 1000 + 11 * 250
    assert result["usage"]["append"]["wru"]["event"] == 20  # the measured result is left as it was


def test_the_seq_keyed_design_over_claim_first_appends_adds_the_id_item_and_the_session_read() -> None:
    from bench.perf.cost import ROUND_TRIP_S, design_append

    result: dict[str, Any] = {
        "appended": 10,
        "usage": {
            # 10 claim-first appends: the claim (session 1) and the put (event 1), its by_seq entry, a due mark
            "append": {
                "wru": {"event": 10, "session": 10, "index by_seq": 10, "index by_due": 1},
                "wru_tx": {},
                "rru": 0.0,
                "billed_s": 1.0,
                "requests": {"dynamodb:UpdateItem": 10, "dynamodb:PutItem": 10},
            },
        },
        "storage": {"events": 10, "table_bytes": 1000, "index_bytes": 900, "index_bytes_by": {"by_seq": 400}},
    }
    design = design_append(result)
    append = design["usage"]["append"]
    assert append["wru"] == {"event": 10, "session": 10, "index by_due": 1, "id": 10}  # 3.1 WRU as well
    assert append["rru"] == 10  # the session read the claim saves
    assert append["requests"] == {"dynamodb:UpdateItem": 10, "dynamodb:PutItem": 20, "dynamodb:GetItem": 10}
    assert append["billed_s"] == 1.0 + 20 * ROUND_TRIP_S["dynamodb"]
