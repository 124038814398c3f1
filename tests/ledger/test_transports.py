"""The HTTP and the gRPC transport, against real etcd, held to the contract every transport
meets (``tests/etcd_contract.py``): the same tests the in-memory fake passes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from resource_extend.ledger.etcd.connection import open_transport
from resource_extend.ledger.etcd.transport import Transport
from resource_extend.ledger.host.config import Auth, EtcdConfig
from tests.etcd_contract import TransportContract
from tests.etcd_server import Member, free_port
from tests.faults import AnswerDroppingProxy, SilentListener
from tests.ledger.transports import Over
from tests.secured_etcd import start_auth_member


@pytest.fixture(scope="module")
def auth_member(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Member]:
    """An etcd of the module's own with auth on (``tests.secured_etcd``)."""
    member = start_auth_member(tmp_path_factory.mktemp("auth"))
    yield member
    member.kill()


class _OverRealEtcd(TransportContract):
    over: Over

    @pytest.fixture(autouse=True)
    def _servers(self, etcd_endpoints: list[str], auth_member: Member) -> Iterator[None]:
        self.endpoint = etcd_endpoints[0]
        self.auth_endpoint = auth_member.client_url
        self._faults: list[SilentListener | AnswerDroppingProxy] = []
        yield
        for fault in self._faults:
            fault.close()

    def _to(self, url: str, auth: Auth | None = None) -> Transport:
        config = EtcdConfig(machines=[url], transport=self.over, auth=auth or Auth())
        return open_transport(config)

    def transport(self) -> Transport:
        return self._to(self.endpoint)

    def unreachable(self) -> Transport:
        return self._to(f"http://127.0.0.1:{free_port()}")

    def silent(self) -> Transport:
        listener = SilentListener()
        self._faults.append(listener)
        return self._to(listener.url)

    def losing_next_answer(self) -> Transport:
        proxy = AnswerDroppingProxy(self.endpoint)
        self._faults.append(proxy)
        proxy.arm(1)
        return self._to(proxy.url)

    def as_user(self, name: str, password: str) -> Transport:
        return self._to(self.auth_endpoint, Auth(username=name, password=password))


class TestHttpTransport(_OverRealEtcd):
    over = "http"


class TestGrpcTransport(_OverRealEtcd):
    over = "grpc"
