"""Events and heads on the wire: ledger/model/events.py."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Union, get_args

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from resource_extend.ledger.model.events import EventCodec
from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.events import (
    KINDS,
    SCHEMA_VERSION,
    Adopted,
    CapacityChanged,
    CapacitySet,
    Change,
    Checkpoint,
    Event,
    GpuRecord,
    HeadRepaired,
    NewerSchema,
    NodeAdded,
    NodeInfoSet,
    NodeRemoved,
    Snapshot,
    UsageChanged,
    UsageRebuilt,
    UsageSet,
    decode_event,
    decode_head,
    encode,
    read_stored_head,
)
from resource_extend.projections.gpu.resources import Resource
from tests.unit.strategies import FAST, held_maps, signed_maps

AT = datetime(2024, 5, 17, 12, 30, 45, 123456, tzinfo=timezone.utc)

CHANGES: list[tuple[str, Change]] = [
    ("node_added", NodeAdded(capacity={"nvidia-3070": 4, "nvidia-3090": 4})),
    ("adopted", Adopted(capacity={"nvidia-3070": 4}, usage={"nvidia-3070": 1})),
    ("capacity_set", CapacitySet(capacity={"nvidia-3090": 2})),
    ("capacity_changed", CapacityChanged(delta={"nvidia-3090": -1, "nvidia-3070": 2})),
    ("usage_changed", UsageChanged(delta={"nvidia-3070": 1})),
    (
        "usage_changed",
        UsageChanged(
            delta={"nvidia-3070": 2, "nvidia-3090": -1},
            workloads=[{"nvidia-3070": 1}, {"nvidia-3070": 1, "nvidia-3090": -1}],
        ),
    ),
    ("usage_set", UsageSet(usage={})),
    ("node_info_set", NodeInfoSet(capacity={"a": 1}, usage={"a": 1})),
    (
        "usage_rebuilt",
        UsageRebuilt(usage={"nvidia-3070": 1}, diffs=["nvidia-3070 not in usage"]),
    ),
    ("node_removed", NodeRemoved()),
    (
        "checkpoint",
        Checkpoint(
            state=Snapshot(capacity={"a": 2}, usage={"a": 1}),
            first=1,
            last_at=AT,
            export="host:/var/lib/exports/n1.000000000001-000000000009.abc.jsonl",
        ),
    ),
    ("checkpoint", Checkpoint(state=None, first=3, last_at=AT, export="host:/x.jsonl")),
    (
        "head_repaired",
        HeadRepaired(found='{"capacity":null}', state=Snapshot(capacity={}, usage={})),
    ),
    ("head_repaired", HeadRepaired(found="no head", state=None)),
]
CHANGE_IDS = [f"{kind}-{i}" for i, (kind, _) in enumerate(CHANGES)]


def event(change: Change, *, seq: int = 7) -> Event:
    return Event(seq=seq, at=AT, verb="set-node-resource-usage", op="op-123", change=change)


def test_every_change_kind_is_covered() -> None:
    covered = {type(change) for _, change in CHANGES}
    assert covered == {getattr(c, "__origin__", c) for c in get_args(Change)}
    assert sorted(KINDS) == sorted({kind for kind, _ in CHANGES})


@pytest.mark.parametrize(("kind", "change"), CHANGES, ids=CHANGE_IDS)
def test_event_round_trips(kind: str, change: Change) -> None:
    original = event(change)
    decoded = decode_event(encode(original))
    assert decoded == original
    assert type(decoded.change) is type(change)
    assert decoded.kind == kind
    assert decoded.at == AT


@pytest.mark.parametrize(("kind", "change"), CHANGES, ids=CHANGE_IDS)
def test_event_json_names_the_kind_inside_change(kind: str, change: Change) -> None:
    data = json.loads(encode(event(change)))
    assert data["change"]["kind"] == kind
    assert "kind" not in data
    assert data["seq"] == 7
    assert data["verb"] == "set-node-resource-usage"
    assert data["op"] == "op-123"
    assert data["v"] == SCHEMA_VERSION


def test_usage_changed_json_shape() -> None:
    change = UsageChanged(delta={"nvidia-3070": 1}, workloads=[{"nvidia-3070": 1}])
    data = json.loads(encode(event(change)))
    assert data["change"] == {
        "kind": "usage_changed",
        "delta": {"nvidia-3070": 1},
        "workloads": [{"nvidia-3070": 1}],
    }


def test_event_defaults_schema_version() -> None:
    assert event(NodeRemoved()).v == SCHEMA_VERSION == 3


# An event exactly as the first release (schema v1: no "by") stored it in etcd.
STORED_V1 = (
    b'{"seq":3,"at":"2026-11-20T08:15:02.417311Z","verb":"set-node-resource-usage",'
    b'"op":"8a3c0f3e2b9d4f41a0c6d2f7e9b1a5c4","change":{"kind":"usage_changed",'
    b'"delta":{"nvidia-3090":2},"workloads":[{"nvidia-3090":1},{"nvidia-3090":1}]},"v":1}'
)


def test_a_stored_v1_event_decodes_as_written() -> None:
    decoded = decode_event(STORED_V1)
    assert decoded.v == 1
    assert decoded.by is None
    assert decoded.seq == 3
    assert decoded.change == UsageChanged(
        delta={"nvidia-3090": 2}, workloads=[{"nvidia-3090": 1}, {"nvidia-3090": 1}]
    )
    assert decoded.at == datetime(2026, 11, 20, 8, 15, 2, 417311, tzinfo=timezone.utc)


def test_events_say_who_appended_them() -> None:
    appended = Event(
        seq=1, at=AT, verb="add-node", op="o", by="core@host-1", change=NodeAdded(capacity={})
    )
    data = json.loads(encode(appended))
    assert data["by"] == "core@host-1"
    assert data["v"] == 3
    assert decode_event(encode(appended)) == appended


@pytest.mark.parametrize(
    "raw",
    [
        b'{"seq":9,"at":"2030-01-01T00:00:00Z","verb":"v","op":"o",'
        b'"change":{"kind":"node_removed"},"v":4}',
        b'{"seq":9,"at":"2030-01-01T00:00:00Z","verb":"v","op":"o",'
        b'"change":{"kind":"kind_from_the_future"},"v":4}',
    ],
    ids=["known-kind", "unknown-kind"],
)
def test_an_event_from_a_newer_release_is_refused_with_a_reason(raw: bytes) -> None:
    with pytest.raises(NewerSchema, match=r"schema v4.*upgrade resource-gpu"):
        decode_event(raw)


def test_event_without_v_decodes_with_current_version() -> None:
    raw = (
        b'{"seq":1,"at":"2024-05-17T12:30:45Z","verb":"add-node","op":"x",'
        b'"change":{"kind":"node_added","capacity":{"a":1}}}'
    )
    decoded = decode_event(raw)
    assert decoded.v == SCHEMA_VERSION
    assert decoded.change == NodeAdded(capacity={"a": 1})
    assert decoded.at == datetime(2024, 5, 17, 12, 30, 45, tzinfo=timezone.utc)


def test_event_time_with_offset_keeps_the_instant() -> None:
    offset = timezone(timedelta(hours=2))
    original = event(NodeRemoved())
    shifted = Event(
        seq=1, at=AT.astimezone(offset), verb="remove-node", op="o", change=NodeRemoved()
    )
    assert decode_event(encode(shifted)).at == original.at


def test_unknown_change_kind_is_rejected() -> None:
    raw = b'{"seq":1,"at":"2024-05-17T12:30:45Z","verb":"v","op":"o","change":{"kind":"boom"}}'
    with pytest.raises(msgspec.ValidationError):
        decode_event(raw)


def test_change_without_kind_is_rejected() -> None:
    raw = b'{"seq":1,"at":"2024-05-17T12:30:45Z","verb":"v","op":"o","change":{"capacity":{}}}'
    with pytest.raises(msgspec.ValidationError):
        decode_event(raw)


def test_event_missing_a_required_field_is_rejected() -> None:
    raw = b'{"seq":1,"verb":"v","op":"o","change":{"kind":"node_removed"}}'
    with pytest.raises(msgspec.ValidationError):
        decode_event(raw)


def test_garbage_is_a_decode_error() -> None:
    with pytest.raises(msgspec.DecodeError):
        decode_event(b"not json")
    with pytest.raises(msgspec.DecodeError):
        decode_head(b"{")


@FAST
@given(
    seq=st.integers(min_value=0, max_value=10**12 - 1),
    delta=signed_maps,
    workloads=st.none() | st.lists(signed_maps, max_size=3),
)
def test_usage_changed_round_trips(seq: int, delta: Cards, workloads: list[Cards] | None) -> None:
    original = event(UsageChanged(delta=delta, workloads=workloads), seq=seq)
    assert decode_event(encode(original)) == original


# --- GpuRecord ------------------------------------------------------------------------------


def test_head_round_trips() -> None:
    head = GpuRecord(
        capacity=Resource.of({"nvidia-3070": 4, "nvidia-3090": 4}),
        usage=Resource.of({"nvidia-3070": 1}),
        seq=12,
    )
    assert decode_head(encode(head)) == head


def test_head_json_keeps_the_upstream_shape_plus_seq() -> None:
    head = GpuRecord(capacity=Resource.of({"a": 2}), usage=Resource.of({}), seq=3)
    assert json.loads(encode(head)) == {
        "capacity": {"prod_count_map": {"a": 2}},
        "usage": {"prod_count_map": {}},
        "seq": 3,
    }


def test_head_without_seq_omits_it() -> None:
    head = GpuRecord(capacity=Resource.of({"a": 2}), usage=Resource.of({}))
    data = json.loads(encode(head))
    assert "seq" not in data
    assert data["capacity"] == {"prod_count_map": {"a": 2}}


def test_head_reads_an_upstream_go_record() -> None:
    raw = (
        b'{"capacity":{"prod_count_map":{"nvidia-3070":4,"nvidia-3090":4}},'
        b'"usage":{"prod_count_map":null}}'
    )
    head = decode_head(raw)
    assert head.seq is None
    assert head.capacity == Resource({"nvidia-3070": 4, "nvidia-3090": 4})
    assert head.usage == Resource(None)


def test_head_reads_an_upstream_record_with_missing_or_null_parts() -> None:
    for raw in (b"{}", b'{"capacity": null, "usage": null}'):
        head = decode_head(raw)
        assert head.seq is None
        assert head.capacity is None
        assert head.usage is None
    head = decode_head(b'{"capacity":{"prod_count_map":{"a":1}},"unknown":true}')
    assert head.capacity is not None
    assert head.capacity.prod_count_map == {"a": 1}
    assert head.usage is None


@pytest.mark.parametrize(
    ("stored", "cards"),
    [
        (b'{"nvidia-3090":8}', {"nvidia-3090": 8}),
        (b'{"nvidia-3090":0}', {}),
        (b'{"b":1,"a":2}', {"a": 2, "b": 1}),
        (b'{"b":0,"a":2}', {"a": 2}),
        (b"null", {}),
        (b"{}", {}),
    ],
)
def test_a_stored_heads_maps_read_normalised(stored: bytes, cards: Cards) -> None:
    """What many-node reads take (``read_stored_head``, the fast path): no zero counts,
    products in order, whatever an upstream record held; one product is taken as decoded."""
    raw = b'{"capacity":{"prod_count_map":%s},"usage":{"prod_count_map":%s},"seq":4}'
    capacity, usage, seq = read_stored_head(raw % (stored, stored))
    assert capacity == usage == cards and list(capacity) == list(cards)
    assert capacity is not usage and seq == 4


@FAST
@given(capacity=signed_maps, usage=signed_maps)
def test_a_stored_head_reads_as_its_record_normalised(capacity: Cards, usage: Cards) -> None:
    raw = encode(GpuRecord(capacity=Resource(capacity), usage=Resource(usage)))
    assert read_stored_head(raw) == (cards.normalised(capacity), cards.normalised(usage), None)


def test_head_rejects_invalid_counts() -> None:
    with pytest.raises(msgspec.ValidationError):
        decode_head(b'{"capacity":{"prod_count_map":{"a":"4"}},"usage":{"prod_count_map":null}}')


@FAST
@given(capacity=held_maps, usage=held_maps, seq=st.none() | st.integers(0, 10**9))
def test_head_round_trips_property(capacity: Cards, usage: Cards, seq: int | None) -> None:
    head = GpuRecord(capacity=Resource.of(capacity), usage=Resource.of(usage), seq=seq)
    assert decode_head(encode(head)) == head


def test_a_kind_whose_change_union_lacks_the_ledgers_changes_is_refused() -> None:
    """A kind that forgot Checkpoint[S] and HeadRepaired[S] could not read a compacted stream."""
    with pytest.raises(TypeError, match=r"lacks the ledger's \['checkpoint', 'head_repaired'\]"):
        EventCodec("resource-x", Union[NodeAdded, NodeRemoved])  # noqa: UP007
