"""The layers run one way: ``commands`` -> ``projections`` (pure, per kind) and ``ledger``
(etcd I/O, generic over kinds). ``ledger`` never imports ``projections`` or ``commands``, and
``projections`` never imports ``commands``, not even lazily inside a function."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FORBIDDEN = {
    "ledger": ("resource_extend.projections", "resource_extend.commands"),
    "projections": ("resource_extend.commands",),
}


def imported(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, anywhere in it, with its line."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}:{node.lineno}: a relative import"
            found.append((node.lineno, node.module or ""))
    return found


def wrong_way(layer: str) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line}: imports {module}"
        for path in sorted((ROOT / layer).rglob("*.py"))
        for line, module in imported(path)
        if module.startswith(FORBIDDEN[layer])
    ]


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_import_runs_the_wrong_way(layer: str) -> None:
    assert wrong_way(layer) == []


def test_the_check_sees_a_lazy_import(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from resource_extend.projections.gpu import node\n")
    assert imported(module) == [(2, "resource_extend.projections.gpu")]
