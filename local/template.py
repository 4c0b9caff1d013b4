"""Read ``template.yaml``: routes, function environments and the table and bucket definitions.

The local server and the integration tests both take their picture of the deployment from here, so the
template stays the one source of truth for routes, handlers and storage layout.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import re
import sys
import threading
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

import yaml

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE = ROOT / "template.yaml"


class _CfnLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """A YAML loader that turns CloudFormation short tags (``!Ref x``) into their long form (``{"Ref": x}``).

    libyaml's parser when PyYAML has it (the same documents, about ten times faster than the pure-Python one).
    """


def _construct_tag(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    value: Any
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = str(value).split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
    return {name: value}


_CfnLoader.add_multi_constructor("!", _construct_tag)


def load_template(path: Path = TEMPLATE) -> dict[str, Any]:
    """The template as a dict of its own (the caller may change it), parsed once per version of the file."""
    stat = path.stat()
    return copy.deepcopy(_parsed(path.resolve(), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=8)
def _parsed(path: Path, _mtime_ns: int, _size: int) -> dict[str, Any]:
    # Keyed on the file's mtime and size as well, so an edited template is read again.
    with path.open() as fh:
        return dict(yaml.load(fh, Loader=_CfnLoader))


@dataclass(frozen=True)
class Route:
    method: str
    path: str  # as in the template: /apps/{app_name}/...
    function: str  # logical id
    code_uri: str
    handler: str

    @property
    def route_key(self) -> str:
        return f"{self.method} {self.path}"

    def match(self, method: str, path: str) -> dict[str, str] | None:
        if method.upper() != self.method:
            return None
        pattern = "^" + re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/]+)", re.escape(self.path)) + "$"
        found = re.match(pattern, path)
        return found.groupdict() if found else None


@dataclass(frozen=True)
class FunctionEvent:
    """One event source of one function: where its code is and the event's properties."""

    function: str  # logical id
    code_uri: str
    handler: str
    properties: dict[str, Any]


def function_events(template: dict[str, Any], event_type: str) -> list[FunctionEvent]:
    """Every event of ``event_type`` (HttpApi, Schedule, DynamoDB …) of every function in the template."""
    default_handler = template.get("Globals", {}).get("Function", {}).get("Handler", "app.lambda_handler")
    return [
        FunctionEvent(
            logical_id, r["Properties"]["CodeUri"], r["Properties"].get("Handler", default_handler), e["Properties"]
        )
        for logical_id, r in template["Resources"].items()
        if r["Type"] == "AWS::Serverless::Function"
        for e in r["Properties"].get("Events", {}).values()
        if e["Type"] == event_type
    ]


def routes(template: dict[str, Any]) -> list[Route]:
    """Every HttpApi route of every function, as the template declares it."""
    return [
        Route(e.properties["Method"].upper(), e.properties["Path"], e.function, e.code_uri, e.handler)
        for e in function_events(template, "HttpApi")
    ]


@dataclass(frozen=True)
class Schedule:
    function: str  # logical id
    code_uri: str
    handler: str
    expression: str


def schedules(template: dict[str, Any], names: dict[str, str]) -> list[Schedule]:
    """Every Schedule event of every function (``names`` resolves a ``!Ref`` expression)."""
    return [
        Schedule(e.function, e.code_uri, e.handler, resolve(e.properties["Schedule"], names))
        for e in function_events(template, "Schedule")
    ]


def functions(template: dict[str, Any]) -> list[str]:
    return [k for k, r in template["Resources"].items() if r["Type"] == "AWS::Serverless::Function"]


def resolve(value: Any, names: dict[str, str]) -> str:
    """Resolve ``Ref`` and plain values against ``names`` (logical ids and parameters)."""
    if isinstance(value, dict) and "Ref" in value:
        return names[value["Ref"]]
    return str(value)


