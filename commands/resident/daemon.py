"""The resident helper: a warm process that runs core's calls for one config file.

Started detached by a call that found none (``python -m commands.resident.daemon CONFIG``),
it takes its socket in the runtime directory (``rundir``) unless a live helper already has it,
imports everything a verb needs, and hands each connection to a *call process*, forked from
it: that reads the verb and the request, runs the verb exactly as ``resource-gpu VERB`` would
(same code, the call's own stdin, stdout and stderr), beats while it runs, and sends back the
answer and the exit status. Calls so run side by side, on every core, each warm, and a stuck
one can be killed alone. The wire conversation is described in ``commands.resident.client``.

A call process serves one call at a time, and then waits for the next (``Worker``): the
helper keeps the idle ones, hands a connection to the one that served last, and forks one
ahead of the next call whenever none is idle, so a call waits for no fork, and, after its
first call, a process pays no copy-on-write faults for the pages its calls touch. The warm
objects are frozen out of the garbage collector's reach before any fork. A process leaves
after ``RETIRE_AFTER`` calls, or once it has grown by ``RETIRE_GROWTH``, or on any fault, and
the next is forked fresh. The helper itself runs no thread, so that forking it is safe: it
accepts, hands over, forks, and hears which processes are free again.

It exits, removing its socket, after ``IDLE_SECONDS`` without a call, on SIGTERM or SIGINT, on
``resource-gpu helper --stop``, when its config says ``resident: false``, and when its socket is
taken over; calls in flight finish first. Its process title names the plugin and its config.
"""

from __future__ import annotations

import contextlib
import fcntl
import gc
import importlib
import io
import json
import os
import pkgutil
import selectors
import signal
import socket
import sys
import threading
import time
import types
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from resource_extend.commands.program import installed_version, programs
from resource_extend.commands.protocol import CallIO, Session
from resource_extend.commands.registry import CORE_VERBS, HIDDEN_VERBS, load_verb
from resource_extend.commands.resident import client as resident
from resource_extend.commands.resident import rundir
from resource_extend.ledger import config as config_files
from resource_extend.ledger.etcd.connection import open_transport
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.store.appender import who

if TYPE_CHECKING:
    from resource_extend.ledger.config import Config
    from resource_extend.projections.plugin import Plugin

IDLE_SECONDS = 600.0
TICK = 1.0
"""How often the helper looks up from accept(): to stop, idle out, or see its socket taken."""
BACKLOG = 128
SHUTDOWN_WAIT = 30.0
"""Seconds a stopping helper waits for its calls in flight (core's call timeout); past that
they finish on their own."""
LOCK_WAIT = 10.0
"""Seconds to wait for the runtime directory's lock (held only while a socket is claimed or
removed)."""
MAX_IDLE = 8
"""Idle call processes kept for the next calls (after a burst of calls at once, the rest
leave as they finish)."""
KEEP_IDLE = 60.0
"""Seconds an idle call process is kept without a call, but for the last one (each holds
about 4 MiB of its own)."""
RETIRE_AFTER = 1000
"""Calls a call process serves before it leaves, and a fresh one is forked."""
RETIRE_GROWTH = 64 << 20
"""Bytes a call process's resident memory may have grown by since its fork before it leaves
(after the call that grew it: a large deploy's answer, say)."""
FREE = b"r"
"""What a call process tells the helper once it has answered: it takes the next call."""


def main(argv: list[str]) -> None:
    """``residentd KIND CONFIG``: serve the calls of KIND's program for the config file CONFIG;
    KIND is the module that defines the kind's ``PLUGIN`` (``Plugin.origin``), or, as a client
    of 0.8 names it, one of this install's programs (``resource-gpu``)."""
    kind, config_path = argv
    plugin = programs().get(kind) or importlib.import_module(kind).PLUGIN
    program = plugin.name
    _set_title(f"{program} helper {config_path}")
    name = resident.socket_name(config_path)
    asked: list[int] = []  # a stop asked for before the helper serves: it stops at once
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, _: asked.append(signum))
    try:
        directory, path = rundir.open_private(program, create=True)
    except OSError:
        return
    claimed = claim(plugin, directory, name)
    if claimed is None:
        return
    listener, inode = claimed
    socket_path = os.path.join(path, name)
    helper = Helper(plugin, listener, directory, name, inode, config_path, socket_path)
    helper.serve(stopped=asked)


