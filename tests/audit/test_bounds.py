"""Streams are bounded by default: each is compacted back to its share of ``streams.budget``
(the budget over the node count, at most ``streams.max_events``) once a write takes it a tenth
over, so the plugin's total stays within the budget whatever the number of nodes. A stream at
twice its bound whose events cannot be exported refuses the write, before anything is sent."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from resource_extend.ledger.etcd.choice import choose
from resource_extend.ledger.upkeep.bounds import EVENT_BYTES
from tests.audit.helpers import (
    G,
    added,
    error_line,
    event,
    export_chain,
    head,
    plant,
    take,
    used,
    write_streams,
)
from tests.etcdkv import Etcd, no_write
from tests.plugin import TRANSPORT, Plugin
from tests.storage.helpers import add_f4

pytestmark = pytest.mark.grpc


def planted(etcd: Etcd, node: str, count: int) -> None:
    """A node with ``count`` old events: added with 10,000 cards, then one taken per event."""
    events = [event(1, added({G: 10_000}))]
    events += [event(s, used({G: 1})) for s in range(2, count + 1)]
    plant(etcd, node, events, head({G: 10_000}, {G: count - 1}, count))


def test_a_fresh_install_bounds_a_stream_with_no_setting(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """No ``streams`` section at all: a stream past 1,000 events plus a tenth is compacted back
    to 1,000, into the default fallback under the caller's home, and every event is kept."""
    home = tmp_path / "home"
    home.mkdir()
    planted(etcd, "n1", 1100)
    env = {"HOME": str(home)}
    verb, request = take("n1", {G: 1})
    lengths = []
    for _ in range(2):
        result = plugin.run(verb, request, env=env)
        assert result.status == 0 and result.stderr == "", result.stderr
        lengths.append(len(etcd.events("n1")))
    assert lengths == [1000, 1001]  # back to the bound, then growing again
    exports = home / ".local/state/resource-extend/exports"
    chain = export_chain(etcd, "n1")
    assert [f.parent for f in chain.files] == [exports]
    assert [e["seq"] for e in chain.events] == list(range(1, 1103))


def test_the_total_stays_within_the_budget_however_many_nodes(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """A budget of 8 events for each of 10 nodes: each stream is held to 8; with 20 nodes the
    same budget holds each to 4 (and a tenth). The total is what the budget allows, not nodes
    times a per-node count."""
    directory = tmp_path / "exports"
    budget = 10 * 8 * EVENT_BYTES
    write_streams(plugin, {"budget": budget, "export_dir": str(directory)})
    for n in range(10):
        planted(etcd, f"n{n}", 12)
    for n in range(10):
        plugin.ok(*take(f"n{n}", {G: 1}))
    assert [len(etcd.events(f"n{n}")) for n in range(10)] == [8] * 10

    for n in range(10, 20):
        planted(etcd, f"n{n}", 3)
    for n in range(10):
        plugin.ok(*take(f"n{n}", {G: 1}))
    lengths = [len(etcd.events(f"n{n}")) for n in range(20)]
    # each of the first ten was at twice its new bound (8 of 4): compacted to 4 before the write
    assert lengths == [5] * 10 + [3] * 10
    assert sum(lengths) * EVENT_BYTES <= budget
    for n in range(10):
        assert export_chain(etcd, f"n{n}").events[-1]["seq"] == 14


@pytest.fixture
def unwritable(tmp_path: Path) -> Iterator[Path]:
    """A directory this process cannot create files in, root or not (root needs the
    immutable attribute: permissions do not stop it)."""
    directory = tmp_path / "locked"
    directory.mkdir()
    directory.chmod(0o555)
    immutable = os.geteuid() == 0
    if immutable:
        subprocess.run(["chattr", "+i", str(directory)], check=True, capture_output=True)
    try:
        with pytest.raises(OSError):
            (directory / "probe").touch()
        yield directory
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(directory)], check=True, capture_output=True)
        directory.chmod(0o755)


