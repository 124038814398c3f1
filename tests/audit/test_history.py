"""``history NODE``: --since/--until (a seq or an RFC 3339 time, inclusive, naive = UTC),
--kind (repeatable), --limit (newest N of those selected, oldest first), --json; the table's
CAPACITY AFTER / USAGE AFTER are folded from the start of the stream even when filtered."""

from __future__ import annotations

from typing import Any

import pytest

from tests.audit.helpers import (
    EVENT_KEYS,
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
    parse_time,
    plant,
    run,
    run_many,
    seqs,
    table_rows,
    usage_error,
    used,
)
from tests.etcdkv import Etcd
from tests.plugin import Plugin, Result

pytestmark = pytest.mark.grpc

STREAM: list[Doc] = [
    event(1, added({G: 4}), verb="add-node"),
    event(2, used({G: 1})),
    event(3, grown({A: 2}), verb="set-node-resource-capacity"),
    event(4, used({A: 1})),
    event(5, {"kind": "usage_set", "usage": {G: 2, A: 1}}),
    event(6, grown({G: 4}), verb="set-node-resource-capacity"),
]
"""Event n at 10:0(n-1) UTC on 2026-11-01."""

AFTER: dict[int, tuple[dict[str, int], dict[str, int]]] = {
    1: ({G: 4}, {}),
    2: ({G: 4}, {G: 1}),
    3: ({G: 4, A: 2}, {G: 1}),
    4: ({G: 4, A: 2}, {G: 1, A: 1}),
    5: ({G: 4, A: 2}, {G: 2, A: 1}),
    6: ({G: 8, A: 2}, {G: 2, A: 1}),
}
"""(capacity, usage) after each event."""


@pytest.fixture
def n1(plugin: Plugin, etcd: Etcd) -> Plugin:
    capacity, usage = AFTER[6]
    plant(etcd, "n1", STREAM, head(capacity, usage, 6))
    return plugin


def outcome(result: Result) -> Any:
    """The seqs a ``--json`` history selected, or the error it gave."""
    if result.status != 0:
        return f"exit {result.status}: {result.stderr.strip()}"
    return seqs(ok_json(result))


def test_json_is_the_list_of_events_with_their_envelope(n1: Plugin) -> None:
    events = ok_json(run(n1, "history", "n1", "--json"))
    assert isinstance(events, list)
    assert seqs(events) == [1, 2, 3, 4, 5, 6]
    for got, planted in zip(events, STREAM, strict=True):
        assert set(got) == EVENT_KEYS, got
        assert got["kind"] == planted["change"]["kind"] == got["change"]["kind"]
        for key in ("seq", "verb", "op", "by", "v", "change"):
            assert got[key] == planted[key], key
        assert parse_time(got["at"]) == parse_time(planted["at"])


def bounded(since: str | None, until: str | None) -> list[str]:
    argv = ["history", "n1", "--json"]
    argv += ["--since", since] if since is not None else []
    argv += ["--until", until] if until is not None else []
    return argv


def test_since_and_until_take_seqs_and_times_inclusively(n1: Plugin) -> None:
    """Every spelling of "event 2 (10:01) to event 4 (10:03)" selects 2, 3 and 4."""
    day = "2026-11-01T"
    cases: dict[str, tuple[str | None, str | None, list[int]]] = {
        "seqs": ("2", "4", [2, 3, 4]),
        "exact times, Z": (f"{day}10:01:00Z", f"{day}10:03:00Z", [2, 3, 4]),
        "naive means UTC": (f"{day}10:01:00", f"{day}10:03:00", [2, 3, 4]),
        "offsets": (f"{day}12:01:00+02:00", f"{day}05:03:00-05:00", [2, 3, 4]),
        "a microsecond outside": (f"{day}10:00:59.999999Z", f"{day}10:03:00.000001Z", [2, 3, 4]),
        "a microsecond inside": (f"{day}10:01:00.000001Z", f"{day}10:02:59.999999Z", [3]),
        "seq and time": ("2", f"{day}10:03:30Z", [2, 3, 4]),
        "since only": ("5", None, [5, 6]),
        "until only": (None, f"{day}10:00:00Z", [1]),
    }
    commands = [bounded(since, until) for since, until, _ in cases.values()]
    got = dict(zip(cases, map(outcome, run_many(n1, commands)), strict=True))
    assert got == {name: expected for name, (_, _, expected) in cases.items()}


def test_rfc3339_lower_case_t_and_z_are_accepted(n1: Plugin) -> None:
    """RFC 3339 section 5.6: "T" and "Z" may alternatively be lower case."""
    result = run(n1, *bounded("2026-11-01t10:01:00z", "2026-11-01t10:03:00z"))
    assert outcome(result) == [2, 3, 4]


