"""A workload's request for volumes and storage (deploy, realloc, capacity), made consistent.

Request and limit bindings are paired, limits are raised to requests, and the storage totals
come to include the bindings' sizes (§1.4): the rules of upstream's ``Validate()``, so that the
scheduler only ever sees a :class:`WorkloadRequest` that keeps them.
"""

from __future__ import annotations

from collections.abc import Sequence

from resource_extend.ledger.errors import InvalidRequest
from resource_extend.projections.storage.bindings import (
    Binding,
    InvalidVolume,
    check_list,
    sort_bindings,
)
from resource_extend.projections.storage.resources import WorkloadRequest
from resource_extend.projections.storage.sizes import MAX_SIZE


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

    ``fold_storage=False`` leaves the storage totals without the bindings' sizes: realloc has
    already folded them in while merging with the workload's current resource.
    """
    requested, limited = _paired(list(request), list(limit))
    storage_request, storage_limit = _storage(storage_request, storage_limit)
    if fold_storage:
        storage_request = _folded(storage_request, requested, "request")
        storage_limit = _folded(storage_limit, limited, "limit")
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


def _folded(storage: int, bindings: Sequence[Binding], side: str) -> int:
    """``storage`` plus the bindings' sizes; a total past int64 is refused, never wrapped."""
    total = storage + sum(binding.size for binding in bindings)
    if total > MAX_SIZE:
        raise InvalidStorage(f"storage {side} with its volumes is over {MAX_SIZE} bytes")
    return total
