"""Tamper-evident streams: every event names the digest of the one before it (schema v3), and
the head carries the last one's, so an edit made with etcdctl shows in ``verify``, naming the
first bad seq, and ``--repair`` never trusts the tampered stream."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.audit.helpers import G, delete_key, run, take
from tests.etcdkv import Etcd
from tests.plugin import Plugin

Doc = dict[str, object]


def written(plugin: Plugin, etcd: Etcd, node: str = "n1", writes: int = 5) -> list[bytes]:
    """A node with ``writes`` cards taken after its add: events 1 .. writes + 1, as stored."""
    plugin.add(node, {G: 16})
    for _ in range(writes):
        plugin.ok(*take(node, {G: 1}))
    return [kv.value for kv in etcd.events(node)]


def put_event(etcd: Etcd, node: str, seq: int, value: bytes) -> None:
    etcd.put_many({etcd.event_key(node, seq): value})


def edited(value: bytes, change: Callable[[Doc], None]) -> bytes:
    doc = json.loads(value)
    change(doc)
    return json.dumps(doc, separators=(",", ":")).encode()


def test_new_events_are_chained_and_the_head_carries_the_tip(plugin: Plugin, etcd: Etcd) -> None:
    stored = written(plugin, etcd)
    docs = [json.loads(value) for value in stored]
    assert [d["v"] for d in docs] == [3] * 6
    assert docs[0]["prev"] is None
    import hashlib

    for before, after in zip(stored, docs[1:], strict=False):
        assert after["prev"] == hashlib.sha256(before).hexdigest()
    head = etcd.head("n1")
    assert head is not None
    assert head.json()["tip"] == hashlib.sha256(stored[-1]).hexdigest()
    assert run(plugin, "verify", "n1").status == 0


def set_delta(doc: Doc) -> None:
    doc["change"]["delta"] = {G: -5}  # type: ignore[index]


def edit_a_delta(etcd: Etcd, stored: list[bytes]) -> None:
    put_event(etcd, "n1", 3, edited(stored[2], set_delta))


def swap_two(etcd: Etcd, stored: list[bytes]) -> None:
    put_event(etcd, "n1", 3, edited(stored[3], lambda d: d.update(seq=3)))
    put_event(etcd, "n1", 4, edited(stored[2], lambda d: d.update(seq=4)))


def duplicate_the_last(etcd: Etcd, stored: list[bytes]) -> None:
    put_event(etcd, "n1", 7, edited(stored[5], lambda d: d.update(seq=7)))


def edit_the_last(etcd: Etcd, stored: list[bytes]) -> None:
    put_event(etcd, "n1", 6, edited(stored[5], lambda d: d.update(verb="forged")))


def plant_a_checkpoint(etcd: Etcd, stored: list[bytes]) -> None:
    checkpoint = {
        "kind": "checkpoint",
        "state": {"capacity": {G: 16}, "usage": {}},
        "first": 1,
        "last_at": json.loads(stored[3])["at"],
        "export": "elsewhere:/x.jsonl",
    }
    put_event(etcd, "n1", 4, edited(stored[3], lambda d: d.update(change=checkpoint)))


def move_under_another_key(etcd: Etcd, stored: list[bytes]) -> None:
    put_event(etcd, "n1", 4, stored[2])  # event 3, as stored, under event 4's key


CHAIN = "the chain breaks at seq"
TAMPERING: dict[str, tuple[Callable[[Etcd, list[bytes]], None], str]] = {
    "an event's delta edited": (edit_a_delta, f"{CHAIN} 4"),
    "two events swapped": (swap_two, f"{CHAIN} 3"),
    "an event duplicated at the next seq": (duplicate_the_last, f"{CHAIN} 7"),
    "the last event edited": (edit_the_last, "event 6 is not the one the head recorded"),
    "a checkpoint planted mid-stream": (plant_a_checkpoint, "a checkpoint in the middle"),
    "an event under another's key": (move_under_another_key, "stored under another event's"),
}


@pytest.mark.parametrize("how", sorted(TAMPERING))
def test_tampering_is_found_and_never_repaired(plugin: Plugin, etcd: Etcd, how: str) -> None:
    stored = written(plugin, etcd)
    tamper, named = TAMPERING[how]
    tamper(etcd, stored)
    result = run(plugin, "verify", "n1")
    assert result.status == 1 and "1 of 1 node disagrees" in result.stderr, result.stderr
    assert named in result.stdout, result.stdout
    before = etcd.revision()
    repaired = run(plugin, "verify", "n1", "--repair")
    assert repaired.status == 1, repaired.stdout
    assert "not repairable" in repaired.stdout or "cannot verify" in repaired.stdout
    assert etcd.revision() == before


def test_a_forged_checkpoint_is_found_by_its_export_and_by_the_chain(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """What a checkpoint says is checked against the export it names (its first seq, state
    and tip); a forged tip also breaks the chain at the event after it."""
    written(plugin, etcd)
    exports = tmp_path / "exports"
    exports.mkdir()
    argv = ("--keep", "2", "--min-age", "0", "--export-dir", str(exports))
    assert run(plugin, "compact", "n1", *argv).status == 0
    key = etcd.event_key("n1", 4)
    (checkpoint,) = [kv.value for kv in etcd.events("n1") if kv.key == key]
    forgeries = {
        "first": ("it goes back to seq 1, the checkpoint says 2", {"first": 2}),
        "tip": (f"{CHAIN} 5", {"tip": "0" * 64}),
    }
    for field, (named, change) in forgeries.items():
        forged = json.loads(checkpoint)
        forged["change"].update(change)
        put_event(etcd, "n1", 4, json.dumps(forged, separators=(",", ":")).encode())
        result = run(plugin, "verify", "n1")
        assert result.status == 1 and named in result.stdout, (field, result.stdout)
    put_event(etcd, "n1", 4, checkpoint)
    assert run(plugin, "verify", "n1").status == 0


def test_time_never_runs_backwards_and_the_writers_clock_is_kept(
    plugin: Plugin, etcd: Etcd
) -> None:
    """The last event was written by a host whose clock is an hour ahead: the next event's
    time is raised to that one's, and its own clock kept beside it, so ``--at`` stays
    monotone."""
    import hashlib
    from datetime import datetime, timedelta, timezone

    plugin.add("n1", {G: 16})
    (added,) = etcd.events("n1")
    ahead = datetime.now(timezone.utc) + timedelta(hours=1)
    stamp = ahead.isoformat().replace("+00:00", "Z")
    future = edited(added.value, lambda d: d.update(at=stamp))
    head = json.loads(etcd.head("n1").value)  # type: ignore[union-attr]
    head.update(tip=hashlib.sha256(future).hexdigest(), at=stamp)
    etcd.put_many({etcd.event_key("n1", 1): future, etcd.head_key("n1"): json.dumps(head).encode()})
    before = datetime.now(timezone.utc)
    plugin.ok(*take("n1", {G: 1}))
    second = json.loads(etcd.events("n1")[1].value)
    assert second["at"] == stamp
    clock = datetime.fromisoformat(second["clock"].replace("Z", "+00:00"))
    assert before <= clock < ahead
    assert run(plugin, "verify", "n1").status == 0


def test_stray_keys_are_reported_for_their_node_only(plugin: Plugin, etcd: Etcd) -> None:
    """A key under a node's events prefix that is not an event (``zzz``, or the bare prefix)
    never fails another node's command nor a core write; verify names it."""
    written(plugin, etcd, "n1", 2)
    written(plugin, etcd, "n2", 2)
    prefix = etcd.events_prefix("n1")
    etcd.put_many({prefix + "zzz": b"junk", prefix: b"bare"})
    plugin.ok(*take("n1", {G: 1}))
    nodes = run(plugin, "nodes", "--json")
    assert nodes.status == 0, nodes.stderr
    assert [row["events"] for row in json.loads(nodes.stdout)] == [4, 3]
    assert run(plugin, "history", "n1", "--json").status == 0
    result = run(plugin, "verify", "--all")
    assert result.status == 1 and "1 of 2 nodes disagrees" in result.stderr, result.stderr
    assert "node n1: keys that are not its events:" in result.stdout and "zzz" in result.stdout
    assert "n2" not in result.stdout


