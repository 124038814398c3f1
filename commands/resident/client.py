"""The client side of the resident helper: hand a core call to a warm process.

Core starts ``resource-gpu`` once per call, and most of a call is Python loading msgspec,
PyYAML and the ledger. The resident helper (``commands.resident.daemon``) has all of that loaded, so
a call here only sends its verb, config path and stdin over a Unix socket and relays the answer:
stdout, stderr and exit status exactly as the verb would have produced them in this process.
On that path it imports nothing beyond ``posix``, ``sys`` and ``_socket`` of the standard
library (``ledger.host.lean`` does what it needs of ``os``), and nothing that needs Python's
``site``.

The conversation, one call per connection (frames are lines; bodies follow their frame)::

    client: RGPU5 \\0 call \\0 VERB \\0 CONFIG \\0 ENVIRONMENT \\0 CODE \\0 LENGTH \\n
            then the installation (CODE bytes) and the request (LENGTH bytes)
    helper: A PID            it has the call, run by its call process PID
            F                it will not serve this call (another config, another
                             installation, or a caller whose environment says otherwise:
                             ENVIRONMENT): run it here
            K                the call is alive (every HEARTBEAT seconds, however long it runs)
            P AFTER OP NODE  a write is about to go out (stream end, op id, node in hex) ...
    client: G                ... and only on this go-ahead is it sent
    helper: R STATUS OUT ERR then stdout and stderr, OUT and ERR bytes long

Each call runs in a call process of the helper's (forked from the warm helper, it runs one call
at a time), so calls never wait for one another and a stuck one can be killed alone. A call is
killed for silence, never for being slow: one that says nothing for ``SILENCE`` seconds
(stopped, or hung where even its heartbeat cannot run) is killed, and a helper that does not
take a call within ``SILENCE`` is replaced.

Why nothing is ever applied twice: the helper sends no write without the go-ahead, and the
client gives it only while it is still waiting. A call that never gave it runs here when the
helper fails it in any way. One that gave it runs here only once the call is over in the helper
(its process hung up, which it does only when the call has ended, or fell silent and was
killed, which is waited for), and then *resumes* the write by its op id: if the helper's write
landed, its result is the answer; if not, it is made here. Should the process be past reach (it
cannot be confirmed dead), the call fails saying its outcome is unknown, as when etcd's answer
is lost.

Why nobody else can answer: the socket lives in a directory only this user can use, checked
all the way up and reached through a descriptor (``rundir``), and the helper must be of this
user (``SO_PEERCRED``), which the helper checks of its callers too.
"""

import posix
import sys

from resource_extend.commands.program import MAX_REQUEST_BYTES, VERSION, debugging
from resource_extend.ledger.host import rundir
from resource_extend.ledger.host.lean import absolute, fsencode, getenv, is_file

TYPE_CHECKING = False  # not typing's: importing typing costs a core call ~3 ms
if TYPE_CHECKING:
    from _socket import socket

    from resource_extend.commands.program import Program
    from resource_extend.ledger.store.appender import Resume

MAGIC = b"RGPU5"
CONNECT_TIMEOUT = 1.0
"""Seconds to reach the helper's socket: past a stuck helper's backlog, connect() would block."""
SILENCE = 3.0
"""Seconds either end may go without a word before the other counts it as stuck: the helper to
take a call, a call to send its next frame (it beats every ``HEARTBEAT``), the client to answer
a write's announcement."""
HEARTBEAT = 0.5
"""Seconds between a running call's heartbeats (``K``)."""
STOP_WAIT = 2.0
"""Seconds to wait for a killed helper to be gone."""
PACKAGES = ("commands", "ledger", "projections")
HELPER_ENTRY = "from resource_extend.commands.resident.daemon import main; main(sys.argv[1:])"
"""How a helper's Python starts it: after :func:`taken_from`, with the kind's module and the
config path as its arguments."""


