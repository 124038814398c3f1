"""The resident helper's own process, as ``daemon`` starts it: it accepts core's calls on its
socket and hands each to a call process (``call_process``), forked from it, and keeps them.

A call process serves one call at a time, and then waits for the next (``Worker`` is the
helper's handle on one): the helper keeps the idle ones, hands a connection to the one that
served last, and forks one ahead of the next call whenever none is idle, so a call waits for no
fork, and, after its first call, a process pays no copy-on-write faults for the pages its calls
touch. The warm objects are frozen out of the garbage collector's reach before any fork. The
helper itself runs no thread, so that forking it is safe: it accepts, hands over, forks, and
hears which processes are free again.

It exits, removing its socket, after ``IDLE_SECONDS`` without a call, on SIGTERM or SIGINT, on
``resource-gpu helper --stop``, when its config says ``resident: false``, and when its socket is
taken over; calls in flight finish first.
"""

from __future__ import annotations

import contextlib
import gc
import os
import selectors
import signal
import socket
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from resource_extend.commands.program import installed_version
from resource_extend.commands.resident import client as resident
from resource_extend.commands.resident.call_process import FREE, CallProcess
from resource_extend.commands.resident.claim import locked
from resource_extend.commands.resident.warm import config_or_none, ready_for_calls
from resource_extend.ledger.etcd.choice import serves_many_calls
from resource_extend.ledger.host import rundir
from resource_extend.ledger.store.appender import who
from resource_extend.ledger.store.turns import tidy

if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin

IDLE_SECONDS = 600.0
TICK = 1.0
"""How often the helper looks up from accept(): to stop, idle out, or see its socket taken."""
SHUTDOWN_WAIT = 30.0
"""Seconds a stopping helper waits for its calls in flight (core's call timeout); past that
they finish on their own."""
MAX_IDLE = 8
"""Idle call processes kept for the next calls (after a burst of calls at once, the rest
leave as they finish)."""
KEEP_IDLE = 60.0
"""Seconds an idle call process is kept without a call, but for the last one (each holds
about 4 MiB of its own)."""


