"""The config file as core's calls meet it: broken, odd, or read from elsewhere. Every verb that
needs it fails with one line; ``name`` and ``verbs`` never need it; relative paths in it are
relative to it."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.plugin import Plugin, R, Result, binary, failure_line

pytestmark = pytest.mark.resident

NO_ETCD = ["http://127.0.0.1:9"]
"""The config is refused before any etcd is dialled."""
STORAGE_VERBS = [
    ("get-node-resource-info", {"nodename": "n1"}),
    ("add-node", {"nodename": "n1", "resource": R({"a": 1})}),
]


def offline_verbs_still_answer(run: Any) -> None:
    """``name`` and ``verbs`` need no config: they answer, exit 0, say nothing on stderr."""
    for verb, answer in (("name", "gpu"), ("verbs", "add-node")):
        result = run(verb)
        assert (result.status, result.stderr) == (0, ""), (verb, result)
        assert answer in json.loads(result.stdout)


def test_a_config_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    plugin = Plugin(NO_ETCD, tmp_path)
    plugin.config.write_bytes(b'etcd: {machines: ["http://127.0.0.1:9"], prefix: /caf\xe9}\n')
    for verb, request in STORAGE_VERBS:
        line = failure_line(plugin.run(verb, request, timeout=20), verb)
        assert "UTF-8" in line and str(plugin.config) in line, line
    offline_verbs_still_answer(lambda verb: plugin.run(verb, timeout=20))


@pytest.fixture(params=["fifo", "directory", "/dev/zero"])
def odd_file(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    if request.param == "fifo":
        path = tmp_path / "fifo.yaml"
        os.mkfifo(path)
    elif request.param == "directory":
        path = tmp_path / "dir.yaml"
        path.mkdir()
    else:
        path = Path(request.param)
    yield path


def test_a_config_that_is_not_a_regular_file_is_one_line(odd_file: Path, tmp_path: Path) -> None:
    plugin = Plugin(NO_ETCD, tmp_path)
    plugin.config = odd_file
    for verb, request in STORAGE_VERBS:
        line = failure_line(plugin.run(verb, request, timeout=20), verb)
        assert "not a regular file" in line and str(odd_file) in line, line
    offline_verbs_still_answer(lambda verb: plugin.run(verb, timeout=20))


@pytest.mark.parametrize(
    "entry", ["http://[::1", "http://127.0.0.1:99999", "ftp://x", "http://", ""]
)
def test_a_bad_machines_entry_is_a_config_error_not_an_internal_one(
    entry: str, tmp_path: Path
) -> None:
    plugin = Plugin([entry], tmp_path)
    result = plugin.run("get-node-resource-info", {"nodename": "n1"}, timeout=20)
    line = failure_line(result, "get-node-resource-info")
    assert result.status == 1, line
    assert f"etcd.machines entry {entry!r}" in line, line


# --- relative paths ---------------------------------------------------------------------------


def test_a_relative_export_dir_is_next_to_the_config(plugin: Plugin, tmp_path: Path) -> None:
    """Compaction exports into ``streams.export_dir`` beside gpu.yaml, whatever directory the
    call runs from (core's, or ``/`` for the resident helper)."""
    elsewhere = tmp_path / "elsewhere"
    for directory in (tmp_path / "exports", elsewhere / "exports"):
        directory.mkdir(parents=True)
    config = json.loads(plugin.config.read_text())
    config["streams"] = {"max_events": 2, "min_age": 0, "export_dir": "exports"}
    plugin.config.write_text(json.dumps(config))
    ok(plugin.run("add-node", {"nodename": "n1", "resource": R({"a": 8})}, cwd=elsewhere))
    for _ in range(5):
        request = {"nodename": "n1", "resource": R({"a": 1}), "delta": True, "incr": True}
        ok(plugin.run("set-node-resource-usage", request, cwd=elsewhere))
    assert list((tmp_path / "exports").iterdir()), "no export beside the config"
    assert not list((elsewhere / "exports").iterdir())


def ok(result: Result) -> Result:
    assert (result.status, result.stderr) == (0, ""), result
    return result


# --- a working directory that no longer exists -----------------------------------------------


@pytest.fixture
def gone(tmp_path: Path) -> Path:
    """A directory to run from, removed: ``os.getcwd()`` fails in a process started there."""
    return tmp_path / "gone"


def run_in(directory: Path, verb: str, request: Any, env: dict[str, str]) -> Result:
    """Run the binary in ``directory``, removed once the child is in it."""
    directory.mkdir(exist_ok=True)
    done = subprocess.run(
        ["/bin/sh", "-c", 'cd "$1" && rmdir "$1" && shift && exec "$@"', "sh", str(directory),
         *binary(), verb],
        input=json.dumps(request).encode(), capture_output=True, env=env, timeout=20,
    )  # fmt: skip
    return Result(done.returncode, done.stdout.decode(), done.stderr.decode())


def environment(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ERU_RESOURCE_CONFIG_PATH"}
    return {**env, **extra}


def test_a_call_from_a_deleted_working_directory_reads_its_config(
    plugin: Plugin, gone: Path
) -> None:
    env = environment(ERU_RESOURCE_CONFIG_PATH=str(plugin.config))
    ok(run_in(gone, "add-node", {"nodename": "n1", "resource": R({"a": 1})}, env))
    assert plugin.info("n1")["capacity"] == R({"a": 1})


def test_no_default_config_in_a_deleted_working_directory_in_process(gone: Path) -> None:
    """The lookup of ``./gpu.yaml`` where ``.`` is gone: "not found", as anywhere else."""
    env = environment(RESOURCE_GPU_RESIDENT="0")
    line = failure_line(run_in(gone, "get-node-resource-info", {"nodename": "n1"}, env),
                        "get-node-resource-info")  # fmt: skip
    assert "gpu.yaml" in line and "not found" in line, line
    offline_verbs_still_answer(lambda verb: run_in(gone, verb, {}, env))


def test_no_default_config_in_a_deleted_working_directory(gone: Path) -> None:
    """What core meets if the plugin's directory is removed under it: one line, and ``name``
    and ``verbs`` still answer."""
    env = environment()
    line = failure_line(run_in(gone, "get-node-resource-info", {"nodename": "n1"}, env),
                        "get-node-resource-info")  # fmt: skip
    assert "gpu.yaml" in line and "not found" in line, line
    offline_verbs_still_answer(lambda verb: run_in(gone, verb, {}, env))
