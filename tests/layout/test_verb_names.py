"""A core verb is named once, in ``commands/registry.py``: each kind's handler is bound to its
name there (``registry.load``), and the append it makes records the running verb
(``Session.verb``). A verb's name written as a string anywhere else in the product is a second
place to keep in step, which this test refuses."""

from __future__ import annotations

import ast
from pathlib import Path

from resource_extend.commands.registry import CORE_VERBS, HIDDEN_VERBS

ROOT = Path(__file__).resolve().parents[2]
NAMES = {name for name in (*CORE_VERBS, *HIDDEN_VERBS) if "-" in name}
"""The verbs whose names are words of their own (``name`` and ``verbs`` are plain words too)."""


def named_outside_the_registry(root: Path) -> list[str]:
    found = []
    for folder in ("commands", "projections", "ledger"):
        for path in sorted((root / folder).rglob("*.py")):
            if path == root / "commands" / "registry.py":
                continue
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Constant) and node.value in NAMES:
                    found.append(f"{path.relative_to(root)}:{node.lineno}: {node.value!r}")
    return found


def test_a_core_verb_is_named_only_in_the_registry() -> None:
    assert named_outside_the_registry(ROOT) == []


def test_a_second_naming_is_found(tmp_path: Path) -> None:
    """Broken on purpose: a handler naming its verb again is caught."""
    for folder in ("commands", "projections", "ledger"):
        (tmp_path / folder).mkdir()
    (tmp_path / "commands" / "writes.py").write_text('session.append(node, "add-node", decide)\n')
    assert named_outside_the_registry(tmp_path) == ["commands/writes.py:1: 'add-node'"]
