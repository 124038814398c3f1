"""What a request may bind, beyond the grammar, through the installed binary: every binding
a request adds is mounted by the engine exactly as the ledger charges it, so what an engine
would refuse (or mount otherwise than it is charged) is refused here, before anything is
charged. Upstream accepted all of these."""

from __future__ import annotations

from typing import Any

import pytest

from tests.plugin import Plugin, failure_line
from tests.storage.helpers import G, add_f4, info


def deploy(storage: Plugin, volumes: list[str], node: str = "n") -> Any:
    return storage.run(
        "calculate-deploy",
        {"nodename": node, "deploy_count": 1, "workload_resource_request": {"volumes": volumes}},
    )


def capacity(storage: Plugin, volumes: list[str], node: str = "n") -> Any:
    return storage.run(
        "get-nodes-deploy-capacity",
        {"nodenames": [node], "workload_resource": {"volumes": volumes}},
    )


def refused_everywhere(storage: Plugin, volumes: list[str], *reasons: str) -> list[str]:
    """The request is refused by calculate-deploy and get-nodes-deploy-capacity alike, in one
    line naming ``reasons``; the node is left as it was."""
    before = info(storage, "n")
    lines = []
    for verb, result in (
        ("calculate-deploy", deploy(storage, volumes)),
        ("get-nodes-deploy-capacity", capacity(storage, volumes)),
    ):
        line = failure_line(result, verb, "resource-storage")
        for reason in reasons:
            assert reason in line, line
        lines.append(line)
    assert info(storage, "n") == before
    return lines


@pytest.mark.parametrize(
    "volumes",
    [
        ["AUTO:/m:rwm:1G", "AUTO:/m:rwm:1G"],
        ["AUTO:/d:rw:1G", "AUTO:/d:rw:1G"],
        ["/src:/d:rw:0:10:0:0:0", "/src:/d:rw:0:10:0:0:0"],
    ],
    ids=["monopoly", "normal", "mount"],
)
def test_a_binding_listed_twice_is_refused(storage: Plugin, volumes: list[str]) -> None:
    """Listed twice, a binding was mounted twice and charged once: the plan holds one key per
    binding, the engine got both (two 5G mounts of a 10G monopoly volume, 5G charged), and a
    second workload then landed on the "monopoly" volume. An engine cannot mount two volumes
    at one destination anyway."""
    storage.ok("add-node", {"nodename": "n", "resource": {"volumes": ["/data0:10G"]}})
    refused_everywhere(storage, volumes, "destination /", "twice")


def test_two_bindings_at_one_destination_are_refused(storage: Plugin) -> None:
    """``AUTO:/data:rw:1G`` and ``AUTO:/data:rwm:1G`` were placed on two volumes and handed to
    the engine as two mounts at ``/data``, which no engine can make: refused before placing."""
    add_f4(storage, "n")
    refused_everywhere(storage, ["AUTO:/data:rw:1G", "AUTO:/data:rwm:1G"], "destination /data")
    refused_everywhere(storage, ["AUTO:/data:rw:1G", "/src:/data"], "destination /data")


@pytest.mark.parametrize("flags", ["o", "mo", "oo", "om", "ooo", "mmo"])
def test_overlay_flags_without_read_or_write_are_refused(storage: Plugin, flags: str) -> None:
    """``o`` prints only through ``r``/``w`` (``ro``, ``wo``): without them the binding was
    stored as ``AUTO:/x::…`` (or ``mo`` as ``m``), which reads back as another binding; the
    engine got it unplaced, with no IOPS throttle, while the node was charged."""
    add_f4(storage, "n")
    refused_everywhere(storage, [f"AUTO:/x:{flags}:1G:100"], "needs r or w")


@pytest.mark.parametrize("flags", ["or", "ow", "orw", "rowo", "mor"])
def test_overlay_flags_with_read_or_write_round_trip(storage: Plugin, flags: str) -> None:
    """The ``o`` forms upstream prints, stored and read back as the same binding."""
    add_f4(storage, "n")
    planned = deploy(storage, [f"AUTO:/x:{flags}:1G"])
    assert planned.status == 0, planned.stderr
    [workload] = planned.answer["workloads_resource"]
    [stored] = workload["volumes_request"]
    again = deploy(storage, [stored])
    assert again.status == 0, again.stderr
    assert again.answer["workloads_resource"][0]["volumes_request"] == [stored]
    assert list(workload["volume_plan_request"]) == [stored]


