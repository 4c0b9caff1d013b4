"""Writes the lean botocore service models the functions build their clients from (``agent_memory/botocore_data``).

A botocore client parses its service's whole model when it is built: S3's is 1.3 MB of JSON (184 KB gzipped),
most of it documentation, and building an S3 client cost 157 M instructions, a sixth of a cold function's
floor (``import boto3``, a DynamoDB client, one GetItem: 994 M). The lean model of a service holds only the
operations whose names occur in this repository's code (the functions', the tests', the benches': a token
``get_object`` or ``"list_object_versions"`` keeps ``GetObject`` / ``ListObjectVersions``), every shape they reach
(inputs, outputs, errors) and every exception shape the code names, with the documentation emptied. Beside it,
the service's endpoint rules, unchanged but minified and uncompressed: botocore ships them indented and
gzipped (S3's: 922 KB unzipped, 119 KB without the indentation), and decompressing and parsing them took another
20 M instructions per S3 client (13 M from these files). botocore finds these first (``agent_memory.runtime.aws`` puts
the folder ahead of its own data) and everything else (paginators, waiters, other services) in its own data.

Both are botocore's data at the version pinned in requirements-dev.txt (the Lambda runtime's at the time): a
runtime with a newer botocore reads them as it reads any model a user supplies (``AWS_DATA_PATH``); what the
newer data adds (operations we do not call, endpoint variants) is not used until they are written again.

    .venv/bin/python -m local.botocore_data        # rewrite the models (tests/unit/test_botocore_data.py: current)
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "layers" / "shared" / "agent_memory" / "botocore_data"
SERVICES = ("dynamodb", "s3", "events")  # the clients every cold function or a frequent route builds
# Where operations are called: the functions, what runs them locally, the tests and benches (they share the
# functions' clients: ``local.inprocess``).
SOURCES = ("layers/shared/agent_memory", "functions", "local", "tests", "bench")
_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def source_tokens(root: Path = ROOT) -> set[str]:
    """Every identifier-like word of the Python sources (names, attributes, words inside strings)."""
    words: set[str] = set()
    for folder in SOURCES:
        for path in sorted((root / folder).rglob("*.py")):
            words.update(_TOKEN.findall(path.read_text(encoding="utf-8")))
    return words


def lean_model(model: dict[str, Any], words: set[str]) -> dict[str, Any]:
    """``model`` with only the operations ``words`` name (botocore's snake_case), the shapes they reach and the
    exception shapes ``words`` name, every ``documentation`` emptied (botocore reads some of them: kept, as "")."""
    from botocore import xform_name

    operations = {name: op for name, op in model["operations"].items() if xform_name(name) in words}
    shapes: dict[str, Any] = model["shapes"]
    todo = [op[part]["shape"] for op in operations.values() for part in ("input", "output") if part in op]
    todo += [error["shape"] for op in operations.values() for error in op.get("errors", [])]
    todo += [name for name, shape in shapes.items() if shape.get("exception") and name in words]
    kept: set[str] = set()
    while todo:
        name = todo.pop()
        if name in kept:
            continue
        kept.add(name)
        shape = shapes[name]
        todo += [member["shape"] for member in shape.get("members", {}).values()]
        todo += [shape[part]["shape"] for part in ("member", "key", "value") if part in shape]
    lean: dict[str, Any] = _undocumented(
        {**model, "operations": operations, "shapes": {n: s for n, s in shapes.items() if n in kept}}
    )
    return lean


def _undocumented(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "" if k == "documentation" else _undocumented(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_undocumented(v) for v in value]
    return value


def lean_models(root: Path = ROOT) -> dict[str, str]:
    """The lean models' files (relative path -> JSON text), from the botocore installed here."""
    import botocore.loaders

    loader = botocore.loaders.Loader()
    words = source_tokens(root)
    files = {}
    for service in SERVICES:
        version = loader.determine_latest_version(service, "service-2")
        model = loader.load_service_model(service, "service-2", version)
        text = json.dumps(lean_model(model, words), separators=(",", ":"))
        files[f"{service}/{version}/service-2.json"] = text + "\n"
        rules = loader.load_service_model(service, "endpoint-rule-set-1", version)
        files[f"{service}/{version}/endpoint-rule-set-1.json"] = json.dumps(rules, separators=(",", ":")) + "\n"
    return files


def main() -> None:
    for relative, text in lean_models().items():
        path = TARGET / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        print(f"{path.relative_to(ROOT)}: {len(text):,} bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
