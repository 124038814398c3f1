"""A node's history as auditors ask for it (``history``): the events between two points, of
some kinds, the newest N of them, each with the state after it. Read from the stream by
position, and, where the selection reaches back past the stream's checkpoint, from the archive
of exports behind it (``ledger.upkeep.chain``), read back only as far as the selection needs.
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import msgspec

from resource_extend.ledger.model import audit
from resource_extend.ledger.model.contract import Kind
from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.model.events import AnyEvent as Event
from resource_extend.ledger.model.events import Checkpoint
from resource_extend.ledger.store.streams import EVENT_PAGE
from resource_extend.ledger.upkeep.chain import exports_back_to

if TYPE_CHECKING:
    from resource_extend.ledger.store.positions import Positions

Row = tuple[Event, Any]
"""An event and the node's state after it (``None``: no node)."""


class Selection(msgspec.Struct, frozen=True):
    """What an auditor selects: from ``since`` to ``until`` (seqs or times, both included),
    events of ``kinds`` only (none: every kind), the newest ``limit`` of them."""

    since: audit.Point | None = None
    until: audit.Point | None = None
    kinds: tuple[str, ...] = ()
    limit: int | None = None

    def wants(self, event: Event) -> bool:
        return within(event, self.since, self.until) and (
            not self.kinds or event.kind in self.kinds
        )

    def newest(self, rows: Iterable[Row]) -> list[Row]:
        return list(collections.deque(rows, maxlen=self.limit))


class Archive(msgspec.Struct, frozen=True):
    """Where the exports behind a compacted stream are (``None``: nowhere known), and whether
    the auditor named it (then it must hold what is asked of it; else a failure to read it
    falls back to the stream, which says what was compacted away)."""

    directory: str | None
    named: bool = False


def selected(
    kind: Kind[Any], positions: Positions[Any], first: Event, select: Selection, archive: Archive
) -> list[Row]:
    """The rows ``select`` picks from the stream whose first event is ``first``, oldest first."""
    low, high = window(positions, select.since, select.until)
    if select.limit is not None:
        if select.kinds:
            low = newest(positions, low, high, select.kinds, select.limit)
        else:
            low = max(low, high - select.limit + 1)
    if archive.directory and reaches_archive(first, low):
        # The oldest seq wanted, when the seqs say (the newest N of every kind, up to a seq).
        reach = None
        if select.limit is not None and not select.kinds and not isinstance(select.until, datetime):
            reach = high - select.limit + 1
        try:
            return archived_rows(kind, positions, first, archive.directory, select, high, reach)
        except PluginError:
            if archive.named:
                raise
    if select.until is not None and isinstance(first.change, Checkpoint) and high < first.seq:
        raise PluginError(
            f"nothing left up to {audit.shown_point(select.until)}: {audit.compacted_note(first)}"
        )
    return [
        (event, state)
        for event, state in positions.rows(low - 1, high)
        if not select.kinds or event.kind in select.kinds
    ]


def within(event: Event, since: audit.Point | None, until: audit.Point | None) -> bool:
    """Whether ``event`` is from ``since`` on and up to ``until`` (a seq, or a time it was
    written at)."""

    def key(point: audit.Point) -> Any:
        return event.seq if isinstance(point, int) else audit.written_at(event)

    return (since is None or key(since) >= since) and (until is None or key(until) <= until)


def reaches_archive(first: Event, seq: int) -> bool:
    """Whether a read that goes back to ``seq`` needs the archive: the stream starts with a
    checkpoint at or after it."""
    return isinstance(first.change, Checkpoint) and seq <= first.seq


def window(
    positions: Positions[Any], since: audit.Point | None, until: audit.Point | None
) -> tuple[int, int]:
    """The seqs ``since`` .. ``until`` select in the stream (empty when the first is past the
    last), found by position: a time is bisected for (``Positions.seq_at``)."""
    low, high = positions.first, positions.last
    if isinstance(since, int):
        low = max(low, since)
    elif since is not None:
        before = positions.seq_at(since - timedelta(microseconds=1))
        low = low if before is None else before + 1
    if isinstance(until, int):
        high = min(high, until)
    elif until is not None:
        found = positions.seq_at(until)
        high = low - 1 if found is None else found
    return low, high


def newest(
    positions: Positions[Any], low: int, high: int, kinds: tuple[str, ...], limit: int
) -> int:
    """The first seq of the newest ``limit`` events of ``kinds`` in ``low`` .. ``high``, read
    backwards a page at a time, keeping only their seqs."""
    found: list[int] = []  # newest first: each page is older than the one before
    page_end = high
    while page_end >= low and len(found) < limit:
        page_start = max(low, page_end - EVENT_PAGE + 1)
        page = [e.seq for e in positions.events(page_start - 1, page_end) if e.kind in kinds]
        found += reversed(page)
        page_end = page_start - 1
    return found[limit - 1] if len(found) >= limit else low


def archived_rows(
    kind: Kind[Any],
    positions: Positions[Any],
    checkpoint: Event,
    exports: str,
    select: Selection,
    high: int,
    reach: int | None,
) -> list[Row]:
    """The rows when they reach back past the stream's ``checkpoint``: the archive's exports,
    read back only as far as ``since`` (or ``reach``, the oldest seq wanted when the seqs say)
    needs (``chain.exports_back_to``), then the stream after the checkpoint, a page at a time."""

    since, until = select.since, select.until

    def far_enough(first: Event) -> bool:
        if reach is not None and first.seq < reach:
            return True
        if since is None:
            return False
        return first.seq < since if isinstance(since, int) else audit.written_at(first) < since

    def too_late(first: Event) -> bool:
        """The file starting with ``first`` holds nothing up to ``until``."""
        if until is None:
            return False
        return first.seq > until if isinstance(until, int) else audit.written_at(first) > until

    files = exports_back_to(kind, checkpoint, exports, far_enough, too_late)
    archived = (
        (event, state)
        for events in files
        for index, (event, state) in enumerate(zip(events, audit.states(kind, events), strict=True))
        if index or not isinstance(event.change, Checkpoint)  # stands for the file before
    )
    life = itertools.chain(archived, positions.rows(checkpoint.seq, high))
    return select.newest(event_state for event_state in life if select.wants(event_state[0]))
