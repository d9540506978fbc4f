"""Integration: playbooks/experiment.yml, the whole cycle, against the SGLang-protocol simulator.

Real ansible-playbook runs (ansible-runner, asserting on the events and facts they produce and on
the ledger they write), with the project's own inventory/local.yml; only the work directory, the
port and the controller's results directory are moved (extra vars) to a temp dir and a random free
port, so nothing in .work/ or results/ is touched and parallel test runs do not collide.

One baseline experiment is shared by the module (fixture ``baseline``); every later test reads
what the ledger held before its run and checks that those bytes are still the ledger's prefix.
Faults come from the simulator's own knobs (SGLANG_SIM_FAULT through sglang_experiment_server_env) or
from a user tier the simulator rejects requests for (a model whose config allows 512 tokens). The stop's
command-line net (sglang_server_kill_by_pattern) stays off, as inventory/local.yml has it, so
other simulators on this machine are never touched.
"""

from __future__ import annotations

import hashlib
import json
import os
from importlib import metadata
from pathlib import Path

import pytest
import sglang_bench_points as bp
import sglang_compare
import yaml
from ansible.module_utils import sglang_lock
from helpers.paths import LOCAL_INVENTORY, REPO
from helpers.playbooks import (
    actions_run,
    assert_untouched,
    experiment_lab_fixture,
    final_failure,
    tail,
    task_results,
)
from helpers.processes import alive

HOST = "sim-local"
TIERS = yaml.safe_load((REPO / "data" / "tiers.yml").read_text())["tiers"]
BENCH_SETTINGS = yaml.safe_load((REPO / "data" / "benchmark.yml").read_text())
BENCH_DEFAULTS = yaml.safe_load((REPO / "roles" / "sglang_bench" / "defaults" / "main.yml").read_text())
LOCAL_VARS = yaml.safe_load(LOCAL_INVENTORY.read_text())["all"]["children"]["sglang_nodes"]["vars"]
CRASH_CLASSES = {entry["class"] for entry in yaml.safe_load((REPO / "data" / "crash_signatures.yml").read_text())}
METRICS = ("output_throughput", "total_throughput", "mean_tpot_ms")


def setting(name):
    """The effective benchmark setting of the local inventory: its override, else data/benchmark.yml."""
    override = LOCAL_VARS.get(f"sglang_bench_{name}")
    return override if override is not None else BENCH_SETTINGS[name]


def num_prompts(concurrency):
    """The prompts planned for a point: the num_prompts rule, at least the window's min_requests."""
    multiplier = LOCAL_VARS.get("sglang_bench_num_prompts_multiplier") or BENCH_SETTINGS["num_prompts"]["multiplier"]
    floor = LOCAL_VARS.get("sglang_bench_num_prompts_floor") or BENCH_SETTINGS["num_prompts"]["floor"]
    min_requests = LOCAL_VARS.get("sglang_bench_min_requests") or BENCH_SETTINGS["measurement"]["min_requests"]
    return max(multiplier * concurrency, floor, min_requests)


def latest_good_tier(records):
    good = [r["tier"] for r in records if r.get("host") == HOST and r.get("status") == "success"]
    return good[-1] if good else "baseline"


# Whatever happens: the verified stop at the end, then a kill of any recorded session that is left.
lab = experiment_lab_fixture("experiment")


@pytest.fixture(scope="module")
def baseline(lab):
    return lab.succeed(tier="baseline")


