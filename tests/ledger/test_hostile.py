"""Hostile and malformed requests, generated: whatever arrives on stdin, a verb either answers with
a correctly shaped JSON value (and nothing on stderr) or fails cleanly, and a failure writes
nothing.

``test_bad_input.py`` enumerates hand-picked cases through the binary; this module complements it
with Hypothesis properties over every core verb (and the hidden ``calculate-remap``): wrong types,
numbers far beyond int64, huge maps and lists, odd unicode (escaped lone surrogates, RTL
overrides, NUL, emoji, very long strings), missing and extra fields, truncated JSON, non-object
top levels and deep nesting. A clean failure is the contract's: exit status 1, nothing on stdout,
exactly one stderr line ``resource-gpu <verb>: ...``, no traceback, no "internal error" (bad
input is not a bug of the plugin's), and the etcd revision unchanged.

The bulk runs in-process through ``commands.main.main`` (the console script's own entry point,
with click's ``CliRunner`` isolating stdin, stdout and stderr; any exception other than
``SystemExit`` escapes and fails the test), so thousands of examples fit the time budget; a
smaller sample runs through the installed binary. Examples are derandomized and no example
database is used: CI sees the same inputs on every run.
"""

from __future__ import annotations

import base64
import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from etcd3 import etcdrpc
from hypothesis import HealthCheck, currently_in_test_context, event, given, settings
from hypothesis import strategies as st

from resource_extend.commands.gpu.plugin import PLUGIN as GPU
from resource_extend.commands.registry import CORE_VERBS, HIDDEN_VERBS
from tests.etcdkv import RPC_TIMEOUT, Etcd, prefix_end, upstream_head
from tests.plugin import Plugin, R, Result
from tests.plugin import in_process as run_here

