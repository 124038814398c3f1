"""etcd's protobuf messages and gRPC methods, built here from their field numbers.

The gRPC transport needs some twenty of etcd's messages. Their descriptors are made at import
from :data:`MESSAGES`: each field's name, number and type as etcd 3.5's ``rpc.proto`` and
``kv.proto`` give them (facts of the wire format; no ``.proto`` text and no generated module is
carried). Protobuf's compiled backend (upb) then encodes and decodes them in C. The methods are
called by their paths (``/etcdserverpb.KV/Range``), without generated stubs.

Why not the ``etcd3`` package's generated modules, as before: they are etcd 3.3's (so a reply's
``isLearner`` and ``dbSizeInUse`` were dropped), an old ``protoc``'s (upb refuses them, and the
pure-Python backend decodes a range of 1,000 records slower than etcd sends it), and the package
is unmaintained. ``tests/unit/test_protos.py`` checks every field here against etcd3's
descriptors where those have it, and the newer ones against real etcd's replies.
"""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

PACKAGE = "etcdserverpb"


class Field(NamedTuple):
    name: str
    number: int
    type: str
    """A scalar (``bytes``, ``string``, ``bool``, ``int64``, ``uint64``), or a message or enum
    of this package (``RangeRequest.SortOrder``), or of another (``mvccpb.KeyValue``)."""
    repeated: bool = False
    oneof: str = ""
    """The ``oneof`` the field belongs to (at most one of its fields is set)."""


def many(name: str, number: int, kind: str) -> Field:
    return Field(name, number, kind, repeated=True)


HEADER = Field("header", 1, "ResponseHeader")

ENUMS: dict[str, tuple[str, ...]] = {
    "RangeRequest.SortOrder": ("NONE", "ASCEND", "DESCEND"),
    "RangeRequest.SortTarget": ("KEY", "VERSION", "CREATE", "MOD", "VALUE"),
    "Compare.CompareResult": ("EQUAL", "GREATER", "LESS", "NOT_EQUAL"),
    "Compare.CompareTarget": ("VERSION", "CREATE", "MOD", "VALUE", "LEASE"),
    "AlarmRequest.AlarmAction": ("GET", "ACTIVATE", "DEACTIVATE"),
    "AlarmType": ("NONE", "NOSPACE", "CORRUPT"),
}
"""etcd's enums the messages use, by name; each value's number is its place."""

MESSAGES: dict[str, tuple[Field, ...]] = {
    "mvccpb.KeyValue": (
        Field("key", 1, "bytes"),
        Field("create_revision", 2, "int64"),
        Field("mod_revision", 3, "int64"),
        Field("version", 4, "int64"),
        Field("value", 5, "bytes"),
        Field("lease", 6, "int64"),
    ),
    "ResponseHeader": (
        Field("cluster_id", 1, "uint64"),
        Field("member_id", 2, "uint64"),
        Field("revision", 3, "int64"),
        Field("raft_term", 4, "uint64"),
    ),
    "RangeRequest": (
        Field("key", 1, "bytes"),
        Field("range_end", 2, "bytes"),
        Field("limit", 3, "int64"),
        Field("revision", 4, "int64"),
        Field("sort_order", 5, "RangeRequest.SortOrder"),
        Field("sort_target", 6, "RangeRequest.SortTarget"),
        Field("serializable", 7, "bool"),
        Field("keys_only", 8, "bool"),
        Field("count_only", 9, "bool"),
        Field("min_mod_revision", 10, "int64"),
        Field("max_mod_revision", 11, "int64"),
        Field("min_create_revision", 12, "int64"),
        Field("max_create_revision", 13, "int64"),
    ),
    "RangeResponse": (
        HEADER,
        many("kvs", 2, "mvccpb.KeyValue"),
        Field("more", 3, "bool"),
        Field("count", 4, "int64"),
    ),
    "PutRequest": (
        Field("key", 1, "bytes"),
        Field("value", 2, "bytes"),
        Field("lease", 3, "int64"),
        Field("prev_kv", 4, "bool"),
        Field("ignore_value", 5, "bool"),
        Field("ignore_lease", 6, "bool"),
    ),
    "PutResponse": (HEADER, Field("prev_kv", 2, "mvccpb.KeyValue")),
    "DeleteRangeRequest": (
        Field("key", 1, "bytes"),
        Field("range_end", 2, "bytes"),
        Field("prev_kv", 3, "bool"),
    ),
    "DeleteRangeResponse": (
        HEADER,
        Field("deleted", 2, "int64"),
        many("prev_kvs", 3, "mvccpb.KeyValue"),
    ),
    "RequestOp": (
        Field("request_range", 1, "RangeRequest", oneof="request"),
        Field("request_put", 2, "PutRequest", oneof="request"),
        Field("request_delete_range", 3, "DeleteRangeRequest", oneof="request"),
        Field("request_txn", 4, "TxnRequest", oneof="request"),
    ),
    "ResponseOp": (
        Field("response_range", 1, "RangeResponse", oneof="response"),
        Field("response_put", 2, "PutResponse", oneof="response"),
        Field("response_delete_range", 3, "DeleteRangeResponse", oneof="response"),
        Field("response_txn", 4, "TxnResponse", oneof="response"),
    ),
    "Compare": (
        Field("result", 1, "Compare.CompareResult"),
        Field("target", 2, "Compare.CompareTarget"),
        Field("key", 3, "bytes"),
        Field("version", 4, "int64", oneof="target_union"),
        Field("create_revision", 5, "int64", oneof="target_union"),
        Field("mod_revision", 6, "int64", oneof="target_union"),
        Field("value", 7, "bytes", oneof="target_union"),
        Field("lease", 8, "int64", oneof="target_union"),
        Field("range_end", 64, "bytes"),
    ),
    "TxnRequest": (
        many("compare", 1, "Compare"),
        many("success", 2, "RequestOp"),
        many("failure", 3, "RequestOp"),
    ),
    "TxnResponse": (HEADER, Field("succeeded", 2, "bool"), many("responses", 3, "ResponseOp")),
    "StatusRequest": (),
    "StatusResponse": (
        HEADER,
        Field("version", 2, "string"),
        Field("dbSize", 3, "int64"),
        Field("leader", 4, "uint64"),
        Field("raftIndex", 5, "uint64"),
        Field("raftTerm", 6, "uint64"),
        Field("raftAppliedIndex", 7, "uint64"),
        many("errors", 8, "string"),
        Field("dbSizeInUse", 9, "int64"),
        Field("isLearner", 10, "bool"),
    ),
    "AlarmRequest": (
        Field("action", 1, "AlarmRequest.AlarmAction"),
        Field("memberID", 2, "uint64"),
        Field("alarm", 3, "AlarmType"),
    ),
    "AlarmMember": (Field("memberID", 1, "uint64"), Field("alarm", 2, "AlarmType")),
    "AlarmResponse": (HEADER, many("alarms", 2, "AlarmMember")),
    "MemberListRequest": (Field("linearizable", 1, "bool"),),
    "Member": (
        Field("ID", 1, "uint64"),
        Field("name", 2, "string"),
        many("peerURLs", 3, "string"),
        many("clientURLs", 4, "string"),
        Field("isLearner", 5, "bool"),
    ),
    "MemberListResponse": (HEADER, many("members", 2, "Member")),
    "AuthenticateRequest": (Field("name", 1, "string"), Field("password", 2, "string")),
    "AuthenticateResponse": (HEADER, Field("token", 2, "string")),
}
"""The messages the transport sends and reads, by name (``mvccpb.`` names kv.proto's package;
the rest are ``etcdserverpb``'s), each with its fields."""

