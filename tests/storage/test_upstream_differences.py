"""Each upstream resource-storage bug this plugin fixes (docs/differences.md), pinned
through the installed binary against real etcd. The table in docs/differences.md
("resource-storage") names these tests."""

from __future__ import annotations

from typing import Any

import pytest

from tests.plugin import Plugin, failure_line
from tests.storage.helpers import G, T, add_f4, info

DISK = "/dev/vda:/,/data0:1000:1000:1G:1G"


def deploy(storage: Plugin, request: dict[str, Any], node: str = "n", count: int = 1) -> Any:
    return storage.run(
        "calculate-deploy",
        {"nodename": node, "deploy_count": count, "workload_resource_request": request},
    )


def refused_capacity_edits(
    storage: Plugin, edits: list[tuple[dict[str, Any], bool]], says: str
) -> None:
    """Each capacity edit (request, delta) on node n is refused in one line that ``says``, and
    nothing is written: the node reads the same, its stream is as long."""
    before, events = info(storage, "n"), len(storage.history("n"))
    for request, delta in edits:
        line = storage.fails(
            "set-node-resource-capacity",
            {"nodename": "n", "resource_request": request, "delta": delta, "incr": True},
        )
        assert says in line, line
    assert info(storage, "n") == before
    assert len(storage.history("n")) == events


def add_with_disk(storage: Plugin, node: str = "n") -> None:
    storage.ok(
        "add-node",
        {"nodename": node, "resource": {"volumes": ["/data0:1T", "/data1:1T"], "disks": [DISK]}},
    )


def test_storage_given_as_a_json_number_counts(storage: Plugin) -> None:
    """eru-cli sends storage as numbers; upstream read them as 0 (only strings)."""
    add_f4(storage, "n")
    planned = deploy(storage, {"storage-request": 10 * G, "storage-limit": 10 * G})
    assert planned.status == 0, planned.stderr
    [workload] = planned.answer["workloads_resource"]
    assert workload["storage_request"] == 10 * G
    capacity = storage.ok(
        "get-nodes-deploy-capacity", {"nodenames": ["n"], "workload_resource": {"storage": T}}
    )
    assert capacity["total"] == 4


def test_a_field_spelt_in_another_case_is_refused(storage: Plugin) -> None:
    """Go matched ``Storage_Request`` to the field. Ignored as an unknown key, a release would
    give back nothing, and usage would drift without an error: refused, nothing written."""
    add_f4(storage, "n")
    [workload] = deploy(storage, {"volumes": ["AUTO:/d:rw:1G"]}).answer["workloads_resource"]
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [workload], "delta": True, "incr": True},
    )
    before = info(storage, "n")
    shouting = {key.upper(): value for key, value in workload.items()}
    line = storage.fails(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [shouting], "delta": True, "incr": False},
    )
    assert "is not a field" in line and "workloads_resource[0]" in line, line
    assert info(storage, "n") == before
    assert len(storage.history("n")) == 2


def test_a_storage_only_realloc_keeps_the_workloads_disk_quota(storage: Plugin) -> None:
    """Upstream dropped disks_request when nothing needed placing, and its delta gave the
    workload's IOPS back to the node while the workload kept using them."""
    add_with_disk(storage)
    request = {"volumes": ["AUTO:/fast:rw:1G:100:100:1M:1M"]}
    [workload] = deploy(storage, request).answer["workloads_resource"]
    assert workload["disks_request"][0]["read_IOPS"] == 100
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [workload], "delta": True, "incr": True},
    )
    grown = storage.run(
        "calculate-realloc",
        {"nodename": "n", "workload_resource": workload,
         "workload_resource_request": {"storage": "1G"}},
    )  # fmt: skip
    assert grown.status == 0, grown.stderr
    assert grown.answer["workload_resource"]["disks_request"] == workload["disks_request"]
    delta = grown.answer["delta_resource"]
    assert all(d[k] == 0 for d in delta["disks_request"] for k in ("read_IOPS", "write_IOPS"))
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [delta], "delta": True, "incr": True},
    )
    held = [grown.answer["workload_resource"]]
    assert info(storage, "n", held)["diffs"] == []


