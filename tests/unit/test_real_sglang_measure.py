"""Replay of phase f (tests/fixtures/real-sglang/0.5.17-h200-tp1/phase-f): the measure step on real
SGLang 0.5.17 - the warm-up sent while the real client (--full-sglang) imports bench_serving, the
points only after 'go'."""

from __future__ import annotations

import pytest
from helpers.paths import FIXTURES
from helpers.recordings import client_events, records

REC = FIXTURES / "real-sglang" / "0.5.17-h200-tp1" / "phase-f"


def test_both_runs_succeeded_with_every_concurrency_warmed_up_once():
    found = records(REC)
    assert [r["tier"] for r in found] == ["baseline", "tiny-chunk"]
    for record in found:
        assert record["status"] == "success" and record["failure"] is None
        assert record["target_is_simulator"] is False  # real SGLang
        assert {p["status"] for p in record["points"]} == {"ok"}
        levels = [r["concurrency"] for r in record["warmup"]["per_level"]]
        assert levels == record["workload"]["concurrency"]
        assert record["warmup"]["succeeded"] == record["warmup"]["requests"]
        assert "--full-sglang" in record["client"]["command_prefix"]  # the real import, torch included


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


def test_the_experiment_ran_one_measure_task_not_a_separate_warmup():
    out = (REC / "exp_baseline_f.out").read_text()
    assert "TASK [Warm up, then benchmark every concurrency point - baseline]" in out
    assert "Warm the server up with requests to /generate" not in out
    assert "PLAY RECAP" in out and "failed=0" in out.split("PLAY RECAP", 1)[1]
