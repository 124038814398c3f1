"""Core spawns a process per call: each verb imports only what it needs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.plugin import MODE, TRANSPORT, Plugin, R

pytestmark = [pytest.mark.grpc, pytest.mark.resident]

PROBE = """
import sys
from resource_extend.commands.main import main
from resource_extend.commands.{kind}.plugin import PLUGIN
try:
    main(PLUGIN, [{verb!r}])
except SystemExit:
    pass
print(",".join(sorted(sys.modules)), file=sys.stderr)
"""


def runtime_dir() -> dict[str, str]:
    """The suite's runtime directory: helpers, and parsed copies of configs, are found there."""
    return {"XDG_RUNTIME_DIR": os.environ["XDG_RUNTIME_DIR"]}


def modules_loaded_by(
    verb: str,
    stdin: bytes = b"{}",
    config: str = "/nonexistent/gpu.yaml",
    program: str = "resource-gpu",
    home: str | None = None,
) -> set[str]:
    """``home``: the caller's HOME; a helper serves only callers whose HOME and trust (its
    ``CALLERS_ENVIRONMENT``) are its starter's, so those are this process's."""
    env = {"ERU_RESOURCE_CONFIG_PATH": config, "PATH": "", **runtime_dir()}
    if home is not None:
        trust = ("SSL_CERT_FILE", "SSL_CERT_DIR")
        env.update({name: os.environ[name] for name in trust if name in os.environ})
        env["HOME"] = home
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(verb=verb, kind=program.removeprefix("resource-"))],
        input=stdin,
        capture_output=True,
        check=True,
        env=env,
    )
    return set(done.stderr.decode().strip().splitlines()[-1].split(","))


@pytest.mark.parametrize("program", ["resource-gpu", "resource-storage"])
@pytest.mark.parametrize("verb", ["name", "verbs", "get-metrics-description", "calculate-remap"])
def test_offline_verbs_load_neither_etcd_nor_metrics_libraries(verb: str, program: str) -> None:
    loaded = modules_loaded_by(verb, program=program)
    assert "resource_extend.commands.meta" in loaded
    assert "resource_extend.ledger.store" not in loaded
    for heavy in ("etcd3", "grpc", "google.protobuf", "prometheus_client", "yaml"):
        assert heavy not in loaded, f"{verb} imported {heavy}"


def test_a_storage_verb_loads_etcd_only_when_it_needs_it() -> None:
    # With no config file the verb fails before it opens etcd: the client is never imported.
    loaded = modules_loaded_by("get-node-resource-info", b'{"nodename": "n1"}')
    assert "resource_extend.commands.gpu.queries" in loaded
    assert "etcd3" not in loaded
    assert "resource_extend.commands.gpu.writes" not in loaded


def test_a_resource_storage_read_loads_only_storage() -> None:
    loaded = modules_loaded_by(
        "get-node-resource-info", b'{"nodename": "n1"}', program="resource-storage"
    )
    assert "resource_extend.commands.storage.queries" in loaded
    assert not [m for m in loaded if m.startswith("resource_extend.projections.gpu")]
    assert not [m for m in loaded if m.startswith("resource_extend.commands.gpu")]
    assert "resource_extend.projections.storage.placement.schedule" not in loaded


# What a core call must not pay for: the click CLI always; PyYAML once the config's parsed
# copy is kept (the suite's in-process modes run with resident: false); over the default
# (HTTP) transport, the gRPC stack, the standard library's heavier HTTP and TLS modules, and
# the modules the plugin does without by design (each measured at 2 to 30% of such a call).
# (Not pathlib or urllib.parse, which it does without too: the editable install of the test
# environment loads them at start-up.)
GRPC_STACK = ("grpc", "google.protobuf")
"""What the gRPC transport loads: gRPC and protobuf's compiled backend, never etcd3's modules
(``ledger.etcd.protos`` reads their descriptors as data)."""
NOT_IN_PROCESS = ("click", "yaml")
NOT_OVER_HTTP = (
    *NOT_IN_PROCESS, *GRPC_STACK, "http.client", "ssl", "email", "socket", "random",
    "dataclasses",
    "typing_extensions",  # installed with grpcio; msgspec loads without it (commands.main)
)  # fmt: skip


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
            home = str(plugin.workdir / "home")  # the HOME the helper was started with
            loaded = modules_loaded_by(verb, request, str(plugin.config), home=home)
            if "resource_extend.ledger.store" not in loaded:
                break
            time.sleep(0.1)
        for heavy in (
            "click",
            "msgspec",
            "yaml",
            "resource_extend.ledger.store",
            "etcd3",
            *GRPC_STACK,
        ):
            assert heavy not in loaded, f"{verb} through the resident helper imported {heavy}"
        return
    loaded = modules_loaded_by(verb, request, str(plugin.config))
    assert "resource_extend.ledger.store" in loaded, "the verb did not reach etcd"
    for heavy in NOT_IN_PROCESS:
        assert heavy not in loaded, f"{verb} imported {heavy}"
    if TRANSPORT == "http":
        for heavy in NOT_OVER_HTTP:
            assert heavy not in loaded, f"{verb} over HTTP imported {heavy}"
    else:
        for module in GRPC_STACK:
            assert module in loaded, f"{verb} over gRPC did not load {module}"
        assert "etcd3" not in loaded and "google._upb._message" in loaded


