"""Turns (``ledger.store.turns``): the writers of one node on one host write one at a time,
and a turn is never needed for a write to go on."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from resource_extend.ledger.host import rundir
from resource_extend.ledger.store import turns
from resource_extend.ledger.store.turns import turn

PROGRAM = "resource-gpu"

HOLDER = """
import sys, time
from resource_extend.ledger.store.turns import turn
with turn("resource-gpu", "/p", "n1", 5) as held:
    print("held" if held else "not held", flush=True)
    time.sleep(float(sys.argv[1]))
"""


def holding(seconds: float) -> subprocess.Popen[str]:
    """Another process of this host, holding n1's turn for ``seconds``."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(seconds)], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None and holder.stdout.readline() == "held\n"
    return holder


def test_a_turn_another_process_holds_is_waited_for() -> None:
    holder = holding(0.5)
    try:
        started = time.monotonic()
        with turn(PROGRAM, "/p", "n1", 30) as held:
            waited = time.monotonic() - started
        assert held and waited > 0.2  # it had the turn once the holder let it go
    finally:
        holder.wait()


def test_a_turn_not_had_in_time_lets_the_write_go_on_without_it() -> None:
    holder = holding(30)
    try:
        with turn(PROGRAM, "/p", "n1", 0.2) as held:
            assert not held
    finally:
        holder.kill()
        holder.wait()
    with turn(PROGRAM, "/p", "n1", 5) as held:  # the kernel let a dead holder's turn go
        assert held


def test_a_process_never_waits_on_its_own_turn() -> None:
    with turn(PROGRAM, "/p", "n1", 5) as outer:
        started = time.monotonic()
        with turn(PROGRAM, "/p", "n1", 5) as inner:
            assert outer and not inner
        assert time.monotonic() - started < 5
    with turn(PROGRAM, "/p", "n1", 0) as again:  # and let it go
        assert again


def test_no_runtime_directory_to_be_had_means_no_turns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o777)
    shared.chmod(0o777)  # others could swap what is in it: not to be trusted
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(shared))
    monkeypatch.setattr(rundir, "FALLBACK_BASE", str(shared))
    with turn(PROGRAM, "/p", "n1", 5) as held:
        assert not held


def test_nodes_share_a_slot_only_by_their_hash() -> None:
    slots = {turns.slot("/p", f"node-{n}") for n in range(1000)}
    assert slots == set(range(turns.SLOTS))
    assert turns.slot("/p", "n1") == turns.slot("/p", "n1")