def test_a_path_no_disk_serves_any_more_is_skipped_not_a_crash(storage: Plugin) -> None:
    """After rm-disks, a realloc of a workload whose mount had IOPS on that disk: upstream
    dereferenced a missing disk (a Go panic); here the quota is simply not charged."""
    storage.ok(
        "add-node",
        {"nodename": "n", "resource": {"volumes": ["/data0:1T"],
                                       "disks": ["/dev/vdb:/mnt:100:100:1G:1G"]}},
    )  # fmt: skip
    request = {"volumes": ["/mnt/logs:/logs:rw:0:10:10:0:0"]}
    [workload] = deploy(storage, request).answer["workloads_resource"]
    storage.ok(
        "set-node-resource-capacity",
        {"nodename": "n", "resource_request": {"rm-disks": "/dev/vdb"}, "delta": False},
    )
    changed = storage.run(
        "calculate-realloc",
        {"nodename": "n", "workload_resource": workload,
         "workload_resource_request": {"storage": "1G"}},
    )  # fmt: skip
    assert changed.status == 0, changed.stderr
    assert changed.answer["engine_params"]["iops_options"] == {}


def test_a_fix_that_cannot_be_written_fails_the_verb(storage: Plugin) -> None:
    """Upstream appended "fix failed" to the diffs and exited 0 with an unsaved usage; core
    then dropped its repair entry. Here the verb fails and nothing is written."""
    add_f4(storage, "n")
    too_much = {"volume_plan_request": {"AUTO:/d:rw:1:0:0:0:0": {"/data0": 2 * T}}}
    line = storage.fails("fix-node-resource", {"nodename": "n", "workloads_resource": [too_much]})
    assert "invalid size in usage" in line
    assert len(storage.history("n")) == 1


def test_a_monopoly_binding_without_a_size_is_refused(storage: Plugin) -> None:
    """Upstream split a volume 0/0 among sizeless monopoly bindings that carried IOPS."""
    add_with_disk(storage)
    for binding in ("AUTO:/m:rwm:0:10:0:0:0", "AUTO:/m:rwm", "AUTO:/m:rwm:-1G"):
        line = storage.fails(
            "calculate-deploy",
            {"nodename": "n", "deploy_count": 1,
             "workload_resource_request": {"volumes": [binding]}},
        )  # fmt: skip
        assert "invalid volume" in line, line


def test_a_tiny_binding_on_huge_volumes_is_bounded(storage: Plugin) -> None:
    """Upstream enumerated every fitting copy: a 1-byte binding on 1 TiB volumes ran until
    core's 30 s timeout. Here placement stops at scheduler.max_deploy_count (100 here)."""
    add_f4(storage, "n")
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "resource": {"volumes": {"/data0": 1, "/data1": 1}},
         "delta": True, "incr": True},
    )  # fmt: skip
    capacity = storage.ok(
        "get-nodes-deploy-capacity",
        {"nodenames": ["n"], "workload_resource": {"volumes": ["AUTO:/tiny:rw:1"]}},
    )
    assert capacity["total"] == 100


def test_name_is_the_kind(storage: Plugin) -> None:
    """The older plugin printed {"name": "storage"} followed by null: two JSON values;
    resource-extend prints "storage", as here."""
    assert storage.ok("name") == "storage"


@pytest.mark.parametrize("binding", ["AUTO:/x::-1G", "/src:/dst:rw:-1T"])
def test_a_negative_binding_is_refused_at_deploy(storage: Plugin, binding: str) -> None:
    """Upstream planned a negative normal size, which grew the volume during placement: its
    loop never ended. A mount's negative size went into the storage request, so committing it
    freed node storage other workloads hold. A negative size means "give back" only in a
    realloc."""
    add_f4(storage, "n")
    for verb, request in (
        ("calculate-deploy", {"nodename": "n", "deploy_count": 1,
                              "workload_resource_request": {"volumes": [binding]}}),
        ("get-nodes-deploy-capacity", {"nodenames": ["n"],
                                       "workload_resource": {"volumes": [binding]}}),
    ):  # fmt: skip
        line = storage.fails(verb, request)
        assert "size can't be negative" in line, line


