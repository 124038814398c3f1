"""Request decoding: a field of ``R`` spelt in another case is refused wherever it appears;
the set verbs' ``resource_request`` tells "no cards named" from "an empty map"."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from resource_extend.commands.gpu import requests


@pytest.mark.parametrize(
    ("request_", "where"),
    [
        ({"resource": {"Prod_Count_Map": {}}}, ("$.resource", "Prod_Count_Map")),
        (
            {"workloads_resource": [{}, {"PROD_COUNT_MAP": None}]},
            ("$.workloads_resource[1]", "PROD_COUNT_MAP"),
        ),
        ({"Prod_count_map": 1}, ("$", "Prod_count_map")),
        ({"a b": {"prod_counT_map": 1}}, ("$[...]", "prod_counT_map")),
    ],
)
def test_a_miscased_field_is_found_where_it_is(request_: Any, where: tuple[str, str]) -> None:
    assert requests.decode.miscased(request_) == where


@pytest.mark.parametrize(
    "request_",
    [
        {"resource": {"prod_count_map": {"Prod_Count_Map": 1}}},
        {"workloads_resource": [{"prod_count_map": None}, None, 3, "Prod_Count_Map"]},
        {"resource": {"prod_count_maps": {}, "prodcountmap": {}, "prod-count-map": {}}},
        [],
    ],
)
def test_products_values_and_other_keys_are_not_fields(request_: Any) -> None:
    assert requests.decode.miscased(request_) is None


def test_a_deeply_nested_request_is_walked_without_recursion() -> None:
    deep: Any = {"Prod_Count_Map": 1}
    for _ in range(5000):
        deep = {"x": [deep]}
    path, key = requests.decode.miscased(deep) or ("", "")
    assert key == "Prod_Count_Map" and path.startswith("$.x[0].x[0]")


def test_decode_refuses_a_miscased_field_with_its_path() -> None:
    raw = b'{"nodename": "n1", "resource_request": {"Prod_Count_Map": {"a": 1}}}'
    with pytest.raises(
        msgspec.ValidationError, match=r"'Prod_Count_Map' is not a field.*`\$\.resource_request`"
    ):
        requests.decode(raw, requests.SetCapacity)


def test_decode_sees_through_escapes() -> None:
    raw = b'{"resource": {"\\u0050rod_count_map": {"a": 1}}}'
    with pytest.raises(msgspec.ValidationError, match="it is spelled 'prod_count_map'"):
        requests.decode(raw, requests.AddNode)


def test_decode_reads_a_well_spelt_request() -> None:
    raw = b'{"nodename": "n1", "resource_request": {"prod_count_map": {"PROD_COUNT_MAP": 1}}}'
    decoded = requests.decode(raw, requests.SetCapacity)
    assert decoded.resource_request is not None
    assert decoded.resource_request.as_resource().prod_count_map == {"PROD_COUNT_MAP": 1}


@pytest.mark.parametrize(
    ("raw", "names_cards", "cards"),
    [
        (b"{}", False, None),
        (b'{"prod_count_map": null}', True, None),
        (b'{"prod_count_map": {}}', True, {}),
        (b'{"prod_count_map": {"a": 2}}', True, {"a": 2}),
    ],
)
def test_resource_request_tells_no_cards_named_from_an_empty_map(
    raw: bytes, names_cards: bool, cards: dict[str, int] | None
) -> None:
    given = requests.decode(raw, requests.ResourceRequest)
    assert given.names_cards is names_cards
    assert given.as_resource().prod_count_map == cards
