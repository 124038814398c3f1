"""The README's install steps, run as written, line by line, in a fresh venv: the block under
"Installing into core", then the doctor line after it, then a core call through the launcher
they installed, from the plugin directory, as core makes it.

What the test changes, and why:
- ``/opt/resource-extend`` and ``/etc/eru/plugins`` become directories of the test's own (a
  test writes neither ``/opt`` nor ``/etc``); every other word of each line is as written.
- The block's first line runs in a copy of this checkout, as "in a clone of this repo" says.
- "then edit etcd.machines": the test makes that edit, to the suite's etcd, and gives the
  installation a prefix of its own (the shared etcd holds other tests' nodes).

Each line runs under bash, as an operator would paste it; each must exit 0."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

from tests.plugin import kill_helpers_of, stop_helpers

ROOT = Path(__file__).resolve().parents[1]
VENV, PLUGINS = "/opt/resource-extend", "/etc/eru/plugins"


def install_block() -> list[str]:
    """The commands of the README's first ``sh`` block under "Installing into core", each
    without its comment."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Installing into core", 1)[1]
    block = re.search(r"```sh\n(.*?)```", section, re.S)
    assert block, "the README's install block is gone"
    lines = [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line]


def doctor_line() -> str:
    """The line the README says to run once the plugins are installed."""
    section = (ROOT / "README.md").read_text().split("## Installing into core", 1)[1]
    found = re.search(r"`(/opt/resource-extend/bin/resource-gpu --config \S+ doctor)`", section)
    assert found, "the README no longer says which doctor line to run"
    return found.group(1)


def a_clone(into: Path) -> Path:
    """What a clone holds that a build reads (``tests/layout/test_install.py`` copies the same)."""
    into.mkdir()
    for name in ("pyproject.toml", "README.md", "scripts"):
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, into / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy(source, into / name)
    for layer in ("ledger", "commands", "projections", "docs"):
        shutil.copytree(ROOT / layer, into / layer, ignore=shutil.ignore_patterns("__pycache__"))
    return into


def test_the_readmes_install_block_works_as_written(
    etcd_endpoints: list[str], tmp_path: Path
) -> None:
    clone = a_clone(tmp_path / "clone")
    venv, plugins = tmp_path / "opt", tmp_path / "plugins"
    plugins.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "ERU_RESOURCE_CONFIG_PATH"}
    env["HOME"] = str(home)

    def sh(line: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        ours = line.replace(VENV, str(venv)).replace(PLUGINS, str(plugins))
        done = subprocess.run(
            ["bash", "-c", ours], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, f"{line}\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
        return done

    lines = install_block()
    assert lines[0].startswith("python3 -m pip wheel .") and len(lines) == 7, lines
    for line in lines:
        sh(line, clone)
    prefix = f"/readme-{uuid.uuid4().hex[:8]}"
    for config in (plugins / "gpu.yaml", plugins / "storage.yaml"):
        edited = re.sub(
            r'machines:\n(\s+)- "[^"]*"',
            f'machines:\n\\1- "{etcd_endpoints[0]}"',
            config.read_text(),
        )
        edited = re.sub(r'^  prefix: "[^"]*"', f'  prefix: "{prefix}"', edited, flags=re.M)
        assert edited.count(etcd_endpoints[0]) == 1 and prefix in edited, "the sample moved"
        config.write_text(edited)
    try:
        said = sh(doctor_line(), tmp_path).stdout
        assert re.search(r"^ok\s+config\s", said, re.M) and re.search(r"^ok\s+etcd ", said, re.M)
        assert re.search(rf"^ok\s+launcher\s+core runs {plugins}/resource-gpu", said, re.M)
        for program in ("resource-gpu", "resource-storage"):
            call = subprocess.run(
                [f"./{program}", "get-node-resource-info"], input='{"nodename": "n1"}',
                cwd=plugins, env=env, capture_output=True, text=True, timeout=60,
            )  # fmt: skip
            assert (call.returncode, call.stderr) == (0, ""), call.stderr
            assert call.stdout.strip() == "null"  # a node never added: empty, as upstream says
    finally:
        for program, name in (("resource-gpu", "gpu.yaml"), ("resource-storage", "storage.yaml")):
            stop_helpers(program, only=str(plugins / name))
            kill_helpers_of(plugins / name)
