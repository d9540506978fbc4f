"""Replay of phase g (tests/fixtures/real-sglang/0.5.17-h200-tp1/phase-g): phase f's steps again on
real SGLang 0.5.17, after the client stopped bench_serving's idle settle pause and the per-point
warm-up request, leaves with os._exit, and the record task compares and copies the ledger itself.
Phase f (phase-f/, the same steps before those changes) is the reference it is compared with.

The records go through today's ledger validation; the plan the client got is rebuilt by today's
plan_points / build_client_argv / write_plan from the record's workload; the client's recorded
status lines go through today's run_plan; the playbook output's task names are checked against the
tasks today's experiment playbook runs; the records through today's sglang_compare."""

from __future__ import annotations

import json
import os

import pytest
import sglang_bench_points as bp
import sglang_compare
import sglang_ledger
import yaml
from helpers.paths import FIXTURES, REPO
from helpers.recordings import client_events, playbook_tasks, printed_by, records, tasks

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


def todays_specs(record, output_dir):
    """The points module sglang_bench plans today for ``record``'s workload (plan_points, then
    build_client_argv per point, as its main() does), writing into ``output_dir``; the warm-up rounds
    ran first (the measure step), so bench_serving gets point_warmup_requests(None, True)."""
    workload = record["workload"]
    defaults = yaml.safe_load((REPO / "roles" / "sglang_bench" / "defaults" / "main.yml").read_text())
    tokenizer = record["server_info"]["tokenizer_path"]  # asked of /server_info: no tokenizer was set
    specs = bp.plan_points(workload["concurrency"], workload["repeats"], str(output_dir),
                           multiplier=workload["num_prompts"]["multiplier"], floor=workload["num_prompts"]["floor"])
    for spec in specs:
        spec["argv"] = bp.build_client_argv(
            [], host="127.0.0.1", port=record["launch"]["server"]["port"], concurrency=spec["concurrency"],
            num_prompts=spec["num_prompts"], input_len=workload["input_len"], output_len=workload["output_len"],
            output_file=spec["output_file"], tokenizer=tokenizer, dataset_name=workload["dataset_name"],
            dataset_path=workload["dataset_path"], range_ratio=workload["random_range_ratio"],
            request_rate=workload["request_rate"], seed=workload["seed"], model=None,
            output_details=defaults["sglang_bench_output_details"],
            warmup_requests=bp.point_warmup_requests(defaults["sglang_bench_client_warmup_requests"], True),
        )
    return specs, defaults["sglang_bench_point_timeout_s"]


def recorded_dir(record):
    """The run's raw folder on the host, as the ledger names it."""
    return os.path.dirname(record["points"][0]["output_file"])


def mapped(value, here, there):
    """``value`` (a string, list or dict) with the temp folder ``here`` written as ``there``."""
    return json.loads(json.dumps(value).replace(str(here), there))


def outside_the_run(phase):
    """Per point: the client's wall time minus bench_serving's own measured duration."""
    return [p["wall_s"] - p["duration"] for r in records(phase) for p in r["points"]]


def test_both_runs_succeeded_from_one_clean_tree():
    found = records(REC)
    assert [r["tier"] for r in found] == ["baseline", "tiny-chunk"]
    assert len({r["git_revision"] for r in found}) == 1 and not found[0]["git_revision"].endswith("-dirty")
    for record in found:
        assert sglang_ledger.validate_record(record) == [], record["tier"]
        assert record["status"] == "success" and record["failure"] is None
        assert record["target_is_simulator"] is False and record["versions"]["sglang"] == "0.5.17"
        assert "--full-sglang" in record["client"]["command_prefix"]  # the real import, torch included
        assert [p["concurrency"] for p in record["points"]] == record["workload"]["concurrency"]
        for point in record["points"]:
            assert point["status"] == "ok" and point["completed"] == point["num_prompts"]