def parameter_defaults(template: dict[str, Any]) -> dict[str, str]:
    return {name: str(p.get("Default", "")) for name, p in template.get("Parameters", {}).items()}


def function_environment(template: dict[str, Any], logical_id: str, names: dict[str, str]) -> dict[str, str]:
    """The environment the template gives a function: Globals, then the function's own variables."""
    env: dict[str, str] = {}
    global_vars = template.get("Globals", {}).get("Function", {}).get("Environment", {}).get("Variables", {})
    own = template["Resources"][logical_id]["Properties"].get("Environment", {}).get("Variables", {})
    for key, value in {**global_vars, **own}.items():
        env[key] = resolve(value, names)
    return env


def table_definition(template: dict[str, Any], table_name: str, logical_id: str = "MemoryTable") -> dict[str, Any]:
    """CreateTable arguments equal to the template's table (keys, indexes, billing, stream, encryption)."""
    props = template["Resources"][logical_id]["Properties"]
    definition: dict[str, Any] = {
        "TableName": table_name,
        "AttributeDefinitions": props["AttributeDefinitions"],
        "KeySchema": props["KeySchema"],
        "BillingMode": props["BillingMode"],
    }
    if "LocalSecondaryIndexes" in props:
        definition["LocalSecondaryIndexes"] = props["LocalSecondaryIndexes"]
    if "GlobalSecondaryIndexes" in props:
        definition["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
    if "StreamSpecification" in props:
        definition["StreamSpecification"] = {
            "StreamEnabled": True,
            "StreamViewType": props["StreamSpecification"]["StreamViewType"],
        }
    if props.get("SSESpecification", {}).get("SSEEnabled"):
        definition["SSESpecification"] = {"Enabled": True}
    return definition


def provision(template: dict[str, Any], dynamodb: Any, s3: Any, table_name: str, bucket_name: str) -> None:
    """Create the template's table and bucket (with TTL and versioning) through the given clients."""
    dynamodb.create_table(**table_definition(template, table_name))
    ttl = template["Resources"]["MemoryTable"]["Properties"].get("TimeToLiveSpecification")
    if ttl:
        dynamodb.update_time_to_live(
            TableName=table_name,
            TimeToLiveSpecification={"AttributeName": ttl["AttributeName"], "Enabled": True},
        )
    s3.create_bucket(Bucket=bucket_name)
    bucket = template["Resources"]["ContextBucket"]["Properties"]
    if bucket.get("VersioningConfiguration", {}).get("Status") == "Enabled":
        s3.put_bucket_versioning(Bucket=bucket_name, VersioningConfiguration={"Status": "Enabled"})


class FunctionRef(Protocol):
    @property
    def code_uri(self) -> str: ...

    @property
    def handler(self) -> str: ...


def load_handler(target: FunctionRef) -> Any:
    """Import a function's handler from its file, as Lambda would (``CodeUri`` + ``Handler``).

    Safe to call from many threads at once (the local server's first concurrent requests): a module is loaded
    once, under a lock, and handed out only after its code has finished running. ``sys.modules`` holds it while
    it runs (as ``import`` does, so that dataclasses and type hints can find their module), which is why the
    check is against the modules this function has finished loading rather than ``sys.modules``.
    """
    module_file, func = target.handler.rsplit(".", 1)
    code_dir = ROOT / target.code_uri
    module_name = f"_functions.{code_dir.name}.{module_file}"
    module = _loaded.get(module_name)
    if module is None:
        with _loading:
            module = _loaded.get(module_name)
            if module is None:
                module = _exec_module(module_name, code_dir / f"{module_file}.py")
                _loaded[module_name] = module
    return getattr(module, func)


# Handler modules whose code has run to the end, by module name; filled (and read twice) under ``_loading``.
_loaded: dict[str, ModuleType] = {}
_loading = threading.Lock()


def _exec_module(module_name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(module_name, None)  # a failed import leaves nothing half-made behind, as ``import`` does
        raise
    return module
