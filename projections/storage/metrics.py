"""The metrics core exports for each node: its storage total in use and in capacity."""

from __future__ import annotations

from resource_extend.projections.metrics import (
    Gauge,
    Metric,
    MetricDescription,
    Sample,
    statsd_safe,
)
from resource_extend.projections.storage.grammar.disks import NO_QUOTA
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


# -- the exporter's gauges (``resource-storage exporter``) -------------------------------------


_DISK = ("device", "direction")
GAUGES: tuple[Gauge, ...] = (
    ("volume_capacity_bytes", "Bytes of each volume of the node.", ("volume",)),
    ("volume_used_bytes", "Bytes workloads hold on each volume of the node.", ("volume",)),
    ("capacity_bytes", "The node's storage in bytes, its volumes included.", ()),
    ("used_bytes", "Bytes of the node's storage workloads hold.", ()),
    ("disk_capacity_iops", "Each disk's IOPS quota, per direction (read, write).", _DISK),
    ("disk_used_iops", "IOPS of each disk's quota workloads hold, per direction.", _DISK),
    (
        "disk_capacity_bytes_per_second",
        "Each disk's bytes/s quota, per direction (read, write).",
        _DISK,
    ),
    (
        "disk_used_bytes_per_second",
        "Bytes/s of each disk's quota workloads hold, per direction.",
        _DISK,
    ),
)


def gauges(state: NodeState) -> list[Sample]:
    """The node's ``GAUGES``: each volume, the storage total and each disk's quota (by the
    disks its capacity lists), in capacity and in use."""
    capacity, usage = state.capacity, state.usage
    had, held = capacity.volumes or {}, usage.volumes or {}
    samples: list[Sample] = []
    for path in sorted(had.keys() | held.keys()):
        samples.append(("volume_capacity_bytes", (path,), float(had.get(path, 0))))
        samples.append(("volume_used_bytes", (path,), float(held.get(path, 0))))
    samples.append(("capacity_bytes", (), float(capacity.storage)))
    samples.append(("used_bytes", (), float(usage.storage)))
    used_disks = {disk.device: disk for disk in usage.disks or ()}
    for disk in capacity.disks or ():
        used = used_disks.get(disk.device)
        quota, taken = disk.quota, used.quota if used is not None else NO_QUOTA
        for name, offset in (("iops", 0), ("bytes_per_second", 2)):
            for index, direction in enumerate(("read", "write")):
                labels = (disk.device, direction)
                samples.append((f"disk_capacity_{name}", labels, float(quota[offset + index])))
                samples.append((f"disk_used_{name}", labels, float(taken[offset + index])))
    return samples
