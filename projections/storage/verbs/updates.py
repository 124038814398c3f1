"""The node verbs' decisions: from a node's state and a request, its new state. Each function is
pure, returns the state to write (already :func:`validated`) and raises :class:`InvalidRequest`,
:class:`NodeExists`; the ledger writes it.

Inputs come in one of three shapes: a :class:`AskedResource` (the form an operator types), a
stored-form :class:`NodeResource` (core's ``resource``, or a ``before`` handed back as
``resource_request`` by a rollback), or ``None`` (absent). :func:`chosen` applies upstream's
priority, ``resource_request`` over ``resource``.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from resource_extend.ledger.model.errors import InvalidRequest, NodeExists
from resource_extend.projections.storage.arithmetic import (
    add,
    volume_total,
    without_empty_volumes,
    workloads_usage,
)
from resource_extend.projections.storage.grammar.bindings import InvalidVolume
from resource_extend.projections.storage.grammar.sizes import go_div
from resource_extend.projections.storage.node import STORAGE
from resource_extend.projections.storage.state import NodeState, validated
from resource_extend.projections.storage.wire.node_requests import AskedResource
from resource_extend.projections.storage.wire.resources import NodeResource, WorkloadResource
from resource_extend.projections.storage.wire.stored import decode_node_resource

Given = AskedResource | NodeResource
"""A node verb's input: the request form or the stored form."""

ENGINE_SHARE = (8, 10)
"""The share of the engine's storage a node gets when add-node names none (upstream's 80 %)."""


def chosen(resource_request: Given | None, resource: Given | None) -> Given | None:
    """``resource_request`` when given, else ``resource``."""
    return resource_request if resource_request is not None else resource


def add_node(
    node: str,
    state: NodeState | None,
    given: Given | None,
    engine_storage: bytes | None,
    *,
    reported: bool = True,
    storage_total: int = 0,
) -> NodeState:
    """A new node's state. What the request leaves empty comes from the engine's report: a VM
    engine's ``Resources["storage"]`` (a stored-form resource, base64-decoded) gives its
    volumes, disks and storage; otherwise the engine's ``StorageTotal`` (``storage_total``)
    is its storage. Storage 0 (no storage and no volumes asked) takes 80 % of the engine's
    storage, no volumes its volumes, no disks its disks; an engine that reports none leaves
    them ``null``. A request without engine info at all (``reported`` false; core always
    sends it) leaves them empty, ``{}`` and ``[]``, as upstream parsed them."""
    if state is not None:
        raise NodeExists(node)
    asked = _as_resource(given) if given is not None else NodeResource()
    engine = NodeResource(storage=storage_total)
    if not reported:
        engine = NodeResource(volumes={}, disks=[])
    if engine_storage is not None:
        engine = decode_node_resource(engine_storage, 'the engine\'s Resources["storage"]')
    share, whole = ENGINE_SHARE
    capacity = NodeResource(
        volumes=asked.volumes if asked.volumes else engine.volumes,
        disks=asked.disks if asked.disks else engine.disks,
        storage=asked.storage or go_div(engine.storage * share, whole),
    )
    return validated(capacity, None)


def set_capacity(
    node: str, state: NodeState | None, given: Given | None, *, delta: bool, incr: bool
) -> NodeState:
    """set-node-resource-capacity.

    Absolute (``delta`` false): a stored-form value *is* the new capacity (so a rollback that
    hands back ``before`` restores it exactly, however often); in the request form an absent key
    keeps its value, storage following the volumes when only they are given, and ``rm-disks``
    removes disks first. Delta: the input is added (``incr``) or subtracted, and volumes left
    at exactly 0 go. ``None`` keeps the capacity. What is written has a volume map and a disk
    list, empty rather than ``null``, as upstream builds it. A node with no record is an empty
    one (the change creates its record).
    """
    current = STORAGE.as_read(state)
    capacity = current.capacity
    if given is None:
        return current
    if isinstance(given, AskedResource) and given.rm_disks:
        if delta:
            raise InvalidRequest("invalid engine args: rm-disks needs an absolute set")
        removed = set(given.rm_disks)
        kept = [disk for disk in capacity.disks or () if disk.device not in removed]
        capacity = msgspec.structs.replace(capacity, disks=kept)
    if delta:
        capacity = without_empty_volumes(add(capacity, _as_resource(given), 1 if incr else -1))
    elif isinstance(given, AskedResource):
        capacity = _kept_unless_given(capacity, given)
    else:
        capacity = given
    _refuse_removing_volumes_in_use(current, capacity)
    if isinstance(given, AskedResource):  # not core's rollback, which restores what was
        _refuse_growing_volumes_held_whole(current, capacity)
    return validated(capacity.filled(), current.usage)


