"""Replays of PHASE=quality/trust on real SGLang 0.5.17 (tests/fixtures/real-sglang/0.5.17-h200-tp1/
phase-quality-trust/, an H100 that day, README there) through today's code: the point evaluation
(window, steady state, the server's counters, the cache), the comparison of one start a side, and the
window's verdict. Each test feeds the recorded bytes (bench_serving's raw output, the client's sidecars
and status lines, the ledger) through the functions that made the record, and checks that today's
answer is the recorded one and says what issue 23 asks of it."""

from __future__ import annotations

import gzip
import json
import statistics

import pytest
import sglang_bench_points as bp
import sglang_compare
import sglang_point_window as window
from helpers import recordings
from helpers.paths import FIXTURES

REC = FIXTURES / "real-sglang" / "0.5.17-h200-tp1" / "phase-quality-trust"
HONEST = "20261206T084329Z-baseline"  # record 1: the second start of the baseline, both points ok
LIE = "20261206T085143Z-tiny-chunk"  # record 7: 5000-token prompts against a 4096-token context
COLD, WARM = "20261206T085250Z-baseline", "20261206T085407Z-baseline"  # records 8 and 9: two repeats
# The baseline records measured with the inventory's window (5 s), a cold cache and the counters, one
# server start each, in the order they ran: the quality phase's four, the cold repeats, the run after
# the SIGKILL. Record 6 (the short window) and 9 (a warm cache) measure something else.
STARTS = (0, 1, 4, 5, 8, 10)


def ledger() -> list[dict]:
    return recordings.packed_records(REC)


def unpacked(run_id: str, tmp_path) -> dict:
    return recordings.unpack_run(REC / "raw", run_id, tmp_path)


todays_point, recorded_point = recordings.todays_point, recordings.recorded_point


@pytest.mark.parametrize("point_id", ["c1_r0", "c16_r0"])
def test_an_honest_point_through_todays_evaluation_is_the_recorded_point(tmp_path, point_id):
    """bench_serving's raw line, the per-request sidecar and the /metrics readings of the second start
    give today the recorded point: ok, sized once to meet the 5 s window, the cache flushed, and the
    server's own generation counter equal to what the client received (warm-up requests 0)."""
    run = unpacked(HONEST, tmp_path)
    today = todays_point(run, point_id)
    then = recorded_point(ledger()[1], point_id)
    assert today["status"] == then["status"] == "ok"
    for key in ("completed", "num_prompts", "output_throughput", "steady_state", "server_metrics", "cache", "sized"):
        assert today[key] == then[key], key
    metrics = today["server_metrics"]
    assert metrics["requests"] == today["completed"]
    assert metrics["generation_tokens"] == today["total_output_tokens"]
    assert today["duration"] >= run["specs"][point_id]["window"]["min_duration_s"]


def test_the_streamed_error_is_failed_and_the_servers_counters_witness_it(tmp_path):
    """The client counted 651 of 651 requests completed (TTFT 0, nothing retokenized); the server's
    counters moved by 0 requests and 0 generated tokens. Today the point fails as streamed_error and
    the counters' disagreement stands beside it as a second signal."""
    run = unpacked(LIE, tmp_path)
    today = todays_point(run, "c1_r0")
    then = recorded_point(ledger()[7], "c1_r0")
    assert then["status"] == today["status"] == "failed"
    assert today["failure"]["class"] == then["failure"]["class"] == "streamed_error"
    assert today["completed"] == 651 and today["server_metrics"]["requests"] == 0
    assert today["server_metrics"]["generation_tokens"] == 0
    witnessed = [s for s in today["failure"]["signals"] if s.startswith("the server's own counters disagree")]
    assert len(witnessed) == 2, today["failure"]["signals"]
    assert "counted 0 requests where the client reports 651" in witnessed[0]


def test_the_counters_alone_fail_a_point_the_client_calls_ok(tmp_path):
    """The same readings under an ok client result (as if the TTFT check missed it): today's
    counter check fails the point as counter_mismatch."""
    run = unpacked(LIE, tmp_path)
    spec = run["specs"]["c1_r0"]
    result = bp.read_new_results(spec["output_file"], 0)[-1]
    point = bp.measure_point({"status": bp.POINT_OK}, spec, result, run["ends"]["c1_r0"])
    assert point["status"] == bp.POINT_FAILED and point["failure"]["class"] == "counter_mismatch"


def test_lockstep_batches_leave_sglangs_steady_window_too_short_to_stand_for_the_point(tmp_path):
    """At c=16 the tiny model runs each batch of 16 equal requests in lockstep: all 16 end together and
    the next 16 start a few ms later, so the in-flight count falls below ceil(0.8 x 16) between
    batches. SGLang 0.5.23's steady window (the longest span at or above it) then covers 6.5 % of the
    run, and the point says it is not representative: the whole-run figure is the one that stands."""
    run = unpacked(HONEST, tmp_path)
    spec = run["specs"]["c16_r0"]
    result = bp.read_new_results(spec["output_file"], 0)[-1]
    rows = window.read_sidecar(spec["output_file"] + ".requests.json")["requests"]
    steady = window.steady_state(result, {"requests": rows})
    assert steady["peak_concurrency"] == 16 and steady["concurrency_threshold"] == 13
    assert steady["representative"] is False and steady["share_of_run"] < 0.1
    # The in-flight count, from the same rows: it reaches the threshold and falls below it again, over
    # and over, between the first and the last batch.
    events = sorted([(start, 1) for start, _latency, _ok in rows]
                    + [(start + latency, -1) for start, latency, _ok in rows])
    in_flight, above, rises = 0, False, 0
    for _moment, step in events:
        in_flight += step
        if in_flight >= 13 and not above:
            rises += 1
        above = in_flight >= 13
    assert rises > 20