def test_an_unknown_node_reads_as_null(storage: Plugin) -> None:
    """Core's RemoveNode reads the node from every plugin first; upstream's "node not exists"
    then failed it, so a node added before resource-storage was installed could never be
    removed (and resource-gpu's record was orphaned). As resource-gpu: ``null``, exit 0. A fix
    of an unknown node is still an error: there is nothing to rebuild."""
    unknown = {"nodename": "never", "workloads_resource": []}
    assert storage.ok("get-node-resource-info", unknown) is None
    line = storage.fails("fix-node-resource", {"nodename": "never", "workloads_resource": []})
    assert "node not exists" in line
    # Core's RemoveNode rollback hands back what it read: null, which restores nothing.
    restore = {"nodename": "never", "capacity": None, "usage": None}
    assert storage.ok("set-node-resource-info", restore) is None
    history = storage.run("history", None, "never")
    assert history.status != 0 and "no events" in history.stderr, history
    add_f4(storage, "n")
    line = storage.fails("set-node-resource-info", {**restore, "nodename": "n"})
    assert "invalid capacity" in line


def test_a_capacity_edit_cannot_remove_a_volume_in_use(storage: Plugin) -> None:
    """A delta taking a volume to exactly 0 removes it, and so does an absolute set that
    leaves it out: with bytes in use there, its usage was orphaned. Refused, nothing written;
    a volume with nothing in use still goes."""
    add_f4(storage, "n")
    [workload] = deploy(storage, {"volumes": ["AUTO:/d:rw:1G"]}).answer["workloads_resource"]
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [workload], "delta": True, "incr": True},
    )
    [(path, held)] = next(iter(workload["volume_plan_request"].values())).items()
    left_out = [f"{p}:1T" for p in ("/data0", "/data1", "/data2", "/data3") if p != path]
    edits = [({"volumes": [f"{path}:-1T"]}, True), ({"volumes": left_out}, False)]
    refused_capacity_edits(storage, edits, f"volume {path} is in use ({held} bytes)")
    idle = next(p for p in ("/data0", "/data1") if p != path)
    after = storage.ok(
        "set-node-resource-capacity",
        {"nodename": "n", "resource_request": {"volumes": [f"{idle}:-1T"]}, "delta": True,
         "incr": True},
    )["after"]  # fmt: skip
    assert idle not in after["volumes"] and path in after["volumes"]


def _deployed(storage: Plugin, request: dict[str, Any]) -> Any:
    """A workload of ``request`` on node n, committed."""
    planned = deploy(storage, request)
    assert planned.status == 0, planned.stderr
    [workload] = planned.answer["workloads_resource"]
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [workload], "delta": True, "incr": True},
    )
    return workload


def _realloc(storage: Plugin, workload: Any, request: dict[str, Any]) -> Any:
    return storage.run(
        "calculate-realloc",
        {"nodename": "n", "workload_resource": workload, "workload_resource_request": request},
    )


def test_a_realloc_cannot_give_back_a_binding_the_workload_does_not_hold(
    storage: Plugin,
) -> None:
    """``AUTO:/b:rw:-10G`` on a workload without ``/b`` dropped nothing but lowered its
    storage_request by 10G, again on every call: the node's storage freed while the volumes
    stayed held. Refused, naming the binding."""
    add_f4(storage, "n")
    workload = _deployed(storage, {"volumes": ["AUTO:/a:rw:10G"], "storage": "5G"})
    line = failure_line(
        _realloc(storage, workload, {"volumes": ["AUTO:/b:rw:-10G"]}),
        "calculate-realloc",
        "resource-storage",
    )
    assert "AUTO:/b:rw" in line and "does not hold" in line, line


