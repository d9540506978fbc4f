"""Replays of the A/A of PHASE=trust TRUST_CASES=aa on real SGLang 0.5.17 (tests/fixtures/real-sglang/
0.5.17-h200-tp1/phase-trust-aa/, twelve starts of the baseline on an H100, README there) through today's
code: each c=1 point's evaluation, the comparison of each start with the ones before it, the prompt
counts kept across starts (sglang_point_sizes), and where the spread across starts comes from.

Issue 23 asks the spread of output tok/s at c=16 across starts of one launch to be at most 5 %, or the
recording to show where the rest comes from. The last three tests show it from the recorded bytes:
the starts sent the same requests (the server's own prompt and cached token counters), and what
differs between them is the server's time per output token, which the client measures per request."""

from __future__ import annotations

import gzip
import json
import statistics

import pytest
import sglang_compare
import sglang_point_sizes as sizes
from helpers import recordings
from helpers.paths import FIXTURES

REC = FIXTURES / "real-sglang" / "0.5.17-h200-tp1" / "phase-trust-aa"


def ledger() -> list[dict]:
    return recordings.packed_records(REC)


def starts() -> list[dict]:
    """The A/A's records, one server start each, in the order they ran (the ledger also holds the
    workload campaign that ran on the machine before them)."""
    return [r for r in ledger() if not r.get("campaign")]


def plan(run_id: str) -> dict:
    return json.loads(gzip.decompress((REC / "raw" / run_id / "plan.json.gz").read_bytes()))


def raw_line(run_id: str, point_id: str) -> dict:
    """bench_serving's own output line of the point (``--output-details``: per-request ITLs)."""
    text = gzip.decompress((REC / "raw" / run_id / f"{point_id}.jsonl.gz").read_bytes()).decode()
    return json.loads(text.splitlines()[-1])


def test_the_recording_is_twelve_starts_of_one_launch():
    found = starts()
    assert len(found) == 12
    assert len({json.dumps(r["launch"]["argv"]) for r in found}) == 1
    assert all(r["status"] == "success" and r["tier"] == "baseline" for r in found)
    assert all(p["status"] == "ok" and p["server_metrics"] for r in found for p in r["points"])


@pytest.mark.parametrize("index", range(12))
def test_each_c1_point_through_todays_evaluation_is_the_recorded_point(tmp_path, index):
    record = starts()[index]
    run = recordings.unpack_run(REC / "raw", record["run_id"], tmp_path)
    today = recordings.todays_point(run, "c1_r0")
    then = recordings.recorded_point(record, "c1_r0")
    for key in ("status", "completed", "num_prompts", "output_throughput", "steady_state", "server_metrics", "cache"):
        assert today[key] == then[key], key


@pytest.mark.parametrize("run_id", ["20261206T180627Z-baseline", "20261206T181256Z-baseline"])
def test_a_c16_point_through_todays_evaluation_is_the_recorded_point(tmp_path, run_id):
    """The slowest start of the first six and the one that grew the kept count (553 -> 694)."""
    (record,) = [r for r in starts() if r["run_id"] == run_id]
    run = recordings.unpack_run(REC / "raw", run_id, tmp_path)
    today = recordings.todays_point(run, "c16_r0")
    then = recordings.recorded_point(record, "c16_r0")
    for key in ("status", "completed", "num_prompts", "output_throughput", "server_metrics", "cache", "sized"):
        assert today.get(key) == then.get(key), key


@pytest.mark.parametrize("index", range(1, 12))
def test_no_start_reads_better_or_worse_against_the_ones_before_it(index):
    """experiment.yml's comparison of each start with the baseline records before it, through today's
    sglang_compare: one start a side is no verdict at every point and metric."""
    found = starts()
    rows = sglang_compare.comparison_rows(sglang_compare.compare_record(found[index], found[: index + 1]))
    assert rows and {r["verdict"] for r in rows} == {"no_verdict"}
    assert all(r["reason"] == sglang_compare.ONE_REPEAT for r in rows)


