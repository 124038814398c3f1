"""Steps 3 to 6 of upstream's placement on one host: the normal and monopoly counts, the promotion
loop that balances them, and the unlimited bindings' volume.

While the monopoly side could host more copies than the normal side, upstream promotes the
smallest unused volume that holds the smallest normal binding and computes everything again.
The loop is kept step by step (the counts are not monotone in the promotions when the two
sides share disk quota: resource-extend's divergence test), but a step is only computed when
cheap bounds cannot already tell that the loop goes on: an upper bound on the normal count
(:class:`_Ceiling`) against the monopoly count, or a lower bound on it when the two sides
share quota.
"""

from __future__ import annotations

from typing import NamedTuple

from resource_extend.projections.storage.grammar.disks import NO_QUOTA, add, times
from resource_extend.projections.storage.placement.monopoly import MonoCount, mono_volumes
from resource_extend.projections.storage.placement.normal import Enumeration, enumerate_normal
from resource_extend.projections.storage.placement.scheduler_view import Classes, Host, go_search


class Outcome(NamedTuple):
    """What the plans are built from: how many (``plans``), the normal passes (None: no normal
    class, so empty normal parts), the monopoly volumes in order (None: no monopoly class),
    and the unlimited bindings' path (None: none)."""

    plans: int
    normal: Enumeration | None
    mono: list[str] | None
    unlimited_path: str | None


class _Step:
    """One computation of steps 3-4 for a given used/unused split."""

    __slots__ = ("mono", "mono_count", "normal", "normal_count")

    def __init__(
        self, normal: Enumeration | None, normal_count: int, mono: list[str] | None, mono_count: int
    ) -> None:
        self.normal = normal
        self.normal_count = normal_count
        self.mono = mono
        self.mono_count = mono_count


class Promotion:
    """Step 5: promote unused volumes while the monopoly side outnumbers the normal side."""

    def __init__(self, host: Host, classes: Classes, bound: int) -> None:
        self.host = host
        self.classes = classes
        self.bound = bound
        self.has_normal = bool(classes.normal or classes.mounts)
        # The monopoly step depends on the whole normal enumeration only through disk quota.
        self.coupled = bool(classes.mono) and any(classes.mono_quota) and classes.spends_quota
        # Unlimited bindings are placed by what every normal pass takes, not only the first.
        self.full = self.coupled or bool(classes.unlimited)
        self.used = list(host.used)
        self.unused = list(host.unused)
        self.monopoly = MonoCount(host, self.unused, classes) if classes.mono else None

    def run(self) -> Outcome:
        """Upstream's loop; the last computation's plans are the answer."""
        classes, host = self.classes, self.host
        least = classes.normal[0].size if classes.normal else None
        ceiling = _Ceiling(host, classes)
        for path in self.used:
            ceiling.add(path)
        while True:
            step = None
            if not classes.normal or self._mono_at_least(ceiling.value()) <= ceiling.value():
                step = self._compute(full=self.full)
                if step.mono_count <= step.normal_count:
                    break
            if least is None:
                break
            promoted = self._promotable(least)
            if promoted is None:
                break
            self.used.append(promoted)
            ceiling.add(promoted)
            if self.monopoly is not None:
                self.monopoly.remove(promoted)
        if step is None:
            step = self._compute(full=self.full)
        count = min(step.normal_count, step.mono_count)
        return Outcome(count, step.normal, step.mono, self._unlimited_path(step))

    def _promotable(self, least: int) -> str | None:
        """Takes the smallest unused volume that holds the smallest normal binding."""
        free, unused = self.host.free, self.unused
        p = go_search(len(unused), lambda i: free[unused[i]] >= least)
        return unused.pop(p) if p < len(unused) else None

    def _mono_at_least(self, normal_passes: int) -> int:
        """A lower bound on the monopoly count (exact unless coupled): coupled, it is counted
        as if the normal side, in at most ``normal_passes`` passes and a failing one, had
        charged everything to each disk (a disk's count only grows with its quota left)."""
        if self.monopoly is None:
            return self.bound
        if self.coupled:
            return self.monopoly.count(times(self.classes.pass_quota, normal_passes + 1))
        return self.monopoly.count(NO_QUOTA)

    def _compute(self, *, full: bool) -> _Step:
        classes, host = self.classes, self.host
        left = dict(host.left)
        mono: list[str] | None = None
        if classes.mono and not self.coupled:
            mono = mono_volumes(host, self.unused, classes, left)
        normal: Enumeration | None = None
        if self.has_normal:
            limit = None if full else (self.bound if mono is None else len(mono))
            normal = enumerate_normal(host, self.used, classes, limit)
            left = normal.left if normal.exhausted else left
        if classes.mono and self.coupled:
            mono = mono_volumes(host, self.unused, classes, left)
        return _Step(
            normal,
            self.bound if normal is None else normal.count,
            mono,
            self.bound if mono is None else len(mono),
        )

    def _unlimited_path(self, step: _Step) -> str | None:
        """Step 6: the volume with the most bytes left after every normal and monopoly plan
        (not only the ones returned); the first such in used-then-unused order."""
        if not self.classes.unlimited:
            return None
        free = self.host.free
        taken = step.normal.taken if step.normal is not None else {}
        whole = set(step.mono or ())
        best_path, best_left = "", 0
        for i, path in enumerate([*self.used, *self.unused]):
            left = 0 if path in whole else free[path] - taken.get(path, 0)
            if i == 0 or left > best_left:
                best_path, best_left = path, left
        return best_path


class _Ceiling:
    """An upper bound on the normal count for the current used list, kept as volumes are
    promoted: every pass places each normal binding i (``size_i`` bytes, on a volume whose disk
    has its quota) and charges its quota and the mounts' to some disk. Only the bindings whose
    bound is least are counted (:attr:`NormalProfile.ceiling`): the others' is as large."""

    def __init__(self, host: Host, classes: Classes) -> None:
        self.host = host
        self.normal = classes.profile.ceiling
        self.count = len(classes.normal)
        self.slots = [0] * len(self.normal)
        self.smallest = classes.normal[0].size if classes.normal else 0  # (sorted by size)
        self.shared = 0  # bindings of any size the used volumes could hold in all
        bounds = []
        need = classes.pass_quota
        if any(need):  # (per node: most requests charge no quota, and skip the disks' sum)
            total = NO_QUOTA
            for left in host.left.values():
                total = add(total, left)
            bounds = [have // want for have, want in zip(total, need, strict=True) if want > 0]
        if classes.mounts and any(host.disk_of(b.source) is None for b in classes.mounts):
            bounds.append(0)  # a mount with quota on no disk fails every pass
        self.fixed = min(bounds) if bounds else None

    def add(self, path: str) -> None:
        free = max(self.host.free[path], 0)
        if self.smallest > 0:
            self.shared += free // self.smallest
        for i, (size, quota) in enumerate(self.normal):
            if quota is None or self.host.affords(path, quota):
                self.slots[i] += free // size

    def value(self) -> int:
        bounds = list(self.slots)
        if self.smallest > 0:
            bounds.append(self.shared // self.count)
        if self.fixed is not None:
            bounds.append(self.fixed)
        return min(bounds, default=2**63)
