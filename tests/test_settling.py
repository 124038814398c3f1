"""A write whose answer is lost is settled by its operation id whenever etcd is reachable,
whatever compaction did meanwhile.

The proxy forwards a write, lets etcd apply it, and drops the answer; at that moment a
``resource-gpu compact`` runs straight against etcd (not through the proxy). Compaction never
removes an event younger than ``streams.min_age`` (default 300 s), so the writer's retry still
finds its own event, and reports it as the success it was, with the right before and after.
Compaction that is told to ignore the age (``--min-age 0``) may take the event away: the
writer must then say the outcome is unknown, never that it failed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.audit.helpers import G, added, event, export_chain, head, plant, prod, used
from tests.etcd_server import Cluster
from tests.etcdkv import Etcd
from tests.faults import AnswerDroppingProxy
from tests.plugin import Plugin, Result

pytestmark = [pytest.mark.grpc, pytest.mark.resident]

NODE = "n1"
PLANTED = [event(1, added({G: 8}))] + [event(s, used({G: 1})) for s in (2, 3, 4, 5)]
"""Five events written a month ago (old enough for any min_age)."""
DEPLOY = {
    "nodename": NODE,
    "workloads_resource": [{"prod_count_map": {G: 1}}],
    "delta": True,
    "incr": True,
}
UNKNOWN = re.compile(r"write ([0-9a-f]+) was sent but its answer was lost")


class Setup:
    """The writer talks to etcd through the proxy first (its answer lost, with the connection
    cut once the compaction ran, it fails over to etcd itself); the compactor talks to etcd."""

    def __init__(self, endpoints: list[str], tmp_path: Path) -> None:
        self.proxy = AnswerDroppingProxy(endpoints[0])
        (tmp_path / "writer").mkdir()
        (tmp_path / "compactor").mkdir()
        self.exports = tmp_path / "exports"
        self.exports.mkdir()
        self.writer = Plugin([self.proxy.url, *endpoints], tmp_path / "writer", timeout=8)
        self.compactor = Plugin(endpoints, tmp_path / "compactor")
        self.compactor.prefix = self.writer.prefix
        self.compactor.write_config()
        self.etcd = Etcd(endpoints, self.writer.prefix)
        self.compaction: Result | None = None

    def compact_when_answered(self, *options: str) -> None:
        """At the next write's answer (dropped): ``compact NODE --keep 0`` against etcd."""

        def compact() -> None:
            argv = [NODE, "--keep", "0", "--export-dir", str(self.exports), *options]
            self.compaction = self.compactor.run("compact", None, *argv)

        # Cut once the compaction is done: the writer settles after it, however long it took
        # on a busy machine (with the answer only swallowed, a writer whose time ran out first
        # found its event still there).
        self.proxy.crash_on_next_write(compact, at_answer=True, then_cut=True)

    def close(self) -> None:
        self.proxy.close()
        self.etcd.close()


@pytest.fixture
def setup(etcd_endpoints: list[str], tmp_path: Path) -> Iterator[Setup]:
    made = Setup(etcd_endpoints, tmp_path)
    plant(made.etcd, NODE, PLANTED, head({G: 8}, {G: 4}, 5))
    try:
        yield made
    finally:
        made.close()


def test_a_lost_answer_is_settled_by_op_id_though_a_compaction_ran_meanwhile(
    setup: Setup,
) -> None:
    setup.compact_when_answered()  # streams.min_age: its default, 300 s
    result = setup.writer.run("set-node-resource-usage", DEPLOY)
    assert setup.proxy.crashed.is_set(), "the write's answer was not dropped"
    compaction = setup.compaction
    assert compaction is not None and compaction.status == 0, compaction

    assert result.status == 0, f"the write landed, yet: {result.stderr}"
    answer = json.loads(result.stdout)
    assert (prod(answer["before"]), prod(answer["after"])) == ({G: 4}, {G: 5})
    # The compaction took the old events and stopped at the young one.
    assert "events 1..5 were compacted" in compaction.stdout, compaction.stdout
    events = setup.etcd.event_docs(NODE)
    assert [(e["seq"], e["change"]["kind"]) for e in events] == [
        (5, "checkpoint"),
        (6, "usage_changed"),
    ]
    assert [e["seq"] for e in export_chain(setup.etcd, NODE).events] == [1, 2, 3, 4, 5, 6]
    verified = setup.compactor.run("verify", None, NODE)
    assert verified.status == 0, verified.stdout + verified.stderr


