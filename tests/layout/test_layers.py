"""The layers run one way: ``commands`` -> ``projections`` (pure, per kind) and ``ledger``
(etcd I/O, generic over kinds). ``ledger`` never imports ``projections`` or ``commands``, and
``projections`` never imports ``commands``, not even lazily inside a function, nor names one
of its modules in a string. Inside
``ledger`` the rooms run one way too (``ROOMS``), and ``projections`` sees only its pure model."""

from __future__ import annotations

import ast
import re
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


NAMES_OF_THE_SHELL = re.compile(r"\b(?:resource_extend\.)?commands\.[a-z_]+")
"""A module of the shell named in text: ``resource_extend.commands.gpu``, ``commands.main``."""


def named_in_strings(path: Path, names: re.Pattern[str]) -> list[str]:
    """Every string in ``path`` (docstrings, module paths handed on as data) that names what
    ``names`` matches, with its line: an import by another name is a dependency too."""
    return [
        f"{path.relative_to(path.parents[1])}:{node.lineno}: {found.group()}"
        for node in ast.walk(ast.parse(path.read_text(), str(path)))
        if isinstance(node, ast.Constant) and isinstance(node.value, str)
        for found in names.finditer(node.value)
    ]


def test_the_pure_layer_names_no_module_of_the_shell_even_in_a_string() -> None:
    """A kind is bound one way: the shell (``commands/<kind>/plugin.py``) assembles its
    ``Plugin`` from the pure half, which names none of the shell's modules, not even as a
    string to be imported later (``"resource_extend.commands.gpu.detect:detect"``)."""
    found = [
        line
        for path in sorted((ROOT / "projections").rglob("*.py"))
        for line in named_in_strings(path, NAMES_OF_THE_SHELL)
    ]
    assert found == []


def test_the_string_check_sees_a_module_path_handed_on_as_data(tmp_path: Path) -> None:
    (tmp_path / "gpu").mkdir()
    module = tmp_path / "gpu" / "plugin.py"
    module.write_text('PLUGIN = Plugin(verbs="resource_extend.commands.gpu")\n')
    assert named_in_strings(module, NAMES_OF_THE_SHELL) == [
        "gpu/plugin.py:1: resource_extend.commands.gpu"
    ]


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
    return graph_of(module_names(root))


def script_graph(root: Path) -> dict[str, set[str]]:
    """Which of ``scripts/`` each script imports (as ``scripts.bench_where``), anywhere in it."""
    return graph_of(
        {f"scripts.{path.stem}": path for path in sorted((root / "scripts").glob("*.py"))}
    )