def check_points(record):
    concurrency = setting("concurrency")
    assert [p["concurrency"] for p in record["points"]] == concurrency
    min_duration = LOCAL_VARS.get("sglang_bench_min_duration_s")
    for point in record["points"]:
        planned = start = num_prompts(point["concurrency"])
        if point.get("pinned"):  # an earlier run of this point on the host sent more: it starts there
            assert point["pinned"]["planned"] == planned < point["pinned"]["num_prompts"], point
            start = point["pinned"]["num_prompts"]
        if point.get("sized"):  # ended short of its window: run once more, sized from its own rate
            assert point["sized"]["first"]["num_prompts"] == start < point["num_prompts"]
            assert point["sized"]["first"]["duration"] < min_duration
        else:
            assert point["num_prompts"] == start
        assert point["completed"] == point["num_prompts"]
        if point["status"] == "too_short":
            # On a loaded machine a sized point can run faster the second time and still end short:
            # kept with its shortfall (in no verdict), and the points after it still ran.
            assert point.get("sized") and point["window"]["shortfall"], point
        else:
            assert point["status"] == "ok", point
            assert point["duration"] >= min_duration
        for metric in METRICS:
            assert point[metric] > 0, (point["concurrency"], metric, point[metric])
        # The simulator's own counters (the baseline launches with --enable-metrics) agree with the
        # client's: every request and every generated token (no bench_serving warm-up request after
        # the measure step's own warm-up rounds).
        server = point["server_metrics"]
        assert server["available"] and server["requests"] == point["completed"], server
        assert server["generation_tokens"] == point["total_output_tokens"], server
        # Each point from a flushed cache: the seeded prompts of the warm-up and of earlier points miss.
        assert point["cache"]["flushed"] is True and point["cache"]["hit_rate"] < 0.5, point["cache"]
        assert point["steady_state"]["output_throughput"] > 0


def comparison(runner, tier):
    """The comparison the record step made in its own module call (sglang_ledger_append's compare); the
    report step then runs no comparison module of its own."""
    assert task_results(runner, "Compare the record with the latest successful baseline") == []
    (record,) = task_results(runner, f"Append the record to the ledger for tier {tier}")
    return record["ansible_facts"]["sglang_bench_compare"]


def test_baseline_is_recorded(lab, baseline):
    records = lab.records()
    assert len(records) == 1
    record = records[0]
    assert record["tier"] == "baseline" and record["status"] == "success" and record["failure"] is None
    assert record["host"] == HOST and record["target_is_simulator"] is True
    check_points(record)
    # The controller's copy is the host's ledger, byte for byte; the lock was given back.
    assert lab.controller_ledger.read_bytes() == lab.ledger_bytes()
    assert not (lab.run_dir / "sglang.lock").exists()
    # The first baseline has nothing to compare with, and says so.
    verdicts = {m["verdict"] for p in comparison(baseline, "baseline")["points"] for m in p["metrics"].values()}
    assert verdicts == {"no_baseline"}


def test_flag_tier_after_the_baseline(lab, baseline):
    tier = "t03-single-batch-overlap"
    before = lab.ledger_bytes()
    baseline_record = lab.records(before)[-1]
    runner = lab.run(tier=tier)
    assert runner.status == "successful", tail(runner)

    assert lab.ledger_bytes().startswith(before)
    records = lab.records()
    assert len(records) == len(lab.records(before)) + 1
    record = records[-1]
    assert record["tier"] == tier and record["status"] == "success" and record["failure"] is None
    check_points(record)

    # Both arms sent the same prompts: the host kept each point's prompt count (sglang_point_sizes), so
    # the tier's points started at least where the baseline's ended.
    for mine, theirs in zip(record["points"], baseline_record["points"], strict=True):
        first = (mine.get("sized") or {}).get("first", {}).get("num_prompts", mine["num_prompts"])
        assert first >= theirs["num_prompts"], (mine, theirs)

    # Provenance: what role sglang_launch rendered and the lifecycle started.
    handed = task_results(runner, "Keep the launch for the steps of the cycle")[0]
    launch = handed["ansible_facts"]["__sglang_experiment_launch"]
    assert launch["tier"] == tier and launch["target"] == "simulator"
    for flag in TIERS[tier]["flags_add"]:
        assert flag in launch["argv"]
    argv = record["launch"]["argv"]
    assert argv[:4] == [launch["interpreter"], "-u", "-m", "sglang_sim.launch_server"]
    assert argv[4:] == launch["argv"]
    script = Path(launch["script"])
    assert script == lab.work / "launch" / f"{tier}.sh"
    sha = hashlib.sha256(script.read_bytes()).hexdigest()
    assert record["launch"]["script_sha256"] == sha == lab.server()["script_sha256"]
    assert record["target_is_simulator"] is True
    assert record["versions"]["sglang"] == metadata.version("sglang")
    assert record["workload"]["concurrency"] == setting("concurrency")
    assert record["workload"]["input_len"] == setting("input_len")
    assert record["model"]["model_path"] == str(lab.work / "sim-model")

    # Compared, point by point, with the baseline record just before it.
    facts = comparison(runner, tier)
    assert facts["record_id"] == record["record_id"]
    assert facts["confidence"] == float(BENCH_SETTINGS["confidence"])
    assert [p["concurrency"] for p in facts["points"]] == setting("concurrency")
    short = {p["concurrency"] for r in (record, baseline_record) for p in r["points"] if p["status"] == "too_short"}
    for point in facts["points"]:
        assert point["baseline_record_id"] == baseline_record["record_id"]
        for metric in METRICS:
            entry = point["metrics"][metric]
            if point["concurrency"] in short:  # a too_short side has no value: in no verdict
                assert entry["verdict"] == "no_data", entry
                continue
            # One record a side (one server start each): a difference, never a verdict.
            assert entry["verdict"] == "no_verdict" and entry["delta_pct"] is not None, entry
            assert entry["reason"] in {sglang_compare.ONE_REPEAT, sglang_compare.WITHIN_ONLY}

    table = task_results(runner, f"Show the comparison with the baseline - {tier}")[0]["msg"]
    assert f"{facts['confidence']:.0%} simultaneous intervals" in table and "SYNTHETIC" in table
    assert baseline_record["record_id"] in table
    rows = [line for line in table.splitlines()[2:] if line.split()[0].isdigit()]
    assert len(rows) == len(METRICS) * len(setting("concurrency"))
    for row in rows:
        assert row.split()[0] in {str(c) for c in setting("concurrency")}
        if int(row.split()[0]) not in short:
            assert row.endswith(("no_verdict (one repeat)", "no_verdict (in-server)")), row

    # The tier's server stays up; the lock was given back; the controller has the new ledger.
    assert lab.server()["tier"] == tier and lab.healthy()
    assert not (lab.run_dir / "sglang.lock").exists()
    assert lab.controller_ledger.read_bytes() == lab.ledger_bytes()


