"""How a core verb runs: one JSON object in on stdin, one JSON value out on stdout.

On success only the answer is printed (older core reads stdout and stderr as one stream). On any
failure one line goes to stderr, ``resource-gpu <verb>: node <node>: <reason>`` (or
``resource-storage ...``), and the exit
status is non-zero; by then nothing has been written, because every write is one transaction
that comes last.
"""

from __future__ import annotations

import errno
import sys
from collections.abc import Callable, Mapping, Sequence
from functools import cached_property
from typing import TYPE_CHECKING, BinaryIO, Generic, NoReturn, Protocol, TypeVar, Union

import msgspec

from resource_extend.commands.program import MAX_REQUEST_BYTES, debugging
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.model.names import MAX_NODE_NAME

if TYPE_CHECKING:
    from resource_extend.commands.program import Plugin
    from resource_extend.ledger.host.config import Config
    from resource_extend.ledger.model.contract import Kind
    from resource_extend.ledger.model.events import Change
    from resource_extend.ledger.store import Reads, Store
    from resource_extend.ledger.store.appender import Resume, WriteHook
    from resource_extend.ledger.store.outcomes import Appended
    from resource_extend.projections.parts import KindView

EXIT_FAILURE = 1
EXIT_INTERNAL = 70
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
"""What a full disk, a quota or ``/dev/full`` says to a write: an ordinary failure."""

R = TypeVar("R")
S = TypeVar("S", bound=msgspec.Struct)
"""A kind's node state (``projections.gpu.node.NodeState``); ``msgspec.Struct`` for a command
written for every kind."""

Answer = Union[  # noqa: UP007 (a runtime alias that refers to itself)
    None, bool, int, float, str, msgspec.Struct, Sequence["Answer"], Mapping[str, "Answer"]
]
"""What a command answers: JSON, as msgspec encodes it, or (for people) a string."""


class Decode(Protocol):
    """A kind's request decoder: raw JSON as a request type (msgspec's errors when it is not)."""

    def __call__(self, raw: bytes, request_type: type[R], /) -> R: ...


def decode_json(raw: bytes, request_type: type[R]) -> R:
    """The plain :data:`Decode`: msgspec's, with nothing of a kind's own."""
    return msgspec.json.decode(raw, type=request_type)


class CallIO(msgspec.Struct):
    """Where a call reads its request and writes its answer and its error line: the process's
    own streams, or (in a call process of the resident helper, ``commands.resident.call_process``)
    one client's."""

    stdin: BinaryIO
    stdout: BinaryIO
    stderr: BinaryIO

    @classmethod
    def standard(cls) -> CallIO:
        return cls(sys.stdin.buffer, sys.stdout.buffer, sys.stderr.buffer)


class Session(Generic[S]):
    """What a verb may need beyond its request: the program it runs in, and the config and
    etcd, opened on first use; ``Session[NodeState]`` for a kind whose nodes hold
    ``NodeState``."""

    def __init__(
        self,
        plugin: Plugin,
        config_path: str | None,
        io: CallIO | None = None,
        *,
        write_hook: WriteHook | None = None,
        resume: Resume | None = None,
        caller: str | None = None,
        config: Config | None = None,
    ) -> None:
        self.plugin = plugin
        self._config_path = config_path
        self._config = config
        """The config at ``config_path``, if the caller has loaded it already (a call
        process of the helper has: it checks the config before it takes a call)."""
        self.io = io or CallIO.standard()
        self._write_hook = write_hook
        self._resume = resume
        self._caller = caller
        """``user@host`` of whoever made the call, for its events (default: this process's)."""
        self.node: str | None = None
        """The node the request is about, once known: named in any error line."""
        self.verb = ""
        """The core verb running (its name is written once, in ``commands.registry``): what
        its append records."""

    @cached_property
    def config(self) -> Config:
        if self._config is not None:
            return self._config
        from resource_extend.ledger.host import config
        from resource_extend.ledger.host.copies import RuntimeCopies

        default = self.plugin.config_file
        return config.load(
            self._config_path, copies=RuntimeCopies(self.plugin.name), default=default
        )

    @property
    def kind(self) -> Kind[S]:
        """What the ledger asks of the resource kind this program serves."""
        return self.plugin.parts.fold

    @property
    def view(self) -> KindView:
        """How the auditor commands print this kind."""
        return self.plugin.parts.view

    @cached_property
    def reads(self) -> Reads[S]:
        """What a query reads etcd through: the store's reading parts alone (the call's store,
        if it has one already)."""
        if "store" in self.__dict__:
            return self.store
        settings = self.config.etcd  # a config error must not cost the etcd client's import
        from resource_extend.ledger.store import Reads

        return Reads(settings, self.kind)

    @cached_property
    def store(self) -> Store[S]:
        """What a write goes through, on the connection the call's reads hold, if any: one
        time budget for the call."""
        settings = self.config.etcd  # a config error must not cost the etcd client's import
        from resource_extend.ledger.store import Store

        reads = self.__dict__.get("reads")
        etcd = reads.etcd if reads is not None else None
        return Store(settings, self.kind, etcd=etcd, write_hook=self._write_hook, by=self._caller)

    def append(self, node: str, decide: Callable[[S | None], Change | None]) -> Appended[S]:
        """``store.append`` of the running verb's change, keeping the stream within its bound
        (``ledger.upkeep.bounds``)."""
        from resource_extend.ledger.upkeep.bounds import append_bounded

        resume, self._resume = self._resume, None  # a call makes one append: it resumes that one
        streams = self.config.streams
        return append_bounded(self.store, streams, node, self.verb, decide, resume=resume)

    def close(self) -> None:
        """Close etcd, if opened; the next use opens it again, with a new time budget."""
        opened = [self.__dict__.pop(name, None) for name in ("reads", "store")]
        for etcd in {id(view.etcd): view.etcd for view in opened if view is not None}.values():
            etcd.close()


