"""A GPU node's state: capacity and usage, as card maps."""

from __future__ import annotations

import msgspec

from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.cards import Cards


class NodeState(msgspec.Struct, frozen=True, kw_only=True):
    """Capacity and usage of one node; both maps are normalised (no zero counts).

    Also the state a checkpoint or a head repair stores: ``{"capacity": {...}, "usage": {...}}``.
    """

    capacity: Cards = msgspec.field(default_factory=dict)
    usage: Cards = msgspec.field(default_factory=dict)

    @property
    def available(self) -> Cards:
        """Capacity minus usage; negative where an operator shrank a node below its usage."""
        return cards.subtract(self.capacity, self.usage)
