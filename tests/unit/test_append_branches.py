"""The riskiest branches of ``Appender.append`` and of the store's reads, against an in-memory etcd
(``tests.unit.memory_etcd``): lost races, lost answers, compaction over a lost write, running
out of time or attempts, fail-over, and paged reads.

Everything these tests know of how a store is built, of decide functions, of event types and
of key names sits in the helpers below; the tests assert on behaviour (events, states, raised
exception types), never on the requests sent.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from resource_extend.ledger.host.config import Destination, EtcdConfig
from resource_extend.ledger.model.errors import (
    Contention,
    NodeExists,
    NodeNotFound,
    OutcomeUnknown,
    StoreError,
)
from resource_extend.ledger.model.events import AnyEvent, Change, Checkpoint
from resource_extend.ledger.store import Store
from resource_extend.ledger.store import appender as appender_module
from resource_extend.ledger.store import streams as streams_module
from resource_extend.ledger.store.keys import KeyLayout
from resource_extend.ledger.upkeep import compaction
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.events import NodeAdded, NodeRemoved, UsageChanged
from resource_extend.projections.gpu.node import GPU, NodeState
from tests.unit.memory_etcd import MemoryEtcd

# -- helpers: all the tests know of the store's API ------------------------------------------

GpuStore = Store[NodeState]
Decide = Callable[[NodeState | None], Change | None]

NODE = "node-1"
CARD = "nvidia-a100"


def make_store(etcd: MemoryEtcd, **config: Any) -> GpuStore:
    """A GPU store over ``etcd``, one ``etcd.machines`` entry per endpoint it has."""
    machines = [f"http://{endpoint_name(i)}" for i in range(etcd.endpoints)]
    return Store(EtcdConfig(machines=machines, prefix="/unit", **config), GPU, etcd)


def endpoint_name(i: int) -> str:
    return f"10.0.0.{i + 1}:2379"


def layout(store: GpuStore) -> KeyLayout:
    """The store's key layout: the only source of key names here."""
    return store.keys


def add_node_change(capacity: Cards) -> Decide:
    def decide(state: NodeState | None) -> Change:
        if state is not None:
            raise NodeExists(NODE)
        return NodeAdded(capacity=dict(capacity))

    return decide


def usage_change(delta: Cards) -> Decide:
    def decide(state: NodeState | None) -> Change:
        if state is None:
            raise NodeNotFound(NODE)
        return UsageChanged(delta=dict(delta))

    return decide


def remove_node_change() -> Decide:
    def decide(state: NodeState | None) -> Change:
        if state is None:
            raise NodeNotFound(NODE)
        return NodeRemoved()

    return decide


def recording(decide: Decide) -> tuple[Decide, list[NodeState | None]]:
    """``decide``, noting every state it is asked about."""
    seen: list[NodeState | None] = []

    def noting(state: NodeState | None) -> Change | None:
        seen.append(state)
        return decide(state)

    return noting, seen


def usage(state: NodeState | None) -> Cards:
    assert state is not None
    return dict(state.usage)


def is_checkpoint(event: AnyEvent) -> bool:
    return isinstance(event.change, Checkpoint)


def head_seq(raw: bytes | None) -> int | None:
    """The stream position a stored head records."""
    assert raw is not None
    return GPU.read_head(raw).seq