def turned_off(program: "Program") -> bool:
    """Off by the environment: ``RESOURCE_GPU_RESIDENT=0`` (``RESOURCE_STORAGE_RESIDENT=0``),
    or debugging (tracebacks belong to the process that runs the verb)."""
    off = (getenv(program.env("RESIDENT")) or "1") in ("0", "off", "false")
    return off or debugging(program)


def config_file(program: "Program", explicit: str | None) -> str | None:
    """The config file a call would read, as an absolute path, if it is a regular file."""
    path = explicit or getenv("ERU_RESOURCE_CONFIG_PATH") or program.config_file
    try:
        path = absolute(path)  # the working directory may be gone
        return path if is_file(path) else None
    except OSError:
        return None


def package_dir() -> str:
    """The directory holding this installation's ``commands``, ``ledger`` and ``projections``:
    ``site-packages/resource_extend`` of a wheel, the source tree of an editable install."""
    return absolute(__file__).rsplit("/", 3)[0]  # <package>/commands/resident/client.py


THIN_PACKAGES = ("commands", "commands.resident", "ledger", "ledger.host")
"""The packages a core call's thin path goes through, which :func:`taken_from` makes without
running their ``__init__``: each holds only its docstring (``tests/resident/test_launcher.py``
holds them to it), and importing one costs the call about 0.2 ms (docs/speed.md)."""


def taken_from(package: str) -> str:
    """Python that makes the package ``resource_extend`` the one at ``package``, and nothing
    else: what a launcher (``commands.launcher``) and the helper it starts run first, so that
    both run this installation's code whatever ``sys.path`` would find. The packages of the
    thin path (``THIN_PACKAGES``) are made there too, each with its folder and nothing else."""
    return (
        "import sys\n"
        'package = type(sys)("resource_extend")\n'
        f"package.__path__ = [{package!r}]\n"
        'sys.modules["resource_extend"] = package\n'
        f"for name in {THIN_PACKAGES!r}:\n"
        '    made = sys.modules[f"resource_extend.{name}"] = type(sys)(f"resource_extend.{name}")\n'
        '    made.__path__ = [package.__path__[0] + "/" + name.replace(".", "/")]\n'
        '    parent, _, last = f"resource_extend.{name}".rpartition(".")\n'
        "    setattr(sys.modules[parent], last, made)\n"
    )


def installation() -> str:
    """What this installation is: its interpreter, where its code lies, and the code itself,
    named by one stat of its wheel's ``RECORD`` (which every install and upgrade writes anew)
    or, in a source tree, by the size and time of every code file. An upgrade changes it, and
    so gets a helper of its own."""
    root = package_dir()
    # The interpreter by its directory (the venv's bin/, whichever of its names started it),
    # not sys.prefix: a launcher's start without site leaves that the base Python's.
    parts = [sys.executable.rpartition("/")[0], sys.version, root]
    record = _record(root)
    if record is not None:
        return "|".join([*parts, record])
    folders = [(package, f"{root}/{package}") for package in PACKAGES]
    while folders:  # (os.walk and os.path.relpath cost ten times this: it runs every call)
        name, path = folders.pop()
        with posix.scandir(path) as entries:
            for entry in entries:
                if entry.name.endswith(".py"):
                    stat = entry.stat()
                    parts.append(f"{name}/{entry.name}:{stat.st_mtime_ns}:{stat.st_size}")
                elif entry.is_dir() and not entry.name.startswith(("_", ".")):
                    folders.append((f"{name}/{entry.name}", entry.path))
    return "|".join(sorted(parts))


def _record(root: str) -> str | None:
    """The stat of the ``RECORD`` pip (or any installer) wrote beside ``root``, the installed
    package; None in a source tree (or an editable install), whose files change under it."""
    dist_info = f"{root.rpartition('/')[0]}/resource_extend-{VERSION}.dist-info/RECORD"
    try:
        stat = posix.stat(dist_info)
    except OSError:
        return None
    return f"RECORD:{stat.st_dev}:{stat.st_ino}:{stat.st_mtime_ns}:{stat.st_size}"


