"""Replay of phase b (tests/fixtures/real-sglang/0.5.17-h200-tp1/phase-b), re-run on 2026-12-06 with the
one-module lifecycle of issue 22: on real SGLang 0.5.17, the scheduler of tiny-chunk SIGKILLed while the
client measured its first point, then stop.yml. The server's own log goes through today's crash catalog
and failure decision, the client's events through today's point rules (the record's point), the
kill's time against the point's, and the stop's processes through today's stop_processes.
(The oversized-prompt run of the same call, exp_lie, is kept as it came; the streamed-error rule is
replayed on the trust phase's raw output by test_real_sglang_trust.py.)"""

from __future__ import annotations

import re
from datetime import datetime

import sglang_bench_points
import sglang_crash
import sglang_failure
import yaml
from helpers.paths import FIXTURES, REPO
from helpers.recordings import client_events, records, replay_stop, shown_msg, stopped_entries, tasks

REC = FIXTURES / "real-sglang" / "0.5.17-h200-tp1" / "phase-b"
STOPPED = re.compile(r"'stopped (\d+) process\(es\) of tier (\S+) \(kill_by_pattern")


def text(name):
    return (REC / name).read_text()


def epoch(stamp):
    return datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


def killed():
    (record,) = [r for r in records(REC) if (r["failure"] or {}).get("step") == "benchmark"
                 and r["failure"]["class"] != "streamed_error"]
    return record


def test_the_killed_scheduler_is_the_class_today_s_catalog_gives_its_log():
    record = killed()
    failure = record["failure"]
    assert (record["status"], failure["step"], failure["class"]) == ("failed", "benchmark", "scheduler_killed")
    log = text("logs/tiny-chunk-killed.log").splitlines()
    catalog = sglang_crash.compile_catalog(yaml.safe_load((REPO / "data" / "crash_signatures.yml").read_text()))
    got = sglang_crash.classify_outcome(catalog, log)
    assert got["outcome"] == "crashed"
    decided = sglang_failure.decide_failure(
        task={"name": "Benchmark every point in one client process", "tags": ["sglang_experiment_benchmark"]},
        crash=got["report"])
    for key in ("class", "step", "message", "crash_line_number"):
        assert decided[key] == failure[key], key
    assert log[failure["crash_line_number"] - 1] == failure["message"]
    assert "crashed with exit code -9" in failure["message"]


def test_the_kill_fell_inside_the_measured_point_and_the_point_kept_what_completed():
    record = killed()
    kill_at = float(text("kill_at.txt").split()[0])
    (point,) = record["points"]
    assert epoch(point["started_at"]) < kill_at < epoch(point["ended_at"])
    events = client_events(REC, record)
    start = next(e for e in events if e["event"] == "start")
    end = next(e for e in events if e["event"] == "end")
    assert start["t"] < kill_at < end["t"]
    # The client sized the point from its first run (20 requests, before the kill), then the re-sized
    # run lost every request to the dead server: the point keeps the 20 and fails as incomplete.
    assert end["sized"]["first"]["completed"] == point["completed"] == 20
    assert point["num_prompts"] == end["num_prompts"] and point["failed"] == point["num_prompts"] - point["completed"]
    # Today's point rule on what the client counted gives the recorded status, class and message.
    today = sglang_bench_points.point_from_result({"completed": end["sized"]["first"]["completed"]},
                                                  point["concurrency"], point["repeat"], end["num_prompts"])
    assert (today["status"], today["failure"]) == (point["status"], point["failure"])
    assert point["failure"]["class"] == "incomplete_point"


def test_the_stop_stopped_the_restored_server_and_left_no_live_process():
    stop = text("stop.out")
    entries = stopped_entries(shown_msg(next(body for task, _, body in tasks(stop)
                                             if task.endswith("Show what the stop did"))))
    assert STOPPED.findall(stop) == [(str(len(entries)), "tiny-chunk")]
    took = float(re.search(r"took ([0-9.]+) s", stop).group(1))
    replayed, timings = replay_stop(entries)
    assert [(p, r["signals"], r["outcome"]) for p, r in replayed.items()] == [
        (e["pid"], e["signals"], e["outcome"]) for e in entries]
    assert timings["total_s"] <= took <= 1.0
    gpu = re.search(r"gpu: released=(True|False), used MiB before \[(\d+)\] after \[(\d+)\]", stop)
    assert gpu.group(1) == "True" and int(gpu.group(2)) > 1000 and int(gpu.group(3)) <= 64
    zombies = {int(p) for p in re.findall(r"\d+", re.search(r"remain as zombies[^:]*: pids ([\d, ]+)", stop).group(1))}
    for line in text("ps_after_stop.txt").splitlines()[2:]:
        pid, *_rest = line.split(maxsplit=4)
        assert line.rstrip().endswith("<defunct>") and int(pid) in zombies, line