def test_a_binding_as_large_as_the_workloads_storage_can_be_removed(storage: Plugin) -> None:
    """Removing a binding gives back more than its size (below zero removes it); upstream
    took the whole give-back off the storage, so a workload whose storage was that binding
    alone went below zero ("invalid storage") and could never drop it. The storage falls by
    what the binding held, and the delta gives exactly that back."""
    add_f4(storage, "n")
    workload = _deployed(storage, {"volumes": ["AUTO:/a:rw:10G"]})
    assert workload["storage_request"] == 10 * G
    dropped = _realloc(storage, workload, {"volumes": ["AUTO:/a:rw:-11G"]})
    assert dropped.status == 0, dropped.stderr
    new, delta = dropped.answer["workload_resource"], dropped.answer["delta_resource"]
    assert new["volumes_request"] == [] and new["volume_plan_request"] == {}
    assert new["storage_request"] == new["storage_limit"] == 0
    assert delta["storage_request"] == -10 * G
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [delta], "delta": True, "incr": True},
    )
    assert info(storage, "n", [new])["diffs"] == []
    assert info(storage, "n")["usage"]["storage"] == 0


def test_a_binding_given_back_whole_goes_though_its_limit_is_larger(storage: Plugin) -> None:
    """A binding whose request side a realloc takes below zero is removed whole, its limit
    side with it: upstream kept the limit side (11G less the give-back) and copied it back as
    the request, so the binding stayed placed and charged."""
    add_f4(storage, "n")
    workload = _deployed(
        storage, {"volumes-request": ["AUTO:/d:rw:10G"], "volumes-limit": ["AUTO:/d:rw:11G"]}
    )
    dropped = _realloc(storage, workload, {"volumes": [f"AUTO:/d:rw:-{10 * G + 1}"]})
    assert dropped.status == 0, dropped.stderr
    new, delta = dropped.answer["workload_resource"], dropped.answer["delta_resource"]
    assert new["volumes_request"] == [] and new["volumes_limit"] == []
    assert new["volume_plan_request"] == {} and new["volume_plan_limit"] == {}
    assert new["storage_request"] == new["storage_limit"] == 0
    assert dropped.answer["engine_params"]["volumes"] in (None, [])
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [delta], "delta": True, "incr": True},
    )
    assert info(storage, "n", [new])["diffs"] == []
    assert info(storage, "n")["usage"]["storage"] == 0
    assert set(info(storage, "n")["usage"]["volumes"].values()) == {0}


def test_after_a_remount_a_realloc_gives_back_to_the_disk_it_charged(storage: Plugin) -> None:
    """The workload's IOPS were charged to vda; a remount then serves its path from vdb.
    Upstream gave the old IOPS back to vdb (the disk serving the path now), approving a plan
    past vdb's quota that only the commit's guard caught. The give-back goes to the device
    the workload's disks_request names."""
    storage.ok(
        "add-node",
        {"nodename": "n", "resource": {"volumes": ["/data0:1T"], "disks": [
            "/dev/vda:/data0:1000:1000:1G:1G", "/dev/vdb:/:1000:1000:1G:1G"]}},
    )  # fmt: skip
    workload = _deployed(storage, {"volumes": ["AUTO:/d:rw:1G:600"]})
    assert [d["device"] for d in workload["disks_request"]] == ["/dev/vda"]
    _deployed(storage, {"volumes": ["/var/log:/log:rw:0:700"]})  # vdb: 700 of 1000 used
    storage.ok(
        "set-node-resource-capacity",
        {"nodename": "n", "resource_request": {"disks": [
            "/dev/vda:/other:1000:1000:1G:1G", "/dev/vdb:/,/data0:1000:1000:1G:1G"]},
         "delta": False, "incr": True},
    )  # fmt: skip
    grown = _realloc(storage, workload, {"volumes": ["AUTO:/d:rw:1G"]})
    line = failure_line(grown, "calculate-realloc", "resource-storage")
    assert "not enough" in line, line
    shrunk = _realloc(storage, workload, {"volumes": ["AUTO:/d:rw:1G:-400"]})
    assert shrunk.status == 0, shrunk.stderr
    moved = {d["device"]: d["read_IOPS"] for d in shrunk.answer["delta_resource"]["disks_request"]}
    assert moved == {"/dev/vda": -600, "/dev/vdb": 200}
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [shrunk.answer["delta_resource"]],
         "delta": True, "incr": True},
    )  # fmt: skip
    used = {d["device"]: d["read_IOPS"] for d in info(storage, "n")["usage"]["disks"]}
    assert used == {"/dev/vda": 0, "/dev/vdb": 900}


