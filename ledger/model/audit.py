"""What auditors ask of a stream of any resource kind, answered without etcd: its fold, the
state at a point, whether the head agrees with the fold, the checkpoint that may stand in for a
stream's older events, which events are too young to compact, and whether an export holds what
its checkpoint stands for.

A stream starts either at event 1 or at a checkpoint that replaced events ``first`` .. its seq
(compaction); everything after that is one event per seq, with no gaps. The checkpoint's export
holds the events it replaced, starting with event 1 or with the checkpoint before it, whose own
export holds the events before that: a chain back to event 1.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from itertools import pairwise
from typing import Any, TypeVar

import msgspec

from resource_extend.ledger.model.contract import Kind
from resource_extend.ledger.model.digests import first_break, named_by_next
from resource_extend.ledger.model.errors import InvalidRequest, PluginError
from resource_extend.ledger.model.events import AnyEvent, Checkpoint, HeadRepaired

S = TypeVar("S", bound=msgspec.Struct)
Event = AnyEvent


class BrokenStream(ValueError):
    """An event that cannot follow the state before it (a corrupt or foreign stream)."""


def apply(kind: Kind[S], state: S | None, change: Any) -> S | None:
    """The state after one change: the ledger's own carry a whole state; the kind applies
    its own."""
    if isinstance(change, (Checkpoint, HeadRepaired)):
        restored: S | None = change.state
        return restored
    return kind.apply(state, change)


def fold(kind: Kind[S], events: Iterable[AnyEvent], state: S | None = None) -> S | None:
    for event in events:
        state = apply(kind, state, event.change)
    return state


Point = int | datetime
"""A place in a stream: a seq, or a time (the state then is the one after the last event
written at or before it)."""


def parse_point(text: str, option: str = "") -> Point:
    """A seq (``42``) or an RFC 3339 time (``2026-11-29T03:00:00Z``, any offset; no offset
    means UTC). A leap second (``23:59:60``) is the instant after ``23:59:59.999999``."""
    if text.isascii() and text.isdigit():
        return int(text)
    upper = text.upper()  # RFC 3339 allows "t" and "z" too
    leap = len(upper) > 19 and upper[16:19] == ":60"
    try:
        at = datetime.fromisoformat(upper[:17] + "59" + upper[19:] if leap else upper)
        if leap:
            at = at.replace(microsecond=0) + timedelta(seconds=1)
    except ValueError:
        named = f"{option} {text!r}" if option else repr(text)
        raise InvalidRequest(
            f"{named} is neither a seq nor an RFC 3339 time (e.g. 2026-11-29T03:00:00Z)"
        ) from None
    return at if at.tzinfo else at.replace(tzinfo=timezone.utc)


def shown_point(point: Point) -> str:
    """A point as people write it: a seq, or an RFC 3339 time."""
    return str(point) if isinstance(point, int) else rfc3339(point)


def rfc3339(at: datetime) -> str:
    """``2026-11-29T03:00:00.123456Z``: how times are shown to people, at the precision they
    are stored (microseconds when there are any), so that a time shown and given back to
    ``--at`` or ``--until`` selects exactly the event it was shown for."""
    utc = at.astimezone(timezone.utc)
    return utc.isoformat(timespec="microseconds" if utc.microsecond else "seconds").replace(
        "+00:00", "Z"
    )


def written_at(event: Event) -> datetime:
    """When the state after ``event`` came to be: for a checkpoint, the time of the last event
    it replaced (it was itself written later, when the stream was compacted)."""
    return event.change.last_at if isinstance(event.change, Checkpoint) else event.at


def states(kind: Kind[S], events: list[Event]) -> list[S | None]:
    """The state after each event, in step with ``events``."""
    after: list[S | None] = []
    state: S | None = None
    for event in events:
        try:
            state = apply(kind, state, event.change)
        except BrokenStream as exc:
            raise PluginError(f"the stream is broken at seq {event.seq}: {exc}") from None
        after.append(state)
    return after


def compacted_note(checkpoint: Event, wanted: int | None = None) -> str:
    """Where the events a checkpoint replaced went (``wanted``: the one seq asked for)."""
    assert isinstance(checkpoint.change, Checkpoint)
    change = checkpoint.change
    said = (
        f"events {change.first}..{checkpoint.seq} were compacted into a checkpoint at "
        f"{rfc3339(checkpoint.at)}; "
    )
    if change.since is None or change.since == change.first:
        return f"{said}they are in the export {change.export}"
    if wanted is not None and wanted < change.since:
        return (
            f"{said}seq {wanted} is in an earlier export: the one named by the checkpoint (seq "
            f"{change.since}) that {change.export} starts with"
        )
    return (
        f"{said}the export {change.export} holds events {change.since}..{checkpoint.seq} "
        f"(it starts with the checkpoint naming the export of those before)"
    )


def state_at(kind: Kind[S], events: list[Event], point: Point) -> tuple[Event, S | None]:
    """The event at ``point`` and the state after it, from a stream (or life) in memory."""
    if not events:
        raise PluginError("the node has no events")
    after = states(kind, events)
    first = events[0]
    if isinstance(point, int):
        if point > events[-1].seq:
            raise PluginError(f"seq {point} is past the end of the stream (seq {events[-1].seq})")
        if point < first.seq:
            raise before_first(first, point)
        index = next((i for i, e in enumerate(events) if e.seq == point), None)
        if index is None:
            raise PluginError(f"event {point} is missing from the stream")
        return events[index], after[index]
    reached = [i for i, e in enumerate(events) if written_at(e) <= point]
    if not reached:
        raise before_first(first, point)
    return events[reached[-1]], after[reached[-1]]


def before_first(first: Event, point: Point) -> PluginError:
    """The error for a point before a stream's first event (``first``): compacted away, or
    before the node's first event."""
    checkpoint = first if isinstance(first.change, Checkpoint) else None
    if isinstance(point, int):
        if checkpoint is None:
            return InvalidRequest(f"seq {point} is before the stream's first event (seq 1)")
        return PluginError(f"seq {point} is gone: {compacted_note(checkpoint, point)}")
    when = rfc3339(point)
    if checkpoint is not None:
        return PluginError(f"{when} is before the oldest kept state: {compacted_note(checkpoint)}")
    return PluginError(
        f"the node had no events yet at {when} (the first is at {rfc3339(first.at)})"
    )


