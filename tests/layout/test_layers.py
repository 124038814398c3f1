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


# -- no cycles ------------------------------------------------------------------------------------

LAYERS = ("commands", "ledger", "projections")


def module_names(root: Path) -> dict[str, Path]:
    """Every module of the package under ``root``, by its dotted name (a package by its own)."""
    found = {}
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(["resource_extend", *parts])] = path
    return found


def import_graph(root: Path) -> dict[str, set[str]]:
    """Which of the package's modules each one imports, anywhere in it (``from P import m``
    counts as importing the module ``P.m`` where there is one)."""
    modules = module_names(root)
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                targets |= {node.module, *(f"{node.module}.{a.name}" for a in node.names)}
        graph[name] = {target for target in targets if target in modules} - {name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import cycles: each set of modules that reach one another (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph[module]):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = [stack.pop()]
            while component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_no_module_imports_one_that_imports_it_back() -> None:
    """No import cycle anywhere in the package, function-level imports included: each folder
    can be read, and tested, from the bottom up."""
    assert cycles(import_graph(ROOT)) == []


def test_the_cycle_check_sees_a_lazy_cycle(tmp_path: Path) -> None:
    (tmp_path / "ledger").mkdir()
    (tmp_path / "commands" / "doctor").mkdir(parents=True)
    (tmp_path / "projections").mkdir()
    (tmp_path / "ledger" / "a.py").write_text("import os\n")
    (tmp_path / "commands" / "doctor" / "checks.py").write_text(
        "from resource_extend.commands.doctor import etcd\n"
    )
    (tmp_path / "commands" / "doctor" / "etcd.py").write_text(
        "def f():\n    from resource_extend.commands.doctor.checks import g\n"
    )
    assert cycles(import_graph(tmp_path)) == [
        [
            "resource_extend.commands.doctor.checks",
            "resource_extend.commands.doctor.etcd",
        ]
    ]
