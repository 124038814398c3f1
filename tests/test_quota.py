"""etcd full: a small ``--quota-backend-bytes`` driven into its NOSPACE alarm. Writes fail fast
with one line naming the alarm and the remedy, and write nothing; reads keep working (etcd
before 3.5.5 refuses even read-only transactions then); the remedy the line names works."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.etcd_server import Cluster, etcdctl_binary
from tests.etcdkv import Etcd
from tests.plugin import Plugin, R

pytestmark = pytest.mark.grpc

QUOTA = 2 * 1024 * 1024
FILLER = b"x" * 200_000


@pytest.fixture
def small_etcd() -> Iterator[Cluster]:
    cluster = Cluster(1, ["--quota-backend-bytes", str(QUOTA)]).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def etcdctl(cluster: Cluster, *args: str, stdin: bytes | None = None) -> str:
    done = subprocess.run(
        [etcdctl_binary(), f"--endpoints={cluster.endpoints[0]}", *args],
        input=stdin, capture_output=True, timeout=30,
    )  # fmt: skip
    return done.stdout.decode() + done.stderr.decode()


def fill(cluster: Cluster) -> None:
    """Put large values until etcd raises its NOSPACE alarm."""
    for i in range(4 * QUOTA // len(FILLER)):
        etcdctl(cluster, "put", f"/filler/{i}", stdin=FILLER)
        if "NOSPACE" in etcdctl(cluster, "alarm", "list"):
            return
    raise AssertionError("etcd never raised NOSPACE")


def free(cluster: Cluster) -> None:
    """The remedy the error line names: free keys, compact, defragment, disarm."""
    etcdctl(cluster, "del", "--prefix", "/filler/")
    revision = etcdctl(cluster, "get", "/", "-w", "fields").split('"Revision" : ')[1].split()[0]
    etcdctl(cluster, "compact", revision)
    etcdctl(cluster, "defrag")
    etcdctl(cluster, "alarm", "disarm")
    assert "NOSPACE" not in etcdctl(cluster, "alarm", "list")


def test_a_gpu_write_fails_fast_naming_the_alarm_and_writes_nothing(
    small_etcd: Cluster, tmp_path: Path
) -> None:
    plugin = Plugin(small_etcd.endpoints, tmp_path)
    plugin.add("n1", {"a100": 4})
    fill(small_etcd)
    take = {"nodename": "n1", "workloads_resource": [R({"a100": 1})], "delta": True, "incr": True}
    line = plugin.fails("set-node-resource-usage", take)
    assert "NOSPACE alarm is raised" in line and "etcdctl alarm disarm" in line, line
    # reads still answer: capacity, usage, the history
    assert plugin.info("n1")["usage"] == R({})
    assert [event["verb"] for event in plugin.history("n1")] == ["add-node"]
    free(small_etcd)
    plugin.ok("set-node-resource-usage", take)
    assert plugin.info("n1")["usage"] == R({"a100": 1})


def test_a_storage_write_fails_fast_too(small_etcd: Cluster, tmp_path: Path) -> None:
    storage = Plugin(small_etcd.endpoints, tmp_path, program="resource-storage")
    storage.ok("add-node", {"nodename": "n1", "resource": {"volumes": ["/data0:1T"]}})
    fill(small_etcd)
    line = storage.fails("add-node", {"nodename": "n2", "resource": {"volumes": ["/data0:1T"]}})
    assert "NOSPACE alarm is raised" in line, line
    capacity = storage.ok(
        "get-nodes-deploy-capacity",
        {"nodenames": ["n1"], "workload_resource": {"volumes": ["AUTO:/d:rw:1G"]}},
    )
    assert capacity["total"] > 0
    assert storage.ok("get-node-resource-info", {"nodename": "n2"}) is None  # never written


def test_footprint_answers_under_the_alarm_with_the_plugins_exact_share(
    small_etcd: Cluster, tmp_path: Path
) -> None:
    """The command an operator runs when etcd is full: it names the alarm, and counts the
    plugin's keys and bytes exactly (keys and values, as etcd holds them now)."""
    plugin = Plugin(small_etcd.endpoints, tmp_path)
    plugin.add("n1", {"a100": 4})
    plugin.add("n2", {"a100": 4})
    take = {"nodename": "n1", "workloads_resource": [R({"a100": 1})], "delta": True, "incr": True}
    plugin.ok("set-node-resource-usage", take)
    fill(small_etcd)
    result = plugin.run("footprint", None, "--json", "--top", "1")
    assert (result.status, result.stderr) == (0, ""), result
    found = json.loads(result.stdout)
    # etcd raises the alarm when a write would take its file past the quota: within a filler
    assert found["etcd"]["alarms"] == ["NOSPACE"]
    assert found["etcd"]["db_size"] > QUOTA - 2 * len(FILLER)
    etcd = Etcd(small_etcd.endpoints, plugin.prefix)
    try:
        held = etcd.snapshot()
    finally:
        etcd.close()
    heads = [kv for kv in held.values() if kv.key.startswith(etcd.root)]
    events = [kv for kv in held.values() if kv.key.startswith(etcd.events_root)]
    assert found["plugin"] == {
        "kind": "gpu", "prefix": plugin.prefix, "nodes": 2,
        "head_keys": 2, "head_bytes": sum(len(kv.key) + len(kv.value) for kv in heads),
        "event_keys": 3, "event_bytes": sum(len(kv.key) + len(kv.value) for kv in events),
        "largest": [{
            "node": "n1", "events": 2,
            "bytes": sum(len(kv.key) + len(kv.value) for kv in events if "/n1/" in kv.key),
        }],
    }  # fmt: skip
    table = plugin.run("footprint")
    assert table.status == 0 and "alarms: NOSPACE" in table.stdout, table
    assert "n1" in table.stdout.split("largest streams:")[1]
