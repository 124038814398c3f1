"""A kind is one folder: what is kind-specific lives under ``projections/<kind>/`` and
``commands/<kind>/``, and reaches the rest only through its value (``Plugin``). Outside those
folders no code names a kind, its program or its config file, nor imports a kind's modules;
``commands/programs.py`` alone lists the programs. The ledger names no kind at all."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from resource_extend.commands.programs import programs
from tests.layout.test_layers import ROOT, imported

KINDS = sorted(plugin.kind for plugin in programs().values())
NAMES = {name for p in programs().values() for name in (p.kind, p.name, p.config_file)}
THE_LIST = ROOT / "commands" / "programs.py"


def code_strings(path: Path) -> list[tuple[int, str]]:
    """Every string constant in ``path`` that is code, not a docstring, with its line."""
    tree = ast.parse(path.read_text(), str(path))
    documents = {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        if id(node) not in documents
    ]


def outside_the_kinds() -> list[Path]:
    own = [ROOT / layer / kind for layer in ("projections", "commands") for kind in KINDS]
    return [
        path
        for layer in ("ledger", "projections", "commands")
        for path in sorted((ROOT / layer).rglob("*.py"))
        if not any(path.is_relative_to(folder) for folder in own)
    ]


def naming_a_kind(paths: list[Path]) -> list[str]:
    return [
        f"{path.name}:{line}: {text!r}"
        for path in paths
        for line, text in code_strings(path)
        if text in NAMES or any(f"resource-{kind}" in text for kind in KINDS)
    ]


def test_no_code_outside_a_kind_s_folders_names_a_kind() -> None:
    assert naming_a_kind(outside_the_kinds()) == []


def test_nothing_outside_a_kind_s_folders_imports_them_but_the_list_of_programs() -> None:
    kinds = tuple(
        f"resource_extend.{layer}.{kind}" for layer in ("projections", "commands") for kind in KINDS
    )
    found = [
        f"{path.relative_to(ROOT)}:{line}: imports {module}"
        for path in outside_the_kinds()
        if path != THE_LIST
        for line, module in imported(path)
        if module.startswith(kinds)
    ]
    assert found == []


@pytest.mark.parametrize(
    "code", ['if plugin.kind == "gpu":\n    pass\n', 'DEFAULT = "storage.yaml"\n']
)
def test_the_check_sees_a_branch_on_a_kind(code: str, tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(f'"""A docstring may say gpu."""\n{code}')
    assert len(naming_a_kind([module])) == 1
