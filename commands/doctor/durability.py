"""``doctor``'s durability check: whether the etcd the plugins write to keeps every write it
has answered, through a crash of its members.

The ledger is only as durable as etcd. Two etcd bugs break that promise, each fixed in a
release an operator can upgrade to:

- a cluster of **one voting member**, before 3.4.21 and 3.5.5, applies a write and answers it
  while still writing it to its log: killed at that moment, it comes back without a write the
  plugin reported as done to core (etcd-io/etcd#14370; with three members a write is committed
  only once a majority hold it on disk);
- **3.5.0 to 3.5.2** could, in a member that crashed under load, skip or repeat a committed
  transaction when it replayed its log (etcd-io/etcd#13766, fixed in 3.5.3).

A third bug makes such crashes come: **3.5.0 to 3.5.4** panic and exit when a client gives up
on a request while its transaction runs ("unexpected error during txn: context canceled",
etcd-io/etcd#14110, fixed in 3.5.5), which a plugin whose call core killed, or whose
``etcd.timeout`` ran out, does.

The rule (:func:`hazards`) is pure; :func:`check_durability` asks one endpoint for the
members and judges the oldest version the endpoints reported (a rolling upgrade is only as
safe as its oldest member).
"""

from __future__ import annotations

from resource_extend.commands.doctor.findings import Finding, ok, warn
from resource_extend.ledger.etcd import wire
from resource_extend.ledger.etcd.transport import Refused, Transport, Unavailable

CHECK = "etcd durability"
Version = tuple[int, int, int]

SINGLE_MEMBER_FIXED: dict[tuple[int, int], int] = {(3, 4): 21, (3, 5): 5}
"""The patch release of each minor that fixed etcd-io/etcd#14370; minors before 3.4 never got
the fix, those after 3.5 never had the bug."""
REPLAY_BROKEN = ((3, 5, 0), (3, 5, 2))
"""The releases with etcd-io/etcd#13766, first and last."""
CANCEL_CRASHES = ((3, 5, 0), (3, 5, 4))
"""The releases with etcd-io/etcd#14110, first and last."""
MEMBERS_FIX = "etcdctl member list -w table"
UPGRADE = (
    "upgrade etcd to 3.5.5 or later (3.4.21 or later on 3.4), one member at a time; "
    "until then run three voting members rather than one"
)


def parse_version(text: str) -> Version | None:
    """``3.5.1`` as ``(3, 5, 1)``; None when it is not three numbers (a build suffix such as
    ``3.5.1-rc.0`` is ignored)."""
    parts = text.split("-", 1)[0].split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return None
    return int(parts[0]), int(parts[1]), int(parts[2])


def hazards(version: Version, voters: int) -> list[str]:
    """What can become of a write etcd ``version`` has answered, with ``voters`` voting
    members, when members crash: each hazard in a sentence; none when it is kept."""
    found = []
    if voters == 1 and _loses_answered_writes(version):
        found.append(
            "it may answer a write before its log holds it, so a crash can lose a write the "
            "plugin reported as done (etcd-io/etcd#14370, fixed in 3.5.5 and 3.4.21)"
        )
    if CANCEL_CRASHES[0] <= version <= CANCEL_CRASHES[1]:
        found.append(
            "a member crashes when a client gives up on a request mid-transaction, as a "
            "call core killed or one that ran out of etcd.timeout does (etcd-io/etcd#14110, "
            "fixed in 3.5.5)"
        )
    if REPLAY_BROKEN[0] <= version <= REPLAY_BROKEN[1]:
        found.append(
            "a member that crashes under load may skip or repeat a committed transaction "
            "when it replays its log (etcd-io/etcd#13766, fixed in 3.5.3)"
        )
    return found


def _loses_answered_writes(version: Version) -> bool:
    fixed = SINGLE_MEMBER_FIXED.get(version[:2])
    if fixed is not None:
        return version[2] < fixed
    return version[:2] < min(SINGLE_MEMBER_FIXED)


def judge(version: Version, voters: int) -> Finding:
    """The finding for the oldest ``version`` among ``voters`` voting members."""
    shown = ".".join(map(str, version))
    members = "one voting member" if voters == 1 else f"{voters} voting members"
    found = hazards(version, voters)
    if found:
        return warn(CHECK, f"{members}, etcd {shown}: {'; and '.join(found)}", UPGRADE)
    if voters == 1:
        return ok(
            CHECK,
            f"{members}, etcd {shown}: a write is on its disk before it is answered; with no "
            "replica, that disk is the only copy of the ledger (etcdctl snapshot save)",
        )
    return ok(CHECK, f"{members}, etcd {shown}: a write is answered once a majority hold it")


def check_durability(transport: Transport, timeout: float, versions: list[str]) -> Finding:
    """Ask ``transport``'s one endpoint for the members; judge the oldest of the
    ``versions`` the endpoints reported."""
    parsed = [found for found in map(parse_version, versions) if found is not None]
    if not parsed:
        shown = ", ".join(versions) or "none"
        return warn(
            CHECK,
            f"not checked: no endpoint said a version this check can read ({shown})",
            "etcdctl endpoint status -w table (the VERSION column)",
        )
    try:
        answer = transport.send(0, wire.MemberListRequest(), wire.MemberListResponse, timeout)
    except (Unavailable, Refused) as exc:
        return warn(CHECK, f"not checked: etcd did not list its members ({exc})", MEMBERS_FIX)
    voters = sum(not member.is_learner for member in answer.members)
    if not voters:
        return warn(CHECK, "not checked: etcd listed no voting member", MEMBERS_FIX)
    return judge(min(parsed), voters)
