"""Exit status as the help says: 0 success, 1 a failure said in one line, 2 a usage error (an
unknown command or option, an argument not understood), each refused before a config is
read or etcd is asked. Run through the installed binary: the status is the point."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.plugin import binary

USAGE_ERRORS: dict[str, tuple[list[str], str]] = {
    "verify, no node and no --all": (["verify"], "name the nodes to verify, or pass --all"),
    "verify, nodes and --all": (["verify", "n1", "--all"], "(not both)"),
    "compact, no node": (["compact", "--keep", "3"], "name the nodes to compact"),
    "show --at -1": (["show", "n1", "--at", "-1"], "'-1' is neither a seq nor"),
    "history --since words": (["history", "n1", "--since", "noon"], "'noon' is neither"),
    "history --limit 0": (["history", "n1", "--limit", "0"], "--limit"),
    "exporter --listen foo": (["exporter", "--listen", "foo"], "--listen 'foo': no port"),
    "exporter --stale-after": (["exporter", "--stale-after", "1", "--every", "5"], "shorter"),
    "an unknown option": (["nodes", "--colour"], "No such option '--colour'"),
    "an unknown sample": (["sample-config", "units"], "'units' is not one of"),
    "a typo'd command": (["add-nod"], "No such command 'add-nod': did you mean 'add-node'?"),
    "a typo'd auditor command": (["histroy", "n1"], "did you mean 'history'?"),
    "an unknown command": (["frobnicate"], "No such command 'frobnicate' (see"),
}


def call(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    # No config anywhere: a usage error must be found before one is looked for.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}
    return subprocess.run(
        [*binary(), *argv], capture_output=True, text=True, cwd=cwd, env=env, check=False
    )


@pytest.mark.parametrize("case", list(USAGE_ERRORS))
def test_a_usage_error_exits_2_in_one_line(case: str, tmp_path: Path) -> None:
    argv, said = USAGE_ERRORS[case]
    result = call(argv, tmp_path)
    assert (result.returncode, result.stdout) == (2, ""), result.stderr
    (line,) = result.stderr.splitlines()
    assert said in line and line.endswith("--help')"), line


def test_no_suggestion_for_a_name_like_no_command(tmp_path: Path) -> None:
    line = call(["frobnicate"], tmp_path).stderr
    assert "did you mean" not in line


def test_a_failure_exits_1_and_success_0(tmp_path: Path) -> None:
    missing = call(["nodes"], tmp_path)  # no gpu.yaml here: a failure, not a usage error
    assert missing.returncode == 1 and "not found" in missing.stderr
    assert call(["--version"], tmp_path).returncode == 0


OUTPUTS = [["sample-config"], ["--help"], ["--version"], ["nodes", "--help"], ["verbs"], ["name"]]
"""Commands that print (no etcd needed): click's own output, a people's command's, a core
verb's."""


@pytest.mark.parametrize("argv", OUTPUTS, ids=" ".join)
def test_a_full_stdout_is_one_line_and_exit_1(argv: list[str], tmp_path: Path) -> None:
    """A full disk is an ordinary failure, not a bug (it said ``internal error: OSError``, or
    printed a traceback)."""
    with open("/dev/full", "wb") as full:
        done = subprocess.run(
            [*binary(), *argv], stdout=full, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
            timeout=60,
        )  # fmt: skip
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1, done.stderr
    assert "cannot write its output: No space left on device" in done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr


@pytest.mark.parametrize("argv", OUTPUTS, ids=" ".join)
def test_a_closed_stdout_is_quiet(argv: list[str], tmp_path: Path) -> None:
    """``resource-gpu sample-config | head -1``: whoever read has gone, and nobody is told."""
    reading, writing = os.pipe()
    os.close(reading)
    try:
        done = subprocess.run(
            [*binary(), *argv], stdout=writing, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
            timeout=60,
        )  # fmt: skip
    finally:
        os.close(writing)
    assert (done.returncode, done.stderr) == (1, "")
