"""How GPU states and changes read to people and to auditors' tools: the table cells and JSON
the generic auditor commands (history, show, nodes) print for this kind."""

from __future__ import annotations

from typing import Any

from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.events import KINDS as KINDS  # every change kind
from resource_extend.projections.gpu.events import (
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
from resource_extend.projections.gpu.resources import Resource
from resource_extend.projections.gpu.state import NodeState

EMPTY = NodeState()
"""What a node without a readable record shows: no cards."""

STATE_HEADERS: tuple[str, ...] = ("CAPACITY", "USAGE")
"""The columns of a state in a listing (``nodes``; ``history`` adds "AFTER")."""

DETAIL_HEADERS: tuple[str, ...] = ("CAPACITY", "USAGE", "AVAILABLE")
"""The columns of one state shown alone (``show``)."""


def state_cells(state: NodeState | None) -> tuple[str, ...]:
    if state is None:
        return ("-",) * len(STATE_HEADERS)
    return cards.describe(state.capacity), cards.describe(state.usage)


def detail_cells(state: NodeState) -> tuple[str, ...]:
    return (*state_cells(state), cards.describe(state.available))


def state_json(state: NodeState | None) -> dict[str, Any]:
    """``{"capacity": R, "usage": R}``, the upstream record's shape (no node: empty maps)."""
    state = state or NodeState()
    return {"capacity": Resource.of(state.capacity), "usage": Resource.of(state.usage)}


def _signed(delta: cards.Cards) -> str:
    return ", ".join(f"{p}:{n:+d}" for p, n in sorted(delta.items())) or "none"


def summary(change: Any) -> str | None:
    """What one of GPU's own changes did, in a few words (None: not one of GPU's)."""
    if isinstance(change, NodeAdded):
        return f"capacity = {cards.describe(change.capacity)}"
    if isinstance(change, (Adopted, NodeInfoSet)):
        return (
            f"capacity = {cards.describe(change.capacity)}; usage = {cards.describe(change.usage)}"
        )
    if isinstance(change, CapacitySet):
        return f"capacity = {cards.describe(change.capacity)}"
    if isinstance(change, CapacityChanged):
        return f"capacity {_signed(change.delta)}"
    if isinstance(change, UsageChanged):
        count = len(change.workloads or [])
        workloads = f" ({count} workload{'s' * (count != 1)})" if count else ""
        return f"usage {_signed(change.delta)}{workloads}"
    if isinstance(change, UsageSet):
        return f"usage = {cards.describe(change.usage)}"
    if isinstance(change, UsageRebuilt):
        return f"usage = {cards.describe(change.usage)}; diffs: {'; '.join(change.diffs)}"
    if isinstance(change, NodeRemoved):
        return "node removed"
    return None
