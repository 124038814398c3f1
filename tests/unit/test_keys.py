"""The etcd key layout (ledger/store/keys.py) and node-name rules (ledger/model/names.py)."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from resource_extend.ledger.model.errors import InvalidRequest, PluginError
from resource_extend.ledger.model.names import MAX_NODE_NAME, check_node_name
from resource_extend.ledger.store.keys import SEQ_WIDTH, KeyLayout, range_end
from tests.unit.strategies import FAST

SEQS = st.integers(min_value=0, max_value=10**SEQ_WIDTH - 1)


# --- layout ----------------------------------------------------------------------------------


def test_default_prefix_is_eru() -> None:
    layout = KeyLayout("/eru", "gpu")
    assert layout.prefix == "/eru"
    assert layout.root == b"/eru/resource/gpu/"


def test_head_key_matches_upstream_location() -> None:
    assert KeyLayout("/eru-gpu", "gpu").head("n1") == b"/eru-gpu/resource/gpu/n1"


def test_trailing_slash_in_prefix_is_ignored() -> None:
    assert KeyLayout("/eru/", "gpu").head("n1") == KeyLayout("/eru", "gpu").head("n1")
    assert KeyLayout("/eru//", "gpu").root == b"/eru/resource/gpu/"


def test_event_keys() -> None:
    layout = KeyLayout("/eru", "gpu")
    assert layout.events("n1") == b"/eru/resource-events/gpu/n1/"
    assert layout.event("n1", 1) == b"/eru/resource-events/gpu/n1/000000000001"
    assert layout.event("n1", 0) == b"/eru/resource-events/gpu/n1/" + b"0" * SEQ_WIDTH
    assert layout.legacy_events("n1") == b"/eru/resource/gpu/n1/events/"


def test_non_ascii_node_names_are_utf8_encoded() -> None:
    assert KeyLayout("/eru", "gpu").head("nœud") == "/eru/resource/gpu/nœud".encode()


def test_event_keys_start_with_the_events_prefix_and_not_with_another_nodes() -> None:
    layout = KeyLayout("/eru", "gpu")
    key = layout.event("n1", 5)
    assert key.startswith(layout.events("n1"))
    assert not key.startswith(layout.root), "events must stay out of the heads' prefix"
    assert layout.head("n1").startswith(layout.root)
    assert not key.startswith(layout.events("n"))
    assert not layout.event("n10", 5).startswith(layout.events("n1"))


@FAST
@given(seq=SEQS)
def test_seq_of_inverts_event(seq: int) -> None:
    layout = KeyLayout("/eru", "gpu")
    assert layout.seq_of("n1", layout.event("n1", seq)) == seq


@FAST
@given(a=SEQS, b=SEQS)
def test_lexical_order_of_event_keys_is_numeric_order(a: int, b: int) -> None:
    layout = KeyLayout("/eru", "gpu")
    ka, kb = layout.event("n", a), layout.event("n", b)
    assert (ka < kb) == (a < b)
    assert len(ka) == len(kb)


def test_lexical_order_for_values_that_differ_in_digit_count() -> None:
    layout = KeyLayout("/eru", "gpu")
    keys = [layout.event("n", s) for s in (9, 10, 99, 100, 1000, 123456789)]
    assert keys == sorted(keys)


# --- range_end -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "end"),
    [
        (b"abc", b"abd"),
        (b"/eru/resource/gpu/", b"/eru/resource/gpu0"),
        (b"a\xff", b"b"),
        (b"a\xfe", b"a\xff"),
        (b"ab\xff\xff", b"ac"),
        (b"\xff", b"\x00"),
        (b"\xff\xff", b"\x00"),
        (b"", b"\x00"),
    ],
)
def test_range_end(prefix: bytes, end: bytes) -> None:
    assert range_end(prefix) == end


@FAST
@given(prefix=st.binary(min_size=1, max_size=6), other=st.binary(max_size=8))
def test_keys_in_range_start_with_the_prefix(prefix: bytes, other: bytes) -> None:
    assume(prefix.rstrip(b"\xff"))  # a prefix of only 0xff bytes has no finite end
    end = range_end(prefix)
    assert (prefix <= other < end) == other.startswith(prefix)


def test_range_end_of_events_prefix_excludes_the_next_node() -> None:
    layout = KeyLayout("/eru", "gpu")
    events = layout.events("n1")
    end = range_end(events)
    assert events <= layout.event("n1", 10**SEQ_WIDTH - 1) < end
    assert not (events <= layout.head("n2") < end)


# --- node names ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["n1", "node-1.example.com", "nœud", "a" * MAX_NODE_NAME, " padded ", "n_1:2"]
)
def test_valid_node_names_are_returned(name: str) -> None:
    assert check_node_name(name) == name


@pytest.mark.parametrize("name", [None, "", " ", "\t", "\n  ", "\u3000"])
def test_empty_node_names_are_rejected(name: str | None) -> None:
    with pytest.raises(InvalidRequest, match="node name is empty"):
        check_node_name(name)


@pytest.mark.parametrize("name", ["a/b", "/", "n1/", "/n1", "n1/events/000000000001"])
def test_node_names_with_a_slash_are_rejected(name: str) -> None:
    with pytest.raises(InvalidRequest, match="'/'") as info:
        check_node_name(name)
    assert info.value.node == name


def test_too_long_node_names_are_rejected() -> None:
    with pytest.raises(InvalidRequest, match="longer than 253"):
        check_node_name("a" * (MAX_NODE_NAME + 1))


@pytest.mark.parametrize("name", ["n\x00", "n\n1", "n1\t", "\x1bn", "n\x7f", "n\r", "a\u2028b"])
def test_node_names_with_control_characters_are_rejected(name: str) -> None:
    with pytest.raises(InvalidRequest, match="control characters"):
        check_node_name(name)


def test_node_name_errors_are_plugin_errors() -> None:
    with pytest.raises(PluginError):
        check_node_name("")
