"""How long a stream may grow: each node's share of the kind's byte budget.

The policy bounds the total, whatever the number of nodes: a stream's bound is the budget over
the node count, at ``EVENT_BYTES`` an event, and at most ``max_events``. Every write knows the
node count (its read counts the heads, in the same transaction), so the write path alone keeps
the total within the budget, with no counter shared between nodes to contend on. The archiver
(``resource-gpu archive``) keeps streams at half their bound, so core's calls find nothing to
compact while it keeps up.

    total <= nodes * (checkpoint + 1.1 * bound * event)  +  events younger than min_age
          ~= 1.1 * budget * event / EVENT_BYTES  (while the budget, not max_events, binds)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import msgspec

from resource_extend.ledger.model.errors import PluginError

if TYPE_CHECKING:
    from resource_extend.ledger.host.config import StreamsConfig
    from resource_extend.ledger.model.events import Change
    from resource_extend.ledger.store import Store
    from resource_extend.ledger.store.appender import Resume
    from resource_extend.ledger.store.outcomes import Appended

EVENT_BYTES = 512
"""Bytes an event is counted as against the budget: its key and value in etcd. A GPU event
measures 282 (``scripts/bench --soak``); a storage event with many volumes more."""

FLOOR = 4
"""The fewest events a bound keeps (checkpoint included), however many the nodes."""


class Bound(msgspec.Struct, frozen=True):
    """One stream's bound, given the node count."""

    keep: int
    """Events a compaction leaves (its checkpoint included)."""
    over: int
    """The length past which a write compacts: a tenth over ``keep``, so a compaction removes
    a batch of events (one export file each), not one per write."""

    @property
    def full(self) -> int:
        """The length at which a write compacts first, and is refused if that fails."""
        return 2 * self.keep

    @property
    def at_least(self) -> int:
        """The fewest events a compaction triggered by a write removes."""
        return self.over - self.keep

    def halved(self) -> Bound:
        """The archiver's target: half the bound, so writes find nothing to do."""
        return bound_of(max(self.keep // 2, FLOOR))


def bound_of(keep: int) -> Bound:
    return Bound(keep=keep, over=keep + max(keep // 10, 1))


def stream_bound(*, budget: int, max_events: int, nodes: int) -> Bound | None:
    """The bound of each of ``nodes`` streams (None: unbounded, both limits off)."""
    limits = []
    if budget:
        limits.append(max(budget // (max(nodes, 1) * EVENT_BYTES), FLOOR))
    if max_events:
        limits.append(max_events)
    return bound_of(min(limits)) if limits else None


class StreamFull(Exception):
    """Raised before a write (nothing sent): the stream is at twice its bound."""

    def __init__(self, length: int, bound: Bound) -> None:
        super().__init__(length, bound)
        self.length = length
        self.bound = bound


def bound_for(streams: StreamsConfig, nodes: int | None) -> Bound | None:
    """The bound of each stream of a kind with ``nodes`` heads, under ``streams``' policy."""
    return stream_bound(budget=streams.budget, max_events=streams.max_events, nodes=nodes or 1)


def append_bounded(
    store: Store[Any],
    streams: StreamsConfig,
    node: str,
    verb: str,
    decide: Callable[[Any], Change | None],
    *,
    resume: Resume | None = None,
) -> Appended[Any]:
    """``store.append`` that keeps the stream within its bound.

    After a write takes the stream a tenth over, it is compacted back: quietly, for the verb
    has succeeded and stdout and stderr are its answer's. Should that keep failing (say the
    export directory is not writable) the stream grows to twice its bound, and from there a
    write first compacts, loudly: when that fails, the write is refused with one line saying
    why, before anything is sent. Events younger than ``streams.min_age`` never block a write.
    """

    def admit(length: int | None, nodes: int | None) -> None:
        bound = bound_for(streams, nodes)
        if bound is not None and length is not None and length >= bound.full:
            raise StreamFull(length, bound)

    if not streams.bounded:
        return store.appender.append(node, verb, decide, resume=resume)
    try:
        appended = store.appender.append(node, verb, decide, admit=admit, resume=resume)
    except StreamFull as full:
        # Compacted as far as it can go (what is left is too young): the write goes ahead.
        _compact(store, streams, node, full.bound, loudly=True, length=full.length)
        appended = store.appender.append(node, verb, decide, with_length=True, resume=resume)
    if not appended.events or appended.length is None:
        return appended
    bound = bound_for(streams, appended.nodes)
    if bound is not None and appended.length > bound.over:
        _compact(store, streams, node, bound, loudly=False, length=appended.length)
    return appended


def _compact(
    store: Store[Any], streams: StreamsConfig, node: str, bound: Bound, *, loudly: bool, length: int
) -> None:
    """Compact the stream back to ``bound``: quietly after a write (it has landed: any failure
    is let go), or loudly before one (a failure refuses it, in one line naming why)."""
    from resource_extend.ledger.upkeep.compaction import compact

    try:
        compact(
            store,
            node,
            keep=bound.keep - 1,
            to=streams.destination,
            min_age=streams.min_age,
            at_least=bound.at_least,
            steps=1,  # within the call's time: a longer cut goes on at the next write
        )
    except PluginError as exc:
        if not loudly:
            return
        raise PluginError(
            f"not written: the stream holds {length} events, at least twice its bound of "
            f"{bound.keep} (streams.budget, streams.max_events), and compacting it failed: "
            f"{exc.reason}",
            node=node,
        ) from None
    except Exception:  # a quiet compaction never fails the write that has landed
        if loudly:
            raise
