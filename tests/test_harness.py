"""The suite's own promises: without a working etcd it fails loudly, it never skips; and a run
beside another touches nothing of the other's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from resource_extend.commands.resident import client as resident
from tests.etcd_server import EtcdUnavailable, External, free_port, healthy
from tests.plugin import Plugin, counts

ROOT = Path(__file__).resolve().parent.parent


def test_an_unreachable_etcd_is_an_error_not_a_skip() -> None:
    with pytest.raises(EtcdUnavailable, match="no healthy etcd"):
        External([f"http://127.0.0.1:{free_port()}"]).start()


def test_storage_tests_error_out_when_etcd_cannot_be_had(tmp_path: Path) -> None:
    """The second run keeps its temporary files in this test's own directory: in the shared
    ``/tmp/pytest-of-<user>`` it would first delete the oldest runs' trees there, which took
    this test from 1.6 s to 30 s after a few full runs."""
    env = {**os.environ, "ETCD_ENDPOINTS": f"http://127.0.0.1:{free_port()}"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--basetemp", str(tmp_path / "run"), "tests/test_smoke.py"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "1 error" in done.stdout
    assert "skipped" not in done.stdout


def test_a_second_run_beside_the_first_leaves_its_helpers_and_etcd(
    etcd_endpoints: list[str], tmp_path: Path
) -> None:
    """Two runs side by side: a helper of this run's, whose directory's name starts with the
    other run's whole temporary directory (``suite-1x`` beside ``suite-1``), serves on and
    answers the same after a second suite, with its own etcd and helpers, ran and ended."""
    (tmp_path / "suite-1x").mkdir()
    ours = Plugin(etcd_endpoints, tmp_path / "suite-1x")
    config = json.loads(ours.config.read_text())
    ours.config.write_text(json.dumps({**config, "resident": True}))
    try:
        ours.add("n1", {"nvidia-3090": 2})
        pid = _helper_pid(ours)
        mine = ("ETCD_ENDPOINTS", "XDG_RUNTIME_DIR")  # the second run starts its own of both
        other = {k: v for k, v in os.environ.items() if k not in mine}
        other["RESOURCE_GPU_TEST_MODE"] = "resident"
        done = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
             "--basetemp", str(tmp_path / "suite-1"), "tests/test_smoke.py"],
            cwd=ROOT, env=other, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:]
        assert _helper_pid(ours) == pid, "the second run ended this run's helper"
        assert counts(ours.info("n1")["capacity"]) == {"nvidia-3090": 2}
        assert all(healthy(url) for url in etcd_endpoints), "the second run ended this run's etcd"
    finally:
        ours.stop_helper()


def _helper_pid(plugin: Plugin) -> int:
    """The pid of the helper answering for ``plugin``'s config, once one does."""
    deadline = time.monotonic() + 10
    while (
        link := resident.Link.connect(plugin.program, resident.socket_name(str(plugin.config)))
    ) is None:
        assert time.monotonic() < deadline, "no helper answered"
        time.sleep(0.05)
    link.close()
    return link.pid