def fail(
    program: str,
    verb: str,
    node: str | None,
    reason: str,
    status: int = EXIT_FAILURE,
    io: CallIO | None = None,
) -> NoReturn:
    report_failure(program, verb, node, reason, io)
    raise SystemExit(status)


def report_failure(
    program: str, verb: str, node: str | None, reason: str, io: CallIO | None = None
) -> None:
    """The one stderr line of a failure, ``<program> <verb>: node <node>: <reason>``: a failed
    call's, or one a long-running command writes and goes on."""
    where = f"node {shown_node(node)}: " if node else ""
    line = " ".join(f"{program} {verb}: {where}{reason}".splitlines())
    stderr = (io or CallIO.standard()).stderr
    stderr.write(line.encode(errors="backslashreplace") + b"\n")
    stderr.flush()


SHOWN_OF_A_LONG_NAME = 64
"""How much of a node name longer than any valid one a failure shows."""


def shown_node(node: str | None) -> str | None:
    """A node name as a failure shows it: whole when it could be valid; longer, its first
    characters and its length (a 100,000-character name is not a log line); escaped when not
    printable, so that no control character reaches a log."""
    if node is not None and len(node) > MAX_NODE_NAME:
        return f"{shown_node(node[:SHOWN_OF_A_LONG_NAME])}… ({len(node)} characters)"
    return node if node is None or node.isprintable() else ascii(node)


def read_request(decode: Decode, request_type: type[R], io: CallIO | None = None) -> R:
    raw = (io or CallIO.standard()).stdin.read(MAX_REQUEST_BYTES + 1)
    if len(raw) > MAX_REQUEST_BYTES:
        raise PluginError(f"request is larger than {MAX_REQUEST_BYTES} bytes")
    if not raw.strip():
        raise PluginError("the request is empty: pipe one JSON object on stdin")
    try:
        request: R = decode(raw, request_type)
    except msgspec.ValidationError as exc:
        raise PluginError(f"invalid request: {exc}", node=_node_named_in(raw)) from None
    except msgspec.DecodeError as exc:
        raise PluginError(f"request is not valid JSON: {exc}") from None
    except RecursionError:  # msgspec descends into every value, even ignored ones
        raise PluginError("request is nested too deeply") from None
    return request


class _Named(msgspec.Struct):
    nodename: object = None


def _node_named_in(raw: bytes) -> str | None:
    """The node a malformed request is about, if it says so, to name it in the error."""
    try:
        node = msgspec.json.decode(raw, type=_Named).nodename
    except (msgspec.MsgspecError, RecursionError):
        return None
    return _named(node)


def _named(node: object) -> str | None:
    """A node name worth putting in an error line (not blank, whatever else is wrong)."""
    return node if isinstance(node, str) and node.strip() else None


_CORE_ANSWERS = msgspec.json.Encoder(order="deterministic")
"""A core verb's answer as Go writes it: every map's keys sorted (upstream answers with Go
maps), a struct's fields in their declared order."""


def respond(
    answer: Answer, *, text: bool = False, io: CallIO | None = None, core: bool = False
) -> None:
    """Print the answer: JSON (``core``: as a Go plugin writes it), or (``text``) a string as
    it is, for people."""
    if text and isinstance(answer, str):
        body = answer.encode()
    else:
        body = _CORE_ANSWERS.encode(answer) if core else msgspec.json.encode(answer)
    stdout = (io or CallIO.standard()).stdout
    stdout.write(body + b"\n")
    stdout.flush()


