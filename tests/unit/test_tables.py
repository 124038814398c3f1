"""Text tables (``commands.tables``): columns as before for a pipe; on a terminal narrower than
the table, the prose columns wrapped at their words to fit, every word kept, none broken."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from resource_extend.commands.tables import NARROWEST, columns
from tests.unit.strategies import FAST

ROWS = [
    ("SEQ", "VERB", "STATE AFTER", "CHANGE"),
    ("1", "add-node", "/data0 0/1T, /data1 0/1T", "capacity = /data0 1T, /data1 1T, storage 2T"),
    ("2", "set-node-resource-usage", "/data0 100G/1T, /data1 0/1T", "usage /data0 +100G"),
]


def test_without_a_width_a_row_is_one_line() -> None:
    shown = columns(ROWS).splitlines()
    assert len(shown) == 3
    assert shown[1].startswith("1    add-node                 /data0 0/1T, /data1 0/1T")


def test_a_table_too_wide_wraps_its_prose_columns_to_fit() -> None:
    shown = columns(ROWS, width=80, wrap=(2, 3)).splitlines()
    assert max(map(len, shown)) <= 80 and len(shown) > 3
    assert shown[0].startswith("SEQ  VERB                     STATE AFTER")
    assert shown[1].startswith("1    add-node                 /data0 0/1T,")  # the rest below
    assert all(line.startswith(" " * 30) for line in shown[2:3])  # under its own column
    assert columns(ROWS, width=200, wrap=(2, 3)) == columns(ROWS)  # it fits: as it was


words = st.text(alphabet="abcdefgh/0123456789", min_size=1, max_size=10)
cells = st.lists(words, min_size=1, max_size=8).map(" ".join)


@given(st.lists(st.tuples(words, cells, cells), min_size=1, max_size=6), st.integers(40, 200))
@FAST
def test_wrapping_keeps_every_word_and_fits_where_it_can(
    rows: list[tuple[str, str, str]], width: int
) -> None:
    shown = columns(rows, width=width, wrap=(1, 2))
    assert Counter(shown.split()) == Counter(" ".join(" ".join(row) for row in rows).split())
    fixed = max(len(row[0]) for row in rows)
    floors = sum(
        max(
            min(max(len(row[i]) for row in rows), NARROWEST),
            *(len(w) for r in rows for w in r[i].split()),
        )
        for i in (1, 2)
    )
    if fixed + 4 + floors <= width:
        assert max(map(len, shown.splitlines())) <= width
