"""How storage states and changes read in the auditor commands (projections/storage/views.py),
and sizes as every page and table writes them (``projections.parts.human``)."""

from __future__ import annotations

from resource_extend.projections.changes import CapacitySet, UsageChanged
from resource_extend.projections.parts import human
from resource_extend.projections.storage import views
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.state import NodeState
from resource_extend.projections.storage.wire.resources import NodeResource

G = 2**30
VDA = Disk(device="/dev/vda", mounts=["/"])


def test_sizes_read_in_binary_units_exact_where_they_divide() -> None:
    assert [human(n) for n in (0, 1023, G, 100 * G, -G, 3 * G // 2)] == [
        "0", "1023", "1G", "100G", "-1G", "1.5G"
    ]  # fmt: skip


def test_a_delta_signs_every_figure_a_value_none() -> None:
    delta = NodeResource(
        volumes={"/data0": 100 * G}, storage=-G, disks=[VDA.with_quota((100, -5, 2**20, 0))]
    )
    assert views.describe(delta, signed=True) == (
        "/data0 +100G, storage -1G, /dev/vda +100/-5 IOPS +1M/+0 B/s"
    )
    assert views.summary(UsageChanged(delta=delta, workloads=[])) == (
        "usage /data0 +100G, storage -1G, /dev/vda +100/-5 IOPS +1M/+0 B/s"
    )
    value = NodeResource(
        volumes={"/data0": 100 * G}, storage=G, disks=[VDA.with_quota((1, 2, 3, 4))]
    )
    assert views.summary(CapacitySet(capacity=value)) == (
        "capacity = /data0 100G, storage 1G, /dev/vda 1/2 IOPS 3/4 B/s"
    )


def test_a_state_reads_as_used_of_capacity_per_volume_and_disk() -> None:
    state = NodeState(
        capacity=NodeResource(
            volumes={"/data0": 100 * G, "/data1": G}, storage=101 * G,
            disks=[VDA.with_quota((100, 100, G, G))],
        ),
        usage=NodeResource(
            volumes={"/data0": 10 * G, "/data1": 0}, storage=10 * G,
            disks=[VDA.with_quota((10, 0, 0, 0))],
        ),
    )  # fmt: skip
    assert views.state_cells(state) == (
        "/data0 10G/100G, /data1 0/1G",
        "10G/101G",
        "/dev/vda 10/0 IOPS 0/0 B/s of 100/100 IOPS 1G/1G B/s",
    )
    assert views.detail_cells(state)[-1] == "91G"
