"""The resident helper: a warm process that runs core's calls for ``commands.resident``.

Started detached by a call that found none (``python -m commands.residentd SOCKET``), it
imports everything a verb needs once, then serves each connection in a thread: it reads the
verb, the config file's path and the request, runs the verb exactly as ``resource-gpu VERB``
would (same code, with the call's own stdin, stdout and stderr), and sends back the answer and
the exit status. It exits after ``IDLE_SECONDS`` without a call, when its socket is taken over,
or when the config says ``resident: false``.

Before a write goes out it tells the client where the stream stood and the write's operation
id, so that a client whose helper dies mid-call can resume the write instead of repeating it.
"""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import socket
import sys
import threading

from commands import resident
from commands.protocol import CallIO, Session, Verb
from commands.registry import CORE_VERBS, HIDDEN_VERBS, load
from ledger import config as config_files
from ledger.errors import PluginError

IDLE_SECONDS = 600.0
ANSWER_DEADLINE = resident.ANSWER_TIMEOUT


def main(argv: list[str]) -> None:
    path = argv[0]
    directory = os.path.dirname(path)
    if not resident.private(directory):
        return
    os.chdir("/")
    with open(path + ".lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # another helper serves this installation
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        listener.bind(path)
        inode = os.stat(path).st_ino  # to remove our socket on the way out, and not a successor's
        os.chmod(path, 0o600)
        listener.listen(128)
        _warm_up()
        Helper(listener).serve()
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == inode:
                os.unlink(path)


def _warm_up() -> None:
    """Import every verb and what it uses now, not on a client's time."""
    for name in (*CORE_VERBS, *HIDDEN_VERBS):
        load(name)
    import ledger.compaction
    import ledger.store  # noqa: F401


class Helper:
    def __init__(self, listener: socket.socket) -> None:
        self._listener = listener
        self._stopping = threading.Event()
        self._calls: set[threading.Thread] = set()

    def serve(self) -> None:
        self._listener.settimeout(IDLE_SECONDS)
        try:
            while not self._stopping.is_set():
                try:
                    connection, _ = self._listener.accept()
                except TimeoutError:
                    return  # idle: the next call starts a fresh helper
                except OSError:
                    return
                call = threading.Thread(target=self._serve_call, args=(connection,), daemon=True)
                self._calls.add(call)
                call.start()
                self._calls = {c for c in self._calls if c.is_alive()}
        finally:
            self._listener.close()
            for call in list(self._calls):  # calls in flight finish before the helper goes
                call.join(timeout=ANSWER_DEADLINE)

    def _serve_call(self, connection: socket.socket) -> None:
        with connection:
            try:
                request = _read_call(connection)
                if request is None:
                    return
                verb_name, config_path, stdin = request
                if not self._serves(config_path):
                    connection.sendall(b"F\n")
                    return
                status, out, err = self._run(connection, verb_name, config_path, stdin)
                connection.sendall(f"R {status} {len(out)} {len(err)}\n".encode() + out + err)
            except OSError:
                return  # the client is gone; whatever it was doing, it does itself

    def _serves(self, config_path: str) -> bool:
        """Whether this call is for us: its config loads and does not turn the helper off."""
        try:
            settings = config_files.load(config_path)
        except PluginError:
            return False  # the call itself says what is wrong, word for word, in-process
        if not settings.resident:
            self._stopping.set()
            self._listener.close()
            return False
        return True

    def _run(
        self, connection: socket.socket, verb_name: str, config_path: str, stdin: bytes
    ) -> tuple[int, bytes, bytes]:
        verb = load(verb_name)
        assert isinstance(verb, Verb)
        out, err = io.BytesIO(), io.BytesIO()

        def tell_client(node: str, after: int, op: str) -> None:
            connection.sendall(f"P {after} {op}\n".encode())

        session = Session(config_path, CallIO(io.BytesIO(stdin), out, err), write_hook=tell_client)
        try:
            verb(config_path, session)
            status = 0
        except SystemExit as exit:
            status = exit.code if isinstance(exit.code, int) else 1
        return status, out.getvalue(), err.getvalue()


def _read_call(connection: socket.socket) -> tuple[str, str, bytes] | None:
    stream = connection.makefile("rb")
    head = stream.readline(8192)
    fields = head.rstrip(b"\n").split(b"\0")
    if len(fields) != 4 or fields[0] != resident.MAGIC:
        return None
    verb, path, size = fields[1].decode(), os.fsdecode(fields[2]), int(fields[3])
    if verb not in CORE_VERBS and verb not in HIDDEN_VERBS:
        return None
    stdin = stream.read(size)
    return (verb, path, stdin) if len(stdin) == size else None


if __name__ == "__main__":
    main(sys.argv[1:])
