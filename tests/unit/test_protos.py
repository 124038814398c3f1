"""etcd's messages as the gRPC transport decodes them (ledger/etcd/protos.py): the fields etcd
3.4 added, which the ``etcd3`` package's descriptors (etcd 3.3's) lack, are read."""

from __future__ import annotations

import msgspec
from google.protobuf import json_format

from resource_extend.ledger.etcd import protos, wire


def as_read(name: str, raw: bytes, reply: type[msgspec.Struct]) -> msgspec.Struct:
    """``raw`` (a message's bytes, as etcd sends them) as the transport reads a reply."""
    answer = protos.message(name).FromString(raw)
    as_json = json_format.MessageToJson(answer, preserving_proto_field_name=True, indent=None)
    return msgspec.json.decode(as_json, type=reply, strict=False)


def test_a_member_that_is_a_learner_is_read_as_one() -> None:
    """A MemberList reply of a voter and a learner, in etcd 3.4's bytes: field 2 of the reply
    holds the members; in each, 2 is the name and 5 ``isLearner``."""
    voter = b"\x12\x02m1"
    learner = b"\x12\x02m2" + b"\x28\x01"
    raw = b"\x12" + bytes((len(voter),)) + voter + b"\x12" + bytes((len(learner),)) + learner
    reply = as_read("MemberListResponse", raw, wire.MemberListResponse)
    assert isinstance(reply, wire.MemberListResponse)
    assert [(m.name, m.is_learner) for m in reply.members] == [("m1", False), ("m2", True)]


def test_a_status_says_what_is_in_use() -> None:
    """A Status reply in etcd 3.4's bytes: 3 is ``dbSize``, 9 ``dbSizeInUse``."""
    raw = b"\x18\xe8\x07" + b"\x48\xd8\x04"  # dbSize 1000, dbSizeInUse 600
    reply = as_read("StatusResponse", raw, wire.StatusResponse)
    assert isinstance(reply, wire.StatusResponse)
    assert (reply.db_size, reply.db_size_in_use) == (1000, 600)
