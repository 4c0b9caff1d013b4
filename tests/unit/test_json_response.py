"""The last guard before Lambda: api.json_response never builds a response Lambda would refuse."""

from __future__ import annotations

import json

from agent_memory.edge.api import json_response
from agent_memory.wire.jsonio import RESPONSE_CAP, RawJSON


def test_a_body_within_the_cap_is_answered_as_is() -> None:
    response = json_response(200, {"text": "a" * (RESPONSE_CAP - 100)})
    assert response.status_code == 200 and len(response.body or "") > RESPONSE_CAP - 100


def test_a_body_over_the_cap_is_413_response_too_large() -> None:
    response = json_response(200, {"text": "a" * RESPONSE_CAP})
    assert response.status_code == 413
    error = json.loads(response.body or "")["error"]
    assert error["code"] == "response_too_large" and "field" not in error


def test_the_cap_counts_the_escaping_lambda_adds() -> None:
    # 3 MB of quotes is 6 MB of JSON body, 12 MB once Lambda escapes it into its result.
    body = {"text": '"' * 3_000_000}
    response = json_response(200, body, too_large_field="max_chars", too_large_hint="use max_chars")
    assert response.status_code == 413
    error = json.loads(response.body or "")["error"]
    assert error["field"] == "max_chars" and "use max_chars" in error["message"]


def test_values_kept_verbatim_are_spliced_in() -> None:
    deep = "[" * 2000 + "]" * 2000
    response = json_response(200, {"v": RawJSON(deep)})
    assert response.body == '{"v":' + deep + "}"
