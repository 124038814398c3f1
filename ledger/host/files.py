"""Reading the small files a config names (itself, its TLS files) without being hung or flooded
by what a path may turn out to be; writing a file people keep (a launcher, a page) whole or not
at all."""

from __future__ import annotations

import os
import stat
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


class UnfitFile(ValueError):
    """Not a file to read as a small text file (a config, a TLS file): a FIFO, a device, a
    directory, or far too large."""


def read_small_file(path: str, limit: int) -> bytes:
    """The bytes of the regular file at ``path``, refusing (UnfitFile) anything else before it
    reads a byte, and any file over ``limit`` bytes. Opened non-blocking and checked by its
    descriptor: a FIFO cannot hang the call, nor a device feed it forever."""
    if not stat.S_ISREG(mode := os.stat(path).st_mode):
        raise UnfitFile(f"is not a regular file ({_kind(mode)})")
    descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(mode := os.fstat(descriptor).st_mode):
            raise UnfitFile(f"is not a regular file ({_kind(mode)})")
        chunks: list[bytes] = []
        size = 0
        while size <= limit and (chunk := os.read(descriptor, limit + 1 - size)):
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(descriptor)
    if size > limit:
        raise UnfitFile(f"is larger than {limit // 1024} KiB")
    return b"".join(chunks)


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
    ):  # fmt: skip
        if test(mode):
            return kind
    return "not a file"


class NotReplaced(OSError):
    """What is at a path is not a regular file a write may replace (a device, a FIFO, a link,
    a directory): it is left as it is."""


def write_whole(
    path: str,
    data: bytes,
    *,
    mode: int = 0o666,
    check: Callable[[str], None] | None = None,
    stage_in: str | None = None,
    links: bool = False,
) -> None:
    """``data`` as the file at ``path``, whole or not at all: written under a temporary name
    (beside it, or in ``stage_in``, a directory on the same filesystem; close-on-exec, so no
    child process keeps it open; ``mode`` as the umask leaves it), flushed to disk, handed to
    ``check`` (which may raise to refuse it), then renamed over ``path`` in one step.

    Only a regular file at ``path`` is replaced, and a link when ``links`` says so: a device,
    a FIFO, a link or a directory there raises :class:`NotReplaced` before anything is
    written (``/dev/null`` stays a device). The temporary has a name of its own, never reused,
    and never outlives the call; any other ``OSError`` is raised as it came."""
    _refuse_to_replace(path, links)
    name = f".{os.path.basename(path)}.{os.urandom(6).hex()}.tmp"
    staged = os.path.join(stage_in or os.path.dirname(path), name)
    descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if check is not None:
            check(staged)
        _refuse_to_replace(path, links)
        os.replace(staged, path)
    finally:
        try:  # noqa: SIM105 (ledger.host.config, on every call, imports this module: no contextlib)
            os.unlink(staged)
        except OSError:  # gone already, once renamed
            pass


def _refuse_to_replace(path: str, links: bool) -> None:
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISREG(mode) or (links and stat.S_ISLNK(mode)):
        return
    kind = "a link" if stat.S_ISLNK(mode) else _kind(mode)
    raise NotReplaced(0, f"{path} is {kind}, not a regular file: left as it is")
