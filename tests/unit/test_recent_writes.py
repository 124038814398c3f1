"""A process that keeps the records its writes leave (``ledger.store.recent``: the resident
helper's call processes) decides a node's next write on that record, in one round trip, and
trusts nothing a compare-and-swap does not check: a write from another process since, a
refusal or "nothing to do" on the kept record, a lost answer, all end as they would have on a
record read first. Against an in-memory etcd (``tests.unit.memory_etcd``), counting the
requests it answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from resource_extend.ledger.host.config import StreamsConfig
from resource_extend.ledger.model.errors import NodeNotFound, PluginError
from resource_extend.ledger.model.events import Change
from resource_extend.ledger.store import appender as appender_module
from resource_extend.ledger.store import recent as recent_module
from resource_extend.ledger.store.recent import RecentWrites
from resource_extend.ledger.upkeep.bounds import append_bounded
from resource_extend.ledger.upkeep.verification import Trust, verify_node
from resource_extend.projections.gpu.events import UsageChanged
from resource_extend.projections.gpu.node import NodeState
from tests.unit.memory_etcd import MemoryEtcd
from tests.unit.test_append_branches import (
    CARD,
    NODE,
    make_store,
    new_node,
    recording,
    remove_node_change,
    stream_of,
    usage,
    usage_change,
)


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch) -> Iterator[RecentWrites]:
    """This process keeps the records its writes leave, as a call process of the helper does."""
    made = RecentWrites()
    made.on = True
    monkeypatch.setattr(appender_module, "RECENT", made)
    yield made


@pytest.fixture
def etcd(kept: RecentWrites) -> MemoryEtcd:
    """etcd with node-1 (8 cards), added by this process."""
    made = MemoryEtcd()
    new_node(made)
    return made


def requests(etcd: MemoryEtcd) -> int:
    return sum(etcd.served.values())


def take(etcd: MemoryEtcd, cards: int = 1) -> NodeState | None:
    """This process takes ``cards``; the node's state after."""
    return make_store(etcd).appender.append(NODE, "take", usage_change({CARD: cards})).after


def another_process(
    etcd: MemoryEtcd, monkeypatch: pytest.MonkeyPatch, change: Change, *, this_host: bool = False
) -> None:
    """Another process writes ``change`` to the node: on another host (it leaves no mark in
    this host's turn), or on this one, keeping records of its own (``this_host``)."""
    with monkeypatch.context() as elsewhere:
        theirs = RecentWrites()
        theirs.on = this_host
        elsewhere.setattr(appender_module, "RECENT", theirs)
        make_store(etcd).appender.append(NODE, "theirs", lambda _: change)


def chain_holds(etcd: MemoryEtcd, tmp_path: Path) -> bool:
    found = verify_node(make_store(etcd), NODE, Trust(str(tmp_path)), False, [])
    return found.agrees and not found.findings


def test_a_write_after_this_process_s_own_is_one_round_trip(
    etcd: MemoryEtcd, tmp_path: Path
) -> None:
    take(etcd)
    before = requests(etcd)
    after = take(etcd)
    assert requests(etcd) - before == 1
    assert usage(after) == {CARD: 2}
    assert chain_holds(etcd, tmp_path)


def test_without_kept_records_a_write_reads_first(etcd: MemoryEtcd, kept: RecentWrites) -> None:
    kept.on = False
    take(etcd)
    before = requests(etcd)
    take(etcd)
    assert requests(etcd) - before == 2