G = "nvidia-3090"
A = "nvidia-a100"
PRODUCTS = [G, A]
MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""The stdin cap docs/verbs.md states."""

VERBS = [*CORE_VERBS, *HIDDEN_VERBS]
WRITE_VERBS = [
    "add-node",
    "remove-node",
    "set-node-resource-capacity",
    "set-node-resource-usage",
    "set-node-resource-info",
    "fix-node-resource",
]
"""The verbs that write, as docs/verbs.md lists them."""
READ_VERBS = [verb for verb in VERBS if verb not in WRITE_VERBS]

# Where each verb reads what; the kinds name the strategies below.
FIELDS: dict[str, dict[str, str]] = {
    "add-node": {"nodename": "node", "resource": "r", "info": "info"},
    "remove-node": {"nodename": "node"},
    "set-node-resource-capacity": {
        "nodename": "node",
        "resource": "r",
        "resource_request": "r",
        "delta": "bool",
        "incr": "bool",
    },
    "set-node-resource-usage": {
        "nodename": "node",
        "resource": "r",
        "resource_request": "r",
        "workloads_resource": "workloads",
        "delta": "bool",
        "incr": "bool",
    },
    "set-node-resource-info": {"nodename": "node", "capacity": "r", "usage": "r"},
    "fix-node-resource": {"nodename": "node", "workloads_resource": "workloads"},
    "calculate-deploy": {
        "nodename": "node",
        "deploy_count": "count",
        "workload_resource_request": "r",
    },
    "calculate-realloc": {
        "nodename": "node",
        "workload_resource": "r",
        "workload_resource_request": "r",
    },
    "get-nodes-deploy-capacity": {"nodenames": "nodes", "workload_resource": "r"},
    "get-node-resource-info": {"nodename": "node", "workloads_resource": "workloads"},
    "get-nodes-resource-info": {"nodenames": "nodes"},
    "get-most-idle-node": {"nodenames": "nodes"},
    "get-metrics-description": {},
    "get-metrics": {"podname": "text", "nodename": "node", "nodes": "metric_nodes"},
    "name": {},
    "verbs": {},
    "calculate-remap": {"nodename": "node", "engine_params_map": "any"},
}
FIELD_NAMES = sorted({name for fields in FIELDS.values() for name in fields})

# Derandomized and without an example database, so CI is reproducible; sized to the budget.
IN_PROCESS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
)
THROUGH_BINARY = settings(IN_PROCESS, max_examples=60)


# -- running a verb -----------------------------------------------------------------------------


def in_process(config: Path, args: list[str], stdin: bytes = b"") -> Result:
    """resource-gpu ``args`` with ``--config``, in this process."""
    return run_here(GPU, ["--config", str(config), *args], stdin)


class Installation:
    """One plugin prefix, seeded: n1 (4 cards, 1 used), n2 (2 cards), and ``legacy``, a record
    as the upstream plugin writes it (adopted on its first write)."""

    def __init__(self, endpoints: list[str], workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.plugin = Plugin(endpoints, workdir)
        self.etcd = Etcd(endpoints, self.plugin.prefix)
        self.root = self.etcd.root.encode()
        self.events_root = self.etcd.events_root.encode()

    def close(self) -> None:
        self.etcd.close()
        self.plugin.stop_helper()  # one helper per config: none outlives its installation

    def call(self, args: list[str], stdin: bytes = b"") -> Result:
        return in_process(self.plugin.config, args, stdin)

    def binary(self, verb: str, stdin: bytes) -> Result:
        return self.plugin.run(verb, raw=stdin, timeout=30)

    def seed(self) -> Installation:
        for node, capacity, usage in [("n1", {G: 4}, {G: 1}), ("n2", {G: 2}, {})]:
            request = {"nodename": node, "capacity": R(capacity), "usage": R(usage)}
            seeded = self.call(["set-node-resource-info"], json.dumps(request).encode())
            assert seeded.status == 0, seeded.stderr
        self.etcd.put_upstream_head("legacy", upstream_head({G: 3}, {G: 1}))
        return self


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("hostile")


@pytest.fixture(scope="module")
def readers(etcd_endpoints: list[str], workdir: Path) -> Iterator[Installation]:
    """One seeded installation for the verbs that never write (each example checks they don't)."""
    installation = Installation(etcd_endpoints, workdir / "readers").seed()
    try:
        yield installation
    finally:
        installation.close()


@dataclass
class Fresh:
    """A fresh seeded installation per example, for the verbs that write."""

    endpoints: list[str]
    workdir: Path

    def __call__(self) -> Installation:
        return Installation(self.endpoints, self.workdir / uuid.uuid4().hex[:8]).seed()


@pytest.fixture(scope="module")
def fresh(etcd_endpoints: list[str], workdir: Path) -> Fresh:
    return Fresh(etcd_endpoints, workdir)


# -- the whole keyspace ------------------------------------------------------------------------

ALL_KEYS = b"\0"
"""As a range's key and end: every key in etcd, every prefix."""


def _range(etcd: Etcd, key: bytes, end: bytes, **fields: Any) -> Any:
    request = etcdrpc.RangeRequest(key=key, range_end=end, **fields)
    return etcd.client.kvstub.Range(request, RPC_TIMEOUT, metadata=etcd.client.metadata)


def keys_written_since(etcd: Etcd, revision: int) -> list[bytes]:
    """Every key, under any prefix, put after ``revision``."""
    reply = _range(etcd, ALL_KEYS, ALL_KEYS, keys_only=True, min_mod_revision=revision + 1)
    return [kv.key for kv in reply.kvs]


def keys_outside(etcd: Etcd, *roots: bytes) -> int:
    """How many keys etcd holds outside ``roots`` (a deletion there shows as a smaller
    count)."""
    every = _range(etcd, ALL_KEYS, ALL_KEYS, count_only=True).count
    inside = sum(_range(etcd, root, prefix_end(root), count_only=True).count for root in roots)
    return int(every - inside)


@dataclass(frozen=True)
class Before:
    revision: int
    outside: int

    @classmethod
    def of(cls, installation: Installation) -> Before:
        etcd = installation.etcd
        return cls(etcd.revision(), keys_outside(etcd, installation.root, installation.events_root))


# -- what a clean answer is ---------------------------------------------------------------------


def assert_clean_failure(verb: str, outcome: Result) -> str:
    assert outcome.status != 0
    assert outcome.stdout == "", f"{verb} printed on failure: {outcome.stdout[:300]!r}"
    lines = outcome.stderr.splitlines()
    assert len(lines) == 1, f"{verb} error is not one line: {outcome.stderr[:600]!r}"
    assert outcome.stderr.endswith("\n")
    line = lines[0]
    assert line.startswith(f"resource-gpu {verb}: "), line[:300]
    assert "Traceback" not in outcome.stderr
    assert "internal error" not in line, f"bad input reported as a plugin bug: {line[:400]}"
    assert outcome.status == 1, f"exit {outcome.status}: {line[:300]}"
    return line


def is_r(value: Any, *, signed: bool = False) -> bool:
    """``{"prod_count_map": {product: count}}``, normalised: non-blank products, integer
    counts, no zeros (and none negative unless ``signed``)."""
    if not isinstance(value, dict) or set(value) != {"prod_count_map"}:
        return False
    found = value["prod_count_map"]
    if found is None:
        return True
    return isinstance(found, dict) and all(
        isinstance(product, str)
        and product.strip() != ""
        and type(count) is int
        and count != 0
        and (signed or count > 0)
        for product, count in found.items()
    )


def cards(value: Any) -> dict[str, int]:
    return dict(value["prod_count_map"] or {})


def is_number(value: Any) -> bool:
    return type(value) in (int, float)


def names_in(request: dict[str, Any]) -> list[Any]:
    names = request.get("nodenames")
    return names if isinstance(names, list) else []


def _resources(answer: Any, request: dict[str, Any]) -> None:
    assert isinstance(answer, dict) and set(answer) == {"capacity", "usage"}, answer
    assert is_r(answer["capacity"]) and is_r(answer["usage"]), answer


def _node_info(answer: Any, request: dict[str, Any]) -> None:
    assert isinstance(answer, dict) and set(answer) == {"capacity", "usage", "diffs"}, answer
    assert is_r(answer["capacity"]) and is_r(answer["usage"]), answer
    assert isinstance(answer["diffs"], list)
    assert all(isinstance(d, str) for d in answer["diffs"])


def _before_after(answer: Any, request: dict[str, Any]) -> None:
    assert isinstance(answer, dict) and set(answer) == {"before", "after"}, answer
    assert is_r(answer["before"]) and is_r(answer["after"]), answer


def _empty(answer: Any, request: dict[str, Any]) -> None:
    assert answer == {}


def _deploy(answer: Any, request: dict[str, Any]) -> None:
    assert isinstance(answer, dict) and set(answer) == {"engines_params", "workloads_resource"}
    count = request.get("deploy_count") or 0
    engines, workloads = answer["engines_params"], answer["workloads_resource"]
    assert isinstance(engines, list) and len(engines) == count, (len(engines), count)
    assert engines == workloads
    assert all(is_r(entry) and entry == engines[0] for entry in engines)


def _realloc(answer: Any, request: dict[str, Any]) -> None:
    assert isinstance(answer, dict)
    assert set(answer) == {"engine_params", "workload_resource", "delta_resource"}, answer
    assert is_r(answer["engine_params"]) and answer["engine_params"] == answer["workload_resource"]
    assert is_r(answer["delta_resource"], signed=True)


def _deploy_capacity(answer: Any, request: dict[str, Any]) -> None:
    assert isinstance(answer, dict) and set(answer) == {"nodes_deploy_capacity_map", "total"}
    found = answer["nodes_deploy_capacity_map"]
    assert isinstance(found, dict) and set(found) <= set(names_in(request)), found
    for entry in found.values():
        assert set(entry) == {"Capacity", "Usage", "Rate", "Weight"}, entry
        assert type(entry["Capacity"]) is int and entry["Capacity"] > 0
        assert all(is_number(entry[k]) for k in ("Usage", "Rate", "Weight"))
    assert answer["total"] == sum(entry["Capacity"] for entry in found.values())


def _nodes_info(answer: Any, request: dict[str, Any]) -> None:
    assert isinstance(answer, dict) and set(answer) == {"node_resource_info_map"}
    found = answer["node_resource_info_map"]
    assert isinstance(found, dict) and set(found) <= set(names_in(request)), found
    for entry in found.values():
        _resources(entry, request)


def _most_idle(answer: Any, request: dict[str, Any]) -> None:
    assert isinstance(answer, dict) and set(answer) == {"nodename", "priority"}
    assert answer["nodename"] in names_in(request)
    assert answer["priority"] == 100


def _descriptions(answer: Any, request: dict[str, Any]) -> None:
    assert isinstance(answer, list) and {d["name"] for d in answer} == {"gpu_capacity", "gpu_used"}
    assert all(set(d) == {"name", "help", "type", "labels"} for d in answer)


def _metrics(answer: Any, request: dict[str, Any]) -> None:
    assert isinstance(answer, list)
    for metric in answer:
        assert set(metric) == {"name", "labels", "key", "value"}, metric
        assert metric["name"] in ("gpu_capacity", "gpu_used")
        assert isinstance(metric["labels"], list) and len(metric["labels"]) == 3
        assert all(isinstance(label, str) for label in metric["labels"])
        assert isinstance(metric["key"], str) and metric["key"].startswith("core.node.")
        assert re.fullmatch(r"\d+", metric["value"]), metric


def _get_node_info(answer: Any, request: dict[str, Any]) -> None:
    if answer is not None:
        _node_info(answer, request)


SHAPES: dict[str, Callable[[Any, dict[str, Any]], None]] = {
    "add-node": _resources,
    "remove-node": _empty,
    "set-node-resource-capacity": _before_after,
    "set-node-resource-usage": _before_after,
    "set-node-resource-info": _empty,
    "fix-node-resource": _node_info,
    "calculate-deploy": _deploy,
    "calculate-realloc": _realloc,
    "get-nodes-deploy-capacity": _deploy_capacity,
    "get-node-resource-info": _get_node_info,
    "get-nodes-resource-info": _nodes_info,
    "get-most-idle-node": _most_idle,
    "get-metrics-description": _descriptions,
    "get-metrics": _metrics,
    "name": lambda answer, _: _equal(answer, "gpu"),
    "verbs": lambda answer, _: _equal(answer, list(CORE_VERBS)),
    "calculate-remap": lambda answer, _: _equal(answer, {"engine_params_map": None}),
}


def _equal(answer: Any, expected: Any) -> None:
    assert answer == expected


def request_of(body: bytes) -> dict[str, Any]:
    """The request as the plugin read it, when it could (empty stdin is ``{}``)."""
    if not body.strip():
        return {}
    try:  # numbers too long for Python's int() only ever sit in fields the plugin ignores
        parsed = json.loads(body, parse_int=lambda s: int(s) if len(s) < 4000 else 0)
    except (ValueError, RecursionError):  # Python's decoder stops at ~1000 levels
        return {}
    return parsed if isinstance(parsed, dict) else {}


def assert_answer(verb: str, outcome: Result, request: dict[str, Any]) -> Any:
    assert outcome.stderr == "", f"{verb} wrote to stderr on success: {outcome.stderr[:300]!r}"
    assert outcome.stdout.endswith("\n") and outcome.stdout.count("\n") == 1
    answer = json.loads(outcome.stdout)
    SHAPES[verb](answer, request)
    return answer


def reason_kind(line: str) -> str:
    """The gist of an error line, for Hypothesis' statistics (what the examples exercised)."""
    reason = re.sub(r"^resource-gpu [a-z-]+: (node .*?: )?", "", line.strip())
    return " ".join(re.split(r"[\s:]+", reason)[:4])


def check_call(
    installation: Installation, verb: str, body: bytes, outcome: Result, before: Before
) -> None:
    """The property: a well-shaped answer, or a clean failure that wrote nothing."""
    etcd = installation.etcd
    if currently_in_test_context():  # the pinned tests below call this outside Hypothesis
        event(f"exit {outcome.status}: {reason_kind(outcome.stderr)}")
    if outcome.status != 0:
        assert_clean_failure(verb, outcome)
        assert etcd.revision() == before.revision, f"{verb} failed but wrote to etcd"
        return
    request = request_of(body)
    answer = assert_answer(verb, outcome, request)
    if verb not in WRITE_VERBS:
        assert etcd.revision() == before.revision, f"{verb} never writes, but etcd moved"
        return
    check_write(installation, verb, request, answer, before)


def check_write(
    installation: Installation,
    verb: str,
    request: dict[str, Any],
    answer: Any,
    before: Before,
) -> None:
    """A write that succeeded touched only its node's keys, and left a node every verb can
    still read, whose head agrees with its stream and with the answer."""
    node = request["nodename"]
    assert isinstance(node, str)
    etcd, head = installation.etcd, installation.root + node.encode()
    for key in keys_written_since(etcd, before.revision):
        stream = installation.events_root + node.encode() + b"/"
        assert key == head or key.startswith(stream), (node, key)
    outside = keys_outside(etcd, installation.root, installation.events_root)
    assert outside == before.outside, "a key outside was deleted"
    readback = installation.call(
        ["get-node-resource-info"], json.dumps({"nodename": node}).encode()
    )
    assert readback.status == 0, f"{verb} succeeded, then the node is unreadable: {readback.stderr}"
    state = json.loads(readback.stdout)
    if installation.etcd.events(node):  # (verify calls a node it never knew an error)
        verified = installation.call(["verify", "--", node])
        assert verified.status == 0, verified.stdout + verified.stderr
    if verb == "remove-node":
        assert state is None
        return
    if state is None:  # an edit that left a node with no record as it was: an empty one
        if verb == "set-node-resource-info":  # core's rollback of a removal, of an empty node
            assert answer == {}, answer
        else:
            assert verb in ("set-node-resource-capacity", "set-node-resource-usage"), verb
            assert cards(answer["before"]) == cards(answer["after"]) == {}
        assert etcd.revision() == before.revision, f"{verb} wrote, but left no record"
        return
    if verb in ("add-node", "fix-node-resource"):
        assert cards(answer["capacity"]) == cards(state["capacity"])
        assert cards(answer["usage"]) == cards(state["usage"])
    elif verb == "set-node-resource-capacity":
        assert cards(answer["after"]) == cards(state["capacity"])
    elif verb == "set-node-resource-usage":
        assert cards(answer["after"]) == cards(state["usage"])


# -- hostile input ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Raw:
    """JSON text put in verbatim: what ``json.dumps`` will not write (NaN, 10**100000, nesting
    deeper than its recursion limit)."""

    text: str


def dump(value: Any, *, ascii_only: bool) -> str:
    """``value`` as JSON text, with every :class:`Raw` inside spliced in as it is.

    ``ascii_only`` escapes everything beyond ASCII, lone surrogates included (``"\\ud800"``);
    without it they stay raw and the body is not UTF-8 (see :func:`encoded`).
    """
    raws: list[str] = []

    def placeholder(item: Any) -> str:
        if not isinstance(item, Raw):
            raise TypeError(type(item))
        raws.append(item.text)
        return f"@@raw-{len(raws) - 1}@@"

    text = json.dumps(value, ensure_ascii=ascii_only, default=placeholder)
    return re.sub(r'"@@raw-(\d+)@@"', lambda m: raws[int(m.group(1))], text)


def encoded(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def nested(kind: str, depth: int) -> Raw:
    if kind == "[":
        return Raw("[" * depth + "]" * depth)
    return Raw('{"a":' * depth + "0" + "}" * depth)


deep = st.builds(nested, st.sampled_from(["[", "{"]), st.integers(1, 400))
"""Nesting that stays clear of Python's recursion limit (1000 frames, the caller's included:
near it, an outcome would depend on the depth of the test's own stack, and so be flaky).
Deeper nesting is pinned by test_deep_nesting_in_an_ignored_field_is_a_bad_request."""

SPECIAL_TEXT = [
    "",
    " ",
    "\t\n",
    "\x00",
    "n1\x00",
    "a\nb",
    "\r",
    "\x1b[2J",
    "\x7f",
    "\u202eevil",  # right-to-left override
    "\u200f",
    "\u200b",
    "\ufeff",
    "\u2028",
    "\x85",
    "🎮🔥",
    "e\u0301",
    "..",
    "../x",
    "a/b",
    "%2F",
    "\u2215",
    "\uff0f",
    "\ud800",  # lone surrogates: escaped in ASCII JSON, raw (not UTF-8) otherwise
    "\udc80",
    "\ud83c\udfae",  # a surrogate pair: one emoji
    "null",
    "{}",
    '"',
    "\\",
    "n1 ",
    "N1",
    "x" * 253,
    "x" * 254,
    "p" * 257,
]
BIG_INTS = [
    0,
    -1,
    1_000_000,
    1_000_001,
    2**31 - 1,
    2**31,
    2**32,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63),
    -(2**63) - 1,
    2**64,
    2**64 + 1,
    -(2**64),
    10**30,
    -(10**30),
    10**300,
]
RAW_NUMBERS = [
    "NaN",
    "Infinity",
    "-Infinity",
    "1e400",
    "-1e400",
    "1e-400",
    "-0",
    "1.0",
    "2E0",
    "0x10",
    "01",
    "+1",
]

odd_chars = st.characters(categories=["Cs", "Cc", "Cf", "Zl", "Zp", "Zs", "Mn", "So"])
short_text = st.one_of(
    st.text(max_size=12),
    st.text(odd_chars, max_size=6),
    st.sampled_from(SPECIAL_TEXT),
)
long_text = st.builds(
    lambda char, length: char * length,
    st.sampled_from(["x", "é", "🎮", "\u202e", "\x00", "/", "\ud800"]),
    st.integers(200, 200_000),
)
odd_text = st.one_of(short_text, long_text)
big_ints = st.one_of(st.sampled_from(BIG_INTS), st.integers())
raw_numbers = st.one_of(
    st.sampled_from(RAW_NUMBERS).map(Raw),
    st.builds(lambda digits: Raw("9" * digits), st.sampled_from([5_000, 100_000])),
)
scalars = st.one_of(
    st.none(),
    st.booleans(),
    big_ints,
    st.floats(allow_nan=False, allow_infinity=False),
    short_text,
    raw_numbers,
)
small_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(short_text, inner, max_size=4),
    max_leaves=8,
)
huge = st.one_of(
    st.integers(1_000, 50_000).map(lambda n: {f"p{i}": 1 for i in range(n)}),
    st.integers(1_000, 50_000).map(lambda n: list(range(n))),
    long_text,
    deep,
)
anything = st.one_of(small_values, huge)
non_objects = st.one_of(
    scalars,
    st.lists(small_values, max_size=4),
    st.integers(1_000, 50_000).map(lambda n: list(range(n))),
    long_text,
    deep,
)

