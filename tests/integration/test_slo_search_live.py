"""SLO search (docs/slo-search.md): module sglang_slo_search through playbooks/slo_search.yml
against ONE live simulator whose threshold follows from its own timing model. The bisection
itself, on synthetic functions, is in tests/unit/test_slo_search.py.

A user tier of the SYNTHETIC simulator with --max-running-requests M and
--num-continuous-decode-steps 1 (new requests are admitted after every decode iteration). At
concurrency c <= M every request is admitted within about one iteration; at c > M the (M+1)-th
request waits for a slot, i.e. for a running request's whole decode, (output_len - 1) decode
iterations. p99 TTFT jumps by an order of magnitude between M and M+1, so the highest
concurrency meeting a p99 TTFT SLO between the two is M. M, the iteration times and the SLO's
limit are computed from the simulator's own configuration (the launch's argv parsed with the
simulator's parser, sglang_sim.throughput.build_model, SGLANG_SIM_SPEED), not from a measurement.
"""

from __future__ import annotations

import json

from ansible.module_utils import sglang_slo
from helpers.paths import LOCAL_INVENTORY, REAL_MANIFEST
from helpers.playbooks import action_name, actions_run, experiment_lab_fixture, final_failure, tail
from helpers.processes import alive

TIER = "t92-slo-cliff"
MAX_RUNNING = 24  # the tier's --max-running-requests: the threshold the search must find
SIM_SPEED = 2.0  # simulated time runs 2x faster than wall time (SGLANG_SIM_SPEED)
# A p99 probe sends 100 requests (PROBE_PROMPTS), in about 100 / c waves of a whole decode each: the
# cap and the range sit high enough that a probe is a few waves, low enough that one request in
# M + 1 (4 %) waits at the cap, above the 1 % a p99 looks at.
SEARCH = {"low": 16, "high": 32, "tolerance": 1}
CLIFF_TIER = {
    TIER: {
        "title": "Few running requests, admission after every decode iteration (SLO search test tier)",
        "level": 1,
        "runnable": True,
        "hypothesis": "A request beyond --max-running-requests waits for a whole decode: TTFT jumps at the cap.",
        "expected_impact": "p99 TTFT steps up between concurrency M and M + 1.",
        "flags_add": {"--max-running-requests": MAX_RUNNING, "--num-continuous-decode-steps": 1},
    }
}
SEARCH_VARS = {
    "tier": TIER,
    "sglang_launch_extra_tiers": CLIFF_TIER,
    "sglang_launch_env_override": {"SGLANG_SIM_LOAD_SECONDS": "1", "SGLANG_SIM_SPEED": str(SIM_SPEED)},
    "sglang_bench_slo_low": SEARCH["low"],
    "sglang_bench_slo_high": SEARCH["high"],
    "sglang_bench_slo_tolerance": SEARCH["tolerance"],
    "sglang_bench_point_timeout_s": 300,
    # One small warm-up round: the benchmark's own warm-up may visit every measured concurrency
    # (up to 1024 here), which says nothing about this tier and takes minutes at this speed.
    "sglang_bench_warmup_concurrency": 2,
}


def simulator_model(launch_argv):
    """The simulator's timing model for this launch: its argv parsed by the simulator's own parser."""
    from sglang_sim.manifest import load_manifest, parse_server_args
    from sglang_sim.throughput import build_model

    return build_model(parse_server_args(list(launch_argv), load_manifest(REAL_MANIFEST), lambda _message: None))


