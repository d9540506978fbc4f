"""Replay of phase g (tests/fixtures/real-sglang/0.5.17-h200-tp1/phase-g): phase f's steps again on
real SGLang 0.5.17, after the client stopped bench_serving's idle settle pause and the per-point
warm-up request, leaves with os._exit, and the record task compares and copies the ledger itself.
Phase f (phase-f/, the same steps before those changes) is the reference it is compared with."""

from __future__ import annotations

import json

import pytest
import sglang_compare
from helpers.paths import FIXTURES
from helpers.recordings import client_events, records, tasks

REAL = FIXTURES / "real-sglang" / "0.5.17-h200-tp1"
REC = REAL / "phase-g"
BEFORE = REAL / "phase-f"
OUTPUT = {"baseline": "exp_baseline_{}.out", "tiny-chunk": "exp_chunk_{}.out"}
# bench_serving's benchmark(): time.sleep(1.0) after its warm-up and cache flush (0.5.10.post1, 0.5.17).
SETTLE_PAUSE_S = 1.0


def output(phase, tier):
    return (phase / OUTPUT[tier].format(phase.name[-1])).read_text()


def outcomes(phase, tier):
    """Task name -> the outcomes of the tasks of that name in the tier's experiment output."""
    found = {}
    for name, outcome, _ in tasks(output(phase, tier)):
        found.setdefault(name, []).append(outcome)
    return found


def plan(phase, record):
    return json.loads((phase / "results" / "raw" / record["run_id"] / "plan.json").read_text())


def warmup_requests(argv):
    """bench_serving's --warmup-requests in a point's arguments; 1 (its default) when absent."""
    return int(argv[argv.index("--warmup-requests") + 1]) if "--warmup-requests" in argv else 1


def table_rows(text):
    """The rows of the comparison table in ``text``: c, metric label, baseline, tier, delta, verdict."""
    rows = []
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 6 and words[0].isdigit():
            rows.append({"c": int(words[0]), "label": " ".join(words[1:-4]),
                         **dict(zip(("baseline", "tier", "delta", "verdict"), words[-4:], strict=True))})
    return rows


def outside_the_run(phase):
    """Per point: the client's wall time minus bench_serving's own measured duration."""
    return [p["wall_s"] - p["duration"] for r in records(phase) for p in r["points"]]


def test_both_runs_succeeded_from_one_clean_tree():
    found = records(REC)
    assert [r["tier"] for r in found] == ["baseline", "tiny-chunk"]
    assert len({r["git_revision"] for r in found}) == 1 and not found[0]["git_revision"].endswith("-dirty")
    for record in found:
        assert record["status"] == "success" and record["failure"] is None
        assert record["target_is_simulator"] is False and record["versions"]["sglang"] == "0.5.17"
        assert "--full-sglang" in record["client"]["command_prefix"]  # the real import, torch included
        assert [p["concurrency"] for p in record["points"]] == record["workload"]["concurrency"]
        for point in record["points"]:
            assert point["status"] == "ok" and point["completed"] == point["num_prompts"]


def test_every_point_skipped_the_settle_pause_and_the_second_it_cost_is_gone():
    for record in records(REC):
        ends = {e["id"]: e for e in client_events(REC, record) if e["event"] == "end"}
        assert len(ends) == len(record["points"])
        for point, spec in zip(record["points"], plan(REC, record)["points"], strict=True):
            end = ends[spec["id"]]
            assert point["settle_pause_skipped"] and end["settle_pause_skipped"] == point["settle_pause_skipped"]
            assert end["wall_s"] == point["wall_s"]
    # Before the change no point skipped it, and each point spent the pause (plus bench_serving's one
    # warm-up request) outside the run it measured; now only the client's bookkeeping is left.
    assert not any(p.get("settle_pause_skipped") for r in records(BEFORE) for p in r["points"])
    before, now = outside_the_run(BEFORE), outside_the_run(REC)
    assert len(now) == len(before) == 4
    assert min(before) >= SETTLE_PAUSE_S
    assert 0 < max(now) < 0.1
    assert min(before) - max(now) >= SETTLE_PAUSE_S


def test_no_point_sent_a_warmup_request_after_the_measure_steps_warmup_rounds():
    for record in records(REC):
        warmup = record["warmup"]
        assert [level["concurrency"] for level in warmup["per_level"]] == record["workload"]["concurrency"]
        assert warmup["requests"] > 0 and warmup["succeeded"] == warmup["requests"]
        specs = plan(REC, record)
        assert specs.get("settle_pause", "auto") == "auto"
        assert len(specs["points"]) == len(record["points"])
        for point, spec in zip(record["points"], specs["points"], strict=True):
            assert warmup_requests(spec["argv"]) == 0, spec["id"]
            # The ledger's command is the plan's point behind the client: the same arguments ran.
            assert point["command"] == record["client"]["command_prefix"] + spec["argv"]
    # Phase f still sent bench_serving's one request before every point.
    assert {warmup_requests(s["argv"]) for r in records(BEFORE) for s in plan(BEFORE, r)["points"]} == {1}


