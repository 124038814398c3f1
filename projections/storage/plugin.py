"""resource-storage, whole: :data:`PLUGIN`, what the installed script hands the shell."""

from resource_extend.projections.plugin import Plugin
from resource_extend.projections.storage import KIND

TYPE_CHECKING = False  # not typing's: core's thin calls import this module
if TYPE_CHECKING:
    from resource_extend.projections.parts import Parts


def _parts() -> "Parts":
    from resource_extend.projections.parts import Parts
    from resource_extend.projections.storage import metrics, views
    from resource_extend.projections.storage.node import STORAGE

    return Parts(fold=STORAGE, view=views, gauges=metrics, metrics=metrics.DESCRIPTIONS)


PLUGIN = Plugin(
    KIND,
    origin=__name__,
    verbs="resource_extend.commands.storage",
    exporter_port=18465,
    summary="The eru storage resource plugin: volumes, disk IOPS/BPS quotas and storage space",
    parts=_parts,
)
"""resource-storage: the plugin of this kind."""