def test_crash_at_load_is_recorded_and_the_last_good_tier_restored(lab, baseline):
    tier = "t01-piecewise-cuda-graph"
    before = lab.ledger_bytes()
    expected_restore = latest_good_tier(lab.records(before))
    runner = lab.run(tier=tier, sglang_experiment_server_env={"SGLANG_SIM_FAULT": "crash_on_load"})
    assert runner.status == "failed", tail(runner)

    assert lab.ledger_bytes().startswith(before)
    records = lab.records()
    assert len(records) == len(lab.records(before)) + 1
    record = records[-1]
    assert record["tier"] == tier and record["status"] == "failed"
    assert record["failure"]["class"] == TIERS[tier]["expected_failure_class"] == "dynamo_fp4_jit"
    assert record["failure"]["step"] == "wait_ready"
    assert "allocate_lock" in record["failure"]["excerpt"] or "Unsupported" in record["failure"]["message"]
    assert record["points"] == []
    assert record["target_is_simulator"] is True
    assert record["launch"]["env"]["SGLANG_SIM_FAULT"] == "crash_on_load"

    message = final_failure(runner)
    assert "dynamo_fp4_jit (as expected" in message and f"tier {expected_restore} runs again" in message
    server = lab.server()
    assert server["tier"] == expected_restore and alive(server["pid"]) and lab.healthy()
    assert not (lab.run_dir / "sglang.lock").exists()
    assert lab.controller_ledger.read_bytes() == lab.ledger_bytes()


