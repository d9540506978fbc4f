"""SLO search (docs/slo-search.md): the bisection of module_utils/sglang_slo.py on synthetic
functions with a known threshold. Module sglang_slo_search through playbooks/slo_search.yml against
one live simulator is in tests/integration/test_slo_search_live.py.

A probe is a pure function of the load, so the threshold is known exactly; the answer must lie
within one tolerance below it, the probes must number about log2(range / tolerance), and the edge
cases (low already failing, high still passing, a probe that raises or reports an error, several
SLO entries, a metric the result lacks, a measurement that contradicts the monotonicity
assumption) must come out as documented.
"""

from __future__ import annotations

import math

import pytest
from ansible.module_utils import sglang_slo

SLO_TTFT = [{"metric": "p99_ttft_ms", "max": 100}]


def threshold_probe(threshold, metric="p99_ttft_ms", limit=100.0, calls=None):
    """A monotone probe: metric = limit * value / threshold (meets the SLO iff value <= threshold)."""

    def probe(value):
        if calls is not None:
            calls.append(value)
        return {"metrics": {metric: limit * value / threshold}}

    return probe


# --------------------------------------------------------------------------- the bisection


@pytest.mark.parametrize(
    ("low", "high", "tolerance", "threshold"),
    [
        (1, 1024, 1, 300),
        (1, 1024, 1, 1),  # the low end is the threshold
        (1, 1024, 1, 1023),  # one below the high end
        (1, 1024, 8, 300),
        (1, 1024, 8, 517),
        (4, 200, 3, 77),
        (1, 2, 1, 1),
        (10, 11, 1, 10),
        (1, 100, 50, 60),
    ],
)
def test_answer_is_within_one_tolerance_of_the_threshold(low, high, tolerance, threshold):
    slo = sglang_slo.parse_slo(SLO_TTFT)
    calls = []
    found = sglang_slo.search(threshold_probe(threshold, calls=calls), slo, low, high, tolerance)
    assert found["outcome"] == sglang_slo.OUTCOME_BRACKETED and found["bounded"] is True
    # The answer met the SLO, the bracket's top did not, and they are at most tolerance apart.
    assert found["answer"] <= threshold < found["answer"] + tolerance
    lo, hi = found["bracket"]
    assert lo == found["answer"] and hi - lo <= tolerance and hi > threshold
    # Probes in order: low, high, then each one strictly inside the bracket known so far.
    assert [p["value"] for p in found["probes"]] == calls
    assert calls[:2] == [low, high]
    assert [p["index"] for p in found["probes"]] == list(range(len(calls)))
    for probe in found["probes"]:
        assert probe["met"] is (probe["value"] <= threshold)
        assert probe["checks"][0]["metric"] == "p99_ttft_ms" and probe["checks"][0]["met"] is probe["met"]
        assert probe["metrics"]["p99_ttft_ms"] == pytest.approx(100.0 * probe["value"] / threshold)
    # About log2(range / tolerance) bisection probes, never more than the plan says.
    steps = found["steps"]
    assert steps == len(calls) <= sglang_slo.max_probes(low, high, tolerance)
    bisecting, log2 = steps - 2, math.log2((high - low) / tolerance)
    assert math.floor(log2) <= bisecting <= math.ceil(log2)
    assert found["warnings"] == [] and found["consistent"] is True


@pytest.mark.parametrize(("low", "high", "tolerance"), [(1, 1024, 1), (1, 100, 7), (3, 17, 2), (5, 6, 1)])
def test_every_threshold_of_a_range_is_found_within_the_planned_probes(low, high, tolerance):
    slo = sglang_slo.parse_slo(SLO_TTFT)
    most = sglang_slo.max_probes(low, high, tolerance)
    longest = 0
    for threshold in range(low, high):
        found = sglang_slo.search(threshold_probe(threshold), slo, low, high, tolerance)
        assert found["answer"] <= threshold < found["answer"] + tolerance, threshold
        longest = max(longest, found["steps"])
    assert longest == most  # the bound is reached, not just respected


