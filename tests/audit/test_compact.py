"""``export NODE`` and ``compact NODE...|--all --keep N [--export-dir DIR]``.

Compaction writes the events it removes to an export file first, then in one etcd transaction
puts a checkpoint (the full state) at the seq of the newest removed event and deletes the older
keys. history, show --at and verify work from the checkpoint; points before it fail naming the
export.
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from resource_extend.projections.gpu.events import decode_event
from tests.audit.helpers import (
    A,
    Doc,
    G,
    added,
    error_line,
    event,
    export_chain,
    grown,
    head,
    minute,
    ok_json,
    ok_text,
    parse_time,
    plant,
    prod,
    run,
    run_many,
    seqs,
    take,
    usage_error,
    used,
    write_streams,
)
from tests.etcdkv import Etcd, no_write
from tests.plugin import Plugin

pytestmark = pytest.mark.grpc

STREAM: list[Doc] = [
    event(1, added({G: 4}), verb="add-node"),
    event(2, used({G: 1})),
    event(3, used({G: 1})),
    event(4, grown({A: 2}), verb="set-node-resource-capacity"),
    event(5, used({A: 1})),
    event(6, used({G: -1})),
    event(7, used({A: 1})),
    event(8, used({G: 1})),
]
AFTER_5 = {"capacity": {G: 4, A: 2}, "usage": {G: 2, A: 1}}
AFTER_8 = {"capacity": {G: 4, A: 2}, "usage": {G: 2, A: 2}}


def state(capacity: dict[str, int], usage: dict[str, int], seq: int) -> dict[str, Any]:
    return {
        "capacity": {"prod_count_map": capacity},
        "usage": {"prod_count_map": usage},
        "seq": seq,
    }


def exports(directory: Path) -> list[Path]:
    return sorted(directory.iterdir())


def lines_of(path: Path) -> list[Doc]:
    """An export file's events; each line must decode as an event of this release."""
    lines = path.read_bytes().splitlines()
    for line in lines:
        decode_event(line)
    return [json.loads(line) for line in lines]


def stored(etcd: Etcd, node: str) -> list[Doc]:
    return etcd.event_docs(node)


def test_export_prints_the_stream_as_json_lines(plugin: Plugin, etcd: Etcd) -> None:
    plant(etcd, "n1", STREAM[:3], head({G: 4}, {G: 2}, 3))
    plugin.ok(*take("n1", {G: 1}))  # one written by the binary, too
    out = ok_text(run(plugin, "export", "n1"))
    assert out.endswith("\n") and not out.endswith("\n\n")
    lines = out.splitlines()
    assert [decode_event(line.encode()).seq for line in lines] == [1, 2, 3, 4]
    assert [json.loads(line) for line in lines] == stored(etcd, "n1")
    assert lines[3].encode() == etcd.events("n1")[3].value  # the binary's own bytes, as stored


