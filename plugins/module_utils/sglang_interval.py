# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one comparison every verdict of the project comes from: Welch's t interval on logarithms.

Standard library only, so that it ships inside modules (sglang_bench_compare,
sglang_ledger_append) as well as serving the controller's campaign statistics
(sglang_stats imports it; the numbers are the same to 1e-9 as scipy's, which
tests/unit/test_interval.py checks). docs/campaign-statistics.md gives the method and its
measured error rates.

* A side's values are its repeats (server starts, or repeats within one start: the caller
  says which and labels it). Values that are not finite or not positive have no logarithm: they
  are dropped and a ``notes`` entry says how many and why; a side left empty is ``no_data``.
* d = mean(log candidate) - mean(log baseline) with Welch's t interval (unequal variances,
  Welch-Satterthwaite degrees of freedom), both shown as percent of the baseline, exp(x) - 1.
* ``better``/``worse`` when the interval lies on one side of 0, ``indistinguishable`` when it
  holds 0 (an end at 0 holds it); ``no_verdict`` when a side has fewer than 2 values, or when both
  sides have zero spread (identical repeats: the noise cannot be estimated, and a point interval
  would turn a 0.1 % difference into a certain verdict).
* A family of comparisons (one arm against the baseline: every point and verdict metric) is
  Bonferroni-adjusted: each interval at 1 - alpha / m, m the comparisons that can have one.
"""

import math

BETTER = "better"
WORSE = "worse"
INDISTINGUISHABLE = "indistinguishable"
NO_VERDICT = "no_verdict"
NO_DATA = "no_data"
ONE_REPEAT = "one repeat: no verdict possible"
ZERO_SPREAD = "both sides have zero spread (identical repeats): the noise cannot be estimated, no verdict"
DECIDED = (BETTER, WORSE)

DEFAULT_CONFIDENCE = 0.95
# exp(x) - 1 overflows a float beyond x = 709.78; an interval end past this is shown capped
# (x 1e298, far beyond any real change) instead of raising OverflowError.
_LOG_CAP = 686.0


def check_confidence(confidence):
    """``confidence`` as a float; ValueError unless 0 < confidence < 1."""
    if isinstance(confidence, bool) or not isinstance(confidence, (int, float)) or not 0.0 < confidence < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    return float(confidence)


def finite_numbers(values):
    """The finite numbers of ``values`` as floats (None, bools, strings and NaN/inf dropped)."""
    out = []
    for value in values or []:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        if math.isfinite(value):
            out.append(float(value))
    return out


def median(values):
    """The median of a non-empty list of numbers (the mean of the middle two for an even count)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    return float(ordered[mid]) if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2.0


def _mean(values):
    return math.fsum(values) / len(values)


def _variance(values):
    """Sample variance (ddof 1); exactly 0 when all values are equal."""
    if max(values) == min(values):
        return 0.0
    mean = _mean(values)
    return math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)


# ------------------------------------------------------------------ Student's t quantile


def _beta_continued_fraction(a, b, x):
    """The continued fraction of the regularized incomplete beta (modified Lentz)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 400):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _incomplete_beta(a, b, x):
    """The regularized incomplete beta I_x(a, b) for 0 <= x <= 1."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_continued_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_continued_fraction(b, a, 1.0 - x) / b


def t_sf(t, df):
    """P(T > t) for Student's t with ``df`` (> 0, fractional allowed) degrees of freedom, t >= 0."""
    return 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))