products = st.one_of(st.sampled_from(PRODUCTS), odd_text)
counts = st.one_of(st.integers(-2, 6), st.sampled_from([1_000_000, -1_000_000]))
"""Valid counts (negative ones are valid in changes), the per-count limit included."""
hostile_counts = st.one_of(big_ints, st.floats(), st.booleans(), st.none(), short_text, raw_numbers)
valid_r = st.one_of(
    st.none(),
    st.just({}),
    st.just({"prod_count_map": None}),
    st.dictionaries(st.sampled_from(PRODUCTS), counts, max_size=2).map(R),
)
hostile_r = st.one_of(
    st.dictionaries(products, st.one_of(counts, hostile_counts), max_size=3).map(R),
    st.integers(1_000, 50_000).map(lambda n: R({f"{G}-{i}": 1 for i in range(n)})),
    st.builds(lambda v: {"prod_count_map": v}, anything),
    st.builds(lambda m, extra: {**m, "extra": extra}, valid_r.filter(bool), anything),
    anything,
)
any_r = st.one_of(valid_r, hostile_r)

valid_nodes = st.sampled_from(["n1", "n2", "legacy", "n9"])
hostile_nodes = st.one_of(odd_text, anything)
node_lists = st.one_of(
    st.lists(st.one_of(valid_nodes, hostile_nodes), min_size=1, max_size=4),
    st.integers(200, 3_000).map(lambda n: [f"n{i}" for i in range(n)]),
    anything,
)
workload_lists = st.one_of(
    st.lists(any_r, max_size=4),
    st.integers(1_000, 40_000).map(lambda n: [R({G: 1})] * n),
    st.integers(100, 800).map(lambda n: [R({f"w{i}": 1}) for i in range(n)]),
    anything,
)
infos = st.one_of(
    st.builds(
        lambda key, value: {"Resources": {key: value}},
        st.sampled_from(["gpu", "resource-gpu", "GPU", ""]),
        st.one_of(
            st.builds(
                lambda r: base64.b64encode(encoded(dump(r, ascii_only=True))).decode(), any_r
            ),
            st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()),
            odd_text,
            anything,
        ),
    ),
    anything,
)
metric_nodes = st.one_of(
    st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "podname": st.one_of(st.just("p"), odd_text),
                "nodename": st.one_of(valid_nodes, hostile_nodes),
            },
        ),
        max_size=3,
    ),
    anything,
)

