"""Racing compactions: every event removed from etcd is in exactly one export file that a
checkpoint references, and no export file is referenced by none.

Several ``compact`` processes with different ``--keep`` start at the same moment on a long
stream, while writers append (and their appends compact too: ``streams.max_events``). Two
compactions that start from the same first event must not both commit: the second would
delete the first one's checkpoint, leaving its export referenced by nobody and its events in
two exports.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone
from pathlib import Path

import pytest

from tests.audit.helpers import (
    G,
    added,
    event,
    export_chain,
    head,
    ok_text,
    plant,
    prod,
    run,
    take,
    used,
    write_streams,
)
from tests.etcdkv import Etcd
from tests.plugin import Plugin, Result

pytestmark = pytest.mark.grpc

NODE = "n1"
CAPACITY = 100_000
ROUNDS = 4
BATCH = 1500
"""Events laid down before each round: long enough that each compaction takes a while to
read and export them, so the racers overlap."""
KEEPS = (1, 2, 3, 5, 8, 13)
WRITES = 3
"""Appends per writer per round, each taking one card (and compacting, being over the bound)."""
WRITERS = 2


def last_seq(etcd: Etcd) -> int:
    kv = etcd.head(NODE)
    assert kv is not None
    return int(kv.json()["seq"])


def extend(etcd: Etcd, usage: int) -> None:
    """Lay down ``BATCH`` more events (a card taken and given back by turns, so usage ends as
    it was) and move the head past them."""
    start = last_seq(etcd) + 1
    now = datetime.now(timezone.utc)
    events = [
        event(seq, used({G: 1 if (seq - start) % 2 == 0 else -1}), at=now)
        for seq in range(start, start + BATCH)
    ]
    plant(etcd, NODE, events, head({G: CAPACITY}, {G: usage} if usage else {}, start + BATCH - 1))


def test_racing_compactions_leave_each_event_in_exactly_one_referenced_export(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    directory = tmp_path / "exports"
    directory.mkdir()
    write_streams(plugin, {"max_events": 4, "export_dir": str(directory), "min_age": 0})
    plant(etcd, NODE, [event(1, added({G: CAPACITY}))], head({G: CAPACITY}, {}, 1))
    compactions: list[Result] = []
    appends: list[Result] = []
    usage = 0

    def compact(keep: int, go: threading.Barrier) -> None:
        argv = ["compact", NODE, "--keep", str(keep), "--min-age", "0"]
        go.wait()
        compactions.append(run(plugin, *argv, "--export-dir", str(directory)))

    def write(go: threading.Barrier) -> None:
        go.wait()
        for _ in range(WRITES):
            appends.append(plugin.run(*take(NODE, {G: 1})))

    for _ in range(ROUNDS):
        extend(etcd, usage)
        go = threading.Barrier(len(KEEPS) + WRITERS)
        threads = [threading.Thread(target=compact, args=(k, go)) for k in KEEPS]
        threads += [threading.Thread(target=write, args=(go,)) for _ in range(WRITERS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        usage += WRITES * WRITERS

    for result in appends:
        ok_text(result, "an append")
    for result in compactions:
        # a compaction may lose every race it runs (then it says so), but never fails otherwise
        assert result.status == 0 or "contention" in result.stderr, result.stderr

    # Published exports (a .partial is an unpublished temporary, which a compaction whose
    # answer was lost, here only by running out of etcd.timeout under load, may leave).
    written = [p.name for p in directory.iterdir() if p.name.endswith(".jsonl")]
    chain = export_chain(etcd, NODE)  # each referenced once, back to event 1
    unreferenced = sorted(set(written) - {p.name for p in chain.files})
    assert unreferenced == [], (
        f"{len(unreferenced)} of {len(written)} exports are referenced by no checkpoint"
    )
    seqs = sorted(e["seq"] for e in chain.events)
    assert seqs == list(range(1, last_seq(etcd) + 1)), "events lost or exported twice"
    assert len(chain.files) >= ROUNDS, "the test did not compact as often as it meant to"

    verified = run(plugin, "verify", NODE)
    assert verified.status == 0, verified.stdout + verified.stderr
    info = plugin.info(NODE)
    assert prod(info["usage"]) == {G: usage}
    deltas = [e["change"]["delta"][G] for e in chain.events if e["change"]["kind"] != "node_added"]
    assert sum(deltas) == usage, "a replay of the exports and the stream double-counts"