def t_quantile(p, df):
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom, 0.5 <= p < 1.

    Bisection on the survival function (monotone), to a relative 1e-13: what scipy.stats.t.ppf
    gives, without scipy (modules ship without it)."""
    if not 0.5 <= p < 1.0 or not df > 0:
        raise ValueError(f"t_quantile needs 0.5 <= p < 1 and df > 0, got p={p!r}, df={df!r}")
    tail = 1.0 - p
    low, high = 0.0, 1.0
    while t_sf(high, df) > tail:
        low, high = high, high * 2.0
    for _ in range(200):
        mid = (low + high) / 2.0
        if t_sf(mid, df) > tail:
            low = mid
        else:
            high = mid
        if high - low <= 1e-13 * high:
            break
    return (low + high) / 2.0


# ------------------------------------------------------------------ the comparison


def welch_interval(x, y, confidence=DEFAULT_CONFIDENCE):
    """Welch's t interval of mean(x) - mean(y): ``(d, low, high, df)``.

    Each side needs at least 2 values. A side whose values are all equal has variance 0: df then
    comes from the other side alone (its n - 1); when both have, the interval is the point d and
    df is None (compare() gives no verdict then)."""
    confidence = check_confidence(confidence)
    if len(x) < 2 or len(y) < 2:
        raise ValueError("Welch's interval needs at least 2 values on each side")
    d = _mean(x) - _mean(y)
    v_x, v_y = _variance(x) / len(x), _variance(y) / len(y)
    se2 = v_x + v_y
    if se2 == 0.0:
        return d, d, d, None
    df = se2**2 / (v_x**2 / (len(x) - 1) + v_y**2 / (len(y) - 1))
    half = t_quantile(0.5 + confidence / 2.0, df) * math.sqrt(se2)
    return d, d - half, d + half, df


def _pct(log_ratio):
    """A difference of logarithms as percent of the baseline, exp(x) - 1, capped (no overflow)."""
    return math.expm1(max(min(log_ratio, _LOG_CAP), -_LOG_CAP)) * 100.0


def usable(values):
    """``(kept, note)``: the values that have a logarithm (finite, > 0) and what was dropped."""
    raw = [v for v in values or [] if not isinstance(v, bool) and isinstance(v, (int, float))]
    kept = [float(v) for v in raw if math.isfinite(v) and v > 0]
    dropped = [v for v in raw if not (math.isfinite(v) and v > 0)]
    if not dropped:
        return kept, None
    shown = ", ".join(repr(float(v)) for v in dropped[:3]) + (", ..." if len(dropped) > 3 else "")
    return kept, f"{len(dropped)} value(s) dropped (not finite or not positive, no logarithm): {shown}"


def decidable(candidate_values, baseline_values):
    """True when the pair can have an interval: at least 2 usable values on each side."""
    return min(len(usable(candidate_values)[0]), len(usable(baseline_values)[0])) >= 2


def compare(candidate_values, baseline_values, higher_is_better, confidence=DEFAULT_CONFIDENCE):
    """The candidate against the baseline: ratio of geometric means with Welch's t interval on logs.

    Returns ``{"n_candidate", "n_baseline", "candidate_median", "baseline_median",
    "candidate_geomean", "baseline_geomean", "delta_pct", "ci_low_pct", "ci_high_pct", "df",
    "confidence", "higher_is_better", "verdict", "reason", "notes"}``: ``delta_pct`` is the ratio
    of the geometric means minus 1 in percent, the interval is welch_interval on the logs at
    ``confidence`` transformed the same way, the medians are shown, not compared; ``reason`` says
    why there is no verdict (else None), ``notes`` what was dropped from either side."""
    confidence = check_confidence(confidence)
    candidate, candidate_note = usable(candidate_values)
    baseline, baseline_note = usable(baseline_values)
    notes = [f"{side}: {note}" for side, note in (("candidate", candidate_note), ("baseline", baseline_note)) if note]
    result = {
        "n_candidate": len(candidate),
        "n_baseline": len(baseline),
        "candidate_median": median(candidate) if candidate else None,
        "baseline_median": median(baseline) if baseline else None,
        "candidate_geomean": None,
        "baseline_geomean": None,
        "delta_pct": None,
        "ci_low_pct": None,
        "ci_high_pct": None,
        "df": None,
        "confidence": confidence,
        "higher_is_better": bool(higher_is_better),
        "verdict": NO_DATA,
        "reason": None,
        "notes": notes,
    }
    if not candidate or not baseline:
        result["reason"] = f"no usable value on the {'candidate' if not candidate else 'baseline'} side"
        return result
    log_candidate, log_baseline = [math.log(v) for v in candidate], [math.log(v) for v in baseline]
    result["candidate_geomean"] = math.exp(_mean(log_candidate))
    result["baseline_geomean"] = math.exp(_mean(log_baseline))
    result["delta_pct"] = _pct(_mean(log_candidate) - _mean(log_baseline))
    if len(candidate) < 2 or len(baseline) < 2:
        result.update(verdict=NO_VERDICT, reason=ONE_REPEAT)
        return result
    _, low, high, df = welch_interval(log_candidate, log_baseline, confidence)
    if df is None:
        result.update(verdict=NO_VERDICT, reason=ZERO_SPREAD)
        return result
    result.update({"ci_low_pct": _pct(low), "ci_high_pct": _pct(high), "df": df})
    if low > 0.0:
        result["verdict"] = BETTER if higher_is_better else WORSE
    elif high < 0.0:
        result["verdict"] = WORSE if higher_is_better else BETTER
    else:
        result["verdict"] = INDISTINGUISHABLE
    return result


def family_confidence(size, confidence=DEFAULT_CONFIDENCE):
    """Bonferroni: the confidence of each of ``size`` intervals so that all hold at ``confidence``."""
    confidence = check_confidence(confidence)
    return 1.0 - (1.0 - confidence) / size if size > 1 else confidence


def compare_family(pairs, confidence=DEFAULT_CONFIDENCE):
    """Every comparison of one family with Bonferroni-adjusted (simultaneous) intervals.

    ``pairs``: {key: (candidate values, baseline values, higher_is_better)}. m is the number of
    pairs that can have an interval (decidable); each is compared at family_confidence(m,
    confidence), so the chance of any false verdict among them is at most 1 - ``confidence``.
    Returns ``(results, family)``: results {key: compare result, plus "family_size"}; family
    ``{"size", "confidence", "comparison_confidence"}``.
    """
    size = sum(1 for candidate, baseline, _ in pairs.values() if decidable(candidate, baseline))
    each = family_confidence(size, confidence)
    results = {}
    for key, (candidate, baseline, higher_is_better) in pairs.items():
        results[key] = {**compare(candidate, baseline, higher_is_better, each), "family_size": size}
    return results, {"size": size, "confidence": float(confidence), "comparison_confidence": each}