def test_a_volume_held_whole_cannot_grow(storage: Plugin) -> None:
    """A monopoly binding takes a volume whole (usage = capacity); grown by a capacity edit,
    the volume would have free space, and upstream then places a normal binding beside the
    monopoly one. Refused in one line, nothing written; an edit in the stored form (core's
    rollback, restoring what was) and growing any other volume still go."""
    storage.ok("add-node", {"nodename": "n", "resource": {"volumes": ["/data0:10G", "/data1:10G"]}})
    [workload] = deploy(storage, {"volumes": ["AUTO:/whole:rwm:1G"]}).answer["workloads_resource"]
    storage.ok(
        "set-node-resource-usage",
        {"nodename": "n", "workloads_resource": [workload], "delta": True, "incr": True},
    )
    [(whole, held)] = next(iter(workload["volume_plan_request"].values())).items()
    assert held == 10 * G
    other = "/data1" if whole == "/data0" else "/data0"
    grown = [({"volumes": [f"{whole}:10G"]}, True), ({"volumes": [f"{whole}:20G"]}, False)]
    refused_capacity_edits(
        storage, grown, f"volume {whole} is held whole ({held} bytes): it cannot grow"
    )

    storage.ok(
        "set-node-resource-capacity",
        {"nodename": "n", "resource_request": {"volumes": [f"{other}:10G"]}, "delta": True,
         "incr": True},
    )  # fmt: skip
    [normal] = deploy(storage, {"volumes": ["AUTO:/n:rw:5G"]}).answer["workloads_resource"]
    assert list(next(iter(normal["volume_plan_request"].values()))) == [other]


MOUNTS = {"volumes": [f"/mnt/m{i}:/d{i}:rw" for i in range(1024)]}
"""1,024 mount bindings (22 KB): the most a request may hold."""


def test_a_deploy_is_bounded_by_its_answer_not_by_core_s_timeout(storage: Plugin) -> None:
    """Upstream, and we until 0.8, worked out every binding of every workload: 1,000 copies of
    1,024 bindings took 12 s, 10,000 ran past core's 30 s. Capacity is capped at what one
    answer may hold (2**20 bindings), a deploy past it is refused in one line, and workloads
    placed alike are worked out once."""
    storage.scheduler = {"max_deploy_count": 10_000}  # core's default, not upstream tests' 100
    storage.write_config()
    storage.ok(
        "add-node",
        {
            "nodename": "n",
            "resource": {"volumes": ["/data0:1T"], "disks": ["/dev/vda:/mnt:9:9:0:0"]},
        },
    )
    capacity = storage.ok(
        "get-nodes-deploy-capacity", {"nodenames": ["n"], "workload_resource": MOUNTS}
    )
    assert capacity["nodes_deploy_capacity_map"]["n"]["Capacity"] == 1024
    line = failure_line(deploy(storage, MOUNTS, count=10_000), "calculate-deploy", storage.program)
    assert line.endswith(
        "deploy_count 10000 of 1024 bindings each is 10240000 bindings in one answer, more "
        "than 1048576: deploy fewer workloads a call"
    ), line
    answer = deploy(storage, MOUNTS, count=3).answer
    [one, *others] = answer["workloads_resource"]
    assert len(one["volumes_request"]) == 1024 and others == [one, one]