VALID: dict[str, st.SearchStrategy[Any]] = {
    "node": valid_nodes,
    "nodes": st.lists(valid_nodes, min_size=1, max_size=3),
    "r": valid_r,
    "workloads": st.lists(valid_r, max_size=3),
    "bool": st.booleans(),
    "count": st.integers(0, 4),
    "text": st.just("p"),
    "metric_nodes": st.lists(
        st.fixed_dictionaries({"podname": st.just("p"), "nodename": valid_nodes}), max_size=2
    ),
    "info": st.just({}),
    "any": st.none(),
}
HOSTILE: dict[str, st.SearchStrategy[Any]] = {
    "node": hostile_nodes,
    "nodes": node_lists,
    "r": hostile_r,
    "workloads": workload_lists,
    "bool": st.one_of(small_values, st.sampled_from(["true", "false", 1, 0])),
    "count": st.one_of(big_ints, anything),
    "text": odd_text,
    "metric_nodes": metric_nodes,
    "info": infos,
    "any": anything,
}
extra_names = st.one_of(
    st.sampled_from([*FIELD_NAMES, "NodeName", "nodename ", "prod_count_map", "Resources"]),
    short_text,
)


@st.composite
def requests(draw: st.DrawFn, verb: str) -> dict[str, Any]:
    """An object with each of the verb's fields valid, missing, null or hostile, plus extras."""
    request: dict[str, Any] = {}
    for field, kind in FIELDS[verb].items():
        how = draw(st.sampled_from(["valid", "valid", "hostile", "valid", "missing", "null"]))
        if how == "valid":
            request[field] = draw(VALID[kind])
        elif how == "hostile":
            request[field] = draw(HOSTILE[kind])
        elif how == "null":
            request[field] = None
    for name, value in draw(st.dictionaries(extra_names, anything, max_size=2)).items():
        request.setdefault(name, value)
    return request


