"""Bad input to resource-storage, fuzzed: the binding grammar, human sizes, disk strings and
every request form. Whatever arrives, a verb answers well-formed JSON, or fails in one stderr
line naming the verb (exit 1, no traceback, never "internal error") having written nothing."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from resource_extend.commands.registry import CORE_VERBS, HIDDEN_VERBS
from resource_extend.commands.storage.plugin import PLUGIN as STORAGE
from tests.etcdkv import Etcd
from tests.plugin import Plugin, Result, in_process

PROGRAM = "resource-storage"
T = 2**40
VERBS = [*CORE_VERBS, *HIDDEN_VERBS]
WRITE_VERBS = {
    "add-node",
    "remove-node",
    "set-node-resource-capacity",
    "set-node-resource-usage",
    "set-node-resource-info",
    "fix-node-resource",
}

FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# -- the grammars, valid and broken --------------------------------------------------------------

anything = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=6,
)
"""Any JSON value."""
numbers = st.one_of(
    st.integers(-(2**70), 2**70).map(str),
    st.sampled_from(
        [
            "1G",
            "1GiB",
            "1.5T",
            "-1G",
            "--1G",
            "500 M",
            "1b",
            "1ib",
            "0",
            "",
            "1.2.3",
            "1e3",
            "G",
            "1 G ",
            " 1",
            "1_000",
            "\u0661",
            "0x10",
            "9" * 30,
            "1P",
            "1Z",
        ]
    ),
    st.text(max_size=6),
)
"""Human sizes: well-formed, broken, and beyond an int64."""
paths = st.one_of(
    st.sampled_from(["/data0", "/data1", "/dir", "AUTO", "", "/x/AUTO", "/"]), st.text(max_size=6)
)
flags = st.one_of(
    st.sampled_from(["rw", "ro", "mrw", "rwm", "orw", "rowo", "m", "", "wrmo"]), st.text(max_size=4)
)


@st.composite
def binding_texts(draw: st.DrawFn) -> str:
    parts = [draw(paths), draw(paths), draw(flags), *draw(st.lists(numbers, max_size=6))]
    return ":".join(parts[: draw(st.integers(1, len(parts)))])


@st.composite
def disk_texts(draw: st.DrawFn) -> str:
    mounts = ",".join(draw(st.lists(paths, max_size=3)))
    parts = [
        draw(st.sampled_from(["/dev/vda", "/dev/vdb", ""])),
        mounts,
        *draw(st.lists(numbers, max_size=6)),
    ]
    return ":".join(parts[: draw(st.integers(1, len(parts)))])


bindings = st.lists(
    st.one_of(
        binding_texts(),
        st.sampled_from(
            [
                "AUTO:/dir0:rw:1G",
                "AUTO:/dir1:rwm:100G",
                "AUTO:/dir2:rw",
                "/src:/dst:rw:0:10:10:1M:1M",
                ":/dir3:rw:1G:10:10:0:0",
                "AUTO:/dir0:rw:-1G",
            ]
        ),
    ),
    max_size=4,
)
sizes = st.one_of(numbers, st.integers(-(2**64), 2**64), st.floats(), st.booleans(), st.none())
node_requests = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "volumes": st.one_of(
                st.lists(st.builds(lambda p, n: f"{p}:{n}", paths, numbers), max_size=3), anything
            ),
            "storage": sizes,
            "disks": st.one_of(st.lists(disk_texts(), max_size=2), anything),
            "rm-disks": st.one_of(st.sampled_from(["/dev/vda", "/dev/vda,/dev/vdb", ""]), anything),
        },
    ),
    st.fixed_dictionaries(
        {},
        optional={
            "volumes": st.one_of(
                st.dictionaries(paths, st.integers(-T, 2**64), max_size=3), anything
            ),
            "storage": st.one_of(st.integers(-T, 2**64), st.floats(), st.text(max_size=3)),
            "disks": st.lists(
                st.fixed_dictionaries(
                    {"device": st.sampled_from(["/dev/vda", "/dev/vdb"])},
                    optional={
                        "mounts": st.lists(paths, max_size=2),
                        "read_IOPS": st.integers(-5, 2**64),
                        "read_iops": st.integers(-5, 5),
                        "write_bps": st.one_of(st.integers(0, 10), st.floats()),
                    },
                ),
                max_size=2,
            ),
        },
    ),
    anything,
)
workload_requests = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            key: st.one_of(bindings, anything)
            for key in ("volumes-request", "volume-request", "volumes", "volume", "volumes-limit")
        }
        | {key: sizes for key in ("storage", "storage-request", "storage-limit")},
    ),
    anything,
)
plans = st.dictionaries(
    st.one_of(binding_texts(), st.just("AUTO:/dir0:rw:1073741824:0:0:0:0")),
    st.one_of(st.dictionaries(paths, st.integers(-T, 2**64), max_size=2), anything),
    max_size=2,
)
workloads = st.one_of(
    st.fixed_dictionaries(
        {},
        optional={
            "volumes_request": st.one_of(bindings, anything),
            "volume_plan_request": st.one_of(plans, anything),
            "storage_request": st.one_of(st.integers(-T, 2**64), anything),
            "disks_request": st.one_of(
                st.lists(
                    st.fixed_dictionaries(
                        {"device": st.just("/dev/vda"), "read_IOPS": st.integers(-5, 50)}
                    )
                ),
                anything,
            ),
        },
    ),
    st.none(),
    anything,
)


def mostly(good: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """``good`` nine times in ten, else any JSON value: the fuzz reaches the parsers behind
    the request's shape instead of stopping at a wrong type on top."""
    return st.integers(0, 9).flatmap(lambda i: anything if i == 0 else good)


