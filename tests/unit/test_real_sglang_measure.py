"""Replay of phase f (tests/fixtures/real-sglang/0.5.17-h200-tp1/phase-f): the measure step on real
SGLang 0.5.17 - the warm-up sent while the real client (--full-sglang) imports bench_serving, the
points only after 'go'. The records go through today's ledger validation, warm-up rounds and point
plan, the client's status lines through today's parser, the playbook output's task names against
the tasks today's measure step runs."""

from __future__ import annotations

import pytest
import sglang_bench_points as points
import sglang_ledger
import sglang_warmup_rounds as warmup_rounds
from helpers.paths import FIXTURES
from helpers.recordings import client_events, printed_by, records, step_tasks, tasks

REC = FIXTURES / "real-sglang" / "0.5.17-h200-tp1" / "phase-f"


def test_both_runs_succeeded_with_the_rounds_and_points_todays_plan_makes():
    """Each record valid; the warm-up it sent is today's rounds for its workload (one round per
    measured concurrency, before any point); its points are today's plan of the workload, each ok."""
    found = records(REC)
    assert [r["tier"] for r in found] == ["baseline", "tiny-chunk"]
    for record in found:
        assert sglang_ledger.validate_record(record) == [], record["tier"]
        assert record["status"] == "success" and record["failure"] is None
        assert record["target_is_simulator"] is False  # real SGLang
        assert "--full-sglang" in record["client"]["command_prefix"]  # the real import, torch included
        workload = record["workload"]
        settings = warmup_rounds.settings_from_spec(workload["warmup"], workload["concurrency"])
        rounds = warmup_rounds.warmup_rounds(settings["requests"], settings["concurrency"], settings["levels"])
        assert [(w["concurrency"], w["requests"]) for w in record["warmup"]["per_level"]] == rounds
        assert [c for c, _ in rounds] == workload["concurrency"]
        assert record["warmup"]["succeeded"] == record["warmup"]["requests"] == warmup_rounds.requests_in(rounds)
        plan = points.plan_points(workload["concurrency"], workload["repeats"], "raw",
                                  multiplier=workload["num_prompts"]["multiplier"],
                                  floor=workload["num_prompts"]["floor"])
        assert [(p["concurrency"], p["repeat"], p["num_prompts"]) for p in plan] == [
            (p["concurrency"], p["repeat"], p["num_prompts"]) for p in record["points"]
        ]
        assert all(p["status"] == "ok" and p["completed"] == p["num_prompts"] for p in record["points"])


@pytest.mark.parametrize("index", [0, 1])
def test_the_client_started_its_points_only_after_go(index):
    record = records(REC)[index]
    events = client_events(REC, record)
    kinds = [e["event"] for e in events]
    assert kinds[:3] == ["ready", "go", "start"], kinds
    assert kinds.count("start") == len(record["points"]) and kinds[-1] == "done"
    ready, go = events[0], events[1]
    assert go["t"] >= ready["t"]
    # The warm-up ran beside the import and ended first: 'go' was waiting when the import ended.
    assert record["warmup"]["seconds"] < ready["import_s"]
    assert go["t"] - ready["t"] < 0.5


@pytest.mark.parametrize(("output", "tier"), [("exp_baseline_f.out", "baseline"), ("exp_chunk_f.out", "tiny-chunk")])
def test_the_experiment_ran_todays_one_measure_task_and_no_separate_warmup(output, tier):
    """Today's measure step (sglang_experiment measure -> sglang_bench measure) runs one task that
    warms up and benchmarks, and none of the warm-up entry point's own tasks. The recorded run shows
    that task once, changed, and none of the warm-up entry point's tasks."""
    measure = step_tasks("sglang_experiment", "measure")
    warmup_only = [t for t in step_tasks("sglang_bench", "warmup") if t not in measure]
    (benchmark,) = [t for t in measure if t.startswith("sglang_bench : Benchmark every point")]
    assert warmup_only  # today's warm-up entry point still has a task of its own to look for
    ran = tasks((REC / output).read_text())
    assert [outcome for name, outcome, _ in ran if printed_by([benchmark], name)] == ["changed"]
    assert not [name for name, _, _ in ran if printed_by(warmup_only, name)]
    text = (REC / output).read_text()
    assert f"Benchmark every point in one client process for tier {tier}" in text
    assert "PLAY RECAP" in text and "failed=0" in text.split("PLAY RECAP", 1)[1]
