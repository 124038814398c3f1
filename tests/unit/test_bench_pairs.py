"""How the bench sets a call against its baseline (``scripts.benching.Pair``): turn by turn,
so that a machine slower for a while weighs on both sides of each turn alike."""

import pytest

from scripts.benching import Pair


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
