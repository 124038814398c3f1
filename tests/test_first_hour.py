"""The first hour with the CLI, as a new operator meets it: the version, a short usage, usage
errors that point at the right --help, --config on either side of the command, errors that
say what was meant, exit codes and shell completion in --help."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from resource_extend.commands.gpu.plugin import PLUGIN as GPU
from resource_extend.commands.registry import CORE_VERBS, people_commands
from tests.plugin import Plugin, Result, binary, failure_line

pytestmark = pytest.mark.resident

G = "nvidia-3090"


def bare(*argv: str, program: str = "resource-gpu", cwd: Path | None = None) -> Result:
    """The command as a person types it: no config in the environment, no request."""
    done = subprocess.run(
        [*binary(program), *argv], capture_output=True, cwd=cwd, timeout=60, input=b"",
        env={"PATH": "/usr/bin:/bin", "HOME": str(cwd or Path.cwd())},
    )  # fmt: skip
    return Result(done.returncode, done.stdout.decode(), done.stderr.decode())


def elsewhere(plugin: Plugin) -> Path:
    """A directory without a config file, to run from."""
    path = plugin.workdir / "elsewhere"
    path.mkdir(exist_ok=True)
    return path


@pytest.mark.parametrize("program", ["resource-gpu", "resource-storage"])
def test_version_and_a_short_usage(program: str, tmp_path: Path) -> None:
    from importlib.metadata import version

    shown = bare("--version", program=program, cwd=tmp_path)
    assert (shown.status, shown.stderr) == (0, "")
    assert shown.stdout == f"{program} {version('resource-extend')} (resource-extend)\n"
    usage = bare(program=program, cwd=tmp_path)
    assert (usage.status, usage.stderr) == (0, "")
    assert usage.stdout.startswith(f"Usage: {program} [--config PATH] COMMAND")
    assert len(usage.stdout.splitlines()) < 10  # not the whole manual
    assert f"  {program} --help   every command" in usage.stdout


@pytest.mark.parametrize(
    ("argv", "where"),
    [
        (["show", "n1", "--bogus"], "resource-gpu show"),
        (["show"], "resource-gpu show"),
        (["history", "n1", "--limit", "many"], "resource-gpu history"),
        (["frobnicate"], "resource-gpu"),
    ],
)
def test_a_usage_error_points_at_that_commands_help(
    argv: list[str], where: str, tmp_path: Path
) -> None:
    result = bare(*argv, cwd=tmp_path)
    assert (result.status, result.stdout) == (2, "")
    (line,) = result.stderr.splitlines()
    assert line.startswith(f"{where}: ") and line.endswith(f"(see '{where} --help')"), line


def test_config_after_the_command_as_well_as_before(plugin: Plugin) -> None:
    away, config = elsewhere(plugin), str(plugin.config)
    plugin.add("n1", {G: 2})
    for argv in (["--config", config, "nodes"], ["nodes", "--config", config]):
        listed = bare(*argv, cwd=away)
        assert listed.status == 0, listed.stderr
        assert "n1" in listed.stdout
    request = b'{"nodename": "n1"}'
    for argv in (["get-node-resource-info", "--config", config],
                 ["get-node-resource-info", f"--config={config}"],
                 ["--config", config, "get-node-resource-info"]):  # fmt: skip
        done = subprocess.run([*binary(), *argv], input=request, capture_output=True, cwd=away)
        assert done.returncode == 0, done.stderr
        assert b'"nvidia-3090":2' in done.stdout
    twice = bare("--config", config, "nodes", "--config", "other.yaml", cwd=away)
    assert twice.status == 2 and "--config given twice" in twice.stderr


@pytest.mark.parametrize("command", [*CORE_VERBS, *people_commands(GPU)])
def test_every_commands_help_lists_config(command: str, tmp_path: Path) -> None:
    shown = bare(command, "--help", cwd=tmp_path)
    assert shown.status == 0, shown.stderr
    assert "--config PATH" in shown.stdout


def test_config_not_found_says_where_it_looked(tmp_path: Path) -> None:
    line = failure_line(bare("nodes", cwd=tmp_path), "nodes")
    assert str(tmp_path / "gpu.yaml") in line, line
    assert "--config" in line and "ERU_RESOURCE_CONFIG_PATH" in line, line
    named = failure_line(bare("nodes", "--config", "nope.yaml", cwd=tmp_path), "nodes")
    assert str(tmp_path / "nope.yaml") in named, named


def test_an_empty_request_says_it_is_empty(plugin: Plugin) -> None:
    for raw in (b"", b" \n"):
        line = plugin.fails("add-node", raw=raw)
        assert line == "resource-gpu add-node: the request is empty: pipe one JSON object on stdin"


def test_help_documents_exit_codes_and_completion(tmp_path: Path) -> None:
    manual = bare("--help", cwd=tmp_path).stdout
    said = " ".join(manual.split())  # however the help wraps them
    for status in ("0 success", "1 a failure", "2 a usage error", "70 an internal error"):
        assert status in said
    line = next(line for line in manual.splitlines() if "_COMPLETE=bash_source" in line)
    variable = line.split('"$(')[1].split("=")[0]
    script = subprocess.run(
        [*binary()], env={"PATH": "/usr/bin:/bin", variable: "bash_source"}, capture_output=True
    )
    assert script.returncode == 0 and b"complete " in script.stdout
    words = subprocess.run(
        [*binary()],
        env={"PATH": "/usr/bin:/bin", variable: "bash_complete", "COMP_WORDS": "resource-gpu ver",
             "COMP_CWORD": "1"},
        capture_output=True,
    )  # fmt: skip
    assert b"verify" in words.stdout and b"verbs" in words.stdout
