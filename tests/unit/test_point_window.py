"""What a point can support: percentiles from enough samples (sglang_bench_points), shown as n/a otherwise.

Fed with real bench_serving result lines of SGLang 0.5.17 on the H200 (16 requests at c=1, 32 at
c=16, tests/fixtures/real-sglang/0.5.17-h200-tp1/work/results/raw), and with the same lines grown to
100 requests, so the rule is checked on both sides of its bound.
"""

from __future__ import annotations

import json

import pytest
import sglang_bench_points as points
import sglang_stats as stats
from campaign_report import fmt_summary
from helpers.paths import REPO

RAW = REPO / "tests" / "fixtures" / "real-sglang" / "0.5.17-h200-tp1" / "work" / "results" / "raw"


def real_result(name="c1_r0.jsonl"):
    for path in sorted(RAW.glob(f"*/{name}")):
        result = json.loads(path.read_text().splitlines()[-1])
        if result.get("completed") and any(result.get("itls") or []):
            return result
    raise AssertionError(f"no recorded {name} with completed requests")


def grown(result, requests):
    """The same line with ``requests`` completed requests (the per-request lists repeated)."""
    copy = dict(result)
    n = len(result["output_lens"])
    for key in ("output_lens", "itls", "ttfts", "input_lens", "errors", "generated_texts"):
        if isinstance(result.get(key), list):
            copy[key] = [result[key][i % n] for i in range(requests)]
    copy["completed"] = requests
    copy["total_output_tokens"] = sum(copy["output_lens"])
    return copy


@pytest.mark.parametrize(("key", "needed"), [
    ("median_ttft_ms", 1), ("p90_e2e_latency_ms", 10), ("p95_itl_ms", 20), ("p99_ttft_ms", 100),
    ("p99.9_tpot_ms", 1000), ("mean_ttft_ms", None), ("output_throughput", None),
])
def test_each_percentile_needs_a_sample_where_it_is_not_the_maximum(key, needed):
    quantile = points.percentile_quantile(key)
    assert (quantile and points.min_samples(quantile)) == needed


def test_a_p99_of_sixteen_requests_is_withheld_with_its_sample_size():
    result = real_result()
    point = points.point_from_result(result, 1, 0, result["completed"])
    assert point["status"] == "ok" and point["completed"] == 16
    withheld = point["withheld_percentiles"]
    assert set(withheld) == {"p99_ttft_ms", "p99_tpot_ms", "p99_e2e_latency_ms"}
    assert withheld["p99_ttft_ms"] == {"value": result["p99_ttft_ms"], "n": 16, "min_n": 100}
    assert point["p99_ttft_ms"] is None
    # What a sample of 16 does support stays: medians, means, the ITL percentiles (hundreds of gaps).
    assert point["median_ttft_ms"] == result["median_ttft_ms"] and point["mean_tpot_ms"] == result["mean_tpot_ms"]
    assert point["p99_itl_ms"] == result["p99_itl_ms"] and point["samples"]["itl"] >= 100


def test_a_hundred_requests_support_a_p99():
    result = grown(real_result(), 100)
    point = points.point_from_result(result, 1, 0, 100)
    assert "withheld_percentiles" not in point and point["p99_ttft_ms"] == result["p99_ttft_ms"]
    assert point["samples"] == {"ttft": 100, "e2e_latency": 100, "tpot": 100, "itl": point["samples"]["itl"]}


def test_tpot_counts_only_requests_with_more_than_one_token():
    result = grown(real_result(), 100)
    result["output_lens"] = [1] * 10 + result["output_lens"][10:]
    point = points.point_from_result(result, 1, 0, 100)
    assert point["samples"]["tpot"] == 90 and point["withheld_percentiles"]["p99_tpot_ms"]["n"] == 90
    assert point["p99_ttft_ms"] is not None


def test_a_raw_line_is_checked_with_the_points_sample():
    # The SLO search reads percentiles the ledger point lacks (newer bench_serving) from the raw line.
    raw = {"p95_ttft_ms": 40.0, "p90_ttft_ms": 30.0, "median_ttft_ms": 10.0, "mean_ttft_ms": 12.0}
    found = points.unsupported_percentiles(raw, {"ttft": 16})
    assert found == {"p95_ttft_ms": {"value": 40.0, "n": 16, "min_n": 20}}


def test_reports_say_n_a_with_the_sample_size():
    result = real_result()
    point = points.point_from_result(result, 1, 0, result["completed"])
    record = {"points": [point]}
    withheld = stats.withheld_samples([record], 1, "p99_ttft_ms")
    assert withheld == {"n": 16, "min_n": 100}
    assert stats.withheld_samples([record], 1, "median_ttft_ms") is None
    summary = stats.summarize([])
    summary["withheld"] = withheld
    assert fmt_summary(summary) == "n/a (n=16)"
    assert fmt_summary(stats.summarize([])) == "—"