def test_points_below_their_window_are_too_short_in_no_verdict():
    """Record 6 asked 60 s of a point capped at 40 prompts; four c=16 points of the 5 s window ended at
    3.7-4.9 s after their one resize. Today's window check finds each of them short, and today's
    comparison keeps them out of every verdict."""
    found = ledger()
    short = [(i, p) for i, r in enumerate(found) for p in r["points"] if p["status"] == "too_short"]
    assert [(i, p["concurrency"]) for i, p in short] == [(0, 16), (3, 16), (4, 16), (5, 16), (6, 1), (6, 16)]
    for _index, point in short:
        assert window.window_shortfall(point, point["window"]) == point["window"]["shortfall"]
        assert window.window_shortfall(dict(point, duration=point["window"]["min_duration_s"]), point["window"]) is None
    rows = sglang_compare.comparison_rows(sglang_compare.compare_record(found[6], found[:7]))
    assert rows and all(r["verdict"] == "no_data" for r in rows)


@pytest.mark.parametrize("index", [1, 4, 5, 8, 10])
def test_an_aa_by_experiment_yml_never_reads_better_or_worse(index):
    """Each baseline start against the baseline records before it, through today's comparison: one
    start a side is no verdict at every point and metric, though the medians differ by 6-43 % (the
    fixed +-5 % rule of old would have called every one of these better or worse)."""
    found = ledger()
    rows = sglang_compare.comparison_rows(sglang_compare.compare_record(found[index], found[: index + 1]))
    assert rows
    # no_data: a too_short point on either side; no_baseline: the earlier start's point was too_short.
    assert {r["verdict"] for r in rows} <= {"no_verdict", "no_data", "no_baseline"}
    assert "no_verdict" in {r["verdict"] for r in rows}
    assert all(r["reason"] == sglang_compare.ONE_REPEAT for r in rows if r["verdict"] == "no_verdict")


def test_the_aa_pairs_differ_by_more_than_the_old_fixed_rule():
    found = ledger()
    deltas = [abs(r["delta_pct"]) for index in (1, 4, 5, 8, 10)
              for r in sglang_compare.comparison_rows(sglang_compare.compare_record(found[index], found[: index + 1]))
              if r.get("delta_pct") is not None]
    assert max(deltas) > 5.0


def test_a_cold_repeat_starts_from_the_flushed_cache_and_a_warm_one_from_the_last():
    """Two repeats on one server, from the /metrics readings through today's server_metrics: with the
    flush (cold) the second repeat's hit rate is the first's (what the prompts share among themselves,
    on a 500-token vocabulary); without it (warm) the second repeat finds its prompts cached."""
    def hit(run_id, point_id, record):
        path = REC / "raw" / run_id / f"{point_id}.jsonl.metrics.json.gz"
        block = window.server_metrics(json.loads(gzip.decompress(path.read_bytes())))
        assert block["cache_hit_rate"] == recorded_point(record, point_id)["server_metrics"]["cache_hit_rate"]
        return block["cache_hit_rate"]

    found = ledger()
    assert found[8]["workload"]["measurement"]["cache"] == "cold"
    assert found[9]["workload"]["measurement"]["cache"] == "warm"
    for c in (1, 16):
        cold = hit(COLD, f"c{c}_r0", found[8]), hit(COLD, f"c{c}_r1", found[8])
        warm = hit(WARM, f"c{c}_r0", found[9]), hit(WARM, f"c{c}_r1", found[9])
        assert abs(cold[1] - cold[0]) < 0.05
        assert warm[1] > 0.98 and warm[1] - warm[0] > 0.25


def test_the_spread_across_server_starts_and_where_it_comes_from():
    """The run-to-run spread of output tok/s across the six starts of one launch (docs/benchmark.md
    quotes these): the machine's first start is the outlier; the resize gives each start a different
    number of prompts, and with them a different share of prompts the radix cache already holds."""
    found = ledger()

    def at(c):
        return [recorded_point(found[i], f"c{c}_r0") for i in STARTS]

    def cv(values):
        return statistics.stdev(values) / statistics.mean(values)

    for c, whole, later in ((1, 0.146, 0.050), (16, 0.121, 0.075)):
        values = [p["output_throughput"] for p in at(c)]
        assert cv(values) == pytest.approx(whole, abs=0.001)
        assert cv(values[1:]) == pytest.approx(later, abs=0.001)
        assert min(values) == values[0]
    sixteen = at(16)
    assert len({p["num_prompts"] for p in sixteen}) == len(sixteen)
    hits = [p["server_metrics"]["cache_hit_rate"] for p in sixteen]
    assert max(hits) - min(hits) > 0.2
