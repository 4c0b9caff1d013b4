"""The lean botocore models the functions' clients are built from (``local/botocore_data.py``)."""

from __future__ import annotations

import botocore.loaders
import botocore.session

from agent_memory.runtime import aws
from local.botocore_data import SERVICES, TARGET, lean_model, lean_models


def test_the_committed_models_are_the_ones_the_code_calls_for() -> None:
    """A new call of an operation (or a new botocore) changes them: run ``python -m local.botocore_data``."""
    expected = lean_models()
    committed = {str(p.relative_to(TARGET)): p.read_text(encoding="utf-8") for p in TARGET.rglob("*.json")}
    assert committed.keys() == expected.keys()
    for name, text in expected.items():
        assert committed[name] == text, f"{name} is stale: run `.venv/bin/python -m local.botocore_data`"


def test_the_clients_are_built_from_the_lean_models() -> None:
    full = botocore.loaders.Loader()
    for service in SERVICES:
        client = aws.client(service)
        operations = set(client.meta.service_model.operation_names)
        everything = set(full.load_service_model(service, "service-2")["operations"])
        assert operations < everything
    assert {"GetItem", "Query", "TransactWriteItems", "UpdateItem"} <= set(
        aws.client("dynamodb").meta.service_model.operation_names
    )
    assert "CreateGlobalTable" not in aws.client("dynamodb").meta.service_model.operation_names
    # The errors the stores catch by name are modelled, so ``client.exceptions`` has them.
    assert aws.client("dynamodb").exceptions.ConditionalCheckFailedException.__name__ == (
        "ConditionalCheckFailedException"
    )
    assert aws.client("s3").exceptions.NoSuchKey.__name__ == "NoSuchKey"


def test_a_client_of_another_service_reads_botocore_s_own_model() -> None:
    ssm = aws.client("ssm")
    everything = botocore.session.get_session().create_client("ssm", region_name="us-east-1")
    assert ssm.meta.service_model.operation_names == everything.meta.service_model.operation_names


def test_lean_model_keeps_what_the_named_operations_reach() -> None:
    model = {
        "metadata": {"protocol": "json"},
        "documentation": "the service",
        "operations": {
            "GetThing": {
                "name": "GetThing",
                "input": {"shape": "GetThingInput"},
                "output": {"shape": "GetThingOutput"},
                "errors": [{"shape": "ThingMissing"}],
                "documentation": "gets a thing",
            },
            "PutThing": {"name": "PutThing", "input": {"shape": "PutThingInput"}},
        },
        "shapes": {
            "GetThingInput": {"type": "structure", "members": {"Ids": {"shape": "IdList", "documentation": "x"}}},
            "IdList": {"type": "list", "member": {"shape": "Id"}},
            "Id": {"type": "string"},
            "GetThingOutput": {"type": "structure", "members": {"Tags": {"shape": "TagMap"}}},
            "TagMap": {"type": "map", "key": {"shape": "Id"}, "value": {"shape": "Count"}},
            "Count": {"type": "integer"},
            "ThingMissing": {"type": "structure", "members": {}, "exception": True},
            "PutThingInput": {"type": "structure", "members": {"Blob": {"shape": "Payload"}}},
            "Payload": {"type": "blob"},
            "Throttled": {"type": "structure", "members": {}, "exception": True},
            "Busy": {"type": "structure", "members": {}, "exception": True},
        },
    }
    lean = lean_model(model, {"get_thing", "Throttled", "unrelated"})
    assert list(lean["operations"]) == ["GetThing"]
    assert set(lean["shapes"]) == {
        "GetThingInput",
        "IdList",
        "Id",
        "GetThingOutput",
        "TagMap",
        "Count",
        "ThingMissing",  # an error of a kept operation
        "Throttled",  # an exception the code names
    }
    assert lean["documentation"] == ""
    assert lean["operations"]["GetThing"]["documentation"] == ""
    assert lean["shapes"]["GetThingInput"]["members"]["Ids"] == {"shape": "IdList", "documentation": ""}
    assert lean["metadata"] == {"protocol": "json"}
    assert model["documentation"] == "the service"  # the input is not changed
