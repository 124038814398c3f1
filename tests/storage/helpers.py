"""Shorthands for driving resource-storage as upstream's tests do."""

from __future__ import annotations

from typing import Any

from tests.plugin import Plugin

G = 2**30
T = 2**40
F4_VOLUMES = ["/data0:1T", "/data1:1T", "/data2:1T", "/data3:1T"]
"""Upstream's usual node ("F4"): four volumes of 1 TiB, so storage 4 TiB and no usage."""


def add_f4(storage: Plugin, node: str = "test0", volumes: list[str] | None = None) -> Any:
    return storage.ok(
        "add-node", {"nodename": node, "resource": {"volumes": volumes or F4_VOLUMES}}
    )


def info(storage: Plugin, node: str, workloads: list[Any] | None = None) -> Any:
    return storage.ok("get-node-resource-info", {"nodename": node, "workloads_resource": workloads})


def capacity_storage(storage: Plugin, node: str) -> int:
    return int(info(storage, node)["capacity"]["storage"])


def usage_storage(storage: Plugin, node: str) -> int:
    return int(info(storage, node)["usage"]["storage"])