def test_crash_mid_benchmark_keeps_the_points_and_is_not_restored(lab, baseline):
    tier = "t04-ep8"
    concurrency = setting("concurrency")
    assert len(concurrency) >= 3
    # Generation requests the simulator answers before the third point; then 20 more, inside it.
    # The warm-up: one round per level of max(level, requests) (warmup.concurrency "measured":
    # every measured concurrency; docs/benchmark.md).
    requests = LOCAL_VARS.get("sglang_bench_warmup_requests") or BENCH_SETTINGS["warmup"]["requests"]
    level = LOCAL_VARS.get("sglang_bench_warmup_concurrency") or BENCH_SETTINGS["warmup"]["concurrency"]
    levels = concurrency if level == "measured" else [int(level)]
    # bench_serving's own warm-up requests per point: none after the warm-up rounds unless configured.
    client_warmup = bp.point_warmup_requests(BENCH_DEFAULTS["sglang_bench_client_warmup_requests"], bool(levels))
    client_warmup = 1 if client_warmup is None else client_warmup  # bench_serving's default
    answered = sum(max(lvl, requests) for lvl in levels)
    answered += sum(client_warmup + num_prompts(c) for c in concurrency[:2])
    assert num_prompts(concurrency[2]) > 20
    before = lab.ledger_bytes()
    runner = lab.run(
        tier=tier,
        sglang_experiment_restore=False,
        sglang_experiment_server_env={
            "SGLANG_SIM_FAULT": "crash_after_requests",
            "SGLANG_SIM_FAULT_AFTER": str(answered + 20),
        },
        # The requests are counted to the crash: no point is sized anew for its window here.
        sglang_bench_min_duration_s=0,
    )
    assert runner.status == "failed", tail(runner)

    assert lab.ledger_bytes().startswith(before)
    record = lab.records()[-1]
    assert record["tier"] == tier and record["status"] == "failed"
    # The server's death is classified from its log, not left as a benchmark symptom.
    assert record["failure"]["class"] in CRASH_CLASSES
    assert record["failure"]["class"] == "cuda_illegal_memory_access"
    assert record["failure"]["step"] == "benchmark"
    # The points before the crash are kept, complete; the point it hit is failed; none after it.
    points = record["points"]
    assert [p["concurrency"] for p in points] == concurrency[:3]
    for point in points[:2]:
        assert point["status"] == "ok" and point["completed"] == point["num_prompts"] > 0
        assert point["output_throughput"] > 0
    assert points[2]["status"] == "failed" and points[2]["failure"]["class"]

    message = final_failure(runner)
    assert "cuda_illegal_memory_access" in message and "off (sglang_experiment_restore: false)" in message
    # Not restored: no server answers, the crashed tier's record is left for inspection.
    assert not lab.healthy()
    server = lab.server()
    assert server["tier"] == tier and not alive(server["pid"])
    assert not (lab.run_dir / "sglang.lock").exists()


SHORT_CONTEXT_TIER = {
    "t90-short-context": {
        "title": "Short context (test tier)",
        "level": 1,
        "runnable": True,
        "hypothesis": "A model whose own config allows 512 tokens: longer requests fail inside their streams.",
        "expected_impact": "Some requests fail.",
        "flags_add": {"--schedule-policy": "lpm"},
    }
}


def short_context_model(lab) -> Path:
    """A copy of the lab's simulator model whose config.json allows 512 tokens. The context limit
    lives in the model's config, which the preflight does not read (it checks a launch's own
    --context-length and refuses prompt + output beyond it before the stop), so the too-long requests
    reach the server, as they would for a limit the launch does not state."""
    model = lab.root / "short-context-model"
    if not model.is_dir():
        model.mkdir()
        for item in (lab.work / "sim-model").iterdir():
            if item.is_file():
                (model / item.name).write_bytes(item.read_bytes())
        config = json.loads((model / "config.json").read_text())
        config["max_position_embeddings"] = 512
        (model / "config.json").write_text(json.dumps(config))
    return model


def test_a_streamed_error_point_is_recorded_and_the_last_good_tier_restored(lab, baseline):
    before = lab.ledger_bytes()
    expected_restore = latest_good_tier(lab.records(before))
    # Prompt lengths drawn from 1..1000 tokens against a model of 512. As real SGLang 0.5.17
    # does (tests/fixtures/real-sglang/), the simulator answers the too-long streamed requests
    # with HTTP 200 and an error chunk, and bench_serving counts them as completed: the point
    # must fail all the same, from the server's "[http_server] Error" lines.
    runner = lab.run(
        tier="t90-short-context",
        sglang_launch_extra_tiers=SHORT_CONTEXT_TIER,
        sglang_launch_flags_override={"--model": str(short_context_model(lab))},
        sglang_bench_input_len=1000,
        sglang_bench_random_range_ratio=0.0,
    )
    assert runner.status == "failed", tail(runner)

    assert lab.ledger_bytes().startswith(before)
    record = lab.records()[-1]
    assert record["tier"] == "t90-short-context" and record["status"] == "failed", tail(runner)
    assert record["failure"]["class"] == "streamed_error" and record["failure"]["step"] == "benchmark"
    point = record["points"][0]
    assert point["status"] == "failed" and point["completed"] == point["num_prompts"]  # what bench_serving said
    assert point["failure"]["class"] == "streamed_error"
    assert any("[http_server] Error" in signal and "context length" in signal for signal in point["failure"]["signals"])

    message = final_failure(runner)
    assert "streamed_error" in message and f"tier {expected_restore} runs again" in message
    server = lab.server()
    assert server["tier"] == expected_restore and alive(server["pid"]) and lab.healthy()
    assert not (lab.run_dir / "sglang.lock").exists()


