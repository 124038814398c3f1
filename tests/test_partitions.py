"""Partitions, with etcd in containers (``tests.containers``; run with
``RESOURCE_GPU_ETCD=docker``, as ``.ci/run`` does): the member the plugin talks to cut off from
its peers while writers run, then healed; a whole cluster lost, then started again from its
data.

The calls are ``tests.test_faults``' fingerprinted calls, audited the same way: every success
has exactly one event, no failed call left one, usage is the fold of the calls, and no call is
applied twice (``test_the_audit_counts_a_change_made_twice`` proves that count can fail).

Reads never answer from a partitioned member's stale data because they are linearizable:
every range the plugin sends leaves ``serializable`` unset, so the member must confirm with a
quorum that it is current before it answers, and a member cut off from its peers cannot. The
test checks that the cut-off member really refuses a linearizable read, and really holds stale
data (a serializable read of it answers, behind the majority), before it trusts the result.
"""

from __future__ import annotations

import base64
import json
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.containers import ContainerCluster
from tests.plugin import Plugin
from tests.test_faults import (
    NODE,
    Call,
    Load,
    assert_ledger_sound,
    failures_not_clean,
    make_calls,
    seed_node,
    wait_for,
)

TIMEOUT = 4.0
"""The plugin's ``etcd.timeout`` here: each call must end within it (plus a process's start)."""
SLACK = 5.0
"""What a call may take beyond ``etcd.timeout``: starting Python, reading the config."""


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[ContainerCluster]:
    started = ContainerCluster(3, tmp_path / "cluster").start()
    yield started
    started.stop()


