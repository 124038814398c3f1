"""A call process of the resident helper: forked from the warm helper (``arbiter``), it takes
calls from the helper's socket itself, one at a time. It reads the verb and the request, runs
the verb exactly as ``resource-gpu VERB`` would (same code, the call's own stdin, stdout and
stderr), beats while it runs (``heartbeat``), and sends back the answer and the exit status.
It tells the helper, over the pair of sockets between them, each call it takes (``TOOK``) and
each it is done with (``FREE``); that is all the helper hears of calls. It leaves after
``RETIRE_AFTER`` calls, once it has grown by ``RETIRE_GROWTH``, when the helper is gone or
dismisses it (it hangs up the pair), or on any fault. The wire conversation with the client is
described in ``commands.resident.client``."""

from __future__ import annotations

import io
import json
import os
import select
import signal
import socket
import sys
import time
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from resource_extend.commands.protocol import CallIO, Session
from resource_extend.commands.registry import CORE_VERBS, HIDDEN_VERBS, load_verb
from resource_extend.commands.resident import client as resident
from resource_extend.commands.resident.heartbeat import Heartbeat
from resource_extend.commands.resident.warm import config_or_none
from resource_extend.ledger.host import rundir
from resource_extend.ledger.model.errors import PluginError

if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin
    from resource_extend.ledger.host.config import Config

RETIRE_AFTER = 1000
"""Calls a call process serves before it leaves, and a fresh one is forked."""
RETIRE_GROWTH = 64 << 20
"""Bytes a call process's resident memory may have grown by since its fork before it leaves
(after the call that grew it: a large deploy's answer, say)."""

# What a call process says to the helper on its pair, a byte each:
TOOK = b"t"
"""It has taken a call: the helper forks another to wait for the next if none is left."""
FREE = b"r"
"""Its call is over (answered or not): it waits for the next."""
OFF = b"o"
"""The config now says ``resident: false``: the helper stops (the call is answered here,
as every call now is, in the caller's own process)."""
ASK = b"s"
"""For a status call: the helper answers ``SERVED STOPPING PID...\n``: the calls it has seen
end, whether it is stopping (1 or 0), and the call processes running one."""
ASK_WAIT = 1.0
"""Seconds a status call waits for the helper's counts; a stopped helper's are left out."""


class Forker(Protocol):
    """What a call process knows of the helper that forked it (``arbiter.Helper``), as it was
    then."""

    plugin: Plugin
    config_path: str
    socket_path: str
    pid: int
    started: float
    version: str
    installation: bytes
    code: str
    stopping: bool
    caller: str


