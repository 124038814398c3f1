"""Protocol hygiene: every malformed or invalid request fails cleanly and writes nothing.

A clean failure: non-zero exit, nothing on stdout, exactly one stderr line that starts with
``resource-gpu <verb>: `` (and names the node when a parseable request names one), no traceback,
and the etcd revision unchanged. The many requests are refused in this process; once a verb,
and for what only a process shows (a missing config, an etcd that is not there), through the
installed script.
"""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.etcd_server import free_port
from tests.etcdkv import Etcd, no_write
from tests.plugin import Plugin, R, binary, failure_line

G = "nvidia-3090"
GOOD = R({G: 1})

# A valid request for every verb that reads one (checked by test_valid_requests_succeed...).
REQUESTS: dict[str, dict[str, Any]] = {
    "add-node": {"nodename": "n3", "resource": GOOD},
    "remove-node": {"nodename": "n1"},
    "set-node-resource-capacity": {
        "nodename": "n1",
        "resource_request": GOOD,
        "delta": True,
        "incr": True,
    },
    "set-node-resource-usage": {
        "nodename": "n1",
        "workloads_resource": [GOOD],
        "delta": True,
        "incr": True,
    },
    "set-node-resource-info": {"nodename": "n1", "capacity": R({G: 4}), "usage": GOOD},
    "fix-node-resource": {"nodename": "n1", "workloads_resource": [GOOD]},
    "calculate-deploy": {"nodename": "n1", "deploy_count": 1, "workload_resource_request": GOOD},
    "calculate-realloc": {
        "nodename": "n1",
        "workload_resource": GOOD,
        "workload_resource_request": GOOD,
    },
    "get-nodes-deploy-capacity": {"nodenames": ["n1", "n2"], "workload_resource": GOOD},
    "get-node-resource-info": {"nodename": "n1", "workloads_resource": [GOOD]},
    "get-nodes-resource-info": {"nodenames": ["n1", "n2"]},
    "get-most-idle-node": {"nodenames": ["n1", "n2"]},
    "get-metrics": {"podname": "p", "nodename": "n1"},
}

# Where each verb takes a GPU map, with a request in which that map is the input that counts
# (set-node-resource-* use only one of resource_request / resource / workloads_resource).
R_FIELDS: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "add-node": [("resource", REQUESTS["add-node"])],
    "set-node-resource-capacity": [
        ("resource", {"nodename": "n1", "resource": GOOD, "delta": False, "incr": True}),
        ("resource_request", {"nodename": "n1", "resource_request": GOOD, "delta": False}),
    ],
    "set-node-resource-usage": [
        ("resource", {"nodename": "n1", "resource": GOOD, "delta": False}),
        ("resource_request", {"nodename": "n1", "resource_request": GOOD, "delta": False}),
        ("workloads_resource.0", REQUESTS["set-node-resource-usage"]),
    ],
    "set-node-resource-info": [
        ("capacity", REQUESTS["set-node-resource-info"]),
        ("usage", REQUESTS["set-node-resource-info"]),
    ],
    "fix-node-resource": [("workloads_resource.0", REQUESTS["fix-node-resource"])],
    "calculate-deploy": [("workload_resource_request", REQUESTS["calculate-deploy"])],
    "calculate-realloc": [
        ("workload_resource", REQUESTS["calculate-realloc"]),
        ("workload_resource_request", REQUESTS["calculate-realloc"]),
    ],
    "get-nodes-deploy-capacity": [("workload_resource", REQUESTS["get-nodes-deploy-capacity"])],
    "get-node-resource-info": [("workloads_resource.0", REQUESTS["get-node-resource-info"])],
}

# Maps where a negative count is allowed: realloc requests (negative = give back).
SIGNED = {
    ("set-node-resource-usage", "workloads_resource.0"),
    ("calculate-realloc", "workload_resource_request"),
}

