"""How GPU states and changes read to people and to auditors' tools: the table cells and JSON
the generic auditor commands (history, show, nodes) print for this kind."""

from __future__ import annotations

from typing import Any

from resource_extend.projections import changes
from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.events import KINDS as KINDS  # every change kind
from resource_extend.projections.gpu.resources import Resource
from resource_extend.projections.gpu.state import NodeState
from resource_extend.projections.parts import Measure

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
    """What a change of a GPU stream did, in a few words (None: the ledger's own)."""
    return changes.summary(change, cards.describe, _signed)


def measures(state: NodeState | None) -> list[Measure]:
    """A chart per product: the cards the node has of it, and those in use."""
    if state is None:
        return []
    products = sorted(state.capacity.keys() | state.usage.keys())
    return [
        Measure(product, "cards", state.capacity.get(product, 0), state.usage.get(product, 0))
        for product in products
    ]