def code_identity() -> str:
    """A short name for this installation (see :func:`installation`), for people: a helper
    compares a caller's whole installation with its own."""
    return short_name(installation().encode())


CALLERS_ENVIRONMENT = ("HOME", "SSL_CERT_FILE", "SSL_CERT_DIR")
"""What in a caller's environment changes what its call does: where exports go by default
(``HOME``) and which CAs it trusts (OpenSSL's). A helper serves only the callers that share
them with the process that started it; another is answered here, as without a helper."""


def environment() -> bytes:
    """This process's :data:`CALLERS_ENVIRONMENT` as they read here, in hex (what a call sends,
    and what a helper compares with its own, byte for byte): each value, or that it is unset,
    and the working directory when a value is relative (OpenSSL reads it from there). Never a
    short name of them: two CA paths differing by two digits can share one (round six)."""
    values = [getenv(name) for name in CALLERS_ENVIRONMENT]
    said = [b"-" if value is None else b"=" + fsencode(value) for value in values]
    if any(value is not None and _relative(value) for value in values):
        said.append(b"@" + fsencode(posix.getcwd()))
    return b"\0".join(said).hex().encode()


def _relative(value: str) -> bool:
    """Whether a path (or a list of them, as ``SSL_CERT_DIR`` may be) names anything relative
    to the working directory."""
    return any(not part.startswith("/") for part in value.split(":"))


def call_request(verb: str, config_path: str, code: str, stdin: bytes) -> bytes:
    """A call as it is sent: its frame, the caller's installation (``code``), the request."""
    installed = fsencode(code)
    head = [MAGIC, b"call", verb.encode(), fsencode(config_path), environment()]
    head += [b"%d" % len(installed), b"%d" % len(stdin)]
    return b"\0".join(head) + b"\n" + installed + stdin


def socket_name(config_path: str, code: str | None = None) -> str:
    """The socket of the helper for this installation and this config file. Short, so two
    may share one: the helper compares the config path and the installation in full, and a
    caller it turns away runs its call itself (a collision costs speed, never a wrong answer)."""
    installed = fsencode(installation() if code is None else code)
    return f"{short_name(fsencode(config_path) + b'|' + installed)}.sock"


NAME_MODULUS = (1 << 31) - 1
"""A prime: the bytes named, read as one number, are named by what is left over from it."""


def short_name(data: bytes) -> str:
    """Eight hex digits for ``data``, the same in every process (``hash`` is not), as crc32's
    were. Not zlib's crc32: loading zlib costs a core call a quarter of a millisecond; this
    one arithmetic step on a number of a few hundred bytes costs a microsecond. Names need no
    strength against forgery, only against chance: the directory they live in is private, and
    nothing is decided by a name alone (``socket_name``)."""
    number = int.from_bytes(b"\x01" + data, "big")  # (the 1: leading zero bytes count too)
    return f"{number % NAME_MODULUS:08x}"


class Outcome:
    """What the helper made of a call: ``status`` when it answered; otherwise the call runs
    here, resuming the write the helper was allowed to send (``sent``: op id, stream end)."""

    def __init__(self, status: int | None, sent: tuple[str, int] | None = None) -> None:
        self.status = status
        self.sent = sent

    @property
    def resume(self) -> "Resume | None":
        if self.sent is None:
            return None
        from resource_extend.ledger.store.appender import Resume

        return Resume(op=self.sent[0], after=self.sent[1])


def call(program: "Program", verb: str, config: str | None) -> Outcome:
    """Send the call to ``program``'s resident helper, if one serves this config; relay its
    answer."""
    if turned_off(program):
        return Outcome(None)
    path = config_file(program, config)
    if path is None:
        return Outcome(None)
    code = installation()
    link = Link.connect(program.name, socket_name(path, code))
    if link is None:
        return Outcome(None)
    stdin = sys.stdin.buffer.read(MAX_REQUEST_BYTES + 1)
    try:
        outcome = link.call(verb, call_request(verb, path, code, stdin))
    finally:
        link.close()
    if outcome.status is None:
        import io

        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))  # the call runs here after all
    return outcome


