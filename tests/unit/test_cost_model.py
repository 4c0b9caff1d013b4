"""bench.cost's pricing rules: DynamoDB's item size formula and which index entries a write touches."""

from __future__ import annotations

from bench.cost import Index, item_kind, item_size, table_indexes, value_size
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
