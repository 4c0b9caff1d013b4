"""S3 adapter of the BlobStore port: the context bucket."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class S3BlobStore:
    """``client`` is a factory: the S3 client is built on first use, not on every cold start."""

    def __init__(self, client: Callable[[], Any], bucket: str) -> None:
        self._client = client
        self._bucket = bucket

    @property
    def _s3(self) -> Any:
        return self._client()

    def put(self, key: str, data: bytes) -> None:
        self._s3.put_object(Bucket=self._bucket, Key=key, Body=data, ContentType="application/json")

    def get(self, key: str) -> bytes:
        return bytes(self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read())

    def delete(self, key: str) -> None:
        self._s3.delete_object(Bucket=self._bucket, Key=key)

    def delete_prefix(self, prefix: str) -> int:
        """Delete every object version under ``prefix`` (the bucket is versioned: nothing may remain)."""
        deleted = 0
        paginator = self._s3.get_paginator("list_object_versions")
        for page in paginator.paginate(Bucket=self._bucket, Prefix=prefix):
            doomed = [
                {"Key": v["Key"], "VersionId": v["VersionId"]}
                for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
            ]
            for start in range(0, len(doomed), 1000):
                batch = doomed[start : start + 1000]
                self._s3.delete_objects(Bucket=self._bucket, Delete={"Objects": batch, "Quiet": True})
                deleted += len(batch)
        return deleted
