"""Errors the plugin reports to core.

Every failure ends as one line on stderr that names the verb, the node and the reason;
these classes carry the reason and, where known, the node.
"""

from __future__ import annotations


class PluginError(Exception):
    """A failure to report to the caller as one line; nothing was written."""

    def __init__(self, reason: str, *, node: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.node = node


class InvalidRequest(PluginError):
    """The request is malformed or breaks a validation rule."""


class NodeNotFound(PluginError):
    def __init__(self, node: str) -> None:
        super().__init__("node not exists", node=node)


class NodeExists(PluginError):
    def __init__(self, node: str) -> None:
        super().__init__("node already exists", node=node)


class NotEnoughResource(PluginError):
    """The node does not have the cards a request needs."""


class StoreError(PluginError):
    """etcd refused, failed or could not be reached."""


class EtcdFull(StoreError):
    """etcd's NOSPACE alarm is raised: it refuses every write until an operator frees space."""

    def __init__(self, where: str) -> None:
        super().__init__(
            f"etcd at {where} refuses writes: its NOSPACE alarm is raised (the database reached "
            "its quota, --quota-backend-bytes; core's own writes fail too). Nothing was "
            "written. To recover: compact etcd's history and defragment every member, then "
            "disarm the alarm (etcdctl compact, etcdctl defrag, etcdctl alarm disarm); the "
            "plugins' footprint command shows their share"
        )


class Contention(StoreError):
    """Too many concurrent writers won the compare-and-swap before us."""


class OutcomeUnknown(StoreError):
    """A write was sent but its answer was lost, and etcd could not be asked again. Its line
    starts ``outcome unknown:``, whatever the reason."""

    def __init__(self, reason: str, *, node: str | None = None) -> None:
        super().__init__(f"outcome unknown: {reason}", node=node)
