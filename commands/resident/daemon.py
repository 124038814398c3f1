"""The resident helper: a warm process that runs core's calls for one config file.

Started detached by a call that found none (``python -m commands.resident.daemon CONFIG``),
it takes its socket in the runtime directory (``rundir``) unless a live helper already has it,
imports everything a verb needs, and hands each connection to a process of its own: it reads
the verb and the request, runs the verb exactly as ``resource-gpu VERB`` would (same
code, the call's own stdin, stdout and stderr), beats while it runs, and sends back the answer
and the exit status. Calls so run side by side, on every core, each warm, and a stuck one can
be killed alone. The wire conversation is described in ``commands.resident.client``.

The process for the next call is forked ahead of it (a *spare*, waiting for a connection on a
socket pair of its own), so a call does not wait for a fork, and the warm objects are frozen
out of the garbage collector's reach first, so the call's process copies few of the helper's
pages. The helper itself runs no thread, so that forking it is safe: it accepts, hands over,
forks the next spare and reaps.

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
import signal
import socket
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
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
        self._calls: set[int] = set()
        """The pids of the calls in flight."""
        self._spare: Spare | None = None
        """The process forked for the next call, waiting for its connection."""
        self._last_call = time.monotonic()
        self._stopping = False
        self._caller = who()
        """``user@host`` for the events of every call (the helper serves only its own user):
        looked up once, not in each call's process."""
        self.heartbeat: Heartbeat | None = None
        """In a call's process: what tells the client it is alive."""

    def stop(self) -> None:
        """Stop serving (calls in flight finish). A connection of our own wakes accept() at
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
        ready_for_calls(self.config_path)  # every call's process inherits what this loads
        gc.freeze()  # what is loaded now lives as long as the helper: no collection walks it
        try:
            while not self._stopping:
                self._reap()
                if self._spare is None:
                    self._spare = self._fork_spare()
                try:
                    connection, _ = self._listener.accept()
                except TimeoutError:
                    if self._idle() or not self._still_ours():
                        break
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
        """Give the connection to the spare, or to a process forked for it if there is none
        (or it died waiting); then load the config, so that the next spare inherits it parsed:
        one that turns the helper off stops it."""
        self._reap()  # so that a status call counts the calls truly in flight
        spare, self._spare = self._spare, None
        if spare is None or not spare.take(connection, self._calls, self.served):
            pid = self._fork(lambda: connection)
            if pid is not None:
                self._calls.add(pid)
        else:
            self._calls.add(spare.pid)
        connection.close()
        settings = self._settings()
        if settings is not None and not settings.resident:
            self.stop()

    def _fork_spare(self) -> Spare | None:
        """A process for the next call, forked ahead of it: it waits for the connection."""
        ours, theirs = socket.socketpair()

        def handed_over() -> socket.socket | None:
            ours.close()
            return self._wait_for_call(theirs)

        pid = self._fork(handed_over)
        theirs.close()
        if pid is None:
            ours.close()
            return None
        return Spare(pid, ours)

    def _fork(self, connection: Callable[[], socket.socket | None]) -> int | None:
        """A process that serves the connection ``connection()`` gives it, and exits; ``None``
        if there is no process to be had (the client, hung up on, runs the call itself)."""
        try:
            pid = os.fork()
        except OSError:
            return None
        if pid == 0:  # the call's process: it serves one connection and nothing else
            status = 0
            try:
                self._listener.close()
                for signum in (signal.SIGTERM, signal.SIGINT):
                    signal.signal(signum, signal.SIG_DFL)
                call = connection()
                if call is not None:
                    self._serve_call(call)
            except BaseException:
                status = 1
            finally:
                os._exit(status)  # never the helper's own clean-up
        return pid

    def _wait_for_call(self, pair: socket.socket) -> socket.socket | None:
        """In a spare: the connection the helper hands over, with the helper's counts as they
        are then (for a status call); ``None`` when the helper stops, or is gone."""
        counts, fds, _, _ = socket.recv_fds(pair, 65536, 1)
        pair.close()
        if not fds:
            return None
        served, *in_flight = counts.split()
        self.served, self._calls = int(served), {int(pid) for pid in in_flight}
        return socket.socket(fileno=fds[0])

    def _reap(self) -> None:
        for pid in list(self._calls):
            with contextlib.suppress(ChildProcessError):
                if os.waitpid(pid, os.WNOHANG)[0] == 0:
                    continue
            self._calls.discard(pid)
            self.served += 1
        if self._spare is not None and not self._spare.waiting():
            self._spare = None  # killed while it waited: the next call gets a fresh one

    def _idle(self) -> bool:
        return not self._calls and time.monotonic() - self._last_call > IDLE_SECONDS

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
        if self._spare is not None:
            self._spare.dismiss()
            self._spare = None
        deadline = time.monotonic() + SHUTDOWN_WAIT
        while self._calls and time.monotonic() < deadline:
            self._reap()
            time.sleep(0.02)
        os.close(self._directory)

    # -- one connection, in its own process ---------------------------------------------------

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
        heartbeat = self.heartbeat = Heartbeat(connection)
        heartbeat.send(b"A %d\n" % os.getpid())
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
            "calls_in_flight": sum(1 for pid in self._calls if _running(pid)),
            "stopping": self._stopping,
        }


class Spare:
    """A process forked ahead of the next call, and the helper's end of its socket pair."""

    def __init__(self, pid: int, pair: socket.socket) -> None:
        self.pid = pid
        self._pair = pair

    def take(self, connection: socket.socket, in_flight: set[int], served: int) -> bool:
        """Hand ``connection`` over; False if the spare is gone (the caller forks instead)."""
        counts = b" ".join(b"%d" % n for n in (served, *in_flight))
        try:
            socket.send_fds(self._pair, [counts], [connection.fileno()])
        except OSError:
            self.dismiss()
            return False
        self._pair.close()
        return True

    def waiting(self) -> bool:
        """Whether it still waits (reaping it if it has died)."""
        try:
            return os.waitpid(self.pid, os.WNOHANG)[0] == 0
        except ChildProcessError:
            return False

    def dismiss(self) -> None:
        """No call for it: it holds nothing but its pair, so it is killed, and reaped."""
        self._pair.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


class Heartbeat:
    """A call's frames to its client, and a ``K`` every ``resident.HEARTBEAT`` seconds between
    them while it runs: the client kills a call for silence, never for taking long. A thread of
    the call's process (the helper itself runs none)."""

    def __init__(self, connection: socket.socket) -> None:
        self._connection = connection
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._beat, daemon=True)
        self._thread.start()

    def send(self, frame: bytes) -> None:
        with self._lock:
            self._connection.sendall(frame)

    def stop(self) -> None:
        """No more beats: the answer follows, or nothing will."""
        self._done.set()
        self._thread.join()

    def _beat(self) -> None:
        while not self._done.wait(resident.HEARTBEAT):
            try:
                self.send(b"K\n")
            except OSError:  # the client is gone: nobody will hear this call's answer
                os._exit(1)


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
