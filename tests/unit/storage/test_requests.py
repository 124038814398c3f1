"""A workload request made consistent (as upstream's Validate makes it) and decoded from core's
JSON."""

from __future__ import annotations

import msgspec
import pytest

from resource_extend.ledger.model.errors import InvalidRequest
from resource_extend.projections.storage.grammar.bindings import (
    MAX_BINDINGS,
    Binding,
    InvalidVolume,
    parse_binding,
)
from resource_extend.projections.storage.wire.requests import (
    InvalidStorage,
    decode_workload_request,
    normalise,
    parse_workload_request,
    workload_request,
)
from resource_extend.projections.storage.wire.resources import WorkloadRequest

G = 2**30
T = 2**40


def bindings(*texts: str) -> list[Binding]:
    return [parse_binding(text) for text in texts]


def test_empty_request_needs_nothing() -> None:
    assert normalise([], [], 0, 0) == WorkloadRequest()


def test_limits_alone_are_also_the_request() -> None:
    got = normalise([], bindings("AUTO:/data:rw:100G"), 0, 0)
    assert [b.canonical() for b in got.request] == ["AUTO:/data:rw:107374182400:0:0:0:0"]
    assert got.limit == got.request
    assert (got.storage_request, got.storage_limit) == (100 * G, 100 * G)


def test_a_request_without_limits_is_a_length_mismatch() -> None:
    with pytest.raises(InvalidVolume) as caught:
        normalise(bindings("AUTO:/data:rw:1G"), [], 0, 0)
    assert caught.value.reason == "different length of request and limit: invalid volume"


def test_mismatched_destinations_are_refused() -> None:
    with pytest.raises(InvalidVolume) as caught:
        normalise(bindings("AUTO:/a:rw:1G"), bindings("AUTO:/b:rw:1G"), 0, 0)
    assert caught.value.reason.startswith("request and limit not match")
    assert caught.value.reason.endswith(": invalid volume")


def test_mismatched_flags_are_refused() -> None:
    with pytest.raises(InvalidVolume):
        normalise(bindings("AUTO:/a:rw:1G"), bindings("AUTO:/a:ro:1G"), 0, 0)


def test_lists_are_paired_after_sorting() -> None:
    got = normalise(
        bindings("AUTO:/b:rw:1G", "AUTO:/a:rw:2G"), bindings("AUTO:/a:rw:3G", "AUTO:/b:rw:4G"), 0, 0
    )
    assert [b.destination for b in got.request] == ["/a", "/b"]
    assert [b.size for b in got.limit] == [3 * G, 4 * G]
    assert (got.storage_request, got.storage_limit) == (3 * G, 7 * G)


def test_soft_limit_is_raised_to_the_request() -> None:
    """resource-extend's example: request 2 G / IOPS 100 against limit 1 G / IOPS 50."""
    got = normalise(bindings("AUTO:/d:rw:2G:100:100"), bindings("AUTO:/d:rw:1G:50:50"), 0, 0)
    assert got.limit[0].canonical() == f"AUTO:/d:rw:{2 * G}:100:100:0:0"
    assert got.storage_limit == got.storage_request == 2 * G


def test_an_unsized_limit_keeps_no_size_but_takes_the_quota() -> None:
    got = normalise(bindings("AUTO:/d:rw:2G:100"), bindings("AUTO:/d:rw:0"), 0, 0)
    assert got.limit[0].numbers == (0, 100, 0, 0, 0)


def test_lists_are_checked() -> None:
    with pytest.raises(InvalidVolume, match="monopoly volume can't be unlimited"):
        normalise([], bindings("AUTO:/d:rwm"), 0, 0)
    with pytest.raises(InvalidRequest, match="invalid io parameters"):
        normalise([], bindings("AUTO:/d:rw:1G:-1"), 0, 0)


@pytest.mark.parametrize(("request_", "limit"), [(-1, 0), (0, -1), (-1, -1), (5, -1)])
def test_negative_storage_is_refused(request_: int, limit: int) -> None:
    with pytest.raises(InvalidStorage) as caught:
        normalise([], [], request_, limit)
    assert caught.value.reason == "storage limit or request less than 0: invalid storage"


def test_storage_limit_alone_is_also_the_request() -> None:
    got = normalise([], [], 0, G)
    assert (got.storage_request, got.storage_limit) == (G, G)


