"""Disks: the operator's form, the stored form, path look-ups and per-device
arithmetic (resource-extend's disk_test)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from resource_extend.projections.storage.arithmetic import added_disks
from resource_extend.projections.storage.grammar.disks import Disk, InvalidDisk, Mounts, parse_disk
from tests.unit.strategies import FAST

G = 2**30


def test_parse() -> None:
    disk = parse_disk("/dev/vda:/,/data:100:200:1G:2G")
    assert disk == Disk(
        device="/dev/vda", mounts=["/", "/data"], read_iops=100, write_iops=200,
        read_bps=G, write_bps=2 * G,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("text", "cause"),
    [
        ("/dev/vda:/:100:200:1G", "invalid storage"),  # upstream's cause for a part count
        ("/dev/vda:/:100:200:1G:2G:3", "invalid storage"),
        ("/dev/vda:/:x:200:1G:2G", "IOPS"),
        ("/dev/vda:/:100:1K:1G:2G", "IOPS"),  # IOPS are plain integers
        ("/dev/vda:/:100:200:xx:2G", "invalid size"),
        ("/dev/vda:/:100:9223372036854775808:1G:2G", "IOPS out of range"),
    ],
)
def test_invalid_disks(text: str, cause: str) -> None:
    with pytest.raises(InvalidDisk) as caught:
        parse_disk(text)
    assert caught.value.reason.startswith(f"wrong disk format: {text}, ")
    assert cause in caught.value.reason
    assert caught.value.reason.endswith(": invalid disk")


def test_empty_mounts_part_is_one_empty_mount_that_serves_every_path() -> None:
    disk = parse_disk("/dev/vda::0:0:0:0")
    assert disk.mounts == [""]
    assert Mounts([disk]).disk_for("/anything") == "/dev/vda"


def test_stored_form_uses_capital_iops() -> None:
    disk = parse_disk("/dev/vda:/:1:2:3:4")
    assert msgspec.json.encode(disk) == (
        b'{"device":"/dev/vda","mounts":["/"],"read_IOPS":1,"write_IOPS":2,'
        b'"read_bps":3,"write_bps":4}'
    )


@FAST
@given(
    st.lists(st.text("/abc", min_size=1, max_size=6), min_size=1, max_size=3),
    st.lists(st.integers(min_value=0, max_value=2**62), min_size=4, max_size=4),
)
def test_text_round_trip(mounts: list[str], quota: list[int]) -> None:
    disk = Disk(device="/dev/vdz", mounts=mounts).with_quota(quota)
    assert parse_disk(disk.text()) == disk


# the deepest mount prefixing path + "/" decides

VDA = Disk(device="/dev/vda", mounts=["/", "/data"])
VDB = Disk(device="/dev/vdb", mounts=["/data1"])
VDC = Disk(device="/dev/vdc", mounts=["/data/sub/"])


@pytest.mark.parametrize(
    ("path", "device"),
    [
        ("/data", "/dev/vda"),
        ("/data/x", "/dev/vda"),
        ("/database", "/dev/vda"),  # served by "/", not "/data"
        ("/data0", "/dev/vda"),
        ("/data1", "/dev/vdb"),
        ("/data1/x", "/dev/vdb"),
        ("/data/sub", "/dev/vdc"),
        ("/data/sub/x", "/dev/vdc"),
        ("/etc", "/dev/vda"),
    ],
)
def test_disk_for_path(path: str, device: str) -> None:
    assert Mounts([VDA, VDB, VDC]).disk_for(path) == device


def test_no_disk_covers_the_path() -> None:
    assert Mounts([Disk(device="/dev/vdc", mounts=["/data"])]).disk_for("/etc") is None
    assert Mounts([]).disk_for("/data") is None


def test_a_mount_two_disks_share_belongs_to_the_later() -> None:
    first, later = Disk(device="a", mounts=["/m"]), Disk(device="b", mounts=["/m/"])
    assert Mounts([first, later]).disk_for("/m/x") == "b"
    assert Mounts([later, first]).disk_for("/m/x") == "a"


# arithmetic per device


def test_add_merges_by_device_and_appends_new_ones() -> None:
    base = [Disk(device="/dev/vda", mounts=["/"]).with_quota((10, 10, 10, 10))]
    delta = [
        Disk(device="/dev/vda").with_quota((1, 2, 3, 4)),
        Disk(device="/dev/vdb", mounts=["/data"]).with_quota((5, 5, 5, 5)),
    ]
    assert added_disks(base, delta) == [
        Disk(device="/dev/vda", mounts=["/"]).with_quota((11, 12, 13, 14)),
        Disk(device="/dev/vdb", mounts=["/data"]).with_quota((5, 5, 5, 5)),
    ]


def test_add_replaces_mounts_only_when_the_delta_has_some() -> None:
    base = [Disk(device="/dev/vda", mounts=["/"])]
    assert added_disks(base, [Disk(device="/dev/vda", mounts=[])])[0].mounts == ["/"]
    assert added_disks(base, [Disk(device="/dev/vda", mounts=["/x"])])[0].mounts == ["/x"]


def test_subtract_of_an_unknown_device_appends_it_negated() -> None:
    delta = [Disk(device="/dev/vdb", mounts=["/b"]).with_quota((1, 2, 3, 4))]
    assert added_disks([], delta, -1) == [
        Disk(device="/dev/vdb", mounts=["/b"]).with_quota((-1, -2, -3, -4))
    ]


def test_arithmetic_leaves_its_inputs_alone() -> None:
    base = [Disk(device="/dev/vda", mounts=["/"]).with_quota((1, 1, 1, 1))]
    delta = [Disk(device="/dev/vda", mounts=["/x"]).with_quota((1, 1, 1, 1))]
    added_disks(base, delta)
    assert base == [Disk(device="/dev/vda", mounts=["/"]).with_quota((1, 1, 1, 1))]
    assert delta == [Disk(device="/dev/vda", mounts=["/x"]).with_quota((1, 1, 1, 1))]


def test_a_device_listed_twice_counts_twice() -> None:
    twice = [Disk(device="/dev/vda").with_quota((1, 0, 0, 0))] * 2
    assert added_disks([], twice) == [Disk(device="/dev/vda").with_quota((2, 0, 0, 0))]
