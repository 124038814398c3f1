"""resource-gpu's core verbs (``writes``, ``queries``), each made with :func:`verb`; its
kind is ``projections.gpu.plugin.PLUGIN``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from resource_extend.commands import protocol
from resource_extend.commands.gpu import requests

REQUEST_EPILOG = (
    'R is {"prod_count_map": {"<product>": <count>}}; null stands for empty. The verb reads '
    "one JSON object on stdin and prints one JSON value on stdout. On failure it prints one "
    "line on stderr, exits 1, and has written nothing."
)


def verb(request_type: type[Any] | None = None) -> Callable[[Callable[..., Any]], protocol.Verb]:
    """A GPU core verb: its request read by ``requests.decode`` (a mis-cased field is
    refused), its help ending with what R is."""
    return protocol.verb(request_type, decode=requests.decode, epilog=REQUEST_EPILOG)