def stream_gaps(events: list[Event]) -> list[str]:
    """What is missing from a stream: it must start at 1 or at a checkpoint, and have no gaps."""
    problems = start_problems(events[0]) if events else []
    for before, after in pairwise(events):
        problems += order_problems(before, after)
    return problems


def start_problems(first: Event) -> list[str]:
    """What is wrong with ``first`` as a stream's first event (it is event 1, or a checkpoint)."""
    if first.seq != 1 and not isinstance(first.change, Checkpoint):
        return [f"events 1..{first.seq - 1} are missing (and no checkpoint)"]
    return []


def order_problems(before: Event, after: Event) -> list[str]:
    """What is wrong with ``after`` following ``before`` in a stream: a seq out of order, missing
    seqs between them, or a checkpoint (which only ever starts a stream)."""
    problems = []
    if after.seq <= before.seq:
        problems.append(f"seq {after.seq} follows seq {before.seq}")
    elif after.seq != before.seq + 1:
        problems.append(f"events {before.seq + 1}..{after.seq - 1} are missing")
    if isinstance(after.change, Checkpoint):
        problems.append(f"a checkpoint in the middle of the stream, at seq {after.seq}")
    return problems


def checkpoint_for(kind: Kind[S], events: list[Event], export: str) -> Checkpoint[S]:
    """The checkpoint that replaces ``events`` (a whole prefix of a stream)."""
    problems = stream_gaps(events)
    if problems:
        raise PluginError(f"cannot compact a stream with missing events: {'; '.join(problems)}")
    first = events[0]
    return Checkpoint(
        state=states(kind, events)[-1],
        first=first.change.first if isinstance(first.change, Checkpoint) else first.seq,
        last_at=written_at(events[-1]),
        export=export,
        since=first.seq,
    )


AHEAD_BOUND = 60.0
"""Seconds an event's time may run ahead of the reading host's clock and still be believed
(doctor fails a clock this far from etcd's). Past it the time came from a clock ahead (or was
raised to such a time, ``Event.clock``), and compaction judges the event's age otherwise
(``believed_at``); ``verify`` and ``doctor`` name the event."""


