"""``doctor``'s clock check: how far this host's clock is from etcd's, judged from the ``Date``
of etcd's answers (``doctor_etcd`` reads them). Event times and compaction's age limit both
depend on clocks that agree."""

from __future__ import annotations

from datetime import datetime

from resource_extend.commands.doctor.findings import Finding, fail, not_checked, ok, warn

WARN_SKEW = 1.0
"""Seconds of clock difference with etcd past which doctor warns."""
FAIL_SKEW = 60.0
"""Seconds past which it fails: event times a minute off mislead ``history --since`` and
``show --at``, and eat into the margin ``streams.min_age`` leaves compaction."""
CALL_SECONDS = 30.0
"""How long core lets a call run: a lost answer's retry looks for its event up to this late."""
CLOCK_FIX = (
    "synchronise the clocks of this host and etcd's hosts (NTP: timedatectl set-ntp true, or "
    "chrony), then run again"
)


def clock_offset(date: datetime, sent: float, received: float) -> float:
    """How far etcd's clock is at least ahead (+) or behind (-) this host's, from the ``Date``
    of a reply sent at ``sent`` and received at ``received`` (this host's times): the date is
    the second etcd answered in, truncated, so its clock read somewhere in ``[date, date + 1)``
    while ours read somewhere in ``[sent, received]``. 0 when the two may agree."""
    server = date.timestamp()
    if server > received:
        return server - received
    if server + 1 < sent:
        return server + 1 - sent
    return 0.0


def fail_after(min_age: float) -> float:
    """The clock difference that matters: ``FAIL_SKEW``, or less when ``streams.min_age``
    leaves less than that beyond a core call (compaction here keeps events younger than
    ``min_age`` by this host's clock against the times in the events)."""
    margin = min_age - CALL_SECONDS
    return min(FAIL_SKEW, margin) if margin > WARN_SKEW else FAIL_SKEW


def judge_clock(offsets: list[tuple[str, float]], min_age: float) -> Finding:
    """The worst clock difference measured, against the thresholds."""
    check = "clock"
    if not offsets:
        return not_checked(check, "no etcd endpoint's HTTP gateway answered with a Date")
    where, worst = max(offsets, key=lambda found: abs(found[1]))
    skew = abs(worst)
    if skew <= WARN_SKEW:
        return ok(check, f"this host's clock agrees with etcd's to within a second ({where})")
    direction = "behind" if worst > 0 else "ahead of"
    message = (
        f"this host's clock is at least {skew:.1f} s {direction} etcd's at {where}: events "
        "written here carry times that far off"
    )
    limit = fail_after(min_age)
    if skew < limit:
        return warn(check, f"{message} (fails from {limit:g} s)", CLOCK_FIX)
    return fail(
        check,
        f"{message}; from {limit:g} s it matters: history --since/--until and show --at pick "
        "events by those times, and compaction on this host judges streams.min_age "
        f"({min_age:g} s, less core's {CALL_SECONDS:g} s for a call) by its own clock against "
        "them, so it could remove an event a retried call still looks for",
        CLOCK_FIX,
    )
