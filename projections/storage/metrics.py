"""The metrics core exports for each node: its storage total in use and in capacity."""

from __future__ import annotations

from resource_extend.projections.metrics import Metric, MetricDescription, statsd_safe
from resource_extend.projections.storage.state import NodeState

LABELS = ["podname", "nodename"]

DESCRIPTIONS = [
    MetricDescription("storage_used", "node used storage.", "gauge", LABELS),
    MetricDescription("storage_capacity", "node available storage.", "gauge", LABELS),
]
"""As upstream words them ("available" is the capacity)."""


def node_metrics(podname: str, nodename: str, state: NodeState) -> list[Metric]:
    """``storage_used`` and ``storage_capacity``; the second's statsd key ends in
    ``.storage.capacity`` (upstream wrote ``.storage.used`` for both)."""
    base = f"core.node.{statsd_safe(nodename)}.storage"
    labels = [podname, nodename]
    return [
        Metric("storage_used", labels, f"{base}.used", str(state.usage.storage)),
        Metric("storage_capacity", labels, f"{base}.capacity", str(state.capacity.storage)),
    ]
