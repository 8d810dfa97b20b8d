"""Local files as sources: bulk imports from disk, and tests.

Only operators configure these (a source URL is a path on the worker's own disk), so
there is no address guard here; do not let untrusted users create file sources.
"""

import os
import stat
import time
from urllib.parse import unquote, urlsplit

from ingestion.fetching.outcomes import FetchError, FetchResult


def read_local(path: str, *, max_bytes: int) -> FetchResult:
    """Read a `file://` URL or a plain path, refusing files over `max_bytes`."""
    started = time.monotonic()
    file_path = _file_path(path)
    try:
        # O_NONBLOCK: opening a FIFO would otherwise wait for a writer, possibly forever.
        descriptor = os.open(file_path, os.O_RDONLY | os.O_NONBLOCK)
    except FileNotFoundError as exc:
        raise FetchError(f"no such file: {file_path}", permanent=True) from exc
    except (PermissionError, NotADirectoryError) as exc:
        raise FetchError(f"cannot open {file_path}: {exc.strerror}", permanent=True) from exc
    except OSError as exc:
        raise FetchError(f"cannot open {file_path}: {exc.strerror}", permanent=False) from exc
    try:
        body = _read_regular_file(descriptor, file_path, max_bytes)
    finally:
        os.close(descriptor)
    if len(body) > max_bytes:
        raise FetchError(f"payload over {max_bytes} bytes", permanent=True)
    # There is no HTTP status for a file; 200 lets callers treat both kinds alike.
    return FetchResult(
        body=body,
        not_modified=False,
        etag="",
        last_modified="",
        status=200,
        elapsed_s=time.monotonic() - started,
    )


def _read_regular_file(descriptor: int, file_path: str, max_bytes: int) -> bytes:
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode):
        raise FetchError(f"not a regular file: {file_path}", permanent=True)
    if info.st_size > max_bytes:
        raise FetchError(f"payload over {max_bytes} bytes", permanent=True)
    try:
        with os.fdopen(descriptor, "rb", closefd=False) as handle:
            return handle.read(max_bytes + 1)  # a byte over: the file may have grown
    except OSError as exc:
        raise FetchError(f"cannot read {file_path}: {exc.strerror}", permanent=False) from exc


def _file_path(path: str) -> str:
    if not path.startswith("file:"):
        return path
    parts = urlsplit(path)
    if parts.netloc not in ("", "localhost"):
        raise FetchError(f"file URL names another host: {path}", permanent=True)
    if not parts.path:
        raise FetchError(f"file URL has no path: {path}", permanent=True)
    return unquote(parts.path)