class CallProcess:
    """The loop of a call process, and the calls it serves."""

    def __init__(self, helper: Forker) -> None:
        self.helper = helper
        """The helper as it was when it forked this process (what ``status`` reports)."""
        self.heartbeat = Heartbeat()
        """What tells the client the call is alive (its thread starts with the first call)."""
        self._pair: socket.socket | None = None
        """Its end of the pair: what it says to the helper, and hears from it."""

    def work(self, pair: socket.socket, listener: socket.socket) -> None:
        """Take calls from the helper's socket (``listener``), one at a time, until the helper is
        gone or dismisses this process (it hangs up ``pair``), or this process has served its
        share (``RETIRE_AFTER`` calls, or grown by ``RETIRE_GROWTH``). The helper hears of
        each call taken and each call over."""
        self._pair = pair
        waiting = Waiting(listener, pair)
        with ResidentMemory() as memory:
            born = memory.now()
            for served in range(1, RETIRE_AFTER + 1):
                call = waiting.next_call()
                if call is None:
                    return
                self._tell(TOOK)  # (a helper gone or hung up: the call is served all the same)
                self._serve_call(call)
                if served == RETIRE_AFTER or memory.now() - born > RETIRE_GROWTH:
                    return
                if not self._tell(FREE):
                    return

    def _tell(self, word: bytes) -> bool:
        """Say ``word`` to the helper; False if it is gone, or has dismissed this process."""
        assert self._pair is not None
        try:
            self._pair.sendall(word)
        except OSError:
            return False
        return True

    def _serve_call(self, connection: socket.socket) -> None:
        with connection:
            try:
                _, uid = rundir.peer(connection)
                if uid != os.getuid():
                    return  # only this user's calls: never read, never answered
                connection.settimeout(resident.SILENCE)
                reader = resident.Reader(connection)
                head = reader.line()
                fields = head.split(b"\0") if head else []
                if len(fields) < 2 or fields[0] != resident.MAGIC:
                    return
                if fields[1] == b"call" and len(fields) == 7:
                    self._call(connection, reader, fields[2:])
                elif fields[1] in (b"status", b"stop"):
                    connection.sendall(_framed(self.status()))
                    if fields[1] == b"stop":
                        os.kill(self.helper.pid, signal.SIGTERM)  # it stops as on SIGTERM
            except OSError:
                return  # the client is gone; whatever it was doing, it does itself

    def _call(
        self, connection: socket.socket, reader: resident.Reader, fields: list[bytes]
    ) -> None:
        verb, config_path, environment = fields[0].decode(), os.fsdecode(fields[1]), fields[2]
        code = reader.exactly(int(fields[3]))
        stdin = reader.exactly(int(fields[4]))
        if code is None or stdin is None or (verb not in CORE_VERBS and verb not in HIDDEN_VERBS):
            return
        # Another config or installation, or a caller whose home or trust differs from the
        # helper's starter's (each compared in full): answered in the caller's process, as it
        # would be without a helper.
        helper = self.helper
        ours = (config_path, code, environment) == (
            helper.config_path,
            helper.installation,
            resident.environment(),
        )
        settings = config_or_none(config_path) if ours else None
        if settings is None or not settings.resident:
            if settings is not None and ours:
                self._tell(OFF)  # turned off: the helper stops
            connection.sendall(b"F\n")
            return
        heartbeat = self.heartbeat
        heartbeat.start(connection, b"A %d\n" % os.getpid())
        try:
            status, out, err = self._run(heartbeat, reader, verb, settings, stdin)
        finally:
            heartbeat.stop()
        connection.sendall(b"R %d %d %d\n" % (status, len(out), len(err)) + out + err)

    def _run(
        self,
        heartbeat: Heartbeat,
        reader: resident.Reader,
        verb_name: str,
        settings: Config,
        stdin: bytes,
    ) -> tuple[int, bytes, bytes]:
        verb = load_verb(self.helper.plugin, verb_name)
        assert verb is not None
        out, err = io.BytesIO(), io.BytesIO()

        def ask_to_write(node: str, after: int, op: str) -> None:
            """Send no write the client has not allowed: one that gave up on us must not find
            its write made behind its back."""
            heartbeat.send(b"P %d %s %s\n" % (after, op.encode(), node.encode().hex().encode()))
            try:
                allowed = reader.line() == b"G"
            except OSError:
                allowed = False
            if not allowed:
                raise PluginError("the caller went away before the write was sent", node=node)

        io_ = CallIO(io.BytesIO(stdin), out, err)
        session: Session[msgspec.Struct] = Session(
            self.helper.plugin,
            self.helper.config_path,
            io_,
            write_hook=ask_to_write,
            caller=self.helper.caller,
            config=settings,  # as checked before the call was taken: read once a call
        )
        try:
            verb(session)
            status = 0
        except SystemExit as exit:
            status = exit.code if isinstance(exit.code, int) else 1
        return status, out.getvalue(), err.getvalue()

    def status(self) -> dict[str, Any]:
        """What ``resource-gpu helper`` shows (asked of a call's process: the helper as it was
        when it forked that one, with the counts the helper gives now)."""
        helper = self.helper
        served, stopping, in_flight = self._counts()
        return {
            "pid": helper.pid,
            "version": helper.version,
            "code": helper.code,
            "python": sys.version.split()[0],
            "config": helper.config_path,
            "socket": helper.socket_path,
            "started": helper.started,
            "uptime_s": round(time.time() - helper.started, 3),
            "calls_served": served,
            "calls_in_flight": sum(1 for pid in in_flight if _running(pid)),
            "stopping": stopping,
        }

    def _counts(self) -> tuple[int | None, bool, set[int]]:
        """The helper's counts: the calls it has seen end, whether it is stopping, and the other
        call processes running a call; from a helper that does not answer within ``ASK_WAIT``,
        no count (``None``) and no process."""
        assert self._pair is not None
        try:
            self._pair.settimeout(ASK_WAIT)
            self._pair.sendall(ASK)
            said = resident.Reader(self._pair).line()
        except OSError:
            said = None
        finally:
            self._pair.settimeout(None)
        if not said:
            return None, self.helper.stopping, set()
        served, stopping, *running = said.split()
        return int(served), stopping == b"1", {int(pid) for pid in running} - {os.getpid()}


class Waiting:
    """A call process waiting for its next call: on the helper's socket, which every waiting
    call process shares, and on its pair, where the helper hanging up means: leave. The kernel
    wakes one waiting process for each connection (``EPOLLEXCLUSIVE``), the one that began to
    wait first; one woken for a connection another took first waits again."""

    def __init__(self, listener: socket.socket, pair: socket.socket) -> None:
        self._listener = listener
        self._pair = pair
        self._poll = select.epoll()
        try:
            self._poll.register(listener, select.EPOLLIN | select.EPOLLEXCLUSIVE)
        except OSError:  # a kernel without it (before 4.5): every waiting process wakes
            self._poll.register(listener, select.EPOLLIN)
        self._poll.register(pair, select.EPOLLIN)  # (unasked, the helper only hangs up)

    def next_call(self) -> socket.socket | None:
        """The next call's connection; ``None`` once the helper has hung up."""
        while True:
            ready = self._poll.poll()
            if any(fd == self._pair.fileno() for fd, _ in ready):
                return None
            try:
                connection, _ = self._listener.accept()  # (the listener never blocks)
            except BlockingIOError:
                continue
            except OSError:
                return None
            return connection


class ResidentMemory:
    """This process's resident memory, read after every call: ``/proc/self/statm`` is kept
    open and read again from its start, which the kernel answers afresh (one system call,
    where opening it each time took ten times as long)."""

    def __init__(self) -> None:
        self._statm = os.open("/proc/self/statm", os.O_RDONLY | os.O_CLOEXEC)
        self._page = os.sysconf("SC_PAGE_SIZE")

    def now(self) -> int:
        """Bytes resident now."""
        return int(os.pread(self._statm, 256, 0).split()[1]) * self._page

    def __enter__(self) -> ResidentMemory:
        return self

    def __exit__(self, *_: object) -> None:
        os.close(self._statm)


def _running(pid: int) -> bool:
    """Whether a call's process still runs (not one that has exited, and awaits reaping)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def _framed(answer: dict[str, Any]) -> bytes:
    body = json.dumps(answer).encode()
    return b"S %d\n" % len(body) + body
