"""A workload's request for volumes and storage (deploy, realloc, capacity): decoded from
core's ``workload_resource_request`` and made consistent.

Request and limit bindings are paired, limits are raised to requests, and the storage totals
come to include the bindings' sizes: the rules of upstream's ``Validate()``, so that the
scheduler only ever sees a :class:`WorkloadRequest` that keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated

import msgspec

from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.projections.storage.grammar.bindings import (
    MAX_BINDINGS,
    Binding,
    InvalidVolume,
    check_added,
    check_list,
    parse_binding,
    sort_bindings,
)
from resource_extend.projections.storage.grammar.sizes import (
    MAX_SIZE,
    Int64,
    InvalidSize,
    parse_size,
)
from resource_extend.projections.storage.wire.resources import WorkloadRequest

MAX_BINDING_TEXT = 10_000
"""Two paths of ``PATH_MAX`` (4096) and five numbers fit; longer strings are not bindings."""

MAX_SIZE_TEXT = 64

BindingTexts = Annotated[
    list[Annotated[str, msgspec.Meta(max_length=MAX_BINDING_TEXT)]],
    msgspec.Meta(max_length=MAX_BINDINGS),
]
Storage = Annotated[str, msgspec.Meta(max_length=MAX_SIZE_TEXT)] | Int64
"""A human size (``"1G"``) or a JSON integer of bytes (eru-cli sends integers)."""


class WorkloadRequestWire(msgspec.Struct, kw_only=True):
    """``workload_resource_request`` as core passes it, with every alias upstream reads.

    Binding lists must be lists of strings and storage a size string or an integer: anything
    else fails decoding with the field's name (upstream read it as empty or 0). ``null`` is
    absent, as everywhere in core's requests.
    """

    volumes_request: BindingTexts | None = msgspec.field(default=None, name="volumes-request")
    volume_request: BindingTexts | None = msgspec.field(default=None, name="volume-request")
    volumes: BindingTexts | None = None
    volume: BindingTexts | None = None
    volume_limit: BindingTexts | None = msgspec.field(default=None, name="volume-limit")
    volumes_limit: BindingTexts | None = msgspec.field(default=None, name="volumes-limit")
    storage_request: Storage | None = msgspec.field(default=None, name="storage-request")
    storage_limit: Storage | None = msgspec.field(default=None, name="storage-limit")
    storage: Storage | None = None

    def request_texts(self) -> list[str]:
        """The first non-empty of ``volumes-request``, ``volume-request``."""
        return _first_non_empty(self.volumes_request, self.volume_request)

    def limit_texts(self) -> list[str]:
        """The first non-empty of ``volumes``, ``volume``, ``volume-limit``, ``volumes-limit``."""
        return _first_non_empty(self.volumes, self.volume, self.volume_limit, self.volumes_limit)

    def storages(self) -> tuple[int, int]:
        """(request, limit) in bytes; ``storage`` sets both, whatever the other two say."""
        if self.storage is not None:
            both = storage_bytes(self.storage, "storage")
            return both, both
        return (
            storage_bytes(self.storage_request, "storage-request"),
            storage_bytes(self.storage_limit, "storage-limit"),
        )


class ParsedWorkloadRequest(msgspec.Struct, frozen=True, kw_only=True):
    """The request's bindings and storage as given, before :func:`normalise` (realloc merges
    these with the workload's current resource first)."""

    request: tuple[Binding, ...] = ()
    limit: tuple[Binding, ...] = ()
    storage_request: int = 0
    storage_limit: int = 0


_wire_decoder = msgspec.json.Decoder(WorkloadRequestWire)


def decode_workload_request(raw: bytes) -> WorkloadRequestWire:
    """``raw`` JSON as a request; a wrong type is an :class:`InvalidRequest` naming the key."""
    try:
        return _wire_decoder.decode(raw)
    except msgspec.DecodeError as exc:  # ValidationError included
        raise InvalidRequest(f"invalid workload_resource_request: {exc}") from None


def parse_workload_request(wire: WorkloadRequestWire | None) -> ParsedWorkloadRequest:
    """Bindings parsed and sizes read; ``None`` (no request) asks for nothing."""
    if wire is None:
        return ParsedWorkloadRequest()
    storage_request, storage_limit = wire.storages()
    return ParsedWorkloadRequest(
        request=tuple(parse_binding(text) for text in wire.request_texts()),
        limit=tuple(parse_binding(text) for text in wire.limit_texts()),
        storage_request=storage_request,
        storage_limit=storage_limit,
    )


