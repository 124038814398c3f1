"""A host whose clock is far ahead (``audit.AHEAD_BOUND``) writes an event: every event after it
carries its time, with the writer's own clock kept beside it. Compaction judges those events by
their writers' clocks and goes on (the stream stays bounded), takes an event stamped ahead only
with an older one after it, and never an event that is young by a clock it can believe;
``verify`` notes the event and its writer, and is not failed by it."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from resource_extend.ledger.host.config import Destination
from resource_extend.ledger.store import Store
from resource_extend.ledger.upkeep.compaction import compact
from tests.audit.helpers import Doc, G, added, event, head, ok_text, plant, run, stamp, used
from tests.etcdkv import Etcd
from tests.plugin import Plugin

NOW = datetime.now(timezone.utc)
AHEAD = NOW + timedelta(days=3)


def by_a_clock_ahead(seq: int) -> Doc:
    """An event written by a host whose clock is three days ahead."""
    late = event(seq, used({G: 1}), at=AHEAD)
    late["by"] = "core@fast-host"
    return late


def raised(seq: int, clock: datetime) -> Doc:
    """An event written after one stamped ahead, by a host whose clock read ``clock``: its
    time raised to the one before it, its own clock kept (``ledger.model.digests.stamped``)."""
    return {**event(seq, used({G: 1}), at=AHEAD), "clock": stamp(clock)}


def planted(etcd: Etcd, later: list[Doc]) -> None:
    """Events 1..3 a month old, event 4 by the host ahead, then ``later``."""
    events = [event(1, added({G: 16})), event(2, used({G: 1})), event(3, used({G: 1}))]
    events += [by_a_clock_ahead(4), *later]
    plant(etcd, "n1", events, head({G: 16}, {G: len(events) - 1}, len(events)))


OLD = [raised(seq, NOW - timedelta(minutes=10, seconds=-seq)) for seq in range(5, 11)]
"""Events 5..10 written 10 minutes ago by right clocks, after event 4."""


def young(seqs: range) -> list[Doc]:
    """Events written after the one stamped ahead by right clocks that read now (the test's
    now: a module's would age past ``min_age`` in a long run)."""
    return [raised(seq, datetime.now(timezone.utc)) for seq in seqs]


@pytest.mark.parametrize(
    ("later", "cut"),
    [
        pytest.param(lambda: OLD, 8, id="old-events-after-it-vouch-for-it"),
        pytest.param(lambda: OLD[:2] + young(range(7, 11)), 6, id="young-by-their-clocks"),
        pytest.param(
            lambda: [by_a_clock_ahead(seq) for seq in range(5, 11)], 3, id="nothing-vouches"
        ),
    ],
)
def test_compaction_goes_past_an_event_stamped_ahead(
    store: Store[Any], etcd: Etcd, tmp_path: Path, later: Callable[[], list[Doc]], cut: int
) -> None:
    """``keep=2`` of 10 events with ``min_age`` 300 s: the cut is at 8 when events 5..10 are a
    minutes old by their writers' clocks (before: 3, stopped by event 4's time for three days);
    at 6 when 7..10 are young by theirs; at 3 when only the host ahead wrote after event 3."""
    planted(etcd, later())
    done = compact(store, "n1", keep=2, to=Destination(str(tmp_path)), min_age=300)
    assert done is not None and done.checkpoint.seq == cut, done
    assert store.streams.read_stream("n1").events[0].seq == cut


def test_verify_notes_the_event_and_its_writer_and_still_agrees(plugin: Plugin, etcd: Etcd) -> None:
    planted(etcd, OLD)
    result = run(plugin, "verify", "n1")
    assert result.status == 0, result.stderr
    lines = ok_text(result).splitlines()
    assert lines[0].startswith(
        "node n1: note: event 4 is stamped 3 days ahead of the clock of the writer after it "
        "(auditor@test-host): the clock of core@fast-host was ahead"
    ), lines
    assert lines[-1].endswith("; 1 event stamped by a clock ahead (noted)"), lines


def test_verify_notes_a_newest_event_ahead_of_this_clock(plugin: Plugin, etcd: Etcd) -> None:
    planted(etcd, [])
    lines = ok_text(run(plugin, "verify", "n1")).splitlines()
    assert lines[0] == (
        "node n1: note: event 4 is stamped 3 days ahead of this host's clock (written by "
        "core@fast-host): that clock, or this one, is wrong"
    ), lines