@pytest.mark.parametrize(
    ("binding", "reason"),
    [
        ("AUTO:/d\x00x:rw:1G", "control or invisible"),
        ("AUTO:/d\x1b[31m:rw:1G", "control or invisible"),
        ("AUTO:/d\u202ex:rw:1G", "control or invisible"),
        ("AUTO:/d\u200b:rw:1G", "control or invisible"),
        ("AUTO:data:rw:1G", "absolute"),
        ("AUTO:./data:rw:1G", "absolute"),
        ("AUTO:/data/../etc:rw:1G", "'..'"),
        ("AUTO:/data/./x:rw:1G", "'.'"),
        ("AUTO:/data/:rw:1G", "trailing '/'"),
        ("AUTO://data:rw:1G", "'//'"),
        ("AUTO:/:rw:1G", "'/'"),
        ("/data0/../mnt/x:/x:rw:0:10:0:0:0", "'..'"),
        ("/data0/:/x", "trailing '/'"),
        ("/mnt\x00:/x", "control or invisible"),
        ("..:/x", "absolute path or a volume name"),
        ("data0/x:/x", "absolute path or a volume name"),
        ("AUTO:/x:r\x07w:1G", "control or invisible"),
    ],
)
def test_binding_paths_must_be_clean(storage: Plugin, binding: str, reason: str) -> None:
    """A container engine refuses most of these late, after the ledger charged them; a mount
    source with ``..`` was charged by its text to the disk of a path it does not lie under."""
    storage.ok(
        "add-node",
        {"nodename": "n", "resource": {"volumes": ["/data0:1T"],
                                       "disks": ["/dev/vda:/data0:100:100:1G:1G"]}},
    )  # fmt: skip
    refused_everywhere(storage, [binding], reason)


def test_d_and_d_slash_are_not_two_volumes(storage: Plugin) -> None:
    """``/d`` and ``/d/`` were two bindings, each placed and charged: one mount point."""
    add_f4(storage, "n")
    refused_everywhere(storage, ["AUTO:/d:rw:1G", "AUTO:/d/:rw:1G"], "trailing '/'")


@pytest.mark.parametrize(
    "binding",
    ["AUTO:/data:rw:1G", "/srv/logs:/logs:ro", "named-volume:/v", ":/scratch:rw:1G",
     "AUTO:/with space/ü:rw:1G"],
)  # fmt: skip
def test_clean_bindings_are_placed(storage: Plugin, binding: str) -> None:
    add_f4(storage, "n")
    planned = deploy(storage, [binding])
    assert planned.status == 0, planned.stderr


def test_a_realloc_adding_a_second_binding_at_a_destination_is_refused(storage: Plugin) -> None:
    """The workload holds ``AUTO:/d:rw``; a realloc adding ``AUTO:/d:rwm`` (another binding, by
    its flags) would hand the engine two mounts at ``/d``."""
    add_f4(storage, "n")
    [workload] = deploy(storage, ["AUTO:/d:rw:1G"]).answer["workloads_resource"]
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [workload], "delta": True, "incr": True},
    )
    for volumes in (["AUTO:/d:rwm:1G"], ["AUTO:/e:rw:1G", "AUTO:/e:rw:1G"]):
        result = storage.run(
            "calculate-realloc",
            {"nodename": "n", "workload_resource": workload,
             "workload_resource_request": {"volumes": volumes}},
        )  # fmt: skip
        line = failure_line(result, "calculate-realloc", "resource-storage")
        assert "destination /" in line, line
    grown = storage.run(
        "calculate-realloc",
        {"nodename": "n", "workload_resource": workload,
         "workload_resource_request": {"volumes": ["AUTO:/d:rw:1G"]}},
    )  # fmt: skip
    assert grown.status == 0, grown.stderr
    assert grown.answer["workload_resource"]["volumes_request"] == [f"AUTO:/d:rw:{2 * G}:0:0:0:0"]