def _set_title(title: str) -> None:
    try:
        import setproctitle
    except ImportError:  # the title is for people; the helper works without it
        return
    setproctitle.setproctitle(title)


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
        _warm_up(plugin)
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


def _warm_up(plugin: Plugin) -> None:
    """Import every verb and what it uses now, not on a client's time: what a Session imports
    only when a call needs it too (a call's process would import it, and forget it, each
    time)."""
    importlib.import_module("resource_extend.commands.resident.copies")  # Session.config
    importlib.import_module("resource_extend.ledger.upkeep.bounds")  # Session.append
    for package in _kinds_packages(plugin):  # what its verbs import only when they need it
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            importlib.import_module(module.name)
    for name in (*CORE_VERBS, *HIDDEN_VERBS):
        verb = load_verb(plugin, name)
        if verb is not None and verb.request_type is not None:
            # A request bound to its kind (``AddNode[Resource]``) keeps its layout on itself,
            # not on a class _lay_out_structs finds: laid out here, not in every call.
            msgspec.json.Decoder(verb.request_type)
    plugin.parts  # noqa: B018 (loads the kind's fold, views and gauges)

    _lay_out_structs()


def config_or_none(config_path: str) -> Config | None:
    """The config, if it loads (if not, the call itself says what is wrong, word for word,
    in-process)."""
    try:
        return config_files.load(config_path)
    except PluginError:
        return None


def ready_for_calls(config_path: str) -> None:
    """Parse the config, and load the etcd transport it names (gRPC's libraries are many):
    once here, rather than in every call's process. Its failures are the calls' to say."""
    settings = config_or_none(config_path)
    if settings is not None:
        with contextlib.suppress(PluginError):
            open_transport(settings.etcd)  # opens nothing: a transport connects on first use


def _kinds_packages(plugin: Plugin) -> list[types.ModuleType]:
    """The kind's two folders: the package of its value and the package of its verbs."""
    found = []
    for name in (plugin.origin, plugin.verbs):
        module = importlib.import_module(name)
        if not hasattr(module, "__path__"):  # a module: its folder is its package
            module = importlib.import_module(name.rpartition(".")[0])
        found.append(module)
    return found


def _lay_out_structs() -> None:
    """Have msgspec work out every Struct type loaded (annotations resolved, fields laid out,
    kept on the class): done lazily, by the first decode, it would cost each call's process
    about a millisecond."""
    pending: list[type] = [msgspec.Struct]
    while pending:
        kind = pending.pop()
        pending.extend(kind.__subclasses__())
        if kind is not msgspec.Struct:
            msgspec.json.Decoder(kind)