_Proto = descriptor_pb2.FieldDescriptorProto
_SCALARS = {
    "bytes": _Proto.TYPE_BYTES,
    "string": _Proto.TYPE_STRING,
    "bool": _Proto.TYPE_BOOL,
    "int64": _Proto.TYPE_INT64,
    "uint64": _Proto.TYPE_UINT64,
}


def _full_name(name: str) -> str:
    return f".{name}" if name.startswith("mvccpb.") else f".{PACKAGE}.{name}"


def _add_field(message: descriptor_pb2.DescriptorProto, field: Field, oneofs: list[str]) -> None:
    added = message.field.add(name=field.name, number=field.number)
    added.label = _Proto.LABEL_REPEATED if field.repeated else _Proto.LABEL_OPTIONAL
    if field.type in _SCALARS:
        added.type = _SCALARS[field.type]
    else:
        added.type = _Proto.TYPE_ENUM if field.type in ENUMS else _Proto.TYPE_MESSAGE
        added.type_name = _full_name(field.type)
    if field.oneof:
        if field.oneof not in oneofs:
            oneofs.append(field.oneof)
            message.oneof_decl.add(name=field.oneof)
        added.oneof_index = oneofs.index(field.oneof)


def _files() -> list[descriptor_pb2.FileDescriptorProto]:
    """kv.proto's package, then rpc.proto's, which uses it."""
    kv = descriptor_pb2.FileDescriptorProto(name="kv.proto", package="mvccpb", syntax="proto3")
    rpc = descriptor_pb2.FileDescriptorProto(
        name="rpc.proto", package=PACKAGE, syntax="proto3", dependency=["kv.proto"]
    )
    messages: dict[str, descriptor_pb2.DescriptorProto] = {}
    for name, fields in MESSAGES.items():
        into, short = (kv, name.split(".")[1]) if name.startswith("mvccpb.") else (rpc, name)
        message = messages[name] = into.message_type.add(name=short)
        oneofs: list[str] = []
        for field in fields:
            _add_field(message, field, oneofs)
    for name, values in ENUMS.items():
        owner, _, short = name.rpartition(".")
        enum = (messages[owner].enum_type if owner else rpc.enum_type).add(name=short)
        for number, value in enumerate(values):
            enum.value.add(name=value, number=number)
    return [kv, rpc]


def _pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    for file in _files():
        pool.Add(file)
    return pool


POOL = _pool()
"""etcd's messages, made when this module is imported."""


@cache
def message(name: str) -> Any:
    """The message class ``etcdserverpb.<name>`` (``RangeRequest``)."""
    descriptor = POOL.FindMessageTypeByName(f"{PACKAGE}.{name}")
    return message_factory.GetMessageClass(descriptor)


def method(channel: grpc.Channel, service: str, name: str) -> grpc.UnaryUnaryMultiCallable:
    """``etcdserverpb.<service>/<name>`` on ``channel``: it takes ``<name>Request`` and
    answers ``<name>Response``."""
    return channel.unary_unary(
        f"/{PACKAGE}.{service}/{name}",
        request_serializer=message(f"{name}Request").SerializeToString,
        response_deserializer=message(f"{name}Response").FromString,
    )
