"""Volume bindings: the grammar, list rules, printed forms, merging."""

from __future__ import annotations

import re

import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.projections.storage.grammar.bindings import (
    MAX_BINDINGS,
    Binding,
    InvalidVolume,
    check_added,
    check_list,
    merge,
    parse_binding,
    parse_bindings,
    sort_bindings,
)
from tests.unit.strategies import FAST

G = 2**30
M = 2**20


def test_auto_binding() -> None:
    binding = parse_binding("AUTO:/dir:rw:1G")
    assert binding == Binding("AUTO", "/dir", "rw", G)
    assert binding.scheduled and binding.normal
    assert not binding.monopoly and not binding.unlimited


def test_two_parts_are_a_mount_read_write() -> None:
    binding = parse_binding("/src:/dst")
    assert binding == Binding("/src", "/dst", "rw", 0)
    assert not binding.scheduled and not binding.needs_scheduling


def test_empty_flags_are_rw_and_negative_sizes_parse() -> None:
    assert parse_binding("AUTO:/dir::-1G") == Binding("AUTO", "/dir", "rw", -G)


def test_mount_with_quota() -> None:
    binding = parse_binding("/mnt:/dir:rw:0:100:200:1M:2M")
    assert binding.numbers == (0, 100, 200, M, 2 * M)
    assert not binding.scheduled and binding.has_io and binding.needs_scheduling


