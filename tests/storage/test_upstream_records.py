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


def test_a_node_with_no_disks_is_written_and_answered_with_upstreams_empty_lists(
    storage: Plugin, kv: Etcd
) -> None:
    """Upstream's validation makes a new node's usage disks ``[]``; its capacity and usage
    edits build on deep copies, so what they write and answer (``before`` too) is never
    ``null``. A node added by an engine that reports nothing keeps ``null`` capacity lists."""
    added = storage.ok("add-node", {"nodename": "n", "resource": {"volumes": ["/data0:1T"]},
                                    "info": {"StorageTotal": 0}})  # fmt: skip
    assert added["capacity"] == {"volumes": {"/data0": T}, "disks": None, "storage": T}
    assert added["usage"] == {"volumes": {"/data0": 0}, "disks": [], "storage": 0}
    head = kv.head("n")
    assert head is not None
    assert head.value.startswith(
        b'{"capacity":{"volumes":{"/data0":1099511627776},"disks":null,"storage":1099511627776},'
        b'"usage":{"volumes":{"/data0":0},"disks":[],"storage":0},"seq":1,'
    )
    assert storage.ok("get-node-resource-info", {"nodename": "n"})["usage"]["disks"] == []
    edit = {"nodename": "n", "resource_request": {"storage": "1G"}, "delta": True, "incr": True}
    changed = storage.ok("set-node-resource-capacity", edit)
    assert changed["before"] == {"volumes": {"/data0": T}, "disks": [], "storage": T}
    assert changed["after"]["disks"] == []
    head = kv.head("n")
    assert head is not None and head.json()["capacity"]["disks"] == []

    bare = {"nodename": "bare", "capacity": {"volumes": None, "disks": None, "storage": 5}}
    assert storage.ok("set-node-resource-info", {**bare, "usage": None}) is None
    taken = storage.ok(
        "set-node-resource-usage",
        {"nodename": "bare", "resource_request": {"storage": "1"}, "delta": True, "incr": True},
    )
    assert taken["before"] == {"volumes": {}, "disks": [], "storage": 0}
    assert taken["after"] == {"volumes": {}, "disks": [], "storage": 1}


def test_add_node_without_engine_info_writes_empty_lists_as_upstream_parsed_them(
    storage: Plugin,
) -> None:
    added = storage.ok("add-node", {"nodename": "n", "resource": {"storage": "1G"}})
    assert added["capacity"] == {"volumes": {}, "disks": [], "storage": G}
    assert added["usage"] == {"volumes": {}, "disks": [], "storage": 0}


def test_a_record_an_older_release_wrote_with_null_usage_disks_still_verifies(
    storage: Plugin, kv: Etcd
) -> None:
    """Before 0.9 a node added with no disks was written ``"disks":null`` in usage; its stream
    now folds to ``[]``: the same list to every reader, so verify finds nothing."""
    storage.ok("add-node", {"nodename": "old", "resource": {"volumes": ["/data0:1T"]}})
    head = kv.head("old")
    assert head is not None
    older = head.value.replace(b'"disks":[],"storage":0}', b'"disks":null,"storage":0}', 1)
    assert older != head.value
    kv.put_many({kv.head_key("old"): older})
    verified = storage.run("verify", None, "old")
    assert verified.status == 0, verified.stdout + verified.stderr
    info = storage.ok("get-node-resource-info", {"nodename": "old"})
    assert info["usage"]["disks"] is None  # read as stored


def test_answers_are_written_as_gos_maps_with_sorted_keys(storage: Plugin) -> None:
    """An upstream answer is a Go map (``RawParams``): its keys, and every map's inside it,
    come sorted (``diffs`` before ``usage``, ``after`` before ``before``, nodes by name); the
    Go structs it holds keep their fields' order."""
    for node in ("nb", "na"):
        storage.ok(
            "add-node", {"nodename": node, "resource": {"volumes": ["/data1:1T", "/data0:1T"]}}
        )
    info = storage.through("get-node-resource-info", {"nodename": "nb"}).stdout
    assert info.startswith('{"capacity":{"volumes":{"/data0":') and '"diffs":[],"usage":{' in info
    edit = {"nodename": "nb", "resource_request": {"storage": "1G"}, "delta": True, "incr": True}
    assert storage.through("set-node-resource-capacity", edit).stdout.startswith('{"after":{')
    asked = {"nodenames": ["nb", "na"], "workload_resource_request": {"volumes": ["AUTO:/x:rw:1G"]}}
    capacity = storage.through("get-nodes-deploy-capacity", asked).stdout
    assert capacity.index('"na":') < capacity.index('"nb":')
    realloc = {"nodename": "nb", "workload_resource": {},
               "workload_resource_request": {"volumes": ["AUTO:/x:rw:1G"]}}  # fmt: skip
    answer = storage.through("calculate-realloc", realloc).stdout
    assert answer.startswith('{"delta_resource":{"volumes_request":[]')
    assert answer.index('"engine_params":') < answer.index('"workload_resource":')
