"""How the bench sets a call against its baseline (``scripts.benching.Pair``): turn by turn,
so that a machine slower for a while weighs on both sides of each turn alike."""

from pathlib import Path

import pytest

from scripts.benching import Bench, Pair


def test_a_ratio_is_the_median_of_the_turns_ratios() -> None:
    pair = Pair(ours=[10.0, 30.0, 12.0], theirs=[20.0, 40.0, 10.0])
    assert pair.ratio == 0.75  # the turns': 0.5, 0.75, 1.2
    assert pair.medians == (12.0, 20.0)  # whose own ratio would be 0.6


def test_a_margin_is_the_median_of_the_turns_differences() -> None:
    pair = Pair(ours=[15.0, 19.0, 14.0], theirs=[12.0, 13.0, 12.5])
    assert pair.margin == 3.0  # the turns': 3, 6, 1.5
    assert pair.medians == (15.0, 12.5)  # whose own difference would be 2.5


def test_turns_must_pair_up() -> None:
    with pytest.raises(ValueError):
        Pair(ours=[1.0, 2.0], theirs=[1.0]).ratio  # noqa: B018


def test_a_run_says_how_far_its_gauges_moved_and_only_theirs(tmp_path: Path) -> None:
    """A baseline that does the same work in every row (``GAUGES``) says how noisy the run
    was; one whose work differs from row to row (fleets of other sizes) says nothing of it."""
    bench = Bench("http://127.0.0.1:9", tmp_path, "auto", True, 3)
    bench.row("a read", Pair([0.012, 0.011, 0.013], [0.015, 0.021, 0.016]), "etcdctl get", 0.85)
    bench.row("a storage read", Pair([0.01] * 3, [0.017, 0.019, 0.014]), "etcdctl get", 0.85)
    bench.row("a scan", Pair([0.05] * 3, [0.9, 0.9, 0.9]), "etcdctl get --prefix", 1.3)
    said = bench.noise()
    assert "etcdctl get 14.0 to 21.0 ms over 6 runs, its 2 rows' medians 16.0 to 17.0 ms" in said
    assert "--prefix" not in said and "900" not in said
