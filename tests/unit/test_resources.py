"""The wire shape of GPU values and its validation: ledger/resources.py."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest

from resource_extend.ledger.model.errors import InvalidRequest, PluginError
from resource_extend.projections.gpu.cards import Cards
from resource_extend.projections.gpu.resources import (
    MAX_COUNT,
    MAX_PRODUCT_LENGTH,
    Resource,
    as_resource,
    held_cards,
    positive_cards,
    signed_cards,
)

Checker = Callable[[Resource | None, str], Cards]
ALL_CHECKERS: list[Checker] = [positive_cards, held_cards, signed_cards]


def decode(raw: bytes | str) -> Resource:
    return msgspec.json.decode(raw, type=Resource)


# --- decoding -------------------------------------------------------------------------------


def test_decode_a_plain_map() -> None:
    resource = decode('{"prod_count_map": {"nvidia-3090": 4, "nvidia-3070": 2}}')
    assert resource.prod_count_map == {"nvidia-3090": 4, "nvidia-3070": 2}


@pytest.mark.parametrize(
    "raw", ['{"prod_count_map": null}', "{}", '{"prod_count_map1": null}', '{"other": 1}']
)
def test_decode_null_or_absent_map_is_none(raw: str) -> None:
    assert decode(raw).prod_count_map is None


def test_decode_ignores_unknown_keys() -> None:
    resource = decode('{"prod_count_map": {"a": 1}, "extra": [1, 2]}')
    assert resource.prod_count_map == {"a": 1}


@pytest.mark.parametrize(
    "count",
    ['"1"', "1.0", "1.5", "1e3", "true", "false", "null", "[1]", "{}"],
    ids=["string", "float-integral", "float", "exponent", "true", "false", "null", "list", "obj"],
)
def test_decode_rejects_non_integer_counts(count: str) -> None:
    with pytest.raises(msgspec.ValidationError):
        decode('{"prod_count_map": {"nvidia-3090": ' + count + "}}")


@pytest.mark.parametrize("count", [MAX_COUNT, -MAX_COUNT, 0, 1, -1])
def test_decode_accepts_counts_within_bounds(count: int) -> None:
    assert decode(f'{{"prod_count_map": {{"a": {count}}}}}').prod_count_map == {"a": count}


@pytest.mark.parametrize("count", [MAX_COUNT + 1, -MAX_COUNT - 1, 10**30, -(10**30)])
def test_decode_rejects_counts_beyond_bounds(count: int) -> None:
    with pytest.raises(msgspec.ValidationError):
        decode(f'{{"prod_count_map": {{"a": {count}}}}}')


def test_max_count_is_one_million() -> None:
    assert MAX_COUNT == 1_000_000


def test_decode_rejects_overlong_product_names() -> None:
    ok = "p" * MAX_PRODUCT_LENGTH
    assert decode(msgspec.json.encode({"prod_count_map": {ok: 1}})).prod_count_map == {ok: 1}
    with pytest.raises(msgspec.ValidationError):
        decode(msgspec.json.encode({"prod_count_map": {ok + "p": 1}}))


@pytest.mark.parametrize("raw", ['{"prod_count_map": [1]}', '{"prod_count_map": "a"}', "null"])
def test_decode_rejects_wrong_shapes(raw: str) -> None:
    with pytest.raises(msgspec.ValidationError):
        decode(raw)


def test_upstream_vector_colon_product_counts() -> None:
    # Upstream: {"nvidia-3070":4, ":nvidia-3090":2} -> count 6 for request and resource.
    resource = decode('{"prod_count_map": {"nvidia-3070": 4, ":nvidia-3090": 2}}')
    assert sum(positive_cards(resource, "request").values()) == 6
    assert sum(held_cards(resource, "resource").values()) == 6


def test_encoded_resource_round_trips() -> None:
    resource = Resource.of({"b": 1, "a": 2, "z": 0})
    raw = msgspec.json.encode(resource)
    assert raw == b'{"prod_count_map":{"a":2,"b":1}}'
    assert decode(raw) == resource


def test_default_resource_encodes_null_map() -> None:
    assert msgspec.json.encode(Resource()) == b'{"prod_count_map":null}'


def test_of_and_as_resource_normalise() -> None:
    assert Resource.of({"b": 1, "a": 0}).prod_count_map == {"b": 1}
    assert as_resource({"a": 0}).prod_count_map == {}
    assert as_resource({"b": 2, "a": 1}) == Resource(prod_count_map={"a": 1, "b": 2})


# --- validation shared by every checker ---------------------------------------------------------


@pytest.mark.parametrize("check", ALL_CHECKERS)
@pytest.mark.parametrize("resource", [None, Resource(), Resource(prod_count_map={})])
def test_absent_or_empty_maps_are_empty(check: Checker, resource: Resource | None) -> None:
    assert check(resource, "r") == {}


@pytest.mark.parametrize("check", ALL_CHECKERS)
@pytest.mark.parametrize("product", ["", " ", "   ", "\t", "\n", " \t\r\n ", "\u3000", "\u00a0"])
def test_blank_products_are_rejected(check: Checker, product: str) -> None:
    with pytest.raises(InvalidRequest) as info:
        check(Resource(prod_count_map={"nvidia-3090": 1, product: 1}), "workload_resource")
    assert "blank" in info.value.reason
    assert "workload_resource" in info.value.reason


@pytest.mark.parametrize("check", ALL_CHECKERS)
def test_products_with_inner_spaces_are_kept_verbatim(check: Checker) -> None:
    assert check(Resource(prod_count_map={" nvidia 3090 ": 2}), "r") == {" nvidia 3090 ": 2}


@pytest.mark.parametrize("check", ALL_CHECKERS)
def test_result_is_normalised_and_sorted(check: Checker) -> None:
    result = check(Resource(prod_count_map={"b": 2, "a": 1}), "r")
    assert result == {"a": 1, "b": 2}
    assert list(result) == ["a", "b"]


def test_invalid_request_is_a_plugin_error() -> None:
    with pytest.raises(PluginError):
        positive_cards(Resource(prod_count_map={"a": 0}), "r")


# --- sign rules per function --------------------------------------------------------------------


@pytest.mark.parametrize("count", [0, -1, -MAX_COUNT])
def test_positive_cards_rejects_zero_and_negative(count: int) -> None:
    with pytest.raises(InvalidRequest) as info:
        positive_cards(Resource(prod_count_map={"nvidia-3070": count}), "workload_request")
    reason = info.value.reason
    assert "'nvidia-3070'" in reason
    assert "positive" in reason
    assert "workload_request" in reason
    assert str(count) in reason


def test_positive_cards_accepts_positive_counts() -> None:
    assert positive_cards(Resource(prod_count_map={"a": 1, "b": MAX_COUNT}), "r") == {
        "a": 1,
        "b": MAX_COUNT,
    }


def test_upstream_vector_negative_request_is_invalid() -> None:
    with pytest.raises(InvalidRequest, match="invalid gpu map"):
        positive_cards(Resource(prod_count_map={"nvidia-3070": -1, "nvidia-3090": 1}), "request")


def test_held_cards_drops_zeros() -> None:
    assert held_cards(Resource(prod_count_map={"a": 0, "b": 3}), "r") == {"b": 3}
    assert held_cards(Resource(prod_count_map={"a": 0}), "r") == {}


def test_held_cards_rejects_negative() -> None:
    with pytest.raises(InvalidRequest) as info:
        held_cards(Resource(prod_count_map={"a": 2, "b": -1}), "usage")
    assert "'b'" in info.value.reason
    assert "negative" in info.value.reason
    assert "usage" in info.value.reason


def test_signed_cards_keeps_negative_and_drops_zeros() -> None:
    resource = Resource(prod_count_map={"a": -2, "b": 0, "c": 3})
    assert signed_cards(resource, "r") == {"a": -2, "c": 3}


def test_checking_does_not_mutate_the_resource() -> None:
    resource = Resource(prod_count_map={"b": 0, "a": 1})
    held_cards(resource, "r")
    assert resource.prod_count_map == {"b": 0, "a": 1}