def test_storage_request_above_its_limit_raises_it() -> None:
    got = normalise([], [], 2 * G, G)
    assert (got.storage_request, got.storage_limit) == (2 * G, 2 * G)


def test_storage_request_with_unlimited_storage_stays() -> None:
    got = normalise([], [], 2 * G, 0)
    assert (got.storage_request, got.storage_limit) == (2 * G, 0)


def test_storage_folds_the_bindings_once() -> None:
    request, limit = bindings("AUTO:/d:rw:1G"), bindings("AUTO:/d:rw:3G")
    got = normalise(request, limit, T, T)
    assert (got.storage_request, got.storage_limit) == (T + G, T + 3 * G)


def test_no_fold_when_realloc_already_folded() -> None:
    got = normalise([], bindings("AUTO:/d:rw:1G"), T, T, fold_storage=False)
    assert (got.storage_request, got.storage_limit) == (T, T)


def test_an_unlimited_storage_limit_still_folds_the_limit_sizes() -> None:
    """As upstream: the fold comes after the request/limit rules, so a 0 ("unlimited") storage
    limit ends as the limit bindings' total, which may be below the folded request."""
    got = normalise(bindings("AUTO:/d:rw:2G:100"), bindings("AUTO:/d:rw:1G"), G, 0)
    assert (got.storage_request, got.storage_limit) == (3 * G, 2 * G)


def test_storage_past_int64_is_refused() -> None:
    with pytest.raises(InvalidStorage):
        normalise([], bindings("AUTO:/d:rw:8000P", "AUTO:/e:rw:8000P"), 0, 0)


@pytest.mark.parametrize("text", ["AUTO:/d:rw:-1G", "/src:/dst:rw:-1T", "/src:/dst:ro:-1:100"])
def test_a_negative_size_is_refused_at_deploy_whatever_the_binding(text: str) -> None:
    """Folded into the storage request, a mount's negative size would free node storage that
    other workloads hold (and tell the engine a negative limit); only a realloc gives back."""
    with pytest.raises(InvalidVolume, match="size can't be negative"):
        normalise(bindings(text), bindings(text), 0, 0)
    normalise(bindings(text), bindings(text), 0, 0, fold_storage=False)  # a realloc's delta


def _over(size: int = 0, read_iops: int = 0) -> list[Binding]:
    """A binding a merge made (parsing refuses such figures already)."""
    return [parse_binding("AUTO:/d:rw:1G").with_numbers(size, (read_iops, 0, 0, 0))]


@pytest.mark.parametrize(
    "request_, limit, storage",
    [
        (bindings("AUTO:/d:rw:1G"), _over(size=2**63), 0),
        (bindings("AUTO:/d:rw:1G:1"), _over(size=1, read_iops=2**63), 0),
        (bindings("AUTO:/d:rw:1G"), bindings("AUTO:/d:rw:1G"), 2**63),
    ],
)
def test_every_figure_fits_an_int64_in_either_mode(
    request_: list[Binding], limit: list[Binding], storage: int
) -> None:
    """Core decodes them as Go int64s; a realloc's merge could add past that."""
    for fold in (True, False):
        with pytest.raises(InvalidRequest, match=str(2**63 - 1)):
            normalise(request_, limit, storage, storage, fold_storage=fold)


# decoding core's workload_resource_request (core's leniency; numbers, as eru-cli sends)


def decoded(raw: bytes) -> WorkloadRequest:
    return workload_request(decode_workload_request(raw))


def test_null_request_asks_for_nothing() -> None:
    assert workload_request(None) == WorkloadRequest()
    assert decoded(b"{}") == WorkloadRequest()


@pytest.mark.parametrize("key", ["volumes-request", "volume-request"])
def test_request_aliases(key: str) -> None:
    raw = f'{{"{key}": ["AUTO:/d:rw:1G"], "volumes": ["AUTO:/d:rw:2G"]}}'.encode()
    got = decoded(raw)
    assert [b.size for b in got.request] == [G]
    assert [b.size for b in got.limit] == [2 * G]


@pytest.mark.parametrize("key", ["volumes", "volume", "volume-limit", "volumes-limit"])
def test_limit_aliases(key: str) -> None:
    got = decoded(f'{{"{key}": ["AUTO:/d:rw:1G"]}}'.encode())
    assert [b.canonical() for b in got.limit] == [f"AUTO:/d:rw:{G}:0:0:0:0"]
    assert got.request == got.limit