def test_a_write_from_another_process_since_is_no_lost_race(
    etcd: MemoryEtcd, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The kept record is out of date: the compare fails, the record comes back in the same
    transaction, and the write lands on it at once: two round trips, as reading first costs,
    and its event counts no race lost."""
    take(etcd)
    another_process(etcd, monkeypatch, UsageChanged(delta={CARD: 3}))
    before = requests(etcd)
    decide, seen = recording(usage_change({CARD: 1}))
    appended = make_store(etcd).appender.append(NODE, "take", decide)
    assert requests(etcd) - before == 2
    assert [usage(state) for state in seen] == [{CARD: 1}, {CARD: 4}]  # kept, then as it is
    assert usage(appended.after) == {CARD: 5}
    assert [event.retries for event in appended.events] == [msgspec.UNSET]  # none lost
    assert chain_holds(etcd, tmp_path)


def test_a_write_from_another_process_of_this_host_since_is_seen_in_the_turn(
    etcd: MemoryEtcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The turn's mark is no longer this process's: the write reads first, and decides once."""
    take(etcd)
    another_process(etcd, monkeypatch, UsageChanged(delta={CARD: 3}), this_host=True)
    before = requests(etcd)
    decide, seen = recording(usage_change({CARD: 1}))
    appended = make_store(etcd).appender.append(NODE, "take", decide)
    assert requests(etcd) - before == 2
    assert [usage(state) for state in seen] == [{CARD: 4}]  # never the kept record
    assert usage(appended.after) == {CARD: 5}


def test_a_refusal_on_the_kept_record_is_decided_again_on_the_node_as_it_is(
    etcd: MemoryEtcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    """This process took all 8 cards; another gave 4 back since: a request for 2, refused on
    the kept record, is granted on the record read afresh."""
    take(etcd, 8)
    another_process(etcd, monkeypatch, UsageChanged(delta={CARD: -4}))

    def two_if_free(state: NodeState | None) -> Change:
        if state is None:
            raise NodeNotFound(NODE)
        if 8 - usage(state).get(CARD, 0) < 2:
            raise PluginError("not enough cards", node=NODE)
        return UsageChanged(delta={CARD: 2})

    appended = make_store(etcd).appender.append(NODE, "take", two_if_free)
    assert usage(appended.after) == {CARD: 6}


def test_nothing_to_do_on_the_kept_record_is_decided_again_on_the_node_as_it_is(
    etcd: MemoryEtcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    take(etcd, 2)
    another_process(etcd, monkeypatch, UsageChanged(delta={CARD: 1}))

    def up_to_three(state: NodeState | None) -> Change | None:
        used = usage(state).get(CARD, 0)
        return UsageChanged(delta={CARD: 3 - used}) if used < 3 else None

    decide, seen = recording(up_to_three)
    appended = make_store(etcd).appender.append(NODE, "settle", decide)
    assert [usage(state) for state in seen] == [{CARD: 2}, {CARD: 3}]
    assert appended.events == [] and usage(appended.after) == {CARD: 3}  # as it is, not kept


def test_a_node_removed_by_another_process_is_not_found(
    etcd: MemoryEtcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    take(etcd)
    with monkeypatch.context() as elsewhere:
        elsewhere.setattr(appender_module, "RECENT", RecentWrites())
        make_store(etcd).appender.append(NODE, "remove", remove_node_change())
    with pytest.raises(NodeNotFound):
        take(etcd)
    assert [event.verb for event in stream_of(etcd)][-1] == "remove"


def test_a_write_whose_answer_was_lost_forgets_the_kept_record(
    etcd: MemoryEtcd, kept: RecentWrites
) -> None:
    take(etcd)
    etcd.lose_next_answer()
    assert usage(take(etcd)) == {CARD: 2}  # found by its op id: applied once
    assert kept.take(make_store(etcd).appender.recent_key(NODE)) is None
    before = requests(etcd)
    take(etcd)
    assert requests(etcd) - before == 2  # read first


def test_a_kept_record_is_trusted_only_for_a_while(
    etcd: MemoryEtcd, monkeypatch: pytest.MonkeyPatch
) -> None:
    take(etcd)
    monkeypatch.setattr(recent_module, "KEEP", -1.0)  # any age is too old
    before = requests(etcd)
    take(etcd)
    assert requests(etcd) - before == 2


def test_a_write_that_compacts_its_stream_forgets_the_kept_record(
    etcd: MemoryEtcd, kept: RecentWrites, tmp_path: Path
) -> None:
    """Compaction moves where the stream starts, which the compare does not see: once a write
    has compacted its stream, the node's next write reads its record afresh."""
    streams = StreamsConfig(max_events=4, min_age=0, export_dir=str(tmp_path))
    key = make_store(etcd).appender.recent_key(NODE)
    for _ in range(20):
        append_bounded(make_store(etcd), streams, NODE, "take", usage_change({CARD: 0}))
        if stream_of(etcd)[0].seq > 1:
            break
    else:
        pytest.fail("the stream was never compacted")
    assert kept.take(key) is None
