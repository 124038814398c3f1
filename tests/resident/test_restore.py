"""etcd restored from a backup (a copy of its data directory put back) comes back at the
backup's revision, so revisions repeat: a write made after the restore by another writer can
land at the very ``mod_revision`` and seq that a record read before the restore names. A write
is decided on the record its own call read, never on one a process kept from an earlier call,
so the other writer's edit is never written over, and no volume is bound past its capacity.

Round six found it through the helper: a call process decided its next write on the record its
last write left, which the restore had undone, and passed every compare-and-swap."""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from resource_extend.commands.resident import client as resident
from tests.etcd_server import Member
from tests.plugin import Plugin, R, counts
from tests.resident.conftest import G, helper_pid, resident_plugin, wait_for
from tests.secured_etcd import start_member
from tests.storage.helpers import G as GIB

OWN_PROCESS = {"RESOURCE_GPU_RESIDENT": "0", "RESOURCE_STORAGE_RESIDENT": "0"}
"""A call that runs in a process of its own (no helper), as another writer's would."""


class Restorable:
    """One etcd member whose data directory can be copied aside and put back."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir()
        self.member: Member = start_member(directory)
        self.backup = directory / "backup"

    def save(self) -> None:
        """A backup: the data directory copied while the member is stopped."""
        self.member.kill()
        shutil.copytree(self.member.data_dir, self.backup)
        self._start()

    def restore(self) -> None:
        """The backup put back: etcd comes back at its revision."""
        self.member.kill()
        shutil.rmtree(self.member.data_dir)
        shutil.copytree(self.backup, self.member.data_dir)
        self._start()

    def _start(self) -> None:
        self.member.start()
        self.member.wait_healthy()


@pytest.fixture
def etcd(tmp_path: Path) -> Iterator[Restorable]:
    made = Restorable(tmp_path / "etcd")
    yield made
    made.member.kill()


def through_helper(plugin: Plugin, verb: str, request: Any) -> int:
    """Run a call through the helper, as the launcher does; the pid of the call process that
    served it."""
    link = resident.Link.connect(plugin.program, resident.socket_name(str(plugin.config)))
    assert link is not None, "no helper answers"
    try:
        config, code = str(plugin.config), resident.installation()
        sent = resident.call_request(verb, config, code, json.dumps(request).encode())
        assert link.call(verb, sent).status == 0, verb
    finally:
        link.close()
    return link.pid


ROUNDS = 8
"""Rounds of backup, write, restore, another's write and a write, until one meets the same call
process at both of its writes: what round six found; with two writes in two call processes, the
second's is read in its own call anyway."""


def restored_rounds(
    etcd: Restorable, plugin: Plugin, first: Callable[[], int], other: Callable[[], None],
    then: Callable[[], int], check: Callable[[], None],
) -> None:  # fmt: skip
    """Rounds (``ROUNDS`` at most) of: a backup, ``first`` through the helper, the restore,
    ``other`` in a process of its own (landing at the revision and seq ``first`` left), then
    through the helper, and ``check``; until ``first`` and ``then`` ran in one call process."""
    for _ in range(ROUNDS):
        etcd.save()
        served_first = first()
        etcd.restore()  # that write is undone, and its revision comes again
        other()
        served_then = then()
        check()
        shutil.rmtree(etcd.backup)
        if served_first == served_then:
            return
    raise AssertionError(f"in {ROUNDS} rounds no call process made both writes of one round")


def test_a_gpu_write_after_a_restore_keeps_the_other_writer_s_edit(
    etcd: Restorable, tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gpu = resident_plugin(Plugin([etcd.member.client_url], tmp_path))
    gpu.add("n1", {G: 64})
    wait_for(lambda: helper_pid(gpu), "the helper to answer")
    monkeypatch.setenv("HOME", str(gpu.workdir / "home"))  # calls from here: as the plugin's
    survivors = []

    def take(cards: int) -> dict[str, Any]:
        return {"nodename": "n1", "resource": R({G: cards}), "delta": True, "incr": True}

    def other() -> None:
        done = gpu.run("set-node-resource-usage", take(3), env=OWN_PROCESS)
        assert done.status == 0, done.stderr
        survivors.append(3)

    def then() -> int:
        served = through_helper(gpu, "set-node-resource-usage", take(1))
        survivors.append(1)
        return served

    def check() -> None:
        assert counts(gpu.info("n1")["usage"]) == {G: sum(survivors)}, "an edit was lost"
        verified = gpu.run("verify", None, "n1")
        assert verified.status == 0, verified.stdout + verified.stderr

    first = functools.partial(through_helper, gpu, "set-node-resource-usage", take(1))
    restored_rounds(etcd, gpu, first, other, then, check)
    gpu.stop_helper()


def test_no_volume_is_bound_past_its_capacity_after_a_restore(
    etcd: Restorable, tmp_path: Path, runtime: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = resident_plugin(
        Plugin([etcd.member.client_url], tmp_path, program="resource-storage")
    )
    storage.ok("add-node", {"nodename": "s1", "resource": {"volumes": ["/data0:64G"]}})
    wait_for(lambda: helper_pid(storage), "the helper to answer")
    monkeypatch.setenv("HOME", str(storage.workdir / "home"))  # calls from here: as the plugin's
    survivors = []

    def usage(size: int) -> dict[str, Any] | None:
        """A workload binding ``size`` GiB on the volume, planned here; None if it fits not."""
        binding = f"AUTO:/data:rw:{size}G"
        request = {"volumes-request": [binding], "volumes-limit": [binding]}
        planned = storage.call(
            "calculate-deploy",
            {"nodename": "s1", "deploy_count": 1, "workload_resource_request": request},
        )
        if planned.status != 0:
            return None
        workloads = planned.answer["workloads_resource"]
        return {"nodename": "s1", "workloads_resource": workloads, "delta": True, "incr": True}

    def bound(size: int) -> int:
        """Bind ``size`` GiB through the helper; the call process that did."""
        return through_helper(storage, "set-node-resource-usage", usage(size))

    def other() -> None:
        done = storage.run("set-node-resource-usage", usage(4), env=OWN_PROCESS)
        assert done.status == 0, done.stderr
        survivors.append(4)

    def then() -> int:
        served = bound(3)
        survivors.append(3)
        return served

    def check() -> None:
        info = storage.ok("get-node-resource-info", {"nodename": "s1"})
        assert info["usage"]["volumes"] == {"/data0": sum(survivors) * GIB}, "a bind was lost"
        verified = storage.run("verify", None, "s1")
        assert verified.status == 0, verified.stdout + verified.stderr

    restored_rounds(etcd, storage, functools.partial(bound, 3), other, then, check)
    left = 64 - sum(survivors)
    assert usage(left + 1) is None, f"{left + 1}G planned onto {left}G left"
    storage.stop_helper()
