"""Node names cannot reach keys outside the plugin's prefix.

A node name becomes one segment of an etcd key (``<prefix>/resource/gpu/<node>``, its events
under ``.../<node>/events/``) and, when a stream is compacted, part of an export file's name. For
names built to escape (``..``, ``../x``, ``a/b``, ``%2F``, NUL, newlines and other control
characters, very long names, unicode lookalikes of ``/``), every verb that writes either refuses
the name (one line, nothing written) or writes only that node's own keys. The whole etcd keyspace,
every prefix, is compared before and after; keys that share the plugin's prefix without being
under ``<prefix>/resource/gpu/`` are laid down as decoys. The auditor commands (``history``,
``show``, ``verify``, ``export``, ``compact``) get the same names, and ``compact`` writes its
export file inside the directory it is given and nowhere else.

Calls run in-process through the console script's ``main`` (see ``test_hostile.py``).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.etcdkv import Etcd
from tests.ledger.test_hostile import (
    ALL_KEYS,
    _range,
    assert_clean_failure,
    in_process,
    keys_outside,
    keys_written_since,
)
from tests.plugin import Plugin, R, Result

G = "nvidia-3090"

NAMES: dict[str, str] = {
    "dotdot": "..",
    "dot": ".",
    "dotdot-x": "../x",
    "dotdot-etc": "../../../../etc/passwd",
    "slash": "a/b",
    "only-slash": "/",
    "leading-slash": "/n1",
    "trailing-slash": "n1/",
    "events-key": "n1/events/000000000002",
    "pct-2f": "%2F",
    "pct-dotdot": "%2e%2e%2f",
    "backslash": "..\\x",
    "nul": "n1\x00",
    "only-nul": "\x00",
    "newline": "n1\nn2",
    "carriage-return": "n1\r",
    "tab": "n\t1",
    "escape": "\x1b[2J",
    "del": "\x7f",
    "c1-next-line": "n\x85",
    "line-separator": "n\u2028",
    "rtl-override": "\u202en1",
    "zero-width-space": "n\u200b1",
    "bom": "\ufeffn1",
    "lone-surrogate": "n\udcff",
    "division-slash": "a\u2215b",
    "fraction-slash": "a\u2044b",
    "fullwidth-solidus": "a\uff0fb",
    "big-solidus": "a\u29f8b",
    "box-diagonal": "a\u2571b",
    "combining-solidus": "a\u0338b",
    "fullwidth-dotdot": "\uff0e\uff0e\uff0fx",
    "two-dot-leader": "\u2025",
    "emoji": "\U0001f3ae",
    "option-like": "--all",
    "glob": "*",
    "max-length": "x" * 253,
    "too-long": "x" * 254,
    "very-long": "x" * 100_000,
    "unicode-max-length": "\u00e9" * 253,
}

WRITES: list[tuple[str, dict[str, Any]]] = [
    ("add-node", {"resource": R({G: 4})}),
    ("set-node-resource-capacity", {"resource": R({G: 2}), "delta": True, "incr": True}),
    ("set-node-resource-usage", {"workloads_resource": [R({G: 1})], "delta": True, "incr": True}),
    ("fix-node-resource", {"workloads_resource": [R({G: 2})]}),
    ("set-node-resource-info", {"capacity": R({G: 8}), "usage": R({G: 3})}),
]
"""In order: the node is created by the first, changed by each of the others."""

READS: list[tuple[str, Any]] = [
    ("get-node-resource-info", lambda name: {"nodename": name}),
    ("get-nodes-resource-info", lambda name: {"nodenames": [name]}),
    ("calculate-deploy", lambda name: {"nodename": name, "deploy_count": 1}),
    ("calculate-realloc", lambda name: {"nodename": name}),
    ("get-nodes-deploy-capacity", lambda name: {"nodenames": [name]}),
    ("get-most-idle-node", lambda name: {"nodenames": [name]}),
    ("get-metrics", lambda name: {"podname": "p", "nodename": name}),
    ("get-metrics", lambda name: {"nodes": [{"podname": "p", "nodename": name}]}),
]


def keyspace(etcd: Etcd) -> dict[bytes, int]:
    """Every key in etcd, under every prefix, with its ``mod_revision``."""
    reply = _range(etcd, ALL_KEYS, ALL_KEYS, keys_only=True)
    return {kv.key: kv.mod_revision for kv in reply.kvs}


def files_under(folder: Path) -> set[Path]:
    return {path for path in folder.rglob("*")}


class Installation:
    def __init__(self, endpoints: list[str], workdir: Path) -> None:
        self.plugin = Plugin(endpoints, workdir)
        self.etcd = Etcd(endpoints, self.plugin.prefix)
        self.root = self.etcd.root.encode()
        self.events_root = self.etcd.events_root.encode()
        self.exports = workdir / "exports"
        self.exports.mkdir()

    def call(self, args: list[str], stdin: bytes = b"") -> Result:
        return in_process(self.plugin.config, args, stdin)

    def lay_decoys(self) -> dict[str, bytes]:
        """Keys a name escaping ``<prefix>/resource/gpu/`` would reach first."""
        prefix = self.plugin.prefix
        decoys = {
            f"{prefix}/resource/gpu": b"decoy",
            f"{prefix}/resource/gpu-other/n1": b"decoy",
            f"{prefix}/resource/n1": b"decoy",
            f"{prefix}/n1": b"decoy",
            f"{prefix}x/resource/gpu/n1": b"decoy",
            f"/eru{prefix}/resource/gpu/n1": b"decoy",
        }
        self.etcd.put_many(decoys)
        return decoys


@pytest.fixture
def installation(etcd_endpoints: list[str], tmp_path: Path) -> Iterator[Installation]:
    made = Installation(etcd_endpoints, tmp_path)
    try:
        yield made
    finally:
        made.etcd.close()


def owned_by(installation: Installation, name: str, key: bytes) -> bool:
    """Whether ``key`` is one of ``name``'s: its head or one of its events."""
    name_key = name.encode("utf-8", "surrogatepass")
    head, stream = installation.root + name_key, installation.events_root + name_key + b"/"
    return key == head or key.startswith(stream)


