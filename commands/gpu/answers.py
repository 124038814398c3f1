"""Shapes shared by several verbs' answers and requests."""

from __future__ import annotations

from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.resources import Resource, held_cards
from resource_extend.projections.gpu.views import state_json as node_resources

__all__ = ["node_resources", "workloads_sum"]


def workloads_sum(workloads: list[Resource | None] | None) -> Cards:
    return cards.sum_all(
        held_cards(w, f"workloads_resource[{i}]") for i, w in enumerate(workloads or [])
    )
