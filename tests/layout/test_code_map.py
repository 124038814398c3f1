"""docs/ledger.md's code map is the tree: every folder and file it draws exists where it draws
it, and every module of the three layers is drawn, as a line of its own or named in its
folder's line. Pure: the map is read as text."""

from __future__ import annotations

import re
from pathlib import Path

import msgspec

from tests.layout.test_layers import LAYERS, ROOT

MAP = ROOT / "docs" / "ledger.md"
COLUMN = 24
"""Where a line's words begin: a line indented that far goes on the line above."""
ENTRY = re.compile(r"^(?P<indent> *)(?P<names>\S+(?: \S+)*?)(?: {2,}(?P<words>.*))?$")
PATH = re.compile(r"[\w-]+(?:/|\.py)")


class Entry(msgspec.Struct):
    """One drawn line: the folder or files it names (under ``folder``), and its words."""

    folder: str
    names: list[str]
    words: str


def code_map(page: Path = MAP) -> list[Entry]:
    """The entries of the page's code map (the ``text`` block under "Code layout")."""
    text = page.read_text(encoding="utf-8").split("## Code layout", 1)[1]
    block = text.split("```text\n", 1)[1].split("```", 1)[0]
    entries: list[Entry] = []
    above: list[str] = []  # the folders the current line is in, outermost first
    for line in block.splitlines():
        if line.startswith(" " * COLUMN):
            entries[-1].words += " " + line.strip()
            continue
        found = ENTRY.match(line)
        assert found, f"not a line of the map: {line!r}"
        depth = len(found["indent"]) // 2
        names = found["names"].split()
        assert all(PATH.fullmatch(name) for name in names), f"not a path: {line!r}"
        del above[depth:]
        entries.append(Entry("".join(above), names, found["words"] or ""))
        if names[0].endswith("/"):
            above.append(names[0])
    return entries


def drawn_but_missing(entries: list[Entry], root: Path) -> list[str]:
    return [
        folder + name
        for entry in entries
        for folder in [entry.folder]
        for name in entry.names
        if not (root / folder / name).exists()
    ]


def undrawn(entries: list[Entry], root: Path) -> list[str]:
    """The modules and folders of the layers the map neither draws nor names in its folder's
    words (a package's ``__init__`` aside)."""
    drawn = {entry.folder + name for entry in entries for name in entry.names}
    words = {
        entry.folder + entry.names[0]: set(re.findall(r"\w+", entry.words))
        for entry in entries
        if entry.names[0].endswith("/")
    }
    missing = []
    for layer in LAYERS:
        for path in sorted((root / layer).rglob("*")):
            if path.name == "__init__.py" or "__pycache__" in path.parts:
                continue
            if path.suffix != ".py" and not (path.is_dir() and (path / "__init__.py").exists()):
                continue
            where = path.relative_to(root)
            shown = f"{where}/" if path.is_dir() else str(where)
            folder = f"{where.parent}/"
            if shown not in drawn and path.stem not in words.get(folder, set()):
                missing.append(shown)
    return missing


def test_every_file_and_folder_the_map_draws_exists() -> None:
    assert drawn_but_missing(code_map(), ROOT) == []


def test_every_module_of_the_layers_is_on_the_map() -> None:
    assert undrawn(code_map(), ROOT) == []


def test_a_map_that_drifted_from_the_tree_is_seen(tmp_path: Path) -> None:
    """A room the map still draws after it moved, a module it names nowhere, and one named
    only in its folder's words."""
    for module in ("ledger/model/events.py", "ledger/model/walk.py", "ledger/host/config.py"):
        (tmp_path / module).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / module).write_text("")
    for package in ("ledger", "ledger/model", "ledger/host", "commands", "projections"):
        (tmp_path / package / "__init__.py").parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / package / "__init__.py").write_text("")
    page = tmp_path / "ledger.md"
    page.write_text(
        "## Code layout\n\n```text\n"
        "ledger/                 generic over kinds\n"
        "  config.py             the operator's config\n"
        "  model/                pure: events (the envelope every event\n"
        "                        shares)\n"
        "```\n"
    )
    entries = code_map(page)
    assert drawn_but_missing(entries, tmp_path) == ["ledger/config.py"]
    assert undrawn(entries, tmp_path) == ["ledger/host/", "ledger/host/config.py",
                                          "ledger/model/walk.py"]  # fmt: skip
