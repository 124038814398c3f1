"""The command core runs: the launcher ``install`` writes into its plugin directory
(``commands.launcher``). It starts Python isolated and without ``site``; a call the resident
helper answers loads nothing more, and no environment changes the code a call runs."""

from __future__ import annotations

import ast
import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from resource_extend.commands import launcher
from resource_extend.commands.gpu.plugin import PLUGIN as GPU
from resource_extend.commands.resident import client
from resource_extend.commands.resident.client import THIN_PACKAGES, package_dir
from tests.plugin import Plugin, binary, launched
from tests.resident.conftest import G, helper_pid, resident_plugin, started, wait_for

pytestmark = pytest.mark.resident

READ = json.dumps({"nodename": "n1"}).encode()


def install(
    directory: Path, *args: str, program: str = "resource-gpu"
) -> subprocess.CompletedProcess[str]:
    """``bin/<program> install DIRECTORY``, as an operator runs it."""
    return subprocess.run(
        [*binary(program), "install", str(directory), *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip


def plugins_dir(tmp_path: Path) -> Path:
    directory = tmp_path / "plugins"
    directory.mkdir(mode=0o755)
    return directory


@pytest.mark.parametrize("program", ["resource-gpu", "resource-storage"])
def test_install_replaces_the_link_with_a_launcher_that_answers(
    tmp_path: Path, program: str
) -> None:
    plugins = plugins_dir(tmp_path)
    (plugins / program).symlink_to(binary(program)[0])  # as installs before this command did
    done = install(plugins, program=program)
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    target = plugins / program
    assert done.stdout == f"{target}: runs {sys.executable} -IS with the code in {package_dir()}\n"
    assert not target.is_symlink() and target.stat().st_mode & 0o777 == 0o755
    assert target.read_text().splitlines()[0] == f"#!{sys.executable} -IS"
    assert os.listdir(plugins) == [program], "a staged file was left behind"
    named = subprocess.run([str(target), "name"], capture_output=True, timeout=60)
    kind = program.removeprefix("resource-")
    assert (named.returncode, named.stdout, named.stderr) == (0, f'"{kind}"\n'.encode(), b"")
    again = install(plugins, program=program)  # its own launcher it replaces, as an upgrade does
    assert again.returncode == 0, again.stderr


def test_install_replaces_a_file_it_did_not_write_only_when_told(tmp_path: Path) -> None:
    plugins = plugins_dir(tmp_path)
    theirs = plugins / "resource-gpu"
    theirs.write_bytes(b"\x7fELF upstream's binary")
    refused = install(plugins)
    assert refused.returncode == 1 and refused.stdout == ""
    assert refused.stderr == (
        f"resource-gpu install: {theirs} is a file this command did not write "
        "(upstream's binary?): move it aside, or give --replace\n"
    )
    assert theirs.read_bytes() == b"\x7fELF upstream's binary"
    replaced = install(plugins, "--replace")
    assert replaced.returncode == 0, replaced.stderr
    assert theirs.read_text().startswith(f"#!{sys.executable} -IS\n")


def test_install_refuses_a_directory_anyone_can_write_or_none(tmp_path: Path) -> None:
    plugins = plugins_dir(tmp_path)
    plugins.chmod(0o777)
    refused = install(plugins)
    assert refused.returncode == 1
    assert f"{plugins} is writable by others (mode 777)" in refused.stderr
    assert "anyone who can write there could replace what core runs" in refused.stderr
    assert refused.stderr.count("\n") == 1 and os.listdir(plugins) == []
    missing = install(tmp_path / "nowhere")
    assert missing.returncode != 0 and missing.stderr.count("\n") == 1, missing.stderr
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize(
    ("parent_mode", "plugins_mode"),
    [(0o777, 0o755), (0o775, 0o755), (0o755, 0o775), (0o1777, 0o775)],
    ids=["parent anyone may write", "parent group-writable", "group-writable", "in /tmp-like"],
)
def test_install_refuses_a_directory_others_could_swap(
    tmp_path: Path, parent_mode: int, plugins_mode: int
) -> None:
    """Whoever may write to the plugin directory, or to a directory above it (sticky ones
    aside: nobody may rename what they do not own there), could put their own plugin in
    core's way: refused, as for export directories."""
    parent = tmp_path / "etc-eru"
    parent.mkdir()
    plugins = parent / "plugins"
    plugins.mkdir()
    plugins.chmod(plugins_mode)
    parent.chmod(parent_mode)
    refused = install(plugins)
    assert refused.returncode == 1 and refused.stderr.count("\n") == 1, refused.stderr
    unsafe = plugins if plugins_mode & 0o022 else parent
    assert f"{unsafe} is writable by others" in refused.stderr
    assert os.listdir(plugins) == []
    plugins.chmod(0o755)
    parent.chmod(0o755)
    assert install(plugins).returncode == 0


def test_install_and_doctor_do_not_hang_on_a_fifo(plugin: Plugin, runtime: Path) -> None:
    """Core's plugin-directory entry may be anything: a FIFO is neither opened to wait for a
    writer nor replaced without --replace."""
    entry = plugin.config.parent / "resource-gpu"
    os.mkfifo(entry)
    refused = install(entry.parent)  # a 60 s timeout: a hang fails the test
    assert refused.returncode == 1 and "this command did not write" in refused.stderr
    status, message, _ = doctor_says(plugin)
    assert status == "warn" and "which no install of resource-gpu wrote" in message, message
    assert stat.S_ISFIFO(os.lstat(entry).st_mode)


@pytest.mark.parametrize("delay", [0.0, 0.05, 0.1, 0.2, 0.3, 0.45, 0.7])
def test_a_terminated_install_leaves_no_second_plugin(tmp_path: Path, delay: float) -> None:
    """Core loads every executable file of its plugin directory, dot files included: a SIGTERM
    at any moment of ``install`` leaves there the old entry or the new launcher, and nothing
    else at all; and nothing it leaves blocks the next run."""
    plugins = plugins_dir(tmp_path)
    (plugins / "resource-gpu").symlink_to(binary()[0])
    running = subprocess.Popen(
        [*binary(), "install", str(plugins)], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    time.sleep(delay)
    running.send_signal(signal.SIGTERM)
    _, err = running.communicate(timeout=60)
    assert os.listdir(plugins) == ["resource-gpu"], (running.returncode, err)
    entry = plugins / "resource-gpu"
    if entry.is_symlink():
        assert os.readlink(entry) == binary()[0]
    else:
        assert launcher.read_launcher(str(entry)) == (sys.executable, str(package_dir()))
    assert running.returncode in (0, 128 + signal.SIGTERM, -signal.SIGTERM), err
    assert install(plugins).returncode == 0


def test_a_stale_temporary_never_blocks_an_install(tmp_path: Path) -> None:
    """What a run killed outright (SIGKILL) leaves, or an older release's temporary, is swept
    or stepped around: the next run installs."""
    plugins = plugins_dir(tmp_path)
    stale = plugins / f".resource-gpu.{os.getpid()}.tmp"  # an older release's name
    stale.write_text("#!/bin/sh\n")
    stale.chmod(0o755)
    (plugins / ".resource-gpu.install-killed").mkdir(mode=0o700)
    done = install(plugins)
    assert done.returncode == 0, done.stderr
    assert sorted(os.listdir(plugins)) == [".resource-gpu.install-killed", "resource-gpu"]


def test_a_launcher_that_does_not_answer_never_replaces_what_was_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugins = plugins_dir(tmp_path)
    link = plugins / "resource-gpu"
    link.symlink_to(binary()[0])
    broken = launcher.launcher  # a release whose code does not start, say
    monkeypatch.setattr(
        launcher,
        "launcher",
        lambda *args: broken(*args).replace(launcher.runs(GPU), "raise SystemExit(3)\n"),
    )
    with pytest.raises(launcher.Refused, match="the launcher did not answer"):
        launcher.install(GPU, str(plugins), replace=False)
    assert os.readlink(link) == binary()[0]
    assert os.listdir(plugins) == ["resource-gpu"]


def imports_of(command: list[str], plugin: Plugin, stdin: bytes) -> tuple[set[str], bytes]:
    """The modules a call imported (``-X importtime``: the launcher run as its first line
    says, with that one option more) and its answer."""
    first = Path(command[0]).read_text().splitlines()[0].removeprefix("#!").split()
    done = subprocess.run(
        [*first, "-X", "importtime", *command, "get-node-resource-info"],
        input=stdin, capture_output=True, timeout=60,
        env={**os.environ, "ERU_RESOURCE_CONFIG_PATH": str(plugin.config),
             "HOME": str(plugin.workdir / "home")},  # the helper's starter's, as core's stays
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stderr.decode().splitlines()
    assert all(line.startswith("import time:") for line in lines), lines  # nothing else said
    return {line.rsplit("|", 1)[1].strip() for line in lines[1:]}, done.stdout


THIN_PATH = {
    # the entry, its verbs' names, the program's value (its names as the launcher writes them:
    # no module of the kind, whose Plugin loads only in a call that goes on in its own process)
    "resource_extend.commands",
    "resource_extend.commands.main",
    "resource_extend.commands.registry",
    "resource_extend.commands.program",
    # the client, the private runtime directory its socket is in, and the little of os they use
    "resource_extend.commands.resident",
    "resource_extend.commands.resident.client",
    "resource_extend.ledger",
    "resource_extend.ledger.host",
    "resource_extend.ledger.host.rundir",
    "resource_extend.ledger.host.lean",
}
"""Every module of the package a core call imports when the helper answers it (the launcher
makes the package itself, ``resource_extend``, from its path): each costs every call, so one
more is a decision (docs/speed.md)."""


def docstring_only(path: Path) -> bool:
    """Whether the module at ``path`` holds nothing but its docstring."""
    body = ast.parse(path.read_text()).body
    return (
        len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    )


def test_the_launcher_makes_the_thin_paths_packages_each_only_a_docstring() -> None:
    """The launcher makes the packages of the thin path without reading their ``__init__.py``
    (0.2 ms each): each must hold nothing a call would miss, and every package of the thin path
    is made so."""
    root = Path(package_dir())
    packages = {module.removeprefix("resource_extend.") for module in THIN_PATH}
    packages = {name for name in packages if (root / name.replace(".", "/")).is_dir()}
    assert set(THIN_PACKAGES) == packages
    for name in THIN_PACKAGES:
        assert docstring_only(root / name.replace(".", "/") / "__init__.py"), name
    assert not docstring_only(Path(client.__file__))  # the check sees code


def test_a_call_the_helper_answers_loads_neither_site_nor_the_plugin(
    plugin: Plugin, runtime: Path
) -> None:
    resident_plugin(plugin)
    started(plugin)
    loaded, answer = imports_of(launched(), plugin, READ)
    assert json.loads(answer)["capacity"] == {"prod_count_map": {G: 8}}
    assert "resource_extend.commands.resident.client" in loaded, "the helper was not asked"
    # Nor os (1 ms: ledger.host.lean does its part), zlib, typing, __future__ (its modules write
    # the annotations that need it in quotes), nor of the package more than the thin path.
    unwanted = ["site", "os", "errno", "zlib", "typing", "__future__", "msgspec", "click", "yaml"]
    for module in unwanted:
        assert module not in loaded, f"a call the helper answered imported {module}"
    ours = {module for module in loaded if module.startswith("resource_extend")}
    made = {f"resource_extend.{name}" for name in THIN_PACKAGES}  # by the launcher, not read
    assert not ours & made, f"a package the launcher makes was imported: {sorted(ours & made)}"
    ours |= made
    assert ours == THIN_PATH, f"the thin path changed: {sorted(ours ^ THIN_PATH)}"
    # Without a helper the call goes on in its own process, which starts whole: the same probe
    # sees site and the ledger (and would have seen them above).
    resident_plugin(plugin, on=False)
    plugin.stop_helper()
    loaded, answer = imports_of(launched(), plugin, READ)
    assert json.loads(answer)["capacity"] == {"prod_count_map": {G: 8}}
    assert {"site", "msgspec", "resource_extend.ledger.store"} <= loaded


HIJACK = "import os, sys; open(os.environ['HIJACKED'], 'a').write(__name__ + '\\n')\n"


def hostile(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment that would change the code a plain ``python`` runs, every way it can:
    ``PYTHONPATH`` with a ``sitecustomize`` and a ``resource_extend`` of its own, a user site
    directory with a ``usercustomize``, ``PYTHONHOME`` pointing nowhere, and a working
    directory holding a ``resource_extend`` too. What ran of it is noted in ``hijacked``."""
    planted = tmp_path / "planted"
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    user_site = tmp_path / "home" / ".local" / "lib" / version / "site-packages"
    for where in (planted, user_site):
        where.mkdir(parents=True)
        (where / "sitecustomize.py").write_text(HIJACK)
        (where / "usercustomize.py").write_text(HIJACK)
        commands = where / "resource_extend" / "commands"
        commands.mkdir(parents=True)
        (commands / "__init__.py").write_text(HIJACK)
        (commands / "main.py").write_text(HIJACK)
    hijacked = tmp_path / "hijacked"
    env = {
        **os.environ,
        "PYTHONPATH": str(planted),
        "HOME": str(tmp_path / "home"),
        "PYTHONUSERBASE": str(tmp_path / "home" / ".local"),
        "HIJACKED": str(hijacked),
    }
    return env, hijacked


@pytest.mark.parametrize("helper", ["answers", "is started", "off"])
def test_no_environment_changes_the_code_a_launched_call_runs(
    plugin: Plugin, runtime: Path, tmp_path: Path, helper: str
) -> None:
    """Whether a helper answers, is started by the call (and answers the next: it was started
    in that environment), or is off."""
    resident_plugin(plugin, on=helper == "answers")
    if helper == "answers":
        started(plugin)
    else:
        plugin.add("n1", {G: 8})
    resident_plugin(plugin, on=helper != "off")
    env, hijacked = hostile(tmp_path)
    env["ERU_RESOURCE_CONFIG_PATH"] = str(plugin.config)
    cwd = tmp_path / "planted"
    # First, that the environment is hostile: the venv's bin/ script (a plain python) runs it.
    plain = subprocess.run([*binary(), "name"], capture_output=True, env=env, cwd=cwd, timeout=60)
    assert plain.returncode == 0 or hijacked.exists(), plain.stderr
    assert "sitecustomize" in hijacked.read_text()
    hijacked.unlink()
    env["PYTHONHOME"] = str(tmp_path / "nowhere")  # a plain python does not even start
    for _ in range(2):
        done = subprocess.run(
            [*launched(), "get-node-resource-info"],
            input=READ, capture_output=True, env=env, cwd=cwd, timeout=60,
        )  # fmt: skip
        assert (done.returncode, done.stderr) == (0, b""), done.stderr
        assert json.loads(done.stdout)["capacity"] == {"prod_count_map": {G: 8}}
        if helper == "is started":
            wait_for(lambda: helper_pid(plugin), "the helper the call started")
    assert not hijacked.exists(), f"the launched call ran {hijacked.read_text()}"


def doctor_says(plugin: Plugin) -> tuple[str, str, str | None]:
    """``doctor``'s finding on what core runs: status, message, fix."""
    shown = plugin.run("doctor", None, "--json")
    [found] = [f for f in json.loads(shown.stdout) if f["check"] == "launcher"]
    return found["status"], found["message"], found.get("fix")


def test_doctor_says_what_core_runs_beside_the_config(plugin: Plugin, runtime: Path) -> None:
    entry = plugin.config.parent / "resource-gpu"  # the config's directory as core's plugin dir
    status, message, _ = doctor_says(plugin)
    assert (status, message) == ("ok", f"no {entry}: core's plugin directory is not the config's")
    entry.symlink_to(binary()[0])
    status, message, fix = doctor_says(plugin)
    assert status == "warn" and f"a link to {binary()[0]}" in message, message
    bin_dir = Path(sys.executable).parent
    assert (
        fix == f"{bin_dir}/resource-gpu install {entry.parent} (it replaces the link in one rename)"
    )
    launcher.install(GPU, str(entry.parent), replace=False)
    status, message, _ = doctor_says(plugin)
    assert (status, message) == (
        "ok", f"core runs {entry}: this installation's launcher ({sys.executable} -IS)"
    )  # fmt: skip
    other = launcher.launcher(GPU, sys.executable, "/opt/resource-extend-0.7/resource_extend")
    entry.write_text(other)
    status, message, _ = doctor_says(plugin)
    assert status == "warn" and "the code in /opt/resource-extend-0.7/resource_extend" in message
    entry.write_bytes(b"\x7fELF")
    status, message, fix = doctor_says(plugin)
    assert status == "warn" and "which no install of resource-gpu wrote" in message, message
    assert fix is not None and fix.endswith(
        f"install {entry.parent} --replace, to run this installation"
    )


def test_a_launcher_is_read_back_as_written(tmp_path: Path) -> None:
    path = tmp_path / "resource-gpu"
    path.write_text(launcher.launcher(GPU, "/v/bin/python", "/v/it's/resource_extend"))
    assert launcher.read_launcher(str(path)) == ("/v/bin/python", "/v/it's/resource_extend")
    for text in ("#!/bin/sh\necho\n", "", "#!/x -IS\n# not ours\npackage.__path__ = ['/p']\n"):
        path.write_text(text)
        assert launcher.read_launcher(str(path)) is None, text
