"""S3 adapter of the BlobStore port: the context bucket."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import ServiceUnavailable
from .ports import BlobMissing

# The tag of an offloaded payload no stored event refers to yet; the bucket's lifecycle rule (template.yaml,
# expire-staged-session-payloads) expires objects still carrying it a day after they were written.
STAGED_TAG = "agent-memory-staged"


class S3BlobStore:
    """``client`` is a factory: the S3 client is built on first use, not on every cold start."""

    def __init__(self, client: Callable[[], Any], bucket: str) -> None:
        self._client = client
        self._bucket = bucket

    @property
    def _s3(self) -> Any:
        return self._client()

    def put(self, key: str, data: bytes, *, staged: bool = False) -> None:
        extra = {"Tagging": f"{STAGED_TAG}=true"} if staged else {}
        self._s3.put_object(Bucket=self._bucket, Key=key, Body=data, ContentType="application/json", **extra)

    def confirm(self, key: str) -> None:
        """Remove the staged tag from the current version: the lifecycle rule no longer expires it."""
        try:
            self._s3.delete_object_tagging(Bucket=self._bucket, Key=key)
        except self._s3.exceptions.NoSuchKey:
            pass
        except self._s3.exceptions.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in {"NoSuchKey", "404"}:
                raise

    def get(self, key: str) -> bytes:
        try:
            return bytes(self._s3.get_object(Bucket=self._bucket, Key=key)["Body"].read())
        except self._s3.exceptions.NoSuchKey as exc:
            raise BlobMissing(key) from exc

    def delete(self, key: str) -> None:
        self._s3.delete_object(Bucket=self._bucket, Key=key)

    def delete_prefix(
        self,
        prefix: str,
        *,
        keep_prefix: str | Callable[[], str | None] | None = None,
        modified_before: float | None = None,
    ) -> int:
        """Delete every object version under ``prefix`` (the bucket is versioned: nothing may remain) but those
        under ``keep_prefix`` (a callable is asked again for every page) and, with ``modified_before``, those
        written at or after that time (epoch seconds)."""
        deleted = 0
        paginator = self._s3.get_paginator("list_object_versions")
        for page in paginator.paginate(Bucket=self._bucket, Prefix=prefix):
            keep = keep_prefix() if callable(keep_prefix) else keep_prefix
            doomed = [
                {"Key": v["Key"], "VersionId": v["VersionId"]}
                for v in page.get("Versions", []) + page.get("DeleteMarkers", [])
                if (keep is None or not v["Key"].startswith(keep))
                and (modified_before is None or v["LastModified"].timestamp() < modified_before)
            ]
            for start in range(0, len(doomed), 1000):
                batch = doomed[start : start + 1000]
                response = self._s3.delete_objects(Bucket=self._bucket, Delete={"Objects": batch, "Quiet": True})
                if response.get("Errors"):  # a version still holds the data: the caller must not report success
                    first = response["Errors"][0]
                    raise ServiceUnavailable(f"S3 could not delete {first.get('Key')!r} ({first.get('Code')}); retry")
                deleted += len(batch)
        return deleted