def test_the_low_end_already_failing_gives_no_answer_and_says_so():
    calls = []
    found = sglang_slo.search(threshold_probe(3, calls=calls), sglang_slo.parse_slo(SLO_TTFT), 4, 64, 1)
    assert found["answer"] is None and found["bounded"] is False and found["outcome"] == "low_fails"
    assert calls == [4] and found["steps"] == 1
    assert "not met even at the low end 4" in found["reason"] and "p99_ttft_ms <= 100" in found["reason"]


def test_the_high_end_passing_answers_high_not_bounded():
    calls = []
    found = sglang_slo.search(threshold_probe(500, calls=calls), sglang_slo.parse_slo(SLO_TTFT), 1, 64, 1)
    assert found["answer"] == 64 and found["bounded"] is False and found["outcome"] == "high_passes"
    assert calls == [1, 64] and found["bracket"] is None
    assert found["reason"].startswith("not bounded") and "raise high" in found["reason"]


@pytest.mark.parametrize(("threshold", "answer", "outcome"), [(5, 5, "high_passes"), (4, None, "low_fails")])
def test_low_equal_to_high_is_one_probe(threshold, answer, outcome):
    found = sglang_slo.search(threshold_probe(threshold), sglang_slo.parse_slo(SLO_TTFT), 5, 5, 1)
    assert found["answer"] == answer and found["outcome"] == outcome and found["steps"] == 1


def test_a_probe_that_raises_counts_as_not_meeting_and_keeps_its_error():
    """The server falls over above 40 (the probe raises); the SLO alone would allow 50."""
    meets = threshold_probe(50)

    def probe(value):
        if value > 40:
            raise ConnectionRefusedError(f"no server at concurrency {value}")
        return meets(value)

    found = sglang_slo.search(probe, sglang_slo.parse_slo(SLO_TTFT), 1, 64, 1)
    assert found["answer"] == 40 and found["outcome"] == "bracketed"
    raised = [p for p in found["probes"] if p["value"] > 40]
    assert raised
    for entry in raised:
        assert entry["met"] is False and entry["metrics"] == {}
        assert entry["error"]["class"] == sglang_slo.PROBE_RAISED
        message = entry["error"]["message"]
        assert "ConnectionRefusedError" in message and str(entry["value"]) in message
        assert entry["checks"][0]["missing"] is True
    assert all(p["error"] is None for p in found["probes"] if p["value"] <= 40)


def test_a_probe_reporting_an_error_fails_even_with_good_metrics():
    """An incomplete bench_serving point: its latency may look fine, the point does not count."""

    def probe(value):
        error = {"class": "incomplete_point", "message": "completed 7 of 8"} if value == 32 else None
        return {"metrics": {"p99_ttft_ms": 1.0}, "error": error, "concurrency": value}

    found = sglang_slo.search(probe, sglang_slo.parse_slo(SLO_TTFT), 1, 32, 1)
    high = found["probes"][1]
    assert high["value"] == 32 and high["met"] is False and high["checks"][0]["met"] is True
    assert high["error"] == {"class": "incomplete_point", "message": "completed 7 of 8"}
    assert high["detail"] == {"concurrency": 32}
    assert found["answer"] == 31  # everything below 32 passes
    # A bare string error is kept too.
    entry = sglang_slo.run_probe(lambda v: {"metrics": {}, "error": "boom"}, sglang_slo.parse_slo(SLO_TTFT), 3, 0)
    assert entry["met"] is False and entry["error"] == {"class": "probe_failed", "message": "boom"}


