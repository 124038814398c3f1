"""Turns: the writers of one node on this host write one at a time.

Compare-and-swap keeps every write exact however many race (``ledger.store.appender``), but a
race lost is a round trip and a decision wasted: 32 of core's calls writing one node at once
lost about ten races for each write that landed, and on two cores a few ran out of
``etcd.timeout`` before landing theirs (``scripts/bench``). So a write first takes the node's
turn on this host: an advisory lock (``flock``) on one of :data:`SLOTS` files in the plugin's
private runtime directory (``ledger.host.rundir``), chosen by the prefix and the node. The writers
of this host then meet at the lock, cheaply, instead of at etcd; writers on other hosts still
race, and compare-and-swap still decides.

A turn is never needed for a write to be right, only to be quick:

* it is waited for only while the call has time to spare (:func:`turn`'s ``wait``); then the
  write goes on without it, as it does where the runtime directory cannot be had;
* a process that dies lets its turn go with it (the kernel drops the lock);
* within one process a second write of the same slot (a rival a test runs from a write hook)
  goes on at once: a process's writes never wait on themselves.

A helper that stops removes the turn files nobody holds (:func:`tidy`), leaving the runtime
directory as it found it.
"""

from __future__ import annotations

import fcntl
import os
import posix
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager

from resource_extend.ledger.host import rundir

SLOTS = 64
"""Lock files per program: two nodes share one with odds of 1 in 64, and then only wait on
each other's writes (a few milliseconds each)."""

FIRST_PAUSE, MOST_PAUSE = 0.0005, 0.005
"""Seconds between two tries at a taken turn: from the first, doubled each time, to the most."""

_FLAGS = posix.O_RDWR | posix.O_CLOEXEC | posix.O_NOFOLLOW
"""How a turn file is opened: never through a link."""

_held: set[tuple[str, int]] = set()
"""The turns this process holds, by program and slot."""


def slot(prefix: str, node: str) -> int:
    """The lock file of ``node`` under ``prefix``: the same in every process."""
    return zlib.crc32(f"{prefix}\0{node}".encode()) % SLOTS


@contextmanager
def turn(program: str, prefix: str, node: str, wait: float) -> Iterator[bool]:
    """Hold ``node``'s turn on this host while the block runs, waiting up to ``wait`` seconds
    for it. Yields whether it is held (False: the write goes on without it)."""
    key = (program, slot(prefix, node))
    if key in _held:
        yield False
        return
    fd = _lock_file(program, key[1])
    if fd is None:
        yield False
        return
    try:
        held = _take(fd, wait)
        if held:
            _held.add(key)
        try:
            yield held
        finally:
            _held.discard(key)
    finally:
        posix.close(fd)  # lets the lock go


def _lock_file(program: str, number: int) -> int | None:
    """A descriptor of the slot's lock file in the runtime directory (None: none to be had)."""
    try:
        directory, _ = rundir.open_private(program, create=True)
    except OSError:
        return None
    try:
        return posix.open(f"turn-{number:02d}", _FLAGS | posix.O_CREAT, 0o600, dir_fd=directory)
    except OSError:
        return None
    finally:
        posix.close(directory)


def _take(fd: int, wait: float) -> bool:
    """Whether the lock was had within ``wait`` seconds (tried again a short, growing, jittered
    pause apart: a blocking ``flock`` cannot be bounded in time)."""
    until = time.monotonic() + wait
    pause = FIRST_PAUSE
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        except OSError:
            return False
        left = until - time.monotonic()
        if left <= 0:
            return False
        time.sleep(min(left, pause * (0.5 + int.from_bytes(os.urandom(1), "big") / 255)))
        pause = min(pause * 2, MOST_PAUSE)


def tidy(directory: int) -> None:
    """Remove the turn files nobody holds from the runtime directory open as ``directory``.
    A writer that opened one just before may then hold a turn no later writer shares: those
    writers race at etcd for a while, as they would without turns."""
    for name in os.listdir(directory):
        if not name.startswith("turn-"):
            continue
        try:
            fd = posix.open(
                name, posix.O_RDWR | posix.O_CLOEXEC | posix.O_NOFOLLOW, dir_fd=directory
            )
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            posix.unlink(name, dir_fd=directory)
        except OSError:  # held (BlockingIOError), or gone already
            pass
        finally:
            posix.close(fd)
