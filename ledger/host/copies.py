"""Parsed copies of config files, kept in the runtime directory (``ledger.host.rundir``).

With ``resident: false`` every call is a new process that reads the config; parsing it takes
PyYAML, whose import costs about as much as the rest of the plugin's. So the first call keeps
what the file parsed to, as JSON, in the private runtime directory
(``<crc of the path>.config``), and later calls take it when the file's text (by its digest)
and directory are still the ones it was parsed from (``ledger.host.config.load`` checks), else
parse afresh. A config with a password is never copied: its calls parse it each time, and a
copy left from before it had one is removed. A copy is written under a temporary name and
renamed into place; anything amiss means "no copy".

What it earns: a ``resident: false`` read takes 16-18 % less time with its copy than without
(``scripts/bench_copies.py``: 109.4 against 134.2 ms, 2026-12-07, docs/speed.md). A call the
helper answers never reads the config, and the helper parses it once, so there it earns
nothing and costs nothing.

Imports only ``os`` and ``zlib`` beyond ``ledger.host.rundir``.
"""

from __future__ import annotations

import os

from resource_extend.ledger.host import rundir

MAX_COPY_BYTES = 4 * 1024 * 1024
"""Bigger than any copy of a config (which is at most 1 MiB of text): not one of ours."""


def _name(path: str) -> str:
    import zlib

    return f"{zlib.crc32(os.fsencode(path)):08x}.config"


class RuntimeCopies:
    """:class:`ledger.host.config.ParsedCopies` in this user's runtime directory of ``program``
    (``resource-gpu``)."""

    def __init__(self, program: str) -> None:
        self.program = program

    def get(self, path: str) -> bytes | None:
        try:
            directory, _ = rundir.open_private(self.program, create=False)
        except OSError:
            return None
        try:
            fd = os.open(_name(path), os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=directory)
        except OSError:
            return None
        finally:
            os.close(directory)
        try:
            copy = os.read(fd, MAX_COPY_BYTES + 1)
        except OSError:
            return None
        finally:
            os.close(fd)
        return copy if len(copy) <= MAX_COPY_BYTES else None

    def drop(self, path: str) -> None:
        try:
            directory, _ = rundir.open_private(self.program, create=False)
        except OSError:
            return
        try:
            os.unlink(_name(path), dir_fd=directory)
        except OSError:
            pass
        finally:
            os.close(directory)

    def put(self, path: str, copy: bytes) -> None:
        try:
            directory, _ = rundir.open_private(self.program, create=True)
        except OSError:
            return
        name = _name(path)
        partial = f"{name}.{os.getpid()}"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(partial, flags, 0o600, dir_fd=directory)
            try:
                os.write(fd, copy)
            finally:
                os.close(fd)
            os.replace(partial, name, src_dir_fd=directory, dst_dir_fd=directory)
        except OSError:
            try:  # noqa: SIM105 (contextlib costs an in-process call its import)
                os.unlink(partial, dir_fd=directory)
            except OSError:
                pass
        finally:
            os.close(directory)
