"""A third resource kind, apples, defined in this folder and nowhere in the product: a node
holds apples, and workloads eat them. It follows docs/ledger.md's "Adding a kind".

This module is what ``projections/<kind>/`` is for a kind of the product: what the ledger asks
of a kind (``projections.node.NodeKind``: how its values add, how a state is said, its record's
bytes) and what the shell asks of one (``projections.parts``: its cells and JSON for the
auditor commands, its gauges), handed over as :func:`parts`. Its core verbs are ``writes``
and ``queries`` beside it, and its value ``plugin.PLUGIN`` assembled from the two, what
``commands/<kind>/`` is for a kind of the product. ``tests/unit/test_toy_kind.py`` runs the
ledger on it, ``tests/ledger/test_toy_kind_commands.py`` its verbs and the auditor commands.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Union

import msgspec

from resource_extend.ledger.model.contract import Head
from resource_extend.ledger.model.errors import InvalidRequest, NodeExists, NodeNotFound
from resource_extend.ledger.model.events import Change, Checkpoint, EventCodec, HeadRepaired
from resource_extend.projections import changes
from resource_extend.projections.changes import NodeAdded, NodeRemoved, UsageChanged, UsageRebuilt
from resource_extend.projections.metrics import Gauge, Sample
from resource_extend.projections.node import NodeKind
from resource_extend.projections.parts import Measure, Parts


class Apples(msgspec.Struct, frozen=True, kw_only=True):
    capacity: int = 0
    usage: int = 0


class Record(msgspec.Struct, kw_only=True):
    apples: int
    eaten: int
    seq: int | None = None


AppleChange = Union[  # noqa: UP007 (a runtime union of generic aliases)
    NodeAdded[int],
    UsageChanged[int, int],
    UsageRebuilt[int],
    NodeRemoved,
    Checkpoint[Apples],
    HeadRepaired[Apples],
]


class AppleKind(NodeKind[Apples, int]):
    name = "apples"
    program = "resource-apples"
    events = EventCodec(program, AppleChange)

    def state(self, capacity: int, usage: int) -> Apples:
        return Apples(capacity=capacity, usage=usage)

    def added(self, capacity: int) -> Apples:
        return Apples(capacity=capacity)

    def empty(self) -> Apples:
        return Apples()

    def add(self, value: int, delta: int) -> int:
        return value + delta

    def describe_value(self, value: int) -> str:
        return f"{value} apples"

    def invalid(self, state: Apples) -> str | None:
        return "more eaten than there are" if state.usage > state.capacity else None

    def read_head(self, raw: bytes) -> Head[Apples]:
        record = msgspec.json.decode(raw, type=Record)
        return Head(state=Apples(capacity=record.apples, usage=record.eaten), seq=record.seq)

    def write_head(self, state: Apples, seq: int) -> bytes:
        return msgspec.json.encode(Record(apples=state.capacity, eaten=state.usage, seq=seq))


APPLES = AppleKind()
NODE = "orchard"

Decide = Callable[[Apples | None], Change | None]


def plant(apples: int, node: str = NODE) -> Decide:
    def decide(state: Apples | None) -> Change:
        if state is not None:
            raise NodeExists(node)
        return NodeAdded(capacity=apples)

    return decide


def eat(apples: int, node: str = NODE) -> Decide:
    def decide(state: Apples | None) -> Change:
        if state is None:
            raise NodeNotFound(node)
        if state.usage + apples > state.capacity:
            raise InvalidRequest(f"{apples} apples do not fit: {state.capacity - state.usage} left")
        return UsageChanged(delta=apples)

    return decide


def recount(eaten: int, node: str) -> Decide:
    """fix-node-resource: what is eaten is what the workloads hold."""

    def decide(state: Apples | None) -> Change | None:
        if state is None:
            raise NodeNotFound(node)
        if state.usage == eaten:
            return None
        return UsageRebuilt(usage=eaten, diffs=[f"{state.usage} eaten, workloads hold {eaten}"])

    return decide


# -- how people see it: the auditor commands' cells and JSON, the exporter's gauges ---------


class View:
    """Apples as ``nodes``, ``show`` and ``history`` print them (``projections.parts.KindView``)."""

    KINDS: tuple[str, ...] = (
        "node_added", "usage_changed", "node_removed", "checkpoint", "head_repaired"
    )  # fmt: skip
    STATE_HEADERS: tuple[str, ...] = ("APPLES", "EATEN")
    DETAIL_HEADERS: tuple[str, ...] = ("APPLES", "EATEN", "LEFT")
    EMPTY: Any = Apples()

    @staticmethod
    def state_cells(state: Apples | None) -> tuple[str, ...]:
        return ("-", "-") if state is None else (str(state.capacity), str(state.usage))

    @staticmethod
    def detail_cells(state: Apples) -> tuple[str, ...]:
        return str(state.capacity), str(state.usage), str(state.capacity - state.usage)

    @staticmethod
    def state_json(state: Apples | None) -> dict[str, Any]:
        state = state or Apples()
        return {"apples": state.capacity, "eaten": state.usage}

    @staticmethod
    def summary(change: Any) -> str | None:
        return changes.summary(change, lambda n: f"{n} apples", lambda n: f"{n:+d}")

    @staticmethod
    def measures(state: Apples | None) -> list[Measure]:
        return [] if state is None else [Measure("apples", "apples", state.capacity, state.usage)]


class Gauges:
    """Apples as the exporter serves them (``projections.parts.KindGauges``)."""

    GAUGES: tuple[Gauge, ...] = (("apples", "Apples the node holds.", ()),)

    @staticmethod
    def gauges(state: Apples) -> list[Sample]:
        return [("apples", (), float(state.capacity))]


def parts() -> Parts:
    """The kind's parts, as ``projections/<kind>/parts.py`` gives a kind's of the product."""
    return Parts(fold=APPLES, view=View(), gauges=Gauges(), metrics=[])