def _refuse_removing_volumes_in_use(current: NodeState, capacity: NodeResource) -> None:
    """A volume may leave the capacity (left out of a replace, or taken to exactly 0 by a
    delta) only with nothing in use on it: its usage would be orphaned, held by workloads on a
    volume the node no longer has."""
    kept, used = capacity.volumes or {}, current.usage.volumes or {}
    for path in sorted(current.capacity.volumes or ()):
        if path not in kept and used.get(path, 0) != 0:
            raise InvalidVolume(
                f"volume {path} is in use ({used[path]} bytes): it cannot be removed"
            )


def _refuse_growing_volumes_held_whole(current: NodeState, capacity: NodeResource) -> None:
    """A volume whose usage is its whole size (a monopoly binding's, or normal ones that fill
    it: the record cannot tell them apart) may not grow: the space it gained would be free, and
    normal placement would put a binding beside one that was promised the volume to itself.
    docs/differences.md says why this and not keeping such volumes out of placement."""
    grown, used = capacity.volumes or {}, current.usage.volumes or {}
    for path, size in sorted((current.capacity.volumes or {}).items()):
        if size > 0 and used.get(path, 0) == size and grown.get(path, 0) > size:
            raise InvalidVolume(
                f"volume {path} is held whole ({size} bytes): it cannot grow, as the space "
                "gained could go to a binding beside a monopoly one holding it; release what "
                "holds it first, or add the space as a volume of its own"
            )


def _kept_unless_given(capacity: NodeResource, given: AskedResource) -> NodeResource:
    volumes_given = given.volumes is not msgspec.UNSET
    if given.storage is not msgspec.UNSET:
        storage = given.total_storage()
    elif volumes_given:
        storage = capacity.storage - volume_total(capacity) + given.total_storage()
    else:
        storage = capacity.storage
    return NodeResource(
        volumes=given.given_volumes() if volumes_given else capacity.volumes,
        disks=given.given_disks() if given.disks is not msgspec.UNSET else capacity.disks,
        storage=storage,
    )


def set_usage(
    node: str,
    state: NodeState | None,
    given: Given | None,
    workloads: Sequence[WorkloadResource | None] | None,
    *,
    delta: bool,
    incr: bool,
) -> NodeState:
    """set-node-resource-usage: the input (``resource_request`` > ``resource`` > the
    sum of ``workloads``) is added or subtracted (``delta``) or *is* the usage. ``rm-disks``
    means nothing here. Nothing given: a delta changes nothing, an absolute set empties usage.
    What is written has a volume map and a disk list, empty rather than ``null``, as upstream
    builds it. A node with no record is an empty one (the change creates its record)."""
    current = STORAGE.as_read(state)
    if given is not None:
        change = _as_resource(given)
    elif workloads is not None:
        change = workloads_usage(workloads)
    else:
        change = NodeResource(volumes={}, disks=[])
    usage = add(current.usage, change, 1 if incr else -1) if delta else change
    return validated(current.capacity, usage.filled())


def set_info(capacity: NodeResource | None, usage: NodeResource | None) -> NodeState:
    """set-node-resource-info: both stored form and stored as given. Upstream added the volumes to a
    storage that already holds them (fixed here: docs/differences.md); a ``null`` usage is an
    empty one, as upstream decoded it, and a ``null`` capacity is refused."""
    return validated(capacity, usage if usage is not None else NodeResource())


def _as_resource(given: Given) -> NodeResource:
    return given.as_resource() if isinstance(given, AskedResource) else given
