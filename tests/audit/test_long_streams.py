"""Auditing at any length: auditor commands read a stream by position and in pages, folding
from the nearest snapshot (every 1,000th event carries one), so what they show costs what they
show, not the stream's length; verify walks a whole stream a page at a time; compaction goes
in steps, and a write's compaction takes one step, the next write going on from there.

The streams are written straight into etcd as the plugin would have written them
(``tests.long_stream``); how fast each command is on 1,000,000 events is in
``scripts/bench --long``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from resource_extend.ledger.store import Store
from resource_extend.projections.gpu.node import NodeState
from tests.audit.helpers import G, ok_json, ok_text, run, stamp, take, write_streams
from tests.etcdkv import Etcd
from tests.long_stream import CARDS, at, grow, usage_after
from tests.plugin import Plugin

pytestmark = pytest.mark.grpc

LENGTH = 5_500
"""Past a compaction step (5,000 events) and five snapshots."""


def shown(plugin: Plugin, node: str, *argv: str) -> dict[str, object]:
    found: dict[str, object] = ok_json(run(plugin, "show", node, "--json", *argv))
    return found


def usage(seq: int) -> dict[str, dict[str, int]]:
    """The usage after event ``seq``, as ``show --json`` prints it."""
    return {"prod_count_map": {G: usage_after(seq)} if usage_after(seq) else {}}


CAPACITY = {"prod_count_map": {G: CARDS}}


def test_auditors_read_only_what_they_show(
    plugin: Plugin, etcd: Etcd, store: Store[NodeState]
) -> None:
    """Event 2 is made unreadable: whatever reads the stream from its start fails on it, so
    every answer below was folded from a snapshot near the end."""
    grow(store, "n1", LENGTH)
    etcd.put_many({etcd.event_key("n1", 2): b"{not an event"})

    now = shown(plugin, "n1")
    assert now == {"capacity": CAPACITY, "usage": usage(LENGTH), "seq": LENGTH}
    assert shown(plugin, "n1", "--at", "4321") == {
        "capacity": CAPACITY,
        "usage": usage(4321),
        "seq": 4321,
    }
    for when in (stamp(at(4321)), stamp(at(4321)).replace("Z", "+00:00")):
        assert shown(plugin, "n1", "--at", when)["seq"] == 4321  # a shown time is exact

    history = ok_json(run(plugin, "history", "n1", "--limit", "5", "--json"))
    assert [e["seq"] for e in history] == list(range(LENGTH - 4, LENGTH + 1))
    table = ok_text(run(plugin, "history", "n1", "--limit", "2"))
    assert f"{G}:1" in table.splitlines()[-1 if usage_after(LENGTH) else -2]
    around = ok_json(run(plugin, "history", "n1", "--since", "4999", "--until", "5001", "--json"))
    assert [e["seq"] for e in around] == [4999, 5000, 5001]
    assert ["snapshot" in e for e in around] == [False, True, False]
    written = around[1]["snapshot"]  # the node record written with event 5000
    assert written == {"capacity": CAPACITY, "usage": usage(5000), "seq": 5000}
    since = ok_json(run(plugin, "history", "n1", "--since", stamp(at(5498)), "--json"))
    assert [e["seq"] for e in since] == [5498, 5499, 5500]
    kinds = ["--kind", "usage_changed", "--limit", "2", "--json"]
    assert [e["seq"] for e in ok_json(run(plugin, "history", "n1", *kinds))] == [5499, 5500]

    whole = run(plugin, "history", "n1")
    assert whole.status != 0 and "event" in whole.stderr and "not readable" in whole.stderr
    verified = run(plugin, "verify", "n1")
    assert verified.status == 1 and "not readable" in verified.stdout + verified.stderr


def test_verify_walks_a_long_stream_and_checks_its_snapshots(
    plugin: Plugin, etcd: Etcd, store: Store[NodeState]
) -> None:
    grow(store, "n1", LENGTH)
    assert ok_text(run(plugin, "verify", "n1")).startswith("1 node verified")

    key = etcd.event_key("n1", 3000)
    doc = json.loads(etcd._kvs(etcd._range(key.encode()))[0].value)
    assert doc["snapshot"]["usage"] == usage(3000)  # the node record written with event 3000
    doc["snapshot"]["usage"] = {"prod_count_map": {G: 5}}
    etcd.put_many({key: json.dumps(doc, separators=(",", ":")).encode()})
    found = run(plugin, "verify", "n1", "--repair")
    assert found.status == 1
    assert "the snapshot in event 3000 is not the state folded there" in found.stdout
    assert "the chain breaks at seq 3001" in found.stdout
    assert "not repairable" in found.stdout


def test_compaction_goes_in_steps_and_names_the_export_holding_a_seq(
    plugin: Plugin, store: Store[NodeState], tmp_path: Path
) -> None:
    grow(store, "n1", LENGTH)
    exports = tmp_path / "exports"
    exports.mkdir()
    argv = ["--keep", "10", "--min-age", "0", "--export-dir", str(exports)]
    said = ok_text(run(plugin, "compact", "n1", *argv))
    assert "(2 steps, an export each)" in said
    files = sorted(exports.iterdir())
    assert [f.name.split(".")[1] for f in files] == [
        "000000000001-000000005000",
        "000000005000-000000005490",
    ]
    assert "2 exports checked" in ok_text(run(plugin, "verify", "n1"))

    gone = run(plugin, "show", "n1", "--at", "100")
    assert gone.status != 0
    assert "seq 100 is in an earlier export: the one named by the checkpoint (seq 5000)" in (
        gone.stderr
    )
    assert shown(plugin, "n1", "--at", "5495")["usage"] == usage(5495)


def test_a_write_compacts_a_long_stream_a_step_at_a_time(
    plugin: Plugin, etcd: Etcd, store: Store[NodeState], tmp_path: Path
) -> None:
    """A stream far past its bound is compacted by the writes to it, a step (5,000 events) at a
    time; each write's work stays done, and the next goes on from it."""
    exports = tmp_path / "exports"
    write_streams(plugin, {"max_events": 100, "min_age": 0, "export_dir": str(exports)})
    grow(store, "n1", 12_000)

    plugin.ok(*take("n1", {G: 1}))  # a step before (the stream is full), one after
    assert len(etcd.events("n1")) == 12_001 - 9_999 + 1
    plugin.ok(*take("n1", {G: 1}))
    assert len(etcd.events("n1")) == 101
    assert len(list(exports.iterdir())) == 3
    assert "3 exports checked" in ok_text(run(plugin, "verify", "n1"))


