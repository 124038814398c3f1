"""The one wire shape of every GPU value, ``{"prod_count_map": {product: count}}``, and its rules.

Decoding (msgspec) already rejects wrong types: strings, floats, booleans and null as counts,
and counts outside ``±MAX_COUNT``. The functions here apply the rules that depend on where a map
is used: products must not be blank, and counts must be positive except where a negative count
means "give back".
"""

from __future__ import annotations

from typing import Annotated

import msgspec

from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.projections.gpu.cards import Cards, normalised

MAX_COUNT = 1_000_000
"""No node has a million cards of a model; larger numbers are typos or hostile input."""

MAX_PRODUCT_LENGTH = 256

Count = Annotated[int, msgspec.Meta(ge=-MAX_COUNT, le=MAX_COUNT)]
Product = Annotated[str, msgspec.Meta(max_length=MAX_PRODUCT_LENGTH)]


class Resource(msgspec.Struct, omit_defaults=False):
    """``R``: a GPU value as core and the upstream plugin encode it. ``null`` maps mean empty."""

    prod_count_map: dict[Product, Count] | None = None

    @classmethod
    def of(cls, cards: Cards) -> Resource:
        return cls(prod_count_map=normalised(cards))


def _checked(resource: Resource | None, what: str, *, sign: str) -> Cards:
    raw = resource.prod_count_map if resource is not None else None
    if not raw:
        return {}
    for product, count in raw.items():
        if not product.strip():
            raise InvalidRequest(f"invalid gpu map in {what}: product name is blank")
        if not product.isprintable():
            raise InvalidRequest(
                f"invalid gpu map in {what}: product name {product!r} has control or "
                "invisible characters"
            )
        if sign == "positive" and count <= 0:
            raise InvalidRequest(
                f"invalid gpu map in {what}: count of {product!r} must be positive, got {count}"
            )
        if sign == "non-negative" and count < 0:
            raise InvalidRequest(
                f"invalid gpu map in {what}: count of {product!r} must not be negative, got {count}"
            )
    return normalised(raw)


def positive_cards(resource: Resource | None, what: str) -> Cards:
    """A request for cards: every count > 0 (an empty or null map asks for none)."""
    return _checked(resource, what, sign="positive")


def held_cards(resource: Resource | None, what: str) -> Cards:
    """Cards something holds or should hold: counts >= 0, zeros dropped."""
    return _checked(resource, what, sign="non-negative")


def signed_cards(resource: Resource | None, what: str) -> Cards:
    """A change: negative counts take cards away, zeros are dropped."""
    return _checked(resource, what, sign="any")


def as_resource(cards: Cards) -> Resource:
    return Resource.of(cards)