def test_compact_exports_then_puts_a_checkpoint_in_one_transaction(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    plant(etcd, "n1", STREAM, head(AFTER_8["capacity"], AFTER_8["usage"], 8))
    directory = tmp_path / "exports"
    directory.mkdir()
    before = etcd.snapshot()
    old = stored(etcd, "n1")
    revision = etcd.revision()

    out = ok_text(run(plugin, "compact", "n1", "--keep", "3", "--export-dir", str(directory)))

    assert etcd.revision() == revision + 1, "compaction was not one etcd transaction"
    (export,) = exports(directory)
    assert export.name.endswith(".jsonl")
    assert lines_of(export) == old[:5], "the export must hold exactly the removed events"
    assert out.splitlines() == [out.strip()] and out.startswith("node n1: ")
    assert "1..5" in out and str(export.resolve()) in out

    after = etcd.snapshot()
    for seq in (1, 2, 3, 4):
        assert etcd.event_key("n1", seq) not in after, f"event {seq} was not deleted"
    for seq in (6, 7, 8):
        key = etcd.event_key("n1", seq)
        assert after[key] == before[key], f"event {seq} was touched"
    head_key = etcd.head_key("n1")
    assert after[head_key] == before[head_key], "the head was touched"
    recorded = etcd.events_prefix("n1") + "first"  # where the stream now starts
    assert after[recorded].value == b"5" and recorded not in before
    assert len(after) == len(before) - 4 + 1

    checkpoint = after[etcd.event_key("n1", 5)].json()
    decode_event(after[etcd.event_key("n1", 5)].value)
    assert checkpoint["seq"] == 5 and checkpoint["verb"] == "compact" and checkpoint["v"] == 3
    change = checkpoint["change"]
    assert change["kind"] == "checkpoint"
    assert change["first"] == 1
    assert change["state"] == AFTER_5
    assert parse_time(change["last_at"]) == minute(4)
    assert change["export"].endswith(f":{export.resolve()}"), change["export"]

    # everything works from the checkpoint on; points before it name the export
    gone = {
        "show": [["--at", "3"], ["--at", "2026-11-01T10:03:59.999999"]],
        "history": [["--until", "4"], ["--until", "2026-11-01T10:03:30Z", "--json"]],
    }
    failing = [[command, "n1", *argv] for command, points in gone.items() for argv in points]
    *results, verify_result = run_many(
        plugin,
        [
            ["history", "n1", "--json"],
            ["show", "n1", "--at", "5", "--json"],
            ["show", "n1", "--at", "7", "--json"],
            ["show", "n1", "--at", "2026-11-01T10:04:00Z", "--json"],  # the checkpoint's time
            ["show", "n1", "--at", "2026-11-01T10:05:30", "--json"],
            ["history", "n1", "--until", "5", "--json"],
            ["history", "n1", "--since", "2026-11-01T10:04:00Z", "--json"],
            ["nodes", "--json"],
            *failing,
            ["verify", "n1"],
        ],
    )
    errors = results[-len(failing) :]
    history, at5, at7, at_last, between, until5, since, nodes = map(ok_json, results[:8])
    assert seqs(history) == [5, 6, 7, 8]
    assert history[0]["kind"] == "checkpoint" and history[0]["change"] == change
    assert at5 == state({G: 4, A: 2}, {G: 2, A: 1}, 5)
    assert at7 == state({G: 4, A: 2}, {G: 1, A: 2}, 7)
    assert at_last == at5
    assert between == state({G: 4, A: 2}, {G: 1, A: 1}, 6)
    assert seqs(until5) == [5]
    assert seqs(since) == [5, 6, 7, 8]
    assert [(n["nodename"], n["events"], n["seq"]) for n in nodes] == [("n1", 4, 8)]
    assert ok_text(verify_result).startswith("1 node verified")
    path = str(export.resolve())
    for argv, result in zip(failing, errors, strict=True):
        line = error_line(result, argv[0])
        assert "compacted" in line and path in line, line


def test_compacting_twice_chains_checkpoints(plugin: Plugin, etcd: Etcd, tmp_path: Path) -> None:
    plant(etcd, "n1", STREAM, head(AFTER_8["capacity"], AFTER_8["usage"], 8))
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    ok_text(run(plugin, "compact", "n1", "--keep", "3", "--export-dir", str(first)))
    plugin.ok(*take("n1", {G: 1}))  # event 9
    middle = stored(etcd, "n1")
    assert seqs(middle) == [5, 6, 7, 8, 9]

    out = ok_text(run(plugin, "compact", "--all", "--keep", "1", "--export-dir", str(second)))
    (export,) = exports(second)
    assert "1..8" in out and str(export.resolve()) in out
    assert lines_of(export) == middle[:4]  # the first checkpoint and events 6..8

    history, verified, shown = run_many(
        plugin,
        [["history", "n1", "--json"], ["verify", "--all"], ["show", "n1", "--at", "6"]],
    )
    events = ok_json(history)
    assert seqs(events) == [8, 9]
    change = events[0]["change"]
    assert change["kind"] == "checkpoint" and change["first"] == 1
    assert change["state"] == AFTER_8
    assert change["export"].endswith(f":{export.resolve()}")
    assert ok_text(verified).startswith("1 node verified")
    line = error_line(shown, "show")
    assert "1..8" in line and str(export.resolve()) in line, line
    info = plugin.info("n1")
    assert (prod(info["capacity"]), prod(info["usage"])) == ({G: 4, A: 2}, {G: 3, A: 2})


def test_bad_compactions_change_nothing(plugin: Plugin, etcd: Etcd, tmp_path: Path) -> None:
    plant(etcd, "n1", STREAM, head(AFTER_8["capacity"], AFTER_8["usage"], 8))
    # nowhere to export by default: unbounded streams, and the fallback directory emptied
    write_streams(plugin, {"budget": 0, "max_events": 0, "export_dir": ""})
    directory = tmp_path / "exports"
    directory.mkdir()
    missing = tmp_path / "no-such-dir"
    open_to_all = tmp_path / "open-to-all"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    open_above = tmp_path / "open-above"
    (open_above / "exports").mkdir(parents=True)
    open_above.chmod(0o777)  # another user could rename exports/ away and put theirs there
    cases: dict[str, tuple[list[str], list[str]]] = {
        "export dir writable by others": (
            ["n1", "--keep", "1", "--export-dir", str(open_to_all)],
            [f"{open_to_all} is writable by others (mode 777): chmod go-w {open_to_all}"],
        ),
        "a directory above it writable by others": (
            ["n1", "--keep", "1", "--export-dir", str(open_above / "exports")],
            [f"{open_above} is writable by others (mode 777)"],
        ),
        "no export dir": (["n1", "--keep", "1"], ["export"]),
        "export dir missing": (
            ["n1", "--keep", "1", "--export-dir", str(missing)],
            [f"--export-dir '{missing}' is not a directory: create it first (mkdir -p {missing})"],
        ),
    }
    both = ["n1", "--all", "--keep", "1", "--export-dir", str(directory)]
    targets = {"neither nodes nor --all": both[2:], "nodes and --all": both}
    with no_write(etcd):
        *results, neither, both_given, usage, nothing = run_many(
            plugin,
            [
                *(["compact", *argv] for argv, _ in cases.values()),
                *(["compact", *argv] for argv in targets.values()),
                ["compact", "n1", "--export-dir", str(directory)],  # no --keep
                ["compact", "n1", "--keep", "7", "--export-dir", str(directory)],
            ],
        )
    for (name, (_, fragments)), result in zip(cases.items(), results, strict=True):
        line = error_line(result, "compact")
        for fragment in fragments:
            assert fragment in line, (name, line)
    for result in (neither, both_given):
        assert "--all" in usage_error(result)  # a usage error: exit 2
    assert usage.status == 2 and "--keep" in usage.stderr
    assert ok_text(nothing).strip() == "node n1: nothing to compact"
    assert exports(directory) == exports(open_to_all) == exports(open_above / "exports") == []
    assert not missing.exists()


def test_a_stream_with_a_hole_is_not_compacted_and_leaves_no_export(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """Refused (events are missing), and the export it wrote first is removed again: an
    export file must hold exactly the events a compaction removed."""
    holed = [e for e in STREAM if e["seq"] != 3]
    plant(etcd, "n1", holed, head(AFTER_8["capacity"], AFTER_8["usage"], 8))
    with no_write(etcd):
        result = run(plugin, "compact", "n1", "--keep", "2", "--export-dir", str(tmp_path))
    assert "missing" in error_line(result, "compact")
    assert [p.name for p in tmp_path.iterdir() if re.search(r"\.jsonl", p.name)] == []


def test_a_hole_at_the_cut_is_reported_as_a_hole_not_contention(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    holed = [e for e in STREAM if e["seq"] != 6]
    plant(etcd, "n1", holed, head(AFTER_8["capacity"], AFTER_8["usage"], 8))
    with no_write(etcd):
        result = run(plugin, "compact", "n1", "--keep", "2", "--export-dir", str(tmp_path))
    line = error_line(result, "compact")
    assert "missing" in line and "contention" not in line, line


AGE = 4.0
"""A --min-age short enough to wait out, and long enough for a loaded machine to start a
compaction within it."""


def test_compaction_leaves_events_younger_than_min_age(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """Whatever --keep says, events younger than --min-age (default streams.min_age, 300 s)
    stay, and so does everything after the first of them; once old enough they go."""
    plugin.add("n1", {G: 8})
    plugin.ok(*take("n1", {G: 1}))
    plugin.ok(*take("n1", {G: 1}))
    written = time.monotonic()
    everything = ["n1", "--keep", "0", "--export-dir", str(tmp_path)]
    with no_write(etcd):
        by_default, young = run_many(
            plugin,
            [["compact", *everything], ["compact", *everything, "--min-age", "60"]],
        )
    for result in (by_default, young):
        assert ok_text(result).strip() == "node n1: nothing to compact"
    assert [p for p in tmp_path.iterdir() if p.name.startswith("n1.")] == []

    time.sleep(max(0.0, written + AGE + 0.2 - time.monotonic()))
    plugin.ok(*take("n1", {G: 1}))  # event 4: young again
    out = ok_text(run(plugin, "compact", *everything, "--min-age", str(AGE)))
    assert "events 1..3 were compacted" in out, out
    assert seqs(stored(etcd, "n1")) == [3, 4]
    assert seqs(export_chain(etcd, "n1").events) == [1, 2, 3, 4]
    assert ok_text(run(plugin, "verify", "n1")).startswith("1 node verified")


def test_compact_all_goes_on_past_a_node_it_cannot_compact_and_reports_every_one(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """A stream with a hole is not compacted; the nodes after it still are. stdout says what
    was compacted, stderr names each node that was not, with why (round six: those were on
    stdout among the successes, and stderr only counted them), then the count."""
    holed = [e for e in STREAM if e["seq"] != 3]
    plant(etcd, "a-holed", holed, head(AFTER_8["capacity"], AFTER_8["usage"], 8))
    plant(etcd, "b-whole", STREAM, head(AFTER_8["capacity"], AFTER_8["usage"], 8))
    directory = tmp_path / "exports"
    directory.mkdir()
    argv = ["compact", "--all", "--keep", "2", "--export-dir", str(directory)]
    result = run(plugin, *argv)
    assert result.status == 1, result.stderr
    (compacted,) = result.stdout.splitlines()
    assert compacted.startswith("node b-whole: events 1..6 were compacted")
    failed, counted = result.stderr.splitlines()
    assert failed.startswith("resource-gpu compact: node a-holed: not compacted: cannot compact")
    assert counted == "resource-gpu compact: 1 of 2 nodes not compacted"
    assert len(etcd.events("b-whole")) == 3


def test_a_checkpoint_row_shows_the_time_of_the_last_event_it_stands_for(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """Not when the compaction ran: so it sorts, and ``--until`` selects it, with its events."""
    plant(etcd, "n1", STREAM, head(AFTER_8["capacity"], AFTER_8["usage"], 8))
    directory = tmp_path / "exports"
    directory.mkdir()
    ok_text(run(plugin, "compact", "n1", "--keep", "3", "--export-dir", str(directory)))
    shown = stamp_of(minute(4))  # event 5, the checkpoint's seq, was written at minute 4
    table = ok_text(run(plugin, "history", "n1", "--until", shown))
    rows = [line.split() for line in table.splitlines()[1:]]
    assert [(row[0], row[1], row[3]) for row in rows] == [("5", shown, "checkpoint")]


def stamp_of(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%SZ")
