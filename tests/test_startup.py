"""Core spawns a process per call: each verb imports only what it needs."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.plugin import MODE, TRANSPORT, Plugin, R

PROBE = """
import sys
from commands.main import main
try:
    main([{verb!r}])
except SystemExit:
    pass
print(",".join(sorted(sys.modules)), file=sys.stderr)
"""


def modules_loaded_by(
    verb: str, stdin: bytes = b"{}", config: str = "/nonexistent/gpu.yaml"
) -> set[str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(verb=verb)],
        input=stdin,
        capture_output=True,
        check=True,
        env={"ERU_RESOURCE_CONFIG_PATH": config, "PATH": ""},
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


# What a core call must not pay for: the click CLI always; over the default (HTTP) transport,
# the gRPC stack and the standard library's heavier HTTP and TLS modules too.
GRPC_STACK = ("etcd3", "grpc", "google.protobuf")
NOT_OVER_HTTP = ("click", *GRPC_STACK, "http.client", "ssl", "email")


@pytest.mark.parametrize(
    ("verb", "request_"),
    [
        ("get-node-resource-info", {"nodename": "n1"}),
        ("set-node-resource-usage", {"nodename": "n1", "resource": R({"a": 1}), "delta": True}),
        ("get-nodes-deploy-capacity", {"nodenames": ["n1"], "resource_request": R({"a": 1})}),
    ],
)
def test_a_core_call_loads_only_what_its_transport_needs(
    plugin: Plugin, verb: str, request_: dict[str, Any]
) -> None:
    plugin.add("n1", {"a": 4})
    request = json.dumps(request_).encode()
    if MODE == "resident":
        # Once the helper is up (the first calls start it), a call is a thin client.
        for _ in range(100):
            loaded = modules_loaded_by(verb, request, str(plugin.config))
            if "ledger.store" not in loaded:
                break
            time.sleep(0.1)
        for heavy in ("click", "msgspec", "yaml", "ledger.store", *GRPC_STACK):
            assert heavy not in loaded, f"{verb} through the resident helper imported {heavy}"
        return
    loaded = modules_loaded_by(verb, request, str(plugin.config))
    assert "ledger.store" in loaded, "the verb did not reach etcd"
    assert "click" not in loaded, f"{verb} imported the CLI"
    if TRANSPORT == "http":
        for heavy in NOT_OVER_HTTP:
            assert heavy not in loaded, f"{verb} over HTTP imported {heavy}"
    else:
        for module in GRPC_STACK:
            assert module in loaded, f"{verb} over gRPC did not load {module}"
