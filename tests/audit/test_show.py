"""``show NODE [--at SEQ|TIME] [--json]``: capacity and usage now or at a point, folded from the
node's events; points where the node did not exist, past the end or before the first event,
and unknown nodes, are one-line errors."""

from __future__ import annotations

from typing import Any

import pytest

from tests.audit.helpers import (
    REMOVED,
    A,
    Doc,
    G,
    added,
    cards_cell,
    error_line,
    event,
    grown,
    head,
    ok_json,
    ok_text,
    plant,
    run,
    run_many,
    table_rows,
    usage_error,
    used,
)
from tests.etcdkv import Etcd
from tests.plugin import Plugin

STREAM: list[Doc] = [
    event(1, added({G: 4}), verb="add-node"),  # 10:00
    event(2, used({G: 2})),  # 10:01
    event(3, grown({A: 1}), verb="set-node-resource-capacity"),  # 10:02
    event(4, REMOVED, verb="remove-node"),  # 10:03
    event(5, added({G: 2}), verb="add-node"),  # 10:04
    event(6, used({G: 1}, [{G: 1}])),  # 10:05
]


def answer(capacity: dict[str, int], usage: dict[str, int], seq: int) -> dict[str, Any]:
    return {
        "capacity": {"prod_count_map": capacity},
        "usage": {"prod_count_map": usage},
        "seq": seq,
    }


@pytest.fixture
def n1(plugin: Plugin, etcd: Etcd) -> Plugin:
    plant(etcd, "n1", STREAM, head({G: 2}, {G: 1}, 6))
    return plugin


def test_json_now_at_a_seq_and_at_a_time(n1: Plugin) -> None:
    cases: dict[str, tuple[list[str], dict[str, Any]]] = {
        "now": ([], answer({G: 2}, {G: 1}, 6)),
        "at a seq": (["--at", "3"], answer({G: 4, A: 1}, {G: 2}, 3)),
        "at the first seq": (["--at", "1"], answer({G: 4}, {}, 1)),
        "between events": (["--at", "2026-11-01T10:02:59Z"], answer({G: 4, A: 1}, {G: 2}, 3)),
        "at an event's time": (["--at", "2026-11-01T10:01:00"], answer({G: 4}, {G: 2}, 2)),
        "with an offset": (["--at", "2026-11-01T11:04:30+01:00"], answer({G: 2}, {}, 5)),
        "after the last event": (["--at", "2030-01-01T00:00:00Z"], answer({G: 2}, {G: 1}, 6)),
    }
    results = run_many(n1, [["show", "n1", "--json", *argv] for argv, _ in cases.values()])
    got = {name: ok_json(result, name) for name, result in zip(cases, results, strict=True)}
    assert got == {name: expected for name, (_, expected) in cases.items()}
    # exactly these keys, in this shape (not only equal after decoding)
    assert list(got["now"]) == ["capacity", "usage", "seq"]


def test_table(n1: Plugin) -> None:
    rows = table_rows(ok_text(run(n1, "show", "n1", "--at", "3")))
    assert rows == [
        ["SEQ", "AT (UTC)", "CAPACITY", "USAGE", "AVAILABLE"],
        ["3", "2026-11-01T10:02:00Z", cards_cell({G: 4, A: 1}), cards_cell({G: 2}),
         cards_cell({G: 2, A: 1})],
    ]  # fmt: skip


def test_points_without_a_state_are_one_line_errors(n1: Plugin) -> None:
    cases: dict[str, tuple[list[str], list[str]]] = {
        "removed, at a seq": (["n1", "--at", "4"], ["n1", "did not exist", "4"]),
        "removed, at a time": (["n1", "--at", "2026-11-01T10:03:30Z"], ["did not exist", "4"]),
        "past the end": (["n1", "--at", "7"], ["7", "past the end", "6"]),
        "before the first seq": (["n1", "--at", "0"], ["0", "before"]),
        "before the first time": (
            ["n1", "--at", "2026-11-01T09:59:59Z"],
            ["no events yet", "the first is at"],
        ),
        "unknown node": (["ghost"], ["ghost"]),
    }
    results = run_many(n1, [["show", *argv, "--json"] for argv, _ in cases.values()])
    problems: dict[str, str] = {}
    for (name, (_, fragments)), result in zip(cases.items(), results, strict=True):
        try:
            line = error_line(result, "show")
            for fragment in fragments:
                assert fragment in line, line
        except AssertionError as exc:
            problems[name] = str(exc).splitlines()[0][:200]
    assert problems == {}


def test_an_empty_point_is_an_error_not_now(n1: Plugin) -> None:
    """``--at ""`` is neither a seq nor a time; it must not quietly mean "now"."""
    line = usage_error(run(n1, "show", "n1", "--at", "", "--json"))
    assert "--at" in line


@pytest.mark.parametrize(
    ("at", "fragment"),
    [("noon", "'noon'"), ("2026-11-31T00:00:00Z", "2026-11-31"), ("-1", "'-1'")],
)
def test_a_point_that_is_neither_a_seq_nor_a_time_is_a_usage_error(
    n1: Plugin, at: str, fragment: str
) -> None:
    line = usage_error(run(n1, "show", "n1", "--at", at))
    assert "--at" in line and fragment in line and "neither a seq nor" in line
