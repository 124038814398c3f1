"""What auditors ask of a stream, without etcd: projections/audit.py."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given
from hypothesis import strategies as st
from msgspec.structs import replace

from resource_extend.ledger.model import audit, verdicts
from resource_extend.ledger.model.digests import digest
from resource_extend.ledger.model.errors import InvalidRequest, PluginError
from resource_extend.ledger.model.events import AnyEvent
from resource_extend.projections.gpu.events import (
    Change,
    Checkpoint,
    Event,
    GpuRecord,
    HeadRepaired,
    NodeAdded,
    NodeRemoved,
    Snapshot,
    UsageChanged,
    UsageRebuilt,
    encode,
)
from resource_extend.projections.gpu.node import GPU, NodeState, fold
from resource_extend.projections.gpu.resources import Resource
from tests.unit.strategies import FAST, positive_maps, signed_maps

T0 = datetime(2026, 11, 29, 3, 0, tzinfo=timezone.utc)
EXPORT = "host-1:/var/lib/resource-gpu/n1.000000000001-000000000003.abc.jsonl"


def stream(*changes: Change, start: int = 1) -> list[Event]:
    """Events one minute apart from T0, seq ``start``, ``start + 1``, ..., chained as the
    store chains them (each names the digest of the one before, as encoded)."""
    events: list[Event] = []
    for seq, c in enumerate(changes, start=start):
        prev = digest(encode(events[-1])) if events else None
        at = T0 + timedelta(minutes=seq)
        events.append(Event(seq=seq, at=at, verb="test", op=f"op{seq}", change=c, prev=prev))
    return events


def compacted(events: list[Event], through: int) -> list[Event]:
    """``events`` as compaction leaves them: a checkpoint at ``through``, then the rest."""
    gone = [e for e in events if e.seq <= through]
    checkpoint = Event(
        seq=through,
        at=T0 + timedelta(days=1),
        verb="compact",
        op="c",
        change=replace(audit.checkpoint_for(GPU, gone, EXPORT), tip=digest(encode(gone[-1]))),
    )
    return [checkpoint, *(e for e in events if e.seq > through)]


def head(state: NodeState, seq: int | None) -> bytes:
    return encode(
        GpuRecord(capacity=Resource.of(state.capacity), usage=Resource.of(state.usage), seq=seq)
    )


LIFE = stream(
    NodeAdded(capacity={"a": 4}),
    UsageChanged(delta={"a": 1}),
    UsageChanged(delta={"a": 2}),
    UsageChanged(delta={"a": -1}),
    NodeRemoved(),
    NodeAdded(capacity={"b": 1}),
)


# --- points ----------------------------------------------------------------------------------


def test_a_point_is_a_seq_or_a_time() -> None:
    assert audit.parse_point("42", "--at") == 42
    assert audit.parse_point("2026-11-29T03:00:00Z", "--at") == T0
    assert audit.parse_point("2026-11-29T04:00:00+01:00", "--at") == T0
    assert audit.parse_point("2026-11-29T03:00:00", "--at") == T0  # no offset: UTC
    assert audit.parse_point("2026-11-29", "--at") == T0 - timedelta(hours=3)


@pytest.mark.parametrize("text", ["", "-1", "yesterday", "1.5", "2026-13-01", "seq 4"])
def test_anything_else_is_refused_naming_the_option(text: str) -> None:
    with pytest.raises(InvalidRequest, match="--since"):
        audit.parse_point(text, "--since")


def test_times_are_shown_in_utc_at_the_precision_stored() -> None:
    at = datetime(2026, 11, 29, 4, 0, 0, 123456, tzinfo=timezone(timedelta(hours=1)))
    assert audit.rfc3339(at) == "2026-11-29T03:00:00.123456Z"
    assert audit.rfc3339(at.replace(microsecond=0)) == "2026-11-29T03:00:00Z"


@given(st.datetimes(timezones=st.just(timezone.utc)))
@FAST
def test_a_time_shown_selects_exactly_that_time(at: datetime) -> None:
    assert audit.parse_point(audit.rfc3339(at), "--at") == at


def test_leap_seconds_and_offsets_parse() -> None:
    assert audit.parse_point("2016-12-31T23:59:60Z", "--at") == datetime(
        2017, 1, 1, tzinfo=timezone.utc
    )
    assert audit.parse_point("2026-11-29T05:00:00+02:00", "--at") == datetime(
        2026, 11, 29, 3, tzinfo=timezone.utc
    )


# --- state at a point ------------------------------------------------------------------------


def test_state_after_each_seq() -> None:
    assert audit.state_at(GPU, LIFE, 1)[1] == NodeState(capacity={"a": 4})
    assert audit.state_at(GPU, LIFE, 3)[1] == NodeState(capacity={"a": 4}, usage={"a": 3})
    assert audit.state_at(GPU, LIFE, 5)[1] is None
    event, state = audit.state_at(GPU, LIFE, 6)
    assert event.seq == 6
    assert state == NodeState(capacity={"b": 1})


def test_state_at_a_time_is_the_state_after_the_last_event_by_then() -> None:
    between_2_and_3 = T0 + timedelta(minutes=2, seconds=30)
    event, state = audit.state_at(GPU, LIFE, between_2_and_3)
    assert event.seq == 2
    assert state == NodeState(capacity={"a": 4}, usage={"a": 1})
    assert audit.state_at(GPU, LIFE, T0 + timedelta(minutes=3))[0].seq == 3  # inclusive


def test_points_outside_the_stream_are_errors() -> None:
    with pytest.raises(PluginError, match="past the end"):
        audit.state_at(GPU, LIFE, 7)
    with pytest.raises(PluginError, match="before the stream's first event"):
        audit.state_at(GPU, LIFE, 0)
    with pytest.raises(PluginError, match="no events yet"):
        audit.state_at(GPU, LIFE, T0)
    with pytest.raises(PluginError, match="no events"):
        audit.state_at(GPU, [], 1)


def test_points_before_a_checkpoint_name_the_export() -> None:
    events = compacted(LIFE, through=3)
    assert events[0].seq == 3 and isinstance(events[0].change, Checkpoint)
    assert audit.state_at(GPU, events, 3)[1] == NodeState(capacity={"a": 4}, usage={"a": 3})
    for point in (2, T0 + timedelta(minutes=2, seconds=59)):
        with pytest.raises(PluginError, match=r"events 1\.\.3 were compacted") as raised:
            audit.state_at(GPU, events, point)
        assert EXPORT in raised.value.reason
    # A checkpoint stands at the time of the last event it replaced, not when it was written.
    assert audit.state_at(GPU, events, T0 + timedelta(minutes=3))[0].seq == 3


def test_a_broken_stream_says_where() -> None:
    broken = stream(NodeAdded(capacity={}), NodeRemoved(), UsageRebuilt(usage={"a": 1}, diffs=[]))
    with pytest.raises(PluginError, match="broken at seq 3"):
        audit.state_at(GPU, broken, 3)


# --- checkpoints ------------------------------------------------------------------------------


@FAST
@given(
    capacity=positive_maps,
    deltas=st.lists(signed_maps, min_size=1, max_size=12),
    data=st.data(),
)
def test_compaction_keeps_every_later_state(
    capacity: dict[str, int], deltas: list[dict[str, int]], data: st.DataObject
) -> None:
    events = stream(NodeAdded(capacity=capacity), *(UsageChanged(delta=d) for d in deltas))
    through = data.draw(st.integers(min_value=1, max_value=len(events)))
    after = compacted(events, through)
    assert fold(after) == fold(events)
    for seq in range(through, len(events) + 1):
        assert audit.state_at(GPU, after, seq)[1] == audit.state_at(GPU, events, seq)[1]
    verdict = verdicts.check(GPU, head(fold(events) or NodeState(), len(events)), after)
    possible = all(GPU.invalid(s) is None for s in audit.states(GPU, after) if s is not None)
    assert verdict.problems == [] if possible else not verdict.repairable


def test_compacting_a_compacted_stream_keeps_the_first_seq() -> None:
    once = compacted(LIFE, through=3)
    twice = compacted(once, through=5)
    assert isinstance(twice[0].change, Checkpoint)
    assert twice[0].change.first == 1
    assert twice[0].change.last_at == LIFE[4].at
    assert fold(twice) == fold(LIFE)


def test_a_checkpoint_may_hold_a_removed_node() -> None:
    after = compacted(LIFE, through=5)
    assert isinstance(after[0].change, Checkpoint)
    assert after[0].change.state is None
    assert fold(after) == NodeState(capacity={"b": 1})


def test_a_stream_with_gaps_is_not_compacted() -> None:
    gappy = [LIFE[0], LIFE[2]]
    with pytest.raises(PluginError, match=r"events 2\.\.2 are missing"):
        audit.checkpoint_for(GPU, gappy, EXPORT)


# --- verify ----------------------------------------------------------------------------------

NOW = NodeState(capacity={"b": 1})


def test_a_head_that_matches_its_stream_agrees() -> None:
    verdict = verdicts.check(GPU, head(NOW, 6), LIFE)
    assert verdict.problems == []
    assert verdict.folded == NOW


def test_an_upstream_head_without_a_stream_is_not_a_disagreement() -> None:
    assert verdicts.check(GPU, head(NOW, None), []).problems == []
    assert verdicts.check(GPU, None, []).problems == []


@pytest.mark.parametrize(
    ("stored", "problem"),
    [
        (head(NodeState(capacity={"b": 2}), 6), "capacity differs: head b:2, stream b:1"),
        (
            head(NodeState(capacity={"b": 1}, usage={"b": 1}), 6),
            "usage differs: head b:1, stream none",
        ),
        (head(NOW, 5), "seq differs: head 5, stream 6"),
        (b'{"capacity": 12', "the head is not readable"),
        (None, "no head, but the stream says capacity b:1, usage none at seq 6"),
    ],
)
def test_each_disagreement_names_both_values(stored: bytes | None, problem: str) -> None:
    verdict = verdicts.check(GPU, stored, LIFE)
    assert any(problem in p for p in verdict.problems), verdict.problems
    assert verdict.repairable
    repair, state = verdicts.repair(GPU, stored, verdict)
    assert isinstance(repair, HeadRepaired)
    assert repair.state == state == Snapshot(capacity={"b": 1}, usage={})
    assert repair.found == (stored.decode() if stored else "no head")


@pytest.mark.parametrize("stream", [LIFE, LIFE[:5]], ids=["live", "removed"])
def test_an_upstream_head_is_adopted_as_found_never_reverted_or_deleted(
    stream: list[AnyEvent],
) -> None:
    """The upstream plugin rewrote the node (or re-added it after our remove-node): a repair
    takes its record as a core write would, whatever the stream says."""
    theirs = NodeState(capacity={"b": 7}, usage={"b": 2})
    verdict = verdicts.check(GPU, head(theirs, None), stream)
    assert any("the head has no seq" in p for p in verdict.problems), verdict.problems
    change, state = verdicts.repair(GPU, head(theirs, None), verdict)
    assert state == theirs and change == GPU.adopted(theirs, head(theirs, None))
    assert change.record == head(theirs, None).decode()  # type: ignore[attr-defined]


def test_an_unreadable_head_is_kept_whole_in_the_repair() -> None:
    stored = b'{"capacity": {"prod_count_map": {"b": 8.0}}' + b" " * 5000 + b"}"
    verdict = verdicts.check(GPU, stored, LIFE)
    change, _ = verdicts.repair(GPU, stored, verdict)
    assert isinstance(change, HeadRepaired) and change.found == stored.decode()
    removed = verdicts.check(GPU, stored, LIFE[:5])
    assert not removed.repairable  # not ours to delete: a core write would refuse it too


def test_a_head_left_after_removal_is_repaired_by_removing_it() -> None:
    removed = LIFE[:5]
    verdict = verdicts.check(GPU, head(NodeState(capacity={"a": 4}), 5), removed)
    assert "the stream ends with the node removed" in verdict.problems[0]
    assert verdicts.repair(GPU, None, verdict) == (HeadRepaired(found="no head", state=None), None)


def test_a_stream_missing_events_is_not_repairable() -> None:
    missing_middle = [*LIFE[:2], *LIFE[3:]]
    verdict = verdicts.check(GPU, head(NOW, 6), missing_middle)
    assert "events 3..3 are missing" in verdict.problems
    assert not verdict.repairable
    missing_start = LIFE[2:]
    verdict = verdicts.check(GPU, head(NOW, 6), missing_start)
    assert "events 1..2 are missing (and no checkpoint)" in verdict.problems


def test_a_head_ahead_of_its_stream_is_not_repairable() -> None:
    verdict = verdicts.check(GPU, head(NOW, 9), LIFE)
    assert "seq differs: head 9, stream 6" in verdict.problems
    assert not verdict.repairable
    emptied = verdicts.check(GPU, head(NOW, 3), [])
    assert emptied.problems == ["the head is at seq 3 but the stream is empty"]
    assert not emptied.repairable


def test_a_stream_that_does_not_fold_is_reported_not_repaired() -> None:
    broken = stream(NodeAdded(capacity={}), NodeRemoved(), UsageRebuilt(usage={"a": 1}, diffs=[]))
    verdict = verdicts.check(GPU, head(NOW, 3), broken)
    assert any("broken at seq 3" in p for p in verdict.problems)
    assert not verdict.repairable


# --- compaction's age limit ------------------------------------------------------------------


def test_an_event_is_too_young_to_compact_until_min_age_has_passed() -> None:
    event = LIFE[0]  # written at T0 + 1 minute
    written = event.at
    assert audit.too_young(event, now=written + timedelta(seconds=299), min_age=300)
    assert not audit.too_young(event, now=written + timedelta(seconds=300), min_age=300)
    assert audit.too_young(event, now=written - timedelta(seconds=1), min_age=300)  # ahead
    assert not audit.too_young(event, now=written - timedelta(days=1), min_age=0)


def test_a_checkpoint_is_as_old_as_the_last_event_it_replaced() -> None:
    checkpoint = compacted(LIFE, through=3)[0]  # written a day after T0
    replaced = LIFE[2].at
    assert not audit.too_young(checkpoint, now=replaced + timedelta(seconds=300), min_age=300)


def test_a_time_far_ahead_is_not_believed_but_the_writers_own_clock_is() -> None:
    """Within ``AHEAD_BOUND`` of the reader's clock a time is believed; past it, the writer's
    own clock when the time was raised (``clock``), unless that is ahead too."""
    now = T0
    bound = timedelta(seconds=audit.AHEAD_BOUND)
    near = replace(LIFE[0], at=now + bound)
    far = replace(LIFE[0], at=now + bound + timedelta(microseconds=1))
    assert audit.believed_at(near, now) == near.at
    assert audit.believed_at(far, now) is None
    assert audit.believed_at(replace(far, clock=now - timedelta(hours=1)), now) == now - timedelta(
        hours=1
    )
    assert audit.believed_at(replace(far, clock=far.at), now) is None
    assert not audit.too_young(far, now=now, min_age=300)  # by itself: unvouched decides


def test_events_stamped_ahead_at_the_end_of_a_cut_are_not_vouched_for() -> None:
    now = T0 + timedelta(days=1)
    ahead = [replace(event, at=now + timedelta(days=1)) for event in LIFE[:3]]
    vouched = replace(ahead[2], clock=now - timedelta(hours=1))
    assert audit.unvouched([LIFE[0], *ahead[1:]], now=now, min_age=300) == 2
    assert audit.unvouched([*ahead[:2], vouched], now=now, min_age=300) == 0
    assert audit.unvouched(ahead, now=now, min_age=300) == 3
    assert audit.unvouched(ahead, now=now, min_age=0) == 0


def test_the_first_event_stamped_ahead_is_noted_with_its_writer() -> None:
    before = replace(LIFE[0], at=T0 + timedelta(hours=3), by="core@fast")
    after = replace(LIFE[1], at=before.at, clock=T0, by="core@right")
    note = audit.stamped_ahead(before, after)
    assert note == (
        "event 1 is stamped 3 h ahead of the clock of the writer after it (core@right): the "
        "clock of core@fast was ahead"
    )
    assert audit.stamped_ahead(after, replace(LIFE[2], at=before.at, clock=T0)) is None  # raised
    assert audit.stamped_ahead(LIFE[0], LIFE[1]) is None  # not raised
    assert audit.stamped_ahead(replace(before, at=T0 + timedelta(seconds=60)), after) is None
    assert audit.ahead_of_now(before, T0) == (
        "event 1 is stamped 3 h ahead of this host's clock (written by core@fast): that "
        "clock, or this one, is wrong"
    )
    assert audit.ahead_of_now(after, T0) is None  # its writer's own clock is believed
    assert audit.raised_ahead_of_now(after, T0) == (
        "event 2 is stamped 3 h ahead of this host's clock, raised to the time of an earlier "
        "event by its writer (core@right), whose own clock agrees: an earlier writer's clock "
        "was ahead"
    )  # but its time is still ahead: doctor fails on it
    assert audit.raised_ahead_of_now(before, T0) is None  # not raised: ahead_of_now's
    assert audit.raised_ahead_of_now(after, before.at) is None  # the time has come


@pytest.mark.parametrize(
    ("seconds", "spoken"),
    [
        (61, "61 s"),
        (150, "2 min"),
        (5999, "100 min"),
        (6000, "2 h"),
        (172799, "48 h"),
        (172800, "2 days"),
        (86400 * 30, "30 days"),
    ],
)
def test_how_far_a_clock_is_off_is_said_roughly(seconds: float, spoken: str) -> None:
    assert audit.spoken(seconds) == spoken


# --- exports ---------------------------------------------------------------------------------


def exported(events: list[Event], through: int) -> tuple[Event, str, list[bytes]]:
    """A compaction of ``events`` through ``through``: its checkpoint, its export's file name
    and lines."""
    gone = [e for e in events if e.seq <= through]
    name = f"n1.{gone[0].seq:012d}-{through:012d}.opcheckpoint.jsonl"
    checkpoint = Event(
        seq=through,
        at=T0 + timedelta(days=1),
        verb="compact",
        op="opcheckpoint0123",
        change=replace(
            audit.checkpoint_for(GPU, gone, f"host-1:/exports/{name}"),
            tip=digest(encode(gone[-1])),
        ),
    )
    return checkpoint, name, [encode(e) for e in gone]


def test_an_export_that_holds_what_its_checkpoint_stands_for_checks_out() -> None:
    checkpoint, name, lines = exported(LIFE, 3)
    checked = audit.check_export(GPU, checkpoint, name, lines)
    assert (checked.problems, checked.previous) == ([], None)
    assert [e.seq for e in checked.events] == [1, 2, 3]


def test_an_export_that_starts_with_a_checkpoint_leads_to_the_one_before() -> None:
    first, _, _ = exported(LIFE, 3)
    later = [first, *LIFE[3:]]
    checkpoint, name, lines = exported(later, 5)
    checked = audit.check_export(GPU, checkpoint, name, lines)
    assert checked.problems == []
    assert checked.previous == first


def replace_line(lines: list[bytes], index: int, event: Event) -> list[bytes]:
    return [*lines[:index], encode(event), *lines[index + 1 :]]


def test_each_way_an_export_can_be_wrong_is_named() -> None:
    checkpoint, name, lines = exported(LIFE, 4)
    fewer = replace(LIFE[2], change=UsageChanged(delta={"a": 1}))  # 1 card taken, not 2
    later = replace(LIFE[3], at=LIFE[3].at + timedelta(seconds=1))
    cases: dict[str, tuple[str, list[bytes], str]] = {
        "a line that is not an event": (name, [*lines, b"{oops"], "line 5 is not an event"),
        "no lines": (name, [], "holds no events"),
        "a gap": (name, [lines[0], lines[1], lines[3]], "events 3..3 are missing"),
        "out of order": (name, [lines[0], lines[2], lines[1], lines[3]], "seq 2 follows seq 3"),
        "short of the checkpoint": (name, lines[:3], "ends at seq 3, not at the checkpoint's (4)"),
        "not from event 1": (name, lines[1:], "starts at seq 2, neither event 1 nor a checkpoint"),
        # an edited event breaks the chain at the one after it, or misses the checkpoint's tip
        "another state": (name, replace_line(lines, 2, fewer), "its chain breaks at seq 4"),
        "another time": (name, replace_line(lines, 3, later), "not the one the checkpoint names"),
        "another op": (name.replace("opcheckpoint", "someoneelses"), lines, "does not carry"),
    }
    for case, (file_name, content, problem) in cases.items():
        checked = audit.check_export(GPU, checkpoint, file_name, content)
        assert any(problem in p for p in checked.problems), (case, checked.problems)
        assert checked.previous is None, case


def test_an_export_whose_checkpoint_claims_another_first_seq_is_caught() -> None:
    checkpoint, name, lines = exported(LIFE, 4)
    assert isinstance(checkpoint.change, Checkpoint)
    wrong = replace(checkpoint, change=replace(checkpoint.change, first=2))
    (problem,) = audit.check_export(GPU, wrong, name, lines).problems
    assert problem == "it goes back to seq 1, the checkpoint says 2"


def test_an_export_that_only_repeats_a_checkpoint_leads_nowhere() -> None:
    """A chain must go back: an export holding nothing but a checkpoint at its own seq (which
    could name the same file again) is a problem, not a link to follow."""
    checkpoint, _, _ = exported(LIFE, 3)
    assert isinstance(checkpoint.change, Checkpoint)
    name = checkpoint.change.export.rpartition("/")[2]
    checked = audit.check_export(GPU, checkpoint, name, [encode(checkpoint)])
    assert checked.previous is None
    assert any("no event after the checkpoint" in p for p in checked.problems), checked


def test_a_fold_through_negative_usage_is_never_trusted() -> None:
    """An event's delta edited from 2 to -5 folds to usage -4 at that seq: verify reports it
    and a repair would offer cards the node does not have, so there is none."""
    forged = [*LIFE[:3], replace(LIFE[3], change=UsageChanged(delta={"b": -5}))]
    verdict = verdicts.check(GPU, head(NOW, 4), forged)
    assert any("impossible at seq 4: usage goes negative" in p for p in verdict.problems)
    assert not verdict.repairable


def test_an_export_of_unchained_v2_events_is_still_checked_by_its_fold() -> None:
    v2 = [replace(e, v=2, prev=None) for e in LIFE]
    checkpoint, name, lines = exported(v2, 4)
    fewer = replace(v2[2], change=UsageChanged(delta={"a": 1}))  # 1 card taken, not 2
    checked = audit.check_export(GPU, checkpoint, name, replace_line(lines, 2, fewer))
    folded = "fold to capacity a:4, usage a:1, the checkpoint says capacity a:4, usage a:2"
    assert any(folded in p for p in checked.problems), checked.problems


def test_an_event_whose_delta_is_not_its_workloads_sum_is_never_trusted() -> None:
    """A usage change records the workloads it came from; one whose delta disagrees with them
    (an edit, or a writer's bug) contradicts itself: reported at its seq, not repairable."""
    workloads = [{"a": 1}, {"a": 2}]
    agreeing = [
        *LIFE[:2],
        replace(LIFE[2], change=UsageChanged(delta={"a": 3}, workloads=workloads)),
    ]
    assert GPU.contradiction(agreeing[2].change) is None
    taken_back = UsageChanged(delta={"a": -3}, workloads=workloads)
    assert GPU.contradiction(taken_back) is None
    lying = [*LIFE[:2], replace(LIFE[2], change=UsageChanged(delta={"a": 1}, workloads=workloads))]
    verdict = verdicts.check(GPU, head(NOW, 3), lying)
    said = "event 3 contradicts itself: its delta (a:1) is not what its workloads add up to (a:3)"
    assert said in verdict.problems and not verdict.repairable