class Helper:
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
        self._in_flight: set[int] = set()
        """In a call process: the others running a call when this one's was handed over."""
        self._last_call = time.monotonic()
        self._stopping = False
        self._caller = who()
        """``user@host`` for the events of every call (the helper serves only its own user):
        looked up once, not in each call's process."""
        self.heartbeat = Heartbeat()
        """In a call process: what tells the client it is alive (its thread starts with the
        first call)."""

    def stop(self) -> None:
        """Stop serving (calls in flight finish). A connection of our own wakes the helper at
        once rather than at its next tick."""
        self._stopping = True
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
        ready_for_calls(self.config_path)  # every call process inherits what this loads
        gc.freeze()  # what is loaded now lives as long as the helper: no collection walks it
        try:
            while not self._stopping:
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
                if self._stopping:
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
        settings = self._settings()
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
                self._work(theirs, first)
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
        os.close(self._directory)

    # -- calls, one at a time, in a call process ----------------------------------------------

    def _work(self, pair: socket.socket, first: socket.socket | None) -> None:
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
        self.served, self._in_flight = int(served), {int(pid) for pid in in_flight}
        return socket.socket(fileno=fds[0])

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
                if fields[1] == b"call" and len(fields) == 5:
                    self._call(connection, reader, fields[2:])
                elif fields[1] in (b"status", b"stop"):
                    connection.sendall(_framed(self.status()))
                    if fields[1] == b"stop":
                        os.kill(self.pid, signal.SIGTERM)  # the helper stops as on SIGTERM
            except OSError:
                return  # the client is gone; whatever it was doing, it does itself

    def _call(
        self, connection: socket.socket, reader: resident.Reader, fields: list[bytes]
    ) -> None:
        verb, config_path = fields[0].decode(), os.fsdecode(fields[1])
        stdin = reader.exactly(int(fields[2]))
        if stdin is None or (verb not in CORE_VERBS and verb not in HIDDEN_VERBS):
            return
        settings = self._settings() if config_path == self.config_path else None
        if settings is None or not settings.resident:
            connection.sendall(b"F\n")
            return
        heartbeat = self.heartbeat
        heartbeat.start(connection, b"A %d\n" % os.getpid())
        try:
            status, out, err = self._run(heartbeat, reader, verb, config_path, stdin)
        finally:
            heartbeat.stop()
        connection.sendall(b"R %d %d %d\n" % (status, len(out), len(err)) + out + err)

    def _settings(self) -> Config | None:
        return config_or_none(self.config_path)

    def _run(
        self,
        heartbeat: Heartbeat,
        reader: resident.Reader,
        verb_name: str,
        config_path: str,
        stdin: bytes,
    ) -> tuple[int, bytes, bytes]:
        verb = load_verb(self.plugin, verb_name)
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
            self.plugin, config_path, io_, write_hook=ask_to_write, caller=self._caller
        )
        try:
            verb(session)
            status = 0
        except SystemExit as exit:
            status = exit.code if isinstance(exit.code, int) else 1
        return status, out.getvalue(), err.getvalue()

    def status(self) -> dict[str, Any]:
        """What ``resource-gpu helper`` shows (asked of a call's process: the helper as it was
        when it forked that one)."""
        return {
            "pid": self.pid,
            "version": self.version,
            "code": self.code,
            "python": sys.version.split()[0],
            "config": self.config_path,
            "socket": self.socket_path,
            "started": self.started,
            "uptime_s": round(time.time() - self.started, 3),
            "calls_served": self.served,
            "calls_in_flight": sum(1 for pid in self._in_flight if _running(pid)),
            "stopping": self._stopping,
        }


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


class Heartbeat:
    """A call's frames to its client, and a ``K`` every ``resident.HEARTBEAT`` seconds between
    them while it runs: the client kills a call for silence, never for taking long. A thread of
    the call process, started with its first call and kept for the next (the helper itself runs
    none)."""

    def __init__(self) -> None:
        self._connection: socket.socket | None = None
        """The running call's connection; ``None`` between calls (no beats)."""
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._thread: threading.Thread | None = None

    def start(self, connection: socket.socket, taken: bytes) -> None:
        """Send ``taken`` (the call's first frame: nothing may come before it), then beat on
        ``connection`` until stopped."""
        with self._lock:
            connection.sendall(taken)
            self._connection = connection
            self._changed.notify()
        if self._thread is None:
            self._thread = threading.Thread(target=self._beat, daemon=True)
            self._thread.start()

    def send(self, frame: bytes) -> None:
        """A frame of the running call (never in the middle of a beat)."""
        with self._lock:
            assert self._connection is not None
            self._connection.sendall(frame)

    def stop(self) -> None:
        """No more beats: the answer follows, or nothing will. (The thread, asleep, finds it
        out when it wakes.)"""
        with self._lock:
            self._connection = None

    def _beat(self) -> None:
        with self._lock:
            while True:
                beating = self._connection
                if beating is None:
                    self._changed.wait()  # for the next call
                elif not self._changed.wait(resident.HEARTBEAT) and self._connection is beating:
                    try:
                        beating.sendall(b"K\n")
                    except OSError:  # the client is gone: nobody will hear this call's answer
                        os._exit(1)


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


if __name__ == "__main__":
    main(sys.argv[1:])
