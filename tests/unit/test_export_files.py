"""An export's publication (the rename that ends a compaction) on the file system alone."""

from __future__ import annotations

from pathlib import Path

import pytest

from resource_extend.ledger import export
from resource_extend.ledger.errors import PluginError


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