def test_a_write_compacted_away_before_it_was_settled_is_an_unknown_outcome(
    setup: Setup,
) -> None:
    """``--min-age 0`` removes the event before the writer can look for it: the writer cannot
    know, and says so (naming its op, and why), rather than report a failure."""
    setup.compact_when_answered("--min-age", "0")
    result = setup.writer.run("set-node-resource-usage", DEPLOY)
    compaction = setup.compaction
    assert compaction is not None and compaction.status == 0, compaction
    assert "events 1..6 were compacted" in compaction.stdout, compaction.stdout

    assert result.status == 1 and result.stdout == "", result
    (line,) = result.stderr.splitlines()
    found = UNKNOWN.search(line)
    assert found is not None, line
    assert "compacted" in line and "may have landed" in line, line
    chain = export_chain(setup.etcd, NODE)
    assert [e["op"] for e in chain.events if e["seq"] == 6] == [found.group(1)], "it landed"


# -- a compaction's own lost answer ---------------------------------------------------------------


def compact_through(plugin: Plugin, exports: Path) -> Result:
    return plugin.run("compact", None, NODE, "--keep", "2", "--export-dir", str(exports))


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_a_compaction_whose_answer_is_lost_settles_by_its_checkpoint(
    etcd_endpoints: list[str], tmp_path: Path
) -> None:
    """etcd applied the compaction and its answer was lost: the compaction reads the cut back,
    finds its own checkpoint there, and publishes its export."""
    proxy = AnswerDroppingProxy(etcd_endpoints[0])
    etcd: Etcd | None = None
    try:
        plugin = Plugin([proxy.url], tmp_path)
        etcd = Etcd(etcd_endpoints, plugin.prefix)
        plant(etcd, NODE, PLANTED, head({G: 8}, {G: 4}, 5))
        proxy.arm()
        result = compact_through(plugin, tmp_path)
        assert proxy.faults_injected == 1
        assert result.status == 0, result.stderr
        assert "events 1..3 were compacted" in result.stdout, result.stdout
        (export,) = (p for p in tmp_path.iterdir() if p.name.startswith(f"{NODE}."))
        assert export.name.endswith(".jsonl")
        assert export_chain(etcd, NODE).files == [export]
        verified = plugin.run("verify", None, NODE)
        assert verified.status == 0, verified.stdout + verified.stderr
    finally:
        proxy.close()
        if etcd is not None:
            etcd.close()


def test_a_compaction_cut_off_from_etcd_after_its_commit_is_finished_by_verify_repair(
    tmp_path: Path,
) -> None:
    """etcd dies as it answers the compaction: the compaction cannot know, says so, and leaves
    its export unpublished (``.partial``). Once etcd is back, the checkpoint names that
    export: verify reports it, and ``verify --repair`` publishes it. (Three members: a single
    one may lose the write it answered as it dies; see :class:`Cluster`.)"""
    cluster = Cluster(3).start()
    member = cluster.members[0]
    proxy = AnswerDroppingProxy(member.client_url)
    etcd: Etcd | None = None
    exports = tmp_path / "exports"
    exports.mkdir()
    try:
        plugin = Plugin([proxy.url], tmp_path, timeout=2)
        etcd = Etcd([member.client_url], plugin.prefix)
        plant(etcd, NODE, PLANTED, head({G: 8}, {G: 4}, 5))
        etcd.close()
        etcd = None
        proxy.crash_on_next_write(cluster.kill, at_answer=True)
        result = compact_through(plugin, exports)
        assert proxy.crashed.is_set()
        assert result.status == 1, result
        (line,) = result.stderr.splitlines()
        (partial,) = files(exports)
        assert partial.endswith(".jsonl.partial"), partial
        assert "was sent but its answer was lost" in line and partial in line, line
        assert "verify" in line and "--repair" in line, line

        cluster.start()
        plugin.endpoints = [member.client_url]
        plugin.write_config()
        etcd = Etcd([member.client_url], plugin.prefix)
        found = plugin.run("verify", None, NODE)
        assert found.status == 1 and "left unpublished" in found.stdout, found
        repaired = plugin.run("verify", None, NODE, "--repair")
        assert repaired.status == 0 and "-> published" in repaired.stdout, repaired
        assert files(exports) == [partial.removesuffix(".partial")]
        assert [e["seq"] for e in export_chain(etcd, NODE).events] == [1, 2, 3, 4, 5]
    finally:
        proxy.close()
        if etcd is not None:
            etcd.close()
        cluster.stop()
