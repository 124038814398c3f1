"""Answer shapes every kind's verbs share, as core decodes them: written once, so both
programs answer a verb in the same bytes."""

from __future__ import annotations

from collections.abc import Iterable

import msgspec

MAX_TOTAL = 2**63 - 1
"""``total`` saturates here (a Go int), as upstream's sum does."""


class DeployCapacity(msgspec.Struct, frozen=True, rename="pascal"):
    """One node's entry in ``nodes_deploy_capacity_map`` (core expects capitalised keys)."""

    capacity: int
    usage: float
    rate: float
    weight: float = 1
    """Core's float; encoded ``1``, as Go encodes ``float64(1)``."""


class NodesDeployCapacity(msgspec.Struct, kw_only=True):
    """get-nodes-deploy-capacity's answer: the nodes that can host at least one copy, in the
    order asked, and their sum."""

    nodes_deploy_capacity_map: dict[str, DeployCapacity]
    total: int


def nodes_deploy_capacity(entries: Iterable[tuple[str, DeployCapacity]]) -> NodesDeployCapacity:
    """The answer from each node's entry: nodes that host none are left out."""
    found: dict[str, DeployCapacity] = {}
    total = 0
    for name, entry in entries:
        if entry.capacity > 0:
            found[name] = entry
            total = min(total + entry.capacity, MAX_TOTAL)
    return NodesDeployCapacity(nodes_deploy_capacity_map=found, total=total)
