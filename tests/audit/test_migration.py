"""``migrate``: streams written by release 0.1 (events under the head) move to their own prefix,
byte for byte, in transactions of at most 128 operations; killed at any point, nothing is lost
or duplicated and the next run carries on. Writes to a node not yet moved move it first, or
fail asking for migrate; reads of its stream refuse."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.audit.helpers import REMOVED, Doc, G, added, event, head, plant, take, used
from tests.etcdkv import Etcd, no_write, prefix_end, upstream_head
from tests.faults import AnswerDroppingProxy
from tests.plugin import Plugin, binary


def stream(length: int) -> list[Doc]:
    """A node's life: added with 8 cards, then taking and giving back one card in turn."""
    return [event(1, added({G: 8}))] + [
        event(seq, used({G: 1 if seq % 2 == 0 else -1})) for seq in range(2, length + 1)
    ]


def plant_legacy(etcd: Etcd, node: str, length: int, *, removed: bool = False) -> list[bytes]:
    events = stream(length)
    if removed:
        events.append(event(length + 1, REMOVED, verb="remove-node"))
    usage = {G: 1} if length % 2 == 0 else {}
    plant(etcd, node, events, None if removed else head({G: 8}, usage, length), legacy=True)
    return [json.dumps(e).encode() for e in events]


def heads_prefix_keys(etcd: Etcd) -> list[str]:
    root = etcd.root.encode()
    reply = etcd._range(root, prefix_end(root))
    return [kv.key.decode()[len(etcd.root) :] for kv in reply.kvs]


def places(etcd: Etcd, node: str) -> tuple[dict[int, bytes], dict[int, bytes]]:
    """The node's events by seq, in 0.1's place and in the new one, both read at one revision
    (a write the killed process sent may land at any moment)."""

    def by_seq(kvs: Any) -> dict[int, bytes]:
        return {int(kv.key.rsplit("/", 1)[1]): kv.value for kv in kvs}

    revision = etcd.revision()
    return by_seq(etcd.legacy_events(node, revision)), by_seq(etcd.events(node, revision))


NODES = {"a": 1, "b": 300, "c": 130}
"""Stream lengths: b takes three transactions (127 events each at most), c two."""


def plant_all(etcd: Etcd) -> dict[str, list[bytes]]:
    planted = {node: plant_legacy(etcd, node, length) for node, length in NODES.items()}
    planted["gone"] = plant_legacy(etcd, "gone", 3, removed=True)
    etcd.put_upstream_head("u", upstream_head({G: 2}, {}))
    return planted


def assert_migrated(etcd: Etcd, planted: dict[str, list[bytes]]) -> None:
    for node, values in planted.items():
        old, new = places(etcd, node)
        assert old == {}, node
        assert list(new.values()) == values, node  # byte for byte, in order
        assert sorted(new) == list(range(1, len(values) + 1))
    assert sorted(heads_prefix_keys(etcd)) == ["a", "b", "c", "u"]  # records, nothing else


def test_migrate_moves_every_stream_byte_for_byte_and_leaves_only_records(
    plugin: Plugin, etcd: Etcd
) -> None:
    planted = plant_all(etcd)
    done = plugin.run("migrate", None, "--json")
    assert done.status == 0, done.stderr
    assert done.answer == {
        "nodes": {"a": 1, "b": 300, "c": 130, "gone": 4},
        "events": 435,
        "dry_run": False,
    }
    assert_migrated(etcd, planted)
    verified = plugin.run("verify", None, "--all")
    assert verified.status == 0, verified.stdout + verified.stderr
    assert plugin.history("b")[-1]["seq"] == 300
    with no_write(etcd):
        again = plugin.run("migrate")
    assert again.status == 0 and "nothing to migrate" in again.stdout


def test_dry_run_lists_and_changes_nothing(plugin: Plugin, etcd: Etcd) -> None:
    plant_all(etcd)
    with no_write(etcd):
        listed = plugin.run("migrate", None, "--dry-run")
    assert listed.status == 0, listed.stderr
    assert "node b: 300 events to move" in listed.stdout
    assert "4 nodes, 435 events to move (nothing was changed)" in listed.stdout


