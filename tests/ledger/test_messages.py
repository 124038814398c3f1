"""etcd's messages as the gRPC transport builds them (``ledger.etcd.protos``) read what real
etcd sends, field for field as its own JSON gateway reads them: the gateway decodes with etcd's
own descriptors, so any field numbered wrong here shows as a difference."""

from __future__ import annotations

import subprocess
from typing import Any

import msgspec
from google.protobuf import json_format

from resource_extend.commands.doctor.durability import check_durability
from resource_extend.ledger.etcd import protos, wire
from resource_extend.ledger.etcd.connection import open_transport
from resource_extend.ledger.etcd.grpc_transport import GrpcTransport
from resource_extend.ledger.etcd.transport import HttpTransport
from resource_extend.ledger.host.config import EtcdConfig
from tests.etcd_server import Cluster, etcdctl_binary, free_port

CHANGING = {"header", "raftIndex", "raftAppliedIndex", "raftTerm"}
"""What may move between two asks of an idle etcd."""


def by_grpc(url: str, service: str, method: str, **fields: Any) -> dict[str, Any]:
    """A reply over gRPC, as a dict in the gateway's JSON form."""
    transport = GrpcTransport(EtcdConfig(machines=[url]))
    try:
        channel = transport._client(0, 5).channel
        answer = protos.method(channel, service, method)(
            protos.message(f"{method}Request")(**fields), 5
        )
    finally:
        transport.close()
    found: dict[str, Any] = json_format.MessageToDict(answer, preserving_proto_field_name=True)
    return found


def by_gateway(url: str, path: str) -> dict[str, Any]:
    transport = HttpTransport(EtcdConfig(machines=[url]))
    try:
        raw = transport._post(0, path, b"{}", 5)
    finally:
        transport.close()
    found: dict[str, Any] = msgspec.json.decode(raw)
    return found


def steady(reply: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in reply.items() if name not in CHANGING}


def test_a_status_reads_every_field_the_gateway_reads(etcd_endpoints: list[str]) -> None:
    url = etcd_endpoints[0]
    over_grpc = by_grpc(url, "Maintenance", "Status")
    over_http = by_gateway(url, "/v3/maintenance/status")
    assert set(over_grpc) == set(over_http)
    assert steady(over_grpc) == steady(over_http)
    assert "dbSizeInUse" in over_grpc  # etcd 3.4's


def test_a_learner_is_read_as_one_and_doctor_counts_it_apart(member: Cluster) -> None:
    url = member.endpoints[0]
    learner_peer = f"http://127.0.0.1:{free_port()}"
    subprocess.run(
        [etcdctl_binary(), f"--endpoints={url}", "member", "add", "learner", "--learner",
         f"--peer-urls={learner_peer}"],
        check=True, capture_output=True, timeout=30,
    )  # fmt: skip
    over_grpc = by_grpc(url, "Cluster", "MemberList")
    over_http = by_gateway(url, "/v3/cluster/member/list")
    assert over_grpc["members"] == over_http["members"]
    assert sorted(m.get("isLearner", False) for m in over_grpc["members"]) == [False, True]
    findings = []
    for over in ("http", "grpc"):
        transport = open_transport(EtcdConfig(machines=[url], transport=over))
        try:
            status = transport.send(0, wire.StatusRequest(), wire.StatusResponse, 5)
            findings.append(check_durability(transport, 5, [status.version]))
        finally:
            transport.close()
    assert findings[0] == findings[1]
    assert findings[1].message.startswith("one voting member,"), findings[1].message