def graph_of(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Which of ``modules`` each one imports."""
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


def test_no_script_imports_one_that_imports_it_back() -> None:
    """scripts/ too: the bench's library (``benching``) is imported by its rows and its main,
    and imports neither."""
    assert cycles(script_graph(ROOT)) == []


def test_the_script_check_sees_a_circle(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    (tmp_path / "scripts" / "bench.py").write_text("from scripts.bench_rows import rows\n")
    (tmp_path / "scripts" / "bench_rows.py").write_text(
        "def f():\n    from scripts.bench import run\n"
    )
    assert cycles(script_graph(tmp_path)) == [["scripts.bench", "scripts.bench_rows"]]


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


# -- the shell's rooms -----------------------------------------------------------------------------

SHELL = "resource_extend.commands"


def shell_room(module: str) -> str:
    """The room a module of the shell is in: each folder of ``commands/`` is one room (a kind's,
    the helper's, doctor's), each module beside those folders a room of its own."""
    return ".".join(module.split(".")[:3])


def shell_loops(root: Path) -> list[list[str]]:
    """The loops among the shell's rooms: rooms that reach one another through their imports."""
    graph: dict[str, set[str]] = {}
    for module, targets in import_graph(root).items():
        if module.startswith(f"{SHELL}."):
            room = shell_room(module)
            graph.setdefault(room, set()).update(
                shell_room(target) for target in targets if target.startswith(f"{SHELL}.")
            )
    return cycles({room: targets - {room} for room, targets in graph.items()})


def test_no_room_of_the_shell_imports_one_that_imports_it_back() -> None:
    """The shell reads from the bottom up, room by room: a kind's folder uses the rooms that serve
    every kind, and nothing those use reaches back into a kind (the list of every program,
    ``commands/programs.py``, is above them all)."""
    assert shell_loops(ROOT) == []


def test_the_shell_check_sees_a_loop_through_a_kind(tmp_path: Path) -> None:
    for folder in ("commands/toy", "ledger", "projections"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "commands" / "program.py").write_text(
        "def programs():\n    from resource_extend.commands.toy.plugin import PLUGIN\n"
    )
    (tmp_path / "commands" / "toy" / "plugin.py").write_text("PLUGIN = None\n")
    (tmp_path / "commands" / "toy" / "writes.py").write_text(
        "from resource_extend.commands.program import Plugin\n"
    )
    assert cycles(import_graph(tmp_path)) == []  # no module imports one that imports it back
    assert shell_loops(tmp_path) == [
        ["resource_extend.commands.program", "resource_extend.commands.toy"]
    ]


# -- the ledger's rooms ---------------------------------------------------------------------------

LEDGER = "resource_extend.ledger"
STORAGE = "resource_extend.projections.storage"
ROOMS = {
    f"{LEDGER}.model": (f"{LEDGER}.model",),
    f"{LEDGER}.host": (f"{LEDGER}.model.errors", f"{LEDGER}.host"),
    f"{LEDGER}.etcd": (f"{LEDGER}.model.errors", f"{LEDGER}.host", f"{LEDGER}.etcd"),
    f"{LEDGER}.store": (f"{LEDGER}.model", f"{LEDGER}.host", f"{LEDGER}.etcd", f"{LEDGER}.store"),
    f"{LEDGER}.upkeep": (LEDGER,),
    "projections": (f"{LEDGER}.model", "projections"),
    f"{STORAGE}.grammar": (f"{LEDGER}.model", f"{STORAGE}.grammar"),
    f"{STORAGE}.wire": (f"{LEDGER}.model", f"{STORAGE}.grammar", f"{STORAGE}.wire"),
    STORAGE: (f"{LEDGER}.model", "projections", f"{STORAGE}.grammar", f"{STORAGE}.wire", STORAGE),
    f"{STORAGE}.verbs": (
        f"{LEDGER}.model",
        "projections",
        f"{STORAGE}.grammar",
        f"{STORAGE}.wire",
        STORAGE,
        f"{STORAGE}.verbs",
    ),
    f"{STORAGE}.placement": (
        f"{LEDGER}.model",
        "projections",
        f"{STORAGE}.grammar",
        f"{STORAGE}.wire",
        STORAGE,
        f"{STORAGE}.placement",
    ),
}
"""Which modules each room may import, by the room's dotted name (and ``projections``, every
module of the pure layer not in a room of storage's). In the ledger the pure model imports
only itself, what it takes from its host knows no event, etcd I/O knows no event (only the
errors it raises), the store never reaches up into upkeep. In storage the words are the bottom
room, the wire's shapes are built on them, the kind's own modules (``STORAGE_OWN``) on both,
and its verbs and placement on the kind; nothing below reaches up."""
STORAGE_OWN = {"arithmetic", "events", "metrics", "node", "parts", "state", "views"}
"""The modules of the storage kind itself, beside its rooms: its state and how its values add,
its events, its fold and record, how people and the exporter see it, its parts."""


def room_of(module: str) -> str | None:
    """The room one of the package's modules is in (a ``ROOMS`` key); None for one of the
    shell's, and for a module of the ledger or storage in no room."""
    parts = module.split(".")
    if module.startswith(f"{STORAGE}."):
        room = ".".join(parts[:4])
        if room in ROOMS:
            return room
        return STORAGE if parts[3] in STORAGE_OWN else None
    if module.startswith("resource_extend.projections"):
        return "projections"
    room = ".".join(parts[:3])
    return room if module.startswith(f"{LEDGER}.") and room in ROOMS else None


def roomless(root: Path) -> list[str]:
    """The ledger's and storage's modules that are in none of their rooms (a package's own
    ``__init__`` aside)."""
    return [
        module
        for module in sorted(module_names(root))
        if module.startswith((f"{LEDGER}.", f"{STORAGE}."))
        if module not in ROOMS and room_of(module) is None
    ]


def allowed(room: str, target: str) -> bool:
    """Whether a module in ``room`` may import ``target``: a module of a room the room names, or
    of the ledger under a name it names (``ledger.model.errors``)."""
    return any(
        room_of(target) == name or (name.startswith(LEDGER) and f"{target}.".startswith(f"{name}."))
        for name in ROOMS[room]
    )


def out_of_room(root: Path) -> list[str]:
    """Each import of a ledger or projections module that its importer's room may not make."""
    return [
        f"{module} imports {target}"
        for module, targets in sorted(import_graph(root).items())
        for room in [room_of(module)]
        if room is not None
        for target in sorted(targets)
        if target.startswith((f"{LEDGER}.", "resource_extend.projections."))
        if not allowed(room, target)
    ]


def test_every_module_of_the_ledger_and_of_storage_is_in_a_room() -> None:
    assert roomless(ROOT) == []


def test_a_module_added_to_the_wrong_room_is_seen(tmp_path: Path) -> None:
    """Loose in the ledger, loose beside storage's rooms, or in a room below what it uses."""
    for folder in ("ledger/model", "projections/storage/grammar", "projections/storage/wire"):
        (tmp_path / folder).mkdir(parents=True)
    (tmp_path / "commands").mkdir()
    (tmp_path / "ledger" / "helpers.py").write_text("")
    (tmp_path / "projections" / "storage" / "quotas.py").write_text("")
    (tmp_path / "projections" / "storage" / "events.py").write_text("")
    (tmp_path / "projections" / "storage" / "wire" / "resources.py").write_text("")
    (tmp_path / "projections" / "storage" / "grammar" / "units.py").write_text(
        "from resource_extend.projections.storage.wire.resources import NodeResource\n"
    )
    assert roomless(tmp_path) == [
        "resource_extend.ledger.helpers",
        "resource_extend.projections.storage.quotas",
    ]
    assert out_of_room(tmp_path) == [
        "resource_extend.projections.storage.grammar.units imports "
        "resource_extend.projections.storage.wire.resources"
    ]


def test_each_ledger_room_imports_only_the_rooms_below_it() -> None:
    assert out_of_room(ROOT) == []


def test_the_room_check_sees_events_in_etcd_io_and_etcd_in_projections(tmp_path: Path) -> None:
    for folder in ("ledger/etcd", "ledger/model", "ledger/store", "projections/toy", "commands"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "ledger" / "model" / "events.py").write_text("")
    (tmp_path / "ledger" / "store" / "keys.py").write_text("")
    (tmp_path / "ledger" / "etcd" / "wire.py").write_text(
        "from resource_extend.ledger.model import events\n"
    )
    (tmp_path / "projections" / "toy" / "node.py").write_text(
        "from resource_extend.ledger.model.events import Change\n"
        "def f():\n    from resource_extend.ledger.store.keys import KeyLayout\n"
    )
    assert out_of_room(tmp_path) == [
        "resource_extend.ledger.etcd.wire imports resource_extend.ledger.model",
        "resource_extend.ledger.etcd.wire imports resource_extend.ledger.model.events",
        "resource_extend.projections.toy.node imports resource_extend.ledger.store.keys",
    ]
