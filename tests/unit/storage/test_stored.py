"""The stored form (as upstream keeps it in etcd, and as core may hand it back): records and
stored-form inputs, keys in any case."""

from __future__ import annotations

import msgspec
import pytest

from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.wire.resources import NodeResource
from resource_extend.projections.storage.wire.stored import (
    StoredRecord,
    decode_node_resource,
    node_resource_of,
    read_stored,
)

T = 2**40
G = 2**30

UPSTREAM_RECORD = (
    b'{"capacity":{"volumes":{"/data0":1099511627776,"/data1":1099511627776},'
    b'"disks":[{"device":"/dev/vda","mounts":["/","/data0"],"read_IOPS":1000,"write_IOPS":1000,'
    b'"read_bps":1073741824,"write_bps":1073741824}],"storage":3298534883328},'
    b'"usage":{"volumes":{"/data0":0,"/data1":0},"disks":[{"device":"/dev/vda",'
    b'"mounts":["/","/data0"],"read_IOPS":0,"write_IOPS":0,"read_bps":0,"write_bps":0}],'
    b'"storage":0}}'
)
VDA = Disk(device="/dev/vda", mounts=["/", "/data0"])
CAPACITY = NodeResource(
    volumes={"/data0": T, "/data1": T},
    disks=[VDA.with_quota((1000, 1000, G, G))],
    storage=3 * T,
)
USAGE = NodeResource(volumes={"/data0": 0, "/data1": 0}, disks=[VDA], storage=0)


def test_upstream_record() -> None:
    assert read_stored(UPSTREAM_RECORD) == (CAPACITY, USAGE, None)


def test_our_record_round_trips_with_its_seq() -> None:
    raw = msgspec.json.encode(StoredRecord(capacity=CAPACITY, usage=USAGE, seq=7))
    assert read_stored(raw) == (CAPACITY, USAGE, 7)


def test_record_is_written_in_upstream_key_order() -> None:
    raw = msgspec.json.encode(StoredRecord(capacity=CAPACITY, usage=USAGE))
    assert raw.startswith(UPSTREAM_RECORD[:-1])  # then our ,"seq":null


def test_null_parts_are_empty() -> None:
    empty = NodeResource()
    assert read_stored(b'{"capacity":null,"usage":null}') == (empty, empty, None)
    got = read_stored(b'{"capacity":{"volumes":null,"disks":null,"storage":5}}')
    assert got[0] == NodeResource(volumes=None, disks=None, storage=5)


@pytest.mark.parametrize(
    "raw",
    [
        UPSTREAM_RECORD.replace(b"read_IOPS", b"read_iops").replace(b"write_IOPS", b"WRITE_iops"),
        UPSTREAM_RECORD.replace(b'"storage"', b'"Storage"').replace(b'"capacity"', b'"CAPACITY"'),
        UPSTREAM_RECORD.replace(b'"volumes"', b'"Volumes"').replace(b'"disks"', b'"Disks"'),
        UPSTREAM_RECORD.replace(b'"device"', b'"Device"').replace(b'"mounts"', b'"MOUNTS"'),
        UPSTREAM_RECORD.replace(b'"usage"', b'"\\u0075sage"'),
        UPSTREAM_RECORD.replace(b'"storage"', '"\u017ftorage"'.encode()),  # Go folds the long s
    ],
)
def test_keys_in_any_case(raw: bytes) -> None:
    assert read_stored(raw) == (CAPACITY, USAGE, None)


@pytest.mark.parametrize("path", ["/Storage", "/x_iops", "/y_IOPS", "/z\u00e9"])
def test_a_value_that_looks_like_a_key_is_left_alone(path: str) -> None:
    raw = UPSTREAM_RECORD.replace(b"/data1", path.encode())
    capacity, usage, _ = read_stored(raw)
    decoded = msgspec.json.decode(f'"{path}"'.encode())
    assert capacity.volumes == {"/data0": T, decoded: T}
    assert usage.volumes == {"/data0": 0, decoded: 0}


@pytest.mark.parametrize(
    "raw",
    [
        b'{"capacity":{"storage":1.5}}',
        b'{"capacity":{"storage":"1G"}}',
        b'{"capacity":{"volumes":{"/d":9223372036854775808}}}',
        b'{"Capacity":{"Storage":1.5}}',
        b"[]",
    ],
)
def test_records_with_wrong_numbers_are_refused(raw: bytes) -> None:
    with pytest.raises(msgspec.ValidationError):
        read_stored(raw)


def test_stored_input() -> None:
    raw = b'{"volumes":{"/data4":1099511627776},"storage":1099511627776}'
    assert decode_node_resource(raw, "resource") == NodeResource(volumes={"/data4": T}, storage=T)
    assert decode_node_resource(b"null", "resource") == NodeResource()


def test_stored_input_in_any_case() -> None:
    raw = b'{"Disks":[{"Device":"/dev/vda","read_iops":5}],"STORAGE":3}'
    assert decode_node_resource(raw, "resource") == NodeResource(
        disks=[Disk(device="/dev/vda", read_iops=5)], storage=3
    )


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b'{"storage": 1.5}', "$.storage"),
        (b'{"storage": "1G"}', "$.storage"),
        (b'{"Storage": "1G"}', "$.storage"),
        (b'{"disks": [{"device": "/dev/vda", "read_IOPS": 0.5}]}', "$.disks[0].read_IOPS"),
        (b'{"disks": [{"device": "/dev/vda", "READ_IOPS": 0.5}]}', "$.disks[0].read_IOPS"),
    ],
)
def test_stored_input_refuses_fractions_and_strings(raw: bytes, where: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        decode_node_resource(raw, "resource")
    assert caught.value.reason.startswith("invalid resource: ")
    assert where in caught.value.reason


def test_stored_input_from_decoded_values() -> None:
    assert node_resource_of(None, "usage") == NodeResource()
    assert node_resource_of({"Storage": 5}, "usage") == NodeResource(storage=5)
    with pytest.raises(InvalidRequest, match="invalid usage"):
        node_resource_of([1], "usage")
