"""resource-storage's core verbs (``writes``, ``queries``), each made with :func:`verb`; its
kind is ``projections.storage.plugin.PLUGIN``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from resource_extend.commands import protocol
from resource_extend.commands.storage import requests

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


def verb(request_type: type[Any] | None = None) -> Callable[[Callable[..., Any]], protocol.Verb]:
    """A storage core verb: its request read by ``requests.decode`` (a mis-cased field is
    refused), its help ending with what R is."""
    return protocol.verb(request_type, decode=requests.decode, epilog=REQUEST_EPILOG)
