"""The client side of the resident helper: hand a core call to a warm process.

Core starts ``resource-gpu`` once per call, and most of a call is Python loading msgspec,
PyYAML and the ledger. The resident helper (``commands.residentd``) has all of that loaded, so
a call here only sends its verb, config path and stdin over a Unix socket and relays the answer:
stdout, stderr and exit status exactly as the verb would have produced them in this process.
This module imports nothing beyond ``os``, ``sys`` and ``_socket``.

Why it is safe:

* The helper runs detached (its own session, ``/dev/null`` for stdio), so it never holds
  core's pipes open, and only this user can reach its socket (a 0700 directory).
* The socket is named after this installation (interpreter and code files): an upgrade gets
  a new helper, and the old one exits when idle. The helper re-reads a changed config file;
  ``resident: false`` in it turns the helper off (so does ``RESOURCE_GPU_RESIDENT=0``).
* A call the helper cannot serve (no helper yet, config missing or invalid, helper disabled
  or gone) runs in this process as before. If the helper dies mid-call after it sent a write,
  the call here resumes that write by its operation id: it is applied once, never twice.
"""

from __future__ import annotations

import os
import sys

TYPE_CHECKING = False  # not typing's: importing typing costs a core call ~3 ms
if TYPE_CHECKING:
    from ledger.store import Resume

MAGIC = b"RGPU1"
ANSWER_TIMEOUT = 25.0
"""Seconds to wait for the helper's answer (its etcd time is bounded by etcd.timeout, at most
25 s); core kills a call at 30."""
OFF_ENV = "RESOURCE_GPU_RESIDENT"
PACKAGES = ("commands", "ledger", "projections")


def turned_off() -> bool:
    """Off by the environment: ``RESOURCE_GPU_RESIDENT=0``, or debugging (tracebacks belong
    to the process that runs the verb)."""
    return os.environ.get(OFF_ENV, "1") in ("0", "off", "false") or bool(
        os.environ.get("RESOURCE_GPU_DEBUG")
    )


def runtime_dir() -> str:
    base = os.environ.get("XDG_RUNTIME_DIR") or "/tmp"
    return os.path.join(base, f"resource-gpu-{os.getuid()}")


def socket_path() -> str:
    """This installation's socket: a new interpreter or new code means a new helper."""
    import zlib

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    parts = [sys.prefix, sys.version]
    for package in PACKAGES:
        with os.scandir(os.path.join(root, package)) as entries:
            for entry in entries:
                if entry.name.endswith(".py"):
                    stat = entry.stat()
                    parts.append(f"{package}/{entry.name}:{stat.st_mtime_ns}:{stat.st_size}")
    identity = zlib.crc32("|".join(sorted(parts)).encode())
    return os.path.join(runtime_dir(), f"{identity:08x}.sock")


def private(directory: str) -> bool:
    """Ours and closed to others: nobody else can plant a socket there."""
    try:
        stat = os.lstat(directory)
    except OSError:
        return False
    return stat.st_uid == os.getuid() and stat.st_mode & 0o077 == 0 and os.path.isdir(directory)


def config_file(explicit: str | None) -> str | None:
    """The config file a call would read, as an absolute path, if it exists."""
    path = explicit or os.environ.get("ERU_RESOURCE_CONFIG_PATH") or "gpu.yaml"
    path = os.path.abspath(path)
    return path if os.path.isfile(path) else None


class Outcome:
    """What the helper made of a call: ``status`` when it answered; otherwise the call runs
    here, resuming the write the helper had sent (``sent``: its op id and stream end)."""

    def __init__(self, status: int | None, sent: tuple[str, int] | None = None) -> None:
        self.status = status
        self.sent = sent

    @property
    def resume(self) -> Resume | None:
        if self.sent is None:
            return None
        from ledger.store import Resume

        return Resume(op=self.sent[0], after=self.sent[1])


