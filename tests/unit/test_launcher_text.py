"""The launcher ``install`` writes (``commands.launcher``): its text, and the Pythons a first
line can name."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from resource_extend.commands.gpu.plugin import PLUGIN as GPU
from resource_extend.commands.launcher import (
    MARK,
    SHEBANG_MAX,
    Refused,
    checked_python,
    launcher,
)
from resource_extend.commands.program import Plugin, Program
from resource_extend.commands.resident.client import package_dir
from resource_extend.commands.storage.plugin import PLUGIN as STORAGE


@pytest.mark.parametrize("plugin", [GPU, STORAGE], ids=lambda plugin: plugin.name)
def test_a_launcher_starts_python_isolated_without_site_on_its_own_code(plugin: Plugin) -> None:
    text = launcher(plugin, "/opt/re/bin/python3", "/opt/re/lib/site-packages/resource_extend")
    lines = text.splitlines()
    assert lines[0] == "#!/opt/re/bin/python3 -IS"
    assert lines[1].startswith(MARK)
    assert "package.__path__ = ['/opt/re/lib/site-packages/resource_extend']" in lines
    assert lines[-3:] == [
        "from resource_extend.commands.main import run",
        "from resource_extend.commands.program import Program",
        f"run(Program({plugin.kind!r}, name={plugin.name!r}, origin={plugin.origin!r}))",
    ]
    compile(text, "launcher", "exec")  # Python, whole


def test_a_package_path_is_written_as_python_reads_it() -> None:
    odd = '/opt/it\'s "here"/resource_extend'
    namespace: dict[str, object] = {}
    line = next(
        line for line in launcher(GPU, "/p", odd).splitlines() if "__path__" in line
    ).replace("package.", "")
    exec(line, namespace)
    assert namespace["__path__"] == [odd]


def test_the_package_is_the_folder_of_commands_ledger_and_projections() -> None:
    assert {"commands", "ledger", "projections"} <= set(os.listdir(package_dir()))


def test_a_first_line_names_only_an_absolute_executable_without_spaces(tmp_path: Path) -> None:
    assert checked_python(sys.executable) == sys.executable
    for bad in ("python3", str(tmp_path / "missing"), str(tmp_path)):
        with pytest.raises(Refused, match="absolute path to an executable"):
            checked_python(bad)
    spaced = tmp_path / "a venv" / "python"
    spaced.parent.mkdir()
    spaced.symlink_to(sys.executable)
    with pytest.raises(Refused, match="has a space"):
        checked_python(str(spaced))


def test_a_first_line_longer_than_every_kernel_reads_is_refused(tmp_path: Path) -> None:
    deep = tmp_path / ("v" * (SHEBANG_MAX - len(str(tmp_path)) - 12))
    deep.mkdir()
    (deep / "python").symlink_to(sys.executable)
    assert len(f"#!{deep / 'python'} -IS") > SHEBANG_MAX
    with pytest.raises(Refused, match="longer than a first line may be"):
        checked_python(str(deep / "python"))


def test_a_program_finds_its_plugin_or_says_in_one_line_that_it_cannot() -> None:
    assert Program(GPU.kind, name=GPU.name, origin=GPU.origin).plugin() is GPU
    assert Program(GPU.kind, origin=GPU.origin).plugin() is GPU  # as 0.8.0's launchers name it
    assert GPU.plugin() is GPU
    for name, origin in [
        ("resource-gpu", STORAGE.origin),
        ("resource-gpu", "resource_extend.commands.nowhere"),
        ("resource-gpus", GPU.origin),  # a launcher that misnames its program
    ]:
        with pytest.raises(SystemExit) as refused:
            Program("gpu", name=name, origin=origin).plugin()
        said = f"{name}: {origin} defines no PLUGIN of kind 'gpu' named {name}"
        assert refused.value.code == said
