"""The apples kind, whole: :data:`PLUGIN`, assembled as ``commands/<kind>/plugin.py`` assembles
a kind of the product, from its pure half (``tests.apples``: its parts) and its verbs beside
it (``writes``, ``queries``)."""

from resource_extend.commands.program import Plugin
from tests.apples import parts

PLUGIN = Plugin(
    "apples",
    origin=__name__,
    verbs="tests.apples",
    exporter_port=18499,
    summary="A plugin of apples, for the tests",
    parts=parts,
)
"""The whole kind, as an installed script would hand it to ``commands.main``."""
