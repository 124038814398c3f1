"""A node's record put by hand, with no event, between a write's read and its commit: an
operator's ``etcdctl put``, or the upstream plugin writing the node it still serves. The write
must see it by the compare on the head's revision alone (the next event key is still free, and
the event before it still there), decide again on the edited record, and keep the edit beneath
its delta. Against real etcd, over the transport the suite runs (``tests/unit`` has the same
with the scripted transport)."""

from __future__ import annotations

import pytest

from resource_extend.ledger.host.config import EtcdConfig
from resource_extend.ledger.model.events import Change
from resource_extend.ledger.store import Store
from resource_extend.projections.gpu.events import UsageChanged
from resource_extend.projections.gpu.node import GPU, NodeState
from tests.etcdkv import Etcd
from tests.plugin import TRANSPORT, Plugin, counts

pytestmark = pytest.mark.grpc

CARD = "nvidia-3090"


def test_a_head_edited_with_no_event_before_the_commit_is_decided_on_again(
    plugin: Plugin, etcd: Etcd
) -> None:
    plugin.add("n1", {CARD: 8})
    edits: list[bytes] = []

    def by_hand(node: str, end: int, op: str) -> None:
        """Just before the write is sent: the head put by hand, usage 5, no event."""
        if edits:
            return
        head = etcd.head(node)
        assert head is not None
        empty = b'"usage":{"prod_count_map":{}}'
        assert empty in head.value, head.value
        edits.append(
            head.value.replace(empty, b'"usage":{"prod_count_map":{"%s":5}}' % CARD.encode())
        )
        etcd.put_many({etcd.head_key(node): edits[0]})

    seen: list[NodeState | None] = []

    def take_two(state: NodeState | None) -> Change:
        seen.append(state)
        return UsageChanged(delta={CARD: 2})

    settings = EtcdConfig(machines=plugin.endpoints, prefix=plugin.prefix, transport=TRANSPORT)
    store = Store(settings, GPU, write_hook=by_hand)
    try:
        appended = store.appender.append("n1", "set-node-resource-usage", take_two)
    finally:
        store.etcd.close()

    assert edits, "the head was never edited"
    assert [dict(state.usage) for state in seen if state is not None] == [{}, {CARD: 5}]
    assert appended.before is not None and dict(appended.before.usage) == {CARD: 5}
    assert counts(plugin.info("n1")["usage"]) == {CARD: 7}
    assert [event["seq"] for event in etcd.event_docs("n1")] == [1, 2]
