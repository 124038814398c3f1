"""Which members of a cluster answered lately: where a process's next request starts.

A member that hangs (a paused VM, a hung disk) accepts connections and never answers, so each
request that starts there spends its share of ``etcd.timeout`` on it before failing over; a
write that waited its turn first (``ledger.store.turns``) may then have too little time left
to be sent. So the process remembers, for each cluster (its ``etcd.machines``), the member that
answered it last, and starts there; a member that failed to answer is tried last for
``AVOID`` seconds. Within a call, a request goes where the one before it was answered, so a
write goes to the member its read was answered by. It is only ever a hint: every member is
still tried, in that order, before a request fails.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from resource_extend.ledger.etcd.kept import Kept

AVOID = 30.0
"""Seconds a member that failed to answer is tried last."""

Cluster = tuple[tuple[str, int], ...]
"""A cluster by its members' addresses, in ``etcd.machines``' order."""


class Members:
    """What a process saw of one cluster's members."""

    def __init__(self) -> None:
        self.last = 0
        """The member that answered last (the first, until one has)."""
        self.failed: dict[int, float] = {}
        """Members that failed to answer, by when (the :class:`Health`'s clock)."""


class Health:
    """Each cluster's :class:`Members`, for the life of the process."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clusters: Kept[Cluster, Members] = Kept()
        self._clock = clock

    def forget(self) -> None:
        """Forget every cluster (a test's process starts afresh)."""
        self._clusters.forget_all()

    def order(self, cluster: Cluster) -> list[int]:
        """The members to try, in turn: from the one that answered last, round the list,
        with those that failed in the last ``AVOID`` seconds at the end (the latest last)."""
        members = self._clusters.get(cluster)
        if members is None:
            return list(range(len(cluster)))
        start = members.last
        turn = [(start + step) % len(cluster) for step in range(len(cluster))]
        since = self._clock() - AVOID
        lately = sorted((when, index) for index, when in members.failed.items() if when > since)
        avoided = [index for _, index in lately]
        return [index for index in turn if index not in avoided] + avoided

    def avoided(self, cluster: Cluster, index: int) -> bool:
        """Whether the member failed to answer in the last ``AVOID`` seconds."""
        members = self._clusters.get(cluster)
        when = None if members is None else members.failed.get(index)
        return when is not None and when > self._clock() - AVOID

    def answered(self, cluster: Cluster, index: int) -> None:
        members = self._members(cluster)
        members.last = index
        members.failed.pop(index, None)

    def failed(self, cluster: Cluster, index: int) -> None:
        self._members(cluster).failed[index] = self._clock()

    def _members(self, cluster: Cluster) -> Members:
        members = self._clusters.get(cluster)
        if members is None:
            members = Members()
            self._clusters.keep(cluster, members)
        return members


HEALTH = Health()
"""This process's: a call process of the helper inherits what the helper saw before it forked,
and learns on."""
