"""The normal enumeration of §2.8 step 3, in runs of identical passes.

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

from bisect import bisect_left, insort
from collections.abc import Sequence

from resource_extend.projections.storage.bindings import Binding
from resource_extend.projections.storage.disks import NO_QUOTA, Quota, add, fits, subtract, times
from resource_extend.projections.storage.host import Host

Pattern = tuple[str, ...]
"""The volume path each normal binding of a pass lands on, in binding order."""


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
    host: Host,
    used: Sequence[str],
    normal: Sequence[Binding],
    mounts: Sequence[Binding],
    limit: int | None,
) -> Enumeration:
    """Passes of ``normal`` + ``mounts`` over the ``used`` volumes of ``host`` (not changed),
    until one fails or ``limit`` passes are found."""
    if len(normal) == 1 and not mounts and not normal[0].has_io:
        return _single(host, used, normal[0].size, limit)
    return _Runner(host, used, normal, mounts).run(limit)


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
                result.runs.append(((path,), copies))
                result.taken[path] = copies * size
                result.count = limit
            return result
        result.runs.append(((path,), copies))
        result.taken[path] = copies * size
        result.count += copies
    result.exhausted = True
    result.left = dict(host.left)
    return result


class _Runner:
    def __init__(
        self, host: Host, used: Sequence[str], normal: Sequence[Binding], mounts: Sequence[Binding]
    ) -> None:
        self.host = host
        self.free = {path: host.free[path] for path in used}
        self.order = sorted((size, path) for path, size in self.free.items())
        self.left = dict(host.left)
        self.sizes = [b.size for b in normal]
        self.quotas = [b.quota for b in normal]
        self.devices = {path: host.disk_of(path) for path in used}
        self.mounts = [(host.disk_of(b.source), b.quota) for b in mounts]
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
            repeats = self._repeats(pattern, spent)
            if limit is not None:
                repeats = min(repeats, limit - result.count)
            self._apply(pattern, spent, repeats)
            for path, size in zip(pattern, self.sizes, strict=True):
                taken[path] = taken.get(path, 0) + size * repeats
            result.runs.append((pattern, repeats))
            result.count += repeats
        result.left = self.left
        return result

    def _affords(self, device: str | None, quota: Quota, spent: dict[str, Quota]) -> bool:
        """Whether ``device`` has ``quota`` left after this pass's ``spent``. A quota of zero
        always fits: validated records never use more than a disk has (§1.8)."""
        if quota == NO_QUOTA:
            return True
        if device is None:
            return False
        return fits(quota, subtract(self.left[device], spent.get(device, NO_QUOTA)))

    def _one_pass(self) -> tuple[Pattern, dict[str, Quota]] | dict[str, Quota]:
        """One literal pass: its pattern and quota charged per device, or (failed) the quota
        charged before the failure."""
        touched: dict[str, int] = {}
        spent: dict[str, Quota] = {}
        pattern: list[str] = []
        order = self.order
        for size, quota in zip(self.sizes, self.quotas, strict=True):
            best: tuple[int, str] | None = None
            for path, free in touched.items():
                if (
                    free >= size
                    and (best is None or (free, path) < best)
                    and self._affords(self.devices[path], quota, spent)
                ):
                    best = (free, path)
            dead: list[tuple[int, str]] = []
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
            for item in dead:
                del order[bisect_left(order, item)]
            if best is None:
                return spent
            free, path = best
            touched[path] = free - size
            device = self.devices[path]
            if device is not None and any(quota):
                spent[device] = add(spent.get(device, NO_QUOTA), quota)
            pattern.append(path)
        for device, quota in self.mounts:
            if not self._affords(device, quota, spent):
                return spent
            if device is not None:
                spent[device] = add(spent.get(device, NO_QUOTA), quota)
        return tuple(pattern), spent

    def _is_dead(self, device: str | None) -> bool:
        """No binding can ever use this device's volumes again: its quota left (which only
        falls) is short for every binding."""
        if device in self.dead_devices:
            return True
        left = NO_QUOTA if device is None else self.left[device]
        if any(all(have >= want for have, want in zip(left, q, strict=True)) for q in self.quotas):
            return False
        self.dead_devices.add(device)
        return True

    def _repeats(self, pattern: Pattern, spent: dict[str, Quota]) -> int:
        """How many consecutive passes, from this one on, repeat ``pattern``.

        Within a run, each volume loses ``rate[v]`` bytes and each disk ``spent[d]`` per pass.
        The run ends at the first pass where a chosen volume or a disk runs short, or where a
        volume that was larger than binding i's choice (and falls faster) has overtaken it
        while still able to take binding i. Volumes nobody chose keep their size, so only
        chosen volumes can overtake; a volume that could not take binding i never can later.
        """
        rate: dict[str, int] = {}
        for path, size in zip(pattern, self.sizes, strict=True):
            rate[path] = rate.get(path, 0) + size
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
        before: dict[str, int] = {}  # bytes put on each volume earlier in the pass
        charged: dict[str, Quota] = {}  # quota charged to each device earlier in the pass
        for chosen, size, quota in zip(pattern, self.sizes, self.quotas, strict=True):
            chosen_free = self.free[chosen] - before.get(chosen, 0)
            for other, other_rate in rate.items():
                if other_rate <= rate[chosen]:
                    continue
                other_free = self.free[other] - before.get(other, 0)
                if not self._takes(other, other_free, 0, size, quota, spent, charged):
                    continue  # it could not take this binding, and never will
                gap, closing = other_free - chosen_free, other_rate - rate[chosen]
                at = -(-gap // closing) if other < chosen else gap // closing + 1
                if (bound is None or at < bound) and self._takes(
                    other, other_free - at * other_rate, at, size, quota, spent, charged
                ):
                    bound = at
            before[chosen] = before.get(chosen, 0) + size
            device = self.devices[chosen]
            if device is not None:
                charged[device] = add(charged.get(device, NO_QUOTA), quota)
        return bound

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

    def _apply(self, pattern: Pattern, spent: dict[str, Quota], repeats: int) -> None:
        for path in dict.fromkeys(pattern):
            per_pass = sum(s for p, s in zip(pattern, self.sizes, strict=True) if p == path)
            old = self.free[path]
            del self.order[bisect_left(self.order, (old, path))]
            self.free[path] = old - per_pass * repeats
            insort(self.order, (self.free[path], path))
        for device, per_pass_quota in spent.items():
            self.left[device] = subtract(self.left[device], times(per_pass_quota, repeats))


def _least(a: int | None, b: int) -> int:
    return b if a is None else min(a, b)
