"""The wire shapes of resource-storage, byte-compatible with the upstream plugin: a node's
resource (its record's ``capacity`` and ``usage``), a workload's resource, the engine's
parameters, and a workload request once normalised.

Go writes struct fields in declaration order and map keys sorted; so do these (maps are built
sorted). ``null`` volume maps and disk lists are kept apart from empty ones only where upstream
writes them so.
"""

from __future__ import annotations

import msgspec

from resource_extend.projections.storage.grammar.bindings import Binding
from resource_extend.projections.storage.grammar.disks import Disk
from resource_extend.projections.storage.grammar.sizes import Int64

Volumes = dict[str, Int64]
"""Bytes per volume path."""

VolumePlan = dict[str, Volumes]
"""A workload's plan: binding (canonical string) → ``{path: bytes}``, one path per binding
(only the realloc delta lists several)."""


class NodeResource(msgspec.Struct, kw_only=True):
    """A node's capacity, or its usage: volumes, disks and the storage total, which includes
    the volumes."""

    volumes: Volumes | None = None
    disks: list[Disk] | None = None
    storage: Int64 = 0

    def filled(self) -> NodeResource:
        """As upstream's deep copy makes it: a ``null`` volume map or disk list written empty
        (``{}``, ``[]``). Its capacity and usage edits build on one, and it answers their
        ``before`` with one."""
        if self.volumes is not None and self.disks is not None:
            return self
        return NodeResource(
            volumes={} if self.volumes is None else self.volumes,
            disks=[] if self.disks is None else self.disks,
            storage=self.storage,
        )


class WorkloadResource(msgspec.Struct, kw_only=True):
    """What core stores per workload and hands back: the bindings (canonical strings), where
    they were placed, the storage and the disk quota charged. Only the ``*_request`` plan,
    storage and disks count toward node usage. A disk list may be ``null``, as upstream
    writes one (a realloc delta's ``disks_limit``; a realloc's ``disks_request`` when nothing
    moved) and core hands back what it stored."""

    volumes_request: list[str] = msgspec.field(default_factory=list)
    volumes_limit: list[str] = msgspec.field(default_factory=list)
    volume_plan_request: VolumePlan = msgspec.field(default_factory=dict)
    volume_plan_limit: VolumePlan = msgspec.field(default_factory=dict)
    storage_request: Int64 = 0
    storage_limit: Int64 = 0
    disks_request: list[Disk] | None = msgspec.field(default_factory=list)
    disks_limit: list[Disk] | None = msgspec.field(default_factory=list)


class EngineParams(msgspec.Struct, kw_only=True):
    """What the engine gets: the limit bindings on their volumes (engine form), the storage
    limit, and ``{device: "rIOPS:wIOPS:rBPS:wBPS"}``."""

    volumes: list[str] | None = None
    volume_changed: bool = False
    storage: int = 0
    iops_options: dict[str, str] = msgspec.field(default_factory=dict)


class WorkloadRequest(msgspec.Struct, frozen=True, kw_only=True):
    """A deploy/realloc/capacity request after upstream's validation: request and limit bindings
    paired by index (both sorted by canonical string), limits raised to requests, and the
    storage totals including the bindings' sizes."""

    request: tuple[Binding, ...] = ()
    limit: tuple[Binding, ...] = ()
    storage_request: int = 0
    storage_limit: int = 0
