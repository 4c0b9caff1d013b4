"""What a memory's S3 objects hold, read the way a test must see them: a manifest may hold records inline
(``"i"``: an ``AMEM2`` part, zlib-compressed, base64; ``stores/s3_memories.py``), which a search of an object's
raw bytes for a text would not find. Decoded here from the stored format, not through the store's code."""

from __future__ import annotations

import base64
import json
import zlib
from typing import Any

from agent_memory.stores.memory_parts import decode_part
from agent_memory.stores.ports import MemoryRecord


def inline_part(manifest: dict[str, Any]) -> bytes:
    """The part a manifest (parsed JSON) holds inline; b"" when it holds none."""
    blob = manifest.get("i")
    return zlib.decompress(base64.b64decode(blob)) if blob else b""


def inline_records(manifest: dict[str, Any]) -> list[MemoryRecord]:
    part = inline_part(manifest)
    return decode_part(part)[0] if part else []


def readable(body: bytes) -> bytes:
    """An object version's bytes followed, for a manifest holding records inline, by their decompressed part."""
    if not body.startswith(b"{"):
        return body
    try:
        data = json.loads(body)
    except ValueError:
        return body
    return body + inline_part(data) if isinstance(data, dict) else body


def version_bytes(s3: Any, bucket: str, prefix: str) -> bytes:
    """Every version of every object under ``prefix``, readable, concatenated."""
    stored = b""
    for page in s3.get_paginator("list_object_versions").paginate(Bucket=bucket, Prefix=prefix):
        for v in page.get("Versions", []):
            stored += readable(s3.get_object(Bucket=bucket, Key=v["Key"], VersionId=v["VersionId"])["Body"].read())
    return stored