def cliff_slo(model, output_len, input_len, speed):
    """A p99 TTFT limit between what c <= M and c = M + 1 can give, from the timing model (wall ms).

    c <= M: a request waits at most one iteration (a decode of M requests or a prefill), then its
    prefill: about one decode step plus one prefill of M prompts. c = M + 1: in every wave of the
    closed loop M requests hold the slots and one waits for them, at least output_len - 1 decode
    iterations of the batch. A p99 needs 100 requests (sglang_bench_points.min_samples), so every
    probe sends PROBE_PROMPTS; one request in M + 1 (4 % at M = 24) then waits, above the 1 % above a
    p99, so bench_serving's p99 (numpy's linear percentile of the top two) is such a wait. The limit
    is 60 % of the queued bound, far above the unqueued one, so CPU noise (which only adds latency)
    does not move the verdict.
    """
    m = model.max_running_requests
    unqueued = (model.decode_step_seconds(m) + model.prefill_seconds(m * input_len)) / speed * 1000
    queued_wait = (output_len - 1) * model.decode_step_seconds(1) / speed * 1000
    assert (PROBE_PROMPTS // (m + 1)) >= 2  # at least the top two TTFTs waited
    queued_p99 = queued_wait
    assert queued_p99 > 4 * unqueued, (queued_p99, unqueued)  # a cliff the search can find
    return round(0.6 * queued_p99), unqueued, queued_p99


# What a probe of a p99 SLO sends (at least 100 requests; the local inventory's rule gives max(c, 8)).
PROBE_PROMPTS = 100
lab = experiment_lab_fixture("slo-search")


def test_the_search_finds_the_simulators_running_request_cap_on_one_live_server(lab):
    import yaml

    local = yaml.safe_load(LOCAL_INVENTORY.read_text())["all"]["children"]["sglang_nodes"]["vars"]
    output_len, input_len = local["sglang_bench_output_len"], local["sglang_bench_input_len"]
    assert max(SEARCH["high"] * local["sglang_bench_num_prompts_multiplier"], local["sglang_bench_num_prompts_floor"]) \
        < PROBE_PROMPTS  # every probe is sized by its p99, not by the rule

    # The one server start: the tier, started the way an operator would, before the search.
    started = lab.run("start.yml", **{k: v for k, v in SEARCH_VARS.items() if not k.startswith("sglang_bench_")})
    assert started.status == "successful", tail(started)
    before = lab.server()
    assert before and alive(before["pid"]) and lab.healthy()
    model = simulator_model(server_argv(lab))
    assert model.max_running_requests == MAX_RUNNING and model.continuous_decode_steps == 1
    limit, unqueued, queued = cliff_slo(model, output_len, input_len, SIM_SPEED)

    runner = lab.run("slo_search.yml", slo=[{"metric": "p99_ttft_ms", "max": limit}], **SEARCH_VARS)
    assert runner.status == "successful", tail(runner)

    # Same server before and after: same pid and start time, alive, and nothing stopped or started it.
    after = lab.server()
    assert (after["pid"], after["started_at"]) == (before["pid"], before["started_at"])
    assert alive(after["pid"]) and lab.healthy()
    ran = actions_run(runner)
    assert "sglang_server:stopped" not in ran and "sglang_slo_search" in ran
    starts = [e for e in runner.events if e.get("event") == "runner_on_ok"
              and action_name(e["event_data"]) == "sglang_server:started"]
    assert all(not e["event_data"]["res"].get("changed") for e in starts)
    assert not (lab.run_dir / "sglang.lock").exists()

    # The answer: within one bisection step (the tolerance) of the cap.
    lines = (lab.work / "results" / "slo_search.jsonl").read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    search = record["slo_search"]
    assert abs(search["answer"] - model.max_running_requests) <= SEARCH["tolerance"], (limit, search["probes"])
    assert search["outcome"] == "bracketed" and search["bounded"] is True and search["synthetic"] is True
    assert search["bracket"][1] - search["bracket"][0] <= SEARCH["tolerance"]
    # Sharper: the cap lies in the final bracket [highest passing, lowest failing).
    assert search["bracket"][0] <= model.max_running_requests < search["bracket"][1], search["bracket"]
    assert search["steps"] <= sglang_slo.max_probes(SEARCH["low"], SEARCH["high"], SEARCH["tolerance"], True)
    assert search["steps"] == len(search["probes"]) == len(record["points"])
    assert search["slo"] == [{"metric": "p99_ttft_ms", "bound": "max", "limit": float(limit)}]
    assert search["tier"] == record["tier"] == TIER and record["kind"] == "slo_search"
    assert record["status"] == "success" and record["target_is_simulator"] is True
    # Each probe: one bench_serving point at its concurrency, the verdict from its own p99 TTFT,
    # and on the expected side of the cliff.
    for probe, point in zip(search["probes"], record["points"], strict=True):
        assert point["concurrency"] == probe["concurrency"] == probe["value"]
        assert point["status"] == "ok" and point["completed"] == point["num_prompts"] == PROBE_PROMPTS
        assert "withheld_percentiles" not in point and point["samples"]["ttft"] == PROBE_PROMPTS
        value = probe["metrics"]["p99_ttft_ms"]
        assert probe["met"] is (value <= limit)
        assert probe["met"] is (probe["value"] <= model.max_running_requests), (probe, unqueued, queued)
    # The controller has the same line.
    fetched = lab.root / "controller-results" / lab.host / "slo_search.jsonl"
    assert fetched.read_text().splitlines() == lines

    # A bad SLO is refused before the lock, and the server is left alone.
    refused = lab.run("slo_search.yml", slo=[{"metric": "p99_ttft", "max": 5}], **SEARCH_VARS)
    assert refused.status == "failed"
    assert "'p99_ttft' is not a metric of bench_serving's result" in final_failure(refused)
    assert "sglang_server_lock" not in actions_run(refused)
    assert lab.server()["pid"] == before["pid"] and lab.healthy()
    assert len((lab.work / "results" / "slo_search.jsonl").read_text().splitlines()) == 1


def server_argv(lab):
    """The running server's arguments after ``-m sglang_sim.launch_server``, from its /proc command line."""
    import psutil

    for proc in psutil.Process(lab.server()["pid"]).children(recursive=True):
        cmdline = proc.cmdline()
        if "sglang_sim.launch_server" in cmdline:
            return cmdline[cmdline.index("sglang_sim.launch_server") + 1:]
    raise AssertionError("no simulator process under the recorded server")
