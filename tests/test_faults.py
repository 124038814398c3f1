"""Faults: lost answers, dead and hanging etcd, a killed cluster member, a restarted server.

Each test starts the etcd processes it breaks; nothing here touches the shared server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.etcd_server import Cluster, free_port
from tests.faults import AnswerDroppingProxy, SilentListener
from tests.plugin import Plugin, R, Result, counts

ONE = {"nvidia-3090": 1}


def take(plugin: Plugin, node: str, cards: dict[str, int] = ONE) -> Result:
    request = {"nodename": node, "workloads_resource": [R(cards)], "delta": True, "incr": True}
    return plugin.run("set-node-resource-usage", request)


def assert_one_event_per_call(plugin: Plugin, node: str, calls: int) -> None:
    events = plugin.history(node)
    assert [e["seq"] for e in events] == list(range(1, calls + 1))
    assert len({e["op"] for e in events}) == calls, "an operation was applied twice"


@pytest.fixture
def own_etcd() -> Iterator[Cluster]:
    cluster = Cluster(1).start()
    yield cluster
    cluster.stop()


@pytest.fixture
def proxied(
    etcd_endpoints: list[str], tmp_path: Path
) -> Iterator[tuple[Plugin, AnswerDroppingProxy]]:
    """A plugin that reaches etcd through the answer-dropping proxy, with node n1 added."""
    proxy = AnswerDroppingProxy(etcd_endpoints[0])
    plugin = Plugin([proxy.url], tmp_path)
    plugin.add("n1", {"nvidia-3090": 8})
    yield plugin, proxy
    proxy.close()


def test_a_write_whose_answer_is_lost_is_applied_exactly_once(
    proxied: tuple[Plugin, AnswerDroppingProxy],
) -> None:
    plugin, proxy = proxied
    for _ in range(5):
        proxy.arm()
        result = take(plugin, "n1")
        assert result.status == 0, result.stderr
        assert result.stderr == ""
    assert proxy.faults_injected == 5
    assert counts(plugin.info("n1")["usage"]) == {"nvidia-3090": 5}
    assert_one_event_per_call(plugin, "n1", 1 + 5)


def test_the_answer_of_a_retried_write_reports_what_it_did(
    proxied: tuple[Plugin, AnswerDroppingProxy],
) -> None:
    plugin, proxy = proxied
    proxy.arm()
    answer = plugin.ok(
        "set-node-resource-usage",
        {"nodename": "n1", "resource_request": R({"nvidia-3090": 3}), "delta": True, "incr": True},
    )
    assert proxy.faults_injected == 1
    assert counts(answer["before"]) == {}
    assert counts(answer["after"]) == {"nvidia-3090": 3}


@pytest.mark.parametrize("kind", ["refused", "silent"])
def test_an_unreachable_etcd_gives_one_clear_line(tmp_path: Path, kind: str) -> None:
    silent = SilentListener() if kind == "silent" else None
    url = silent.url if silent else f"http://127.0.0.1:{free_port()}"
    try:
        plugin = Plugin([url], tmp_path, timeout=2)
        for verb, request in [
            ("get-node-resource-info", {"nodename": "n1"}),
            ("add-node", {"nodename": "n1", "resource": R(ONE)}),
        ]:
            line = plugin.fails(verb, request)  # the subprocess is bounded: a hang fails
            assert "node n1" in line
            assert "etcd" in line
    finally:
        if silent:
            silent.close()


def test_calls_fail_clearly_while_etcd_is_down_and_nothing_is_lost_after_restart(
    own_etcd: Cluster, tmp_path: Path
) -> None:
    plugin = Plugin(own_etcd.endpoints, tmp_path, timeout=2)
    plugin.add("n1", {"nvidia-3090": 8})
    assert take(plugin, "n1").status == 0

    member = own_etcd.members[0]
    member.kill()
    line = plugin.fails(
        "set-node-resource-usage",
        {"nodename": "n1", "workloads_resource": [R(ONE)], "delta": True, "incr": True},
    )
    assert "etcd" in line

    member.start()
    member.wait_healthy()
    assert take(plugin, "n1").status == 0
    assert counts(plugin.info("n1")["usage"]) == {"nvidia-3090": 2}
    assert_one_event_per_call(plugin, "n1", 3)


def test_calls_fail_over_to_the_other_members_when_one_dies(tmp_path: Path) -> None:
    cluster = Cluster(3).start()
    try:
        plugin = Plugin(cluster.endpoints, tmp_path, timeout=4)
        plugin.add("n1", {"nvidia-3090": 64})
        for _ in range(3):
            assert take(plugin, "n1").status == 0

        cluster.members[0].kill()  # the member every call tries first
        succeeded = sum(take(plugin, "n1").status == 0 for _ in range(10))
        # Calls during the election may fail (cleanly); afterwards every call must succeed.
        for _ in range(5):
            assert take(plugin, "n1").status == 0
        usage = counts(plugin.info("n1")["usage"])
        assert usage == {"nvidia-3090": 3 + succeeded + 5}
        assert_one_event_per_call(plugin, "n1", 1 + 3 + succeeded + 5)
    finally:
        cluster.stop()
