"""How a node's head compares with its stream (``verify``), and what a repair may write: pure,
given the head as stored and a :class:`ledger.model.walk.Walk` over the stream."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Generic, TypeVar

import msgspec

from resource_extend.ledger.model.contract import Kind
from resource_extend.ledger.model.digests import named_by_next, tip_in_head
from resource_extend.ledger.model.events import AnyEvent, Change, HeadRepaired
from resource_extend.ledger.model.walk import Walk

S = TypeVar("S", bound=msgspec.Struct)


class Verdict(msgspec.Struct, Generic[S], frozen=True):
    """How a head compares with the fold of its stream."""

    problems: list[str]
    """Empty when they agree."""
    folded: S | None
    repairable: bool
    """The stream is whole and folds, so the head may be rewritten from it."""
    adopt: S | None = None
    """The head is the upstream plugin's (it has no ``seq``): a repair adopts what it holds,
    as a core write would, rather than revert it to the stream's fold."""


def check(
    kind: Kind[S],
    head: bytes | None,
    events: Sequence[AnyEvent],
    raw: Sequence[bytes] | None = None,
) -> Verdict[S]:
    """``judge`` a stream held in memory (``raw``: the events as stored, to check the chain)."""
    walk = Walk(kind)
    walk.feed(events, raw)
    return judge(head, walk, chained=raw is not None)


def judge(head: bytes | None, walk: Walk[S], *, chained: bool = True) -> Verdict[S]:
    """Compare a head (as stored) with the fold of the stream ``walk`` has read, and the tip the
    head carries with the stream's last event (``chained``: the walk was fed the events as
    stored). A head with no stream is an upstream record not adopted yet: nothing to compare.
    """
    kind, problems = walk.kind, list(walk.problems)
    if walk.broken:
        return Verdict(problems=problems, folded=None, repairable=False)
    folded, last_event = walk.state, walk.last
    repairable = not problems
    last = last_event.seq if last_event is not None else 0
    if head is None:
        if folded is not None:
            problems.append(f"no head, but the stream says {kind.describe(folded)} at seq {last}")
        return Verdict(problems=problems, folded=folded, repairable=repairable)
    try:
        stored = kind.read_head(head)
    except msgspec.DecodeError as exc:
        problems.append(f"the head is not readable: {exc}")
        # Rewritten from the stream, it is kept whole in the repair's event; but deleted (the
        # stream ends removed) it would be lost to whoever wrote it: a core write refuses it too.
        return Verdict(problems, folded, repairable and folded is not None)
    if last_event is None:
        if stored.seq is not None:
            problems.append(f"the head is at seq {stored.seq} but the stream is empty")
        return Verdict(problems=problems, folded=folded, repairable=False)
    found = stored.state
    if folded is None:
        problems.append(
            f"the stream ends with the node removed (seq {last}), but a head remains: "
            f"{kind.describe(found)}"
        )
    else:
        problems += kind.differences(found, folded)
    if stored.seq is None:
        problems.append(f"the head has no seq (rewritten by the upstream plugin?); stream {last}")
        return Verdict(problems, folded, repairable, adopt=found)
    if stored.seq != last:
        problems.append(f"seq differs: head {stored.seq}, stream {last}")
        if stored.seq > last:
            repairable = False  # the head saw events the stream has lost
    elif chained:
        carried, ends = tip_in_head(head).digest, named_by_next(last_event, walk.last_raw)
        if carried is not None and carried != ends:
            problems.append(
                f"event {last} is not the one the head recorded (it digests to {ends[:12]}, "
                f"the head says {carried[:12]})"
            )
            repairable = False  # the last event was changed after it was written
    return Verdict(problems=problems, folded=folded, repairable=repairable)


def repair(kind: Kind[S], head: bytes | None, verdict: Verdict[S]) -> tuple[Change, S | None]:
    """The event that settles a disagreeing head, and the state the head is then written
    with: an upstream head is adopted as found (``Kind.adopted``); any other is rewritten
    from the stream, and what was found is kept whole in the event."""
    if verdict.adopt is not None and head is not None:
        return kind.adopted(verdict.adopt, head), verdict.adopt
    found = head.decode(errors="replace") if head is not None else "no head"
    return HeadRepaired(found=found, state=verdict.folded), verdict.folded