@st.composite
def bodies(draw: st.DrawFn, verb: str) -> bytes:
    """What arrives on stdin: mostly a request object, else anything but one."""
    shape = draw(st.sampled_from(["object"] * 6 + ["top", "cut", "joined", "bytes"]))
    ascii_only = draw(st.booleans())
    if shape == "object":
        return encoded(dump(draw(requests(verb)), ascii_only=ascii_only))
    if shape == "top":  # a JSON value that is not an object
        top = draw(non_objects)
        return encoded(dump(top, ascii_only=ascii_only))
    whole = dump(draw(requests(verb)), ascii_only=ascii_only)
    if shape == "cut":  # truncated
        return encoded(whole[: draw(st.integers(0, max(len(whole) - 1, 0)))])
    if shape == "joined":
        joiner = draw(st.sampled_from(["", "\n", " , ", "]", "}", "\x00", "//"]))
        tail = draw(st.sampled_from([whole, "", "{", "x", "null", "\ufeff"]))
        return encoded(f"{whole}{joiner}{tail}")
    return draw(
        st.one_of(
            st.binary(max_size=64),
            st.sampled_from([b"", b" \n\t", b"\xef\xbb\xbf" + encoded(whole), b"\x00" * 8]),
        )
    )


# -- the properties -----------------------------------------------------------------------------


