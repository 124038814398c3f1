"""The suite's own promise: without a working etcd it fails loudly, it never skips."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.etcd_server import EtcdUnavailable, External, free_port

ROOT = Path(__file__).resolve().parent.parent


def test_an_unreachable_etcd_is_an_error_not_a_skip() -> None:
    with pytest.raises(EtcdUnavailable, match="no healthy etcd"):
        External([f"http://127.0.0.1:{free_port()}"]).start()


def test_storage_tests_error_out_when_etcd_cannot_be_had() -> None:
    env = {**os.environ, "ETCD_ENDPOINTS": f"http://127.0.0.1:{free_port()}"}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_smoke.py"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "1 error" in done.stdout
    assert "skipped" not in done.stdout
