"""Records the upstream Go plugin wrote are read and adopted on the first write; ours stay
readable by it: the same JSON, fields in Go's order, map keys sorted, plus ``seq``."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from tests.etcdkv import Etcd
from tests.plugin import Plugin
from tests.storage.helpers import G, T

pytestmark = [pytest.mark.grpc, pytest.mark.resident]

UPSTREAM = (
    b'{"capacity":{"volumes":{"/data0":1099511627776,"/data1":1099511627776},'
    b'"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":1000,"write_IOPS":1000,'
    b'"read_bps":1073741824,"write_bps":1073741824}],"storage":2199023255552},'
    b'"usage":{"volumes":{"/data0":107374182400,"/data1":0},'
    b'"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":100,"write_IOPS":0,'
    b'"read_bps":0,"write_bps":0}],"storage":107374182400}}'
)
"""A record as upstream writes it (compact JSON, Go's field order, keys sorted)."""


@pytest.fixture
def kv(storage: Plugin) -> Iterator[Etcd]:
    etcd = Etcd(storage.endpoints, storage.prefix, "storage")
    try:
        yield etcd
    finally:
        etcd.close()


def test_an_upstream_record_is_read_then_adopted_on_the_first_write(
    storage: Plugin, kv: Etcd
) -> None:
    kv.put_many({kv.head_key("old"): UPSTREAM})
    info = storage.ok("get-node-resource-info", {"nodename": "old"})
    assert info["usage"]["volumes"] == {"/data0": 100 * G, "/data1": 0}
    assert info["usage"]["disks"][0]["read_IOPS"] == 100
    assert kv.events("old") == []
    take = {"volumes": {"/data1": G}, "storage": G}
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "old", "resource": take, "delta": True, "incr": True},
    )
    kinds = [e["change"]["kind"] for e in kv.event_docs("old")]
    assert kinds == ["adopted", "usage_changed"]
    head = kv.head("old")
    assert head is not None
    record = head.json()
    assert record["seq"] == 2
    assert record["usage"]["volumes"] == {"/data0": 100 * G, "/data1": G}
    verified = storage.run("verify", None, "old")
    assert verified.status == 0, verified.stdout + verified.stderr


def test_a_record_in_any_key_case_is_read(storage: Plugin, kv: Etcd) -> None:
    """Go matched JSON keys ignoring case, so ``read_iops`` is ``read_IOPS`` to upstream."""
    kv.put_many({kv.head_key("cased"): UPSTREAM.replace(b"read_IOPS", b"read_iops")})
    info = storage.ok("get-node-resource-info", {"nodename": "cased"})
    assert info["capacity"]["disks"][0]["read_IOPS"] == 1000


def test_our_record_is_upstreams_json_plus_the_streams_position(storage: Plugin, kv: Etcd) -> None:
    storage.ok(
        "add-node",
        {"nodename": "n", "resource": {"volumes": ["/data1:1T", "/data0:1T"],
                                       "disks": ["/dev/vda:/,/data0:1000:1000:1G:1G"]}},
    )  # fmt: skip
    head = kv.head("n")
    assert head is not None
    record = json.loads(head.value)
    assert list(record) == ["capacity", "usage", "seq", "tip", "at"]
    assert list(record["capacity"]) == ["volumes", "disks", "storage"]
    assert list(record["capacity"]["volumes"]) == ["/data0", "/data1"]
    assert list(record["capacity"]["disks"][0]) == [
        "device", "mounts", "read_IOPS", "write_IOPS", "read_bps", "write_bps"
    ]  # fmt: skip
    assert record["capacity"]["storage"] == 2 * T
    assert b" " not in head.value  # compact, as Go writes it