def test_every_verb_has_a_generator() -> None:
    assert set(FIELDS) == set(VERBS)
    assert set(WRITE_VERBS) <= set(CORE_VERBS)


@pytest.mark.parametrize("verb", READ_VERBS)
@IN_PROCESS
@given(data=st.data())
def test_hostile_request_to_a_reader(readers: Installation, verb: str, data: st.DataObject) -> None:
    """Reads answer or fail cleanly, and never write, whatever they are sent."""
    body = data.draw(bodies(verb), label="stdin")
    before = Before.of(readers)
    check_call(readers, verb, body, readers.call([verb], body), before)


@pytest.mark.parametrize("verb", WRITE_VERBS)
@IN_PROCESS
@given(data=st.data())
def test_hostile_request_to_a_writer(fresh: Fresh, verb: str, data: st.DataObject) -> None:
    """Writes succeed with the right shape, touching only their node's keys and leaving it
    readable and verified, or fail cleanly having written nothing."""
    body = data.draw(bodies(verb), label="stdin")
    installation = fresh()
    try:
        before = Before.of(installation)
        check_call(installation, verb, body, installation.call([verb], body), before)
    finally:
        installation.close()


@pytest.mark.resident  # the helper relays stdin: hostile bytes and sizes must cross it unchanged
@THROUGH_BINARY
@given(data=st.data())
def test_hostile_requests_through_the_binary(fresh: Fresh, data: st.DataObject) -> None:
    """A sample of the same inputs through the installed binary, a separate process per call."""
    verb = data.draw(st.sampled_from(VERBS), label="verb")
    body = data.draw(bodies(verb), label="stdin")
    installation = fresh()
    try:
        before = Before.of(installation)
        check_call(installation, verb, body, installation.binary(verb, body), before)
    finally:
        installation.close()