def test_the_kept_prompt_counts_replayed_through_todays_sizes(tmp_path):
    """From an empty sizes file, today's pin and remember, fed each start's plan and recorded points in
    order, give every start the prompt count it recorded: the first start sizes itself, each later one
    starts at the kept count, the one that still ended short of the window grows it, and the file ends
    as the host's."""
    path = str(tmp_path / "point-sizes.json")
    grown_at = []
    for index, record in enumerate(starts()):
        specs = plan(record["run_id"])["points"]
        kept = sizes.load(path)
        for spec in specs:
            point = recordings.recorded_point(record, spec["id"])
            pinned = point.get("pinned")
            planned = dict(spec, num_prompts=pinned["planned"] if pinned else spec["num_prompts"])
            assert sizes.pin(planned, kept) == (pinned["num_prompts"] if pinned else None), (index, spec["id"])
        if sizes.remember(path, specs, record["points"]):
            grown_at.append(index)
    assert grown_at == [0, 6]
    host = json.loads((REC / "point-sizes.json").read_text())
    for key, entry in sizes.load(path).items():
        assert host[key]["num_prompts"] == entry["num_prompts"]


def _points(concurrency):
    return [recordings.recorded_point(r, f"c{concurrency}_r0") for r in starts()]


def _cv(values):
    return statistics.stdev(values) / statistics.mean(values)


def test_every_start_sent_the_same_requests():
    """The server's own counters: at c=1 every start was sent the same prompt tokens and found the same
    of them in its radix cache; at c=16 the same prompt tokens per kept count, and cached tokens within
    1.5 % of each other (the batching decides which prompt of a shared prefix comes first)."""
    ones = [p["server_metrics"] for p in _points(1)]
    assert len({(m["prompt_tokens"], m["cached_tokens"], m["generation_tokens"]) for m in ones}) == 1
    by_count = {}
    for point in _points(16):
        by_count.setdefault(point["num_prompts"], []).append(point["server_metrics"])
    assert sorted(by_count) == [553, 694]
    for group in by_count.values():
        assert len({m["prompt_tokens"] for m in group}) == 1
        cached = [m["cached_tokens"] for m in group]
        assert (max(cached) - min(cached)) / min(cached) < 0.015


def test_what_differs_between_starts_is_the_servers_time_per_token():
    """With the same requests, c=1 output tok/s still spreads across the starts by more than the 5 % the
    issue asks; its per-start time per output token (bench_serving's mean TPOT) explains it (correlation
    of throughput with 1/TPOT above 0.99), and the c=16 point of the same start moves with it. The time
    per token of a 2-layer model is the scheduler's CPU time per step, not the GPU's."""
    ones, sixteens = _points(1), _points(16)
    throughput = [p["output_throughput"] for p in ones]
    assert _cv(throughput) > 0.05
    assert statistics.correlation(throughput, [1 / p["mean_tpot_ms"] for p in ones]) > 0.99
    for count in (553, 694):
        pairs = [(one, sixteen) for one, sixteen in zip(ones, sixteens, strict=True) if sixteen["num_prompts"] == count]
        slow = [one["median_itl_ms"] for one, _ in pairs]
        fast16 = [sixteen["output_throughput"] for _, sixteen in pairs]
        assert statistics.correlation([1 / x for x in slow], fast16) > 0.4


def test_the_time_per_token_switches_within_one_point():
    """bench_serving's per-request inter-token latencies of single c=1 points: the per-token time steps
    between about 2.6 ms and 4 ms in the middle of a point, in no order of the starts - a property of
    the server process on this host at that moment, which no window, cache flush or order removes."""
    quarters = {}
    for record in starts():
        itls = [statistics.median(r) for r in raw_line(record["run_id"], "c1_r0")["itls"] if r]
        size = len(itls) // 4
        quarters[record["run_id"]] = [statistics.median(itls[i * size : (i + 1) * size]) for i in range(4)]
    jumps = {run: max(q) / min(q) for run, q in quarters.items()}
    assert sum(1 for ratio in jumps.values() if ratio > 1.25) >= 2
    medians = [statistics.median(q) for q in quarters.values()]
    assert max(medians) / min(medians) > 1.4