def call(verb: str, config: str | None) -> Outcome:
    """Send the call to the resident helper; relay its answer."""
    if turned_off():
        return Outcome(None)
    path = config_file(config)
    if path is None or not private(runtime_dir()):
        return Outcome(None)
    import _socket

    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.connect(socket_path())
    except OSError:
        sock.close()
        return Outcome(None)
    try:
        stdin = sys.stdin.buffer.read(4 * 1024 * 1024 + 1)
        head = b"\0".join([MAGIC, verb.encode(), os.fsencode(path), str(len(stdin)).encode()])
        sock.settimeout(ANSWER_TIMEOUT)
        try:
            sock.sendall(head + b"\n" + stdin)
        except OSError:  # the helper is gone or stuck; it runs nothing before it has it all
            _replay(stdin)
            return Outcome(None)
        return _relay(_Reader(sock), verb, stdin)
    except TimeoutError:
        # The helper is alive but stuck: it may yet finish the call, so it must not run here
        # as well. Fail the way a call fails when etcd's answer is lost.
        sys.stderr.write(
            f"resource-gpu {verb}: the resident helper did not answer within "
            f"{ANSWER_TIMEOUT:g}s and may still finish the call (outcome unknown); "
            "resident: false in the config turns it off\n"
        )
        return Outcome(1)
    finally:
        sock.close()


class _Reader:
    def __init__(self, sock: object) -> None:
        self._sock = sock
        self._buffer = b""

    def line(self) -> bytes | None:
        while b"\n" not in self._buffer:
            if not self._fill():
                return None
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def exactly(self, size: int) -> bytes | None:
        while len(self._buffer) < size:
            if not self._fill():
                return None
        data, self._buffer = self._buffer[:size], self._buffer[size:]
        return data

    def _fill(self) -> bool:
        try:
            data: bytes = self._sock.recv(65536)  # type: ignore[attr-defined]
        except TimeoutError:
            raise
        except OSError:  # the helper is gone
            return False
        self._buffer += data
        return bool(data)


def _relay(reader: _Reader, verb: str, stdin: bytes) -> Outcome:
    """Frames from the helper: ``P after op`` (a write is about to go out), then ``R status
    stdout-length stderr-length`` and the two bodies, or ``F`` (run it yourself)."""
    sent: tuple[str, int] | None = None
    while (line := reader.line()) is not None:
        kind, *fields = line.split(b" ")
        if kind == b"P":
            sent = (fields[1].decode(), int(fields[0]))
        elif kind == b"R":
            status, out_size, err_size = (int(field) for field in fields)
            out, err = reader.exactly(out_size), reader.exactly(err_size)
            if out is None or err is None:
                break
            sys.stdout.buffer.write(out)
            sys.stdout.flush()
            sys.stderr.buffer.write(err)
            sys.stderr.flush()
            return Outcome(status)
        else:
            break
    _replay(stdin)
    return Outcome(None, sent)  # no answer: run the call here


def _replay(stdin: bytes) -> None:
    """The call runs here after all: give it back the request it already read."""
    import io

    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))


def start_if_wanted(config: str | None) -> None:
    """After a call ran here: start a helper if the config wants one (the call loaded it)."""
    if turned_off():
        return
    from ledger import config as config_files
    from ledger.errors import PluginError

    try:
        wanted = config_files.load(config).resident
    except PluginError:
        return
    if wanted:
        start()


def start() -> None:
    """Start a helper for this installation, detached; if one is starting, it gives way."""
    directory = runtime_dir()
    try:
        os.makedirs(directory, mode=0o700, exist_ok=True)
    except OSError:
        return
    if not private(directory):
        return
    devnull = os.open(os.devnull, os.O_RDWR)
    try:
        os.posix_spawn(
            sys.executable,
            [sys.executable, "-m", "commands.residentd", socket_path()],
            os.environ,
            file_actions=[(os.POSIX_SPAWN_DUP2, devnull, fd) for fd in (0, 1, 2)],
            setsid=True,
        )
    except OSError:
        pass
    finally:
        os.close(devnull)
