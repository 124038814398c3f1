"""A node added with no disks before 0.9 held ``"disks":null`` in its usage, where its stream
now folds to ``[]`` (upstream's shape): the same list to every reader, so neither the head
check nor an export's check against its checkpoint takes it for a difference. Pure."""

from __future__ import annotations

from datetime import datetime, timezone

from msgspec.structs import replace

from resource_extend.ledger.model import audit
from resource_extend.ledger.model.events import encode
from resource_extend.projections.changes import NodeAdded
from resource_extend.projections.storage.events import Event
from resource_extend.projections.storage.node import STORAGE
from resource_extend.projections.storage.state import NodeState
from resource_extend.projections.storage.wire.resources import NodeResource

T0 = datetime(2026, 12, 1, tzinfo=timezone.utc)
CAPACITY = NodeResource(volumes={"/data0": 100}, storage=100)
ADDED = Event(seq=1, at=T0, verb="add-node", op="op1", change=NodeAdded(capacity=CAPACITY))
OLDER = NodeState(capacity=CAPACITY, usage=NodeResource(volumes={"/data0": 0}, disks=None))
"""The state 0.8 folded ``ADDED`` to, and wrote."""


def test_the_fold_is_upstreams_shape() -> None:
    folded = STORAGE.apply(None, ADDED.change)
    assert folded is not None and folded.usage.disks == []


def test_an_older_head_is_no_different_from_its_stream() -> None:
    folded = STORAGE.apply(None, ADDED.change)
    assert folded is not None
    assert STORAGE.differences(OLDER, folded) == []
    more = replace(OLDER, usage=replace(OLDER.usage, storage=1))
    assert STORAGE.differences(more, folded) != []  # a real difference still shows


def test_an_older_checkpoint_still_vouches_for_its_export() -> None:
    name = "n.000000000001-000000000001.opcheckpoint.jsonl"
    made = audit.checkpoint_for(STORAGE, [ADDED], f"host-1:/exports/{name}")
    older = replace(made, state=OLDER)
    checkpoint = Event(seq=1, at=T0, verb="compact", op="opcheckpoint0123", change=older)
    checked = audit.check_export(STORAGE, checkpoint, name, [encode(ADDED)])
    assert checked.problems == []
    wrong = replace(older, state=replace(OLDER, capacity=replace(CAPACITY, storage=99)))
    checkpoint = replace(checkpoint, change=wrong)
    (problem,) = audit.check_export(STORAGE, checkpoint, name, [encode(ADDED)]).problems
    assert "the checkpoint says" in problem
