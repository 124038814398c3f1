"""resource-storage's core verbs (``writes``, ``queries``), and what the shared command tree
asks of the program: its kind, how auditors see it, and the help's word on requests."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: every call imports this package
if TYPE_CHECKING:
    from typing import Any

    from resource_extend.commands.audit.views import KindView
    from resource_extend.commands.exporter.view import KindGauges
    from resource_extend.ledger.kinds import Kind

REQUEST_EPILOG = (
    'R is a node resource, {"volumes": {"/data0": <bytes>}, "disks": [{"device", "mounts", '
    '"read_IOPS", "write_IOPS", "read_bps", "write_bps"}], "storage": <bytes>}; as an input '
    'it may also take the form people type, {"volumes": ["/data0:1T"], "disks": '
    '["/dev/vda:/,/data0:1000:1000:1G:1G"], "storage": "2T"}. Q is a workload request, '
    '{"volumes-request": [B, ...], "volumes-limit": [B, ...], "storage-request": <size>, '
    '"storage-limit": <size>} ("volumes" and "storage" set both); W a workload\'s resource '
    "and P its engine parameters, as calculate-deploy answers them. A binding B is "
    "source:destination[:flags[:size[:rIOPS[:wIOPS[:rBPS[:wBPS]]]]]] (source AUTO lets the "
    "plugin choose a volume; flag m takes a whole one); sizes are bytes or human sizes "
    "(1G = 2^30). The verb reads one JSON object on stdin and prints one JSON value on "
    "stdout. On failure it prints one line on stderr, exits 1, and has written nothing."
)


def kind() -> Kind[Any]:
    from resource_extend.projections.storage.node import STORAGE

    return STORAGE


def view() -> KindView:
    from resource_extend.projections.storage import views

    return views


def metrics_descriptions() -> list[Any]:
    from resource_extend.projections.storage.metrics import DESCRIPTIONS

    return list(DESCRIPTIONS)


def exporter_gauges() -> KindGauges:
    """The gauges ``{prog} exporter`` serves per node (``projections.storage.metrics``)."""
    from resource_extend.projections.storage import metrics

    return metrics


def decode(raw: bytes, request_type: type[Any]) -> Any:
    """A request (``commands.storage.requests.decode``: a mis-cased field is refused)."""
    from resource_extend.commands.storage import requests

    return requests.decode(raw, request_type)
