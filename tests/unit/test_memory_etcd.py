"""The in-memory etcd the unit tests trust (``tests/unit/memory_etcd.py``), held to the contract
real etcd meets through both transports (``tests/etcd_contract.py``)."""

from __future__ import annotations

import pytest

from resource_extend.ledger.etcd.transport import Reply, Request, Transport
from tests.etcd_contract import PASSWORD, USER, TransportContract
from tests.unit.memory_etcd import MemoryEtcd

HEALTHY, DOWN, SILENT = range(3)
"""The fake's endpoints: one each for a healthy etcd, a refused connection, a hung one."""


class _Endpoint:
    """A transport that sends every request to one endpoint of a :class:`MemoryEtcd`, whichever
    the caller names: the contract asks endpoint 0 for each of them."""

    def __init__(self, etcd: MemoryEtcd, endpoint: int) -> None:
        self._etcd = etcd
        self._endpoint = endpoint

    def send(self, endpoint: int, request: Request, reply: type[Reply], timeout: float) -> Reply:
        return self._etcd.send(self._endpoint, request, reply, timeout)

    def drop(self, endpoint: int) -> None:
        self._etcd.drop(self._endpoint)

    def close(self) -> None:
        self._etcd.close()


class TestMemoryEtcd(TransportContract):
    @pytest.fixture(autouse=True)
    def _etcd(self) -> None:
        self.memory = MemoryEtcd(endpoints=3)
        self.memory.down.add(DOWN)
        self.memory.silent.add(SILENT)
        self.secured = MemoryEtcd(users={USER: (PASSWORD, b"/test-")})

    def transport(self) -> Transport:
        return _Endpoint(self.memory, HEALTHY)

    def unreachable(self) -> Transport:
        return _Endpoint(self.memory, DOWN)

    def silent(self) -> Transport:
        return _Endpoint(self.memory, SILENT)

    def losing_next_answer(self) -> Transport:
        self.memory.lose_next_answer()
        return _Endpoint(self.memory, HEALTHY)

    def as_user(self, name: str, password: str) -> Transport:
        return self.secured.as_user(name, password)