class Helper:
    """The helper's own process: it accepts each call's connection and hands it over to a
    call process (``Worker``), forking one ahead whenever none is idle; it hears which are free
    again, dismisses those idle too long, and stops as the module says."""

    call_process = CallProcess
    """What each forked call process runs (a test's faulty helper puts its own)."""

    def __init__(
        self,
        plugin: Plugin,
        listener: socket.socket,
        directory: int,
        name: str,
        inode: int,
        config_path: str,
        socket_path: str,
    ) -> None:
        self.plugin = plugin
        self._listener = listener
        self._directory = directory
        self._name = name
        self._inode = inode
        self.config_path = config_path
        self.socket_path = socket_path
        self.pid = os.getpid()
        self.started = time.time()
        self.version = installed_version()
        self.code = resident.code_identity()
        """The version and code this helper loaded, as they were when it started: an upgrade
        changes the files on disk, not what it runs (doctor compares them)."""
        self.served = 0
        self._selector = selectors.DefaultSelector()
        """The listener, and each call process's end of its pair (what it says to the helper)."""
        self._idle: list[Worker] = []
        """Call processes waiting for a call, the one that served last at the end."""
        self._busy: dict[int, Worker] = {}
        """Call processes running a call, by pid."""
        self._last_call = time.monotonic()
        self.stopping = False
        self.caller = who()
        """``user@host`` for the events of every call (the helper serves only its own user):
        looked up once, not in each call's process."""

    def stop(self) -> None:
        """Stop serving (calls in flight finish). A connection of our own wakes the helper at
        once rather than at its next tick."""
        self.stopping = True
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as wake:
            wake.settimeout(resident.CONNECT_TIMEOUT)
            wake.connect(rundir.via(self._directory, self._name))

    def serve(self, stopped: list[int] | None = None) -> None:
        """Serve until stopped (SIGTERM, SIGINT), idle, or no longer the socket's owner;
        ``stopped`` holds the signals that came before, while the socket was being claimed
        (the default action would have left it behind)."""
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self.stop())
        if stopped:
            self.stop()
        self._listener.settimeout(TICK)
        self._selector.register(self._listener, selectors.EVENT_READ)
        serves_many_calls()  # etcd.transport auto: gRPC, loaded once here
        ready_for_calls(self.config_path)  # every call process inherits what this loads
        gc.freeze()  # what is loaded now lives as long as the helper: no collection walks it
        try:
            while not self.stopping:
                self._trim()
                if not self._idle:
                    self._add_worker()
                ready = self._selector.select(TICK)
                self._hear(ready)
                if not ready:
                    if self._idled_out() or not self._still_ours():
                        break
                    continue
                if not any(key.fileobj is self._listener for key, _ in ready):
                    continue
                try:
                    connection, _ = self._listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    break
                if self.stopping:
                    connection.close()
                    break
                self._last_call = time.monotonic()
                self._hand_over(connection)
        finally:
            self._shut_down()

    def _hand_over(self, connection: socket.socket) -> None:
        """Give the connection to the idle call process that served last (its pages are the
        warmest), or to one forked for it if none is idle (or all died waiting); then load the
        config: one that turns the helper off stops it."""
        self._hear(self._selector.select(0))  # so that a status call counts calls truly in flight
        while self._idle:
            worker = self._idle.pop()
            if worker.take(connection, self._busy, self.served):
                self._busy[worker.pid] = worker
                break
            self._lose(worker)
        else:
            self._add_worker(connection)
        connection.close()
        settings = config_or_none(self.config_path)
        if settings is not None and not settings.resident:
            self.stop()

    def _add_worker(self, first: socket.socket | None = None) -> None:
        """Fork a call process: idle, for the next call, or running the call on ``first``.
        If no process is to be had, none: a client hung up on runs the call itself."""
        ours, theirs = socket.socketpair()
        try:
            pid = os.fork()
        except OSError:
            ours.close()
            theirs.close()
            return
        if pid == 0:  # a call process: it serves calls, one at a time, and nothing else
            status = 0
            try:
                self._listener.close()
                self._selector.close()  # (no unregistering: the epoll is the helper's too)
                ours.close()
                for worker in (*self._idle, *self._busy.values()):
                    worker.pair.close()
                for signum in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(signum, signal.SIG_DFL)
                self.call_process(self).work(theirs, first)
            except BaseException:
                status = 1
            finally:
                os._exit(status)  # never the helper's own clean-up
        theirs.close()
        worker = Worker(pid, ours)
        self._selector.register(ours, selectors.EVENT_READ, worker)
        if first is None:
            self._idle.append(worker)
        else:
            self._busy[pid] = worker

    def _hear(self, ready: list[tuple[selectors.SelectorKey, int]]) -> None:
        """What call processes said: free again (the idle keep them, up to ``MAX_IDLE``), or
        gone (it left, or was killed: its call, if any, ended with it)."""
        for key, _ in ready:
            worker = key.data
            if not isinstance(worker, Worker):
                continue
            try:
                said = worker.pair.recv(64)
            except OSError:
                said = b""
            called = self._busy.pop(worker.pid, None) is not None
            if called:
                self.served += 1  # its call is over, answered or not
            if said != FREE or not called:
                self._lose(worker)
            elif len(self._idle) < MAX_IDLE:
                worker.free_since = time.monotonic()
                self._idle.append(worker)
            else:
                self._lose(worker)

    def _trim(self) -> None:
        """Dismiss the idle call processes that have waited ``KEEP_IDLE`` seconds for a call
        (the one that served last is handed the next: the others wait longest), but one."""
        since = time.monotonic() - KEEP_IDLE
        while len(self._idle) > 1 and self._idle[0].free_since < since:
            self._lose(self._idle[0])

    def _lose(self, worker: Worker) -> None:
        self._selector.unregister(worker.pair)
        with contextlib.suppress(ValueError):
            self._idle.remove(worker)
        self._busy.pop(worker.pid, None)
        worker.dismiss()

    def _idled_out(self) -> bool:
        return not self._busy and time.monotonic() - self._last_call > IDLE_SECONDS

    def _still_ours(self) -> bool:
        try:
            stat = os.stat(self._name, dir_fd=self._directory, follow_symlinks=False)
        except OSError:
            return False
        return stat.st_ino == self._inode

    def _shut_down(self) -> None:
        """Take the socket away first (new calls go elsewhere), let calls in flight finish,
        and leave nothing behind."""
        with locked(self._directory) as held:
            if held and self._still_ours():
                os.unlink(self._name, dir_fd=self._directory)
        self._listener.close()
        for worker in self._idle:
            worker.dismiss()
        self._idle.clear()
        for worker in self._busy.values():
            worker.pair.close()  # it leaves when its call is done, rather than wait for more
        deadline = time.monotonic() + SHUTDOWN_WAIT
        while self._busy and time.monotonic() < deadline:
            for pid in list(self._busy):
                with contextlib.suppress(ChildProcessError):
                    if os.waitpid(pid, os.WNOHANG)[0] == 0:
                        continue
                del self._busy[pid]
            time.sleep(0.02)
        self._selector.close()
        tidy(self._directory)  # the writers' turn files nobody holds now
        os.close(self._directory)


class Worker:
    """A call process, and the helper's end of its socket pair: connections go to it over the
    pair, and it says ``FREE`` on it after each call; the pair closes when it leaves."""

    def __init__(self, pid: int, pair: socket.socket) -> None:
        self.pid = pid
        self.pair = pair
        self.free_since = time.monotonic()
        """When it last became free to take a call."""

    def take(self, connection: socket.socket, busy: Iterable[int], served: int) -> bool:
        """Hand ``connection`` over, with the helper's counts; False if the process is gone."""
        counts = b" ".join(b"%d" % n for n in (served, *busy))
        try:
            socket.send_fds(self.pair, [counts], [connection.fileno()])
        except OSError:
            return False
        return True

    def dismiss(self) -> None:
        """Gone, or no call for it: the pair closes, the process is killed (if a call is
        running there, its client runs it itself) and reaped."""
        self.pair.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)