@pytest.mark.parametrize("tier", [tid for tid, t in TIERS.items() if not t["runnable"]])
def test_a_tier_that_cannot_run_touches_nothing(lab, baseline, tier):
    server = lab.ensure_server()
    before = lab.ledger_bytes()
    runner = lab.run(tier=tier)
    assert runner.status == "failed"
    assert f"tier '{tier}'" in final_failure(runner) and "is not runnable" in final_failure(runner)
    assert "sglang_server_lock" not in actions_run(runner)
    assert_untouched(lab, server, before, runner)


@pytest.mark.parametrize(
    "extravars",
    [
        pytest.param(
            {
                "tier": "t91-unknown-flag",
                "sglang_launch_extra_tiers": {
                    "t91-unknown-flag": {
                        "title": "A flag SGLang does not have",
                        "level": 1,
                        "runnable": True,
                        "hypothesis": "none",
                        "expected_impact": "none",
                        "flags_add": {"--no-such-flag": True},
                    }
                },
            },
            id="user-tier",
        ),
        pytest.param({"tier": "baseline", "sglang_launch_flags_override": "BOGUS"}, id="flags-override"),
    ],
)
def test_a_failed_flag_check_stops_the_play_before_the_server_is_touched(lab, baseline, extravars):
    extravars = dict(extravars)
    if extravars.get("sglang_launch_flags_override") == "BOGUS":
        # The inventory's override plus a flag SGLang 0.5.10.post1 does not know.
        extravars["sglang_launch_flags_override"] = {"--model": str(lab.work / "sim-model"), "--no-such-flag": 1}
    server = lab.ensure_server()
    before = lab.ledger_bytes()
    runner = lab.run(**extravars)
    assert runner.status == "failed"
    message = final_failure(runner)
    assert "rejected at the argv check" in message and "--no-such-flag" in message
    assert "sglang_server_lock" not in actions_run(runner)
    assert_untouched(lab, server, before, runner)


def test_check_mode_validates_and_stops_before_the_lock(lab, baseline):
    server = lab.ensure_server()
    before = lab.ledger_bytes()
    runner = lab.run(cmdline="--check", tier="t04-ep8")
    assert runner.status == "successful", tail(runner)
    said = task_results(runner, "Say where check mode ends")[0]["msg"]
    assert "passed validation" in said and str(lab.work / "launch" / "t04-ep8.sh") in said
    assert "sglang_server_lock" not in actions_run(runner)
    assert_untouched(lab, server, before, runner)


def test_a_second_experiment_is_refused_by_the_lock(lab, baseline):
    server = lab.ensure_server()
    before = lab.ledger_bytes()
    lock = lab.run_dir / "sglang.lock"
    # Another experiment holds the lock: a live holder process on this host (this test).
    taken = sglang_lock.acquire(str(lock), "other-experiment", "another experiment", holder_pid=os.getpid())
    assert taken["acquired"]
    try:
        runner = lab.run(tier="t03-single-batch-overlap")
        assert runner.status == "failed"
        message = final_failure(runner)
        assert "locked by another experiment" in message and f"pid {os.getpid()}" in message
        assert_untouched(lab, server, before, runner)
        # The refused run did not give back a lock it never had.
        assert json.loads(lock.read_text())["token"] == "other-experiment"
    finally:
        sglang_lock.release(str(lock), "other-experiment")
    assert not lock.exists()


def test_a_missing_tier_is_a_clear_error(lab):
    runner = lab.run()
    assert runner.status == "failed"
    assert "Give the tier to run: ansible-playbook playbooks/experiment.yml -e tier=<id>" in final_failure(runner)
    # Only checks ran: the include of the validate step, its argument specs and the tier assert.
    assert actions_run(runner) <= {"ansible.builtin.assert", "ansible.builtin.validate_argument_spec",
                                   "ansible.builtin.include_role"}
