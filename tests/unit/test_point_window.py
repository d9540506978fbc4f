"""What a point can support: percentiles from enough samples (sglang_bench_points), shown as n/a otherwise.

Fed with real bench_serving result lines of SGLang 0.5.17 on the H200 (16 requests at c=1, 32 at
c=16, tests/fixtures/real-sglang/0.5.17-h200-tp1/work/results/raw), and with the same lines grown to
100 requests, so the rule is checked on both sides of its bound.
"""

from __future__ import annotations

import json

import pytest
import sglang_bench_client as client
import sglang_bench_points as points
import sglang_point_window as window
import sglang_stats as stats
from campaign_report import fmt_summary
from helpers.paths import REPO
from helpers.recordings import real_result as _real_result


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


# --- The server's own counters: real SGLang 0.5.17 /metrics around two bench_serving points ------

METRICS = REPO / "tests" / "fixtures" / "real-sglang" / "probe-0.5.17-h200-tp1-metrics"


def recorded(name):
    result = json.loads((METRICS / f"{name}.jsonl").read_text().splitlines()[-1])
    sidecar = {"before": (METRICS / f"{name}.before.txt").read_text(),
               "after": (METRICS / f"{name}.after.txt").read_text(), "during": []}
    return result, sidecar


def test_the_honest_point_is_counted_by_the_server_as_the_client_reports():
    result, sidecar = recorded("honest")
    block = window.server_metrics(sidecar, result["duration"])
    # 32 requests and bench_serving's own warm-up request; 1024 + 32 generated tokens.
    assert block["available"] and block["requests"] == 33 and block["generation_tokens"] == 1056
    assert block["prompt_tokens"] == 6860 and block["cached_tokens"] == 6827
    assert block["cache_hit_rate"] == pytest.approx(6827 / 6860, abs=1e-4)
    assert block["output_throughput"] == pytest.approx(1056 / result["duration"], rel=1e-3)
    assert window.counter_mismatches(result, block, warmup_requests=1, warmup_output_len=32) == []


def test_the_lying_point_is_caught_by_the_counters():
    result, sidecar = recorded("lying")
    block = window.server_metrics(sidecar, result["duration"])
    assert block["requests"] == 0 and block["generation_tokens"] == 0
    found = window.counter_mismatches(result, block, warmup_requests=1, warmup_output_len=32)
    assert len(found) == 2 and "0 requests where the client reports 9" in found[0]


def test_a_server_without_metrics_is_said_and_not_checked():
    result, _ = recorded("honest")
    without = (METRICS / "ep_metrics_without_flag.txt").read_text()
    block = window.server_metrics({"error": f"GET /metrics: 404 {without[:50]}"}, 1.0)
    assert block == {"available": False, "reason": f"GET /metrics: 404 {without[:50]}"}
    assert window.counter_mismatches(result, block) == []
    assert window.server_metrics(None)["available"] is False
    assert window.server_metrics({"before": "# nothing\n", "after": "# nothing\n"})["available"] is False


def test_gauges_of_one_dp_rank_are_not_summed_over_its_tp_ranks():
    text = "\n".join([
        'sglang:num_running_reqs{dp_rank="0",tp_rank="0"} 5.0',
        'sglang:num_running_reqs{dp_rank="0",tp_rank="1"} 5.0',
        'sglang:num_running_reqs{dp_rank="1",tp_rank="0"} 3.0',
        'sglang:num_requests_total{is_streaming="true"} 7.0',
        'sglang:num_requests_total{is_streaming="false"} 2.0',
    ])
    totals = window.server_totals(text)
    assert totals["running"] == 8.0 and totals["requests"] == 9.0 and totals["generation_tokens"] is None


# --- The steady state (SGLang 0.5.23's definition) and the window -------------------------------

def test_the_steady_state_excludes_ramp_up_and_drain():
    # Two slots; four requests of 1 s, each emitting 11 tokens (TTFT 0.1 s, then 10 gaps of 0.08 s).
    # Slots busy: [0, 1) two, [1, 2) two, then the drain. A fifth request alone from 2 to 3 s.
    rows = [[0.0, 1.0, True], [0.0, 1.0, True], [1.0, 1.0, True], [1.0, 1.0, True], [2.0, 1.0, True]]
    result = {"ttfts": [0.1] * 5, "itls": [[0.08] * 10] * 5, "output_lens": [11] * 5}
    steady = window.steady_state(result, {"requests": rows})
    assert steady["peak_concurrency"] == 2 and steady["concurrency_threshold"] == 2
    assert steady["window_s"] == pytest.approx(2.0) and steady["share_of_run"] == pytest.approx(2 / 3, abs=1e-4)
    assert steady["output_tokens"] == pytest.approx(44.0) and steady["output_throughput"] == pytest.approx(22.0)
    assert steady["representative"] is True
    # Whole-run throughput would be 55 / 3 = 18.3 tok/s: the lone tail request drags it down.