nodes = mostly(st.one_of(st.sampled_from(["n1", "n1", "n2", "none"]), st.text(max_size=5)))
flag = mostly(st.booleans())
FIELDS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "add-node": {"nodename": nodes, "resource": node_requests, "info": anything},
    "remove-node": {"nodename": nodes},
    "set-node-resource-capacity": {
        "nodename": nodes,
        "resource": node_requests,
        "resource_request": node_requests,
        "delta": flag,
        "incr": flag,
    },
    "set-node-resource-usage": {
        "nodename": nodes,
        "resource": node_requests,
        "resource_request": node_requests,
        "workloads_resource": st.one_of(st.lists(workloads, max_size=3), anything),
        "delta": flag,
        "incr": flag,
    },
    "set-node-resource-info": {
        "nodename": nodes,
        "capacity": node_requests,
        "usage": node_requests,
    },
    "fix-node-resource": {
        "nodename": nodes,
        "workloads_resource": st.one_of(st.lists(workloads, max_size=3), anything),
    },
    "calculate-deploy": {
        "nodename": nodes,
        "deploy_count": mostly(st.integers(-1, 5)),
        "workload_resource_request": workload_requests,
    },
    "calculate-realloc": {
        "nodename": nodes,
        "workload_resource": workloads,
        "workload_resource_request": workload_requests,
    },
    "get-nodes-deploy-capacity": {
        "nodenames": st.one_of(st.lists(nodes, max_size=3), anything),
        "workload_resource": workload_requests,
    },
    "get-node-resource-info": {
        "nodename": nodes,
        "workloads_resource": st.one_of(st.lists(workloads, max_size=3), anything),
    },
    "get-nodes-resource-info": {"nodenames": st.one_of(st.lists(nodes, max_size=3), anything)},
    "get-most-idle-node": {"nodenames": st.one_of(st.lists(nodes, max_size=3), anything)},
    "get-metrics-description": {},
    "get-metrics": {"podname": anything, "nodename": nodes, "nodes": anything},
    "name": {},
    "verbs": {},
    "calculate-remap": {"nodename": nodes},
}


@st.composite
def bodies(draw: st.DrawFn, verb: str) -> bytes:
    """A request object with each field valid-ish, missing, null or anything; sometimes not
    an object at all."""
    if draw(st.integers(0, 9)) == 0:
        return draw(
            st.one_of(st.binary(max_size=20), anything.map(lambda v: json.dumps(v).encode()))
        )
    request: dict[str, Any] = {}
    for field, strategy in FIELDS[verb].items():
        how = draw(st.sampled_from(["value"] * 8 + ["missing", "null"]))
        if how == "value":
            request[field] = draw(strategy)
        elif how == "null":
            request[field] = None
    return json.dumps(request).encode()


# -- running a verb -----------------------------------------------------------------------------


