"""resource-gpu's answers in the bytes a Go plugin writes (docs/verbs.md, "Wire forms"): a
map's keys sorted at every level, Go's float64 form, an empty card map written ``{}``."""

from __future__ import annotations

import pytest

from tests.etcdkv import Etcd
from tests.plugin import Plugin, R, counts

pytestmark = [pytest.mark.grpc, pytest.mark.resident]


def test_gpu_answers_are_written_as_a_go_plugin_writes_them(plugin: Plugin) -> None:
    plugin.add("gb", {"nvidia-t4": 2, "nvidia-a100": 2})
    plugin.add("ga", None)
    info = plugin.through("get-node-resource-info", {"nodename": "gb"}).stdout
    assert info == (
        '{"capacity":{"prod_count_map":{"nvidia-a100":2,"nvidia-t4":2}},"diffs":[],'
        '"usage":{"prod_count_map":{}}}\n'
    )
    take = {"nodename": "gb", "resource": R({"nvidia-t4": 1}), "delta": True, "incr": True}
    assert plugin.through("set-node-resource-usage", take).stdout == (
        '{"after":{"prod_count_map":{"nvidia-t4":1}},"before":{"prod_count_map":{}}}\n'
    )
    asked = {"nodenames": ["gb", "ga"], "workload_resource": R({"nvidia-t4": 1})}
    assert plugin.through("get-nodes-deploy-capacity", asked).stdout == (
        '{"nodes_deploy_capacity_map":{"gb":{"Capacity":1,"Usage":0.25,"Rate":0.25,'
        '"Weight":1}},"total":1}\n'
    )
    nothing = {"nodenames": ["gb", "ga"], "workload_resource": None}
    assert plugin.through("get-nodes-deploy-capacity", nothing).stdout == (
        '{"nodes_deploy_capacity_map":{"ga":{"Capacity":1000000,"Usage":0,"Rate":0,'
        '"Weight":1},"gb":{"Capacity":1000000,"Usage":0.25,"Rate":0,"Weight":1}},'
        '"total":2000000}\n'
    )
    realloc = {"nodename": "gb", "workload_resource": R({"nvidia-t4": 1}),
               "workload_resource_request": R({"nvidia-t4": -1, "nvidia-a100": 1})}  # fmt: skip
    assert plugin.through("calculate-realloc", realloc).stdout == (
        '{"delta_resource":{"prod_count_map":{"nvidia-a100":1,"nvidia-t4":-1}},'
        '"engine_params":{"prod_count_map":{"nvidia-a100":1}},'
        '"workload_resource":{"prod_count_map":{"nvidia-a100":1}}}\n'
    )


def test_a_record_escapes_strings_as_go_does(plugin: Plugin, etcd: Etcd) -> None:
    """Go's json.Marshal escapes <, > and & (and U+2028, U+2029) in strings: the record
    upstream would write for a product of that name is ours, byte for byte, plus seq and the
    stream's tip."""
    product = "a<b>&c"
    plugin.add("esc", {product: 2})
    head = etcd.head("esc")
    assert head is not None
    upstream = b'{"capacity":{"prod_count_map":{"a\\u003cb\\u003e\\u0026c":2}},'
    upstream += b'"usage":{"prod_count_map":{}}'
    assert head.value.startswith(upstream + b',"seq":1,'), head.value
    assert not any(char in head.value for char in (b"<", b">", b"&"))
    assert counts(plugin.info("esc")["capacity"]) == {product: 2}  # and it reads back