def workload_request(wire: WorkloadRequestWire | None) -> WorkloadRequest:
    """What deploy and capacity schedule: the request parsed, checked and normalised, storage
    folded."""
    parsed = parse_workload_request(wire)
    check_added(parsed.request)
    check_added(parsed.limit)
    return normalise(parsed.request, parsed.limit, parsed.storage_request, parsed.storage_limit)


def _first_non_empty(*lists: list[str] | None) -> list[str]:
    return next((texts for texts in lists if texts), [])


def storage_bytes(value: str | int | None, key: str) -> int:
    """A storage amount as bytes: an integer as it is, a human size parsed; ``None`` is 0.
    Raises :class:`InvalidStorage` naming ``key``."""
    if value is None:
        return 0
    if isinstance(value, int):
        return value
    try:
        return parse_size(value)
    except InvalidSize as exc:
        raise InvalidStorage(f"{key}: {exc.reason}") from None


class InvalidStorage(InvalidRequest):
    """A storage figure that breaks a rule (upstream's ``invalid storage``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}: invalid storage")


def normalise(
    request: Sequence[Binding],
    limit: Sequence[Binding],
    storage_request: int,
    storage_limit: int,
    *,
    fold_storage: bool = True,
) -> WorkloadRequest:
    """The request as the scheduler needs it; raises :class:`InvalidVolume` or
    :class:`InvalidStorage` with upstream's text.

    ``fold_storage=True`` (deploy, capacity) refuses a negative size, which only a realloc's
    delta may carry, and adds the bindings' sizes to the storage totals; ``False`` leaves the
    totals as given: realloc has folded them in while merging with the workload's resource.
    Every figure must fit a Go int64 (core decodes them): a larger one is refused.
    """
    requested, limited = _paired(list(request), list(limit))
    if fold_storage:
        _refuse_negative(requested + limited)
    storage_request, storage_limit = _storage(storage_request, storage_limit)
    if fold_storage:
        storage_request = _folded(storage_request, requested)
        storage_limit = _folded(storage_limit, limited)
    _bounded(requested + limited, storage_request, storage_limit)
    return WorkloadRequest(
        request=tuple(requested),
        limit=tuple(limited),
        storage_request=storage_request,
        storage_limit=storage_limit,
    )


def _paired(request: list[Binding], limit: list[Binding]) -> tuple[list[Binding], list[Binding]]:
    """Both lists sorted by canonical string, paired by index, each limit at least its request.

    Only limit → request is copied: a request list without limits is a length mismatch.
    """
    if limit and not request:
        request = limit
    if len(request) != len(limit):
        raise InvalidVolume("different length of request and limit")
    check_list(request)
    check_list(limit)
    request, limit = sort_bindings(request), sort_bindings(limit)
    raised = []
    for asked, capped in zip(request, limit, strict=True):
        if asked.key != capped.key:
            raise InvalidVolume(
                f"request and limit not match: {asked.canonical()} vs {capped.canonical()}"
            )
        raised.append(_raised(capped, asked))
    return request, raised


def _raised(limit: Binding, request: Binding) -> Binding:
    """The limit raised to the request: each quota field always, the size only when both are
    sized (a 0 limit size means "no limit" and stays)."""
    size = limit.size
    if request.size > 0 and limit.size > 0:
        size = max(size, request.size)
    quota = (max(a, b) for a, b in zip(limit.quota, request.quota, strict=True))
    return limit.with_numbers(size, quota)


def _storage(request: int, limit: int) -> tuple[int, int]:
    """Non-negative; a lone limit is also the request; a request above its limit raises it."""
    if request < 0 or limit < 0:
        raise InvalidStorage("storage limit or request less than 0")
    if limit > 0 and request == 0:
        request = limit
    if request > limit > 0:
        limit = request
    return request, limit


def _refuse_negative(bindings: Sequence[Binding]) -> None:
    """A negative size gives back, in a realloc; placed, it would grow its volume on every
    pass (upstream's enumeration never ended), and folded, it would free storage others hold."""
    for binding in bindings:
        if binding.size < 0:
            raise InvalidVolume(f"size can't be negative: {binding.canonical()}")


def _folded(storage: int, bindings: Sequence[Binding]) -> int:
    """``storage`` plus the bindings' (non-negative) sizes."""
    return storage + sum(binding.size for binding in bindings)


def _bounded(bindings: Sequence[Binding], storage_request: int, storage_limit: int) -> None:
    """Every size, quota and storage total a Go int64 holds: never wrapped, never sent on."""
    for binding in bindings:
        if max(binding.numbers) > MAX_SIZE:
            raise InvalidVolume(f"a figure is over {MAX_SIZE}: {binding.canonical()}")
    for side, total in (("request", storage_request), ("limit", storage_limit)):
        if total > MAX_SIZE:
            raise InvalidStorage(f"storage {side} with its volumes is over {MAX_SIZE} bytes")
