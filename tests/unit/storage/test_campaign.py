"""The shape of the model-based campaign that found the round-three edges, in seconds: random
sequences of capacity edits, deploy + commit, realloc + commit, release, a commit lost and
repaired by a fix, each a core verb run in this process against the in-memory etcd
(``tests.unit.memory_etcd``), as core runs them. After every step the node is checked against a
small reference model, the workloads held:

* usage is their sum, for storage, every volume and every disk (``get-node-resource-info``
  with them has no diff, and the usage read back says so figure by figure);
* no volume and no disk quota is past its capacity;
* a volume a monopoly binding holds is held by no other workload.

The same verbs against real etcd, through the installed binary, are tested in
``tests/storage/``; this is their logic under long random sequences."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    rule,
    run_state_machine_as_test,
)

from resource_extend.commands import registry
from resource_extend.commands.protocol import CallIO, Session
from resource_extend.commands.storage.plugin import PLUGIN as STORAGE
from resource_extend.ledger.store import Store
from tests.unit.memory_etcd import MemoryEtcd

NODE = "n"
G = 2**30
QUOTA = ("read_IOPS", "write_IOPS", "read_bps", "write_bps")

REQUESTS = st.one_of(
    st.sampled_from([1, 3, 6]).map(lambda g: {"volumes": [f"AUTO:/a:rw:{g}G"]}),
    st.just({"volumes-request": ["AUTO:/l:rw:1G"], "volumes-limit": ["AUTO:/l:rw:2G"]}),
    st.just({"volumes": ["AUTO:/m:rwm:1G"]}),
    st.sampled_from([10, 40, 70]).map(lambda q: {"volumes": [f"AUTO:/q:rw:1G:{q}:{q}:0:0"]}),
    st.sampled_from([20, 60]).map(lambda q: {"volumes": [f"/mnt/logs:/logs:rw:0:{q}:{q}:0:0"]}),
    st.just({"storage": "1G"}),
)
"""A normal binding, one whose limit exceeds its request, a monopoly one, one with disk quota on
a volume, a mount charging the disk that serves /mnt (which a capacity edit may add), and
storage alone."""


def flags(binding: str) -> str:
    """A binding's flags (``rw``, ``mrw``): its third field."""
    return binding.split(":")[2]


