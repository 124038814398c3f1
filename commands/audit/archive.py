"""``archive``: move old events out of etcd into the one archive directory, and the
``--archive`` option the auditor commands read it with."""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
import msgspec
from msgspec import Struct

from resource_extend.commands.protocol import Answer, Session, report_failure, respond
from resource_extend.commands.under_click import answered, with_progress
from resource_extend.ledger.host.config import Destination
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.store import Store
from resource_extend.ledger.upkeep.bounds import Bound, bound_for
from resource_extend.ledger.upkeep.compaction import compact
from resource_extend.ledger.upkeep.export import DIRECTORY_MODE, unsafe_directory

F = TypeVar("F", bound=Callable[..., Any])


def archive_option(command: F) -> F:
    """``--archive DIR``: where ``archive:<file>`` exports are read from."""
    return click.option(
        "--archive",
        "archive",
        type=click.Path(file_okay=False, resolve_path=True),
        help="The archive: one directory of compacted events (default: streams.archive_dir).",
    )(command)


def archive_dir(session: Session[Struct], given: str | None) -> str:
    """``--archive``, else the config's ``streams.archive_dir`` (empty: none)."""
    return given or session.config.streams.archive_dir


class Pass(msgspec.Struct):
    """What one archiving pass did."""

    nodes: int = 0
    compacted: int = 0
    events: int = 0
    """Events moved from etcd into the archive."""
    left: int = 0
    """Events the streams hold after the pass, checkpoints included."""
    failed: list[tuple[str, str]] = msgspec.field(default_factory=list)
    """``(node, why)`` of each stream that could not be compacted."""


def archive_pass(
    session: Session[Struct],
    directory: str,
    min_age: float,
    stopping: threading.Event | None = None,
    *,
    shown: bool = False,
) -> Pass:
    """Compact every stream longer than half its bound into ``directory``, longest first, each
    etcd request with etcd.timeout of its own. ``stopping`` ends the pass between two
    compactions; ``shown``: under a progress bar, on a terminal (``with_progress``)."""
    store, streams = session.store, session.config.streams
    store.etcd.budget_per_request()  # a pass over many nodes takes longer than one call may
    known, heads = store.scans.survey()
    lengths = store.scans.stream_bounds(name for name, keys in known.items() if keys.stream)
    target = bound_for(streams, len(heads))
    done = Pass(nodes=len(known), left=sum(b.count for b in lengths.values()))
    if target is None:
        return done
    target = target.halved()
    due = sorted(
        ((node, bounds) for node, bounds in lengths.items() if bounds.count > target.over),
        key=lambda item: (-item[1].count, item[0]),
    )
    with with_progress(due, "archiving") if shown else contextlib.nullcontext(due) as walked:
        for node, _ in walked:
            if stopping is not None and stopping.is_set():
                break
            _archive_one(store, node, target, directory, min_age, done)
    return done


def _archive_one(
    store: Store[Struct], node: str, target: Bound, directory: str, min_age: float, done: Pass
) -> None:
    """Compact one stream into the archive, counting it in ``done``."""
    try:
        compacted = compact(
            store,
            node,
            keep=target.keep - 1,
            to=Destination(directory, archive=True),
            min_age=min_age,
            at_least=target.at_least,
            verb="archive",
        )
    except PluginError as exc:
        done.failed.append((node, exc.reason))
        return
    if compacted is not None:
        removed = compacted.checkpoint.seq - compacted.first  # the checkpoint stays
        done.compacted += 1
        done.events += removed
        done.left -= removed


def _checked_directory(directory: str) -> str:
    """The archive directory, created (mode 0750) if missing; refused if others may write
    to it, or to a directory above it (``ledger.upkeep.export.unsafe_directory``, which every
    compaction applies too), for the audit trail would then be theirs to change."""
    try:
        os.makedirs(directory, mode=DIRECTORY_MODE, exist_ok=True)
        mode = os.stat(directory).st_mode
    except OSError as exc:
        raise PluginError(f"cannot use the archive {directory!r}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(mode):
        raise PluginError(f"the archive {directory!r} is not a directory")
    if mode & stat.S_IWOTH:
        raise PluginError(
            f"the archive {directory!r} is writable by every user: anyone could change the "
            f"audit trail (chmod o-w {directory})"
        )
    if unsafe := unsafe_directory(Path(directory).resolve()):
        raise PluginError(
            f"cannot use the archive {directory!r}: {unsafe}: another user could change the "
            "audit trail"
        )
    return directory


@click.command(
    "archive",
    short_help="Move old events out of etcd into one archive directory, a stream at a time.",
)
@archive_option
@click.option(
    "--every",
    type=click.FloatRange(min=1),
    metavar="SECONDS",
    help="Keep running: a pass every SECONDS, until stopped (SIGTERM or SIGINT).",
)
@click.option(
    "--min-age",
    type=click.FloatRange(min=0),
    metavar="SECONDS",
    help="Leave events younger than this many seconds (default: streams.min_age, 300).",
)
@answered
def archive(
    session: Session[Struct], archive: str | None, every: float | None, min_age: float | None
) -> Answer:
    """Move old events out of etcd into one archive directory, keeping every stream at half
    its bound (streams.budget over the node count, at most streams.max_events), so core's own
    calls never have to compact.

    \b
    Run it on one host, by a timer or as a service:
      {prog} archive --archive /var/lib/eru/archive            # one pass
      {prog} archive --archive /var/lib/eru/archive --every 60 # a pass a minute
    Each pass prints one line: the nodes, the streams compacted, the events archived and the
    events left in etcd. A node that cannot be compacted (say the directory is full) is named
    on stderr and keeps its events; the exit status is then 1.

    Every event removed from etcd is first written, whole, to one file in the archive, named
    by the checkpoint that replaces it (archive:<file>): history, show --at and verify read
    the node's whole life from it with --archive. Copy the directory anywhere; the names
    stay valid. Core's calls compact too when a stream passes its bound (the archiver is
    down or behind): into streams.archive_dir if that host has it, else streams.export_dir.
    """
    stopping = threading.Event()
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, lambda *_: stopping.set())
    given = archive_dir(session, archive)
    if not given:
        raise PluginError("no archive directory: pass --archive DIR or set streams.archive_dir")
    directory = _checked_directory(given)
    age = session.config.streams.min_age if min_age is None else min_age
    while True:
        try:
            done = archive_pass(session, directory, age, stopping, shown=every is None)
        except PluginError as exc:
            if every is None:
                raise
            report_failure(session.plugin.name, "archive", exc.node, exc.reason, session.io)
            done = None
        finally:
            session.close()  # each pass has etcd.timeout to itself
        if done is not None:
            line = (
                f"{done.nodes} nodes: {done.compacted} streams compacted, {done.events} "
                f"events archived into {directory}; {done.left} events left in etcd"
            )
            if every is None and not done.failed:
                return line
            respond(line, text=True, io=session.io)  # the pass's summary; then each failure
            for node, why in done.failed:
                report_failure(session.plugin.name, "archive", node, why, session.io)
            if every is None:  # one pass: it failed
                raise PluginError(f"{len(done.failed)} of {done.compacted + len(done.failed)} "
                                  "streams due not archived: each node is named above")  # fmt: skip
        if stopping.wait(every or 0):
            return f"stopped: {directory} holds every event archived"
