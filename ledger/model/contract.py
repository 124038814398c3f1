"""What a resource kind gives the ledger: the ledger stores, folds, compacts, exports and
verifies any kind's streams, and asks the kind only for what is its own (what a kind is
called is :mod:`ledger.model.kinds`).

A kind is an object with the attributes of :class:`Kind` (``projections.gpu.node.GPU`` is the
first). The ledger never imports one: ``commands`` hands it to the store.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Generic, Protocol, TypeVar

import msgspec

from resource_extend.ledger.model.events import Change, EventCodec

S = TypeVar("S", bound=msgspec.Struct)
T = TypeVar("T")


class Head(msgspec.Struct, Generic[S], frozen=True):
    """A node record as read: the state it holds and its stream position (``None``: written
    by the upstream plugin, which keeps no stream)."""

    state: S
    seq: int | None


class Kind(Protocol[S]):
    name: str
    """The key segment, ``<prefix>/resource/<name>/<node>``: ``gpu``, ``storage``."""
    program: str
    """The command that serves it, for messages: ``resource-gpu``."""
    events: EventCodec

    def as_read(self, state: S | None) -> S:
        """The node as a verb reads it: ``state``, or for a node with no record the kind's
        empty record."""
        ...

    def apply(self, state: S | None, change: Any) -> S | None:
        """The state after one of the kind's own changes (``None``: no such node); raises
        ``ledger.model.audit.BrokenStream`` when the change cannot follow ``state``."""
        ...

    def read_head(self, raw: bytes) -> Head[S]:
        """A stored node record, the upstream plugin's included; ``msgspec.DecodeError``."""
        ...

    def write_head(self, state: S, seq: int) -> bytes:
        """The node record for ``state``, byte-compatible with the upstream plugin, plus seq."""
        ...

    def invalid(self, state: S) -> str | None:
        """What makes ``state`` impossible (a negative count, say), or None: a fold through
        such a state is not one a repair may trust."""
        ...

    def contradiction(self, change: Any) -> str | None:
        """What makes one of the kind's changes contradict itself (a delta that is not what its
        workloads add up to, say), or None: a stream holding one is not one a repair may
        trust."""
        ...

    def adopted(self, state: S, record: bytes) -> Change:
        """The change that takes over an upstream record as found (``record``: as stored)."""
        ...

    def describe(self, state: S) -> str:
        """One line for people: ``capacity a:2, usage a:1``."""
        ...

    def differences(self, head: S, stream: S) -> list[str]:
        """How a head's state differs from its stream's fold, one line per field."""
        ...


def field_differences(
    fields: Iterable[tuple[str, T, T]], describe: Callable[[T], str]
) -> list[str]:
    """``Kind.differences`` from (field, head's value, stream's value) triples: one line per
    field that differs, ``usage differs: head <described>, stream <described>``."""
    return [
        f"{field} differs: head {describe(was)}, stream {describe(should)}"
        for field, was, should in fields
        if was != should
    ]
