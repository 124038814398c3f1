"""``verify`` checks the chain of exports a compacted stream's checkpoints name, back to event
1: each export on this host must hold exactly the events its checkpoint stands for. A missing
or mismatched export is a disagreement; an export left as ``.partial`` by a compaction
interrupted between its commit and the rename is reported, and ``--repair`` publishes it once
its content checks out; an export on another host is noted, not checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.audit.helpers import (
    Doc,
    G,
    added,
    delete_key,
    event,
    export_chain,
    head,
    ok_text,
    plant,
    run,
    run_many,
    used,
)
from tests.audit.test_verify import report
from tests.etcdkv import Etcd
from tests.plugin import Plugin

STREAM: list[Doc] = [event(1, added({G: 8}))] + [event(s, used({G: 1})) for s in range(2, 9)]
"""Eight events written a month ago; usage ends at 7."""


def compacted_twice(plugin: Plugin, etcd: Etcd, nodes: list[str], exports: Path) -> None:
    """Each node: checkpoint 3 (exporting 1..3), then checkpoint 6 (exporting 3..6)."""
    for node in nodes:
        plant(etcd, node, STREAM, head({G: 8}, {G: 7}, 8))
    directory = ["--export-dir", str(exports)]
    for keep in ("5", "2"):
        for result in run_many(plugin, [["compact", n, "--keep", keep, *directory] for n in nodes]):
            ok_text(result, "compact")


def newest_export(etcd: Etcd, node: str) -> Path:
    return export_chain(etcd, node).files[0]


def oldest_export(etcd: Etcd, node: str) -> Path:
    return export_chain(etcd, node).files[-1]


def rewrite(path: Path, edit: dict[int, Doc | None]) -> None:
    """Replace (or, with None, drop) lines of an export, by index."""
    lines = path.read_bytes().splitlines()
    kept = [
        line if i not in edit else json.dumps(edit[i]).encode()
        for i, line in enumerate(lines)
        if i not in edit or edit[i] is not None
    ]
    path.write_bytes(b"".join(line + b"\n" for line in kept))


def test_a_whole_chain_verifies(plugin: Plugin, etcd: Etcd, tmp_path: Path) -> None:
    compacted_twice(plugin, etcd, ["n1"], tmp_path)
    out = ok_text(run(plugin, "verify", "n1"))
    assert out.strip() == "1 node verified: every head agrees with its stream, 2 exports checked"


def test_broken_exports_are_disagreements_and_an_unpublished_one_is_repaired(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    nodes = ["missing", "old-missing", "tampered", "holed", "garbage", "other-op", "partial"]
    compacted_twice(plugin, etcd, [*nodes, "bad-partial"], tmp_path)
    newest_export(etcd, "missing").unlink()
    oldest_export(etcd, "old-missing").unlink()
    tampered = newest_export(etcd, "tampered")
    rewrite(tampered, {2: event(5, used({G: 2}))})  # 2 cards taken at event 5, not 1
    rewrite(newest_export(etcd, "holed"), {1: None})  # event 4 gone
    garbage = newest_export(etcd, "garbage")
    garbage.write_bytes(garbage.read_bytes() + b"not an event\n")
    # The checkpoint names a copy of its export under another compaction's op.
    checkpoint_key = etcd.event_key("other-op", 6)
    checkpoint = json.loads(etcd.events("other-op")[0].value)
    original = Path(checkpoint["change"]["export"].partition(":")[2])
    copy = original.with_name(original.name.replace(checkpoint["op"][:12], "0" * 12))
    shutil.copy(original, copy)
    checkpoint["change"]["export"] = checkpoint["change"]["export"].replace(
        original.name, copy.name
    )
    etcd.put_many({checkpoint_key: json.dumps(checkpoint).encode()})
    # What a compaction that died between its commit and the rename leaves behind.
    published = newest_export(etcd, "partial")
    published.rename(published.with_name(published.name + ".partial"))
    bad = newest_export(etcd, "bad-partial")
    rewrite(bad, {2: event(5, used({G: 2}))})
    bad.rename(bad.with_name(bad.name + ".partial"))

    expected = {
        "missing": "export of checkpoint 6 (",
        "old-missing": "export of checkpoint 3 (",
        "tampered": f"its events fold to capacity {G}:8, usage {G}:6, "
        f"the checkpoint says capacity {G}:8, usage {G}:5",
        "holed": "events 4..4 are missing",
        "garbage": "line 5 is not an event",
        "other-op": f"its name does not carry the checkpoint's op {checkpoint['op'][:12]}",
        "partial": "was left unpublished by an interrupted compaction",
        "bad-partial": "its events fold to",
    }
    everything = [*nodes, "bad-partial"]
    lines = report(run(plugin, "verify", "--all"), len(everything), len(everything))
    assert sorted(lines) == sorted(everything)
    for node, fragment in expected.items():
        assert fragment in lines[node], (node, lines[node])
    assert lines["missing"].endswith("is missing") and lines["old-missing"].endswith("is missing")

    repaired = report(run(plugin, "verify", "--all", "--repair"), len(nodes), len(everything))
    assert repaired["partial"].endswith("-> published"), repaired["partial"]
    assert published.is_file() and not published.with_name(published.name + ".partial").exists()
    assert "published" not in repaired["bad-partial"]
    assert bad.with_name(bad.name + ".partial").is_file() and not bad.exists()
    assert ok_text(run(plugin, "verify", "partial")).startswith("1 node verified")


def test_an_export_on_another_host_is_a_disagreement_unless_allowed(
    plugin: Plugin, etcd: Etcd
) -> None:
    """Its checkpoint's state cannot be checked here: taken on trust only when asked to."""
    elsewhere = "build-host-7:/var/lib/resource-gpu/exports/n1.x.jsonl"
    checkpoint = event(
        5,
        {
            "kind": "checkpoint",
            "state": {"capacity": {G: 8}, "usage": {G: 4}},
            "first": 1,
            "last_at": "2026-11-01T10:04:00Z",
            "export": elsewhere,
        },
        verb="compact",
    )
    plant(etcd, "n1", [checkpoint, *STREAM[5:]], head({G: 8}, {G: 7}, 8))
    refused = report(run(plugin, "verify", "n1"), 1, 1)
    assert refused["n1"] == (
        f"node n1: export of checkpoint 5 ({elsewhere}) is on host build-host-7: not checked "
        "here, so neither is its checkpoint (--allow-elsewhere takes it on trust)"
    )
    result = run(plugin, "verify", "n1", "--allow-elsewhere")
    assert result.status == 0, result.stderr
    note, summary = result.stdout.splitlines()
    assert note == (
        f"node n1: export of checkpoint 5 ({elsewhere}) is on host build-host-7: not checked "
        "here (allowed)"
    )
    assert summary == (
        "1 node verified: every head agrees with its stream, 1 elsewhere not checked (allowed)"
    )