@pytest.mark.parametrize("index", [0, 1])
def test_the_client_ran_every_point_and_said_done_last(index):
    record = records(REC)[index]
    events = client_events(REC, record)
    specs = plan(REC, record)["points"]
    kinds = [e["event"] for e in events]
    assert kinds == ["ready", "go"] + ["start", "end"] * len(specs) + ["done"], kinds
    assert [e["id"] for e in events if e["event"] == "end"] == [s["id"] for s in specs]
    for end, spec in zip([e for e in events if e["event"] == "end"], specs, strict=True):
        assert end["ok"] and end["rc"] == 0 and not end["timed_out"] and end["completed"] == spec["num_prompts"]
    done = events[-1]
    assert done["ran"] == len(specs) and done["stopped"] is False
    assert done["t"] >= events[-2]["t"] and len({e["pid"] for e in events}) == 1
    # Nothing follows the done line: the status stream was flushed and closed before os._exit.
    log = (REC / "results" / "raw" / record["run_id"] / "client.log").read_text()
    assert json.loads(log.rstrip("\n").splitlines()[-1].split(" ", 1)[1]) == done
    # The client exited 0 (every point ok), so the measure task did not fail.
    found = outcomes(REC, record["tier"])
    assert found[f"sglang_bench : Benchmark every point in one client process for tier {record['tier']}"] == ["changed"]


@pytest.mark.parametrize("tier", ["baseline", "tiny-chunk"])
def test_the_record_task_compared_and_copied_so_compare_and_fetch_skipped(tier):
    found = outcomes(REC, tier)
    assert found[f"sglang_bench : Append the record to the ledger for tier {tier}"] == ["changed"]
    # Its comparison was shown; the separate compare step and the fetch skipped themselves.
    assert found[f"sglang_experiment : Show the comparison with the baseline - {tier}"] == ["ok"]
    assert found["Compare with the latest baseline of this host"] == ["skipping"]
    assert "sglang_bench : Compare the record with the latest successful baseline" not in found
    assert found["sglang_bench : Fetch the ledger to the controller"] == ["skipping"]
    recap = output(REC, tier).split("PLAY RECAP", 1)[1]
    assert "failed=0" in recap
    # Phase f compared in its own task and fetched the ledger afterwards.
    before = outcomes(BEFORE, tier)
    assert before["sglang_bench : Compare the record with the latest successful baseline"] == ["ok"]
    assert before["sglang_bench : Fetch the ledger to the controller"] == ["changed"]


@pytest.mark.parametrize("index", [0, 1])
def test_todays_comparison_of_the_recorded_records_keeps_the_numbers_and_claims_no_verdict(index):
    """The recorded records through today's sglang_compare: the same medians and differences as the
    table the run printed, but one server start a side is no longer a verdict (the run, under the
    old fixed +-5 % rule, printed one)."""
    found = records(REC)
    record, baseline = found[index], (found[0] if index else None)
    shown = f"sglang_experiment : Show the comparison with the baseline - {record['tier']}"
    (body,) = [b for name, _, b in tasks(output(REC, record["tier"])) if name == shown]
    assert f"{record['tier']} vs baseline on {record['host']}:" in body
    recorded = {(r["c"], r["label"]): r for r in table_rows(body)}
    result = sglang_compare.compare_record(record, found[: index + 1])
    today = sglang_compare.comparison_rows(result)
    assert [(r["concurrency"], r["metric"]) for r in today] == [
        (c, metric) for c in record["workload"]["concurrency"] for metric, _ in sglang_compare.METRICS
    ]
    for row in today:
        then = recorded[(row["concurrency"], row["label"])]
        assert then["tier"] == f"{row['candidate']['median']:.2f}"
        if baseline is None:
            assert row["verdict"] == "no_baseline" and then["verdict"] == "no_baseline"
            continue
        assert then["baseline"] == f"{row['baseline']['median']:.2f}" and then["delta"] == f"{row['delta_pct']:+.1f}%"
        assert row["verdict"] == "no_verdict" and row["reason"] == sglang_compare.ONE_REPEAT
        assert row["ci_low_pct"] is None and then["verdict"] in {"better", "worse", "within_noise"}
    table = sglang_compare.format_table(result)
    reference = baseline["record_id"] if baseline else "none (no earlier successful baseline)"
    assert table.rstrip().endswith(f"baseline record(s): {reference}")
    assert ("run the tier (and the baseline) again" in table) is (baseline is not None)
