"""A node's state is the fold of its events, ``state = reduce(apply, events, None)``, written
once for every kind over what only the kind knows: how its resource values add up, how a state
is checked, and how a value is said. A kind is a :class:`NodeKind` with those filled in
(``projections.gpu.node.GPU``, ``projections.storage.node.STORAGE``)."""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

from resource_extend.ledger.model.audit import BrokenStream
from resource_extend.ledger.model.contract import field_differences
from resource_extend.ledger.model.events import Change, EventCodec
from resource_extend.projections.changes import (
    Adopted,
    CapacityChanged,
    CapacitySet,
    NodeAdded,
    NodeInfoSet,
    NodeRemoved,
    UsageChanged,
    UsageRebuilt,
    UsageSet,
)

R = TypeVar("R")
"""The kind's resource value (GPU: a card map; storage: volumes, disks and storage)."""


class Holding(Protocol):
    """A node's state, as every kind keeps it: what it has and what is used of it."""

    @property
    def capacity(self) -> Any: ...

    @property
    def usage(self) -> Any: ...


S = TypeVar("S", bound=Holding)
"""The kind's node state (a Struct)."""


class NodeKind(Generic[S, R]):
    """Everything the ledger needs of a kind (``ledger.model.contract.Kind``), the fold written
    here; a subclass names the kind and supplies its arithmetic and its records (``read_head``,
    ``write_head``: the upstream plugin's bytes)."""

    name: str
    program: str
    events: EventCodec
    separator = ", "
    """Between capacity and usage in :meth:`describe`."""

    # -- what only the kind knows -----------------------------------------------------------

    def state(self, capacity: R, usage: R) -> S:
        """A state as given: what an adopted record held, unchecked."""
        raise NotImplementedError

    def follow(self, capacity: R, usage: R) -> S:
        """The state a change leads to, checked as every write checks it (a change that breaks
        the kind's rules could not have been appended: raise ``BrokenStream``)."""
        return self.state(capacity, usage)

    def added(self, capacity: R) -> S:
        """A node just added with ``capacity``, nothing used."""
        raise NotImplementedError

    def empty(self) -> S:
        """The empty record: what a node with no record reads as (:meth:`as_read`)."""
        raise NotImplementedError

    def add(self, value: R, delta: R) -> R:
        raise NotImplementedError

    def grown(self, capacity: R, delta: R) -> R:
        """Capacity after a delta (storage drops a volume left at 0)."""
        return self.add(capacity, delta)

    def describe_value(self, value: R) -> str:
        raise NotImplementedError

    def invalid(self, state: S) -> str | None:
        """What makes a folded state impossible; none, for a kind whose :meth:`follow`
        checks every state as it applies."""
        return None

    def contradiction(self, change: Any) -> str | None:
        """What makes one of its changes contradict itself; none unless the kind says."""
        return None

    # -- the fold, for every kind -----------------------------------------------------------

    def as_read(self, state: S | None) -> S:
        """The node as a verb reads it: a node with no record (never added, or removed) is an
        empty one, holding nothing and using nothing (resource-extend's rule, so a cluster
        keeps working when a plugin joins it after its nodes). Only add-node (it must be
        missing), get-node-resource-info (``null``) and fix-node-resource (nothing to fix)
        tell the two apart; a capacity or usage edit of such a node creates its record."""
        return self.empty() if state is None else state

    def apply(self, state: S | None, change: Any) -> S | None:
        """The state after one of the kind's own changes. ``None`` is "no such node", which an
        edit reads as the empty node (:meth:`as_read`): its event begins the node's record."""
        if isinstance(change, NodeAdded):
            return self.added(change.capacity)
        if isinstance(change, Adopted):
            return self.state(change.capacity, change.usage)
        if isinstance(change, NodeInfoSet):
            return self.follow(change.capacity, change.usage)
        if isinstance(change, NodeRemoved):
            return None
        if state is None and isinstance(change, UsageRebuilt):
            raise BrokenStream(f"{type(change).__name__} on a node that does not exist")
        state = self.as_read(state)
        capacity: R = state.capacity
        usage: R = state.usage
        if isinstance(change, CapacitySet):
            return self.follow(change.capacity, usage)
        if isinstance(change, CapacityChanged):
            return self.follow(self.grown(capacity, change.delta), usage)
        if isinstance(change, UsageChanged):
            return self.follow(capacity, self.add(usage, change.delta))
        if isinstance(change, (UsageSet, UsageRebuilt)):
            return self.follow(capacity, change.usage)
        raise BrokenStream(f"unknown change {change!r}")

    def adopted(self, state: S, record: bytes) -> Change:
        found = record.decode(errors="replace")
        return Adopted(capacity=state.capacity, usage=state.usage, record=found)

    def describe(self, state: S) -> str:
        capacity = self.describe_value(state.capacity)
        usage = self.describe_value(state.usage)
        return f"capacity {capacity}{self.separator}usage {usage}"

    def differences(self, head: S, stream: S) -> list[str]:
        return field_differences(
            (("capacity", head.capacity, stream.capacity), ("usage", head.usage, stream.usage)),
            self.describe_value,
        )
