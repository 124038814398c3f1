"""Shared data for the unit tests: the upstream fixture node, Hypothesis strategies and settings."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.node import NodeState

P70, P90 = "nvidia-3070", "nvidia-3090"
EIGHT = NodeState(capacity={P70: 4, P90: 4})
"""The upstream tests' fixture: 4 cards each of two models, none in use."""

# Modest example counts: the whole unit suite must stay fast on a 2-core machine.
FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])

PRODUCTS = ["nvidia-3070", "nvidia-3090", "nvidia-a100", "amd.mi250", "h100"]

products = st.sampled_from(PRODUCTS)


def card_maps(
    min_count: int = -20, max_count: int = 20, max_size: int = 4
) -> st.SearchStrategy[Cards]:
    """Maps over a small product set, so that keys collide between generated maps."""
    return st.dictionaries(
        products, st.integers(min_value=min_count, max_value=max_count), max_size=max_size
    )


signed_maps = card_maps()
held_maps = card_maps(min_count=0)
positive_maps = card_maps(min_count=1)
nonempty_positive_maps = card_maps(min_count=1).filter(bool)