def test_a_key_squatting_past_the_head_fails_writes_naming_it_not_contention(
    plugin: Plugin, etcd: Etcd
) -> None:
    stored = written(plugin, etcd, "n1", 2)
    put_event(etcd, "n1", 4, edited(stored[-1], lambda d: d.update(seq=4)))
    before = etcd.revision()
    result = plugin.run(*take("n1", {G: 1}))
    assert result.status == 1 and "contention" not in result.stderr, result.stderr
    assert "event 4 already exists, though the head says the stream ends at 3" in result.stderr
    assert etcd.revision() == before


def test_export_prints_every_event_as_stored_even_one_that_cannot_be_read(
    plugin: Plugin, etcd: Etcd
) -> None:
    stored = written(plugin, etcd, "n1", 2)
    put_event(etcd, "n1", 2, b"{not an event")
    result = run(plugin, "export", "n1")
    assert result.status == 0, result.stderr
    assert result.stdout.splitlines() == [stored[0].decode(), "{not an event", stored[2].decode()]


def test_verify_prints_each_streams_digest_to_keep_outside_etcd(plugin: Plugin, etcd: Etcd) -> None:
    """A history rewritten whole (every event and the head) checks out by itself; the digest
    an auditor kept from before does not match it any more."""
    import hashlib

    stored = written(plugin, etcd, "n1", 2)
    result = run(plugin, "verify", "n1", "--digests")
    assert result.status == 0, result.stderr
    kept = f"node n1: seq 3, digest {hashlib.sha256(stored[-1]).hexdigest()}"
    assert result.stdout.splitlines()[0] == kept


