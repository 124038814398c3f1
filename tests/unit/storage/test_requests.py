"""A workload request made consistent (§1.4 steps 2-3) and decoded from core's JSON (§1.7)."""

from __future__ import annotations

import pytest

from resource_extend.ledger.errors import InvalidRequest
from resource_extend.projections.storage.bindings import Binding, InvalidVolume, parse_binding
from resource_extend.projections.storage.requests import InvalidStorage, normalise
from resource_extend.projections.storage.resources import WorkloadRequest

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
