"""template.yaml as SAM and CloudFormation deploy it, and the sample events in events/ run through the handlers
its routes name."""

from __future__ import annotations

import copy
import json
from functools import cache
from typing import Any

from local.apigw import LambdaContext, http_api_event
from local.template import ROOT, Route, load_handler, load_template, routes
from tests.support.cfn import REGION, Stack

TEMPLATE = load_template()
EVENTS_DIR = ROOT / "events"


def load_event(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((EVENTS_DIR / f"{name}.json").read_text())
    return event


def route_for(event: dict[str, Any]) -> Route:
    """The route API Gateway would pick for the event's method and path."""
    method = event["requestContext"]["http"]["method"]
    matches = [r for r in routes(TEMPLATE) if r.match(method, event["rawPath"]) is not None]
    assert len(matches) == 1, f"{method} {event['rawPath']} matches {matches}"
    return matches[0]


def invoke(name: str) -> tuple[int, Any]:
    event = load_event(name)
    response = load_handler(route_for(event))(event, LambdaContext(function_name=name))
    assert not response.get("isBase64Encoded")
    body = response.get("body") or ""
    return int(response["statusCode"]), json.loads(body) if body else None


def check_sample_event(name: str) -> None:
    """events/<name>.json is the event API Gateway sends for the template route it names, with at least every
    field of the local API's events."""
    path = EVENTS_DIR / f"{name}.json"
    assert path.is_file()
    event = load_event(name)
    route = route_for(event)
    assert event["routeKey"] == route.route_key
    assert event["requestContext"]["routeKey"] == route.route_key
    assert event["pathParameters"] == route.match(route.method, event["rawPath"])
    assert event["requestContext"]["http"]["path"] == event["rawPath"]
    assert event["version"] == "2.0" and event["isBase64Encoded"] is False
    assert event["requestContext"]["stage"] == "$default"
    assert "iam" in event["requestContext"]["authorizer"]
    assert all(h == h.lower() for h in event["headers"]) and "content-type" in event["headers"]
    # At least every field the local API's events carry, so handlers see the same shape locally and deployed.
    reference = http_api_event(
        route,
        event["rawPath"],
        event["pathParameters"],
        query=event.get("queryStringParameters"),
        body=event.get("body"),
    )
    assert set(reference) <= set(event)
    assert set(reference["requestContext"]) <= set(event["requestContext"])
    assert set(reference["requestContext"]["http"]) <= set(event["requestContext"]["http"])
    assert event["rawQueryString"] == reference["rawQueryString"]
    if "body" in event:
        assert isinstance(json.loads(event["body"]), dict)


class _NoManagedPolicies:
    """SAM's managed-policy loader: the template names no managed policy by name, so SAM never asks."""

    def load(self) -> dict[str, str]:
        raise AssertionError("the template names a managed policy by name")


def sam_translate(template: dict[str, Any]) -> dict[str, Any]:
    """``template`` as the SAM transform turns it into plain CloudFormation (what ``sam deploy`` hands over)."""
    import os

    from samtranslator.translator.transform import transform

    local = copy.deepcopy(template)
    for resource in local["Resources"].values():
        properties = resource.get("Properties", {})
        for key in ("CodeUri", "ContentUri"):  # sam package replaces local folders with S3 locations
            if isinstance(properties.get(key), str):
                properties[key] = f"s3://artifacts/{properties[key].strip('/')}.zip"
    region = os.environ.get("AWS_DEFAULT_REGION")
    os.environ["AWS_DEFAULT_REGION"] = REGION
    try:
        translated: dict[str, Any] = transform(local, {}, _NoManagedPolicies())
    finally:
        if region is None:
            del os.environ["AWS_DEFAULT_REGION"]
        else:
            os.environ["AWS_DEFAULT_REGION"] = region
    return translated


@cache
def _translated() -> str:
    return json.dumps(sam_translate(TEMPLATE))


def deployed(overrides: dict[str, str] | None = None, template: dict[str, Any] | None = None) -> Stack:
    """The translated template as CloudFormation evaluates it for these parameters."""
    translated = json.loads(_translated()) if template is None else sam_translate(template)
    return Stack(translated, overrides)
