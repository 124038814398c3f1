"""The part of etcd's v3 KV API the store uses, as msgspec structs.

Field names and shapes are those of etcd's protobuf messages in their JSON form (what etcd's
HTTP gateway at ``/v3/kv/...`` speaks): bytes travel as base64, 64-bit integers may arrive as
strings, and fields at their default value are left out. The store builds requests from these
and reads the replies; a transport carries them (``ledger.etcd.transport``).
"""

from __future__ import annotations

from typing import Literal

import msgspec


class _Message(msgspec.Struct, omit_defaults=True, kw_only=True):
    pass


# -- requests ---------------------------------------------------------------------------------


class RangeRequest(_Message):
    key: bytes
    range_end: bytes = b""
    limit: int = 0
    revision: int = 0
    sort_order: Literal["NONE", "ASCEND", "DESCEND"] = "NONE"
    sort_target: Literal["KEY", "VERSION", "CREATE", "MOD", "VALUE"] = "KEY"
    keys_only: bool = False
    count_only: bool = False


class PutRequest(_Message):
    key: bytes
    value: bytes


class DeleteRangeRequest(_Message):
    key: bytes
    range_end: bytes = b""


class RequestOp(_Message):
    """Exactly one of the three is set."""

    request_range: RangeRequest | None = None
    request_put: PutRequest | None = None
    request_delete_range: DeleteRangeRequest | None = None


class Compare(_Message):
    key: bytes
    target: Literal["VERSION", "CREATE", "MOD", "VALUE"]
    result: Literal["EQUAL", "GREATER", "LESS", "NOT_EQUAL"] = "EQUAL"
    version: int = 0
    mod_revision: int = 0


class TxnRequest(_Message):
    compare: list[Compare] = msgspec.field(default_factory=list)
    success: list[RequestOp] = msgspec.field(default_factory=list)
    failure: list[RequestOp] = msgspec.field(default_factory=list)


def get(
    key: bytes,
    range_end: bytes = b"",
    *,
    limit: int = 0,
    revision: int = 0,
    sort_order: Literal["NONE", "ASCEND", "DESCEND"] = "NONE",
    keys_only: bool = False,
    count_only: bool = False,
) -> RequestOp:
    request = RangeRequest(
        key=key,
        range_end=range_end,
        limit=limit,
        revision=revision,
        sort_order=sort_order,
        keys_only=keys_only,
        count_only=count_only,
    )
    return RequestOp(request_range=request)


def put(key: bytes, value: bytes) -> RequestOp:
    return RequestOp(request_put=PutRequest(key=key, value=value))


def delete(key: bytes, range_end: bytes = b"") -> RequestOp:
    return RequestOp(request_delete_range=DeleteRangeRequest(key=key, range_end=range_end))


class StatusRequest(_Message):
    """Maintenance status of the member that answers: its version and database size."""


class AlarmRequest(_Message):
    """The cluster's raised alarms (``GET``)."""

    action: Literal["GET"] = "GET"


class MemberListRequest(_Message):
    """The cluster's members."""


def unchanged_since(key: bytes, mod_revision: int) -> Compare:
    """The key was last written at ``mod_revision`` (0: the key does not exist)."""
    if mod_revision:
        return Compare(key=key, target="MOD", mod_revision=mod_revision)
    return Compare(key=key, target="VERSION", version=0)


def exists(key: bytes) -> Compare:
    """The key exists (it has a version)."""
    return Compare(key=key, target="VERSION", result="GREATER", version=0)


# -- replies ----------------------------------------------------------------------------------


class Header(_Message):
    revision: int = 0


class KeyValue(_Message):
    key: bytes
    value: bytes = b""
    mod_revision: int = 0
    version: int = 0
    """How many times the key was written since it was created."""


class RangeResponse(_Message):
    header: Header = msgspec.field(default_factory=Header)
    kvs: list[KeyValue] = msgspec.field(default_factory=list)
    more: bool = False
    count: int = 0


class ResponseOp(_Message):
    response_range: RangeResponse | None = None


class TxnResponse(_Message):
    header: Header = msgspec.field(default_factory=Header)
    succeeded: bool = False
    responses: list[ResponseOp] = msgspec.field(default_factory=list)

    def ranges(self) -> list[RangeResponse]:
        """The replies of the range operations, in order (puts and deletes reply empty)."""
        return [op.response_range or RangeResponse() for op in self.responses]


class StatusResponse(_Message):
    header: Header = msgspec.field(default_factory=Header)
    version: str = ""
    db_size: int = msgspec.field(default=0, name="dbSize")
    """Bytes the member's database file takes (what ``--quota-backend-bytes`` limits)."""
    db_size_in_use: int | None = msgspec.field(default=None, name="dbSizeInUse")
    """Bytes of it in use; the rest is free pages that ``defrag`` gives back (None: not told,
    as over the ``etcd3`` package's gRPC messages, which predate the field)."""


class AlarmMember(_Message):
    memberID: int = 0
    alarm: str = "NONE"


class AlarmResponse(_Message):
    header: Header = msgspec.field(default_factory=Header)
    alarms: list[AlarmMember] = msgspec.field(default_factory=list)


class ClusterMember(_Message):
    name: str = ""
    is_learner: bool = msgspec.field(default=False, name="isLearner")
    """A learner replicates the log but does not vote: it is not part of a majority."""


class MemberListResponse(_Message):
    header: Header = msgspec.field(default_factory=Header)
    members: list[ClusterMember] = msgspec.field(default_factory=list)