# -- bugs the properties found, pinned ----------------------------------------------------------


@pytest.mark.parametrize("verb", ["add-node", "get-node-resource-info", "set-node-resource-usage"])
@pytest.mark.parametrize("kind", ["[", "{"], ids=["arrays", "objects"])
def test_deep_nesting_in_an_ignored_field_is_a_bad_request(
    readers: Installation, verb: str, kind: str
) -> None:
    """Unknown keys are ignored, but their JSON is still parsed: nesting a thousand levels deep
    there must be refused as a bad request (exit 1), not crash the decoder as an internal
    error (exit 70, "RecursionError")."""
    for depth in (1_000, 100_000):
        body = encoded(dump({"nodename": "n1", "x": nested(kind, depth)}, ascii_only=True))
        before = Before.of(readers)
        outcome = readers.call([verb], body)
        assert_clean_failure(verb, outcome)
        assert readers.etcd.revision() == before.revision


SUMS_PAST_THE_LIMIT: dict[str, list[tuple[str, dict[str, Any]]]] = {
    "usage-workloads": [
        (
            "set-node-resource-usage",
            {
                "nodename": "n1",
                "workloads_resource": [R({G: 1_000_000})] * 2,
                "delta": True,
                "incr": True,
            },
        )
    ],
    "usage-twice": [
        (
            "set-node-resource-usage",
            {"nodename": "n1", "resource": R({G: 1_000_000}), "delta": True, "incr": True},
        )
    ]
    * 2,
    "capacity-delta": [
        (
            "set-node-resource-capacity",
            {"nodename": "n1", "resource": R({G: 1_000_000}), "delta": True, "incr": True},
        )
    ],
    "fix-workloads": [
        ("fix-node-resource", {"nodename": "n1", "workloads_resource": [R({G: 1_000_000})] * 2})
    ],
}


@pytest.mark.parametrize("case", list(SUMS_PAST_THE_LIMIT))
def test_a_write_never_stores_what_the_plugin_cannot_read_back(fresh: Fresh, case: str) -> None:
    """Each request is within the per-count limit (1000000), but the result is beyond it.
    Either the write is refused (one line, nothing written) or the node stays readable: a
    record the plugin wrote must not make every later verb on the node fail, remove-node
    included, nor break get-nodes-resource-info for the whole pod."""
    installation = fresh()
    try:
        for verb, request in SUMS_PAST_THE_LIMIT[case]:
            body = json.dumps(request).encode()
            before = Before.of(installation)
            check_call(installation, verb, body, installation.call([verb], body), before)
        listing = installation.call(["get-nodes-resource-info"], b'{"nodenames": ["n1", "n2"]}')
        assert listing.status == 0, listing.stderr
        removed = installation.call(["remove-node"], b'{"nodename": "n1"}')
        assert removed.status == 0, removed.stderr
    finally:
        installation.close()


