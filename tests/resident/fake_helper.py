"""A resident helper with one fault, run as a process of its own (a helper that stops or dies
must not take the test with it):

    python -m tests.resident.fake_helper FAULT CONFIG

It is the real helper (``commands.resident.daemon``), except at one point of a call:

* ``dies-before-answering``: the verb runs (its write lands), then the process exits without
  answering: a helper killed between its write and its reply.
* ``hangs-after-writing``: the call falls silent (no more heartbeats) and hangs for good once
  etcd has answered its write: alive, its write made, and never answering.
* ``hangs-before-writing``: the call falls silent and hangs once the client allowed the write,
  before sending it: a call that might yet send it, were it ever to go on.

Each fault is in the call's process (forked per call); the helper itself goes on serving.

(A hang, not SIGSTOP sent to itself: a process that stops itself may run on a little first, or
not stop at all under a shell's job control. The tests stop real helpers from outside.)
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from resource_extend.commands.gpu.plugin import PLUGIN as GPU
from resource_extend.commands.resident import client as resident
from resource_extend.commands.resident.arbiter import Helper
from resource_extend.commands.resident.call_process import CallProcess
from resource_extend.commands.resident.claim import claim
from resource_extend.ledger.host import rundir

FAULTS = ("dies-before-answering", "hangs-after-writing", "hangs-before-writing")


class Faulty(CallProcess):
    fault = ""
    running: Faulty | None = None
    """The call process running here (a forked one: each is its own)."""

    def _run(self, *args: Any, **kwargs: Any) -> tuple[int, bytes, bytes]:
        Faulty.running = self
        result = super()._run(*args, **kwargs)
        if self.fault == "dies-before-answering":
            os._exit(0)
        return result


def hang_around_writes(fault: str) -> None:
    from resource_extend.ledger.etcd import wire
    from resource_extend.ledger.etcd.connection import Connection

    send = Connection.txn
    never = threading.Event()

    def hang() -> None:
        assert Faulty.running is not None
        Faulty.running.heartbeat.stop()
        never.wait()

    def txn(
        self: Connection, request: wire.TxnRequest, *, write: bool = False, keep: float = 0.0
    ) -> wire.TxnResponse:
        if write and fault == "hangs-before-writing":
            hang()
        reply = send(self, request, write=write, keep=keep)
        if write and fault == "hangs-after-writing":
            hang()
        return reply

    Connection.txn = txn  # type: ignore[method-assign]


def main(fault: str, config_path: str) -> None:
    assert fault in FAULTS, fault
    name = resident.socket_name(config_path)
    directory, path = rundir.open_private(GPU.name, create=True)
    claimed = claim(GPU, directory, name)
    assert claimed is not None, "a helper already serves this config"
    listener, inode = claimed
    socket_path = os.path.join(path, name)
    helper = Helper(GPU, listener, directory, name, inode, config_path, socket_path)
    Faulty.fault = fault
    helper.call_process = Faulty
    hang_around_writes(fault)
    helper.serve()


if __name__ == "__main__":
    main(*sys.argv[1:])
