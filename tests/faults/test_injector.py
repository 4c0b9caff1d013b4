"""The injector itself: faults land below botocore's retries, as they would from AWS."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from agent_memory.runtime.aws import capacity_error
from tests.support.aws import TABLE

from .injector import FaultInjector, cancelled, throttle

KEY = {"PK": {"S": "x"}, "SK": {"S": "y"}}


def test_one_throttle_is_retried_by_botocore(aws: dict[str, Any], faults: FaultInjector) -> None:
    faults.fail("PutItem", throttle())
    aws["dynamodb"].put_item(TableName=TABLE, Item=KEY)
    assert faults.calls.count("PutItem") == 2  # the throttled attempt and botocore's retry
    assert "Item" in aws["dynamodb"].get_item(TableName=TABLE, Key=KEY)


def test_throttles_past_botocore_retries_surface_as_capacity(aws: dict[str, Any], faults: FaultInjector) -> None:
    faults.fail("PutItem", throttle(), times=-1)
    key = {"PK": {"S": "throttled"}, "SK": {"S": "y"}}
    with pytest.raises(ClientError) as info:
        aws["dynamodb"].put_item(TableName=TABLE, Item=key)
    unavailable = capacity_error(info.value)
    assert unavailable is not None and unavailable.status == 503
    assert "Item" not in aws["dynamodb"].get_item(TableName=TABLE, Key=key)


def test_a_lost_answer_leaves_the_write_applied(aws: dict[str, Any], faults: FaultInjector) -> None:
    faults.lose_answer("PutItem")
    with pytest.raises(ClientError):  # botocore's retry meets the condition the first attempt made true
        aws["dynamodb"].put_item(TableName=TABLE, Item=KEY, ConditionExpression="attribute_not_exists(PK)")
    assert "Item" in aws["dynamodb"].get_item(TableName=TABLE, Key=KEY)


def test_cancellation_reasons_reach_the_caller(aws: dict[str, Any], faults: FaultInjector) -> None:
    faults.fail("TransactWriteItems", cancelled("None", "ThrottlingError"))
    with pytest.raises(aws["dynamodb"].exceptions.TransactionCanceledException) as info:
        aws["dynamodb"].transact_write_items(TransactItems=[{"Put": {"TableName": TABLE, "Item": KEY}}])
    assert [r["Code"] for r in info.value.response["CancellationReasons"]] == ["None", "ThrottlingError"]