BAD_MAPS: dict[str, Any] = {
    "count-string": R({G: "1"}),  # type: ignore[dict-item]
    "count-float": R({G: 1.5}),  # type: ignore[dict-item]
    "count-bool": R({G: True}),
    "count-null": R({G: None}),  # type: ignore[dict-item]
    "count-overflow": R({G: 10**30}),  # beyond any machine integer
    "product-empty": R({"": 1}),
    "product-blank": R({"   ": 1}),
    "product-whitespace": R({"\t\n": 1}),
    "map-string": "nvidia-3090",
    "counts-list": {"prod_count_map": [G]},
    "counts-string": {"prod_count_map": "nvidia-3090:1"},
}

LIST_FIELDS = {
    "set-node-resource-usage": "workloads_resource",
    "fix-node-resource": "workloads_resource",
    "get-node-resource-info": "workloads_resource",
    "get-nodes-deploy-capacity": "nodenames",
    "get-nodes-resource-info": "nodenames",
    "get-most-idle-node": "nodenames",
    "get-metrics": "nodes",
}


def with_value(request: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    changed = copy.deepcopy(request)
    *parents, last = path.split(".")
    target: Any = changed
    for part in parents:
        target = target[int(part)] if isinstance(target, list) else target[part]
    if isinstance(target, list):
        target[int(last)] = value
    else:
        target[last] = value
    return changed


class Case:
    def __init__(self, verb: str, name: str, body: bytes, names: str | None) -> None:
        self.verb = verb
        self.name = name
        self.body = body
        self.names = names
        """The node the error line must name (the request names it), or None."""

    @property
    def id(self) -> str:
        return f"{self.verb}-{self.name}"


def node_of(request: Any) -> str | None:
    node = request.get("nodename") if isinstance(request, dict) else None
    return node if isinstance(node, str) and node.strip() else None


def case(verb: str, name: str, request: Any) -> Case:
    return Case(verb, name, json.dumps(request).encode(), node_of(request))


def cases() -> Iterator[Case]:
    for verb, good in REQUESTS.items():
        text = json.dumps(good)
        yield Case(verb, "malformed", b'{"nodename": "n1",, "x": }', None)
        yield Case(verb, "truncated", text[: len(text) // 2].encode(), None)
        yield Case(verb, "array", json.dumps([good]).encode(), None)
        yield Case(verb, "two-objects", f"{text}\n{text}".encode(), None)
        yield Case(verb, "binary", b"\xff\xfe\x00\x9c garbage", None)
        if "nodename" in good:
            yield case(verb, "nodename-int", {**good, "nodename": 5})
            yield case(verb, "nodename-list", {**good, "nodename": ["n1"]})
            yield case(verb, "nodename-empty", {**good, "nodename": ""})
            yield case(verb, "nodename-blank", {**good, "nodename": "  "})
            yield case(verb, "nodename-slash", {**good, "nodename": "rack1/n1"})
        if "nodenames" in good:
            yield case(verb, "nodenames-empty-name", {**good, "nodenames": ["n1", ""]})
            yield case(verb, "nodenames-slash", {**good, "nodenames": ["n1", "rack1/n1"]})
            yield case(verb, "nodenames-int", {**good, "nodenames": ["n1", 2]})
        if verb in LIST_FIELDS:
            yield case(verb, "list-as-string", {**good, LIST_FIELDS[verb]: "n1"})
        for path, request in R_FIELDS.get(verb, []):
            for bad_name, bad in BAD_MAPS.items():
                yield case(verb, f"{path}-{bad_name}", with_value(request, path, bad))
            if (verb, path) not in SIGNED:
                yield case(verb, f"{path}-negative", with_value(request, path, R({G: -1})))
    for verb in ("set-node-resource-capacity", "set-node-resource-usage"):
        yield case(verb, "delta-string", {**REQUESTS[verb], "delta": "true"})
        yield case(verb, "incr-string", {**REQUESTS[verb], "incr": "yes"})
    add = REQUESTS["add-node"]
    yield case("add-node", "resource-zero", {**add, "resource": R({G: 0})})
    yield case(
        "add-node", "resource-negative-among-positive", {**add, "resource": R({G: 2, "a100": -1})}
    )
    deploy = REQUESTS["calculate-deploy"]
    for name, count in {"string": "1", "float": 1.5, "bool": True, "negative": -1}.items():
        yield case("calculate-deploy", f"deploy_count-{name}", {**deploy, "deploy_count": count})
    metrics = REQUESTS["get-metrics"]
    yield case("get-metrics", "podname-int", {**metrics, "podname": 7})
    yield case("get-metrics", "nodes-slash", {"nodes": [{"podname": "p", "nodename": "rack1/n1"}]})
    yield case("get-metrics", "nodes-empty-name", {"nodes": [{"podname": "p", "nodename": ""}]})
    yield case("get-metrics", "nodes-item-string", {"nodes": ["n1"]})


CASES = list(cases())


@pytest.fixture(scope="module")
def seeded(
    etcd_endpoints: list[str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[Plugin, Etcd]]:
    """One installation shared by the module's failure cases: n1 (4 cards, 1 used) and n2."""
    plugin = Plugin(etcd_endpoints, tmp_path_factory.mktemp("bad-input"))
    plugin.add("n1", {G: 4})
    plugin.ok("set-node-resource-usage", {"nodename": "n1", "resource": GOOD, "delta": False})
    plugin.add("n2", {G: 2})
    kv = Etcd(plugin.endpoints, plugin.prefix)
    try:
        yield plugin, kv
    finally:
        kv.close()


def assert_clean_failure(plugin: Plugin, etcd: Etcd, verb: str, body: bytes) -> str:
    """The verb refuses ``body`` cleanly, run in this process: validation is the same code
    whichever way a call comes (the process boundary:
    ``test_malformed_json_through_the_binary``)."""
    with no_write(etcd):
        line = failure_line(plugin.call(verb, raw=body), verb)
    assert "internal error" not in line, line
    return line


@pytest.mark.parametrize("bad", CASES, ids=[c.id for c in CASES])
def test_bad_request_fails_cleanly(seeded: tuple[Plugin, Etcd], bad: Case) -> None:
    plugin, etcd = seeded
    line = assert_clean_failure(plugin, etcd, bad.verb, bad.body)
    if bad.names is not None:
        assert f"resource-gpu {bad.verb}: node {bad.names}: " in line, line
        assert line.count(f"node {bad.names}:") == 1, line
    if "slash" in bad.name:
        assert "rack1/n1" in line, line


@pytest.mark.parametrize("verb", list(REQUESTS))
def test_oversized_request_fails_cleanly(seeded: tuple[Plugin, Etcd], verb: str) -> None:
    plugin, etcd = seeded
    padded = {**REQUESTS[verb], "padding": "x" * (5 * 1024 * 1024)}  # unknown keys are ignored
    assert_clean_failure(plugin, etcd, verb, json.dumps(padded).encode())


@pytest.mark.parametrize("verb", list(REQUESTS))
def test_malformed_json_through_the_binary(seeded: tuple[Plugin, Etcd], verb: str) -> None:
    """What a refusal looks like from outside, once a verb: the installed script's exit status,
    its streams, and etcd untouched."""
    plugin, etcd = seeded
    with no_write(etcd):
        line = plugin.fails(verb, raw=b'{"nodename": "n1",')
    assert "internal error" not in line and "JSON" in line, line


@pytest.mark.parametrize("verb", ["frob", "add_node", "ADD-NODE", "get-node", "calculate-deploy2"])
def test_unknown_verb_fails_with_one_line(seeded: tuple[Plugin, Etcd], verb: str) -> None:
    plugin, etcd = seeded
    with no_write(etcd):
        result = plugin.run(verb, {"nodename": "n1"})
    assert result.status != 0
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert verb in lines[0]
    assert lines[0].startswith("resource-gpu")
    assert "Traceback" not in result.stderr


def test_every_verb_that_reads_a_request_is_covered(plugin: Plugin) -> None:
    offered = set(plugin.ok("verbs"))
    assert offered - {"name", "verbs", "get-metrics-description"} == set(REQUESTS)


SUCCESSES: dict[str, Any] = {
    **REQUESTS,
    "name": None,
    "verbs": None,
    "get-metrics-description": {},
    "calculate-remap": {"nodename": "n1"},
}


@pytest.mark.parametrize("verb", list(SUCCESSES))
def test_success_writes_nothing_on_stderr(plugin: Plugin, verb: str) -> None:
    plugin.add("n1", {G: 4})
    plugin.add("n2", {G: 2})
    result = plugin.run(verb, SUCCESSES[verb])
    assert result.status == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout.endswith("\n") and result.stdout.count("\n") == 1
    json.loads(result.stdout)


def bounded_failure(plugin: Plugin, verb: str, request: Any) -> str:
    """Like Plugin.fails, but a hang fails the test (subprocess timeout) instead of waiting."""
    result = plugin.run(verb, request, timeout=20)
    assert result.status != 0
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"resource-gpu {verb}: "), lines[0]
    assert "Traceback" not in result.stderr
    return lines[0]


def test_missing_config_file_is_one_clear_line(plugin: Plugin) -> None:
    plugin.config.unlink()
    for verb, request in [
        ("get-node-resource-info", {"nodename": "n1"}),
        ("add-node", {"nodename": "n1", "resource": GOOD}),
    ]:
        line = bounded_failure(plugin, verb, request)
        assert "config" in line and str(plugin.config) in line, line
    # name and verbs need no config
    assert plugin.ok("name") == "gpu"
    assert "add-node" in plugin.ok("verbs")


def test_no_config_anywhere_is_one_clear_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ERU_RESOURCE_CONFIG_PATH"}
    done = subprocess.run(
        [*binary(), "get-node-resource-info"],
        input=b'{"nodename": "n1"}',
        capture_output=True,
        env=env,
        cwd=tmp_path,
        timeout=20,
    )
    assert done.returncode != 0
    assert done.stdout == b""
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("resource-gpu get-node-resource-info: ")
    assert "gpu.yaml" in lines[0]


def test_invalid_config_is_one_clear_line(plugin: Plugin) -> None:
    plugin.config.write_text("etcd: {prefix: /x}\n")  # machines missing
    assert "machines" in bounded_failure(plugin, "get-node-resource-info", {"nodename": "n1"})
    plugin.config.write_text("etcd: [unclosed\n")
    assert "config" in bounded_failure(plugin, "get-node-resource-info", {"nodename": "n1"})


@pytest.mark.parametrize(
    ("verb", "request_"),
    [
        ("get-node-resource-info", {"nodename": "n1"}),
        ("set-node-resource-usage", REQUESTS["set-node-resource-usage"]),
        ("get-nodes-resource-info", {"nodenames": ["n1", "n2"]}),
    ],
)
def test_unreachable_etcd_fails_with_one_line(
    plugin: Plugin, verb: str, request_: dict[str, Any]
) -> None:
    plugin.write_config(machines=[f"http://127.0.0.1:{free_port()}"])
    line = bounded_failure(plugin, verb, request_)
    if "nodename" in request_:
        assert "node n1" in line, line
    assert "etcd" in line, line


def test_silent_etcd_fails_with_one_line(plugin: Plugin) -> None:
    """An endpoint that accepts connections but never answers: the call must give up by itself."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(16)
        plugin.write_config(machines=[f"http://127.0.0.1:{silent.getsockname()[1]}"])
        line = bounded_failure(
            plugin, "set-node-resource-usage", REQUESTS["set-node-resource-usage"]
        )
    assert "node n1" in line, line


@pytest.mark.parametrize("program", ["resource-gpu", "resource-storage"])
def test_an_over_long_node_name_is_abbreviated_not_echoed_whole(
    program: str, etcd_endpoints: list[str], tmp_path: Path
) -> None:
    """A 100,000-character name was echoed whole: one 100 KB line in core's log. A name
    longer than a node name may be shows its first 64 characters and its length."""
    plugin = Plugin(etcd_endpoints, tmp_path, program=program)
    name = "n" * 100_000
    for verb in ("add-node", "get-node-resource-info"):
        line = failure_line(plugin.run(verb, {"nodename": name}), verb, program)
        assert line == (
            f"{program} {verb}: node {'n' * 64}… (100000 characters): "
            "node name is longer than 253 characters"
        ), line[:300]
    unprintable = "\x07" * 1000
    line = plugin.fails("get-node-resource-info", {"nodename": unprintable})
    assert len(line) < 400 and "(1000 characters)" in line, line
