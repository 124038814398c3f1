"""The metrics core exports for each node: per product, cards in capacity and cards used."""

from __future__ import annotations

from resource_extend.projections.gpu.node import NodeState
from resource_extend.projections.metrics import Metric, MetricDescription, statsd_safe

__all__ = ["DESCRIPTIONS", "LABELS", "Metric", "MetricDescription", "node_metrics", "statsd_safe"]

LABELS = ["podname", "nodename", "product"]


DESCRIPTIONS = [
    MetricDescription("gpu_capacity", "node available gpu.", "gauge", LABELS),
    MetricDescription("gpu_used", "node used gpu.", "gauge", LABELS),
]


def node_metrics(podname: str, nodename: str, state: NodeState) -> list[Metric]:
    """One ``gpu_capacity`` and one ``gpu_used`` per product in the node's capacity."""
    node_key = statsd_safe(nodename)
    metrics: list[Metric] = []
    for product in sorted(state.capacity):
        labels = [podname, nodename, product]
        base = f"core.node.{node_key}.gpu.{statsd_safe(product)}"
        metrics.append(
            Metric("gpu_capacity", labels, f"{base}.capacity", str(state.capacity[product]))
        )
        metrics.append(Metric("gpu_used", labels, f"{base}.used", str(state.usage.get(product, 0))))
    return metrics