def test_every_slo_entry_must_hold_and_each_verdict_is_recorded():
    """TTFT allows up to 30, TPOT up to 20: the answer is 20, and the probes show which failed."""
    slo = sglang_slo.parse_slo(
        [
            {"metric": "p99_ttft_ms", "max": 300},
            {"metric": "median_tpot_ms", "max": 40},
            {"metric": "output_throughput", "min": 5},
        ]
    )

    def probe(value):
        return {"metrics": {"p99_ttft_ms": 10.0 * value, "median_tpot_ms": 2.0 * value, "output_throughput": 100.0}}

    found = sglang_slo.search(probe, slo, 1, 64, 1)
    assert found["answer"] == 20
    for entry in found["probes"]:
        verdicts = {check["metric"]: check["met"] for check in entry["checks"]}
        assert verdicts == {
            "p99_ttft_ms": entry["value"] <= 30,
            "median_tpot_ms": entry["value"] <= 20,
            "output_throughput": True,
        }
    assert any(e["value"] in range(21, 31) for e in found["probes"])  # one probe failed on TPOT alone


def test_a_metric_the_result_lacks_fails_the_probe_with_metric_missing():
    slo = sglang_slo.parse_slo([{"metric": "p90_tpot_ms", "max": 50}])
    found = sglang_slo.search(lambda v: {"metrics": {"p99_tpot_ms": 1.0}}, slo, 1, 8, 1)
    assert found["answer"] is None
    assert found["probes"][0]["error"]["class"] == "metric_missing"
    assert "p90_tpot_ms" in found["probes"][0]["error"]["message"]


def test_probe_metrics_prefer_the_point_and_fall_back_to_the_raw_result():
    slo = sglang_slo.parse_slo([{"metric": "p99_ttft_ms", "max": 1}, {"metric": "p90_tpot_ms", "max": 1}])
    point = {"p99_ttft_ms": 5.0, "p90_tpot_ms": None}
    raw = {"p99_ttft_ms": 9.0, "p90_tpot_ms": 7.0}
    assert sglang_slo.probe_metrics(slo, point, raw) == {"p99_ttft_ms": 5.0, "p90_tpot_ms": 7.0}
    assert sglang_slo.probe_metrics(slo, {}, {"p99_ttft_ms": float("inf")}) == {}


# --------------------------------------------------------------------------- monotonicity


def test_a_confirmation_that_contradicts_the_first_verdict_is_a_warning():
    """Noise near the threshold: 12 passes the first time and fails on confirmation."""
    seen = {}

    def probe(value):
        seen[value] = seen.get(value, 0) + 1
        flaky = value == 12 and seen[value] > 1
        return {"metrics": {"p99_ttft_ms": 500.0 if (value > 12 or flaky) else 50.0}}

    found = sglang_slo.search(probe, sglang_slo.parse_slo(SLO_TTFT), 1, 32, 1, confirm=True)
    assert found["answer"] == 12 and found["probes"][-1]["value"] == 12 and found["probes"][-1]["met"] is False
    assert found["consistent"] is False
    assert len(found["warnings"]) == 1 and "12 met the SLO" in found["warnings"][0]
    assert "not repeatable" in found["warnings"][0]
    assert found["steps"] == sglang_slo.max_probes(1, 32, 1, confirm=True)


def test_a_confirmed_answer_is_consistent():
    found = sglang_slo.search(threshold_probe(12), sglang_slo.parse_slo(SLO_TTFT), 1, 32, 1, confirm=True)
    assert found["answer"] == 12 and found["probes"][-1]["value"] == 12 and found["probes"][-1]["met"] is True
    assert found["warnings"] == [] and found["consistent"] is True
    # Without an answer the low end is measured again.
    found = sglang_slo.search(threshold_probe(2), sglang_slo.parse_slo(SLO_TTFT), 4, 32, 1, confirm=True)
    assert [p["value"] for p in found["probes"]] == [4, 4] and found["answer"] is None