def test_every_number_is_a_human_size() -> None:
    assert parse_binding("AUTO:/d:rw:1.5G:1K:2k:1M:0").numbers == (G + G // 2, 1024, 2048, M, 0)


def test_empty_numeric_parts_are_zero() -> None:
    assert parse_binding("AUTO:/d:rw::::").numbers == (0, 0, 0, 0, 0)


def test_flags_are_sorted_and_kept_unvalidated() -> None:
    assert parse_binding("AUTO:/d:wrm:1G").flags == "mrw"
    assert parse_binding("AUTO:/d:ro:1G").flags == "or"
    assert parse_binding("AUTO:/d:rrw:1G").flags == "rrw"  # duplicates are kept
    assert parse_binding("AUTO:/d:xyz").flags == "xyz"


@pytest.mark.parametrize("text", ["one", "a:b:c:d:e:f:g:h:i", "AUTO:/dir:rw:xx", "AUTO::rw:1G"])
def test_invalid_bindings(text: str) -> None:
    with pytest.raises(InvalidVolume) as caught:
        parse_binding(text)
    assert caught.value.reason.endswith(": invalid volume")


def test_empty_destination_names_the_rule() -> None:
    with pytest.raises(InvalidVolume, match="dest must be provided"):
        parse_binding("AUTO::rw:1G")


@pytest.mark.parametrize(
    ("source", "scheduled"),
    [("AUTO", True), ("", True), ("/x/AUTO", True), ("auto", False), ("AUTO/x", False)],
)
def test_scheduled_sources(source: str, scheduled: bool) -> None:
    assert parse_binding(f"{source}:/d:rw:1G").scheduled is scheduled


def test_kinds() -> None:
    assert parse_binding("AUTO:/d:rwm:1G").monopoly
    assert parse_binding("AUTO:/d:rw").unlimited
    assert parse_binding(":/d:rw").unlimited
    assert parse_binding("AUTO:/d:rw:0:1").normal  # sizeless with quota stays normal
    assert not parse_binding("/src:/d:rwm:1G").monopoly  # a mount is never monopoly


@pytest.mark.parametrize(
    ("text", "canonical", "engine"),
    [
        ("AUTO:/dir:mrw:1G", "AUTO:/dir:mrw:1073741824:0:0:0:0", "AUTO:/dir:rw:1073741824"),
        ("/src:/dst", "/src:/dst:rw:0:0:0:0:0", "/src:/dst:rw:0"),
        (
            "AUTO:/dir:orw:1G:100:100:1M:1M",
            "AUTO:/dir:rowo:1073741824:100:100:1048576:1048576",
            "AUTO:/dir:rowo:1073741824:100:100:1048576:1048576",
        ),
        ("AUTO:/d:ro", "AUTO:/d:ro:0:0:0:0:0", "AUTO:/d:ro:0"),
        ("AUTO:/d:wo", "AUTO:/d:wo:0:0:0:0:0", "AUTO:/d:wo:0"),
        ("AUTO:/d:rwm:1G:1", f"AUTO:/d:mrw:{G}:1:0:0:0", f"AUTO:/d:rw:{G}:1:0:0:0"),
    ],
)
def test_printed_forms(text: str, canonical: str, engine: str) -> None:
    binding = parse_binding(text)
    assert binding.canonical() == canonical
    assert binding.engine() == engine


@pytest.mark.parametrize("text", ["AUTO:/d:or", "AUTO:/d:orw", "AUTO:/d:rowo", "AUTO:/d:ow"])
def test_overlay_flags_reparse_to_the_same_binding(text: str) -> None:
    binding = parse_binding(text)
    assert parse_binding(binding.canonical()) == binding


def test_placed_binding_is_the_engine_form_on_its_volume() -> None:
    """resource-extend's ApplyPlan example: a monopoly binding planned to /data0 with 4 G."""
    binding = parse_binding("AUTO:/dir:rwm:1G").placed("/data0", 4 * G)
    assert binding.engine() == f"/data0:/dir:rw:{4 * G}"


# list validation


def test_monopoly_cannot_be_unlimited() -> None:
    with pytest.raises(InvalidVolume) as caught:
        check_list([parse_binding("AUTO:/d:rwm")])
    assert caught.value.reason.startswith("monopoly volume can't be unlimited")


@pytest.mark.parametrize("text", ["AUTO:/d:rwm:0:100", "AUTO:/d:rwm:-1G"])
def test_sizeless_monopoly_is_refused(text: str) -> None:
    """Decision 3 (resource-extend's ValidateRejectsSizelessMonopoly): no 0/0 split."""
    with pytest.raises(InvalidVolume, match="monopoly volume must have a size"):
        check_list([parse_binding(text)])


@pytest.mark.parametrize("field", range(4))
def test_negative_quota_is_refused(field: int) -> None:
    numbers = ["0"] * 4
    numbers[field] = "-1"
    with pytest.raises(InvalidRequest, match="invalid io parameters"):
        check_list([parse_binding(f"AUTO:/d:rw:1G:{':'.join(numbers)}")])


def test_negative_normal_sizes_pass_the_list_rules() -> None:
    check_list(parse_bindings(["AUTO:/d:rw:-1G", "/src:/e:rw:-1G"]))


def test_too_many_bindings() -> None:
    with pytest.raises(InvalidVolume, match="more than"):
        check_list([parse_binding("AUTO:/d:rw:1G")] * (MAX_BINDINGS + 1))


# merging


def test_merge_adds_size_and_quota() -> None:
    merged = merge(
        parse_bindings(["AUTO:/dir1:rw:2G:100:100:0:0"]),
        parse_bindings(["AUTO:/dir1:rw:1G:50:50:0:0"]),
    )
    assert merged == [Binding("AUTO", "/dir1", "rw", 3 * G, 150, 150)]


def test_merge_to_zero_keeps_the_binding() -> None:
    merged = merge(parse_bindings(["AUTO:/dir1:rw:2G"]), parse_bindings(["AUTO:/dir1:rw:-2G"]))
    assert merged == [Binding("AUTO", "/dir1", "rw", 0)]
    assert merged[0].unlimited


def test_merge_below_zero_drops_the_binding() -> None:
    assert merge(parse_bindings(["AUTO:/dir1:rw:2G"]), parse_bindings(["AUTO:/dir1:rw:-3G"])) == []


def test_merge_of_different_keys_keeps_both_sorted() -> None:
    merged = merge(parse_bindings(["AUTO:/dir2:rw:1G"]), parse_bindings(["AUTO:/dir1:rw:2G"]))
    assert [binding.destination for binding in merged] == ["/dir1", "/dir2"]


def test_merge_groups_by_sorted_flags() -> None:
    merged = merge(parse_bindings(["AUTO:/d:wr:1G"]), parse_bindings(["AUTO:/d:rw:1G"]))
    assert merged == [Binding("AUTO", "/d", "rw", 2 * G)]


def test_sort_is_by_canonical_string() -> None:
    bindings = parse_bindings(["AUTO:/b:rw:1", "AUTO:/a:rw:9", "AUTO:/a:rw:10"])
    assert [b.canonical() for b in sort_bindings(bindings)] == [
        "AUTO:/a:rw:10:0:0:0:0",
        "AUTO:/a:rw:9:0:0:0:0",
        "AUTO:/b:rw:1:0:0:0:0",
    ]


# properties

paths = st.text(st.sampled_from("/abAUTO._-"), min_size=0, max_size=8)
numbers = st.integers(min_value=-(2**62), max_value=2**62)
flags = st.one_of(
    st.text(st.sampled_from("rwmo"), max_size=5),
    st.text(max_size=5).map(lambda text: text.replace(":", "")),
)
"""Every flag set the grammar can be handed (it does not validate the characters): those of
upstream's printed forms, and any others."""


@st.composite
def binding_texts(draw: st.DrawFn) -> str:
    return ":".join(
        [
            draw(paths),
            draw(paths.filter(bool)),
            draw(flags),
            *map(str, draw(st.lists(numbers, min_size=5, max_size=5))),
        ]
    )


def _accepted(text: str) -> Binding | None:
    try:
        return parse_binding(text)
    except InvalidVolume:
        return None


bindings = binding_texts().map(_accepted).filter(lambda binding: binding is not None)


@FAST
@given(binding_texts())
def test_every_accepted_binding_round_trips(text: str) -> None:
    """parse → canonical → parse is the identity for every binding the grammar accepts, with
    every flag set; the only one refused here is an ``o`` without ``r`` or ``w``, which would
    print as another binding."""
    given_flags = text.split(":")[2]
    binding = _accepted(text)
    if binding is None:
        event("refused")
        assert "o" in given_flags and not {"r", "w"} & set(given_flags)
        return
    event("o" if "o" in binding.flags else "no o")
    assert parse_binding(binding.canonical()) == binding
    assert binding.canonical().startswith(binding.named() + ":")


@pytest.mark.parametrize("text", ["AUTO:/d:o", "AUTO:/d:mo", "AUTO:/d:oo", "AUTO:/d:om:1G"])
def test_an_overlay_without_read_or_write_is_refused(text: str) -> None:
    with pytest.raises(InvalidVolume, match="needs r or w"):
        parse_binding(text)


@FAST
@given(bindings)
def test_engine_form_reparses_to_the_binding_without_m(binding: Binding) -> None:
    reparsed = parse_binding(binding.engine())
    assert reparsed.key[:2] == binding.key[:2]
    assert "m" not in reparsed.flags
    assert reparsed.size == binding.size
    assert reparsed.quota == (binding.quota if binding.has_io else (0, 0, 0, 0))


@FAST
@given(st.lists(bindings, max_size=6), st.lists(bindings, max_size=6))
def test_merge_is_order_free(a: list[Binding], b: list[Binding]) -> None:
    assert merge(a, b) == merge(b, a)
    assert all(binding.size >= 0 for binding in merge(a, b))


# what a request may add (beyond the grammar)


@pytest.mark.parametrize(
    "text",
    ["AUTO:/data:rw:1G", ":/d", "/x/AUTO:/d", "/srv/logs:/logs:ro", "/:/host", "named:/v",
     "AUTO:/with space/ü:rw"],
)  # fmt: skip
def test_clean_bindings_pass(text: str) -> None:
    check_added([parse_binding(text)])


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("AUTO:/d\x00:rw", "destination '/d\\x00' has a control or invisible character"),
        ("AUTO:/d\u2066x:rw", "control or invisible"),
        ("/s\tx:/d", "source '/s\\tx' has a control"),
        ("AUTO:/d:r\x7fw", "flags"),
        ("AUTO:d:rw", "must be an absolute path"),
        ("AUTO:/:rw", "can't be '/'"),
        ("AUTO:/a/../b:rw", "'..' component"),
        ("AUTO:/a/./b:rw", "'.' component"),
        ("AUTO:/a//b:rw", "'//'"),
        ("AUTO:/a/:rw", "trailing '/'"),
        ("/a/../b:/d", "source '/a/../b' has a '..' component"),
        ("a/b:/d", "absolute path or a volume name"),
        ("..:/d", "absolute path or a volume name"),
    ],
)
def test_unclean_bindings_are_refused(text: str, reason: str) -> None:
    with pytest.raises(InvalidVolume, match=re.escape(reason)):
        check_added([parse_binding(text)])


def test_a_destination_is_bound_once() -> None:
    twice = parse_bindings(["AUTO:/d:rw:1G", "AUTO:/d:mrw:1G"])
    with pytest.raises(InvalidVolume, match="destination /d is bound twice in one request"):
        check_added(twice)
    held = parse_bindings(["AUTO:/d:rw:1G"])
    check_added(held, held)  # the same binding again: a change to it
    with pytest.raises(InvalidVolume, match="already bound by AUTO:/d:rw:1073741824"):
        check_added(parse_bindings(["/src:/d"]), held)


def test_held_bindings_are_not_checked_again() -> None:
    held = parse_bindings(["AUTO:/d/:rw:1G"])
    check_added(held, held)
    with pytest.raises(InvalidVolume, match="trailing"):
        check_added(held)
