"""Files on disk as the BlobStore port: the context bucket of the embedded backend.

Layout under ``root``:

- ``objects/{key}``  the object's bytes at the path its S3-style key names (``/`` separates folders), so the
  data is readable with ordinary tools;
- ``staged/{key}``  an empty marker for an object put ``staged`` and not confirmed yet (S3: the staged tag).
  ``expire_staged`` deletes staged objects older than a day (S3: the bucket's lifecycle rule);
- ``tmp/``  writes in progress. A put writes a temporary file there, fsyncs it and renames it over the object
  (``os.replace``, atomic on one file system), then fsyncs the folder: a reader sees the old bytes or the new
  ones, never a torn file, and a crash leaves at worst a temporary file (swept by ``expire_staged``).

An object's modification time is set from ``time.time()`` before the rename, so ``delete_prefix``'s
``modified_before`` compares with the same clock as its callers (the file system's own clock is coarser).

Keys are relative paths: an empty, absolute or ``..`` / ``.`` component, or a NUL byte, is refused with
ValueError, so no key reaches outside ``root``. Unlike S3, a key cannot be both an object and a folder of
other objects (``a/b`` and ``a/b/c``); putting the second raises ValueError. No key this project writes does.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from ..errors import ServiceUnavailable
from .ports import BlobMissing

logger = logging.getLogger(__name__)

# How many objects ``delete_prefix`` deletes between two questions to a callable ``keep_prefix`` (S3 pages
# list_object_versions by 1000).
PAGE_SIZE = 1000
# Staged objects nothing confirmed are deleted after this long (template.yaml's lifecycle rule: one day).
STAGED_EXPIRY_S = 86_400.0


def _components(key: str, *, partial_last: bool = False) -> list[str]:
    """The folders and name ``key`` is made of; ValueError if it is not a relative path inside the root.
    ``partial_last``: the last component is the start of a name (a prefix), which may be empty."""
    if not isinstance(key, str) or "\x00" in key or key.startswith("/"):
        raise ValueError(f"blob key {key!r} is not a relative path")
    parts = key.split("/")
    whole = parts[:-1] if partial_last else parts
    if any(p in {"", ".", ".."} for p in whole) or (not partial_last and not key):
        raise ValueError(f"blob key {key!r} has an empty, '.' or '..' component")
    return parts


class FileBlobStore:
    """Objects as files under ``root`` (created if missing). Safe for concurrent threads and processes."""

    def __init__(self, root: Path) -> None:
        self._root = Path(root)
        self._objects = self._root / "objects"
        self._staged = self._root / "staged"
        self._tmp = self._root / "tmp"
        for folder in (self._objects, self._staged, self._tmp):
            folder.mkdir(parents=True, exist_ok=True)

    # --- paths ----------------------------------------------------------------------------------------------

    def _path(self, base: Path, key: str) -> Path:
        return base.joinpath(*_components(key))

    def _key_of(self, path: Path) -> str:
        return path.relative_to(self._objects).as_posix()

    # --- port -----------------------------------------------------------------------------------------------

    def put(self, key: str, data: bytes, *, staged: bool = False) -> None:
        """Store ``data`` atomically (temporary file, fsync, rename). ``staged``: marked until ``confirm``."""
        target = self._path(self._objects, key)
        marker = self._path(self._staged, key)
        try:
            # A staged put writes its marker before the data, an unstaged one removes it before: a crash in
            # between leaves an object that expires unreferenced or one kept that may not be needed, never a
            # referred object that expires.
            if staged:
                self._write(marker, b"")
            else:
                _unlink(marker)
            self._write(target, data)
        except (IsADirectoryError, NotADirectoryError, FileExistsError) as exc:
            if staged:
                with contextlib.suppress(OSError):
                    marker.unlink()
            raise ValueError(f"blob key {key!r} clashes with an object or a folder of objects: {exc}") from exc
        except OSError as exc:
            raise _unavailable(exc) from exc

    def confirm(self, key: str) -> None:
        """Remove the staged mark: the object no longer expires. Idempotent; a missing object is ignored."""
        try:
            _unlink(self._path(self._staged, key))
        except OSError as exc:
            raise _unavailable(exc) from exc

    def get(self, key: str) -> bytes:
        try:
            return self._path(self._objects, key).read_bytes()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            raise BlobMissing(key) from exc
        except OSError as exc:
            raise _unavailable(exc) from exc

    def delete(self, key: str) -> None:
        """Delete the object (and its staged mark); a missing object is ignored, as S3 does."""
        target = self._path(self._objects, key)
        marker = self._path(self._staged, key)
        try:
            _unlink(target)
            _unlink(marker)
            _fsync_dir(target.parent)
        except OSError as exc:
            raise _unavailable(exc) from exc
        self._prune(target.parent)
        self._prune(marker.parent, self._staged)

    def delete_prefix(
        self,
        prefix: str,
        *,
        keep_prefix: str | Callable[[], str | None] | None = None,
        modified_before: float | None = None,
    ) -> int:
        """Delete every object whose key starts with ``prefix`` (a string prefix, as in S3, not a folder) except
        those under ``keep_prefix`` (a callable is asked again for every ``PAGE_SIZE`` objects) and, with
        ``modified_before``, those written at or after that time (epoch seconds); return how many.

        Files have no versions: deleting the file deletes the object for good. (An object re-put in the instant
        between the time check and the unlink is deleted too; callers keep new objects under ``keep_prefix``.)"""
        parts = _components(prefix, partial_last=True)
        base = self._objects.joinpath(*parts[:-1])
        deleted = 0
        page: list[tuple[str, Path]] = []
        try:
            for path in self._walk(base, parts[-1]):
                key = self._key_of(path)
                if key.startswith(prefix):
                    page.append((key, path))
                if len(page) >= PAGE_SIZE:
                    deleted += self._delete_page(page, keep_prefix, modified_before)
                    page = []
            if page:
                deleted += self._delete_page(page, keep_prefix, modified_before)
        except OSError as exc:
            raise _unavailable(exc) from exc
        return deleted

    # --- beyond the port ------------------------------------------------------------------------------------

    def is_staged(self, key: str) -> bool:
        """Whether the object was put ``staged`` and not confirmed since."""
        return self._path(self._staged, key).is_file()

    def expire_staged(self, older_than_s: float = STAGED_EXPIRY_S) -> int:
        """Delete the staged objects (and the temporary files of interrupted writes) written more than
        ``older_than_s`` ago; return how many objects. The embedded backend's stand-in for the lifecycle rule."""
        cutoff = time.time() - older_than_s
        expired = 0
        try:
            for marker in list(self._walk(self._staged, "")):
                key = marker.relative_to(self._staged).as_posix()
                target = self._path(self._objects, key)
                try:
                    written = target.stat().st_mtime
                except (FileNotFoundError, NotADirectoryError):
                    written = marker.stat().st_mtime  # a put that died between the marker and the data
                if written < cutoff and self.is_staged(key):
                    _unlink(target)
                    _unlink(marker)
                    expired += 1
                    self._prune(target.parent)
                    self._prune(marker.parent, self._staged)
            for leftover in self._tmp.iterdir():
                if leftover.stat().st_mtime < cutoff:
                    _unlink(leftover)
        except OSError as exc:
            raise _unavailable(exc) from exc
        return expired

    # --- internals ------------------------------------------------------------------------------------------

    def _write(self, target: Path, data: bytes) -> None:
        """Write ``data`` to ``target`` atomically and durably."""
        temporary = self._tmp / f"{uuid.uuid4().hex}.tmp"
        try:
            with open(temporary, "wb") as file:
                file.write(data)
                file.flush()
                os.fsync(file.fileno())
            now = time.time_ns()
            os.utime(temporary, ns=(now, now))
            for attempt in range(5):
                target.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.replace(temporary, target)
                    break
                except FileNotFoundError:
                    # A delete_prefix pruned the empty folder between our mkdir and the rename: make it again.
                    if attempt == 4:
                        raise
            _fsync_dir(target.parent)
        finally:
            _unlink(temporary)

    def _walk(self, base: Path, start: str) -> Iterator[Path]:
        """Every file under ``base`` whose path below it starts with ``start`` (a name prefix at the first
        level), in the file system's order."""
        try:
            entries = list(os.scandir(base))
        except (FileNotFoundError, NotADirectoryError):
            return
        for entry in entries:
            if not entry.name.startswith(start):
                continue
            if entry.is_dir(follow_symlinks=False):
                yield from self._walk(Path(entry.path), "")
            elif entry.is_file(follow_symlinks=False):
                yield Path(entry.path)

    def _delete_page(
        self,
        page: list[tuple[str, Path]],
        keep_prefix: str | Callable[[], str | None] | None,
        modified_before: float | None,
    ) -> int:
        keep = keep_prefix() if callable(keep_prefix) else keep_prefix
        deleted = 0
        folders: set[Path] = set()
        markers: set[Path] = set()
        for key, path in page:
            if keep is not None and key.startswith(keep):
                continue
            try:
                if modified_before is not None and path.stat().st_mtime >= modified_before:
                    continue
                path.unlink()
            except FileNotFoundError:
                continue  # deleted meanwhile by another caller: not ours to count
            marker = self._path(self._staged, key)
            if marker.exists():
                _unlink(marker)
                markers.add(marker.parent)
            deleted += 1
            folders.add(path.parent)
        for folder in folders:
            _fsync_dir(folder)
        for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
            self._prune(folder)
        for folder in sorted(markers, key=lambda f: len(f.parts), reverse=True):
            self._prune(folder, self._staged)
        return deleted

    def _prune(self, folder: Path, top: Path | None = None) -> None:
        """Remove ``folder`` and its parents up to ``top`` (default: the objects folder) while they are empty;
        best effort (a put racing it makes the folder again)."""
        top = self._objects if top is None else top
        while folder != top and top in folder.parents:
            try:
                folder.rmdir()
            except OSError:
                return
            folder = folder.parent


def _unlink(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError, NotADirectoryError):
        path.unlink()


def _fsync_dir(folder: Path) -> None:
    """Make a rename or unlink in ``folder`` durable."""
    try:
        descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _unavailable(exc: OSError) -> ServiceUnavailable:
    """A disk error (full, I/O, permissions) answers 503: the request may succeed later; nothing is torn."""
    logger.warning("blob store disk error", extra={"error": repr(exc), "errno": exc.errno})
    full = exc.errno in {errno.ENOSPC, errno.EDQUOT}
    return ServiceUnavailable("the local disk is full; free space and retry" if full else "local disk error; retry")
