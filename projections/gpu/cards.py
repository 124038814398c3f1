"""Card maps: product model -> card count, and the arithmetic on them.

A *normalised* map holds no zero counts; every stored map is normalised, so two maps are equal
exactly when they hold the same cards. Maps are plain dicts and are never mutated in place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

Cards = dict[str, int]


def normalised(cards: Mapping[str, int]) -> Cards:
    """The map without its zero counts, keys sorted (so encodings are stable)."""
    return {product: count for product, count in sorted(cards.items()) if count != 0}


def add(left: Mapping[str, int], right: Mapping[str, int]) -> Cards:
    merged = dict(left)
    for product, count in right.items():
        merged[product] = merged.get(product, 0) + count
    return normalised(merged)


def negate(cards: Mapping[str, int]) -> Cards:
    return {product: -count for product, count in cards.items()}


def subtract(left: Mapping[str, int], right: Mapping[str, int]) -> Cards:
    return add(left, negate(right))


def sum_all(maps: Iterable[Mapping[str, int]]) -> Cards:
    """One pass, normalised once at the end: linear in the cards summed."""
    total: Cards = {}
    for cards in maps:
        for product, count in cards.items():
            total[product] = total.get(product, 0) + count
    return normalised(total)


def total(cards: Mapping[str, int]) -> int:
    return sum(cards.values())


def clamped(cards: Mapping[str, int]) -> Cards:
    """Only the positive counts: a product that fell to zero or below disappears."""
    return {product: count for product, count in sorted(cards.items()) if count > 0}


def below_zero(cards: Mapping[str, int]) -> Cards:
    """The products whose count is negative (an invalid result of a subtraction)."""
    return {product: count for product, count in sorted(cards.items()) if count < 0}


def describe(cards: Mapping[str, int]) -> str:
    """A compact human form: ``nvidia-3090:2, nvidia-3070:1`` or ``none``."""
    if not cards:
        return "none"
    return ", ".join(f"{product}:{count}" for product, count in sorted(cards.items()))
