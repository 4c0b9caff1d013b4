"""Fault injection below botocore's retry layer, for the fault tier.

moto answers in-process requests from a ``before-send`` handler; the injector wraps that handler, so it sees
every HTTP attempt botocore makes (the first and each retry) and decides whether moto gets it. A rule can
answer an attempt with an AWS error (throttling, a cancelled transaction with given reasons, an S3 5xx),
fail it in transport before it reaches the store (connect timeout), apply it and then lose the answer (read
timeout after moto applied the write), or answer with a body of its own (e.g. a BatchWriteItem that returns
every item unprocessed). botocore then does what it does in production: retries what its standard mode
retries, and raises the rest to the code under test.

    faults.fail("TransactWriteItems", throttle(), times=10)   # the ``faults`` fixture installs the injector
    faults.lose_answer("TransactWriteItems")                  # applied, then the connection times out
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import ConnectTimeoutError, ReadTimeoutError


@dataclass
class Reply:
    """An HTTP answer to give instead of the store's."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def dynamo_error(code: str, message: str = "injected", status: int = 400, **extra: Any) -> Reply:
    body = {"__type": f"com.amazonaws.dynamodb.v20120810#{code}", "message": message, **extra}
    return Reply(status, json.dumps(body).encode(), {"x-amzn-requestid": "injected"})


def throttle() -> Reply:
    return dynamo_error("ThrottlingException", "Rate of requests exceeds the allowed throughput.")


def provisioned_exceeded() -> Reply:
    return dynamo_error("ProvisionedThroughputExceededException", "The level of configured provisioned throughput")


def cancelled(*reasons: str) -> Reply:
    """A TransactionCanceledException with one reason per action (``"None"`` for an action that was fine)."""
    return dynamo_error(
        "TransactionCanceledException",
        f"Transaction cancelled, please refer cancellation reasons for specific reasons [{', '.join(reasons)}]",
        CancellationReasons=[{"Code": r} if r == "None" else {"Code": r, "Message": "injected"} for r in reasons],
    )


def s3_error(code: str = "InternalError", status: int = 500) -> Reply:
    body = f"<?xml version='1.0' encoding='UTF-8'?><Error><Code>{code}</Code><Message>injected</Message></Error>"
    return Reply(status, body.encode(), {"x-amz-request-id": "injected"})


# (apply, event name, request): ``apply()`` hands the request to moto and returns moto's answer.
Action = Callable[[Callable[[], Any], str, AWSPreparedRequest], AWSResponse | None]


@dataclass
class Rule:
    operation: str  # e.g. "TransactWriteItems", "PutObject"; "*" for every operation
    action: Action
    times: int  # attempts left to fault; -1: every attempt
    when: Callable[[AWSPreparedRequest], bool] | None = None
    hits: int = 0

    def matches(self, operation: str, request: AWSPreparedRequest) -> bool:
        if self.times == 0 or self.operation not in {"*", operation}:
            return False
        return self.when is None or self.when(request)


def request_json(request: AWSPreparedRequest) -> dict[str, Any]:
    """The JSON body of a DynamoDB request (empty for other protocols)."""
    body = request.body
    if isinstance(body, bytes | bytearray):
        body = body.decode()
    try:
        parsed = json.loads(body or "{}")
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


class FaultInjector:
    def __init__(self) -> None:
        self._original: Any = None
        self.rules: list[Rule] = []
        self.calls: list[str] = []  # every attempted operation, in order, faulted or not

    def install(self) -> FaultInjector:
        """Stand between botocore and moto for every in-process client until ``uninstall``."""
        from moto.core.botocore_stubber import BotocoreStubber

        self._original = BotocoreStubber.__call__
        injector = self

        def call(stubber: Any, event_name: str, request: Any, **kwargs: Any) -> Any:
            return injector._before_send(stubber, event_name, request, **kwargs)

        BotocoreStubber.__call__ = call  # type: ignore[method-assign]
        return self

    def uninstall(self) -> None:
        from moto.core.botocore_stubber import BotocoreStubber

        BotocoreStubber.__call__ = self._original  # type: ignore[method-assign]

    def clear(self) -> None:
        self.rules.clear()

    # --- rules --------------------------------------------------------------------------------------------

    def add(self, operation: str, action: Action, times: int = 1, when: Callable[[Any], bool] | None = None) -> Rule:
        rule = Rule(operation, action, times, when)
        self.rules.append(rule)
        return rule

    def fail(self, operation: str, reply: Reply, times: int = 1, when: Callable[[Any], bool] | None = None) -> Rule:
        """Answer ``times`` attempts (-1: all) with ``reply``; the store never sees them."""
        return self.add(operation, lambda _apply, _event, request: _response(request, reply), times, when)

    def respond(
        self, operation: str, make: Callable[[AWSPreparedRequest], Reply], times: int = 1, when: Any = None
    ) -> Rule:
        """Answer with a reply computed from the request (e.g. echo every item back as unprocessed)."""
        return self.add(operation, lambda _apply, _event, request: _response(request, make(request)), times, when)

    def timeout_before(self, operation: str, times: int = 1, when: Callable[[Any], bool] | None = None) -> Rule:
        """The connection times out before the request reaches the store: nothing is applied."""

        def action(_apply: Callable[[], Any], _event: str, request: AWSPreparedRequest) -> AWSResponse | None:
            raise ConnectTimeoutError(endpoint_url=request.url)

        return self.add(operation, action, times, when)

    def lose_answer(self, operation: str, times: int = 1, when: Callable[[Any], bool] | None = None) -> Rule:
        """The store applies the request, then the answer is lost (a read timeout): the write happened."""

        def action(apply: Callable[[], Any], _event: str, request: AWSPreparedRequest) -> AWSResponse | None:
            apply()
            raise ReadTimeoutError(endpoint_url=request.url)

        return self.add(operation, action, times, when)

    # --- the hook -----------------------------------------------------------------------------------------

    def _before_send(self, stubber: Any, event_name: str, request: Any, **kwargs: Any) -> AWSResponse | None:
        operation = event_name.rsplit(".", 1)[-1]
        self.calls.append(operation)

        def apply() -> Any:
            return self._original(stubber, event_name, request, **kwargs)

        for rule in self.rules:
            if rule.matches(operation, request):
                if rule.times > 0:
                    rule.times -= 1
                rule.hits += 1
                return rule.action(apply, event_name, request)
        return apply()


def _response(request: AWSPreparedRequest, reply: Reply) -> AWSResponse:
    from moto.core.botocore_stubber import MockRawResponse

    return AWSResponse(request.url, reply.status, reply.headers, MockRawResponse(reply.body))
