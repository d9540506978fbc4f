"""sglang_interval: the one comparison every verdict comes from, standard library only."""

from __future__ import annotations

import math

import numpy as np
import pytest
import sglang_interval as iv
from scipy.stats import t as student_t


@pytest.mark.parametrize("df", [0.4, 1.0, 1.3, 2.0, 2.9, 5.0, 17.5, 120.0, 1e5])
@pytest.mark.parametrize("p", [0.5, 0.8, 0.975, 0.99375, 0.9999, 0.999999])
def test_t_quantile_is_scipys(p, df):
    assert iv.t_quantile(p, df) == pytest.approx(float(student_t.ppf(p, df)), rel=1e-9, abs=1e-12)


@pytest.mark.parametrize(("p", "df"), [(0.4, 3.0), (1.0, 3.0), (0.9, 0.0), (0.9, -1.0)])
def test_t_quantile_refuses_what_it_cannot_answer(p, df):
    with pytest.raises(ValueError):
        iv.t_quantile(p, df)


def test_welch_interval_matches_the_formula():
    x, y = [1.0, 1.4, 0.9, 1.2], [0.8, 0.7, 0.95]
    d, low, high, df = iv.welch_interval(x, y, 0.9)
    vx, vy = np.var(x, ddof=1) / 4, np.var(y, ddof=1) / 3
    want_df = (vx + vy) ** 2 / (vx**2 / 3 + vy**2 / 2)
    half = student_t.ppf(0.95, want_df) * math.sqrt(vx + vy)
    assert df == pytest.approx(want_df) and d == pytest.approx(np.mean(x) - np.mean(y))
    assert (low, high) == (pytest.approx(d - half), pytest.approx(d + half))


def test_a_wide_family_at_one_degree_of_freedom_does_not_overflow():
    """The audit's OverflowError: expm1 of an interval end past 709 at df about 1."""
    result = iv.compare([1.0, 1e6], [1e-3, 1e9], True, confidence=1 - 0.05 / 12)
    assert result["verdict"] == "indistinguishable"
    assert math.isfinite(result["ci_high_pct"]) and result["ci_high_pct"] > 1e200
    assert result["ci_low_pct"] == pytest.approx(-100.0)


def test_zero_spread_on_both_sides_gives_no_verdict():
    result = iv.compare([100.1, 100.1], [100.0, 100.0], True)
    assert result["verdict"] == "no_verdict" and result["reason"] == iv.ZERO_SPREAD
    assert result["delta_pct"] == pytest.approx(0.1)
    one_side = iv.compare([100.1, 100.1], [99.0, 101.0, 100.0], True)
    assert one_side["verdict"] == "indistinguishable" and one_side["df"] == pytest.approx(2.0)


def test_values_without_a_logarithm_are_dropped_with_a_note():
    result = iv.compare([110.0, 0.0, 112.0, float("nan"), 111.0], [100.0, 101.0, 99.0], True)
    assert result["n_candidate"] == 3 and result["verdict"] == "better"
    assert result["notes"] == ["candidate: 2 value(s) dropped (not finite or not positive, no logarithm): 0.0, nan"]
    empty = iv.compare([0.0, -1.0], [100.0, 101.0], True)
    assert empty["verdict"] == "no_data" and "candidate" in empty["reason"]


def test_one_repeat_is_no_verdict_and_the_direction_follows_the_metric():
    assert iv.compare([200.0], [100.0, 101.0], True)["reason"] == iv.ONE_REPEAT
    assert iv.compare([50.0, 51.0], [100.0, 101.0], False)["verdict"] == "better"  # TPOT went down
    assert iv.compare([50.0, 51.0], [100.0, 101.0], True)["verdict"] == "worse"


@pytest.mark.parametrize("confidence", [0, 1, 1.5, -0.1, True, "0.9"])
def test_a_bad_confidence_is_refused(confidence):
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        iv.compare([1.0, 2.0], [1.0, 2.0], True, confidence)


def test_the_family_counts_only_the_decidable():
    pairs = {"a": ([1.0, 1.1], [1.0, 1.2], True), "b": ([1.0], [1.0, 1.1], True), "c": ([2.0, 2.1], [1.0, 1.05], True)}
    results, family = iv.compare_family(pairs, 0.95)
    assert family["size"] == 2 and family["comparison_confidence"] == pytest.approx(0.975)
    assert results["a"]["confidence"] == pytest.approx(0.975) and results["b"]["reason"] == iv.ONE_REPEAT