def believed_at(event: Event, now: datetime) -> datetime | None:
    """The time an event's age is judged by at ``now``: its own (``written_at``), unless that
    is more than ``AHEAD_BOUND`` ahead of ``now``; then the writer's own clock (``clock``, kept
    when ``at`` was raised to a time ahead), unless that is ahead too. None: no time to
    believe; the event was written no later than the one after it, which vouches for it."""
    for at in (written_at(event), event.clock):
        if at is not None and (at - now).total_seconds() <= AHEAD_BOUND:
            return at
    return None


def too_young(event: Event, *, now: datetime, min_age: float) -> bool:
    """Whether compaction must leave ``event`` in place: it was written less than ``min_age``
    seconds before ``now`` (by ``believed_at``; a checkpoint counts from the last event it
    replaced). An event with no time to believe is not too young by itself: compaction takes it
    only when an event after it in the cut is old enough (``unvouched``). ``min_age`` 0
    leaves nothing too young."""
    if min_age <= 0:
        return False
    at = believed_at(event, now)
    return at is not None and (now - at).total_seconds() < min_age


def unvouched(events: list[Event], *, now: datetime, min_age: float) -> int:
    """How many of the last ``events`` of a cut compaction must leave in place as well: those
    after the last event with a time to believe (``believed_at``), for nothing vouches that
    they are old enough. 0 when ``min_age`` is 0."""
    if min_age <= 0:
        return 0
    for back, event in enumerate(reversed(events)):
        if believed_at(event, now) is not None:
            return back
    return len(events)


def stamped_ahead(before: Event, event: Event) -> str | None:
    """A note when ``before`` carries a time more than ``AHEAD_BOUND`` ahead of the clock of
    the writer after it (who had to raise its own time to it: ``Event.clock``): ``before``'s
    writer's clock was ahead. None otherwise."""
    if event.clock is None or before.clock is not None:
        return None  # not raised, or raised in turn: the first one was noted
    ahead = (written_at(before) - event.clock).total_seconds()
    if ahead <= AHEAD_BOUND:
        return None
    return (
        f"event {before.seq} is stamped {spoken(ahead)} ahead of the clock of the writer after "
        f"it ({event.by or 'unknown'}): the clock of {before.by or 'its writer'} was ahead"
    )


def ahead_of_now(event: Event, now: datetime) -> str | None:
    """A note when ``event``'s time (or, raised, its writer's clock) is more than
    ``AHEAD_BOUND`` ahead of ``now``, this host's clock."""
    if believed_at(event, now) is not None:
        return None
    ahead = (written_at(event) - now).total_seconds()
    return (
        f"event {event.seq} is stamped {spoken(ahead)} ahead of this host's clock "
        f"(written by {event.by or 'unknown'}): that clock, or this one, is wrong"
    )


def raised_ahead_of_now(event: Event, now: datetime) -> str | None:
    """A note when ``event``'s time is more than ``AHEAD_BOUND`` ahead of ``now`` though its
    writer's clock was right: raised to an earlier event's time, which a clock ahead wrote
    (``stamped_ahead`` notes that one). Every later event carries the time until it passes."""
    ahead = (written_at(event) - now).total_seconds()
    if ahead <= AHEAD_BOUND or believed_at(event, now) is None:
        return None
    return (
        f"event {event.seq} is stamped {spoken(ahead)} ahead of this host's clock, raised to "
        f"the time of an earlier event by its writer ({event.by or 'unknown'}), whose own "
        "clock agrees: an earlier writer's clock was ahead"
    )


def spoken(seconds: float) -> str:
    """``90 s``, ``25 min``, ``3 h``, ``2 days``: how far a clock is off, roughly."""
    for unit, size, below in (("s", 1, 100), ("min", 60, 100 * 60), ("h", 3600, 48 * 3600)):
        if seconds < below:
            return f"{round(seconds / size)} {unit}"
    return f"{round(seconds / 86400)} days"


class ExportCheck(msgspec.Struct, frozen=True):
    """What an export file holds, against the checkpoint that names it."""

    problems: list[str]
    """Empty when it holds exactly the events the checkpoint stands for."""
    previous: Event | None = None
    """The checkpoint it starts with, whose own export comes next in the chain (None when it
    starts at event 1, or has problems)."""
    events: list[Event] = msgspec.field(default_factory=list)
    """The events it holds, oldest first (empty when it has problems)."""


