"""Export files: a stream's events as JSON lines, one event per line exactly as stored.

Compaction writes the events it is about to delete here first, so the audit trail outlives the
keys. Each file is written under a temporary name, flushed to disk and then renamed, so a file
with the final name is always complete.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import quote

from ledger.errors import PluginError
from ledger.events import Event


def json_lines(stored: Iterable[bytes]) -> bytes:
    """Events as stored (their etcd values, which are single-line JSON), one per line."""
    return b"".join(value + b"\n" for value in stored)


MAX_NAME_PART = 120
"""Bytes of the escaped node name kept in a file name (file systems allow 255 in all)."""


def file_name(node: str, events: list[Event], op: str) -> str:
    """``<node>.<first seq>-<last seq>.<op>.jsonl``; the node name is %-escaped, so it is
    always one plain file name (no ``/``, no leading dot). A name too long for a file name is
    cut, with a digest of the whole name in place of the rest."""
    safe = quote(node, safe="-_~").replace(".", "%2E")
    if len(safe) > MAX_NAME_PART:
        digest = hashlib.sha256(node.encode()).hexdigest()[:16]
        safe = f"{safe[: MAX_NAME_PART - 17]}~{digest}"
    return f"{safe}.{events[0].seq:012d}-{events[-1].seq:012d}.{op[:12]}.jsonl"


def write(directory: str, node: str, stored: list[bytes], events: list[Event], op: str) -> Path:
    """Write the events (``stored``: their etcd values) to a new file in ``directory``."""
    folder = Path(directory).expanduser().resolve()
    path = folder / file_name(node, events, op)
    partial = path.with_name(path.name + ".partial")
    try:
        with open(partial, "xb") as out:
            out.write(json_lines(stored))
            out.flush()
            os.fsync(out.fileno())
        os.rename(partial, path)
        directory_fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(directory_fd)
        finally:
            os.close(directory_fd)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise PluginError(
            f"cannot write the export {str(path)!r}: {exc.strerror or exc}", node=node
        ) from None
    return path


def location(path: Path) -> str:
    """Where an export is, for the checkpoint that points at it: ``host:/absolute/path``."""
    return f"{socket.gethostname()}:{path}"
