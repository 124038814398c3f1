"""Where a process's requests to a cluster start (``ledger.etcd.health``): at the member that
answered last, with a member that failed to answer lately tried last, for ``AVOID`` seconds."""

from __future__ import annotations

from resource_extend.ledger.etcd.health import AVOID, Health

THREE = (("10.0.0.1", 2379), ("10.0.0.2", 2379), ("10.0.0.3", 2379))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_cluster_never_asked_is_tried_in_its_order() -> None:
    assert Health().order(THREE) == [0, 1, 2]


def test_requests_start_at_the_member_that_answered_last() -> None:
    health = Health()
    health.answered(THREE, 2)
    assert health.order(THREE) == [2, 0, 1]


def test_a_member_that_failed_is_tried_last_for_a_while() -> None:
    clock = Clock()
    health = Health(clock)
    health.failed(THREE, 0)  # the first member hangs; the second answers the fail-over
    health.answered(THREE, 1)
    assert health.order(THREE) == [1, 2, 0]
    health.answered(THREE, 2)  # one that answered later: the start, the hung one still last
    assert health.order(THREE) == [2, 1, 0]
    assert health.avoided(THREE, 0) and not health.avoided(THREE, 1)
    clock.now += AVOID + 1
    assert not health.avoided(THREE, 0)
    assert health.order(THREE) == [2, 0, 1]


def test_of_two_that_failed_the_latest_is_tried_last() -> None:
    clock = Clock()
    health = Health(clock)
    health.failed(THREE, 1)
    clock.now += 1
    health.failed(THREE, 0)
    assert health.order(THREE) == [2, 1, 0]


def test_a_member_that_answers_again_is_no_longer_avoided() -> None:
    health = Health()
    health.failed(THREE, 0)
    health.answered(THREE, 0)
    assert health.order(THREE) == [0, 1, 2]
