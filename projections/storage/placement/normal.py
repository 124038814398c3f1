"""The normal enumeration of step 3 of upstream's placement, in runs of identical passes.

Upstream repeats one pass until it fails: each normal binding, smallest first, goes best fit
onto the used volume with the least free space that still holds it and whose disk has its
quota; then every mount binding charges its disk. A 1 GiB binding on a few terabytes is
thousands of passes, and a tiny one is millions. Their plans are mostly the same pass over
and over: consecutive passes put every binding on the same volume until something changes,
and the passes in between change the state linearly. So this module simulates one pass
literally, works out exactly how many times that same pass will repeat (the first pass at
which a volume or disk runs short, or a volume that was larger than a binding's choice
overtakes it, is found in closed form), and applies the repeats at once. For one binding
without quota this is upstream's ``Σ ⌊free / size⌋``, one run per volume.

The result is exactly upstream's unbounded enumeration, in time that grows with the number of
runs rather than passes, and it may stop early at ``limit`` passes when nothing needs the rest.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Sequence

from resource_extend.projections.storage.grammar.disks import (
    NO_QUOTA,
    Quota,
    add,
    fits,
    subtract,
    times,
)
from resource_extend.projections.storage.placement.scheduler_view import Classes, Host

Pattern = tuple[tuple[str, int], ...]
"""Where a pass puts the normal bindings, in binding order: (volume path, how many of the
next bindings land there), consecutive bindings on one volume counted together."""


class Enumeration:
    """The passes found: ``runs`` of (pattern, repeats) in order, ``count`` in all; when
    ``exhausted``, ``taken`` (bytes per volume over every pass) and ``left`` (disk quota after
    the failing pass's partial charges, which the monopoly step sees) are upstream's."""

    __slots__ = ("count", "exhausted", "left", "runs", "taken")

    def __init__(self) -> None:
        self.runs: list[tuple[Pattern, int]] = []
        self.count = 0
        self.exhausted = False
        self.taken: dict[str, int] = {}
        self.left: dict[str, Quota] = {}


def enumerate_normal(
    host: Host, used: Sequence[str], classes: Classes, limit: int | None
) -> Enumeration:
    """Passes of the normal and mount bindings of ``classes`` over the ``used`` volumes of
    ``host`` (not changed), until one fails or ``limit`` passes are found."""
    normal = classes.normal
    if len(normal) == 1 and not classes.mounts and not normal[0].has_io:
        return _single(host, used, normal[0].size, limit)
    return _Runner(host, used, classes).run(limit)


def _single(host: Host, used: Sequence[str], size: int, limit: int | None) -> Enumeration:
    """One binding without quota (a size, then): best fit fills the smallest volume that holds
    it ⌊free / size⌋ times, then the next; no disk is charged, not even by the failing pass."""
    result = Enumeration()
    free = host.free
    for volume_free, path in sorted([(free[p], p) for p in used]):
        copies = volume_free // size
        if copies <= 0:
            continue
        if limit is not None and result.count + copies >= limit:
            copies = limit - result.count
            if copies > 0:
                result.runs.append((((path, 1),), copies))
                result.taken[path] = copies * size
                result.count = limit
            return result
        result.runs.append((((path, 1),), copies))
        result.taken[path] = copies * size
        result.count += copies
    result.exhausted = True
    result.left = dict(host.left)
    return result


class _Runner:
    """The enumeration on one host. A pass places its bindings a stretch at a time: once
    binding ``i`` has its best-fit volume, the bindings after it (as large or larger) land on
    the same one for as long as it holds them and its disk has their quota, unless a volume
    passed over for lack of quota was better placed (then one binding at a time): running
    sums say how far that goes, so a pass costs its stretches, not its bindings."""

    def __init__(self, host: Host, used: Sequence[str], classes: Classes) -> None:
        self.host = host
        self.free = {path: host.free[path] for path in used}
        self.order = sorted((size, path) for path, size in self.free.items())
        self.left = dict(host.left)
        self.profile = classes.profile
        self.sizes = [b.size for b in classes.normal]
        self.quotas = [b.quota for b in classes.normal]
        self.devices = {path: host.disk_of(path) for path in used}
        self.mounts = [(host.disk_of(b.source), b.quota) for b in classes.mounts]
        mount_totals: dict[str | None, Quota] = {}
        for device, quota in self.mounts:
            mount_totals[device] = add(mount_totals.get(device, NO_QUOTA), quota)
        self.mount_totals = list(mount_totals.items())
        self.dead_devices: set[str | None] = set()

    def run(self, limit: int | None) -> Enumeration:
        result = Enumeration()
        taken = result.taken
        while limit is None or result.count < limit:
            attempt = self._one_pass()
            if isinstance(attempt, dict):  # failed: its charges so far stay
                for device, charged in attempt.items():
                    self.left[device] = subtract(self.left[device], charged)
                result.exhausted = True
                break
            pattern, spent = attempt
            rate = self._rate(pattern)
            repeats = self._repeats(pattern, rate, spent)
            if limit is not None:
                repeats = min(repeats, limit - result.count)
            self._apply(rate, spent, repeats)
            for path, per_pass in rate.items():
                taken[path] = taken.get(path, 0) + per_pass * repeats
            result.runs.append((pattern, repeats))
            result.count += repeats
        result.left = self.left
        return result

    def _rate(self, pattern: Pattern) -> dict[str, int]:
        """Bytes per volume one pass of ``pattern`` takes."""
        sums = self.profile.sizes
        rate: dict[str, int] = {}
        start = 0
        for path, count in pattern:
            rate[path] = rate.get(path, 0) + sums[start + count] - sums[start]
            start += count
        return rate

    def _affords(self, device: str | None, quota: Quota, spent: dict[str, Quota]) -> bool:
        """Whether ``device`` has ``quota`` left after this pass's ``spent``. A quota of zero
        always fits: validated records never use more than a disk has (the write-time checks)."""
        if quota == NO_QUOTA:
            return True
        if device is None:
            return False
        return fits(quota, subtract(self.left[device], spent.get(device, NO_QUOTA)))

    def _one_pass(self) -> tuple[Pattern, dict[str, Quota]] | dict[str, Quota]:
        """One pass: its pattern and quota charged per device, or (failed) the quota charged
        before the failure."""
        touched: dict[str, int] = {}
        spent: dict[str, Quota] = {}
        pattern: list[tuple[str, int]] = []
        profile, sizes, quotas = self.profile, self.sizes, self.quotas
        start, count = 0, profile.count
        while start < count:
            found = self._best(sizes[start], quotas[start], touched, spent)
            if found is None:
                return spent
            (free, path), passed_over = found
            device = self.devices[path]
            end = start + 1 if passed_over else self._stretch(start, free, device, spent)
            touched[path] = free - (profile.sizes[end] - profile.sizes[start])
            if device is not None:
                quota = profile.quota_of(start, end)
                if quota != NO_QUOTA:
                    spent[device] = add(spent.get(device, NO_QUOTA), quota)
            if pattern and pattern[-1][0] == path:
                pattern[-1] = (path, pattern[-1][1] + end - start)
            else:
                pattern.append((path, end - start))
            start = end
        if not (self.profile.monotone and self._mounts_fit(spent)):
            for device, quota in self.mounts:  # the failing mount's charges so far stay
                if not self._affords(device, quota, spent):
                    return spent
                if device is not None:
                    spent[device] = add(spent.get(device, NO_QUOTA), quota)
            return tuple(pattern), spent
        for device, quota in self.mount_totals:
            if device is not None:
                spent[device] = add(spent.get(device, NO_QUOTA), quota)
        return tuple(pattern), spent

    def _mounts_fit(self, spent: dict[str, Quota]) -> bool:
        """Whether every mount's quota fits, one after the other: charges only add up, so
        they do when each disk has what all its mounts charge together."""
        return all(self._affords(device, quota, spent) for device, quota in self.mount_totals)

    def _best(
        self, size: int, quota: Quota, touched: dict[str, int], spent: dict[str, Quota]
    ) -> tuple[tuple[int, str], bool] | None:
        """The best-fit volume for one binding, (free, path), and whether a volume that
        would have fitted better was passed over for lack of quota; None if none fits."""
        best: tuple[int, str] | None = None
        short: list[tuple[int, str]] = []
        for path, free in touched.items():
            if free >= size and (best is None or (free, path) < best):
                if self._affords(self.devices[path], quota, spent):
                    best = (free, path)
                else:
                    short.append((free, path))
        passed_over = False
        dead: list[tuple[int, str]] = []
        order = self.order
        for i in range(bisect_left(order, (size, "")), len(order)):
            item = order[i]
            if best is not None and item > best:
                break
            if item[1] in touched:
                continue
            device = self.devices[item[1]]
            if self._affords(device, quota, spent):
                best = item
                break
            if self._is_dead(device):
                dead.append(item)
            else:
                passed_over = True
        for item in dead:
            del order[bisect_left(order, item)]
        if best is None:
            return None
        return best, passed_over or any(item < best for item in short)

    def _stretch(self, start: int, free: int, device: str | None, spent: dict[str, Quota]) -> int:
        """Where the stretch of bindings from ``start`` on one volume (``free`` bytes, on
        ``device``) ends: the first binding it cannot hold, or whose quota its disk lacks
        (quota-free bindings always fit)."""
        profile = self.profile
        if not profile.monotone:
            return start + 1
        sums = profile.sizes
        end = bisect_right(sums, sums[start] + free, start + 1) - 1
        if end <= profile.zero_until[start]:
            return end
        by_quota = profile.zero_until[start]  # quota-free bindings fit anywhere
        if device is not None:
            left = subtract(self.left[device], spent.get(device, NO_QUOTA))
            fitting = end
            for figure, have in zip(profile.quota_sums, left, strict=True):
                fitting = min(fitting, bisect_right(figure, figure[start] + have, start) - 1)
            by_quota = max(by_quota, fitting)
        return min(end, by_quota)

    def _is_dead(self, device: str | None) -> bool:
        """No binding can ever use this device's volumes again: its quota left (which only
        falls) is short for every binding."""
        if device in self.dead_devices:
            return True
        left = NO_QUOTA if device is None else self.left[device]
        if any(fits(quota, left) for quota in self.profile.least_quotas):
            return False
        self.dead_devices.add(device)
        return True

    def _repeats(self, pattern: Pattern, rate: dict[str, int], spent: dict[str, Quota]) -> int:
        """How many consecutive passes, from this one on, repeat ``pattern``.

        Within a run, each volume loses ``rate[v]`` bytes and each disk ``spent[d]`` per pass.
        The run ends at the first pass where a chosen volume or a disk runs short, or where a
        volume that was larger than binding i's choice (and falls faster) has overtaken it
        while still able to take binding i. Volumes nobody chose keep their size, so only
        chosen volumes can overtake; a volume that could not take binding i never can later.
        """
        bound: int | None = None
        for path, per_pass in rate.items():
            if per_pass > 0:
                bound = _least(bound, self.free[path] // per_pass)
        for device, per_pass_quota in spent.items():
            left = self.left[device]
            for have, per_pass in zip(left, per_pass_quota, strict=True):
                if per_pass > 0:
                    bound = _least(bound, have // per_pass)
        if len(rate) > 1:
            bound = self._overtaken(pattern, rate, spent, bound)
        if bound is None:  # a pass that takes nothing cannot succeed (classification)
            raise AssertionError("a normal pass that consumes nothing")
        return bound

    def _overtaken(
        self, pattern: Pattern, rate: dict[str, int], spent: dict[str, Quota], bound: int | None
    ) -> int | None:
        """The first pass where a faster-falling volume overtakes a binding's choice.

        Along a stretch on one volume, each binding sees its volume smaller than the one
        before did (the gap to every other volume only grows) and is as large, with as much
        charged before it: so a binding can only be overtaken earlier than one before it in
        the stretch if its quota is not within that one's. Only those are looked at.
        """
        profile = self.profile
        sums, sizes, quotas = profile.sizes, self.sizes, self.quotas
        before: dict[str, int] = {}  # bytes put on each volume earlier in the pass
        charged: dict[str, Quota] = {}  # quota charged to each device earlier in the pass
        start = 0
        for chosen, count in pattern:
            end = start + count
            device = self.devices[chosen]
            for i in self._unlike(start, end):
                chosen_free = self.free[chosen] - before.get(chosen, 0) - (sums[i] - sums[start])
                so_far = dict(charged)
                if device is not None:
                    so_far[device] = add(so_far.get(device, NO_QUOTA), profile.quota_of(start, i))
                size, quota = sizes[i], quotas[i]
                for other, other_rate in rate.items():
                    if other_rate <= rate[chosen]:
                        continue
                    other_free = self.free[other] - before.get(other, 0)
                    if not self._takes(other, other_free, 0, size, quota, spent, so_far):
                        continue  # it could not take this binding, and never will
                    gap, closing = other_free - chosen_free, other_rate - rate[chosen]
                    at = -(-gap // closing) if other < chosen else gap // closing + 1
                    if (bound is None or at < bound) and self._takes(
                        other, other_free - at * other_rate, at, size, quota, spent, so_far
                    ):
                        bound = at
            before[chosen] = before.get(chosen, 0) + sums[end] - sums[start]
            if device is not None:
                charged[device] = add(charged.get(device, NO_QUOTA), profile.quota_of(start, end))
            start = end
        return bound

    def _unlike(self, start: int, end: int) -> list[int]:
        """The bindings of ``start:end`` whose quota is within no earlier one's there."""
        quotas, profile = self.quotas, self.profile
        if not profile.monotone:
            return list(range(start, end))
        firsts: list[int] = []
        if end - start <= len(profile.positions):
            firsts.extend(range(start, end))
        else:  # the first binding of each quota in the stretch
            for positions in profile.positions.values():
                at = bisect_left(positions, start)
                if at < len(positions) and positions[at] < end:
                    firsts.append(positions[at])
            firsts.sort()
        kept: list[int] = []
        seen: list[Quota] = []
        for i in firsts:
            quota = quotas[i]
            if not any(fits(other, quota) for other in seen):
                kept.append(i)
                seen.append(quota)
        return kept

    def _takes(
        self,
        path: str,
        free: int,
        passes: int,
        size: int,
        quota: Quota,
        spent: dict[str, Quota],
        charged: dict[str, Quota],
    ) -> bool:
        """Whether ``path``, ``passes`` passes into the run, can take a binding at the point
        of the pass where ``charged`` has been spent."""
        if free < size:
            return False
        device = self.devices[path]
        if device is None:
            return not any(quota)
        left = subtract(self.left[device], times(spent.get(device, NO_QUOTA), passes))
        return all(
            have - gone >= want
            for have, gone, want in zip(left, charged.get(device, NO_QUOTA), quota, strict=True)
        )

    def _apply(self, rate: dict[str, int], spent: dict[str, Quota], repeats: int) -> None:
        for path, per_pass in rate.items():
            old = self.free[path]
            del self.order[bisect_left(self.order, (old, path))]
            self.free[path] = old - per_pass * repeats
            insort(self.order, (self.free[path], path))
        for device, per_pass_quota in spent.items():
            self.left[device] = subtract(self.left[device], times(per_pass_quota, repeats))


def _least(a: int | None, b: int) -> int:
    return b if a is None else min(a, b)
