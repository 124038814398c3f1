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


class Contention(StoreError):
    """Too many concurrent writers won the compare-and-swap before us."""


class OutcomeUnknown(StoreError):
    """A write was sent but its answer was lost, and etcd could not be asked again."""
