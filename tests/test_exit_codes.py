"""Exit status as the help says: 0 success, 1 a failure said in one line, 2 a usage error (an
unknown command or option, an argument not understood), each refused before a config is
read or etcd is asked. Run through the installed binary: the status is the point."""

from __future__ import annotations

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
