"""Answer shapes every kind's verbs share, as core decodes them: written once, so both
programs answer a verb in the same bytes.

An upstream plugin answers with a Go map (``RawParams``), whose keys Go writes sorted; so the
fields of these answers are declared in that order, and answers are encoded with every map's
keys sorted (the shell's ``respond``). What they hold are Go structs, written in their
fields' order."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Generic, TypeVar

import msgspec

from resource_extend.projections.gofloat import go_float

R = TypeVar("R")
"""A kind's resource value as core reads it (GPU: ``{"prod_count_map": ...}``)."""

P = TypeVar("P")
"""A kind's engine params: what core hands the engine for one workload."""
W = TypeVar("W")
"""A kind's workload resource: what core keeps for one workload, and adds to the node's usage."""

ONE = go_float(1.0)
"""Every entry's ``Weight``: core's float64 ``1``."""

MAX_TOTAL = 2**63 - 1
"""``total`` saturates here (a Go int), as upstream's sum does."""


class DeployCapacity(msgspec.Struct, frozen=True, rename="pascal"):
    """One node's entry in ``nodes_deploy_capacity_map`` (core expects capitalised keys).
    ``Usage``, ``Rate`` and ``Weight`` are Go float64s, held in the bytes Go writes for them
    (``0``, not ``0.0``): build an entry with :meth:`of`."""

    capacity: int
    usage: msgspec.Raw
    rate: msgspec.Raw
    weight: msgspec.Raw = ONE

    @classmethod
    def of(cls, capacity: int, usage: float, rate: float) -> DeployCapacity:
        """The entry of a node that hosts ``capacity`` copies, at these ratios."""
        return cls(capacity, go_float(usage), go_float(rate))


class NodesDeployCapacity(msgspec.Struct, kw_only=True):
    """get-nodes-deploy-capacity's answer: the nodes that can host at least one copy (written
    sorted by name, as Go writes a map), and their sum."""

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


class DeployPlans(msgspec.Struct, Generic[P, W], kw_only=True):
    """calculate-deploy's answer: one entry a workload, in both lists."""

    engines_params: list[P]
    workloads_resource: list[W]


class ReallocPlan(msgspec.Struct, Generic[P, W], kw_only=True):
    """calculate-realloc's answer: the workload's new engine params and resource, and what
    core adds to the node's usage (``delta_resource``)."""

    delta_resource: W
    engine_params: P
    workload_resource: W


class BeforeAfter(msgspec.Struct, Generic[R], frozen=True):
    """set-node-resource-capacity's and set-node-resource-usage's answer: the value the write
    found, and the one it left (core rolls back with ``before``)."""

    after: R
    before: R


class NodeResourceInfo(msgspec.Struct, Generic[R], frozen=True):
    """get-node-resource-info's and fix-node-resource's answer: the node's capacity and usage,
    and every way usage disagreed with the workloads' sum."""

    capacity: R
    diffs: list[str]
    usage: R


class MostIdle(msgspec.Struct, frozen=True):
    """get-most-idle-node's answer: the node core should build on, and how much this plugin
    cares (core takes the highest priority among the plugins' answers)."""

    nodename: str
    priority: int