def test_a_stream_whose_events_cannot_be_exported_grows_then_refuses_writes(
    plugin: Plugin, etcd: Etcd, unwritable: Path
) -> None:
    """Past its bound the write still lands (compaction after it is quiet); at twice its bound
    the write first compacts, fails, and is refused with one line naming why; etcd is
    untouched."""
    write_streams(plugin, {"max_events": 10, "export_dir": str(unwritable)})
    planted(etcd, "n1", 18)
    plugin.ok(*take("n1", {G: 1}))
    plugin.ok(*take("n1", {G: 1}))
    assert len(etcd.events("n1")) == 20
    with no_write(etcd):
        line = error_line(plugin.run(*take("n1", {G: 1})), "set-node-resource-usage")
    assert "node n1" in line and "20 events, at least twice its bound of 10" in line, line
    assert "cannot write the export" in line and str(unwritable) in line, line
    assert list(unwritable.iterdir()) == []

    write_streams(plugin, {"max_events": 10, "export_dir": str(unwritable.parent / "ok")})
    plugin.ok(*take("n1", {G: 1}))
    assert len(etcd.events("n1")) == 11  # compacted to its bound, then the write
    assert [e["seq"] for e in export_chain(etcd, "n1").events] == list(range(1, 22))


def test_young_events_never_block_a_write_at_twice_the_bound(
    plugin: Plugin, etcd: Etcd, unwritable: Path
) -> None:
    """Events younger than ``streams.min_age`` cannot go, so they cannot make a write fail:
    the stream runs past twice its bound until they age (the export is never tried)."""
    write_streams(plugin, {"max_events": 2, "export_dir": str(unwritable)})
    plugin.add("n1", {G: 100})
    for _ in range(6):
        plugin.ok(*take("n1", {G: 1}))
    assert len(etcd.events("n1")) == 7


GROW = {"storage": "1G"}


def test_a_storage_stream_is_bounded_the_same_way(storage: Plugin, tmp_path: Path) -> None:
    """resource-storage's writes go through the same bound."""
    directory = tmp_path / "exports"
    config = json.loads(storage.config.read_text())
    config["streams"] = {"max_events": 3, "export_dir": str(directory), "min_age": 0}
    storage.config.write_text(json.dumps(config))
    add_f4(storage)
    for _ in range(4):
        storage.ok(
            "set-node-resource-capacity",
            {
                "nodename": "test0",
                "delta": True,
                "incr": True,
                "resource_request": {"storage": "1G"},
            },
        )
    events = storage.history("test0")
    assert events[0]["kind"] == "checkpoint" and len(events) == 3, events
    assert len(list(directory.iterdir())) == 1


def test_footprint_shows_each_streams_bound_and_the_budget_used(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    budget = 4 * 8 * EVENT_BYTES
    write_streams(plugin, {"budget": budget, "export_dir": str(tmp_path / "exports")})
    for n in range(4):
        planted(etcd, f"n{n}", 2)
    shown = plugin.run("footprint", None, "--json")
    assert shown.status == 0, shown.stderr
    policy = json.loads(shown.stdout)["streams"]
    assert policy == {"budget": budget, "max_events": 1000, "bound": 8, "counted": 8 * EVENT_BYTES}
    # etcd says what of its database is in use, over either transport (over gRPC, etcd3's
    # messages, which predate the field, dropped it: "? in use"); and which transport is taken
    transport = json.loads(shown.stdout)["transport"]
    taken = choose(TRANSPORT, many_calls=True, scan=True).transport  # a person's, scanning
    assert transport["this command"]["transport"] == taken, transport
    assert transport["core's calls"].startswith(f"transport {TRANSPORT}: "), transport
    in_use = json.loads(shown.stdout)["etcd"]["db_size_in_use"]
    assert isinstance(in_use, int) and in_use > 0, in_use
    table = plugin.run("footprint")
    assert "each stream is held to 8 events; they count 4.00 KiB at 512 B an event, 25% of " in (
        table.stdout
    ), table.stdout
