"""Words that match the code: a dotted reference in a docstring or a doc
(``ledger.store.scans.Scans.foreign``, ``resource_extend.commands.gpu.detect:detect``) names
a module, and what follows it an attribute, that exist; so does a reference relative to the
module's own folder (``client.start`` in ``commands/resident/``). Code moves; its words must
move with it. Nothing runs but imports of the modules named."""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from resource_extend.ledger.host.config import Config
from tests.layout.test_layers import LAYERS, ROOT, module_names

PACKAGE = "resource_extend"
REFERENCE = re.compile(r"`{1,2}~?([A-Za-z_][\w.]*(?::\w+)?)(?:\(\))?`{1,2}")
"""A name in backticks, reStructuredText's (``x``, :mod:`x`, ~ for its short form) or
Markdown's (`x`), with ``module:function`` and a call's ``()`` allowed."""
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def texts(path: Path) -> Iterator[tuple[int, str]]:
    """Where a file says something: a page's lines; a module's docstrings (every string that
    stands as a statement: its own, its classes', functions' and attributes')."""
    if path.suffix == ".md":
        yield from enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        return
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        said = node.value if isinstance(node, ast.Expr) else None
        if isinstance(said, ast.Constant) and isinstance(said.value, str):
            yield said.lineno, said.value


def config_keys(struct: type = Config, above: str = "") -> set[str]:
    """Every key of the operator's config as a page writes it: ``etcd.auth.password``."""
    keys = set()
    for field in msgspec.structs.fields(struct):
        key = f"{above}{field.encode_name}"
        keys.add(key)
        if isinstance(field.type, type) and issubclass(field.type, msgspec.Struct):
            keys |= config_keys(field.type, f"{key}.")
    return keys


CONFIG_KEYS = config_keys()


def meant(reference: str, path: Path, root: Path) -> list[str] | None:
    """The dotted names ``reference`` can mean, written in ``path``: itself, when it starts at
    the package or one of its layers; else, when its first part is a module beside ``path``,
    that module's. None when it names no module of ours (a config key, a variable)."""
    name = reference.removeprefix(f"{PACKAGE}.")
    first = re.split(r"[.:]", name)[0]
    if first in LAYERS:
        return [name]
    if name in CONFIG_KEYS:
        return None
    folder = path.parent.relative_to(root).parts if path.suffix == ".py" else ()
    if folder and folder[0] in LAYERS and (path.parent / f"{first}.py").is_file():
        return [".".join([*folder, name])]
    return None


def exists(dotted: str, modules: set[str]) -> bool:
    """Whether ``dotted`` (``ledger.store.scans.Scans.foreign``, ``commands.gpu.detect:detect``)
    is a module of ours and, after it, attributes it has: a class's own instance attributes
    count (``self.name = ...``, a field)."""
    parts = dotted.replace(":", ".").split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            break
    else:
        return False
    found: object = importlib.import_module(".".join([PACKAGE, *parts[:end]]))
    for attribute in parts[end:]:
        if hasattr(found, attribute):
            found = getattr(found, attribute)
        elif inspect.isclass(found):
            own = rf"self\.{attribute}\b|^\s+{attribute}\s*:"
            return re.search(own, inspect.getsource(found), re.MULTILINE) is not None
        else:
            return False
    return True


def stale(paths: list[Path], root: Path = ROOT) -> list[str]:
    """Every reference in ``paths`` (files of a tree at ``root``) that names nothing of this
    package, with its file and line."""
    modules = {name.removeprefix(f"{PACKAGE}.") for name in module_names(ROOT)}
    return [
        f"{path.relative_to(root)}:{line}: {found.group(1)}"
        for path in paths
        for line, text in texts(path)
        for found in REFERENCE.finditer(text)
        for names in [meant(found.group(1), path, root)]
        if names is not None and not any(exists(name, modules) for name in names)
    ]


def sources(root: Path) -> list[Path]:
    """The package's modules, the scripts and the tests."""
    folders = (*LAYERS, "scripts", "tests")
    return [path for folder in folders for path in sorted((root / folder).rglob("*.py"))]


def test_every_dotted_reference_in_a_docstring_names_what_exists() -> None:
    assert stale(sources(ROOT), ROOT) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.name)
def test_every_dotted_reference_in_a_doc_names_what_exists(page: Path) -> None:
    assert stale([page], ROOT) == []


def test_a_stale_reference_is_seen(tmp_path: Path) -> None:
    folder = tmp_path / "commands" / "resident"
    folder.mkdir(parents=True)
    for sibling in ("client.py", "etcd.py"):  # what a reference may start at
        (folder / sibling).write_text("")
    (folder / "m.py").write_text(
        '"""Moved: ``commands.gpu.REQUEST_EPILOG``. There: ``commands.program.Plugin.kind``,\n'
        "``commands.gpu.verbs.REQUEST_EPILOG``, ``~resource_extend.ledger.model.kinds.program_of``"
        " and ``client.start``. Gone: ``client.begin``. Not ours: ``etcd.timeout``,\n"
        '``plugin.name``."""\n'
        "def f():\n"
        '    """:func:`resource_extend.commands.gpu.detect:detect` and :mod:`ledger.nowhere`."""\n'
    )
    assert stale([folder / "m.py"], tmp_path) == [
        "commands/resident/m.py:1: commands.gpu.REQUEST_EPILOG",
        "commands/resident/m.py:1: client.begin",
        "commands/resident/m.py:5: ledger.nowhere",
    ]