def test_a_deleted_event_is_named_by_every_auditor_command(plugin: Plugin, etcd: Etcd) -> None:
    """A gap in the middle of a stream is no internal error and no silent fold across it: each
    command that would fold across it names the missing events."""
    written(plugin, etcd)
    delete_key(etcd, etcd.event_key("n1", 3))
    for argv in (("show", "n1"), ("show", "n1", "--at", "5"), ("history", "n1")):
        result = run(plugin, *argv)
        assert result.status == 1, (argv, result.stdout)
        assert "events 3..3 are missing from the stream" in result.stderr, (argv, result.stderr)
    assert run(plugin, "show", "n1", "--at", "2").status == 0  # before the gap
    assert "events 3..3 are missing" in run(plugin, "verify", "n1").stdout


def test_a_head_ahead_of_its_stream_fails_writes_rather_than_leave_a_gap(
    plugin: Plugin, etcd: Etcd
) -> None:
    """The head says the stream ends at seq 3, but event 3 is gone: appending event 4 would
    leave a gap for good, so the write is refused, naming it, and writes nothing."""
    written(plugin, etcd, "n1", 2)
    delete_key(etcd, etcd.event_key("n1", 3))
    before = etcd.revision()
    result = plugin.run(*take("n1", {G: 1}))
    assert result.status == 1 and "contention" not in result.stderr, result.stderr
    assert "event 3, the last, is missing from the stream, though the head says" in result.stderr
    assert etcd.revision() == before


def test_show_and_history_check_the_chain_over_what_they_read(plugin: Plugin, etcd: Etcd) -> None:
    """An edited event, or an edited last one (which only the node record's tip names): what
    ``show`` and ``history`` would fold through it is refused, naming the break and pointing
    at verify; a fold that does not reach it is shown as it is."""
    stored = written(plugin, etcd)  # events 1..6
    edit_a_delta(etcd, stored)  # event 3 now says 5 cards were given back
    for argv in (["show", "n1"], ["history", "n1"], ["history", "n1", "--json"]):
        result = run(plugin, *argv)
        assert result.status == 1 and result.stdout == "", (argv, result.stdout)
        assert "hash chain does not hold: event 4 does not name event 3" in result.stderr, argv
        assert "verify n1" in result.stderr
    earlier = run(plugin, "show", "n1", "--at", "2", "--json")
    assert earlier.status == 0, earlier.stderr
    assert json.loads(earlier.stdout)["usage"] == {"prod_count_map": {G: 1}}

    put_event(etcd, "n1", 3, stored[2])  # put back; now the last event is edited
    put_event(etcd, "n1", 6, edited(stored[5], set_delta))
    shown = run(plugin, "show", "n1")
    assert shown.status == 1, shown.stdout
    assert "the node record does not name event 6 as stored" in shown.stderr
    assert run(plugin, "show", "n1", "--at", "5").status == 0
