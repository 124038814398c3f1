"""A third kind, defined in ``tests/apples.py`` and nowhere in the product: a node holds
apples. The ledger stores it, races on it, compacts it, shows its history and verifies it with
nothing of its own but what ``projections.node.NodeKind`` asks of a kind (how its values add,
how a state is said, its record's bytes): the ledger is generic over kinds, and the fold is
written once.

Against the in-memory etcd (``tests.unit.memory_etcd``); the product's kinds run the same
paths against real etcd elsewhere."""

from __future__ import annotations

from pathlib import Path

import msgspec
import pytest

from resource_extend.ledger.host.config import Destination, EtcdConfig
from resource_extend.ledger.model import audit, verdicts
from resource_extend.ledger.model.events import Checkpoint
from resource_extend.ledger.model.walk import Walk
from resource_extend.ledger.store import Store
from resource_extend.ledger.upkeep import compaction
from resource_extend.projections.changes import UsageChanged, UsageRebuilt
from tests.apples import APPLES, NODE, Apples, eat, plant
from tests.unit.memory_etcd import MemoryEtcd


def store(etcd: MemoryEtcd) -> Store[Apples]:
    return Store(EtcdConfig(machines=["http://10.0.0.1:2379"], prefix="/toy"), APPLES, etcd)


def judged(etcd: MemoryEtcd) -> verdicts.Verdict[Apples]:
    opened = store(etcd).streams.open_stream(NODE)
    walk: Walk[Apples] = Walk(APPLES)
    for page in opened.pages:
        walk.feed(page.events, page.raw)
    return verdicts.judge(opened.head, walk)


def test_appends_fold_into_the_record_the_kind_writes() -> None:
    etcd = MemoryEtcd()
    store(etcd).appender.append(NODE, "plant", plant(10))
    done = store(etcd).appender.append(NODE, "eat", eat(3))
    assert (done.before, done.after) == (Apples(capacity=10), Apples(capacity=10, usage=3))
    assert store(etcd).records.read(NODE).state == Apples(capacity=10, usage=3)
    raw = etcd.get(store(etcd).keys.head(NODE))
    assert raw is not None
    record = msgspec.json.decode(raw)  # the kind's fields, and the ledger's tip and time
    assert {field: record[field] for field in ("apples", "eaten", "seq")} == {
        "apples": 10,
        "eaten": 3,
        "seq": 2,
    }
    assert set(record) == {"apples", "eaten", "seq", "tip", "at"}


def test_a_lost_race_decides_again_on_the_rival_s_state() -> None:
    etcd = MemoryEtcd()
    store(etcd).appender.append(NODE, "plant", plant(10))
    etcd.before_next_write(lambda: store(etcd).appender.append(NODE, "rival", eat(4)))
    done = store(etcd).appender.append(NODE, "eat", eat(5))
    assert (done.before, done.after) == (Apples(capacity=10, usage=4), Apples(capacity=10, usage=9))
    assert [event.seq for event in store(etcd).streams.events(NODE)] == [1, 2, 3]


def test_history_and_a_past_state_come_from_the_fold() -> None:
    etcd = MemoryEtcd()
    store(etcd).appender.append(NODE, "plant", plant(10))
    for bite in (1, 2, 3):
        store(etcd).appender.append(NODE, "eat", eat(bite))
    events = store(etcd).streams.events(NODE)
    assert [state.usage if state else None for state in audit.states(APPLES, events)] == [
        0,
        1,
        3,
        6,
    ]
    at, then = audit.state_at(APPLES, events, 3)
    assert (at.seq, then) == (3, Apples(capacity=10, usage=3))
    assert then is not None and APPLES.describe(then) == "capacity 10 apples, usage 3 apples"


def test_compaction_keeps_the_state_and_verify_finds_the_head_true(tmp_path: Path) -> None:
    etcd = MemoryEtcd()
    store(etcd).appender.append(NODE, "plant", plant(10))
    for _ in range(4):
        store(etcd).appender.append(NODE, "eat", eat(1))
    done = compaction.compact(store(etcd), NODE, keep=1, to=Destination(str(tmp_path)), min_age=0)
    assert done is not None
    events = store(etcd).streams.events(NODE)
    assert isinstance(events[0].change, Checkpoint) and len(events) == 2
    assert audit.fold(APPLES, events) == Apples(capacity=10, usage=4)
    assert judged(etcd).problems == []


def test_verify_names_a_head_that_drifted_from_its_stream() -> None:
    etcd = MemoryEtcd()
    store(etcd).appender.append(NODE, "plant", plant(10))
    key = store(etcd).keys.head(NODE)
    etcd.put(key, APPLES.write_head(Apples(capacity=10, usage=7), 1))
    assert judged(etcd).problems == ["usage differs: head 7 apples, stream 0 apples"]


def test_a_change_on_no_node_starts_from_the_empty_node() -> None:
    assert APPLES.apply(None, UsageChanged(delta=1)) == Apples(usage=1)


def test_a_fix_on_no_node_breaks_the_stream() -> None:
    with pytest.raises(audit.BrokenStream):
        APPLES.apply(None, UsageRebuilt(usage=1, diffs=[]))