def test_kind_and_limit_select_and_limit_keeps_the_newest(n1: Plugin) -> None:
    cases: dict[str, tuple[list[str], list[int]]] = {
        "one kind": (["--kind", "usage_set"], [5]),
        "kinds": (["--kind", "usage_changed", "--kind", "capacity_changed"], [2, 3, 4, 6]),
        "limit": (["--limit", "2"], [5, 6]),
        "limit after until": (["--until", "4", "--limit", "2"], [3, 4]),
        "limit after kinds": (
            ["--kind", "usage_changed", "--kind", "capacity_changed", "--limit", "3"],
            [3, 4, 6],
        ),
        "everything": (
            ["--since", "2", "--until", "5", "--kind", "usage_changed", "--limit", "1"],
            [4],
        ),
        "nothing after the end": (["--since", "7"], []),
    }
    commands = [["history", "n1", "--json", *argv] for argv, _ in cases.values()]
    got = dict(zip(cases, map(outcome, run_many(n1, commands)), strict=True))
    assert got == {name: expected for name, (_, expected) in cases.items()}


def test_the_table_folds_from_the_start_even_when_filtered(n1: Plugin) -> None:
    filtered, empty = run_many(
        n1,
        [
            ["history", "n1", "--since", "3", "--kind", "capacity_changed"],
            ["history", "n1", "--since", "7"],
        ],
    )
    rows = table_rows(ok_text(filtered))
    assert rows[0] == [
        "SEQ", "AT (UTC)", "VERB", "KIND", "CAPACITY AFTER", "USAGE AFTER", "CHANGE",
    ]  # fmt: skip
    assert [row[0] for row in rows[1:]] == ["3", "6"]
    for row in rows[1:]:
        seq = int(row[0])
        capacity, usage = AFTER[seq]
        assert row[1] == f"2026-11-01T10:0{seq - 1}:00Z", row
        verb = STREAM[seq - 1]["verb"]
        assert row[2:6] == [verb, "capacity_changed", cards_cell(capacity), cards_cell(usage)]
    assert rows[1][6] == f"capacity {A}:+2"
    assert rows[2][6] == f"capacity {G}:+4"
    assert ok_text(empty).strip() == "no events match"


def test_bad_options_and_points_are_one_line_errors(n1: Plugin, etcd: Etcd) -> None:
    plant(etcd, "gone", [event(1, added({G: 1})), event(2, REMOVED)], None)
    # name: (arguments after "history", "usage" (click, exit 2) or "error" (exit 1), fragments)
    cases: dict[str, tuple[list[str], str, list[str]]] = {
        "bad kind": (["n1", "--kind", "bogus"], "usage", ["--kind", "bogus"]),
        "limit 0": (["n1", "--limit", "0"], "usage", ["--limit", "0"]),
        "limit not a number": (["n1", "--limit", "two"], "usage", ["--limit", "two"]),
        "words": (["n1", "--since", "yesterday"], "usage", ["--since", "yesterday"]),
        "month 13": (["n1", "--until", "2026-13-01T00:00:00Z"], "usage", ["--until", "2026-13"]),
        "negative seq": (["n1", "--since", "-3"], "usage", ["--since", "-3"]),
        "unknown node": (["ghost"], "error", ["ghost", "never known"]),
        "node with a slash": (["a/b", "--json"], "error", ["a/b"]),
    }
    commands = [["history", *argv] for argv, _, _ in cases.values()]
    removed = ["history", "gone", "--json"]  # a removed node keeps its history
    *results, gone = run_many(n1, [*commands, removed])
    problems: dict[str, str] = {}
    for (name, (_, kind, fragments)), result in zip(cases.items(), results, strict=True):
        try:
            line = usage_error(result) if kind == "usage" else error_line(result, "history")
            for fragment in fragments:
                assert fragment in line, line
        except AssertionError as exc:
            problems[name] = str(exc).splitlines()[0][:160]
    assert problems == {}
    assert seqs(ok_json(gone)) == [1, 2]


@pytest.mark.parametrize(
    ("option", "text"),
    [("--until", "\u00b2"), ("--since", "")],
    ids=["superscript-two-is-not-a-seq", "empty-is-not-no-bound"],
)
def test_malformed_points_are_clean_errors(n1: Plugin, option: str, text: str) -> None:
    """Bad point text is refused like any other usage error: exit 2, one line naming the
    option (not an internal error, and not silently ignored)."""
    line = usage_error(run(n1, "history", "n1", option, text))
    assert option in line