def test_first_non_empty_alias_wins() -> None:
    raw = b'{"volumes-request": [], "volume-request": ["AUTO:/d:rw:1G"], "volumes": null,'
    raw += b' "volume": [], "volume-limit": ["AUTO:/d:rw:3G"], "volumes-limit": ["AUTO:/d:rw:9G"]}'
    got = decoded(raw)
    assert [b.size for b in got.request] == [G]
    assert [b.size for b in got.limit] == [3 * G]


def test_eru_cli_sends_numbers() -> None:
    """Decision 3: upstream read the CLI's numbers as 0 and counted only the volumes."""
    raw = b'{"storage-request": 1073741824, "storage-limit": 2147483648,'
    raw += b' "volumes-request": ["AUTO:/d:rw:1G"], "volumes-limit": ["AUTO:/d:rw:1G"]}'
    got = decoded(raw)
    assert (got.storage_request, got.storage_limit) == (2 * G, 3 * G)


@pytest.mark.parametrize("value", ['"1G"', "1073741824"])
def test_storage_sets_request_and_limit(value: str) -> None:
    raw = f'{{"storage-request": "5G", "storage-limit": "9G", "storage": {value}}}'.encode()
    got = decoded(raw)
    assert (got.storage_request, got.storage_limit) == (G, G)


def test_storage_zero_still_overrides() -> None:
    got = decoded(b'{"storage-request": "5G", "storage": 0}')
    assert (got.storage_request, got.storage_limit) == (0, 0)


def test_null_storage_is_absent() -> None:
    got = decoded(b'{"storage-request": "5G", "storage": null}')
    assert (got.storage_request, got.storage_limit) == (5 * G, 0)


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        (b'{"storage": 1.5}', "$.storage"),
        (b'{"storage-request": true}', "$.storage-request"),
        (b'{"storage-limit": {}}', "$.storage-limit"),
        (b'{"storage": 9223372036854775808}', "$.storage"),
        (b'{"volumes": "AUTO:/d:rw:1G"}', "$.volumes"),
        (b'{"volumes-request": ["AUTO:/d:rw:1G", 5]}', "$.volumes-request[1]"),
        (b'{"volume": [null]}', "$.volume[0]"),
    ],
)
def test_wrong_types_are_refused_naming_the_key(raw: bytes, where: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        decode_workload_request(raw)
    assert caught.value.reason.startswith("invalid workload_resource_request: ")
    assert where in caught.value.reason
    assert "\n" not in caught.value.reason


def test_overlong_lists_and_strings_are_refused() -> None:
    with pytest.raises(InvalidRequest, match="length"):
        decode_workload_request(msgspec.json.encode({"volumes": ["AUTO:/d"] * (MAX_BINDINGS + 1)}))
    with pytest.raises(InvalidRequest, match="length"):
        decode_workload_request(msgspec.json.encode({"volumes": ["AUTO:/" + "d" * 20_000]}))
    with pytest.raises(InvalidRequest, match="length"):
        decode_workload_request(msgspec.json.encode({"storage": "1" * 100}))


def test_bad_storage_text_names_the_key() -> None:
    with pytest.raises(InvalidStorage) as caught:
        decoded(b'{"storage-limit": "lots"}')
    assert caught.value.reason == "storage-limit: invalid size: 'lots': invalid storage"


def test_negative_storage_text_is_invalid_storage() -> None:
    """Upstream's vector: `storage: "-1"` → invalid storage."""
    with pytest.raises(InvalidStorage, match="storage limit or request less than 0"):
        decoded(b'{"storage": "-1"}')


def test_bad_binding_is_invalid_volume() -> None:
    with pytest.raises(InvalidVolume):
        decoded(b'{"volumes": ["one"]}')


def test_parsed_request_keeps_the_figures_as_given() -> None:
    """What realloc merges: no copy, no raise, no fold."""
    wire = decode_workload_request(b'{"volumes": ["AUTO:/d:rw:1G"], "storage-request": "2G"}')
    parsed = parse_workload_request(wire)
    assert parsed.request == ()
    assert [b.size for b in parsed.limit] == [G]
    assert (parsed.storage_request, parsed.storage_limit) == (2 * G, 0)