def test_the_recorded_first_is_a_hint_compaction_checks(
    plugin: Plugin, etcd: Etcd, store: Store[NodeState], tmp_path: Path
) -> None:
    """A write learns where its stream starts from the seq the last compaction recorded (two
    point reads, not a range over the stream). Left behind by an older release's compaction,
    or set by hand, it never makes a compaction lose or double an event."""
    grow(store, "n1", 300)
    exports = tmp_path / "exports"
    exports.mkdir()
    argv = ["--min-age", "0", "--export-dir", str(exports)]
    ok_text(run(plugin, "compact", "n1", "--keep", "10", *argv))
    recorded = etcd.events_prefix("n1") + "first"
    assert etcd._kvs(etcd._range(recorded.encode()))[0].value == b"290"

    etcd.put_many({recorded: b"1"})  # behind: as an older release's compaction leaves it
    ok_text(run(plugin, "compact", "n1", "--keep", "5", *argv))
    assert [kv.json()["seq"] for kv in etcd.events("n1")] == [295, 296, 297, 298, 299, 300]
    etcd.put_many({recorded: b"298"})  # ahead: set by hand
    ok_text(run(plugin, "compact", "n1", "--keep", "1", *argv))
    assert [kv.json()["seq"] for kv in etcd.events("n1")] == [299, 300]
    assert "3 exports checked" in ok_text(run(plugin, "verify", "n1"))  # each event once


def test_archived_points_read_only_the_exports_that_hold_them(
    plugin: Plugin, store: Store[NodeState], tmp_path: Path
) -> None:
    """Back from the newest, one export at a time: a point (or a history) in the newest export
    is answered though an older one is damaged; one that reaches the damaged one names it."""
    archive = tmp_path / "archive"
    archive.mkdir(mode=0o700)
    write_streams(plugin, {"archive_dir": str(archive), "budget": 0, "max_events": 0})
    grow(store, "n1", LENGTH)
    ok_text(run(plugin, "compact", "n1", "--keep", "10", "--min-age", "0"))
    oldest, newest = sorted(archive.iterdir())
    assert ".000000005000-000000005490." in newest.name
    oldest.write_text("{}\n")

    given = ("--archive", str(archive))
    assert shown(plugin, "n1", "--at", "5200", *given)["usage"] == usage(5200)
    assert shown(plugin, "n1", "--at", stamp(at(5200)), *given)["seq"] == 5200
    damaged = run(plugin, "show", "n1", "--at", "100", *given)
    assert damaged.status == 1 and oldest.name in damaged.stderr, damaged.stderr

    # history reads the archive back only as far as its selection reaches
    def seqs_of(*argv: str) -> list[int]:
        return [e["seq"] for e in ok_json(run(plugin, "history", "n1", *given, "--json", *argv))]

    assert seqs_of("--since", "5200") == list(range(5200, LENGTH + 1))
    assert seqs_of("--since", stamp(at(5200))) == list(range(5200, LENGTH + 1))
    assert seqs_of("--limit", "400") == list(range(LENGTH - 399, LENGTH + 1))
    assert seqs_of("--since", "5200", "--until", "5210") == list(range(5200, 5211))
    whole = run(plugin, "history", "n1", *given)
    assert whole.status == 1 and oldest.name in whole.stderr, whole.stderr
