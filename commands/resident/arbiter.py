"""The resident helper's own process, as ``daemon`` starts it: it keeps the call processes
(``call_process``) that take core's calls from its socket, forked from it, and hears from them.

It never touches a call. Its call processes wait on its socket themselves, as gunicorn's
workers do, and the kernel wakes one of them for each connection: a call costs the helper no
hop and no wake-up of its own. Each call process tells the helper when it takes a call and
when it is done; the helper forks one ahead of the next call whenever none is left waiting, so
a call waits for no fork, and, after its first call, a process pays no copy-on-write faults for
the pages its calls touch. The warm objects are frozen out of the garbage collector's reach
before any fork. The helper itself runs no thread, so that forking it is safe: it forks, hears
which processes are free, answers status calls' questions, and dismisses those idle too long.

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
from typing import TYPE_CHECKING

from resource_extend.commands.program import installed_version
from resource_extend.commands.resident import client as resident
from resource_extend.commands.resident.call_process import ASK, FREE, OFF, TOOK, CallProcess
from resource_extend.commands.resident.claim import locked
from resource_extend.commands.resident.warm import ready_for_calls
from resource_extend.ledger.etcd.choice import serves_many_calls
from resource_extend.ledger.store.appender import who
from resource_extend.ledger.store.turns import tidy

if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin

IDLE_SECONDS = 600.0
TICK = 1.0
"""How often the helper looks up: to stop, idle out, or see its socket taken."""
SHUTDOWN_WAIT = 30.0
"""Seconds a stopping helper waits for its calls in flight (core's call timeout); past that
they finish on their own."""
MAX_IDLE = 32
"""Idle call processes kept for the next calls: after a burst of calls at once, the rest leave
as they finish. As many as a burst of 32 calls needs, so that the next such burst forks none:
a fork, with the copy-on-write faults of a new process's first call, costs more CPU than the
call, and in a burst the CPU is what calls wait for (32 reads at once, p99 against 32 bare
interpreters: 1.24 to 1.31 times with 32 kept, 1.32 to 1.44 with 8, three runs: docs/speed.md)."""
KEEP_IDLE = 60.0
"""Seconds an idle call process is kept without a call, but for the last one (each holds
about 4 MiB of its own)."""


class Helper:
    """The helper's own process: it forks call processes (``Worker``), one ahead whenever
    none is waiting for a call; it hears which are busy and which free, answers their status
    questions, dismisses those idle too long, and stops as the module says."""

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
        self.installation = os.fsencode(resident.installation())
        """The installation this helper loaded, as it was when it started (an upgrade changes
        the files on disk, not what it runs): it serves only callers of the same."""
        self.code = resident.short_name(self.installation)
        """Its short name, for people (``doctor`` compares it with the files')."""
        self.served = 0
        """Calls its call processes have said are over."""
        self._selector = selectors.DefaultSelector()
        """Each call process's end of its pair (what it says to the helper), and the wake-up."""
        self._idle: list[Worker] = []
        """Call processes waiting for a call, the one that became free last at the end."""
        self._busy: dict[int, Worker] = {}
        """Call processes running a call, by pid."""
        self._leaving: list[int] = []
        """Call processes dismissed (or gone), not yet reaped."""
        self._wake, self._woken = socket.socketpair()
        """A stop asked for (by a signal, or a call finding the helper turned off) wakes the
        helper from its wait at once."""
        self._last_call = time.monotonic()
        self.stopping = False
        self.caller = who()
        """``user@host`` for the events of every call (the helper serves only its own user):
        looked up once, not in each call's process."""

    def stop(self) -> None:
        """Stop serving (calls in flight finish); wakes the helper at once."""
        self.stopping = True
        with contextlib.suppress(OSError):
            self._wake.send(b"!")

    def serve(self, stopped: list[int] | None = None) -> None:
        """Serve until stopped (SIGTERM, SIGINT), idle, or no longer the socket's owner;
        ``stopped`` holds the signals that came before, while the socket was being claimed
        (the default action would have left it behind)."""
        self._wake.setblocking(False)
        for signum in (signal.SIGTERM, signal.SIGINT):
            signal.signal(signum, lambda *_: self.stop())
        if stopped:
            self.stop()
        # Shared by every call process: each takes a connection if one is there, and waits
        # again if another was quicker, never blocking on it.
        self._listener.setblocking(False)
        self._selector.register(self._woken, selectors.EVENT_READ)
        serves_many_calls()  # etcd.transport auto: gRPC, loaded once here
        ready_for_calls(self.config_path)  # every call process inherits what this loads
        gc.freeze()  # what is loaded now lives as long as the helper: no collection walks it
        try:
            while not self.stopping:
                self._reap()
                self._trim()
                if not self._idle:
                    self._add_worker()
                ready = self._selector.select(TICK)
                self._hear(ready)
                if not ready and (self._idled_out() or not self._still_ours()):
                    break
        finally:
            self._shut_down()

    def _add_worker(self) -> None:
        """Fork a call process, to wait for the next call. If no process is to be had, none:
        a call nobody takes goes on in its caller's process."""
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
                self._selector.close()  # (no unregistering: the epoll is the helper's too)
                self._wake.close()
                self._woken.close()
                ours.close()
                for worker in (*self._idle, *self._busy.values()):
                    worker.pair.close()
                for signum in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(signum, signal.SIG_DFL)
                self.call_process(self).work(theirs, self._listener)
            except BaseException:
                status = 1
            finally:
                os._exit(status)  # never the helper's own clean-up
        theirs.close()
        worker = Worker(pid, ours)
        self._selector.register(ours, selectors.EVENT_READ, worker)
        self._idle.append(worker)

    def _hear(self, ready: list[tuple[selectors.SelectorKey, int]]) -> None:
        """What call processes said: a call taken, a call over (the idle keep them, up to
        ``MAX_IDLE``), the config turned off, a question for a status call (answered once
        everything else said by then is heard); or nothing: gone."""
        asking = []
        for key, _ in ready:
            worker = key.data
            if not isinstance(worker, Worker):
                with contextlib.suppress(OSError):
                    self._woken.recv(64)  # a stop: the loop sees it
                continue
            try:
                said = worker.pair.recv(64)
            except OSError:
                said = b""
            if not said:
                self._lose(worker)  # it left, or was killed: its call, if any, ended with it
                continue
            for word in (said[i : i + 1] for i in range(len(said))):
                if word == ASK:
                    asking.append(worker)
                elif not self._heard(worker, word):
                    break  # dismissed: what else it said is not heard
        if asking:
            self._hear(self._selector.select(0))  # a call over by now counts as over
            for worker in asking:
                worker.answer(self.served, self.stopping, self._busy)

    def _heard(self, worker: Worker, word: bytes) -> bool:
        """``worker`` took a call, is done with one, or found the helper turned off; False
        once it is dismissed (one idle beyond ``MAX_IDLE``, or out of step)."""
        if word == TOOK:
            with contextlib.suppress(ValueError):
                self._idle.remove(worker)
            self._busy[worker.pid] = worker
            self._last_call = time.monotonic()
        elif word == FREE and worker.pid in self._busy:
            del self._busy[worker.pid]
            self.served += 1
            if len(self._idle) >= MAX_IDLE:
                self._dismiss(worker)
                return False
            worker.free_since = time.monotonic()
            self._idle.append(worker)
        elif word == OFF:
            self.stop()
        else:  # free without a call, or a word no call process says: out of step
            self._lose(worker)
            return False
        return True

    def _trim(self) -> None:
        """Dismiss the idle call processes that have waited ``KEEP_IDLE`` seconds for a call
        (those free longest), but one."""
        since = time.monotonic() - KEEP_IDLE
        while len(self._idle) > 1 and self._idle[0].free_since < since:
            self._dismiss(self._idle[0])

    def _lose(self, worker: Worker) -> None:
        """A call process gone: a call it was running is over."""
        if worker.pid in self._busy:
            self.served += 1
        self._dismiss(worker)

    def _dismiss(self, worker: Worker) -> None:
        """Hang up on a call process: it leaves at once if idle, or when its call is over
        (one dismissed as it took a call serves it first); it is reaped when it has."""
        self._selector.unregister(worker.pair)
        with contextlib.suppress(ValueError):
            self._idle.remove(worker)
        self._busy.pop(worker.pid, None)
        worker.pair.close()
        self._leaving.append(worker.pid)

    def _reap(self) -> None:
        """Wait for the call processes that have left: they leave no zombie behind."""
        for pid in list(self._leaving):
            try:
                done = os.waitpid(pid, os.WNOHANG)[0] != 0
            except ChildProcessError:
                done = True
            if done:
                self._leaving.remove(pid)

    def _idled_out(self) -> bool:
        return not self._busy and time.monotonic() - self._last_call > IDLE_SECONDS

    def _still_ours(self) -> bool:
        try:
            stat = os.stat(self._name, dir_fd=self._directory, follow_symlinks=False)
        except OSError:
            return False
        return stat.st_ino == self._inode

    def _shut_down(self) -> None:
        """Take the socket away first (new calls go elsewhere), dismiss every call process
        (the idle leave at once, the busy when their calls are done, which the helper waits
        for), and leave nothing behind."""
        with locked(self._directory) as held:
            if held and self._still_ours():
                os.unlink(self._name, dir_fd=self._directory)
        self._listener.close()
        for worker in (*self._idle, *self._busy.values()):
            self._dismiss(worker)
        deadline = time.monotonic() + SHUTDOWN_WAIT
        while self._leaving and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.01)
        self._selector.close()
        self._wake.close()
        self._woken.close()
        tidy(self._directory)  # the writers' turn files nobody holds now
        os.close(self._directory)


class Worker:
    """A call process, and the helper's end of its socket pair: it says on the pair when it
    takes a call and when it is done; the pair closes when it leaves, or is dismissed."""

    def __init__(self, pid: int, pair: socket.socket) -> None:
        self.pid = pid
        self.pair = pair
        self.free_since = time.monotonic()
        """When it last became free to take a call."""

    def answer(self, served: int, stopping: bool, busy: dict[int, Worker]) -> None:
        """The helper's counts, for the status call this process runs (``call_process.ASK``)."""
        words = [b"%d" % served, b"1" if stopping else b"0", *(b"%d" % pid for pid in busy)]
        with contextlib.suppress(OSError):
            self.pair.sendall(b" ".join(words) + b"\n")
