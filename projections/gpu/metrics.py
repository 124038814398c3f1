"""The metrics core exports for each node: per product, cards in capacity and cards used."""

from __future__ import annotations

from resource_extend.projections.gpu.node import NodeState
from resource_extend.projections.metrics import (
    Gauge,
    Metric,
    MetricDescription,
    Sample,
    statsd_safe,
)

__all__ = [
    "DESCRIPTIONS",
    "GAUGES",
    "LABELS",
    "Gauge",
    "Metric",
    "MetricDescription",
    "Sample",
    "gauges",
    "node_metrics",
    "statsd_safe",
]

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


# -- the exporter's gauges (``resource-gpu exporter``) -----------------------------------------


GAUGES: tuple[Gauge, ...] = (
    ("capacity_cards", "GPU cards the node has, per product.", ("product",)),
    ("used_cards", "GPU cards workloads hold on the node, per product.", ("product",)),
)


def gauges(state: NodeState) -> list[Sample]:
    """The node's ``GAUGES``: per product in its capacity or usage, cards had and cards used."""
    products = sorted(state.capacity.keys() | state.usage.keys())
    had: list[Sample] = [
        ("capacity_cards", (p,), float(state.capacity.get(p, 0))) for p in products
    ]
    used: list[Sample] = [("used_cards", (p,), float(state.usage.get(p, 0))) for p in products]
    return had + used
