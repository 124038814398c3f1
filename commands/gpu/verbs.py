"""How resource-gpu's core verbs are made: :data:`verb` (``protocol.verb`` with this kind's
request decoder and the help's word on its requests) and :data:`Session`, of this kind."""

from __future__ import annotations

import functools

from resource_extend.commands import protocol
from resource_extend.commands.gpu import requests
from resource_extend.projections.gpu.node import NodeState

Session = protocol.Session[NodeState]
"""A session of this kind: its store holds ``NodeState``."""

REQUEST_EPILOG = (
    'R is {"prod_count_map": {"<product>": <count>}}; null stands for empty. The verb reads '
    "one JSON object on stdin and prints one JSON value on stdout. On failure it prints one "
    "line on stderr, exits 1, and has written nothing."
)


verb = functools.partial(protocol.verb, decode=requests.decode, epilog=REQUEST_EPILOG)
"""A core verb of this kind (``protocol.verb``): its request read by ``requests.decode``, its
help ending with what R is."""