def run_write(installation: Installation, name: str, verb: str, request: dict[str, Any]) -> Result:
    """One write; a refusal wrote nothing, a success wrote only the node's own keys."""
    etcd = installation.etcd
    revision = etcd.revision()
    outside = keys_outside(etcd, installation.root, installation.events_root)
    body = json.dumps({"nodename": name, **request}).encode()
    outcome = installation.call([verb], body)
    if outcome.status != 0:
        assert_clean_failure(verb, outcome)
        assert etcd.revision() == revision, f"{verb} refused {name[:40]!r} but wrote"
        return outcome
    assert outcome.stderr == ""
    written = keys_written_since(etcd, revision)
    assert written, f"{verb} succeeded but wrote nothing"
    for key in written:
        assert owned_by(installation, name, key), (verb, key[:200])
    assert keys_outside(etcd, installation.root, installation.events_root) == outside
    return outcome


@pytest.mark.parametrize("name", list(NAMES.values()), ids=list(NAMES))
def test_node_names_stay_inside_the_prefix(installation: Installation, name: str) -> None:
    etcd = installation.etcd
    decoys = installation.lay_decoys()
    before = keyspace(etcd)
    files = files_under(installation.plugin.workdir)

    outcomes = {verb: run_write(installation, name, verb, request) for verb, request in WRITES}
    accepted = {verb for verb, outcome in outcomes.items() if outcome.status == 0}
    # The name is one rule for every verb: all take it or none does.
    assert accepted in (set(), set(outcomes)), {v: o.stderr for v, o in outcomes.items()}
    if "/" in name:
        assert not accepted, "a name with '/' is refused (it would break the key layout)"
    if accepted:
        state = json.loads(
            installation.call(
                ["get-node-resource-info"], json.dumps({"nodename": name}).encode()
            ).stdout
        )
        assert state is not None and state["capacity"] == R({G: 8})

    for verb, request_of in READS:
        revision = etcd.revision()
        outcome = installation.call([verb], json.dumps(request_of(name)).encode())
        if outcome.status != 0:
            assert_clean_failure(verb, outcome)
        assert etcd.revision() == revision, f"{verb} wrote"

    audit(installation, name, accepted=bool(accepted))
    run_write(installation, name, "remove-node", {})

    after = keyspace(etcd)
    changed = {key for key in before.keys() | after.keys() if before.get(key) != after.get(key)}
    for key in changed:
        assert key.startswith((installation.root, installation.events_root)), key[:200]
        assert owned_by(installation, name, key), key[:200]
    for decoy, value in decoys.items():
        assert etcd.client.get(decoy)[0] == value
    if not accepted:
        assert not changed
    for key in after:  # under the plugin's root: this node's keys only (its stream stays)
        mine = key.startswith((installation.root, installation.events_root))
        assert not mine or owned_by(installation, name, key)
    created = files_under(installation.plugin.workdir) - files
    exports = installation.exports
    assert all(path.parent == exports for path in created), created
    assert all(not path.name.startswith(".") for path in created), created


