"""The helper's socket, claimed under the runtime directory's lock, unless a live helper has it:
run by a helper's process as it starts (``daemon``), and by ``{prog} helper --stop``, which
removes a dead one's. Helpers started together wait on the lock, not importing, and give way
to the one that won; calls meanwhile run in-process."""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from resource_extend.commands.resident import client as resident
from resource_extend.commands.resident.warm import warm_up
from resource_extend.ledger.host import rundir

if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin

BACKLOG = 128
LOCK_WAIT = 10.0
"""Seconds to wait for the runtime directory's lock (held only while a socket is claimed or
removed)."""


@contextlib.contextmanager
def locked(directory: int) -> Iterator[bool]:
    """The runtime directory's lock, which helpers hold while they claim or remove a socket;
    yields False if it could not be had within ``LOCK_WAIT``."""
    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            fcntl.flock(directory, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except BlockingIOError:
            if time.monotonic() > deadline:
                yield False
                return
            time.sleep(0.02)
    try:
        yield True
    finally:
        fcntl.flock(directory, fcntl.LOCK_UN)


def claim(plugin: Plugin, directory: int, name: str) -> tuple[socket.socket, int] | None:
    """Bind the socket, warm up, and listen, unless a live helper has it already.

    The lock is held throughout, so helpers started together wait here (not importing) and
    then give way to the one that won; calls meanwhile run in-process.
    """
    with locked(directory) as held:
        if not held or answers(directory, name):
            return None
        warm_up(plugin)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=directory)  # a dead helper's
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        umask = os.umask(0o177)  # the socket is born 0600: no moment open to others
        try:
            listener.bind(rundir.via(directory, name))
        finally:
            os.umask(umask)
        listener.listen(BACKLOG)
        return listener, os.stat(name, dir_fd=directory, follow_symlinks=False).st_ino


def answers(directory: int, name: str) -> bool:
    """Whether a helper of this user is listening on ``name`` (a stuck one counts: the calls
    it fails to answer kill it)."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(resident.CONNECT_TIMEOUT)
    try:
        probe.connect(rundir.via(directory, name))
        return rundir.peer(probe)[1] == os.getuid()
    except TimeoutError:
        return True
    except OSError:
        return False
    finally:
        probe.close()
