"""``archive``: old events move out of etcd into one directory, each in exactly one file a
checkpoint names (``archive:<file>``); ``history``, ``show --at`` and ``verify`` read a node's
whole life across it with ``--archive``; an archive that cannot be written removes nothing."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from pathlib import Path

import pytest

from resource_extend.ledger.upkeep.bounds import EVENT_BYTES
from tests.audit.helpers import (
    G,
    error_line,
    ok_json,
    ok_text,
    prod,
    run,
    run_many,
    take,
    write_streams,
)
from tests.audit.test_bounds import planted, unwritable  # noqa: F401 (a fixture)
from tests.etcdkv import Etcd, no_write
from tests.plugin import Plugin, binary

pytestmark = pytest.mark.grpc

NODES = 3
LONG = 40
BOUND = 20
"""Each node's share: the archiver keeps streams at half of it (10)."""


def setup(plugin: Plugin, etcd: Etcd, archive: Path) -> None:
    budget = NODES * BOUND * EVENT_BYTES
    write_streams(plugin, {"budget": budget, "archive_dir": str(archive)})
    for n in range(NODES):
        planted(etcd, f"n{n}", LONG)


def test_the_archiver_keeps_streams_at_half_their_bound_and_loses_nothing(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    setup(plugin, etcd, archive)
    line = ok_text(run(plugin, "archive"), "archive")
    assert line.strip() == (
        f"{NODES} nodes: {NODES} streams compacted, {NODES * (LONG - 10)} events archived "
        f"into {archive}; {NODES * 10} events left in etcd"
    )
    files = sorted(archive.iterdir())
    assert len(files) == NODES and not [f for f in files if f.name.endswith(".partial")]
    for n in range(NODES):
        live = etcd.event_docs(f"n{n}")
        assert len(live) == 10
        checkpoint = live[0]
        assert checkpoint["verb"] == "archive"
        where = checkpoint["change"]["export"]
        assert where.startswith("archive:") and "/" not in where, where
        (named,) = [f for f in files if f.name == where.removeprefix("archive:")]
        kept = [e["seq"] for e in live[1:]]
        exported = [json.loads(x)["seq"] for x in named.read_text().splitlines()]
        assert sorted(exported + kept) == list(range(1, LONG + 1))  # each event once

    again = ok_text(run(plugin, "archive"), "archive")
    assert f"0 streams compacted, 0 events archived into {archive}" in again
    assert len(list(archive.iterdir())) == NODES


def test_history_show_and_verify_read_a_nodes_whole_life_across_the_archive(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    setup(plugin, etcd, archive)
    ok_text(run(plugin, "archive"), "archive")
    for _ in range(3):
        plugin.ok(*take("n0", {G: 1}))
    moved = tmp_path / "copied-elsewhere"
    shutil.copytree(archive, moved)
    write_streams(plugin, {"budget": NODES * BOUND * EVENT_BYTES})  # no archive_dir any more

    history, at_5, verified, unpointed, allowed = run_many(
        plugin,
        [
            ["history", "n0", "--json", "--archive", str(moved)],
            ["show", "n0", "--at", "5", "--json", "--archive", str(moved)],
            ["verify", "--all", "--archive", str(moved)],
            ["verify", "--all"],
            ["verify", "--all", "--allow-elsewhere"],
        ],
    )
    events = ok_json(history)
    assert [e["seq"] for e in events] == list(range(1, LONG + 4))
    assert not [e for e in events if e["kind"] == "checkpoint"]
    assert ok_json(at_5)["seq"] == 5 and prod(ok_json(at_5)["usage"]) == {G: 4}
    assert ok_text(verified).strip() == (
        f"{NODES} nodes verified: every head agrees with its stream, {NODES} exports checked"
    )
    # Not given the archive, verify cannot check the checkpoints: a disagreement, unless allowed.
    assert unpointed.status == 1
    assert "is in the archive: not checked here, so neither is its checkpoint" in unpointed.stdout
    assert "--archive DIR reads it; --allow-elsewhere takes it on trust" in unpointed.stdout
    said = ok_text(allowed)
    assert "is in the archive: not checked here (allowed)" in said
    assert said.strip().endswith(f"{NODES} elsewhere not checked (allowed)")

    without = run(plugin, "show", "n0", "--at", "5")
    assert "archive:" in error_line(without, "show")
    missing = run(plugin, "history", "n0", "--archive", str(tmp_path / "nowhere"))
    assert "is missing" in error_line(missing, "history")


def test_an_archive_that_cannot_be_written_removes_nothing(
    plugin: Plugin,
    etcd: Etcd,
    unwritable: Path,  # noqa: F811 (the fixture)
) -> None:
    setup(plugin, etcd, unwritable)
    with no_write(etcd):
        result = run(plugin, "archive")
    # The pass's summary, then every node it could not archive, each with why, and the count
    # (round six: a one-shot pass named only the first, and printed no summary).
    assert result.status == 1, result.stderr
    assert result.stdout.startswith(f"{NODES} nodes: 0 streams compacted"), result.stdout
    *failed, counted = result.stderr.splitlines()
    named = sorted(line.split(": ")[1] for line in failed)
    assert named == sorted(f"node n{n}" for n in range(NODES)), failed
    assert all("cannot write the export" in line for line in failed), failed
    said = f"{NODES} of {NODES} streams due not archived: each node is named above"
    assert counted == f"resource-gpu archive: {said}"
    assert list(unwritable.iterdir()) == []
    assert [len(etcd.events(f"n{n}")) for n in range(NODES)] == [LONG] * NODES


def test_an_archive_others_could_write_is_refused(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    archive = tmp_path / "open"
    archive.mkdir()
    archive.chmod(0o777)
    setup(plugin, etcd, archive)
    with no_write(etcd):
        line = error_line(run(plugin, "archive"), "archive")
    assert "writable by every user" in line and f"chmod o-w {archive}" in line, line


def test_an_archive_under_a_directory_others_could_write_is_refused(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """Refused before any compaction, in one line: whoever can write above it could put a
    directory of their own in its place."""
    above = tmp_path / "shared"
    above.mkdir()
    above.chmod(0o777)
    archive = above / "archive"
    setup(plugin, etcd, archive)
    with no_write(etcd):
        line = error_line(run(plugin, "archive"), "archive")
    assert f"cannot use the archive {str(archive)!r}: {above} is writable by others" in line
    assert [len(etcd.events(f"n{n}")) for n in range(NODES)] == [LONG] * NODES


def test_a_running_archiver_keeps_passing_and_stops_cleanly_on_sigterm(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    archive = tmp_path / "archive"
    setup(plugin, etcd, archive)
    env = {k: v for k, v in os.environ.items() if k != "ERU_RESOURCE_CONFIG_PATH"}
    argv = [*binary(plugin.program), "--config", str(plugin.config), "archive", "--every", "1"]
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    try:
        assert process.stdout is not None
        first = process.stdout.readline().decode()
        second = process.stdout.readline().decode()
        process.send_signal(signal.SIGTERM)
        rest, errors = process.communicate(timeout=30)
    finally:
        process.kill()
    assert f"{NODES} streams compacted" in first and "0 streams compacted" in second
    assert process.returncode == 0 and errors == b""
    assert (
        rest.decode().strip().splitlines()[-1] == f"stopped: {archive} holds every event archived"
    )


def test_verify_and_compact_of_every_node_outlast_one_calls_etcd_budget(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """``etcd.timeout`` bounds a core call; an operator's pass over every node gives it to each
    request instead (it bounded the whole pass, which then failed part-way)."""
    for n in range(300):
        planted(etcd, f"n{n:03d}", 6)
    config = json.loads(plugin.config.read_text())
    config["etcd"]["timeout"] = 0.2
    config["streams"] = {"export_dir": str(tmp_path / "exports")}
    plugin.config.write_text(json.dumps(config))
    verified = ok_text(run(plugin, "verify", "--all"), "verify")
    assert verified.strip() == "300 nodes verified: every head agrees with its stream"
    compacted = ok_text(run(plugin, "compact", "--all", "--keep", "2", "--min-age", "0"))
    assert len(compacted.splitlines()) == 300 and "nothing to compact" not in compacted
    assert {len(etcd.events(f"n{n:03d}")) for n in range(300)} == {3}


def test_the_configured_archive_is_read_when_it_can_be_and_the_stream_shown_when_not(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """``--archive`` must hold the whole chain; ``streams.archive_dir`` alone never turns a
    history that used to answer into an error."""
    archive = tmp_path / "archive"
    setup(plugin, etcd, archive)
    ok_text(run(plugin, "archive"), "archive")
    whole = ok_json(run(plugin, "history", "n0", "--json"))
    assert [e["seq"] for e in whole] == list(range(1, LONG + 1))
    for file in archive.iterdir():
        file.unlink()
    live = ok_json(run(plugin, "history", "n0", "--json"))
    assert live[0]["kind"] == "checkpoint" and live[-1]["seq"] == LONG
    missing = run(plugin, "history", "n0", "--archive", str(archive))
    assert "is missing" in error_line(missing, "history")
