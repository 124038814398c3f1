"""Export files: a stream's events as JSON lines, one event per line exactly as stored.

Compaction writes the events it is about to delete here first, so the audit trail outlives the
keys. A file's life: written as ``<name>.partial`` and flushed to disk (file and directory)
before the compaction's transaction is sent; renamed to ``<name>`` once that transaction has
committed, or deleted if it lost. So a file with the final name is always one a checkpoint
references, and complete; a ``.partial`` is one whose compaction has not (or not yet) been
seen through. ``verify`` reads them back (:func:`read`) and publishes a ``.partial`` a
checkpoint names (:func:`publish`).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

import msgspec

from resource_extend.ledger.host.files import UnfitFile, read_small_file
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.model.events import AnyEvent as Event

DIRECTORY_MODE = 0o750
"""A directory of exports made here: its owner writes, its group (auditors) reads."""

MAX_EXPORT_BYTES = 256 << 20
"""The most an export may hold to be read back: far past what a compaction writes (a step of
5,000 events is a few MiB), short of what would exhaust an auditor's memory."""

PARTIAL = ".partial"
"""The suffix of an export whose compaction has not been seen to commit."""


def json_lines(stored: Iterable[bytes]) -> bytes:
    """Events as stored (their etcd values, which are single-line JSON), one per line."""
    return b"".join(value + b"\n" for value in stored)


MAX_NAME_PART = 120
"""Bytes of the escaped node name kept in a file name (file systems allow 255 in all)."""


def file_name(node: str, events: list[Event], op: str) -> str:
    """``<node>.<first seq>-<last seq>.<op>.jsonl``, the node as :func:`node_part` writes it."""
    return f"{node_part(node)}.{events[0].seq:012d}-{events[-1].seq:012d}.{op[:12]}.jsonl"


def node_part(node: str) -> str:
    """The node's name in its exports' file names: %-escaped, so it is always one plain file
    name (no ``/``, no leading dot, no ``.``). A name too long for a file name is cut, with a
    digest of the whole name in place of the rest."""
    safe = quote(node, safe="-_~").replace(".", "%2E")
    if len(safe) > MAX_NAME_PART:
        digest = hashlib.sha256(node.encode()).hexdigest()[:16]
        safe = f"{safe[: MAX_NAME_PART - 17]}~{digest}"
    return safe


def partial_of(path: Path) -> Path:
    """Where the export that will be ``path`` lies until its compaction is seen to commit."""
    return path.with_name(path.name + PARTIAL)


