"""etcd's messages as the gRPC transport builds them (ledger/etcd/protos.py): every field the
``etcd3`` package's generated modules (etcd 3.3's) carry has the same number, type and place
here, and the fields etcd 3.4 added, which those lack, are read. (Against real etcd:
``tests/ledger/test_messages.py``.)"""

from __future__ import annotations

import ast
import importlib.util
import os

import msgspec
from google.protobuf import descriptor_pool, json_format

from resource_extend.ledger.etcd import protos, wire


def etcd3_pool() -> descriptor_pool.DescriptorPool:
    """The descriptors etcd3 0.12's generated modules carry, read from their source as data
    (the modules themselves load only on protobuf's pure-Python backend)."""
    spec = importlib.util.find_spec("etcd3")
    assert spec is not None and spec.submodule_search_locations
    folder = os.path.join(spec.submodule_search_locations[0], "etcdrpc")
    pool = descriptor_pool.DescriptorPool()
    for name in ("kv_pb2.py", "auth_pb2.py", "rpc_pb2.py"):
        with open(os.path.join(folder, name), encoding="utf-8") as file:
            tree = ast.parse(file.read())
        found = next(
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.keyword) and node.arg == "serialized_pb"
        )
        literal = ast.literal_eval(found.args[0] if isinstance(found, ast.Call) else found)
        pool.AddSerializedFile(literal.encode("latin-1") if isinstance(literal, str) else literal)
    return pool


def test_every_field_etcd3_knows_is_the_same_here() -> None:
    old = etcd3_pool()
    compared = 0
    for name in protos.MESSAGES:
        full = name if name.startswith("mvccpb.") else f"{protos.PACKAGE}.{name}"
        theirs, ours = old.FindMessageTypeByName(full), protos.POOL.FindMessageTypeByName(full)
        for field in theirs.fields:
            mine = ours.fields_by_number[field.number]
            kind = field.message_type or field.enum_type
            my_kind = mine.message_type or mine.enum_type
            assert (mine.name, mine.type, mine.is_repeated) == (
                field.name,
                field.type,
                field.is_repeated,
            ), full
            assert (kind and kind.full_name) == (my_kind and my_kind.full_name), full
            oneof = field.containing_oneof
            assert (oneof and oneof.name) == (mine.containing_oneof and mine.containing_oneof.name)
            compared += 1
    for name, values in protos.ENUMS.items():
        theirs_enum = old.FindEnumTypeByName(f"{protos.PACKAGE}.{name}")
        assert [v.name for v in theirs_enum.values] == list(values)
        assert [v.number for v in theirs_enum.values] == list(range(len(values)))
    assert compared >= 80  # (87 in etcd3 0.12)


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
