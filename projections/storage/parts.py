"""Storage: the kind's heavy parts, as the shell's ``Plugin`` loads them on first use."""

TYPE_CHECKING = False  # not typing's: core's thin calls import this module
if TYPE_CHECKING:
    from resource_extend.projections.parts import Parts


def parts() -> "Parts":
    """This kind's heavy parts (its fold, its views, its gauges and the metrics core exports),
    imported when first asked for (``Plugin.parts``)."""
    from resource_extend.projections.parts import Parts
    from resource_extend.projections.storage import metrics, views
    from resource_extend.projections.storage.node import STORAGE

    return Parts(fold=STORAGE, view=views, gauges=metrics, metrics=metrics.DESCRIPTIONS)
