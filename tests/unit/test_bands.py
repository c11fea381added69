"""Band arithmetic (fleet/analysis/across_runs/bands.py): median ± max(floor × median, min(k × 1.4826 × MAD,
spread + floor × median)), spread the farthest value's distance from the median; judged on the
worse side only."""

from __future__ import annotations

import pytest

from fleet.analysis.across_runs.bands import Band, limit, make_band, significant, worse_than


def test_the_band_is_the_median_plus_or_minus_k_scaled_mads() -> None:
    band = make_band([10.0, 11.0, 12.0, 13.0, 14.0], k=1, floor=0.0)
    # median 12, deviations 2 1 0 1 2 → MAD 1 → 1 × 1.4826 = 1.4826, inside the spread (2)
    assert band == Band(12.0, 10.52, 13.48, 5)


def test_the_band_reaches_no_further_than_the_farthest_run_plus_the_floor() -> None:
    # MAD 1 → 3 × 1.4826 = 4.4478, but no run is further than 2 from the median: 2 + 0 caps it
    assert make_band([10.0, 11.0, 12.0, 13.0, 14.0], k=3, floor=0.0) == Band(12.0, 10.0, 14.0, 5)
    # … plus the floor: 2 + 10% × 12 = 3.2 < 4.4478
    assert make_band([10.0, 11.0, 12.0, 13.0, 14.0], k=3, floor=0.1) == Band(12.0, 8.8, 15.2, 5)
    # two runs: MAD = spread = 5 → 3 × 1.4826 × 5 = 22.24, capped at 5 + 2.5
    assert make_band([20.0, 30.0], k=3, floor=0.1) == Band(25.0, 17.5, 32.5, 2)


def test_one_wild_run_moves_neither_the_median_nor_the_mad() -> None:
    calm = make_band([100.0, 101.0, 99.0, 100.0, 100.5], k=3, floor=0.0)
    wild = make_band([100.0, 101.0, 99.0, 100.0, 900.0], k=3, floor=0.0)
    assert calm.median == wild.median == 100.0
    assert wild.high < 105  # a mean ± 3σ band would reach past 1,000


def test_the_floor_holds_a_band_open_when_the_runs_agree_or_there_is_one() -> None:
    assert make_band([300.0], floor=0.1) == Band(300.0, 270.0, 330.0, 1)
    assert make_band([300.0, 300.0, 300.0], floor=0.1) == Band(300.0, 270.0, 330.0, 3)
    # the MAD term wins once it is wider than the floor (1.4826 > 10% × 12 = 1.2) …
    assert make_band([10.0, 11.0, 12.0, 13.0, 14.0], k=1, floor=0.1).high == 13.48
    # … and the floor once it is wider than the MAD term (20% × 12 = 2.4 > 1.4826)
    assert make_band([10.0, 11.0, 12.0, 13.0, 14.0], k=1, floor=0.2) == Band(12.0, 9.6, 14.4, 5)


def test_a_band_never_goes_below_zero() -> None:
    # median 5.05, half-width 4.95 + 0.505 = 5.455 > 5.05
    assert make_band([0.1, 10.0], k=3, floor=0.1).low == 0.0


def test_latency_fails_above_the_band_bandwidth_below_it_and_better_is_never_a_failure() -> None:
    band = Band(100.0, 90.0, 110.0, 3)
    assert worse_than(band, 111.0, "latency_us")
    assert not worse_than(band, 50.0, "latency_us")  # faster than ever: not a regression
    assert worse_than(band, 89.0, "busbw_gbps")
    assert not worse_than(band, 500.0, "busbw_gbps")
    assert not worse_than(band, 110.0, "latency_us")  # the band's ends are inside it
    assert (limit(band, "latency_us"), limit(band, "busbw_gbps")) == (110.0, 90.0)


def test_figures_keep_four_significant_digits() -> None:
    assert significant(9.20384) == 9.204
    assert significant(301.246) == 301.2
    assert significant(0.000534931) == 0.0005349
    assert significant(0.0) == 0.0


def test_no_values_no_band() -> None:
    with pytest.raises(ValueError, match="at least one value"):
        make_band([])
