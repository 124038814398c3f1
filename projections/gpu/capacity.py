"""Capacity math: how many workloads fit, deploy and realloc plans, the most idle node."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import msgspec

from resource_extend.ledger.model.errors import NotEnoughResource
from resource_extend.projections import answers
from resource_extend.projections.answers import DeployCapacity, NodesDeployCapacity
from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.node import NodeState

UNBOUNDED = 1_000_000
"""What a node reports for a request without cards: GPU never limits such a workload."""

IDLE_PRIORITY = 100


def fits(state: NodeState, request: Cards) -> int:
    """How many copies of ``request`` the node's available cards can host."""
    if not request:
        return UNBOUNDED
    capacity, usage = state.capacity, state.usage  # (not state.available: a map per node)
    fewest = -1  # (a loop, not min() of a generator: it runs for every node asked)
    for product, count in request.items():
        copies = max(capacity.get(product, 0) - usage.get(product, 0), 0) // count
        if fewest < 0 or copies < fewest:
            fewest = copies
    return fewest


def _ratio(part: int, whole: int) -> float:
    return part / whole if whole > 0 else 0.0


def deploy_capacity(
    state: NodeState, request: Cards, requested: int | None = None
) -> DeployCapacity:
    """The node's entry; ``requested``: the request's cards in all, when worked out already."""
    total_cards = sum(state.capacity.values())  # (cards.total inlined: it runs for every node)
    return DeployCapacity.of(
        fits(state, request),
        _ratio(sum(state.usage.values()), total_cards),
        _ratio(cards.total(request) if requested is None else requested, total_cards),
    )


def nodes_deploy_capacity(
    states: Iterable[tuple[str, NodeState]], request: Cards
) -> NodesDeployCapacity:
    """Every node's entry, in the order given; nodes that host none are left out. The
    request's total is worked out once, not for each node."""
    requested = cards.total(request)
    return answers.nodes_deploy_capacity(
        (node, deploy_capacity(state, request, requested)) for node, state in states
    )


def plan_deploy(node: str, state: NodeState, request: Cards, count: int) -> list[Cards]:
    """``count`` copies of the request, or NotEnoughResource when they do not all fit."""
    if request and fits(state, request) < count:
        raise NotEnoughResource(
            f"not enough resource: {count} x ({cards.describe(request)}) requested, "
            f"available {cards.describe(cards.clamped(state.available))}",
            node=node,
        )
    return [dict(request) for _ in range(count)]


class ReallocPlan(msgspec.Struct, frozen=True):
    new: Cards
    delta: Cards


def plan_realloc(node: str, state: NodeState, current: Cards, request: Cards) -> ReallocPlan:
    """Merge the request into the workload's cards, clamp at zero, check the growth fits."""
    new = cards.clamped(cards.add(current, request))
    delta = cards.subtract(new, current)
    available = state.available
    short = {p: n for p, n in delta.items() if n > 0 and n > available.get(p, 0)}
    if short:
        raise NotEnoughResource(
            f"not enough resource: realloc needs {cards.describe(short)} more, "
            f"available {cards.describe(cards.clamped(available))}",
            node=node,
        )
    return ReallocPlan(new=new, delta=delta)


def idleness(state: NodeState) -> float:
    return _ratio(cards.total(state.usage), cards.total(state.capacity))


def most_idle(states: Mapping[str, NodeState]) -> str:
    """The node with the lowest used/total ratio; on a tie, the first by name."""
    return min(states, key=lambda node: (idleness(states[node]), node))
