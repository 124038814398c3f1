"""How resource-storage's core verbs are made: :data:`verb` (``protocol.verb`` with this kind's
request decoder and the help's word on its requests) and :data:`Session`, of this kind."""

from __future__ import annotations

import functools

from resource_extend.commands import protocol
from resource_extend.commands.storage import requests
from resource_extend.projections.storage.state import NodeState

Session = protocol.Session[NodeState]
"""A session of this kind: its store holds ``NodeState``."""

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


verb = functools.partial(protocol.verb, decode=requests.decode, epilog=REQUEST_EPILOG)
"""A core verb of this kind (``protocol.verb``): its request read by ``requests.decode``, its
help ending with what R is."""
