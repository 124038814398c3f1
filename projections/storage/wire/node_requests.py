"""What an operator asks of a node (add-node's ``resource``, the set verbs' ``resource_request``):
the request form operators type, or a stored-form resource given in its place.

The request form is what eru-cli sends::

    {"volumes": ["/data0:1T"], "storage": "2T", "disks": ["/dev/vda:/,/data0:1000:1000:1G:1G"],
     "rm-disks": "/dev/vdb,/dev/vdc"}

Core's capacity rollback sends the ``before`` it got back, a stored-form value (``volumes`` a map,
``storage`` a number, ``disks`` objects), as ``resource_request``. Upstream read none of it and
wiped the capacity (upstream's rollback bug); :func:`node_request_of` recognises that form and
returns it as a :class:`NodeResource`, which replaces the capacity exactly."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec

from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.projections.storage.grammar.bindings import InvalidVolume
from resource_extend.projections.storage.grammar.disks import Disk, InvalidDisk, parse_disk
from resource_extend.projections.storage.grammar.sizes import InvalidSize, parse_size
from resource_extend.projections.storage.wire.requests import Storage, storage_bytes
from resource_extend.projections.storage.wire.resources import NodeResource, Volumes
from resource_extend.projections.storage.wire.stored import node_resource_of

MAX_NODE_VOLUMES = 100_000
MAX_NODE_DISKS = 10_000
MAX_TEXT = 10_000

Text = Annotated[str, msgspec.Meta(max_length=MAX_TEXT)]


class AskedResource(msgspec.Struct, frozen=True, kw_only=True):
    """The request form, parsed; ``UNSET`` where the key was absent (or ``null``): an absolute
    set-capacity keeps what is absent."""

    volumes: Volumes | msgspec.UnsetType = msgspec.UNSET
    storage: int | msgspec.UnsetType = msgspec.UNSET
    """As given, without the volumes (see :meth:`total_storage`)."""
    disks: list[Disk] | msgspec.UnsetType = msgspec.UNSET
    rm_disks: tuple[str, ...] = ()

    def total_storage(self) -> int:
        """Upstream's parsed storage: the explicit figure plus the request's volumes, since a
        node's storage includes its volumes."""
        explicit = 0 if self.storage is msgspec.UNSET else self.storage
        return explicit + sum(self.given_volumes().values())

    def given_volumes(self) -> Volumes:
        return {} if self.volumes is msgspec.UNSET else self.volumes

    def given_disks(self) -> list[Disk]:
        return [] if self.disks is msgspec.UNSET else self.disks

    def as_resource(self) -> NodeResource:
        """The request as a resource to add, subtract or set (absent keys empty)."""
        return NodeResource(
            volumes=dict(self.given_volumes()),
            disks=list(self.given_disks()),
            storage=self.total_storage(),
        )


class RequestForm(msgspec.Struct, kw_only=True):
    """A node resource as an operator types it: ``{"volumes": ["/data0:1T"], ...}``."""

    volumes: Annotated[list[Text], msgspec.Meta(max_length=MAX_NODE_VOLUMES)] | None = None
    storage: Storage | None = None
    disks: Annotated[list[Text], msgspec.Meta(max_length=MAX_NODE_DISKS)] | None = None
    rm_disks: Text | None = msgspec.field(default=None, name="rm-disks")


def decode_node_request(raw: bytes, what: str) -> AskedResource | NodeResource | None:
    """:func:`node_request_of` for JSON bytes."""
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as exc:
        raise InvalidRequest(f"invalid {what}: {exc}") from None
    return node_request_of(value, what)


def node_request_of(value: Any, what: str) -> AskedResource | NodeResource | None:
    """``value`` (decoded JSON) in the form it is written in: a :class:`AskedResource`, a
    stored-form :class:`NodeResource`, or ``None`` for ``null``. Raises
    :class:`InvalidRequest` naming what is wrong."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InvalidRequest(f"invalid {what}: expected an object, got {type(value).__name__}")
    if _is_stored_form(value, what):
        return node_resource_of(value, what)
    try:
        form = msgspec.convert(value, RequestForm)
    except msgspec.ValidationError as exc:
        raise InvalidRequest(f"invalid {what}: {exc}") from None
    return _parsed(form)


def _is_stored_form(value: dict[str, Any], what: str) -> bool:
    """A map of volumes or disks as objects say "stored"; volume strings, disk strings, a
    storage string or ``rm-disks`` say "request". With no sign either way, the three keys of a
    stored resource, all present and ``storage`` a number, are Go's encoding of an empty
    capacity (``{"volumes": null, "disks": null, "storage": N}``)."""
    volumes, disks, storage = value.get("volumes"), value.get("disks"), value.get("storage")
    disk_list = disks if isinstance(disks, list) else []
    stored = [
        *(["volumes as a map"] if isinstance(volumes, dict) else []),
        *(["disks as objects"] if any(isinstance(d, dict) for d in disk_list) else []),
    ]
    requested = [
        *(["volumes as strings"] if isinstance(volumes, list) else []),
        *(["disks as strings"] if any(isinstance(d, str) for d in disk_list) else []),
        *(["storage as a string"] if isinstance(storage, str) else []),
        *(["rm-disks"] if value.get("rm-disks") is not None else []),
    ]
    if stored and requested:
        raise InvalidRequest(
            f"invalid {what}: it mixes the stored form ({', '.join(stored)}) "
            f"with the request form ({', '.join(requested)})"
        )
    if stored:
        return True
    return not requested and type(storage) is int and {"volumes", "disks"} <= value.keys()


def _parsed(form: RequestForm) -> AskedResource:
    return AskedResource(
        volumes=msgspec.UNSET if form.volumes is None else _volumes(form.volumes),
        storage=msgspec.UNSET if form.storage is None else storage_bytes(form.storage, "storage"),
        disks=msgspec.UNSET if form.disks is None else _disks(form.disks),
        rm_disks=() if form.rm_disks is None else _devices(form.rm_disks),
    )


def _volumes(texts: list[str]) -> Volumes:
    """``path:size`` each; a path given twice takes its last size, as upstream."""
    volumes: Volumes = {}
    for text in texts:
        parts = text.split(":")
        if len(parts) != 2:
            raise InvalidVolume(f"volume should have 2 parts: {text!r}")
        path, size = parts
        if not path:
            raise InvalidVolume(f"volume path is empty: {text!r}")
        try:
            volumes[path] = parse_size(size)
        except InvalidSize as exc:
            raise InvalidVolume(f"volume {text!r}: {exc.reason}") from None
    return dict(sorted(volumes.items()))


def _disks(texts: list[str]) -> list[Disk]:
    """Each disk once: a device listed twice is a typo whose meaning upstream left to order."""
    disks: dict[str, Disk] = {}
    for text in texts:
        disk = parse_disk(text)
        if disk.device in disks:
            raise InvalidDisk(text, f"device {disk.device} is listed twice")
        disks[disk.device] = disk
    return list(disks.values())


def _devices(text: str) -> tuple[str, ...]:
    """``/dev/vdb,/dev/vdc``; empty names are dropped (``""`` removes nothing)."""
    return tuple(device for device in text.split(",") if device)