class Reader:
    """Lines and bodies from a socket (either end's); ``None`` once the other end is gone.
    A timeout is raised as ``TimeoutError``."""

    def __init__(self, sock: "socket") -> None:
        self._sock = sock
        self._buffer = b""

    def line(self) -> bytes | None:
        while b"\n" not in self._buffer:
            if len(self._buffer) > 65536 or not self._fill():
                return None
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    def exactly(self, size: int) -> bytes | None:
        """``size`` bytes: what the buffer holds, then received straight into their place (an
        answer of 90 MB grown a recv at a time took seconds of copying)."""
        if len(self._buffer) >= size:
            data, self._buffer = self._buffer[:size], self._buffer[size:]
            return data
        body = bytearray(size)
        have = len(self._buffer)
        body[:have], self._buffer = self._buffer, b""
        view = memoryview(body)
        while have < size:
            try:
                got = self._sock.recv_into(view[have:])
            except TimeoutError:
                raise
            except OSError:  # the other end is gone
                return None
            if not got:
                return None
            have += got
        return bytes(body)

    def _fill(self) -> bool:
        try:
            data = self._sock.recv(65536)
        except TimeoutError:
            raise
        except OSError:  # the other end is gone
            return False
        self._buffer += data
        return bool(data)


class Link:
    """A connection to a helper, checked to be of this user, and a handle on its process."""

    def __init__(self, program: str, sock: "socket", pid: int) -> None:
        self.program = program
        """The program whose helper it is (``resource-gpu``), for messages."""
        self.sock = sock
        self.pid = pid
        """The helper's; once it has taken a call, the pid of the process running it."""
        self.reader = Reader(sock)
        self._pidfd = _pidfd(pid)  # now, while the helper surely is that pid
        self._helper = True
        """Whether ``pid`` is still the helper's own (not a call's process)."""

    @classmethod
    def connect(cls, program: str, name: str) -> "Link | None":
        """The helper listening on socket ``name`` of this user's runtime directory of
        ``program`` (``resource-gpu``)."""
        try:
            directory, _ = rundir.open_private(program, create=False)
        except OSError:
            return None
        import _socket

        sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
        try:
            sock.settimeout(CONNECT_TIMEOUT)
            sock.connect(rundir.via(directory, name))
            pid, uid = rundir.peer(sock)
            if uid != posix.getuid():
                raise PermissionError(f"the socket is served by uid {uid}")
        except OSError:
            sock.close()
            return None
        finally:
            posix.close(directory)
        return cls(program, sock, pid)

    def close(self) -> None:
        self.sock.close()
        if self._pidfd is not None:
            posix.close(self._pidfd)
            self._pidfd = None

    def call(self, verb: str, request: bytes) -> Outcome:
        """Send the call (``request``, as :func:`call_request` makes it); relay its answer."""
        sent: tuple[str, int] | None = None
        node = ""
        sock = self.sock
        try:
            sock.settimeout(SILENCE)
            sock.sendall(request)
            taken = self.reader.line()
            if taken is None or not taken.startswith(b"A "):
                return Outcome(None)  # gone, or "F": it will not serve this call
            self._run_by(int(taken[2:]))
            while True:
                frame = self.reader.line()  # within SILENCE: a live call beats more often
                if frame is None:
                    return Outcome(None, sent)  # the call is gone: run, or resume, here
                kind, *fields = frame.split(b" ")
                if kind == b"K":
                    continue
                if kind == b"P":
                    sent = (fields[1].decode(), int(fields[0]))  # from now it may write
                    node = bytes.fromhex(fields[2].decode()).decode(errors="replace")
                    sock.sendall(b"G\n")
                elif kind == b"R":
                    return self._relay(fields) or Outcome(None, sent)
                else:
                    return Outcome(None, sent)
        except TimeoutError:
            return self._stuck(verb, node, sent)
        except (OSError, ValueError, IndexError):
            return Outcome(None, sent)

    def _run_by(self, pid: int) -> None:
        """From now on the call's own process is the one to kill, should it fall silent: the
        helper goes on serving others. (It is the helper's word, and the helper is ours.)"""
        pidfd = _pidfd(pid)
        if pidfd is not None:
            if self._pidfd is not None:
                posix.close(self._pidfd)
            self.pid, self._pidfd, self._helper = pid, pidfd, False

    def _relay(self, fields: list[bytes]) -> Outcome | None:
        status, out_size, err_size = (int(field) for field in fields)
        out, err = self.reader.exactly(out_size), self.reader.exactly(err_size)
        if out is None or err is None:
            return None
        sys.stdout.buffer.write(out)
        sys.stdout.flush()
        sys.stderr.buffer.write(err)
        sys.stderr.flush()
        return Outcome(status)

    def _stuck(self, verb: str, node: str, sent: tuple[str, int] | None) -> Outcome:
        """The helper, or the call's process, fell silent: kill it (a helper is replaced by the
        next call). A write it may have sent is resumed here only once it is gone for sure."""
        if self.kill() or sent is None:
            return Outcome(None, sent)
        shown = node if node.isprintable() else ascii(node)
        sys.stderr.write(
            f"{self.program} {verb}: node {shown}: outcome unknown: write {sent[0]} was sent "
            f"but its answer was lost: the resident helper's call (pid {self.pid}) stopped "
            "answering and could not be stopped\n"
        )
        return Outcome(1)

    def kill(self) -> bool:
        """Kill the helper, with every process of its group, or the call's process alone;
        True once it is gone (ours: we may). The helper's call processes go with it: they
        wait on its socket themselves, and stopped with it they would hold the socket open
        and every call would wait on them."""
        if self._pidfd is None:
            return False
        import signal

        try:
            signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        except ProcessLookupError:
            return True
        except OSError:
            return False
        if self._helper:
            # A helper leads its own group (``start``: a session of its own). Its number
            # names no other group while any process of its group lives, and it was the
            # helper's a moment ago (the pidfd said so): no other group can be hit.
            try:  # noqa: SIM105 (the client loads no contextlib)
                posix.killpg(self.pid, signal.SIGKILL)
            except OSError:  # none left, or a helper that leads no group (run by hand)
                pass
        return self.gone(STOP_WAIT)

    def gone(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds for the helper to exit; whether it has."""
        if self._pidfd is None:
            return False
        import select

        poller = select.poll()
        poller.register(self._pidfd, select.POLLIN)
        return bool(poller.poll(int(timeout * 1000)))


def _pidfd(pid: int) -> int | None:
    try:
        return posix.pidfd_open(pid)
    except (AttributeError, OSError):
        return None


def start_if_wanted(program: "Program", config: str | None) -> None:
    """After a call that worked here: start a helper if the config wants one. Never fails:
    the call has answered. A call that failed starts none, so a broken config, a wrong
    endpoint or an etcd away leaves no helper behind to idle out."""
    if turned_off(program):
        return
    path = config_file(program, config)
    if path is None:
        return
    try:
        from resource_extend.ledger.host import config as config_files

        wanted = config_files.load(path).resident
    except Exception:
        return
    if wanted:
        start(program, path)


def start(program: "Program", config_path: str) -> None:
    """Start the helper for this config, detached: its own session, ``/dev/null`` for stdio,
    none of this process's descriptors, ``/`` as working directory. If one is starting or
    running already, it gives way. Its Python is isolated, as a launcher's (``PYTHONPATH``, the
    user's site directory and the working directory cannot change the code it runs), and takes
    this installation's package by its path: the helper runs the code its caller ran."""
    try:
        directory, _ = rundir.open_private(program.name, create=True)
    except OSError:
        return
    posix.close(directory)
    import contextlib
    import subprocess

    code = taken_from(package_dir()) + HELPER_ENTRY
    with contextlib.suppress(OSError):
        subprocess.Popen(
            [sys.executable, "-I", "-c", code, program.origin, config_path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            start_new_session=True,
            cwd="/",
        )
