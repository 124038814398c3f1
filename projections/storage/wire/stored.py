"""A node's resource in its stored form: ``{"volumes": {path: bytes}, "disks": [{...}],
"storage": bytes}``, as records hold it and as core passes ``resource``, ``capacity`` and
``usage`` (and the engine its ``Resources["storage"]``).

Go matches JSON keys to fields ignoring case, so an upstream reader takes ``read_iops`` (or
``Storage``) for ``read_IOPS``; so do we. Records and inputs are decoded by exact names first,
which is all but free; only bytes that may spell a key otherwise take the slow path, which
renames keys before converting. Numbers must be integers that fit an int64: Go refuses a
fraction in a record, and a fraction in an input is a mistake we name rather than truncate.
"""

from __future__ import annotations

from typing import Any

import msgspec

from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.projections.storage.wire.resources import NodeResource


class StoredRecord(msgspec.Struct, kw_only=True):
    """``<prefix>/resource/storage/<node>``: upstream's two resources, and our stream position
    (absent in upstream records, which Go's reader ignores)."""

    capacity: NodeResource | None = None
    usage: NodeResource | None = None
    seq: int | None = None


_RESOURCE_KEYS = ("volumes", "disks", "storage")
_DISK_KEYS = ("device", "mounts", "read_IOPS", "write_IOPS", "read_bps", "write_bps")
_RECORD_KEYS = ("capacity", "usage", "seq")

_record_decoder = msgspec.json.Decoder(StoredRecord)
_resource_decoder = msgspec.json.Decoder(NodeResource | None)


def read_stored(raw: bytes) -> tuple[NodeResource, NodeResource, int | None]:
    """A record's capacity, usage (``null`` ones empty) and seq; raises msgspec's errors.

    The fast path of many-node reads: one C decode unless the bytes may spell a key otherwise.
    """
    if exactly_spelled(raw):
        record = _record_decoder.decode(raw)
    else:
        record = msgspec.convert(_renamed_record(msgspec.json.decode(raw)), StoredRecord)
    return record.capacity or NodeResource(), record.usage or NodeResource(), record.seq


def decode_node_resource(raw: bytes, what: str) -> NodeResource:
    """A stored-form input named ``what`` (``resource``, ``capacity``...) as JSON bytes; a
    ``null`` is an empty resource. Raises :class:`InvalidRequest` naming the bad key."""
    try:
        if exactly_spelled(raw):
            return _resource_decoder.decode(raw) or NodeResource()
        return node_resource_of(msgspec.json.decode(raw), what)
    except msgspec.DecodeError as exc:  # ValidationError included
        raise InvalidRequest(f"invalid {what}: {exc}") from None


def node_resource_of(value: Any, what: str) -> NodeResource:
    """A stored-form input already decoded to Python values (a dict, or ``None``)."""
    if value is None:
        return NodeResource()
    try:
        return msgspec.convert(_renamed_resource(value), NodeResource)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"invalid {what}: {exc}") from None


def exactly_spelled(raw: bytes) -> bool:
    """True when no key can be a field spelled in another case. Every field name is lower
    case but for ``_IOPS``, so bytes with no other upper-case letter, no ``_iops`` key, no
    escape and nothing outside ASCII (Go also folds the long s to ``s`` and the Kelvin sign to
    ``k``) spell every key exactly. A value with capitals (a path ``/Data``) only costs the
    slow path."""
    if b'_iops"' in raw or b"\\u" in raw or not raw.isascii():
        return False
    return raw.replace(b'_IOPS"', b'_"').islower()  # False without any letter: slow, still right


def _renamer(names: tuple[str, ...]) -> dict[str, str]:
    return {name.casefold(): name for name in names}


_RECORD_NAMES = _renamer(_RECORD_KEYS)
_RESOURCE_NAMES = _renamer(_RESOURCE_KEYS)
_DISK_NAMES = _renamer(_DISK_KEYS)


def _renamed(value: Any, names: dict[str, str]) -> Any:
    """An object's known keys spelled as the structs name them (the last spelling wins, as in
    Go, which assigns each key in turn); other values are left for conversion to judge."""
    if not isinstance(value, dict):
        return value
    renamed: dict[str, Any] = {}
    for key, item in value.items():
        name = names.get(key.casefold())
        if name is not None:
            renamed.pop(name, None)
            renamed[name] = item
    return renamed


def _renamed_resource(value: Any) -> Any:
    resource = _renamed(value, _RESOURCE_NAMES)
    if isinstance(resource, dict) and isinstance(resource.get("disks"), list):
        resource["disks"] = [_renamed(disk, _DISK_NAMES) for disk in resource["disks"]]
    return resource


def _renamed_record(value: Any) -> Any:
    record = _renamed(value, _RECORD_NAMES)
    if isinstance(record, dict):
        for part in ("capacity", "usage"):
            if part in record:
                record[part] = _renamed_resource(record[part])
    return record
