"""A compaction judges its cut once, as it begins: events written while it runs, and events that
come of age meanwhile, wait for the next one. A long cut is made in steps (``STEP`` events each);
judged afresh at every step, a compaction under a steady write load chased the newest events
and ended only when the writers stopped (seen as a ``compact`` of 60 s under 32 writers)."""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from resource_extend.ledger.host.config import Destination
from resource_extend.ledger.store import Store
from resource_extend.ledger.upkeep import compaction
from tests.audit.helpers import G, added, event, head, plant, used
from tests.etcdkv import Etcd

NODE = "n1"
STEP = 4
"""Events a step reads here, its checkpoint the last of them (and the next step's first)."""
MIN_AGE = 600.0
WAIT = 2.0
"""Seconds after the compaction begins that its young events come of age."""


def old_events(first: int, last: int) -> list[dict[str, Any]]:
    """Events ``first``..``last``, a card taken by each, written a month ago."""
    month_ago = datetime.now(timezone.utc) - timedelta(days=30)
    return [
        event(seq, added({G: 1000}) if seq == 1 else used({G: 1}), at=month_ago)
        for seq in range(first, last + 1)
    ]


def grow(etcd: Etcd, events: list[dict[str, Any]]) -> None:
    """Append ``events`` after the node's head, as writers would, and move the head."""
    last = events[-1]["seq"]
    plant(etcd, NODE, events, head({G: 1000}, {G: last - 1}, last))


def after_each_step(monkeypatch: pytest.MonkeyPatch, then: Any) -> list[int]:
    """The seq of each step's checkpoint; ``then(steps_so_far)`` runs after each step."""
    steps: list[int] = []
    replace = compaction._replace

    def stepped(*args: Any, **kwargs: Any) -> compaction.Compacted:
        done = replace(*args, **kwargs)
        steps.append(done.checkpoint.seq)
        then(len(steps))
        return done

    monkeypatch.setattr(compaction, "_replace", stepped)
    monkeypatch.setattr(compaction, "STEP", STEP)
    return steps


def test_events_written_while_it_runs_wait_for_the_next_compaction(
    store: Store[Any], etcd: Etcd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 events, keep 2: the cut is at 18 however many writers append old-enough events
    between its steps (here two after each, for the first ten steps)."""
    grow(etcd, old_events(1, 20))

    def write_two(steps: int) -> None:
        if steps <= 10:
            last = 20 + 2 * steps
            grow(etcd, old_events(last - 1, last))

    steps = after_each_step(monkeypatch, write_two)
    done = compaction.compact(store, NODE, keep=2, to=Destination(str(tmp_path)), min_age=0)
    assert done is not None
    assert steps == [4, 7, 10, 13, 16, 18], "the cut moved with the writers"
    assert (done.first, done.checkpoint.seq, done.steps) == (1, 18, 6)
    assert store.streams.read_stream(NODE).events[0].seq == 18


def test_events_that_come_of_age_while_it_runs_wait_for_the_next_compaction(
    store: Store[Any], etcd: Etcd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Events 1..12 old, 13..20 young for another ``WAIT`` seconds, keep 0: the cut is at 12,
    though the first step outlasts the young events' youth."""
    almost = datetime.now(timezone.utc) - timedelta(seconds=MIN_AGE - WAIT)
    grow(etcd, old_events(1, 12) + [event(seq, used({G: 1}), at=almost) for seq in range(13, 21)])

    def outlast_their_youth(steps: int) -> None:
        if steps == 1:
            time.sleep(WAIT + 0.5)

    steps = after_each_step(monkeypatch, outlast_their_youth)
    done = compaction.compact(store, NODE, keep=0, to=Destination(str(tmp_path)), min_age=MIN_AGE)
    assert done is not None
    assert steps == [4, 7, 10, 12], "the cut moved as events came of age"
    assert store.streams.read_stream(NODE).events[0].seq == 12
