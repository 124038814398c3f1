"""Export files on the file system alone: publication (the rename that ends a compaction), and
where a checkpoint's name for one is read from."""

from __future__ import annotations

from pathlib import Path

import pytest

from resource_extend.ledger.model.errors import PluginError
from resource_extend.ledger.upkeep import export


def test_publishing_renames_the_partial_file_and_is_done_when_done(tmp_path: Path) -> None:
    path = tmp_path / "n1.jsonl"
    export.partial_of(path).write_bytes(b"{}\n")
    export.publish(path, "n1", "resource-storage")
    assert path.read_bytes() == b"{}\n" and not export.partial_of(path).exists()
    export.publish(path, "n1", "resource-storage")  # again: verify --repair got there first
    assert path.read_bytes() == b"{}\n"


def test_a_rename_that_fails_names_the_programs_own_repair(tmp_path: Path) -> None:
    path = tmp_path / "gone" / "n1.jsonl"  # neither the partial file nor the export exists
    with pytest.raises(PluginError) as failed:
        export.publish(path, "n1", "resource-storage")
    assert failed.value.node == "n1"
    assert "'resource-storage verify n1 --repair' does it" in failed.value.reason


def test_an_archive_name_is_read_from_the_archive_given_and_nowhere_else(tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / "n1.jsonl").write_bytes(b"{}\n")
    (tmp_path / "outside.jsonl").write_bytes(b"{}\n")
    where = export.location(archive / "n1.jsonl", archive=True)
    assert where == "archive:n1.jsonl"
    assert export.read(where, str(archive)).state == "published"
    assert export.read(where).state == "elsewhere"  # no archive given: not read, only noted
    assert export.read(where, str(tmp_path / "empty")).state == "missing"
    for hostile in ("archive:../outside.jsonl", "archive:..", "archive:", "archive:a\0b"):
        assert export.read(hostile, str(archive)).state == "elsewhere", hostile
