"""A fix makes usage the workloads' sum for everything they hold, including what usage has
no entry for yet: a disk or a volume capacity gained by a delta (usage then lists none). Found
by a model-based campaign: a workload's quota on such a disk was neither reported nor written,
and the next deploy took the disk past its capacity."""

from __future__ import annotations

from typing import Any

import pytest

from tests.plugin import Plugin
from tests.storage.helpers import G, info

pytestmark = [pytest.mark.grpc, pytest.mark.resident]

NODE = "n"
QUOTA = {"volumes": ["/mnt/logs:/logs:rw:0:60:60:0:0"]}
"""A mount binding charging 60 read and 60 write IOPS to the disk serving /mnt."""


def planned(storage: Plugin, request: dict[str, Any]) -> Any:
    """One workload as calculate-deploy plans it (its commit never made: core crashed)."""
    plan = storage.ok(
        "calculate-deploy",
        {"nodename": NODE, "deploy_count": 1, "workload_resource_request": request},
    )
    return plan["workloads_resource"][0]


def grown(storage: Plugin, resource: dict[str, Any]) -> None:
    storage.ok(
        "set-node-resource-capacity",
        {"nodename": NODE, "resource_request": resource, "delta": True, "incr": True},
    )


def usage_disk(storage: Plugin, device: str) -> Any:
    disks = info(storage, NODE)["usage"]["disks"] or []
    return next((disk for disk in disks if disk["device"] == device), None)


def test_a_disk_usage_lacks_is_reported_and_fixed(storage: Plugin) -> None:
    storage.ok("add-node", {"nodename": NODE, "resource": {"volumes": ["/data0:100G"]}})
    grown(storage, {"disks": ["/dev/vdb:/mnt:100:100:0:0"]})
    assert usage_disk(storage, "/dev/vdb") is None  # the delta gave usage no entry
    workload = planned(storage, QUOTA)

    [diff] = info(storage, NODE, [workload])["diffs"]
    assert diff == (
        "node.Disks[/dev/vdb] != sum(workload.Disks[/dev/vdb]): "
        "/dev/vdb:/mnt:0:0:0:0 != /dev/vdb:/mnt:60:60:0:0"
    )
    fixed = storage.ok("fix-node-resource", {"nodename": NODE, "workloads_resource": [workload]})
    assert fixed["diffs"] == [diff]
    assert usage_disk(storage, "/dev/vdb") == {
        "device": "/dev/vdb", "mounts": ["/mnt"], "read_IOPS": 60, "write_IOPS": 60,
        "read_bps": 0, "write_bps": 0,
    }  # fmt: skip
    assert info(storage, NODE, [workload])["diffs"] == []

    # The disk's 40 IOPS left cannot take a second 60: planning refuses it.
    line = storage.fails(
        "calculate-deploy",
        {"nodename": NODE, "deploy_count": 1, "workload_resource_request": QUOTA},
    )
    assert "not enough" in line, line


def test_a_volume_usage_lacks_is_reported_and_fixed(storage: Plugin) -> None:
    storage.ok("add-node", {"nodename": NODE, "resource": {"volumes": ["/data0:100G"]}})
    storage.ok(
        "set-node-resource-usage",
        {
            "nodename": NODE,
            "resource": {"volumes": {"/data0": 100 * G}},
            "delta": True,
            "incr": True,
        },
    )  # fmt: skip  (/data0 full, so the next plan takes /data1)
    grown(storage, {"volumes": ["/data1:100G"]})
    workload = planned(storage, {"volumes": ["AUTO:/d:rw:60G"]})
    assert workload["volume_plan_request"] == {"AUTO:/d:rw:64424509440:0:0:0:0": {"/data1": 60 * G}}

    diffs = info(storage, NODE, [workload])["diffs"]
    assert f"node.Volumes[/data1] != sum(workload.Volumes[/data1]): 0 != {60 * G}" in diffs
    storage.ok("fix-node-resource", {"nodename": NODE, "workloads_resource": [workload]})
    after = info(storage, NODE, [workload])
    assert after["diffs"] == []
    assert after["usage"]["volumes"].get("/data0", 0) == 0  # no workload holds it
    assert after["usage"]["volumes"]["/data1"] == 60 * G


def test_storage_usage_lacks_is_reported_and_fixed(storage: Plugin) -> None:
    storage.ok("add-node", {"nodename": NODE, "resource": {"volumes": ["/data0:100G"]}})
    grown(storage, {"storage": "10G"})
    workload = planned(storage, {"storage": "5G"})
    assert workload["storage_request"] == 5 * G
    [diff] = info(storage, NODE, [workload])["diffs"]
    assert diff == f"node.Storage != sum(workload.Storage): 0 != {5 * G}"
    storage.ok("fix-node-resource", {"nodename": NODE, "workloads_resource": [workload]})
    assert info(storage, NODE)["usage"]["storage"] == 5 * G
    assert info(storage, NODE, [workload])["diffs"] == []
