"""How stored usage disagrees with the cards core says its workloads hold."""

from __future__ import annotations

from resource_extend.projections.gpu import cards
from resource_extend.projections.gpu.cards import Cards


def usage_diffs(usage: Cards, workloads_sum: Cards) -> list[str]:
    """One human-readable line per disagreement, in the upstream plugin's three kinds.

    The total comes first, then one line per product the workloads hold, by name: either it is
    missing from usage or its count differs. (A product only in usage always shows in the total.)
    """
    diffs: list[str] = []
    used, held = cards.total(usage), cards.total(workloads_sum)
    if used != held:
        diffs.append(f"node usage total {used} != workloads total {held}")
    for product, count in sorted(workloads_sum.items()):
        if product not in usage:
            diffs.append(f"{product} held by workloads ({count}) is not in node usage")
        elif usage[product] != count:
            diffs.append(f"{product}: node usage {usage[product]} != workloads {count}")
    return diffs