def test_the_recorded_status_lines_through_todays_run_plan_give_the_points_timing(tmp_path, monkeypatch):
    """Each run's client output as recorded (its status lines), handed to today's run_plan in place of
    the client process: the points' start and end, wall time, skipped settle pause and command are
    the ones the ledger holds. (No raw JSONL was kept for this phase: the metrics are not replayed.)"""
    for record in records(REC):
        output = (REC / "results" / "raw" / record["run_id"] / "client.log").read_text()
        here = tmp_path / record["run_id"]
        here.mkdir()
        specs, point_timeout = todays_specs(record, here)

        def client(argv, env=None, timeout=None, log_path=None, cwd=None, gate=None, output=output):
            return {"rc": 0, "timed_out": False, "output": output, "log": log_path, "gate": None}

        monkeypatch.setattr(bp, "run_client", client)
        prefix = record["client"]["command_prefix"]
        replayed, outcome = bp.run_plan(prefix, specs, str(here / "plan.json"), str(here / "client.log"),
                                        point_timeout=point_timeout, stop_on_failure=False)
        keys = ("concurrency", "repeat", "started_at", "ended_at", "wall_s", "settle_pause_skipped", "command")
        assert [{k: p.get(k) for k in keys} for p in mapped(replayed, here, recorded_dir(record))] == [
            {k: p.get(k) for k in keys} for p in record["points"]
        ]
        (run,) = outcome["runs"]
        assert run["points"] == [s["id"] for s in specs] and outcome["not_run"] == []
        assert run["pid"] == client_events(REC, record)[0]["pid"]
    # Every point skipped the pause. Before the change no point did, and each spent the pause (plus
    # bench_serving's one warm-up request) outside the run it measured; now only bookkeeping is left.
    assert all(p["settle_pause_skipped"] for r in records(REC) for p in r["points"])
    assert not any(p.get("settle_pause_skipped") for r in records(BEFORE) for p in r["points"])
    before, now = outside_the_run(BEFORE), outside_the_run(REC)
    assert len(now) == len(before) == 4
    assert min(before) >= SETTLE_PAUSE_S
    assert 0 < max(now) < 0.1
    assert min(before) - max(now) >= SETTLE_PAUSE_S


def test_todays_plan_of_the_workload_is_the_plan_the_client_got(tmp_path):
    """Today's plan of each record's workload, written by write_plan: the recorded plan.json, point for
    point - bench_serving told to send no warm-up request of its own (--warmup-requests 0), since the
    measure step's warm-up rounds (today's rounds for the workload) ran just before."""
    for record in records(REC):
        here = tmp_path / record["run_id"]
        specs, point_timeout = todays_specs(record, here)
        written = bp.write_plan(str(tmp_path / f"{record['run_id']}.json"), specs, point_timeout)
        recorded = plan(REC, record)
        assert mapped(written, here, recorded_dir(record)) == recorded
        assert all(warmup_requests(spec["argv"]) == 0 for spec in recorded["points"])
        assert [level["concurrency"] for level in record["warmup"]["per_level"]] == record["workload"]["concurrency"]
        assert record["warmup"]["requests"] > 0 and record["warmup"]["succeeded"] == record["warmup"]["requests"]
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
    # The client exited 0 (every point ok), so today's measure task (the one that runs the client)
    # did not fail.
    name = f"sglang_bench : Benchmark every point in one client process for tier {record['tier']}"
    assert printed_by(playbook_tasks("experiment.yml"), name)
    assert outcomes(REC, record["tier"])[name] == ["changed"]


@pytest.mark.parametrize("tier", ["baseline", "tiny-chunk"])
def test_the_record_task_compared_and_copied_so_compare_and_fetch_skipped(tier):
    """By the names of tasks today's experiment playbook still runs: the record task appended; the
    report step showed the record step's comparison, so its own compare (and the fetch) skipped."""
    today = playbook_tasks("experiment.yml")
    for name in (f"sglang_bench : Append the record to the ledger for tier {tier}",
                 f"sglang_experiment : Show the comparison with the baseline - {tier}",
                 "Compare with the latest baseline of this host",
                 "sglang_bench : Compare the record with the latest successful baseline",
                 "sglang_bench : Fetch the ledger to the controller"):
        assert printed_by(today, name), name
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
