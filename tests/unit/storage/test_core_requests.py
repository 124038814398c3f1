"""resource-storage's requests as core sends them (commands/storage/requests.py): a field
spelt in another case is refused wherever it appears; data keys (paths, bindings) are data."""

from __future__ import annotations

import msgspec
import pytest

from resource_extend.commands.storage import requests

PLAN = {"AUTO:/Data:rw:1:0:0:0:0": {"/Storage_Request": 1}}


@pytest.mark.parametrize(
    ("raw", "key", "where"),
    [
        (b'{"workloads_resource": [{}, {"Storage_Request": 1}]}', "Storage_Request",
         r"\$\.workloads_resource\[1\]"),
        (b'{"workloads_resource": [{"disks_request": [{"device": "/dev/vda", "read_iops": 5}]}]}',
         "read_iops", r"\$\.workloads_resource\[0\]\.disks_request\[0\]"),
        (b'{"resource": {"Volumes": ["/data0:1T"]}}', "Volumes", r"\$\.resource"),
        (b'{"Nodename": "n1"}', "Nodename", r"\$`"),
        (b'{"workload_resource_request": {"Volumes-Request": ["AUTO:/d:rw:1G"]}}',
         "Volumes-Request", r"\$\.workload_resource_request"),
        (b'{"workloads_resource": [{"\\u0053torage_request": 1}]}', "Storage_request",
         r"\$\.workloads_resource\[0\]"),
    ],
)  # fmt: skip
def test_a_miscased_field_is_refused_where_it_is(raw: bytes, key: str, where: str) -> None:
    """Go matched these keys to the fields; ignored as unknown keys, a release would give back
    nothing and usage would drift without an error."""
    with pytest.raises(msgspec.ValidationError, match=rf"'{key}' is not a field.*{where}"):
        requests.decode(raw, requests.SetUsage)


def test_exact_spellings_and_data_keys_pass() -> None:
    workload = {"volume_plan_request": PLAN, "storage_request": 1,
                "disks_request": [{"device": "/dev/vda", "read_IOPS": 5}]}  # fmt: skip
    request = {"nodename": "Node-A", "resource": {"volumes": {"/Storage": 1}},
               "workloads_resource": [workload]}  # fmt: skip
    decoded = requests.decode(msgspec.json.encode(request), requests.SetUsage)
    [resource] = decoded.workloads_resource or []
    assert resource is not None and resource.storage_request == 1
    assert (resource.disks_request or [])[0].read_iops == 5


def test_engine_info_keeps_its_capital_resources() -> None:
    raw = b'{"nodename": "n1", "info": {"Resources": {"storage": "e30="}}}'
    decoded = requests.decode(raw, requests.AddNode)
    assert decoded.info is not None and decoded.info.resources == {"storage": b"{}"}


def test_a_workload_upstream_wrote_with_null_disk_lists_is_read() -> None:
    """Core keeps what upstream's realloc answered: ``disks_limit`` of a delta, and
    ``disks_request`` of a workload whose volumes did not move, are ``null``."""
    workload = {"volume_plan_request": PLAN, "storage_request": 1,
                "disks_request": None, "disks_limit": None}  # fmt: skip
    raw = msgspec.json.encode({"nodename": "n", "workloads_resource": [workload]})
    [resource] = requests.decode(raw, requests.SetUsage).workloads_resource or []
    assert resource is not None
    assert (resource.disks_request, resource.disks_limit) == (None, None)