class Installation:
    """One resource-storage prefix, seeded: n1 (four 1 TiB volumes, a disk, some usage) and
    n2 (no volumes)."""

    def __init__(self, endpoints: list[str], workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.plugin = Plugin(
            endpoints, workdir, program=PROGRAM, scheduler={"max_deploy_count": 20}
        )
        self.etcd = Etcd(endpoints, self.plugin.prefix, "storage")

    def close(self) -> None:
        self.etcd.close()
        self.plugin.stop_helper()

    def call(self, verb: str, stdin: bytes = b"") -> Result:
        return in_process(STORAGE, ["--config", str(self.plugin.config), verb], stdin)

    def seed(self) -> Installation:
        for request in (
            {
                "nodename": "n1",
                "resource": {
                    "volumes": ["/data0:1T", "/data1:1T", "/data2:1T", "/data3:1T"],
                    "disks": ["/dev/vda:/,/data:1000:1000:1G:1G"],
                },
            },
            {"nodename": "n2", "resource": {"storage": "1T"}},
        ):
            added = self.call("add-node", json.dumps(request).encode())
            assert added.status == 0, added.stderr
        usage = {
            "nodename": "n1",
            "delta": True,
            "incr": True,
            "resource": {"volumes": {"/data0": 100 * 2**30}, "storage": 100 * 2**30},
        }
        used = self.call("set-node-resource-usage", json.dumps(usage).encode())
        assert used.status == 0, used.stderr
        return self


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("storage-hostile")


@pytest.fixture(scope="module")
def readers(etcd_endpoints: list[str], workdir: Path) -> Iterator[Installation]:
    installation = Installation(etcd_endpoints, workdir / "readers").seed()
    try:
        yield installation
    finally:
        installation.close()


def check(
    installation: Installation, verb: str, body: bytes, outcome: Result, revision: int
) -> None:
    etcd = installation.etcd
    event(
        f"exit {outcome.status}"
        + (f": {outcome.stderr.split(': ')[-1][:40]}" if outcome.status else "")
    )
    if outcome.status != 0:
        lines = outcome.stderr.splitlines()
        assert outcome.stdout == "", f"{verb} printed on failure: {outcome.stdout[:300]!r}"
        assert len(lines) == 1, f"{verb} error is not one line: {outcome.stderr[:600]!r}"
        assert lines[0].startswith(f"{PROGRAM} {verb}: "), lines[0][:300]
        assert "internal error" not in lines[0], f"bad input reported as a bug: {lines[0][:500]}"
        assert outcome.status == 1, lines[0][:300]
        assert etcd.revision() == revision, f"{verb} failed but wrote to etcd"
        return
    assert outcome.stderr == "", f"{verb} wrote to stderr on success: {outcome.stderr[:300]!r}"
    json.loads(outcome.stdout)
    if verb not in WRITE_VERBS:
        assert etcd.revision() == revision, f"{verb} never writes, but etcd moved"
        return
    node = json.loads(body)["nodename"]
    if etcd.events(node):
        checked = installation_verify(installation, node)
        assert checked.status == 0, checked.stdout + checked.stderr


def installation_verify(installation: Installation, node: str) -> Result:
    return in_process(STORAGE, ["--config", str(installation.plugin.config), "verify", "--", node])


@pytest.mark.parametrize("verb", [v for v in VERBS if v not in WRITE_VERBS])
@FUZZ
@given(data=st.data())
def test_hostile_request_to_a_reader(readers: Installation, verb: str, data: st.DataObject) -> None:
    body = data.draw(bodies(verb), label="stdin")
    revision = readers.etcd.revision()
    check(readers, verb, body, readers.call(verb, body), revision)


@pytest.mark.parametrize("verb", sorted(WRITE_VERBS))
@FUZZ
@given(data=st.data())
def test_hostile_request_to_a_writer(
    etcd_endpoints: list[str], workdir: Path, verb: str, data: st.DataObject
) -> None:
    body = data.draw(bodies(verb), label="stdin")
    installation = Installation(etcd_endpoints, workdir / uuid.uuid4().hex[:8]).seed()
    try:
        revision = installation.etcd.revision()
        check(installation, verb, body, installation.call(verb, body), revision)
    finally:
        installation.close()