def run(
    verb: str,
    handler: Callable[[Session[msgspec.Struct]], Answer],
    session: Session[msgspec.Struct],
    *,
    text: bool | None = False,
    core: bool = False,
) -> None:
    """Run one verb: every failure becomes one stderr line and a non-zero exit (SystemExit).
    The answer is printed as JSON (``core``: a core verb's, as Go writes it), or (``text``) as
    the string it is; ``text=None``: a string as it is, anything else as JSON."""
    io, program = session.io, session.plugin.name
    try:
        answer = handler(session)
        as_text = isinstance(answer, str) if text is None else text
        respond(answer, text=as_text, io=io, core=core)
    except PluginError as exc:
        fail(program, verb, exc.node or session.node, exc.reason, io=io)
    except Exception as exc:  # a bug: still one line for core, the traceback only on request
        if isinstance(exc, OSError) and (said := output_failure(exc, io.stdout)) is not None:
            if not said:  # whoever read the output has gone: nobody to tell
                raise SystemExit(EXIT_FAILURE) from None
            fail(program, verb, session.node, said, io=io)
        if debugging(session.plugin) or _usage_error(exc):
            raise
        reason = f"internal error: {type(exc).__name__}: {exc}"
        fail(program, verb, session.node, reason, EXIT_INTERNAL, io=io)
    finally:
        session.close()


def output_failure(exc: OSError, stdout: BinaryIO) -> str | None:
    """What to say of a write that failed for want of room or of a reader: the reason (the
    disk is full: one line, exit 1, an ordinary failure), ``""`` when ``stdout``'s reader has
    gone (``… | head``: nothing to say, and nobody to say it to), or None for anything else,
    which is not the output's doing."""
    if exc.errno in NO_ROOM:
        return f"cannot write {exc.filename or 'its output'}: {exc.strerror}"
    if isinstance(exc, BrokenPipeError) and _reader_gone(stdout):
        return ""
    return None


def _reader_gone(stdout: BinaryIO) -> bool:
    """Whether ``stdout`` is a pipe nobody reads any more (poll says so of its write end): a
    broken pipe to etcd is not the output's."""
    import select

    try:
        poller = select.poll()
        poller.register(stdout.fileno(), 0)
        return any(events & select.POLLERR for _, events in poller.poll(0))
    except (OSError, ValueError, AttributeError):  # no descriptor: a test's buffer, say
        return False


def _usage_error(exc: Exception) -> bool:
    """A usage error of the click CLI (an option that contradicts another): click says it."""
    click = sys.modules.get("click")
    return click is not None and isinstance(exc, click.UsageError)


class Verb(msgspec.Struct, frozen=True):
    """A core verb: ``handler(request, session)`` (or ``handler(session)`` without a request).

    Calling it runs it (``commands.main`` does, for core); ``commands.under_click.verb_command``
    makes it a click command, for ``--help`` and the CLI.
    """

    name: str
    handler: Callable[..., Answer]
    request_type: type[msgspec.Struct] | None
    decode: Decode
    """How its kind reads a request (``commands.gpu.requests.decode``)."""
    epilog: str | None
    """The help's word on its kind's requests (``commands.gpu.verbs.REQUEST_EPILOG``)."""

    def named(self, name: str) -> Verb:
        """This verb under ``name``, the one ``commands.registry`` gives it."""
        return msgspec.structs.replace(self, name=name)

    def __call__(self, session: Session[msgspec.Struct]) -> None:
        session.verb = self.name
        run(self.name, self._call, session, core=True)

    def _call(self, session: Session[msgspec.Struct]) -> Answer:
        if self.request_type is None:
            return self.handler(session)
        request = read_request(self.decode, self.request_type, session.io)
        session.node = _named(getattr(request, "nodename", None))
        return self.handler(request, session)


def verb(
    request_type: type[msgspec.Struct] | None = None,
    *,
    decode: Decode = decode_json,
    epilog: str | None = None,
) -> Callable[[Callable[..., Answer]], Verb]:
    """Make a core verb from ``handler(request, session)`` (or ``handler(session)``).

    The handler's docstring is the command's help; the request is read from stdin and read
    with ``decode``. Its name is the one ``commands.registry`` lists it under, given when it
    is loaded (:meth:`Verb.named`). Each kind's package wraps this with its own
    (``commands.gpu.verbs.verb``).
    """

    def decorate(handler: Callable[..., Answer]) -> Verb:
        return Verb("", handler, request_type, decode, epilog)

    return decorate