def test_monotonicity_violations_names_a_pass_above_a_failure():
    probes = [
        {"index": 0, "value": 1, "met": True},
        {"index": 1, "value": 8, "met": False},
        {"index": 2, "value": 16, "met": True},
        {"index": 3, "value": 4, "met": True},
    ]
    warnings = sglang_slo.monotonicity_violations(probes)
    assert warnings == [
        "16 met the SLO (probe 2) but the lower 8 did not (probe 1): the SLO is not monotone in the load here"
    ]
    assert sglang_slo.monotonicity_violations(probes[:2] + probes[3:]) == []


# --------------------------------------------------------------------------- the SLO spec and range


def test_parse_slo_reads_latencies_and_throughputs():
    assert sglang_slo.parse_slo({"metric": "p99_ttft_ms", "max": 500}) == [
        {"metric": "p99_ttft_ms", "bound": "max", "limit": 500.0}
    ]
    parsed = sglang_slo.parse_slo(
        [
            {"metric": "median_tpot_ms", "max": "45.5"},  # -e key=value gives strings
            {"metric": "p90_tpot_ms", "max": 60},  # newer bench_serving writes p90s
            {"metric": " mean_e2e_latency_ms ", "max": 0},
            {"metric": "output_throughput", "min": 1000},
        ]
    )
    assert [(p["metric"], p["bound"], p["limit"]) for p in parsed] == [
        ("median_tpot_ms", "max", 45.5),
        ("p90_tpot_ms", "max", 60.0),
        ("mean_e2e_latency_ms", "max", 0.0),
        ("output_throughput", "min", 1000.0),
    ]
    assert sglang_slo.describe_slo(parsed[:1] + parsed[3:]) == "median_tpot_ms <= 45.5, output_throughput >= 1000"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ([], "non-empty list"),
        ("p99_ttft_ms<=5", "non-empty list"),
        ([["p99_ttft_ms", 5]], "slo[0] must be a mapping"),
        ([{"max": 5}], "slo[0] needs a metric name"),
        ([{"metric": "p99_ttft", "max": 5}], "'p99_ttft' is not a metric of bench_serving's result"),
        ([{"metric": "completed", "min": 5}], "'completed' is not a metric"),
        ([{"metric": "p99_ttft_ms"}], "needs exactly one of max or min, got neither"),
        ([{"metric": "p99_ttft_ms", "max": 5, "min": 1}], "needs exactly one of max or min"),
        ([{"metric": "p99_ttft_ms", "min": 5}], "bounded with max (lower is better), not min"),
        ([{"metric": "output_throughput", "max": 5}], "bounded with min (higher is better), not max"),
        ([{"metric": "p99_ttft_ms", "max": -1}], "finite number >= 0"),
        ([{"metric": "p99_ttft_ms", "max": True}], "must be a number"),
        ([{"metric": "p99_ttft_ms", "max": "fast"}], "must be a number"),
        ([{"metric": "p99_ttft_ms", "max": float("nan")}], "finite number"),
        ([{"metric": "p99_ttft_ms", "max": 5, "unit": "ms"}], "unknown key(s) unit"),
        (
            [{"metric": "p99_ttft_ms", "max": 5}, {"metric": "p99_ttft_ms", "max": 6}],
            "slo[1]: p99_ttft_ms max is given twice",
        ),
    ],
)
def test_parse_slo_refuses_with_the_entry_named(spec, message):
    with pytest.raises(sglang_slo.SloError) as caught:
        sglang_slo.parse_slo(spec)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("low", "high", "tolerance", "message"),
    [(0, 8, 1, "low must be an integer >= 1"), (9, 8, 1, "low (9) is above high (8)"),
     (1, 8, 0, "tolerance must be an integer >= 1"), (1, 8.5, 1, "high must be an integer"),
     (True, 8, 1, "low must be an integer")],
)
def test_a_range_that_cannot_be_bisected_is_refused(low, high, tolerance, message):
    with pytest.raises(sglang_slo.SloError, match=message.replace("(", r"\(").replace(")", r"\)")):
        sglang_slo.search(threshold_probe(4), sglang_slo.parse_slo(SLO_TTFT), low, high, tolerance)