def write_partial(
    directory: str,
    node: str,
    stored: list[bytes],
    events: list[Event],
    op: str,
    *,
    create: bool = False,
) -> tuple[Path, str]:
    """Write the events (``stored``: their etcd values) to a new temporary file in
    ``directory`` (``create``: made, with its parents, if missing), on disk (file and
    directory entry) when this returns; the final path, and the SHA-256 of what was written
    (what the checkpoint names)."""
    folder = Path(directory).expanduser().resolve()
    path = folder / file_name(node, events, op)
    partial = partial_of(path)
    try:
        if create:
            folder.mkdir(mode=DIRECTORY_MODE, parents=True, exist_ok=True)
        unsafe = unsafe_directory(folder)
        if unsafe:
            raise PluginError(
                f"cannot write the export {str(path)!r}: {unsafe}: another user could delete "
                "or replace exports there; nothing was compacted",
                node=node,
            )
        data = json_lines(stored)
        with open(partial, "xb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        sync_directory(folder)
    except OSError as exc:
        with contextlib.suppress(OSError):
            partial.unlink(missing_ok=True)
        raise PluginError(
            f"cannot write the export {str(path)!r}: {exc.strerror or exc}", node=node
        ) from None
    return path, hashlib.sha256(data).hexdigest()


def unsafe_directory(folder: Path) -> str:
    """Why another user could change what is in ``folder`` (a resolved path), or ``""``: it
    must belong to this user (or root) and be writable by nobody else, and every directory
    above it belong to root or this user and be writable by nobody else, unless sticky
    (``/tmp``: nobody may rename or delete what they do not own there), as the resident
    helper's runtime directory must (``ledger.host.rundir``)."""
    mine = (0, os.getuid())
    for place in (folder, *folder.parents):
        info = os.stat(place, follow_symlinks=False)
        mode = info.st_mode & 0o7777
        if info.st_uid not in mine:
            return f"{place} belongs to uid {info.st_uid}"
        if mode & 0o022 and (place == folder or not mode & 0o1000):
            return f"{place} is writable by others (mode {mode:o}): chmod go-w {place}"
    return ""


def publish(path: Path, node: str, program: str) -> None:
    """Give the temporary export its final name ``path``: its compaction has committed.
    Already done (``verify --repair`` may get there first) is done. ``program`` names the
    command that repairs a failed rename."""
    try:
        try:
            os.rename(partial_of(path), path)
        except FileNotFoundError:
            if not path.is_file():
                raise
        sync_directory(path.parent)
    except OSError as exc:
        raise PluginError(
            f"the checkpoint is written, but its export could not be renamed from "
            f"{str(partial_of(path))!r} to {str(path)!r}: {exc.strerror or exc} "
            f"('{program} verify {node} --repair' does it)",
            node=node,
        ) from None


def discard(path: Path) -> None:
    """Delete the temporary export of a compaction that did not commit."""
    with contextlib.suppress(OSError):
        partial_of(path).unlink(missing_ok=True)


def sync_directory(folder: Path) -> None:
    """Put the directory's entries (files made, renamed or deleted in it) on disk."""
    directory_fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(directory_fd)
    finally:
        os.close(directory_fd)


ARCHIVE = "archive"
"""The place name of an export in the archive: ``archive:<file>``. A host's export is named
``host:/absolute/path``, so the two never read alike (an archive name has no ``/``)."""


def location(path: Path, *, archive: bool = False) -> str:
    """Where an export is, for the checkpoint that points at it: ``archive:<file>`` in the
    archive (wherever an auditor mounts it), else ``host:/absolute/path``."""
    return f"{ARCHIVE}:{path.name}" if archive else f"{socket.gethostname()}:{path}"


class Found(msgspec.Struct, frozen=True):
    """What is found of the export a checkpoint names (``host:path``)."""

    host: str
    path: Path
    state: Literal["published", "unpublished", "missing", "elsewhere", "unreadable"]
    """``unpublished``: only the temporary file is there (its compaction was interrupted
    between commit and rename); ``elsewhere``: on another host, or in the archive when no
    archive directory was given, not read."""
    lines: list[bytes] = msgspec.field(default_factory=list)
    digest: str = ""
    """The SHA-256 of the file as read (published or unpublished)."""
    reason: str = ""
    """Why it could not be read (``unreadable``)."""


def read(where: str, archive_dir: str = "") -> Found:
    """The export a checkpoint names, read if it is here: ``archive:<file>`` from
    ``archive_dir``, ``host:path`` on this host."""
    host, _, name = where.partition(":")
    path = Path(name)
    if host == ARCHIVE and _plain_name(name):
        if not archive_dir:
            return Found(host=host, path=path, state="elsewhere")
        path = Path(archive_dir).expanduser().resolve() / name
    elif host != socket.gethostname():
        return Found(host=host, path=path, state="elsewhere")
    try:
        if (data := _data(path)) is not None:
            return Found(host=host, path=path, state="published", **_contents(data))
        if (data := _data(partial_of(path))) is not None:
            return Found(host=host, path=path, state="unpublished", **_contents(data))
    except OSError as exc:
        reason = f"{exc.filename}: {exc.strerror or exc}"
        return Found(host=host, path=path, state="unreadable", reason=reason)
    return Found(host=host, path=path, state="missing")


def _plain_name(name: str) -> bool:
    """A file name within one directory, and nothing else (no path, no ``..``, no NUL)."""
    return name not in ("", ".", "..") and "/" not in name and "\0" not in name


def _contents(data: bytes) -> dict[str, Any]:
    return {"lines": data.splitlines(), "digest": hashlib.sha256(data).hexdigest()}


def _data(path: Path) -> bytes | None:
    """The export's bytes, ``None`` if there is no such file; an OSError naming the file if
    it is anything but a regular file within ``MAX_EXPORT_BYTES`` (a FIFO named in etcd must
    not hang an auditor, nor a device fill its memory)."""
    try:
        return read_small_file(str(path), MAX_EXPORT_BYTES)
    except FileNotFoundError:
        return None
    except UnfitFile as unfit:
        raise OSError(0, str(unfit), str(path)) from None
