"""resource-storage, whole: :data:`PLUGIN`, what the installed script hands the shell.

Assembled here, in the shell, from the kind's pure half (``projections.storage``: its name, and
its parts) and its own (its verbs beside this module, its exporter port and help), so that the
pure half knows nothing of the shell. Cheap to import: core's thin calls do."""

from resource_extend.commands.program import Plugin
from resource_extend.projections.storage import KIND
from resource_extend.projections.storage.parts import parts

PLUGIN = Plugin(
    KIND,
    origin=__name__,
    verbs="resource_extend.commands.storage",
    exporter_port=18465,
    summary="The eru storage resource plugin: volumes, disk IOPS/BPS quotas and storage space",
    parts=parts,
)
"""resource-storage: the plugin of this kind."""