def test_a_write_moves_an_unmigrated_stream_first(plugin: Plugin, etcd: Etcd) -> None:
    values = plant_legacy(etcd, "a", 5)
    answer = plugin.ok(*take("a", {G: 2}))
    assert answer["after"]["prod_count_map"] == {G: 2}
    old, new = places(etcd, "a")
    assert old == {}
    assert sorted(new) == [1, 2, 3, 4, 5, 6]
    assert [new[seq] for seq in range(1, 6)] == values
    assert plugin.run("verify", None, "a").status == 0


def test_a_write_to_a_long_unmigrated_stream_fails_asking_for_migrate(
    plugin: Plugin, etcd: Etcd
) -> None:
    plant_legacy(etcd, "a", 600)
    with no_write(etcd):
        line = plugin.fails(*take("a", {G: 1}))
    assert line.startswith("resource-gpu set-node-resource-usage: node a: 600 events"), line
    assert "'resource-gpu migrate'" in line


def test_reading_an_unmigrated_stream_asks_for_migrate(plugin: Plugin, etcd: Etcd) -> None:
    plant_legacy(etcd, "a", 3)
    for command in (["history", "a"], ["show", "a"]):
        result = plugin.run(command[0], None, *command[1:])
        assert result.status != 0 and result.stdout == ""
        assert result.stderr.count("\n") == 1, result.stderr
        assert "'resource-gpu migrate'" in result.stderr, (command, result.stderr)
    verified = plugin.run("verify", None, "a")  # verify reports each node on stdout
    assert verified.status == 1
    assert verified.stdout.startswith("node a: cannot verify: 3 events of this node are still")
    assert "'resource-gpu migrate'" in verified.stdout
    info = plugin.ok("get-node-resource-info", {"nodename": "a"})  # heads are where they were
    assert info["capacity"]["prod_count_map"] == {G: 8}


def start(plugin: Plugin, *args: str) -> subprocess.Popen[bytes]:
    environment = {k: v for k, v in os.environ.items() if k != "ERU_RESOURCE_CONFIG_PATH"}
    environment["ERU_RESOURCE_CONFIG_PATH"] = str(plugin.config)
    return subprocess.Popen(
        [*binary(), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment,
    )


@pytest.mark.parametrize("at_answer", [False, True], ids=["sent", "answered"])
@pytest.mark.parametrize("write", [1, 3, 5])
def test_killed_at_any_write_migrate_loses_and_duplicates_nothing(
    etcd_endpoints: list[str], tmp_path: Path, write: int, at_answer: bool
) -> None:
    """b and c take five transactions; the process is killed as its ``write``-th goes to etcd
    (before etcd answers, or as it does). At that moment every event is in exactly one place;
    a second run finishes the job."""
    proxy = AnswerDroppingProxy(etcd_endpoints[0])
    try:
        plugin = Plugin([proxy.url], tmp_path, timeout=10)
        etcd = Etcd(etcd_endpoints, plugin.prefix)
        planted = plant_all(etcd)
        migrating = start(plugin, "migrate")
        proxy.crash_on_next_write(
            lambda: migrating.send_signal(signal.SIGKILL), at_answer=at_answer, skip=write - 1
        )
        migrating.communicate(timeout=60)
        assert migrating.returncode == -signal.SIGKILL, "the kill never came"
        for node, values in planted.items():
            old, new = places(etcd, node)
            assert not old.keys() & new.keys(), f"{node}: events in both places"
            merged = {**old, **new}
            assert [merged[seq] for seq in sorted(merged)] == values, node
        finished = plugin.run("migrate")
        assert finished.status == 0, finished.stderr
        assert_migrated(etcd, planted)
        verified = plugin.run("verify", None, "--all")
        assert verified.status == 0, verified.stdout + verified.stderr
        etcd.close()
    finally:
        proxy.close()