def test_an_export_that_is_a_fifo_or_a_device_is_refused_not_read(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """What a checkpoint names is opened only if it is a regular file: a FIFO would hang
    ``verify`` (and ``history``, ``show --at``) for every node, ``/dev/zero`` fill its memory.
    Each is one finding naming the file; the other node verifies."""
    compacted_twice(plugin, etcd, ["fifo", "device", "fine"], tmp_path)
    fifo = newest_export(etcd, "fifo")
    fifo.unlink()
    os.mkfifo(fifo)
    device = newest_export(etcd, "device")
    device.unlink()
    device.symlink_to("/dev/zero")
    lines = report(run(plugin, "verify", "fifo", "device", "fine"), 2, 3)
    assert f"{fifo}: is not a regular file (a FIFO)" in lines["fifo"], lines
    assert f"{device}: is not a regular file (a character device)" in lines["device"], lines
    assert "fine" not in lines, lines


def forge_checkpoint(etcd: Etcd, node: str, edit: Callable[[Doc], None]) -> None:
    """Rewrite the node's checkpoint (its first event) in place."""
    first = etcd.events(node)[0]
    doc = first.json()
    assert doc["change"]["kind"] == "checkpoint"
    edit(doc["change"])
    etcd.put_many({first.key: json.dumps(doc).encode()})


def set_head_usage(etcd: Etcd, node: str, usage: dict[str, int]) -> None:
    """The head as the forger leaves it: its tip kept, its usage lowered to match."""
    found = etcd.head(node)
    assert found is not None
    record = found.json()
    record["usage"] = {"prod_count_map": usage}
    etcd.put_many({etcd.head_key(node): json.dumps(record).encode()})


def test_a_checkpoint_whose_export_cannot_be_read_here_is_not_taken_on_trust(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """Forged: a checkpoint's usage emptied and its export pointed at another host, or at an
    archive file that is not there, the head lowered to match (the chain still holds: the
    event after a checkpoint names the last event it replaced). verify fails on both (it
    passed, noting one "elsewhere"), and names why."""
    compacted_twice(plugin, etcd, ["host", "archived"], tmp_path)
    for node, where in (("host", "build-host-7:/x.jsonl"), ("archived", "archive:x.jsonl")):

        def emptied(change: Doc, where: str = where) -> None:
            change.update(state={**change["state"], "usage": {}}, export=where)

        forge_checkpoint(etcd, node, emptied)
        set_head_usage(etcd, node, {G: 2})  # events 7 and 8 take one card each
    lines = report(run(plugin, "verify", "host", "archived"), 2, 2)
    unchecked = "not checked here, so neither is its checkpoint"
    assert f"is on host build-host-7: {unchecked}" in lines["host"], lines
    assert f"is in the archive: {unchecked}" in lines["archived"], lines
    given = report(run(plugin, "verify", "archived", "--archive", str(tmp_path)), 1, 1)
    assert "(archive:x.jsonl) is missing" in given["archived"], given


def forge_the_last_as_a_checkpoint(etcd: Etcd, **change: Any) -> dict[str, Any]:
    """The real checkpoint and the event after it deleted, the last event replaced by a forged
    checkpoint: the real one's fields with 64 cards, a plausible tip (the digest of the event
    it replaces, which is what a head and a next event name), and ``change`` over them; the
    real checkpoint's change."""
    checkpoint, after, last = etcd.events("n1")
    real: dict[str, Any] = checkpoint.json()["change"]
    forged = {
        **real,
        "state": {"capacity": {G: 64}, "usage": {}},
        "tip": hashlib.sha256(last.value).hexdigest(),  # what event 8 digested to
        **change,
    }
    etcd.put_many({last.key: json.dumps({**last.json(), "change": forged}).encode()})
    for kv in (checkpoint, after):
        delete_key(etcd, kv.key)
    etcd.put_many({etcd.events_prefix("n1") + "first": b"8"})
    return real


def refused_repair(plugin: Plugin, etcd: Etcd) -> str:
    """``verify --repair`` of n1, which must refuse its forged checkpoint and leave the head
    byte for byte (8 cards); its finding."""
    before = etcd.head("n1")
    lines = report(run(plugin, "verify", "n1", "--repair"), 1, 1)
    assert "(not repaired: its checkpoint's export of checkpoint 8" in lines["n1"], lines
    assert etcd.head("n1") == before
    return lines["n1"]


def test_repair_never_adopts_a_checkpoint_it_cannot_check(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """The forged checkpoint names an export on another host: --repair rewrote the head to
    the forged capacity."""
    compacted_twice(plugin, etcd, ["n1"], tmp_path)
    forge_the_last_as_a_checkpoint(etcd, export="build-host-7:/x.jsonl", export_digest=None)
    assert "cannot be checked here (elsewhere)" in refused_repair(plugin, etcd)


def test_repair_never_adopts_a_checkpoint_whose_export_here_does_not_check_out(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """The forged checkpoint names the real export, which is here, with its real digest: the
    file reads, and what the checkpoint says of it (its state: 64 cards) does not check out
    against it (round six: no test held this refusal)."""
    compacted_twice(plugin, etcd, ["n1"], tmp_path)
    real = forge_the_last_as_a_checkpoint(etcd)
    assert Path(real["export"].split(":", 1)[1]).is_file()  # the export is on this host
    assert "does not check out" in refused_repair(plugin, etcd)


def test_an_export_that_is_not_the_file_written_byte_for_byte_is_a_disagreement(
    plugin: Plugin, etcd: Etcd, tmp_path: Path
) -> None:
    """Line endings rewritten: every event reads the same, but the checkpoint names the
    file's digest (from 0.8)."""
    compacted_twice(plugin, etcd, ["n1"], tmp_path)
    newest = newest_export(etcd, "n1")
    newest.write_bytes(newest.read_bytes().replace(b"\n", b"\r\n"))
    lines = report(run(plugin, "verify", "n1"), 1, 1)
    assert "it is not the file the checkpoint names, byte for byte" in lines["n1"], lines
