"""How stored usage disagrees with the cards core says its workloads hold."""

from __future__ import annotations

from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.cards import Cards


def usage_diffs(usage: Cards, workloads_sum: Cards) -> list[str]:
    """One human-readable line per disagreement, in resource-extend's words.

    The total comes first (``node.usage != sum(workload.request): 3 != 2``), then one line per
    product the workloads hold, by name: ``<product> not in usage``, or
    ``<product>: actual(<workloads>) != usage(<stored>)``. (A product only in usage always shows
    in the total.)
    """
    diffs: list[str] = []
    used, held = cards.total(usage), cards.total(workloads_sum)
    if used != held:
        diffs.append(f"node.usage != sum(workload.request): {used} != {held}")
    for product, count in sorted(workloads_sum.items()):
        if product not in usage:
            diffs.append(f"{product} not in usage")
        elif usage[product] != count:
            diffs.append(f"{product}: actual({count}) != usage({usage[product]})")
    return diffs
