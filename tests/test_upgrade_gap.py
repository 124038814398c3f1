"""Upgrading without a gap (docs/operating.md): the new release is installed beside the old,
and the plugin directory's entry is switched to it in one rename (a link, or the launcher its
``install`` writes). Calls under load all answer throughout: each runs one installation or the
other, whole. (Installing over the running venv
left the command missing for a third of a second, a call with a traceback, and an install
failing with "Text file busy".)

An installation here is a copy of the code with a wrapper in its ``bin/``, as a venv is one
with its scripts: the old and the new differ in a file, as two releases do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from resource_extend.commands.gpu.plugin import PLUGIN as GPU
from resource_extend.commands.launcher import MARK, install
from tests.plugin import Plugin, R, binary, copied_code

pytestmark = pytest.mark.resident

CALLERS = 4
G = "nvidia-3090"


def installation(root: Path, release: str, ran: Path) -> Path:
    """``root``: a copy of the code and ``bin/resource-gpu``, the command that runs it (and
    notes ``release`` in ``ran`` each time)."""
    code = copied_code(root / "code")
    (code / "commands" / "release.py").write_text(f"RELEASE = {release!r}\n")  # two releases
    body = Path(binary()[0]).read_text().split("\n", 1)[1]
    (root / "bin").mkdir()
    (root / "bin" / "resource-gpu.py").write_text(body)
    command = root / "bin" / "resource-gpu"
    command.write_text(
        f"#!/bin/sh\necho {release} >> '{ran}'\n"
        f"PYTHONPATH='{root / 'code'}' exec '{sys.executable}' "
        f"'{root / 'bin' / 'resource-gpu.py'}' \"$@\"\n"
    )
    command.chmod(0o755)
    return command


def switch(link: Path, target: Path) -> None:
    """Point ``link`` at ``target`` in one rename: a call finds the old or the new, never
    neither (``ln -s NEW link.new && mv -T link.new link``)."""
    staged = link.with_name(f".{link.name}.new")
    staged.symlink_to(target)
    os.replace(staged, link)


class Load:
    """``CALLERS`` threads calling ``command`` (a deploy, then its release) until stopped."""

    def __init__(self, command: Path, plugin: Plugin) -> None:
        self.command = command
        self.env = {**os.environ, "ERU_RESOURCE_CONFIG_PATH": str(plugin.config)}
        self.failures: list[str] = []
        self.calls = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.caller) for _ in range(CALLERS)]

    def caller(self) -> None:
        take = {"nodename": "n1", "resource": R({G: 1}), "delta": True, "incr": True}
        while not self.stop.is_set():
            for incr in (True, False):
                done = subprocess.run(
                    [str(self.command), "set-node-resource-usage"],
                    input=json.dumps({**take, "incr": incr}).encode(),
                    capture_output=True, env=self.env, timeout=60,
                )  # fmt: skip
                self.calls += 1
                if done.returncode != 0 or done.stderr:
                    self.failures.append(done.stderr.decode() or f"exit {done.returncode}")

    def around(self, switch: Callable[[], object]) -> None:
        """``switch`` once 40 calls are done; 40 more after it, unless a call fails."""
        for thread in self.threads:
            thread.start()
        try:
            while self.calls < 40 and not self.failures:
                self.stop.wait(0.05)
            switch()
            switched_at = self.calls
            while self.calls < switched_at + 40 and not self.failures:
                self.stop.wait(0.05)
        finally:
            self.stop.set()
            for thread in self.threads:
                thread.join(timeout=120)


def test_switching_the_plugin_link_under_load_fails_no_call(plugin: Plugin, tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    old = installation(tmp_path / "resource-extend-old", "old", ran)
    new = installation(tmp_path / "resource-extend-new", "new", ran)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    link = plugins / "resource-gpu"
    link.symlink_to(old)
    plugin.add("n1", {G: 64})
    load = Load(link, plugin)
    load.around(lambda: switch(link, new))
    assert load.failures == []
    assert os.readlink(link) == str(new)
    releases = ran.read_text().split()
    assert releases.count("old") >= 40 and releases.count("new") >= 40 - CALLERS, releases
    info = plugin.info("n1")
    assert info["usage"]["prod_count_map"] in ({}, None, {G: 0}), info  # every take given back


def test_install_over_the_link_under_load_fails_no_call(plugin: Plugin, tmp_path: Path) -> None:
    """``install`` writes the launcher aside, runs it, and renames it over the link core was
    running: the calls around it all answer, on the link's command and then the launcher."""
    plugins = tmp_path / "plugins"
    plugins.mkdir(mode=0o755)
    link = plugins / "resource-gpu"
    link.symlink_to(binary()[0])
    plugin.add("n1", {G: 64})
    load = Load(link, plugin)
    load.around(lambda: install(GPU, str(plugins), replace=False))
    assert load.failures == []
    assert not link.is_symlink() and link.read_text().splitlines()[1].startswith(MARK)
    info = plugin.info("n1")
    assert info["usage"]["prod_count_map"] in ({}, None, {G: 0}), info  # every take given back