WITHOUT_GRPC = """
import sys
sys.modules["grpc"] = None  # as on an install whose gRPC libraries are gone
from resource_extend.commands.main import main
from resource_extend.commands.gpu.plugin import PLUGIN
main(PLUGIN, ["get-node-resource-info"])
"""


def test_the_grpc_transport_without_its_libraries_says_how_to_install_them(
    plugin: Plugin,
) -> None:
    plugin.write_config(transport="grpc")
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_GRPC],
        input=b'{"nodename": "n1"}',
        capture_output=True,
        env={**os.environ, "ERU_RESOURCE_CONFIG_PATH": str(plugin.config)},
        timeout=60,
    )
    assert (done.returncode, done.stdout) == (1, b"")
    line = done.stderr.decode()
    assert line.count("\n") == 1, line
    assert line.startswith("resource-gpu get-node-resource-info: node n1: ")
    assert "grpc is missing" in line and "reinstall resource-extend" in line, line
    assert "transport: auto" in line, line


def test_auto_takes_http_in_a_call_of_its_own_and_scans_over_grpc_in_a_command(
    plugin: Plugin,
) -> None:
    """The default transport: a core call in a process of its own pays no gRPC import; an
    operator's command, which serves many, scans over gRPC; both say so."""
    plugin.write_config(transport="auto", resident=False)
    plugin.add("n1", {"a": 4})
    loaded = modules_loaded_by("get-node-resource-info", b'{"nodename": "n1"}', str(plugin.config))
    assert "resource_extend.ledger.store" in loaded, "the verb did not reach etcd"
    for heavy in NOT_OVER_HTTP:
        assert heavy not in loaded, f"a call of its own under auto imported {heavy}"
    shown = plugin.run("footprint", None, "--json")
    assert shown.status == 0, shown.stderr
    transport = json.loads(shown.stdout)["transport"]
    assert transport["this command"] == {
        "transport": "grpc",
        "why": "auto: a scan over many nodes in a process that serves many calls, where gRPC is "
        "faster",
    }
    assert transport["core's calls"].startswith("transport auto: core's calls over HTTP (auto: ")


WARM_CALL = """
import io, json, sys
import msgspec
from resource_extend.commands.protocol import CallIO, Session
from resource_extend.commands.registry import load_verb
from resource_extend.commands.resident import client, daemon, warm  # daemon: the helper's own
from resource_extend.ledger.store.appender import who
from resource_extend.commands.{kind}.plugin import PLUGIN
warm.warm_up(PLUGIN)  # what the helper does before it forks a call's process
warm.ready_for_calls(sys.argv[2])
client.code_identity(), who()  # (Helper.__init__: what it runs, for whom)
calls = json.loads(sys.argv[1])
before = set(sys.modules)
for verb, request in calls:
    err = io.BytesIO()
    streams = CallIO(io.BytesIO(json.dumps(request).encode()), io.BytesIO(), err)
    load_verb(PLUGIN, verb)(Session(PLUGIN, sys.argv[2], streams))
    assert not err.getvalue(), err.getvalue()
print(json.dumps(sorted(set(sys.modules) - before)))
"""


@pytest.mark.parametrize("program", ["resource-gpu", "resource-storage"])
def test_a_call_in_a_warm_helper_imports_nothing(plugin: Plugin, program: str) -> None:
    """The resident helper's warm-up imports all that its calls import, lazily imported ones
    included (a Session's config copies, the stream bounds of an append): each call's
    process is forked from it, and would otherwise import them again, and forget them."""
    kind = program.removeprefix("resource-")
    plugin.write_config()
    resource: Any = {"prod_count_map": {"a100": 2}} if kind == "gpu" else {"volumes": ["/d:1T"]}
    use: Any = {"prod_count_map": {"a100": 1}} if kind == "gpu" else {"storage": "1G"}
    take = {"nodename": "warm", "resource_request": use, "delta": True, "incr": True}
    calls = [
        ("add-node", {"nodename": "warm", "resource": resource}),
        ("get-node-resource-info", {"nodename": "warm"}),
        ("set-node-resource-usage", take),
        ("get-nodes-deploy-capacity", {"nodenames": ["warm"]}),
        ("fix-node-resource", {"nodename": "warm", "workloads_resource": []}),
    ]
    done = subprocess.run(
        [sys.executable, "-c", WARM_CALL.format(kind=kind), json.dumps(calls), str(plugin.config)],
        capture_output=True,
        check=False,
        env={**os.environ, **runtime_dir()},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    assert json.loads(done.stdout) == [], done.stdout.decode()