def audit(installation: Installation, name: str, *, accepted: bool) -> None:
    """The auditor commands on the name: clean refusals, or answers about that node only."""
    etcd = installation.etcd
    exports = str(installation.exports)
    commands = [
        ["history", "--json", "--", name],
        ["show", "--json", "--", name],
        ["verify", "--", name],
        ["export", "--", name],
        ["compact", "--keep", "0", "--min-age", "0", "--export-dir", exports, "--", name],
        ["verify", "--", name],
        ["history", "--json", "--", name],
    ]
    for args in commands:
        revision = etcd.revision()
        exported = set(installation.exports.iterdir())
        outcome = installation.call(args)
        if not accepted:
            assert_clean_failure(args[0], outcome)
            assert etcd.revision() == revision, f"{args[0]} refused the name but wrote"
            assert set(installation.exports.iterdir()) == exported
            continue
        assert outcome.status == 0, f"{args[0]}: exit {outcome.status}: {outcome.stderr[:500]}"
        assert outcome.stderr == ""
        if args[0] == "compact":
            written = keys_written_since(etcd, revision)
            assert written and all(owned_by(installation, name, key) for key in written)
            new = set(installation.exports.iterdir()) - exported
            assert len(new) == 1, new
            (export,) = new
            assert export.parent == installation.exports and export.is_file()
            lines = export.read_bytes().splitlines()
            assert len(lines) == len(WRITES)  # each write's event, now behind a checkpoint
        else:
            assert etcd.revision() == revision, f"{args[0]} wrote"
        if args[0] == "show":
            shown = json.loads(outcome.stdout)
            assert shown["capacity"] == R({G: 8}) and shown["usage"] == R({G: 3})
        if args[0] == "history":
            events = json.loads(outcome.stdout)
            assert events and all(isinstance(e["seq"], int) for e in events)


def test_auto_compaction_never_fails_a_write_that_landed(
    etcd_endpoints: list[str], tmp_path: Path
) -> None:
    """With ``streams.max_events`` set, an append past the bound compacts the stream after the
    write. Compaction is best effort: whatever becomes of it (here the export file's name, made
    from a valid 253-character node name, is too long for the file system), the write has landed
    and the verb must report success; a verb that exits non-zero must have written nothing
    (core would otherwise roll back or repeat a deploy that was in fact recorded)."""
    installation = Installation(etcd_endpoints, tmp_path)
    try:
        config = {
            "etcd": {"machines": etcd_endpoints, "prefix": installation.plugin.prefix},
            "streams": {"max_events": 2, "export_dir": str(installation.exports), "min_age": 0},
        }
        installation.plugin.config.write_text(json.dumps(config))
        name = "x" * 253
        run_write(installation, name, "add-node", {"resource": R({G: 8})})
        deploy = {"nodename": name, "workloads_resource": [R({G: 1})], "delta": True, "incr": True}

        def last_seq() -> int:
            return int(installation.etcd.event_docs(name)[-1]["seq"])

        for _ in range(3):
            before = last_seq()
            outcome = installation.call(["set-node-resource-usage"], json.dumps(deploy).encode())
            landed = last_seq() - before  # compaction may shorten the stream, never its end
            if outcome.status == 0:
                assert landed == 1
                continue
            assert landed == 0, (
                f"exit {outcome.status}, yet the write landed ({landed} event): "
                f"{outcome.stderr[:80]!r}...{outcome.stderr[-100:]!r}"
            )
            assert_clean_failure("set-node-resource-usage", outcome)
        # The long name was cut to fit a file name, and compaction bounded the stream.
        assert len(installation.etcd.events(name)) <= 3
        assert [p.name for p in installation.exports.iterdir()], "nothing was exported"
    finally:
        installation.etcd.close()


def test_whole_keyspace_helpers_see_every_prefix(installation: Installation) -> None:
    """The keyspace snapshot reaches keys outside any plugin prefix (guards the guard)."""
    decoys = installation.lay_decoys()
    seen = keyspace(installation.etcd)
    assert {key.encode() for key in decoys} <= seen.keys()
    roots = installation.root, installation.events_root
    outside = keys_outside(installation.etcd, *roots)
    installation.etcd.put_many({"/elsewhere-" + installation.plugin.prefix.strip("/"): b"x"})
    assert keys_outside(installation.etcd, *roots) == outside + 1
