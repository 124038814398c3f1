"""Decisions: from a node's current state and a validated request, the change to append.

Each function is pure. It raises a :class:`~ledger.model.errors.PluginError` when the request cannot
be applied (nothing is written) and returns ``None`` when the request would change nothing (nothing
is appended).
"""

from __future__ import annotations

from resource_extend.ledger.model.errors import (
    InvalidRequest,
    NodeExists,
    NodeNotFound,
    NotEnoughResource,
)
from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.diffs import usage_diffs
from resource_extend.projections.gpu.events import (
    CapacityChanged,
    CapacitySet,
    Change,
    NodeAdded,
    NodeInfoSet,
    NodeRemoved,
    UsageChanged,
    UsageRebuilt,
    UsageSet,
)
from resource_extend.projections.gpu.node import GPU, NodeState
from resource_extend.projections.gpu.resources import MAX_COUNT


def add_node(node: str, state: NodeState | None, capacity: Cards) -> Change:
    if state is not None:
        raise NodeExists(node)
    return NodeAdded(capacity=capacity)


def remove_node(state: NodeState | None) -> Change | None:
    return None if state is None else NodeRemoved()


def _refuse_out_of_range(node: str, what: str, before: Cards, change: Cards) -> None:
    """Refuse a change that takes a product it touches below zero or past ``MAX_COUNT``."""
    after = cards.add(before, change)
    for product in sorted(change):
        count = after.get(product, 0)
        if count < 0 or count > MAX_COUNT:
            limit = "fall below zero" if count < 0 else f"exceed {MAX_COUNT}"
            raise InvalidRequest(
                f"{what} of {product!r} would {limit} "
                f"({before.get(product, 0)} {change[product]:+d} = {count})",
                node=node,
            )


def _refuse_past_capacity(node: str, state: NodeState, change: Cards) -> None:
    """Refuse a usage change that takes a product it *raises* past the node's capacity.

    Decided on the state the compare-and-swap then checks, so racing deploys cannot together
    take more cards than the node has. What lowers a product is never refused for this (a
    node's capacity may be set below its usage), nor is a product the change leaves alone.
    """
    for product, count in sorted(change.items()):
        if count <= 0:
            continue
        used, held = state.usage.get(product, 0), state.capacity.get(product, 0)
        if used + count > held:
            raise NotEnoughResource(
                f"usage of {product!r} would exceed its capacity "
                f"({used} {count:+d} = {used + count}, capacity {held})",
                node=node,
            )


def _refuse_too_many(node: str, what: str, given: Cards) -> None:
    """Refuse an absolute value (a sum of workloads, say) past ``MAX_COUNT`` of a product."""
    for product, count in sorted(given.items()):
        if count > MAX_COUNT:
            raise InvalidRequest(
                f"{what} of {product!r} would exceed {MAX_COUNT} ({count})", node=node
            )


def set_capacity(
    node: str, state: NodeState | None, given: Cards | None, *, delta: bool, incr: bool
) -> Change | None:
    """``given`` is signed when ``delta`` (validated so by the caller), non-negative otherwise;
    ``None`` when the request names no cards at all, which keeps the capacity. A node with no
    record is an empty one: the change creates its record."""
    current = GPU.as_read(state)
    if given is None:
        return None
    if not delta:
        return None if given == current.capacity else CapacitySet(capacity=given)
    change = given if incr else cards.negate(given)
    if not change:
        return None
    _refuse_out_of_range(node, "capacity", current.capacity, change)
    return CapacityChanged(delta=cards.normalised(change))


def set_usage(
    node: str,
    state: NodeState | None,
    given: Cards,
    *,
    workloads: list[Cards] | None,
    delta: bool,
    incr: bool,
) -> Change | None:
    """A node with no record is an empty one: the change creates its record."""
    current = GPU.as_read(state)
    if not delta:
        _refuse_too_many(node, "usage", given)
        return None if given == current.usage else UsageSet(usage=given)
    change = given if incr else cards.negate(given)
    if not change:
        return None
    _refuse_out_of_range(node, "usage", current.usage, change)
    _refuse_past_capacity(node, current, change)
    return UsageChanged(delta=cards.normalised(change), workloads=workloads)


def set_info(state: NodeState | None, capacity: Cards, usage: Cards) -> Change | None:
    """Nothing when the node would read as it does: unchanged, or a node with no record (never
    seen, or removed) left empty, which is what core's rollback of a removal hands back for
    such a node (``null`` and ``null``, or ``{}`` and ``{}``)."""
    if GPU.as_read(state) == NodeState(capacity=capacity, usage=usage):
        return None
    return NodeInfoSet(capacity=capacity, usage=usage)


def rebuild_usage(node: str, state: NodeState | None, workloads_sum: Cards) -> Change | None:
    """A node with no record has nothing to fix: an error."""
    if state is None:
        raise NodeNotFound(node)
    current = state
    if current.usage == workloads_sum:
        return None
    _refuse_too_many(node, "usage", workloads_sum)
    return UsageRebuilt(usage=workloads_sum, diffs=usage_diffs(current.usage, workloads_sum))