def rpc(url: str, path: str, body: dict[str, Any], timeout: float = 2.0) -> dict[str, Any] | None:
    """An etcd JSON-gateway call; None when the member does not answer in time."""
    request = urllib.request.Request(f"{url}{path}", data=json.dumps(body).encode(), method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:
            answer: dict[str, Any] = json.loads(reply.read())
            return answer
    except OSError:
        return None


def read_head(url: str, prefix: str, *, serializable: bool) -> dict[str, Any] | None:
    """The node's head read on one member: linearizable, or (``serializable``) from whatever
    that member holds."""
    key = base64.b64encode(f"{prefix}/resource/gpu/{NODE}".encode()).decode()
    return rpc(url, "/v3/kv/range", {"key": key, "serializable": serializable})


def leader(cluster: ContainerCluster) -> int:
    """The index of the member every other member follows."""

    def found() -> int | None:
        for index, url in enumerate(cluster.endpoints):
            status = rpc(url, "/v3/maintenance/status", {}, timeout=1)
            if status and status["header"]["member_id"] == status.get("leader"):
                return index
        return None

    wait_for(lambda: found() is not None, "leader")
    index = found()
    assert index is not None
    return index


def directory(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def ended_in_time(calls: list[Call]) -> list[str]:
    """Calls that took longer than ``etcd.timeout`` allows: a hang, not a clean failure."""
    return [str(c) for c in calls if c.done and c.ended - c.started > TIMEOUT + SLACK]


def test_the_leader_cut_off_from_its_peers_answers_nothing_and_writes_fail_over(
    cluster: ContainerCluster, tmp_path: Path
) -> None:
    """The leader, first in etcd.machines (every call tries it first), is cut off from its
    peers while two writers run: calls fail over to the majority or fail in one line within
    etcd.timeout; nothing is applied twice or lost; a read through the cut-off member alone
    fails rather than answer from its stale copy. Then it is healed and catches up."""
    cut = leader(cluster)
    urls = cluster.endpoints
    ordered = [urls[cut], *(u for i, u in enumerate(urls) if i != cut)]
    plugin = Plugin(ordered, directory(tmp_path, "plugin"), timeout=TIMEOUT)
    alone = Plugin([urls[cut]], directory(tmp_path, "alone"), timeout=TIMEOUT)
    alone.prefix = plugin.prefix
    alone.write_config()
    calls = make_calls(120, seed=70)
    seed = seed_node(plugin, calls)
    partitions = 0
    with Load(plugin, calls, workers=2) as load:
        wait_for(lambda: sum(c.ok for c in load.ran()) >= 3, "successes before the cut")
        cluster.cut(cut)
        partitions += 1
        cut_at = time.monotonic()
        wait_for(lambda: len([c for c in load.finished(since=cut_at) if c.ok]) >= 5,
                 "successes through the majority during the cut")  # fmt: skip
        # Before trusting anything: the cut-off member really refuses a linearizable read,
        # and really holds stale data a serializable read would have served.
        assert read_head(urls[cut], plugin.prefix, serializable=False) is None
        current = read_head(ordered[1], plugin.prefix, serializable=False)
        stale = read_head(urls[cut], plugin.prefix, serializable=True)
        assert current is not None and stale is not None
        assert stale["kvs"][0]["mod_revision"] != current["kvs"][0]["mod_revision"], (
            "the cut-off member is not behind: the test proves nothing about stale reads"
        )
        refused = alone.run("get-node-resource-info", {"nodename": NODE}, timeout=TIMEOUT + 30)
        assert refused.status == 1 and refused.stdout == "", refused
        assert "etcd" in refused.stderr and len(refused.stderr.splitlines()) == 1, refused
        cluster.heal(cut)
        healed = time.monotonic()
        wait_for(lambda: read_head(urls[cut], plugin.prefix, serializable=False) is not None,
                 "the healed member answering linearizable reads")  # fmt: skip
        wait_for(lambda: len(load.finished(since=healed)) >= 5, "calls after the heal")

    ran = load.ran()
    during = [c for c in ran if cut_at <= c.started and c.ended <= healed]
    assert failures_not_clean(ran, mention="etcd") == [], "failures that are not one line"
    assert ended_in_time(ran) == [], "calls that outlasted etcd.timeout"
    assert any(c.ok for c in during), "no call failed over to the majority"
    found = assert_ledger_sound(plugin, calls, seed, context=f"{partitions} partition(s): ")
    answer = alone.ok("get-node-resource-info", {"nodename": NODE})  # healed: current again
    assert answer == plugin.ok("get-node-resource-info", {"nodename": NODE})
    print(f"{partitions} partition(s), {len(during)} calls during the cut; {found}")


def test_a_cluster_lost_whole_and_started_again_from_its_data_loses_nothing(
    cluster: ContainerCluster, tmp_path: Path
) -> None:
    """Every member's container removed while writers run: calls fail in one line within
    etcd.timeout, none applied; started again on their data (new containers, new addresses),
    every write that succeeded before is there, and calls succeed again."""
    plugin = Plugin(cluster.endpoints, directory(tmp_path, "plugin"), timeout=TIMEOUT)
    calls = make_calls(150, seed=80)
    seed = seed_node(plugin, calls)
    losses = 0
    with Load(plugin, calls, workers=2) as load:
        wait_for(lambda: sum(c.ok for c in load.ran()) >= 5, "successes before the loss")
        cluster.lose()
        losses += 1
        lost_at = time.monotonic()
        wait_for(lambda: len([c for c in load.finished(since=lost_at) if not c.ok]) >= 3,
                 "calls failing while the cluster is gone")  # fmt: skip
        cluster.restart()
        plugin.endpoints = cluster.endpoints
        plugin.write_config()
        back = time.monotonic()
        wait_for(lambda: len([c for c in load.finished(since=back) if c.ok]) >= 5,
                 "successes after the restart")  # fmt: skip

    ran = load.ran()
    assert failures_not_clean(ran, mention="etcd") == [], "failures that are not one line"
    assert ended_in_time(ran) == [], "calls that outlasted etcd.timeout"
    found = assert_ledger_sound(plugin, calls, seed, context=f"{losses} loss(es): ")
    print(f"{losses} loss(es); {found}")
