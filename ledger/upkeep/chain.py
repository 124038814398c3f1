"""The chain of exports behind a compacted stream, read back to event 1.

A compacted stream starts with a checkpoint naming the export of the events it replaced; that
export starts with event 1 or with the previous checkpoint, which names the export before it.
:func:`walk` follows the chain, checking each file against the checkpoint that names it
(``audit.check_export``); :func:`exports_back_to` reads the files as far back as ``history``
needs them, and :func:`state_in_archive` folds only the one that holds the point ``show --at``
asks for.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import msgspec

from resource_extend.ledger.model import audit
from resource_extend.ledger.model.contract import Kind
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.model.events import AnyEvent as Event
from resource_extend.ledger.model.events import Checkpoint
from resource_extend.ledger.upkeep import export


class Link(msgspec.Struct, frozen=True):
    """One export in the chain: the checkpoint naming it, and what was found of it."""

    checkpoint: Event
    found: export.Found
    checked: audit.ExportCheck | None = None
    """None when the file could not be read here (``found.state`` says why)."""

    @property
    def what(self) -> str:
        assert isinstance(self.checkpoint.change, Checkpoint)
        return f"export of checkpoint {self.checkpoint.seq} ({self.checkpoint.change.export})"


def walk(kind: Kind[Any], checkpoint: Event, archive_dir: str = "") -> Iterator[Link]:
    """The exports from ``checkpoint``'s back towards event 1, newest first, as far as they
    can be read and check out (the last link yielded is the one that did not, if any)."""
    current: Event | None = checkpoint
    while current is not None:
        assert isinstance(current.change, Checkpoint)
        found = export.read(current.change.export, archive_dir)
        if found.state not in ("published", "unpublished"):
            yield Link(current, found)
            return
        checked = audit.check_export(kind, current, found.path.name, found.lines, found.digest)
        yield Link(current, found, checked)
        current = checked.previous


def exports_back_to(
    kind: Kind[Any],
    checkpoint: Event,
    archive_dir: str,
    far_enough: Callable[[Event], bool],
    too_late: Callable[[Event], bool] = lambda first: False,
) -> list[list[Event]]:
    """The events of the exports behind ``checkpoint`` (a stream's first), oldest first, back
    to the first whose own first event is ``far_enough`` (or to event 1), leaving out (read
    and checked, then let go) those whose first event is ``too_late``: so memory holds the
    files wanted and one more. Each file starts with event 1 or the checkpoint that stands for
    the file before it. An export that cannot be read or does not check out is an error that
    names it."""
    files: list[list[Event]] = []
    for link in walk(kind, checkpoint, archive_dir):
        if link.checked is None or link.checked.problems:
            raise PluginError(f"{link.what} {_why(link)}")
        first = link.checked.events[0]
        if not too_late(first):
            files.append(link.checked.events)
        if far_enough(first):
            break
    return files[::-1]


def state_in_archive(
    kind: Kind[Any], checkpoint: Event, archive_dir: str, point: audit.Point
) -> tuple[Event, Any]:
    """The event at ``point`` (before ``checkpoint``, a stream's first) and the state after
    it, from the export that holds it: the exports are walked back from the newest, one in
    memory at a time, and only that one is folded (from the checkpoint it starts with). An
    export that cannot be read or does not check out is an error that names it."""
    for link in walk(kind, checkpoint, archive_dir):
        if link.checked is None or link.checked.problems:
            raise PluginError(f"{link.what} {_why(link)}")
        events = link.checked.events
        start = events[0]
        oldest = not isinstance(start.change, Checkpoint)
        if oldest or (
            point >= start.seq if isinstance(point, int) else audit.written_at(start) <= point
        ):
            return audit.state_at(kind, events, point)
    raise AssertionError("a walk ends at an export that does not check out, or at event 1")


def _why(link: Link) -> str:
    found = link.found
    if link.checked is not None:
        return f"does not hold what the checkpoint says: {'; '.join(link.checked.problems)}"
    if found.state == "elsewhere" and found.host == export.ARCHIVE:
        return "is in the archive: pass --archive DIR (or set streams.archive_dir)"
    if found.state == "elsewhere":
        return f"is on host {found.host}: read it there"
    if found.state == "missing":
        return "is missing"
    return f"cannot be read: {found.reason}"