def test_many_distinct_workloads_are_summed(readers: Installation) -> None:
    """get-node-resource-info (a read) with 16000 workloads of one distinct product each, a
    0.5 MiB request far below the 4 MiB cap, is answered exactly. (Summing once took time
    quadratic in the workloads; how long it takes is the benchmark's business, not a test's.)"""
    request = {"nodename": "n1", "workloads_resource": [R({f"w{i}": 1}) for i in range(16_000)]}
    result = readers.plugin.run("get-node-resource-info", request)
    assert result.status == 0, result.stderr
    _node_info(json.loads(result.stdout), request)


# -- size limits --------------------------------------------------------------------------------

LONG_PRODUCT = "nvidia-" + "x" * 93  # 100 characters
MAX_CARDS = 22_000


def too_large_for_etcd() -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Requests under the 4 MiB stdin cap whose one transaction is over etcd's request limit
    (1.5 MiB by default; over 2 MiB gRPC refuses the message before etcd looks at it)."""
    for label, count in [("etcd-limit", 16_000), ("grpc-limit", MAX_CARDS)]:
        workloads = [R({LONG_PRODUCT: 1})] * count
        yield (
            label,
            "set-node-resource-usage",
            {"nodename": "n1", "workloads_resource": workloads, "delta": True, "incr": True},
        )
    # fix-node-resource records usage and one diff line per product: distinct long products.
    workloads = [R({f"{LONG_PRODUCT}-{i}" + "y" * 140: 1}) for i in range(2_500)]
    yield (
        "distinct-products",
        "fix-node-resource",
        {"nodename": "n1", "workloads_resource": workloads},
    )


TOO_LARGE = list(too_large_for_etcd())


@pytest.mark.parametrize(
    ("verb", "request_"), [c[1:] for c in TOO_LARGE], ids=[c[0] for c in TOO_LARGE]
)
def test_a_change_too_large_for_etcd_fails_cleanly(
    fresh: Fresh, verb: str, request_: dict[str, Any]
) -> None:
    body = json.dumps(request_).encode()
    assert len(body) < MAX_REQUEST_BYTES
    installation = fresh()
    try:
        # Cards for every workload, so that only the transaction's size stands in the way.
        room: dict[str, Any] = {"nodename": "n1", "resource_request": R({LONG_PRODUCT: MAX_CARDS})}
        room |= {"delta": True, "incr": True}
        grown = installation.call(["set-node-resource-capacity"], json.dumps(room).encode())
        assert grown.status == 0, grown.stderr
        before = Before.of(installation)
        snapshot = installation.etcd.snapshot()
        line = assert_clean_failure(verb, installation.binary(verb, body))
        assert line.startswith(f"resource-gpu {verb}: node n1: "), line
        assert "etcd" in line, line
        assert installation.etcd.revision() == before.revision
        assert installation.etcd.snapshot() == snapshot
        # The node is untouched and still takes an ordinary change.
        state = json.loads(
            installation.call(["get-node-resource-info"], b'{"nodename":"n1"}').stdout
        )
        assert cards(state["usage"]) == {G: 1}
        ordinary = {
            "nodename": "n1",
            "workloads_resource": [R({G: 1})],
            "delta": True,
            "incr": True,
        }
        deployed = installation.call(["set-node-resource-usage"], json.dumps(ordinary).encode())
        assert deployed.status == 0, deployed.stderr
    finally:
        installation.close()


def padded(request: dict[str, Any], size: int) -> bytes:
    """The request's JSON followed by whitespace, ``size`` bytes in all."""
    body = json.dumps(request).encode()
    return body + b" " * (size - len(body))


@pytest.mark.parametrize("verb", ["get-node-resource-info", "set-node-resource-usage"])
def test_stdin_cap_is_four_mib_exactly(fresh: Fresh, verb: str) -> None:
    """4 MiB of stdin is read; one byte more is refused before anything is parsed or written."""
    request = {"nodename": "n1", "workloads_resource": [R({G: 1})], "delta": True, "incr": True}
    installation = fresh()
    try:
        before = Before.of(installation)
        over = installation.binary(verb, padded(request, MAX_REQUEST_BYTES + 1))
        line = assert_clean_failure(verb, over)
        assert "larger than" in line and str(MAX_REQUEST_BYTES) in line, line
        assert installation.etcd.revision() == before.revision
        at_cap = installation.binary(verb, padded(request, MAX_REQUEST_BYTES))
        assert at_cap.status == 0, at_cap.stderr
        assert at_cap.stderr == ""
    finally:
        installation.close()