def shrink_event_page(monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    """Make the store read streams ``size`` events per request."""
    monkeypatch.setattr(streams_module, "EVENT_PAGE", size)


def compact_all(etcd: MemoryEtcd, node: str, export_dir: Path) -> None:
    """Replace every event of the node's stream by one checkpoint (another process's
    compaction)."""
    to = Destination(str(export_dir))
    done = compaction.compact(make_store(etcd), node, keep=0, to=to, min_age=0)
    assert done is not None


def ops(events: list[AnyEvent]) -> list[str]:
    return [event.op for event in events]


def seqs(events: list[AnyEvent]) -> list[int]:
    return [event.seq for event in events]


def new_node(etcd: MemoryEtcd, node: str = NODE, capacity: int = 8) -> list[AnyEvent]:
    return make_store(etcd).appender.append(node, "add", add_node_change({CARD: capacity})).events


def take_one(etcd: MemoryEtcd, node: str = NODE) -> list[str]:
    """Another writer takes a card: the op ids of what it appended."""
    return ops(make_store(etcd).appender.append(node, "rival", usage_change({CARD: 1})).events)


def rival(etcd: MemoryEtcd, *, forever: bool = False) -> list[str]:
    """Another writer takes a card just before our next write (every one, with ``forever``);
    the op ids of its events, as they land."""
    theirs: list[str] = []

    def first() -> None:
        theirs.extend(take_one(etcd))
        if forever:
            etcd.before_next_write(first)

    etcd.before_next_write(first)
    return theirs


def stream_of(etcd: MemoryEtcd, node: str = NODE) -> list[AnyEvent]:
    return make_store(etcd).streams.events(node)


# -- lost races -------------------------------------------------------------------------------


def test_a_lost_race_decides_again_on_the_fresh_state() -> None:
    etcd = MemoryEtcd()
    added = new_node(etcd)
    theirs = rival(etcd)
    decide, seen = recording(usage_change({CARD: 2}))

    result = make_store(etcd).appender.append(NODE, "take", decide)

    assert [usage(state) for state in seen] == [{}, {CARD: 1}]
    events = stream_of(etcd)
    assert seqs(events) == [1, 2, 3]
    assert ops(events) == [*ops(added), *theirs, *ops(result.events)]
    assert len(theirs) == 1 and len(result.events) == 1
    assert usage(result.before) == {CARD: 1}
    assert usage(result.after) == {CARD: 3}
    assert usage(make_store(etcd).records.read(NODE).state) == {CARD: 3}


def test_a_race_lost_to_a_removal_raises_what_decide_raises_and_writes_nothing() -> None:
    etcd = MemoryEtcd()
    new_node(etcd)
    etcd.before_next_write(
        lambda: make_store(etcd).appender.append(NODE, "rm", remove_node_change())
    )

    with pytest.raises(NodeNotFound):
        make_store(etcd).appender.append(NODE, "take", usage_change({CARD: 1}))

    assert seqs(stream_of(etcd)) == [1, 2]
    assert make_store(etcd).records.read(NODE).state is None


def edited_by_hand(head: bytes, cards: int) -> bytes:
    """The node's record with its usage set to ``cards`` of ``CARD``, as an operator's
    ``etcdctl put`` (or the upstream plugin) writes it: the head alone, no event."""
    edited = head.replace(
        b'"usage":{"prod_count_map":{}}',
        b'"usage":{"prod_count_map":{"%s":%d}}' % (CARD.encode(), cards),
    )
    assert edited != head
    return edited


def test_a_head_edited_with_no_event_before_the_commit_is_decided_on_again() -> None:
    """Between a write's read and its commit, the head is put by hand and no event appended:
    the compare on the head's revision alone sees it (the next event key is still free). The
    write decides again on the edited head, and the edit is kept beneath its delta."""
    etcd = MemoryEtcd()
    new_node(etcd)
    head = layout(make_store(etcd)).head(NODE)
    etcd.before_next_write(lambda: etcd.put(head, edited_by_hand(etcd.get(head) or b"", 5)))
    decide, seen = recording(usage_change({CARD: 2}))

    result = make_store(etcd).appender.append(NODE, "take", decide)

    assert [usage(state) for state in seen] == [{}, {CARD: 5}]
    assert usage(result.before) == {CARD: 5}
    assert usage(result.after) == {CARD: 7}
    assert usage(make_store(etcd).records.read(NODE).state) == {CARD: 7}
    assert seqs(stream_of(etcd)) == [1, 2]


# -- unknown outcomes -------------------------------------------------------------------------


@pytest.mark.parametrize("then_another_writer", [False, True])
def test_an_applied_write_whose_answer_was_lost_is_found_by_its_op_id(
    then_another_writer: bool,
) -> None:
    etcd = MemoryEtcd(endpoints=2)
    added = new_node(etcd)
    theirs: list[str] = []
    etcd.lose_next_answer(lambda: theirs.extend(take_one(etcd)) if then_another_writer else None)
    decide, seen = recording(usage_change({CARD: 2}))

    result = make_store(etcd).appender.append(NODE, "take", decide)

    events = stream_of(etcd)
    assert len(seen) == 1  # settled by the op id: never decided (nor applied) again
    assert ops(events) == [*ops(added), *ops(result.events), *theirs]
    assert seqs(events) == list(range(1, len(events) + 1))
    assert result.events == events[1:2]
    assert usage(result.before) == {}
    assert usage(result.after) == {CARD: 2}
    assert usage(make_store(etcd).records.read(NODE).state) == {CARD: 2 + len(theirs)}


def test_a_write_lost_before_it_reached_etcd_is_applied_once() -> None:
    etcd = MemoryEtcd(endpoints=2)
    added = new_node(etcd)
    etcd.fail_next(0, writes_only=True)

    result = make_store(etcd).appender.append(NODE, "take", usage_change({CARD: 2}))

    events = stream_of(etcd)
    assert ops(events) == [*ops(added), *ops(result.events)]
    assert seqs(events) == [1, 2]
    assert result.events == events[1:]
    assert usage(result.after) == {CARD: 2}
    assert usage(make_store(etcd).records.read(NODE).state) == {CARD: 2}


def test_a_checkpoint_over_the_lost_write_leaves_its_outcome_unknown(tmp_path: Path) -> None:
    etcd = MemoryEtcd()
    new_node(etcd)
    etcd.lose_next_answer(lambda: compact_all(etcd, NODE, tmp_path))
    decide, seen = recording(usage_change({CARD: 2}))

    with pytest.raises(OutcomeUnknown):
        make_store(etcd).appender.append(NODE, "take", decide)

    assert len(seen) == 1
    events = stream_of(etcd)
    assert seqs(events) == [2] and is_checkpoint(events[0])  # the write, compacted away
    record = make_store(etcd).records.read(NODE)
    assert record.seq == 2  # not appended a second time
    assert usage(record.state) == {CARD: 2}


def test_a_lost_answer_to_a_write_that_cannot_land_is_settled_as_not_written() -> None:
    """A rival moved the head before our write, so etcd refused it, and the refusal was lost.
    Once the settle read finds no event and the head moved on, the write can never land: a
    call then out of time fails as contention, nothing written; never "outcome unknown"."""
    etcd = MemoryEtcd()
    added = new_node(etcd)
    theirs = rival(etcd)
    etcd.lose_next_answer()
    # the settle's reads (the record, then the events since) leave too little to write again
    etcd.before_request(lambda: time.sleep(0.7), skip=1)

    with pytest.raises(Contention) as raised:
        make_store(etcd, timeout=1.0).appender.append(NODE, "take", usage_change({CARD: 1}))

    assert str(raised.value).startswith("contention: other writers changed the node first")
    assert ops(stream_of(etcd)) == [*ops(added), *theirs]


def test_a_loaded_etcd_never_leaves_a_write_sent_too_late_to_settle() -> None:
    """Every write is answered 0.15 s after it lands, and a rival wins every race until the
    budget runs out: a write sent with less than that to go would be applied or refused
    unseen, with no time left to find which. None is: the call fails as contention."""
    etcd = MemoryEtcd()
    added = new_node(etcd)
    theirs = rival(etcd, forever=True)
    etcd.write_latency = 0.15

    with pytest.raises(Contention):
        make_store(etcd, timeout=1.0, max_attempts=1000).appender.append(
            NODE, "take", usage_change({CARD: 1})
        )

    assert theirs
    assert ops(stream_of(etcd)) == [*ops(added), *theirs]


def test_a_write_is_not_sent_with_too_little_time_left_to_settle_it() -> None:
    """Slow reads spent the budget: the write is never sent, and the line says so."""
    etcd = MemoryEtcd()
    new_node(etcd)
    etcd.before_request(lambda: time.sleep(0.7))  # the read before the decision

    with pytest.raises(StoreError) as raised:
        make_store(etcd, timeout=1.0).appender.append(NODE, "take", usage_change({CARD: 1}))

    assert not isinstance(raised.value, OutcomeUnknown)
    assert "before the write could be sent" in str(raised.value)
    assert "nothing was written" in str(raised.value)
    assert seqs(stream_of(etcd)) == [1]


def test_a_lost_answer_is_settled_though_etcd_answers_late() -> None:
    """The write's answer is lost, and etcd then answers nothing within what is left of
    etcd.timeout: it was up, only slow (48 callers on one node made 66 of 440 writes end so).
    The call asks again, within a second budget (core's 30 s allows it), and finds the write
    by its op id instead of reporting its outcome unknown."""
    etcd = MemoryEtcd()
    added = new_node(etcd)

    def slow_then_silent() -> None:
        time.sleep(1.05)  # the rest of the budget, and more, goes by
        etcd.fail_next(0)  # and the read that would settle it gets no answer

    etcd.lose_next_answer(slow_then_silent)
    result = make_store(etcd, timeout=1.0).appender.append(NODE, "take", usage_change({CARD: 1}))

    assert result.events == stream_of(etcd)[1:2]
    assert ops(stream_of(etcd)) == [*ops(added), *ops(result.events)]
    assert usage(result.after) == {CARD: 1}


def test_an_unknown_outcome_says_so_first() -> None:
    assert str(OutcomeUnknown("write 1f was sent ...")).startswith("outcome unknown: write 1f")


# -- contention -------------------------------------------------------------------------------


def test_running_out_of_time_while_losing_races_is_contention() -> None:
    etcd = MemoryEtcd()
    added = new_node(etcd)
    theirs = rival(etcd, forever=True)
    started = time.monotonic()

    with pytest.raises(Contention):
        make_store(etcd, timeout=0.3, max_attempts=1000).appender.append(
            NODE, "take", usage_change({CARD: 1})
        )

    assert time.monotonic() - started < 3
    assert theirs  # lost at least one race
    assert ops(stream_of(etcd)) == [*ops(added), *theirs]  # and wrote nothing


def test_running_out_of_time_without_a_lost_race_is_no_contention() -> None:
    etcd = MemoryEtcd()
    new_node(etcd)
    etcd.before_request(lambda: time.sleep(0.2))  # the read answers, after the deadline

    with pytest.raises(StoreError) as raised:
        make_store(etcd, timeout=0.1).appender.append(NODE, "take", usage_change({CARD: 1}))

    assert not isinstance(raised.value, (Contention, OutcomeUnknown))
    assert seqs(stream_of(etcd)) == [1]


@pytest.mark.parametrize("per_request", [False, True])
def test_a_long_job_gives_each_request_the_whole_timeout(per_request: bool) -> None:
    """The archiver's store (``budget_per_request``) outlasts a call's budget request by
    request; a call's store does not."""
    etcd = MemoryEtcd()
    new_node(etcd)
    store = make_store(etcd, timeout=0.3)
    if per_request:
        store.etcd.budget_per_request()
    for _ in range(3):
        etcd.before_request(lambda: time.sleep(0.12))

    def three_reads() -> list[dict[str, int]]:
        return [usage(store.records.read(NODE).state) for _ in range(3)]

    if per_request:
        assert three_reads() == [{}, {}, {}]
    else:
        with pytest.raises(StoreError):
            three_reads()


def test_exhausting_max_attempts_is_contention() -> None:
    etcd = MemoryEtcd()
    added = new_node(etcd)
    theirs = rival(etcd, forever=True)
    decide, seen = recording(usage_change({CARD: 1}))

    store = make_store(etcd, max_attempts=3)
    with pytest.raises(Contention):
        store.appender.append(NODE, "take", decide)

    assert len(seen) == 3  # one lost race per attempt ...
    assert len(theirs) == 4  # ... and the rival's fourth lands before the failure is tallied
    assert ops(stream_of(etcd)) == [*ops(added), *theirs]
    assert store.outcomes.write_failures() == {"take": 1}


def rival_for(etcd: MemoryEtcd, times: int) -> list[str]:
    """Another writer takes a card just before each of our next ``times`` writes."""
    theirs: list[str] = []

    def one() -> None:
        theirs.extend(take_one(etcd))
        if len(theirs) < times:
            etcd.before_next_write(one)

    etcd.before_next_write(one)
    return theirs


def test_a_write_outlasts_any_count_of_lost_races_while_its_time_lasts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A rival wins the first 200 races, far past the 64 tries writes once stopped at: the
    write keeps trying, a jittered pause apart (kept short here), and lands; its event counts
    the races it lost."""
    monkeypatch.setattr(appender_module, "MOST_PAUSE", 0.0005)
    etcd = MemoryEtcd()
    added = new_node(etcd)
    theirs = rival_for(etcd, 200)

    result = make_store(etcd, timeout=20.0).appender.append(NODE, "take", usage_change({CARD: 1}))

    assert len(theirs) == 200
    (ours,) = result.events
    assert ours.retries == 200
    assert ops(stream_of(etcd)) == [*ops(added), *theirs, ours.op]


def test_a_write_gives_up_as_contention_only_once_its_time_is_spent(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(appender_module, "MOST_PAUSE", 0.0005)
    etcd = MemoryEtcd()
    added = new_node(etcd)
    theirs = rival(etcd, forever=True)
    decide, seen = recording(usage_change({CARD: 1}))
    store = make_store(etcd, timeout=0.5)

    with pytest.raises(Contention) as raised:
        store.appender.append(NODE, "take", decide)

    assert "etcd.timeout (0.5s) ran out" in str(raised.value)
    assert len(seen) > 64  # no count of tries stopped it
    assert ops(stream_of(etcd)) == [*ops(added), *theirs]
    assert store.outcomes.write_failures() == {"take": 1}


# -- fail-over --------------------------------------------------------------------------------


def test_a_read_fails_over_to_the_next_endpoint() -> None:
    etcd = MemoryEtcd(endpoints=2)
    new_node(etcd, capacity=3)
    etcd.fail_next(0)
    served = etcd.served[1]

    record = make_store(etcd).records.read(NODE)

    assert record.state is not None and dict(record.state.capacity) == {CARD: 3}
    assert record.seq == 1
    assert etcd.served[1] > served


def test_a_process_s_next_call_starts_at_the_member_that_answered() -> None:
    """The first member fails; the next call of the process asks the second first, and its
    write goes where its read was answered (``ledger.etcd.health``)."""
    etcd = MemoryEtcd(endpoints=3)
    new_node(etcd, capacity=3)
    etcd.fail_next(0)
    make_store(etcd).records.read(NODE)  # failed over to the second
    before = dict(etcd.served)

    make_store(etcd).appender.append(NODE, "take", usage_change({CARD: 1}))

    assert etcd.served[0] == before.get(0, 0), "a later call asked the member that failed"
    assert etcd.served[1] - before[1] == 2  # its read and its write
    assert etcd.served[2] == before.get(2, 0)


def test_all_endpoints_down_is_a_store_error_naming_them() -> None:
    etcd = MemoryEtcd(endpoints=3)
    new_node(etcd)
    etcd.down = {0, 1, 2}

    with pytest.raises(StoreError) as raised:
        make_store(etcd).appender.append(NODE, "take", usage_change({CARD: 1}))

    assert not isinstance(raised.value, OutcomeUnknown)  # nothing was sent to write
    for i in range(3):
        assert endpoint_name(i) in str(raised.value)
    etcd.down = set()
    assert seqs(stream_of(etcd)) == [1]


# -- paged reads ------------------------------------------------------------------------------


def test_a_stream_longer_than_a_page_is_read_whole_at_one_revision(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    shrink_event_page(monkeypatch, 3)
    etcd = MemoryEtcd()
    written = ops(new_node(etcd))
    for _ in range(9):
        written += take_one(etcd)
    landed: list[str] = []
    etcd.before_request(lambda: landed.extend(take_one(etcd)), skip=1)  # after the first page

    stream = make_store(etcd).streams.read_stream(NODE)

    assert landed  # a write did land between the pages ...
    assert ops(stream.events) == written  # ... and is not part of what was read
    assert seqs(stream.events) == list(range(1, 11))
    assert head_seq(stream.head) == 10
    assert ops(stream_of(etcd)) == [*written, *landed]
    assert seqs(make_store(etcd).streams.events(NODE, after=4)) == list(range(5, 12))


def test_listing_nodes_pages_over_more_keys_than_a_page() -> None:
    etcd = MemoryEtcd()
    keys = layout(make_store(etcd))
    expected: dict[str, tuple[bool, bool]] = {}

    def seed(node: str, *, head: bool, events: int) -> None:
        if head:
            etcd.put(keys.head(node), b"{}")  # listing reads keys only
        for seq in range(1, events + 1):
            etcd.put(keys.event(node, seq), b"{}")
        expected[node] = (head, events > 0)

    for i in range(1000):  # a page (1000 keys) of heads: the first page ends on a head
        seed(f"a{i:04}", head=True, events=0)
    seed("b-long", head=True, events=1500)  # the second page ends inside a stream
    seed("b-long-2", head=True, events=1)
    seed("c-removed", head=False, events=2)
    seed("d-last", head=True, events=0)

    found = make_store(etcd).scans.list_nodes()

    assert {name: (seen.head, seen.stream) for name, seen in found.items()} == expected
