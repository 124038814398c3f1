"""A call process of the resident helper: forked from the warm helper (``arbiter``), it serves
one call at a time, and then waits for the next. It reads the verb and the request, runs the
verb exactly as ``resource-gpu VERB`` would (same code, the call's own stdin, stdout and stderr),
beats while it runs (``heartbeat``), and sends back the answer and the exit status; then it
tells the helper it is free (``FREE``). It leaves after ``RETIRE_AFTER`` calls, once it has
grown by ``RETIRE_GROWTH``, when the helper is gone, or on any fault. The wire conversation is
described in ``commands.resident.client``."""

from __future__ import annotations

import io
import json
import os
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
FREE = b"r"
"""What a call process tells the helper once it has answered: it takes the next call."""


class Forker(Protocol):
    """What a call process knows of the helper that forked it (``arbiter.Helper``), as it was
    then."""

    plugin: Plugin
    config_path: str
    socket_path: str
    pid: int
    started: float
    version: str
    code: str
    served: int
    stopping: bool
    caller: str


class CallProcess:
    """The loop of a call process, and the calls it serves."""

    def __init__(self, helper: Forker) -> None:
        self.helper = helper
        """The helper as it was when it forked this process (what ``status`` reports)."""
        self.served = helper.served
        """Calls the helper had served when it handed over this process's latest call."""
        self.in_flight: set[int] = set()
        """The other call processes running a call when this one's was handed over."""
        self.heartbeat = Heartbeat()
        """What tells the client the call is alive (its thread starts with the first call)."""

    def work(self, pair: socket.socket, first: socket.socket | None) -> None:
        """Serve the call on ``first``, if any, and then each call the helper hands over, until
        the helper is gone or this process has served its share (``RETIRE_AFTER`` calls, or
        grown by ``RETIRE_GROWTH``); after each other call, tell the helper it is free."""
        born = _resident_bytes()
        call = first
        for served in range(1, RETIRE_AFTER + 1):
            if call is None:
                call = self._wait_for_call(pair)
                if call is None:
                    return
            self._serve_call(call)
            call = None
            if served == RETIRE_AFTER or _resident_bytes() - born > RETIRE_GROWTH:
                return
            try:
                pair.sendall(FREE)
            except OSError:  # the helper is gone
                return

    def _wait_for_call(self, pair: socket.socket) -> socket.socket | None:
        """The connection the helper hands over, with the helper's counts as they are then (for
        a status call); ``None`` when the helper stops, or is gone."""
        counts, fds, _, _ = socket.recv_fds(pair, 65536, 1)
        if not fds:
            return None
        served, *in_flight = counts.split()
        self.served, self.in_flight = int(served), {int(pid) for pid in in_flight}
        return socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, fds[0])  # (named: not asked)

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
                if fields[1] == b"call" and len(fields) == 6:
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
        verb, config_path = fields[0].decode(), os.fsdecode(fields[1])
        stdin = reader.exactly(int(fields[3]))
        if stdin is None or (verb not in CORE_VERBS and verb not in HIDDEN_VERBS):
            return
        # Another config, or a caller whose home or trust differs from the helper's starter's:
        # answered in the caller's process, as it would be without a helper.
        ours = config_path == self.helper.config_path and fields[2] == resident.environment()
        settings = config_or_none(config_path) if ours else None
        if settings is None or not settings.resident:
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
        when it forked that one, with its counts as they were when this call was handed over)."""
        helper = self.helper
        return {
            "pid": helper.pid,
            "version": helper.version,
            "code": helper.code,
            "python": sys.version.split()[0],
            "config": helper.config_path,
            "socket": helper.socket_path,
            "started": helper.started,
            "uptime_s": round(time.time() - helper.started, 3),
            "calls_served": self.served,
            "calls_in_flight": sum(1 for pid in self.in_flight if _running(pid)),
            "stopping": helper.stopping,
        }


def _resident_bytes() -> int:
    """This process's resident memory."""
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


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