class Campaign(RuleBasedStateMachine):
    def __init__(self, config: Path) -> None:
        super().__init__()
        self.config = config
        self.etcd = MemoryEtcd()
        self.held: list[dict[str, Any]] = []
        self.volumes = 2

    def call(self, verb: str, request: dict[str, Any]) -> Any:
        """The verb's answer, or None when it refused (in one line, as core sees it)."""
        stdin, out, err = io.BytesIO(json.dumps(request).encode()), io.BytesIO(), io.BytesIO()
        session: Session[Any] = Session(STORAGE, str(self.config), CallIO(stdin, out, err))
        session.__dict__["store"] = Store(session.config.etcd, session.kind, self.etcd)
        try:
            found = registry.load_verb(STORAGE, verb)
            assert found is not None, verb
            found(session)
        except SystemExit as exc:
            assert exc.code != 0, f"{verb} exited 0 by SystemExit"
            error = err.getvalue().decode()
            assert out.getvalue() == b"" and error.count("\n") == 1, error
            assert "internal error" not in error, error
            return None
        assert err.getvalue() == b"", err.getvalue()
        return json.loads(out.getvalue())

    def commit(self, workloads: list[dict[str, Any]], *, incr: bool) -> Any:
        return self.call(
            "set-node-resource-usage",
            {"nodename": NODE, "workloads_resource": workloads, "delta": True, "incr": incr},
        )

    @initialize()
    def add_node(self) -> None:
        node = {
            "volumes": ["/data0:10G", "/data1:10G"],
            "disks": ["/dev/vda:/,/data0,/data1:100:100:1G:1G"],
            "storage": "5G",
        }
        assert self.call("add-node", {"nodename": NODE, "resource": node}) is not None

    # -- core's flows ------------------------------------------------------------------------

    @rule(request=REQUESTS, count=st.integers(1, 2))
    def deploy(self, request: dict[str, Any], count: int) -> None:
        planned = self.call(
            "calculate-deploy",
            {"nodename": NODE, "deploy_count": count, "workload_resource_request": request},
        )
        if planned is None:
            return
        workloads = planned["workloads_resource"]
        assert self.commit(workloads, incr=True) is not None, "a planned deploy was refused"
        self.held += workloads

    @rule(data=st.data())
    def realloc(self, data: st.DataObject) -> None:
        if not self.held:
            return
        index = data.draw(st.integers(0, len(self.held) - 1))
        workload = self.held[index]
        normal = [
            b for b in workload["volumes_request"] if b.startswith("AUTO:") and "m" not in flags(b)
        ]
        if normal:
            source, destination, mode, size, *_ = data.draw(st.sampled_from(normal)).split(":")
            change = data.draw(st.sampled_from(["1G", f"-{int(size) + 1}"]))
            asked = {"volumes": [f"{source}:{destination}:{mode}:{change}"]}
        else:
            asked = {"storage": data.draw(st.sampled_from(["1G", "-1"]))}
        answer = self.call(
            "calculate-realloc",
            {"nodename": NODE, "workload_resource": workload, "workload_resource_request": asked},
        )
        if answer is None:
            return
        assert self.commit([answer["delta_resource"]], incr=True) is not None
        self.held[index] = answer["workload_resource"]
        if asked.get("volumes", [""])[0].split(":")[-1].startswith("-"):  # given back whole
            kept = answer["workload_resource"]["volumes_request"]
            assert not [b for b in kept if b.split(":")[1] == destination], kept

    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        if self.held:
            workload = self.held.pop(data.draw(st.integers(0, len(self.held) - 1)))
            assert self.commit([workload], incr=False) is not None, "a release was refused"

    @rule(request=REQUESTS)
    def lost_commit_then_fix(self, request: dict[str, Any]) -> None:
        """Core planned a deploy and crashed before its commit: the workload runs, usage lacks
        it, and the operator's fix makes usage the workloads' sum."""
        planned = self.call(
            "calculate-deploy",
            {"nodename": NODE, "deploy_count": 1, "workload_resource_request": request},
        )
        if planned is None:
            return
        self.held += planned["workloads_resource"]
        fixed = self.call("fix-node-resource", {"nodename": NODE, "workloads_resource": self.held})
        assert fixed is not None, "the fix failed"

    # -- an operator's capacity edits --------------------------------------------------------

    @rule(
        edit=st.sampled_from(["new volume", "grow volume", "shrink volume", "disk", "storage"]),
        data=st.data(),
    )
    def capacity(self, edit: str, data: st.DataObject) -> None:
        incr = edit != "shrink volume"
        if edit == "new volume":
            resource: dict[str, Any] = {"volumes": [f"/data{self.volumes}:10G"]}
            self.volumes += 1
        elif edit in ("grow volume", "shrink volume"):
            paths = sorted(self.read()["capacity"]["volumes"] or {})
            if not paths:  # every volume shrunk away
                return
            resource = {"volumes": [f"{data.draw(st.sampled_from(paths))}:5G"]}
        elif edit == "disk":
            resource = {"disks": ["/dev/vdb:/mnt:100:100:0:0"]}
        else:
            resource = {"storage": "5G"}
        self.call(
            "set-node-resource-capacity",
            {"nodename": NODE, "resource_request": resource, "delta": True, "incr": incr},
        )

    # -- the reference model -----------------------------------------------------------------

    def read(self) -> Any:
        return self.call("get-node-resource-info", {"nodename": NODE})

    @invariant()
    def usage_is_the_workloads_sum(self) -> None:
        info = self.call(
            "get-node-resource-info", {"nodename": NODE, "workloads_resource": self.held}
        )
        assert info["diffs"] == [], info["diffs"]
        usage = info["usage"]
        volumes: Counter[str] = Counter()
        disks: dict[str, Counter[str]] = {}
        for workload in self.held:
            for plan in workload["volume_plan_request"].values():
                volumes.update(plan)
            for disk in workload["disks_request"] or ():
                disks.setdefault(disk["device"], Counter()).update(
                    {key: disk[key] for key in QUOTA}
                )
        assert usage["storage"] == sum(w["storage_request"] for w in self.held)
        used = usage["volumes"] or {}
        for path in {*used, *volumes}:
            assert used.get(path, 0) == volumes[path], path
        stored = {disk["device"]: disk for disk in usage["disks"] or ()}
        for device in {*stored, *disks}:
            for key in QUOTA:
                assert stored.get(device, {}).get(key, 0) == disks.get(device, Counter())[key]

    @invariant()
    def nothing_is_past_its_capacity(self) -> None:
        state = self.read()
        capacity, usage = state["capacity"], state["usage"]
        for path, used in (usage["volumes"] or {}).items():
            assert 0 <= used <= (capacity["volumes"] or {}).get(path, 0), path
        limits = {disk["device"]: disk for disk in capacity["disks"] or ()}
        for disk in usage["disks"] or ():
            for key in QUOTA:
                assert 0 <= disk[key] <= limits[disk["device"]][key], (disk["device"], key)

    @invariant()
    def a_monopoly_volume_is_never_shared(self) -> None:
        holders: dict[str, list[tuple[int, bool]]] = {}
        for index, workload in enumerate(self.held):
            for binding, plan in workload["volume_plan_request"].items():
                whole = "m" in flags(binding)
                for path in plan:
                    holders.setdefault(path, []).append((index, whole))
        for path, held in holders.items():
            if any(whole for _, whole in held):
                assert len({index for index, _ in held}) == 1, (path, held)


def test_random_sequences_keep_usage_the_workloads_sum_within_capacity(tmp_path: Path) -> None:
    config = tmp_path / "storage.yaml"
    config.write_text(
        json.dumps(
            {
                "etcd": {"machines": ["http://10.0.0.1:2379"], "prefix": "/campaign"},
                "scheduler": {"max_deploy_count": 100},
                "resident": False,
            }
        )
    )
    run_state_machine_as_test(
        lambda: Campaign(config),  # type: ignore[arg-type]  # a factory is accepted
        settings=settings(max_examples=150, stateful_step_count=30, deadline=None),
    )
