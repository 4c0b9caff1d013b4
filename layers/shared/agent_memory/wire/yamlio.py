"""YAML in and out (session exports): PyYAML's safe loader and dumper, hardened as the JSON body parser is.

A YAML document is read only as the JSON tree it spells (``parse_yaml_body``), never as YAML's richer graph:

- anchors and aliases are refused (an alias repeats a subtree: a few hundred bytes of "billion laughs" expand to
  gigabytes), and so are tags, explicit ones (``!!python/object``, ``!!binary``, ``!foo``) included: only the
  plain JSON types come out;
- scalars resolve as JSON's types do: no timestamps (``2024-01-01`` stays a string), no ``<<`` merge keys (a
  plain key), and keys must be strings;
- nesting is measured on the parser's events (no recursion) before anything is built, with the JSON parser's
  bound; numbers DynamoDB cannot hold, NaN and infinities, and lone surrogates are refused as in JSON
  (``jsonvalues.check_json_value``); a key twice in one mapping is refused.

``dump_yaml`` writes the same tree with ``yaml.safe_dump`` (keys in their order, Unicode as is), so a document it
wrote reads back to the tree it was given.
"""

from __future__ import annotations

import json
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.error import MarkedYAMLError, YAMLError

from ..limits import MAX_BODY_BYTES, MAX_DOCUMENT_DEPTH
from .jsonio import RawJSON
from .jsonvalues import JsonRejected, JsonTooLarge, check_json_value

YAML = "application/yaml"
YAML_TYPES = frozenset({"application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml"})

# JSON's scalars only: the core schema's null, bool, int and float, without YAML 1.1's timestamps and merge keys.
_RESOLVED = {"tag:yaml.org,2002:null", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}


class _JsonMappings:
    """Mappings as JSON's objects: string keys, each once."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)  # type: ignore[attr-defined]
            if not isinstance(key, str):
                raise ConstructorError(None, None, "mapping keys must be strings", key_node.start_mark)
            if key in seen:
                raise ConstructorError(None, None, f"key {key!r} appears twice in one mapping", key_node.start_mark)
            seen.add(key)
        mapping: dict[Any, Any] = super().construct_mapping(node, deep=deep)  # type: ignore[misc]
        return mapping


class _JsonLoader(_JsonMappings, yaml.SafeLoader):
    """SafeLoader resolving only JSON's scalar types; duplicate keys refused."""


_JsonLoader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag in _RESOLVED]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}

# libyaml's parser where PyYAML has it (the layer's wheel does): the same resolution and construction, in Python, over
# events parsed in C, about ten times faster (an 855 KB export took 5 s of CPU to read with the Python parser,
# against the function's 29 s).
if getattr(yaml, "__with_libyaml__", False):

    class _CJsonLoader(_JsonMappings, yaml.CSafeLoader):
        """``_JsonLoader`` over libyaml's parser."""

        yaml_implicit_resolvers = _JsonLoader.yaml_implicit_resolvers

    _LOADER: type[Any] = _CJsonLoader
else:  # pragma: no cover (a PyYAML built without libyaml)
    _LOADER = _JsonLoader


def content_type_is_yaml(value: str | None) -> bool:
    """Whether a ``Content-Type`` header names YAML (parameters such as ``charset`` ignored)."""
    if not value:
        return False
    return value.split(";", 1)[0].strip().lower() in YAML_TYPES


def _check_events(text: str) -> None:
    """Refuse aliases, anchors, tags and nesting past the bound, on the parser's event stream (no recursion)."""
    depth = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.AliasEvent):
            raise JsonRejected("YAML aliases (*name) are refused; write the value out")
        if getattr(event, "anchor", None) is not None:
            raise JsonRejected("YAML anchors (&name) are refused")
        if isinstance(event, yaml.ScalarEvent | yaml.CollectionStartEvent) and event.tag is not None:
            raise JsonRejected(f"YAML tags ({event.tag}) are refused; only JSON's types are read")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_DOCUMENT_DEPTH:
                raise JsonRejected(f"YAML nests deeper than {MAX_DOCUMENT_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def parse_yaml_body(text: str) -> Any:
    """Parse a YAML request body as the JSON tree it spells; JsonRejected (a message for the client) for anything
    refused (see the module). One document; an empty one is no body."""
    if len(text) > MAX_BODY_BYTES:
        raise JsonTooLarge(f"body is over {MAX_BODY_BYTES} bytes")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise JsonRejected("body is not valid Unicode text (a lone surrogate)") from exc
    try:
        _check_events(text)
        value = yaml.load(text, Loader=_LOADER)
    except JsonRejected:
        raise
    except MarkedYAMLError as exc:
        raise JsonRejected(f"body is not valid YAML: {exc.problem} {exc.problem_mark or ''}".strip()) from exc
    except (YAMLError, RecursionError, ValueError) as exc:
        raise JsonRejected(f"body is not valid YAML: {str(exc)[:200]}") from exc
    try:
        check_json_value(value, max_depth=MAX_DOCUMENT_DEPTH)
    except JsonRejected as exc:
        raise JsonRejected(f"body: {exc}") from exc
    return value


class _Dumper(yaml.SafeDumper):
    """SafeDumper that writes stored JSON kept verbatim (``RawJSON``) as the value it spells."""


def _represent_raw(dumper: yaml.SafeDumper, data: RawJSON) -> yaml.Node:
    return dumper.represent_data(json.loads(data.text))


# Characters PyYAML's emitter may write raw inside a plain, single-quoted or block scalar where its reader folds
# or normalises them (NEL and the Unicode line and paragraph separators are line breaks to YAML; a carriage
# return is folded): a string holding one is written double-quoted, where they are escaped.
_FOLDED = frozenset("\x85\u2028\u2029\r\ufeff")


def _represent_str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    if any(ch in _FOLDED or (not ch.isprintable() and ch != "\n") for ch in data):
        return dumper.represent_scalar("tag:yaml.org,2002:str", data, style='"')
    return dumper.represent_str(data)


_Dumper.add_representer(RawJSON, _represent_raw)
_Dumper.add_representer(str, _represent_str)


def dump_yaml(value: Any) -> str:
    """``value`` (a JSON tree) as one YAML document: block style, keys in their order, Unicode as is."""
    text: str = yaml.dump(
        value, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False, width=1_000_000
    )
    return text
