"""What a write records of the races it lost, against real etcd: an event that landed after
lost compare-and-swaps says how many (``Event.retries``), and a write that gave up is counted
by verb (``ledger.store.tallies``), where ``Store.write_failures`` (the exporter) reads it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.model.errors import Contention
from resource_extend.ledger.model.events import Change
from resource_extend.ledger.store import Store
from resource_extend.projections.gpu.events import NodeAdded, UsageChanged
from resource_extend.projections.gpu.node import GPU, NodeState
from tests.etcdkv import Etcd
from tests.plugin import TRANSPORT, Plugin

pytestmark = [pytest.mark.grpc, pytest.mark.resident]

G = "nvidia-3090"


def store_of(plugin: Plugin, **config: Any) -> Store[NodeState]:
    settings = EtcdConfig(machines=plugin.endpoints, prefix=plugin.prefix, transport=TRANSPORT)
    return Store(msgspec.structs.replace(settings, **config), GPU)


def rival_writes(
    rival: Store[NodeState], times: int
) -> Callable[[NodeState | None], Change | None]:
    """A decision that, its first ``times`` times, lets a rival write to the node first: each
    of those compare-and-swaps is lost."""
    calls = 0

    def decide(state: NodeState | None) -> Change:
        nonlocal calls
        calls += 1
        if calls <= times:
            rival.appender.append(
                "n1", "set-node-resource-usage", lambda _: UsageChanged(delta={G: 0})
            )
        return UsageChanged(delta={G: 1})

    return decide


@pytest.fixture
def stores(plugin: Plugin) -> Any:
    writer, rival = store_of(plugin, max_attempts=4), store_of(plugin)
    rival.appender.append("n1", "add-node", lambda _: NodeAdded(capacity={G: 8}))
    yield writer, rival
    writer.close()
    rival.close()


@pytest.mark.parametrize("lost", [0, 1, 3])
def test_an_event_says_how_many_races_it_lost(
    stores: tuple[Store[NodeState], Store[NodeState]], etcd: Etcd, lost: int
) -> None:
    writer, rival = stores
    appended = writer.appender.append("n1", "calculate-deploy", rival_writes(rival, lost))
    stored = etcd.event_docs("n1")[-1]
    assert stored["seq"] == appended.events[-1].seq == 2 + lost
    assert stored.get("retries", 0) == lost
    assert "retries" not in etcd.event_docs("n1")[0]  # a write that lost nothing: no field
    assert writer.outcomes.write_failures() == {}


def test_a_write_that_gives_up_is_counted_by_verb(
    stores: tuple[Store[NodeState], Store[NodeState]], etcd: Etcd
) -> None:
    writer, rival = stores
    for expected in (1, 2):
        with pytest.raises(Contention, match="4 times"):
            writer.appender.append("n1", "set-node-resource-usage", rival_writes(rival, 4))
        assert writer.outcomes.write_failures() == {"set-node-resource-usage": expected}
    writer.appender.append("n1", "add-node", rival_writes(rival, 1))  # landed: not a failure
    assert writer.outcomes.write_failures() == {"set-node-resource-usage": 2}
    # added, the rival's 4 + 4 + 1 (the writers that gave up wrote nothing), the one landed
    assert [doc["seq"] for doc in etcd.event_docs("n1")] == list(range(1, 12))
    assert [doc.get("retries", 0) for doc in etcd.event_docs("n1")][-1] == 1
