"""resource-gpu's core verbs (``writes``, ``queries``), and what the shared command tree asks
of the program: its kind, how auditors see it, and the help's word on requests."""

from __future__ import annotations

TYPE_CHECKING = False  # not typing's: every call imports this package
if TYPE_CHECKING:
    from typing import Any

    from resource_extend.commands.audit.views import KindView
    from resource_extend.commands.exporter.view import KindGauges
    from resource_extend.ledger.kinds import Kind

REQUEST_EPILOG = (
    'R is {"prod_count_map": {"<product>": <count>}}; null stands for empty. The verb reads '
    "one JSON object on stdin and prints one JSON value on stdout. On failure it prints one "
    "line on stderr, exits 1, and has written nothing."
)


def kind() -> Kind[Any]:
    from resource_extend.projections.gpu.node import GPU

    return GPU


def view() -> KindView:
    from resource_extend.projections.gpu import views

    return views


def metrics_descriptions() -> list[Any]:
    from resource_extend.projections.gpu.metrics import DESCRIPTIONS

    return list(DESCRIPTIONS)


def exporter_gauges() -> KindGauges:
    """The gauges ``{prog} exporter`` serves per node (``projections.gpu.metrics``)."""
    from resource_extend.projections.gpu import metrics

    return metrics


def decode(raw: bytes, request_type: type[Any]) -> Any:
    """A request (``commands.gpu.requests.decode``: a mis-cased field is refused)."""
    from resource_extend.commands.gpu import requests

    return requests.decode(raw, request_type)