def test_no_steady_state_without_the_start_times_or_details():
    result = {"ttfts": [0.1], "itls": [[]], "output_lens": [1]}
    assert window.steady_state(result, None) is None
    assert window.steady_state({}, {"requests": [[0.0, 1.0, True]]}) is None
    assert window.steady_state(result, {"requests": [[0.0, 1.0, False]]}) is None


@pytest.mark.parametrize(("result", "expected"), [
    ({"completed": 32, "duration": 0.5}, "it lasted 0.50 s, the window needs 5 s"),
    ({"completed": 8, "duration": 9.0}, "8 requests completed, the window needs 20"),
    ({"completed": 40, "duration": 9.0}, None),
])
def test_the_window_says_what_is_short(result, expected):
    assert window.window_shortfall(result, {"min_requests": 20, "min_duration_s": 5}) == expected


def test_a_short_point_is_sized_from_its_own_rate_once():
    point = {"num_prompts": 32, "window": {"min_requests": 20, "min_duration_s": 5, "max_prompts": 1000}}
    # 32 requests in 0.5 s: 64 req/s, 1.2 x 5 s of them.
    assert client.resize(point, {"completed": 32, "duration": 0.5}) == 384
    assert client.resize(point, {"completed": 32, "duration": 6.0}) is None  # long enough
    assert client.resize(point, {"completed": 30, "duration": 0.5}) is None  # incomplete: a failure, not a size
    assert client.resize(dict(point, window={**point["window"], "max_prompts": 100}),
                         {"completed": 32, "duration": 0.01}) == 100
    assert client.resize({"num_prompts": 32}, {"completed": 32, "duration": 0.5}) is None
    assert client.with_prompts(["--x", "1", "--num-prompts", "32"], 384) == ["--x", "1", "--num-prompts", "384"]


def test_a_measured_point_gets_its_counters_steady_state_and_window(tmp_path):
    result, sidecar = recorded("honest")
    output = tmp_path / "c8_r0.jsonl"
    output.write_text(json.dumps(result) + "\n")
    (tmp_path / "c8_r0.jsonl.metrics.json").write_text(json.dumps(sidecar))
    spec = {"output_file": str(output), "concurrency": 8, "repeat": 0, "num_prompts": 32,
            "argv": ["--random-output-len", "32", "--warmup-requests", "1"],
            "metrics": {"url": "http://127.0.0.1:1/metrics"}, "window": {"min_requests": 20, "min_duration_s": 5}}
    end = {"cache_flush": {"ok": True, "attempts": 1}, "sized": {"first": {"num_prompts": 16}, "num_prompts": 32}}
    point = points.evaluate_point(spec, 0, 0, False, "", end=end)
    assert point["server_metrics"]["requests"] == 33 and point["cache"]["hit_rate"] == pytest.approx(0.9952, abs=1e-4)
    assert point["cache"]["flushed"] is True and point["sized"]["num_prompts"] == 32
    # 0.51 s is short of the 5 s window: kept, numbers and all, as too_short.
    assert point["status"] == "too_short" and "0.51 s" in point["window"]["shortfall"]
    assert point["output_throughput"] == result["output_throughput"]

    lying, lying_sidecar = recorded("lying")
    output.write_text(json.dumps(lying) + "\n")
    (tmp_path / "c8_r0.jsonl.metrics.json").write_text(json.dumps(lying_sidecar))
    point = points.evaluate_point(dict(spec, num_prompts=8, window=None), 0, 0, False, "")
    # The lying signals (TTFT 0, ...) already fail it; the counters say so too.
    assert point["status"] == "failed" and point["server_metrics"]["generation_tokens"] == 0


def test_a_too_short_point_is_shown_and_in_no_verdict():
    import sglang_compare as compare

    def record(record_id, tier, status, value):
        point = {"concurrency": 16, "repeat": 0, "status": status, "output_throughput": value,
                 "total_throughput": 2 * value, "mean_tpot_ms": 1000.0 / value}
        if status == "too_short":
            point["window"] = {"min_duration_s": 5, "shortfall": "it lasted 0.41 s, the window needs 5 s"}
        return {"record_id": record_id, "tier": tier, "status": "success", "host": "h",
                "launch": {"script_sha256": tier}, "points": [point]}

    ledger = [record(f"b{i}", "baseline", "ok", 100.0 + i) for i in range(3)]
    ledger += [record(f"t{i}", "t", "ok", 150.0 + i) for i in range(2)] + [record("t2", "t", "too_short", 300.0)]
    result = compare.compare_record(ledger[-1], ledger)
    point = result["points"][0]
    assert point["too_short"] == ["it lasted 0.41 s, the window needs 5 s"]
    # The two ok starts of t decide; the short third's 300 tok/s is in no value.
    assert point["metrics"]["output_throughput"]["candidate"]["n"] == 2
    assert point["metrics"]["output_throughput"]["candidate"]["median"] == pytest.approx(150.5)
    assert "c=16: too_short, in no verdict (it lasted 0.41 s" in compare.format_table(result)


def real_result(name="c1_r0.jsonl"):
    return _real_result(name)
