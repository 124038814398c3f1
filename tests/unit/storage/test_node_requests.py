"""The node request: the form an operator types, and a stored form given in its place."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.projections.storage.grammar.bindings import InvalidVolume
from resource_extend.projections.storage.grammar.disks import Disk, InvalidDisk
from resource_extend.projections.storage.wire.node_requests import (
    AskedResource,
    decode_node_request,
    node_request_of,
)
from resource_extend.projections.storage.wire.requests import InvalidStorage
from resource_extend.projections.storage.wire.resources import NodeResource

G, T = 2**30, 2**40


def request(value: Any) -> AskedResource:
    parsed = node_request_of(value, "resource_request")
    assert isinstance(parsed, AskedResource)
    return parsed


def test_resource_extend_example() -> None:
    parsed = request(
        {
            "volumes": ["/data0:1T", "/data1:1G"],
            "storage": "1G",
            "disks": ["/dev/vda:/,/data0:1000:1000:1G:1G"],
            "rm-disks": "/dev/vdb,/dev/vdc",
        }
    )
    assert parsed.volumes == {"/data0": T, "/data1": G}
    assert parsed.storage == G
    assert parsed.total_storage() == T + 2 * G
    assert parsed.disks == [
        Disk(device="/dev/vda", mounts=["/", "/data0"]).with_quota((1000, 1000, G, G))
    ]
    assert parsed.rm_disks == ("/dev/vdb", "/dev/vdc")
    assert parsed.as_resource() == NodeResource(
        volumes={"/data0": T, "/data1": G}, disks=parsed.disks, storage=T + 2 * G
    )


def test_absent_and_null_keys_are_unset() -> None:
    for value in ({}, {"volumes": None, "storage": None, "disks": None, "rm-disks": None}):
        parsed = request(value)
        assert parsed == AskedResource()
        assert parsed.volumes is msgspec.UNSET and parsed.disks is msgspec.UNSET
        assert parsed.as_resource() == NodeResource(volumes={}, disks=[], storage=0)


def test_storage_as_a_number() -> None:
    """Decision 3: upstream read a number as "" (0)."""
    assert request({"storage": 5 * G}).total_storage() == 5 * G


def test_negative_sizes_are_for_deltas() -> None:
    parsed = request({"volumes": ["/data0:-1T"], "storage": "-1G"})
    assert parsed.total_storage() == -T - G


@pytest.mark.parametrize("text", ["/data0", "/data0:1T:x", "a:b:c"])
def test_volume_needs_two_parts(text: str) -> None:
    with pytest.raises(InvalidVolume) as caught:
        request({"volumes": [text]})
    assert caught.value.reason.startswith("volume should have 2 parts")
    assert caught.value.reason.endswith(": invalid volume")


def test_bad_volume_size_and_path() -> None:
    with pytest.raises(InvalidVolume, match="invalid size"):
        request({"volumes": ["/data0:lots"]})
    with pytest.raises(InvalidVolume, match="volume path is empty"):
        request({"volumes": [":1G"]})


def test_a_path_given_twice_takes_its_last_size() -> None:
    assert request({"volumes": ["/d:1G", "/d:2G"]}).volumes == {"/d": 2 * G}


def test_volumes_come_sorted() -> None:
    assert list(request({"volumes": ["/b:1", "/a:1", "/c:1"]}).given_volumes()) == [
        "/a",
        "/b",
        "/c",
    ]


def test_bad_storage_and_disks() -> None:
    with pytest.raises(InvalidStorage, match="storage: invalid size"):
        request({"storage": "lots"})
    with pytest.raises(InvalidDisk, match="invalid storage: invalid disk"):
        request({"disks": ["/dev/vda:/:1:1:1"]})
    with pytest.raises(InvalidDisk, match="listed twice"):
        request({"disks": ["/dev/vda:/:1:1:1:1", "/dev/vda:/x:1:1:1:1"]})


def test_empty_rm_disks_removes_nothing() -> None:
    assert request({"rm-disks": ""}).rm_disks == ()
    assert request({"rm-disks": ",/dev/vdb,"}).rm_disks == ("/dev/vdb",)


@pytest.mark.parametrize(
    ("value", "where"),
    [
        ({"volumes": ["/d:1G", 5]}, "$.volumes[1]"),
        ({"storage": 1.5}, "$.storage"),
        ({"storage": True}, "$.storage"),
        ({"disks": "/dev/vda:/:1:1:1:1"}, "$.disks"),
        ({"rm-disks": ["/dev/vdb"]}, "$.rm-disks"),
    ],
)
def test_wrong_types_name_the_key(value: Any, where: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        node_request_of(value, "resource_request")
    assert caught.value.reason.startswith("invalid resource_request: ")
    assert where in caught.value.reason


def test_not_an_object() -> None:
    with pytest.raises(InvalidRequest, match="expected an object, got list"):
        node_request_of([], "resource")
    assert node_request_of(None, "resource") is None


# the stored form in place of the request form

BEFORE = NodeResource(
    volumes={"/data0": T, "/data1": T},
    disks=[Disk(device="/dev/vda", mounts=["/"]).with_quota((10, 10, 10, 10))],
    storage=2 * T,
)


def test_a_before_handed_back_is_the_stored_form() -> None:
    raw = msgspec.json.encode(BEFORE)
    assert decode_node_request(raw, "resource_request") == BEFORE


def test_an_empty_capacity_as_go_writes_it_is_the_stored_form() -> None:
    empty = NodeResource(storage=5)
    assert msgspec.json.encode(empty) == b'{"volumes":null,"disks":null,"storage":5}'
    assert decode_node_request(msgspec.json.encode(empty), "resource_request") == empty
    assert node_request_of({"volumes": {}, "disks": [], "storage": 0}, "r") == NodeResource(
        volumes={}, disks=[], storage=0
    )


@pytest.mark.parametrize(
    "value",
    [
        {"volumes": {"/d": 1}},
        {"disks": [{"device": "/dev/vda"}]},
        {"volumes": {}, "storage": 1},
    ],
)
def test_stored_signs(value: dict[str, Any]) -> None:
    assert isinstance(node_request_of(value, "r"), NodeResource)


@pytest.mark.parametrize(
    "value",
    [
        {"storage": 5},  # an operator setting storage, not an empty capacity
        {"volumes": None, "storage": 5},
        {"volumes": [], "disks": [], "storage": 5},
        {"volumes": None, "disks": None, "storage": "5"},
        {"volumes": None, "disks": None, "storage": 5, "rm-disks": "/dev/vdb"},
    ],
)
def test_request_signs(value: dict[str, Any]) -> None:
    assert isinstance(node_request_of(value, "r"), AskedResource)


@pytest.mark.parametrize(
    "value",
    [
        {"volumes": {"/d": 1}, "storage": "1G"},
        {"volumes": ["/d:1"], "disks": [{"device": "/dev/vda"}]},
        {"volumes": {"/d": 1}, "rm-disks": "/dev/vdb"},
        {"disks": ["/dev/vda:/:1:1:1:1", {"device": "/dev/vdb"}]},
    ],
)
def test_mixed_forms_are_refused(value: dict[str, Any]) -> None:
    with pytest.raises(InvalidRequest, match="mixes the stored form"):
        node_request_of(value, "resource_request")


def test_stored_form_keeps_its_own_checks() -> None:
    with pytest.raises(InvalidRequest, match=r"\$\.storage"):
        node_request_of({"volumes": {"/d": 1}, "storage": 1.5}, "resource_request")