def check_export(
    kind: Kind[S], checkpoint: Event, name: str, lines: list[bytes], digest: str = ""
) -> ExportCheck:
    """Check the export ``name`` (its file name; ``digest``: the SHA-256 of its bytes) against
    ``checkpoint``: every line is an event; their seqs run without gaps from event 1 or the
    previous checkpoint to the checkpoint's seq; they fold to the checkpoint's state, first
    seq and time; the name carries the checkpoint's op; and, all that holding, it is byte for
    byte the file the checkpoint names (its digest, from 0.8)."""
    change = checkpoint.change
    assert isinstance(change, Checkpoint)
    problems: list[str] = []
    if not name.endswith(f".{checkpoint.op[:12]}.jsonl"):
        problems.append(f"its name does not carry the checkpoint's op {checkpoint.op[:12]}")
    events: list[Event] = []
    for number, line in enumerate(lines, start=1):
        try:
            events.append(kind.events.decode(line))
        except msgspec.DecodeError as exc:
            return ExportCheck(problems=[*problems, f"line {number} is not an event: {exc}"])
    if not events:
        return ExportCheck(problems=[*problems, "it holds no events"])
    first, last = events[0], events[-1]
    previous = first if isinstance(first.change, Checkpoint) else None
    if first.seq != 1 and previous is None:
        problems.append(f"it starts at seq {first.seq}, neither event 1 nor a checkpoint")
    if previous is not None and previous.seq >= checkpoint.seq:
        problems.append(f"it holds no event after the checkpoint it starts with ({first.seq})")
    for before, after in pairwise(events):
        if after.seq <= before.seq:
            problems.append(f"seq {after.seq} follows seq {before.seq}")
        elif after.seq != before.seq + 1:
            problems.append(f"events {before.seq + 1}..{after.seq - 1} are missing")
    if last.seq != checkpoint.seq:
        problems.append(f"it ends at seq {last.seq}, not at the checkpoint's ({checkpoint.seq})")
    if not problems:
        broken = first_break(events, lines)
        if broken is not None:
            problems.append(f"its chain breaks at seq {broken.seq}: {broken.reason}")
        elif change.tip is not None and named_by_next(last, lines[-1]) != change.tip:
            problems.append(
                f"its last event is not the one the checkpoint names (the checkpoint's tip is "
                f"{change.tip[:12]}, event {last.seq} digests to "
                f"{named_by_next(last, lines[-1])[:12]})"
            )
    if not problems:
        problems += _fold_problems(kind, change, events)
    if not problems and change.export_digest is not None and digest != change.export_digest:
        problems.append(
            f"it is not the file the checkpoint names, byte for byte (it digests to "
            f"{digest[:12]}, the checkpoint's export_digest is {change.export_digest[:12]})"
        )
    if problems:
        return ExportCheck(problems=problems)
    return ExportCheck(problems=[], previous=previous, events=events)


def _states_differ(kind: Kind[S], made: S | None, said: S | None) -> bool:
    """Whether a fold and a checkpoint disagree, as the kind compares a head with its stream."""
    if made is None or said is None:
        return made is not said
    return bool(kind.differences(said, made))


def _fold_problems(kind: Kind[S], change: Checkpoint[S], events: list[Event]) -> list[str]:
    """How the checkpoint that ``events`` (a whole, gapless export) make differs from
    ``change``."""
    try:
        made = checkpoint_for(kind, events, export=change.export)
    except PluginError as exc:
        return [f"its events do not fold: {exc.reason}"]
    problems = []
    if _states_differ(kind, made.state, change.state):
        folded, said = (
            kind.describe(state) if state is not None else "the node removed"
            for state in (made.state, change.state)
        )
        problems.append(f"its events fold to {folded}, the checkpoint says {said}")
    if made.first != change.first:
        problems.append(f"it goes back to seq {made.first}, the checkpoint says {change.first}")
    if change.since is not None and made.since != change.since:
        problems.append(f"it starts at seq {made.since}, the checkpoint says {change.since}")
    if made.last_at != change.last_at:
        problems.append(
            f"its last event is of {rfc3339(made.last_at)}, the checkpoint says "
            f"{rfc3339(change.last_at)}"
        )
    return problems
