"""Orphaned ``.partial`` exports, on the file system alone: a node's ``.partial`` files are
found by name, and one is an orphan only when every line of it is still in etcd (here, a map of
seq to stored bytes) byte for byte at its seq, and it is older than the grace."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from resource_extend.ledger.upkeep import export, orphans

LATER = time.time() + 10 * orphans.GRACE
"""A time at which every file written by a test is past the grace."""


def stored_event(seq: int, kind: str = "usage_changed") -> bytes:
    return json.dumps({"seq": seq, "verb": "v", "change": {"kind": kind}}).encode()


STREAM = {seq: stored_event(seq) for seq in range(1, 9)}
"""A node's events in etcd, as stored."""


def partial(directory: Path, node: str, lines: list[bytes], first: int, last: int) -> Path:
    name = f"{export.node_part(node)}.{first:012d}-{last:012d}.0123456789ab.jsonl"
    path = export.partial_of(directory / name)
    path.write_bytes(export.json_lines(lines))
    return path


def test_a_partial_whose_every_line_is_still_in_etcd_is_an_orphan_and_removed(
    tmp_path: Path,
) -> None:
    path = partial(tmp_path, "n1", [STREAM[s] for s in (1, 2, 3)], 1, 3)
    found = orphans.find(tmp_path, "n1", STREAM, now=LATER)
    assert found == [orphans.Partial(path=path, first=1, last=3, orphan=True)]
    assert orphans.remove(found) == [path]
    assert not path.exists()
    assert orphans.remove(found) == []  # already gone


def test_a_committed_compactions_partial_is_kept(tmp_path: Path) -> None:
    """Its events are gone from etcd, and the last replaced by the checkpoint."""
    after_commit = {3: stored_event(3, "checkpoint"), **{s: STREAM[s] for s in range(4, 9)}}
    path = partial(tmp_path, "n1", [STREAM[s] for s in (1, 2, 3)], 1, 3)
    [found] = orphans.find(tmp_path, "n1", after_commit, now=LATER)
    assert not found.orphan and found.kept.startswith("event 1 is not in etcd")
    only_the_cut = {**STREAM, 3: stored_event(3, "checkpoint")}
    [found] = orphans.find(tmp_path, "n1", only_the_cut, now=LATER)
    assert not found.orphan and found.kept.startswith("event 3 is not in etcd")
    assert orphans.remove([found]) == [] and path.is_file()


def test_any_difference_from_etcd_keeps_a_partial(tmp_path: Path) -> None:
    respaced = json.dumps(json.loads(STREAM[2]), indent=1).replace("\n", "").encode()
    cases = {
        "respaced": ([STREAM[1], respaced], "event 2 is not in etcd as this file holds it"),
        "beyond": ([STREAM[8], stored_event(9)], "event 9 is not in etcd as this file holds it"),
        "truncated": ([STREAM[1], STREAM[2][:-3]], "line 2 is not an event"),
        "garbage": ([STREAM[1], b"not json"], "line 2 is not an event"),
        "no-seq": ([STREAM[1], b'{"verb": "v"}'], "line 2 is not an event"),
    }
    for node, (lines, _) in cases.items():
        partial(tmp_path, node, lines, 1, 2)
    for node, (_, reason) in cases.items():
        [found] = orphans.find(tmp_path, node, STREAM, now=LATER)
        assert not found.orphan and found.kept.startswith(reason), (node, found.kept)
        assert orphans.remove([found]) == [] and found.path.is_file()


def test_a_young_partial_is_kept_whatever_it_holds(tmp_path: Path) -> None:
    """Its compaction may be about to commit: deleted now, its checkpoint would name nothing."""
    path = partial(tmp_path, "n1", [STREAM[1]], 1, 1)
    [young] = orphans.find(tmp_path, "n1", STREAM)
    assert not young.orphan and "its compaction may still commit" in young.kept
    assert orphans.remove([young]) == [] and path.is_file()
    [old] = orphans.find(tmp_path, "n1", STREAM, grace=0)
    assert old.orphan


def test_an_empty_partial_is_an_orphan(tmp_path: Path) -> None:
    """Killed between making the file and writing it: there is nothing in it to lose."""
    path = partial(tmp_path, "n1", [], 1, 3)
    assert orphans.find(tmp_path, "n1", {}, now=LATER)[0].orphan
    assert orphans.remove(orphans.find(tmp_path, "n1", {}, now=LATER)) == [path]


def test_only_the_nodes_own_partials_are_found(tmp_path: Path) -> None:
    lines = [STREAM[1], STREAM[2]]
    long = "x" * 300  # cut in file names, with a digest
    mine = [partial(tmp_path, "n1", lines, 1, 2), partial(tmp_path, "n1", lines[1:], 2, 2)]
    for other in ("n10", "n1.x", "n", long):
        partial(tmp_path, other, lines, 1, 2)
    published = tmp_path / mine[0].name.removesuffix(export.PARTIAL).replace("0123", "4567")
    published.write_bytes(export.json_lines(lines))
    (tmp_path / "n1.000000000001-000000000002.0123.jsonl.partial.bak").write_bytes(b"")
    (tmp_path / "n1.1-2.0123.jsonl.partial").write_bytes(b"")
    found = orphans.find(tmp_path, "n1", STREAM, now=LATER)
    assert [(f.path, f.first, f.last, f.orphan) for f in found] == [
        (mine[0], 1, 2, True),
        (mine[1], 2, 2, True),
    ]
    [of_long] = orphans.find(tmp_path, long, STREAM, now=LATER)
    assert of_long.orphan and len(of_long.path.name) < 255
    assert orphans.remove(found) == mine
    assert len(list(tmp_path.iterdir())) == 7  # the others', the published one, the odd names


def test_no_directory_no_partials(tmp_path: Path) -> None:
    assert orphans.find(tmp_path / "missing", "n1", STREAM) == []


def test_a_partial_that_is_a_fifo_is_kept_unread(tmp_path: Path) -> None:
    """Opened only as a regular file: a FIFO would hang the sweep (and ``verify --repair``)."""
    path = partial(tmp_path, "n1", [STREAM[1]], 1, 1)
    path.unlink()
    os.mkfifo(path)
    [found] = orphans.find(tmp_path, "n1", STREAM, now=LATER)
    assert not found.orphan
    assert found.kept == "cannot be read: it is not a regular file (a FIFO)"
    assert orphans.remove([found]) == [] and path.exists()
