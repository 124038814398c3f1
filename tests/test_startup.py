"""Core spawns a process per call: each verb imports only what it needs."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
from commands.cli import main
try:
    main([{verb!r}])
except SystemExit:
    pass
print(",".join(sorted(sys.modules)), file=sys.stderr)
"""


def modules_loaded_by(verb: str, stdin: bytes = b"{}") -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(verb=verb)],
        input=stdin,
        capture_output=True,
        check=True,
        env={"ERU_RESOURCE_CONFIG_PATH": "/nonexistent/gpu.yaml", "PATH": ""},
    )
    return set(done.stderr.decode().strip().splitlines()[-1].split(","))


@pytest.mark.parametrize("verb", ["name", "verbs", "get-metrics-description", "calculate-remap"])
def test_offline_verbs_load_neither_etcd_nor_metrics_libraries(verb: str) -> None:
    loaded = modules_loaded_by(verb)
    assert "commands.meta" in loaded
    for heavy in ("etcd3", "grpc", "google.protobuf", "prometheus_client", "yaml"):
        assert heavy not in loaded, f"{verb} imported {heavy}"


def test_a_storage_verb_loads_etcd_only_when_it_needs_it() -> None:
    # With no config file the verb fails before it opens etcd: the client is never imported.
    loaded = modules_loaded_by("get-node-resource-info", b'{"nodename": "n1"}')
    assert "commands.queries" in loaded
    assert "etcd3" not in loaded
    assert "commands.writes" not in loaded
