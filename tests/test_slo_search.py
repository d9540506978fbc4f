"""SLO search (docs/slo-search.md): the bisection of module_utils/sglang_slo.py on synthetic
functions with a known threshold, and module sglang_slo_search through playbooks/slo_search.yml
against ONE live simulator whose threshold follows from its own timing model.

Unit part: a probe is a pure function of the load, so the threshold is known exactly; the answer
must lie within one tolerance below it, the probes must number about log2(range / tolerance),
and the edge cases (low already failing, high still passing, a probe that raises or reports an
error, several SLO entries, a metric the result lacks, a measurement that contradicts the
monotonicity assumption) must come out as documented.

Integration part: a user tier of the SYNTHETIC simulator with --max-running-requests M and
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
import math

import pytest
from ansible.module_utils import sglang_slo
from conftest import REPO, ExperimentLab, actions_run, alive, final_failure, free_port, kill_recorded_sessions, tail

SLO_TTFT = [{"metric": "p99_ttft_ms", "max": 100}]


def threshold_probe(threshold, metric="p99_ttft_ms", limit=100.0, calls=None):
    """A monotone probe: metric = limit * value / threshold (meets the SLO iff value <= threshold)."""

    def probe(value):
        if calls is not None:
            calls.append(value)
        return {"metrics": {metric: limit * value / threshold}}

    return probe


# --------------------------------------------------------------------------- the bisection


@pytest.mark.parametrize(
    ("low", "high", "tolerance", "threshold"),
    [
        (1, 1024, 1, 300),
        (1, 1024, 1, 1),  # the low end is the threshold
        (1, 1024, 1, 1023),  # one below the high end
        (1, 1024, 8, 300),
        (1, 1024, 8, 517),
        (4, 200, 3, 77),
        (1, 2, 1, 1),
        (10, 11, 1, 10),
        (1, 100, 50, 60),
    ],
)
def test_answer_is_within_one_tolerance_of_the_threshold(low, high, tolerance, threshold):
    slo = sglang_slo.parse_slo(SLO_TTFT)
    calls = []
    found = sglang_slo.search(threshold_probe(threshold, calls=calls), slo, low, high, tolerance)
    assert found["outcome"] == sglang_slo.OUTCOME_BRACKETED and found["bounded"] is True
    # The answer met the SLO, the bracket's top did not, and they are at most tolerance apart.
    assert found["answer"] <= threshold < found["answer"] + tolerance
    lo, hi = found["bracket"]
    assert lo == found["answer"] and hi - lo <= tolerance and hi > threshold
    # Probes in order: low, high, then each one strictly inside the bracket known so far.
    assert [p["value"] for p in found["probes"]] == calls
    assert calls[:2] == [low, high]
    assert [p["index"] for p in found["probes"]] == list(range(len(calls)))
    for probe in found["probes"]:
        assert probe["met"] is (probe["value"] <= threshold)
        assert probe["checks"][0]["metric"] == "p99_ttft_ms" and probe["checks"][0]["met"] is probe["met"]
        assert probe["metrics"]["p99_ttft_ms"] == pytest.approx(100.0 * probe["value"] / threshold)
    # About log2(range / tolerance) bisection probes, never more than the plan says.
    steps = found["steps"]
    assert steps == len(calls) <= sglang_slo.max_probes(low, high, tolerance)
    bisecting, log2 = steps - 2, math.log2((high - low) / tolerance)
    assert math.floor(log2) <= bisecting <= math.ceil(log2)
    assert found["warnings"] == [] and found["consistent"] is True


@pytest.mark.parametrize(("low", "high", "tolerance"), [(1, 1024, 1), (1, 100, 7), (3, 17, 2), (5, 6, 1)])
def test_every_threshold_of_a_range_is_found_within_the_planned_probes(low, high, tolerance):
    slo = sglang_slo.parse_slo(SLO_TTFT)
    most = sglang_slo.max_probes(low, high, tolerance)
    longest = 0
    for threshold in range(low, high):
        found = sglang_slo.search(threshold_probe(threshold), slo, low, high, tolerance)
        assert found["answer"] <= threshold < found["answer"] + tolerance, threshold
        longest = max(longest, found["steps"])
    assert longest == most  # the bound is reached, not just respected


def test_the_low_end_already_failing_gives_no_answer_and_says_so():
    calls = []
    found = sglang_slo.search(threshold_probe(3, calls=calls), sglang_slo.parse_slo(SLO_TTFT), 4, 64, 1)
    assert found["answer"] is None and found["bounded"] is False and found["outcome"] == "low_fails"
    assert calls == [4] and found["steps"] == 1
    assert "not met even at the low end 4" in found["reason"] and "p99_ttft_ms <= 100" in found["reason"]


def test_the_high_end_passing_answers_high_not_bounded():
    calls = []
    found = sglang_slo.search(threshold_probe(500, calls=calls), sglang_slo.parse_slo(SLO_TTFT), 1, 64, 1)
    assert found["answer"] == 64 and found["bounded"] is False and found["outcome"] == "high_passes"
    assert calls == [1, 64] and found["bracket"] is None
    assert found["reason"].startswith("not bounded") and "raise high" in found["reason"]


@pytest.mark.parametrize(("threshold", "answer", "outcome"), [(5, 5, "high_passes"), (4, None, "low_fails")])
def test_low_equal_to_high_is_one_probe(threshold, answer, outcome):
    found = sglang_slo.search(threshold_probe(threshold), sglang_slo.parse_slo(SLO_TTFT), 5, 5, 1)
    assert found["answer"] == answer and found["outcome"] == outcome and found["steps"] == 1


def test_a_probe_that_raises_counts_as_not_meeting_and_keeps_its_error():
    """The server falls over above 40 (the probe raises); the SLO alone would allow 50."""
    meets = threshold_probe(50)

    def probe(value):
        if value > 40:
            raise ConnectionRefusedError(f"no server at concurrency {value}")
        return meets(value)

    found = sglang_slo.search(probe, sglang_slo.parse_slo(SLO_TTFT), 1, 64, 1)
    assert found["answer"] == 40 and found["outcome"] == "bracketed"
    raised = [p for p in found["probes"] if p["value"] > 40]
    assert raised
    for entry in raised:
        assert entry["met"] is False and entry["metrics"] == {}
        assert entry["error"]["class"] == sglang_slo.PROBE_RAISED
        message = entry["error"]["message"]
        assert "ConnectionRefusedError" in message and str(entry["value"]) in message
        assert entry["checks"][0]["missing"] is True
    assert all(p["error"] is None for p in found["probes"] if p["value"] <= 40)


def test_a_probe_reporting_an_error_fails_even_with_good_metrics():
    """An incomplete bench_serving point: its latency may look fine, the point does not count."""

    def probe(value):
        error = {"class": "incomplete_point", "message": "completed 7 of 8"} if value == 32 else None
        return {"metrics": {"p99_ttft_ms": 1.0}, "error": error, "concurrency": value}

    found = sglang_slo.search(probe, sglang_slo.parse_slo(SLO_TTFT), 1, 32, 1)
    high = found["probes"][1]
    assert high["value"] == 32 and high["met"] is False and high["checks"][0]["met"] is True
    assert high["error"] == {"class": "incomplete_point", "message": "completed 7 of 8"}
    assert high["detail"] == {"concurrency": 32}
    assert found["answer"] == 31  # everything below 32 passes
    # A bare string error is kept too.
    entry = sglang_slo.run_probe(lambda v: {"metrics": {}, "error": "boom"}, sglang_slo.parse_slo(SLO_TTFT), 3, 0)
    assert entry["met"] is False and entry["error"] == {"class": "probe_failed", "message": "boom"}


def test_every_slo_entry_must_hold_and_each_verdict_is_recorded():
    """TTFT allows up to 30, TPOT up to 20: the answer is 20, and the probes show which failed."""
    slo = sglang_slo.parse_slo(
        [
            {"metric": "p99_ttft_ms", "max": 300},
            {"metric": "median_tpot_ms", "max": 40},
            {"metric": "output_throughput", "min": 5},
        ]
    )

    def probe(value):
        return {"metrics": {"p99_ttft_ms": 10.0 * value, "median_tpot_ms": 2.0 * value, "output_throughput": 100.0}}

    found = sglang_slo.search(probe, slo, 1, 64, 1)
    assert found["answer"] == 20
    for entry in found["probes"]:
        verdicts = {check["metric"]: check["met"] for check in entry["checks"]}
        assert verdicts == {
            "p99_ttft_ms": entry["value"] <= 30,
            "median_tpot_ms": entry["value"] <= 20,
            "output_throughput": True,
        }
    assert any(e["value"] in range(21, 31) for e in found["probes"])  # one probe failed on TPOT alone


def test_a_metric_the_result_lacks_fails_the_probe_with_metric_missing():
    slo = sglang_slo.parse_slo([{"metric": "p90_tpot_ms", "max": 50}])
    found = sglang_slo.search(lambda v: {"metrics": {"p99_tpot_ms": 1.0}}, slo, 1, 8, 1)
    assert found["answer"] is None
    assert found["probes"][0]["error"]["class"] == "metric_missing"
    assert "p90_tpot_ms" in found["probes"][0]["error"]["message"]


def test_probe_metrics_prefer_the_point_and_fall_back_to_the_raw_result():
    slo = sglang_slo.parse_slo([{"metric": "p99_ttft_ms", "max": 1}, {"metric": "p90_tpot_ms", "max": 1}])
    point = {"p99_ttft_ms": 5.0, "p90_tpot_ms": None}
    raw = {"p99_ttft_ms": 9.0, "p90_tpot_ms": 7.0}
    assert sglang_slo.probe_metrics(slo, point, raw) == {"p99_ttft_ms": 5.0, "p90_tpot_ms": 7.0}
    assert sglang_slo.probe_metrics(slo, {}, {"p99_ttft_ms": float("inf")}) == {}


# --------------------------------------------------------------------------- monotonicity


def test_a_confirmation_that_contradicts_the_first_verdict_is_a_warning():
    """Noise near the threshold: 12 passes the first time and fails on confirmation."""
    seen = {}

    def probe(value):
        seen[value] = seen.get(value, 0) + 1
        flaky = value == 12 and seen[value] > 1
        return {"metrics": {"p99_ttft_ms": 500.0 if (value > 12 or flaky) else 50.0}}

    found = sglang_slo.search(probe, sglang_slo.parse_slo(SLO_TTFT), 1, 32, 1, confirm=True)
    assert found["answer"] == 12 and found["probes"][-1]["value"] == 12 and found["probes"][-1]["met"] is False
    assert found["consistent"] is False
    assert len(found["warnings"]) == 1 and "12 met the SLO" in found["warnings"][0]
    assert "not repeatable" in found["warnings"][0]
    assert found["steps"] == sglang_slo.max_probes(1, 32, 1, confirm=True)


def test_a_confirmed_answer_is_consistent():
    found = sglang_slo.search(threshold_probe(12), sglang_slo.parse_slo(SLO_TTFT), 1, 32, 1, confirm=True)
    assert found["answer"] == 12 and found["probes"][-1]["value"] == 12 and found["probes"][-1]["met"] is True
    assert found["warnings"] == [] and found["consistent"] is True
    # Without an answer the low end is measured again.
    found = sglang_slo.search(threshold_probe(2), sglang_slo.parse_slo(SLO_TTFT), 4, 32, 1, confirm=True)
    assert [p["value"] for p in found["probes"]] == [4, 4] and found["answer"] is None


def test_monotonicity_violations_names_a_pass_above_a_failure():
    probes = [
        {"index": 0, "value": 1, "met": True},
        {"index": 1, "value": 8, "met": False},
        {"index": 2, "value": 16, "met": True},
        {"index": 3, "value": 4, "met": True},
    ]
    warnings = sglang_slo.monotonicity_violations(probes)
    assert warnings == [
        "16 met the SLO (probe 2) but the lower 8 did not (probe 1): the SLO is not monotone in the load here"
    ]
    assert sglang_slo.monotonicity_violations(probes[:2] + probes[3:]) == []


# --------------------------------------------------------------------------- the SLO spec and range


def test_parse_slo_reads_latencies_and_throughputs():
    assert sglang_slo.parse_slo({"metric": "p99_ttft_ms", "max": 500}) == [
        {"metric": "p99_ttft_ms", "bound": "max", "limit": 500.0}
    ]
    parsed = sglang_slo.parse_slo(
        [
            {"metric": "median_tpot_ms", "max": "45.5"},  # -e key=value gives strings
            {"metric": "p90_tpot_ms", "max": 60},  # newer bench_serving writes p90s
            {"metric": " mean_e2e_latency_ms ", "max": 0},
            {"metric": "output_throughput", "min": 1000},
        ]
    )
    assert [(p["metric"], p["bound"], p["limit"]) for p in parsed] == [
        ("median_tpot_ms", "max", 45.5),
        ("p90_tpot_ms", "max", 60.0),
        ("mean_e2e_latency_ms", "max", 0.0),
        ("output_throughput", "min", 1000.0),
    ]
    assert sglang_slo.describe_slo(parsed[:1] + parsed[3:]) == "median_tpot_ms <= 45.5, output_throughput >= 1000"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ([], "non-empty list"),
        ("p99_ttft_ms<=5", "non-empty list"),
        ([["p99_ttft_ms", 5]], "slo[0] must be a mapping"),
        ([{"max": 5}], "slo[0] needs a metric name"),
        ([{"metric": "p99_ttft", "max": 5}], "'p99_ttft' is not a metric of bench_serving's result"),
        ([{"metric": "completed", "min": 5}], "'completed' is not a metric"),
        ([{"metric": "p99_ttft_ms"}], "needs exactly one of max or min, got neither"),
        ([{"metric": "p99_ttft_ms", "max": 5, "min": 1}], "needs exactly one of max or min"),
        ([{"metric": "p99_ttft_ms", "min": 5}], "bounded with max (lower is better), not min"),
        ([{"metric": "output_throughput", "max": 5}], "bounded with min (higher is better), not max"),
        ([{"metric": "p99_ttft_ms", "max": -1}], "finite number >= 0"),
        ([{"metric": "p99_ttft_ms", "max": True}], "must be a number"),
        ([{"metric": "p99_ttft_ms", "max": "fast"}], "must be a number"),
        ([{"metric": "p99_ttft_ms", "max": float("nan")}], "finite number"),
        ([{"metric": "p99_ttft_ms", "max": 5, "unit": "ms"}], "unknown key(s) unit"),
        (
            [{"metric": "p99_ttft_ms", "max": 5}, {"metric": "p99_ttft_ms", "max": 6}],
            "slo[1]: p99_ttft_ms max is given twice",
        ),
    ],
)
def test_parse_slo_refuses_with_the_entry_named(spec, message):
    with pytest.raises(sglang_slo.SloError) as caught:
        sglang_slo.parse_slo(spec)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("low", "high", "tolerance", "message"),
    [(0, 8, 1, "low must be an integer >= 1"), (9, 8, 1, "low (9) is above high (8)"),
     (1, 8, 0, "tolerance must be an integer >= 1"), (1, 8.5, 1, "high must be an integer"),
     (True, 8, 1, "low must be an integer")],
)
def test_a_range_that_cannot_be_bisected_is_refused(low, high, tolerance, message):
    with pytest.raises(sglang_slo.SloError, match=message.replace("(", r"\(").replace(")", r"\)")):
        sglang_slo.search(threshold_probe(4), sglang_slo.parse_slo(SLO_TTFT), low, high, tolerance)


# --------------------------------------------------------------------------- one live simulator

INVENTORY = REPO / "inventory" / "local.yml"
TIER = "t92-slo-cliff"
MAX_RUNNING = 11  # the tier's --max-running-requests: the threshold the search must find
SIM_SPEED = 2.0  # simulated time runs 2x faster than wall time (SGLANG_SIM_SPEED)
SEARCH = {"low": 1, "high": 32, "tolerance": 1}
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
    from conftest import REAL_MANIFEST
    from sglang_sim.manifest import load_manifest, parse_server_args
    from sglang_sim.throughput import build_model

    return build_model(parse_server_args(list(launch_argv), load_manifest(REAL_MANIFEST), lambda _message: None))


def cliff_slo(model, output_len, input_len, speed):
    """A p99 TTFT limit between what c <= M and c = M + 1 can give, from the timing model (wall ms).

    c <= M: a request waits at most one iteration (a decode of M requests or a prefill), then its
    prefill: about one decode step plus one prefill of M prompts. c = M + 1 with num_prompts = M + 1
    (the local inventory's multiplier 1): one request waits for a slot, at least output_len - 1
    decode iterations of the batch; bench_serving's p99 of M + 1 TTFTs (numpy's linear percentile)
    carries that wait with weight 0.99 * M - (M - 1). The limit is 60 % of the queued bound, far
    above the unqueued one, so CPU noise (which only adds latency) does not move the verdict.
    """
    m = model.max_running_requests
    unqueued = (model.decode_step_seconds(m) + model.prefill_seconds(m * input_len)) / speed * 1000
    queued_wait = (output_len - 1) * model.decode_step_seconds(1) / speed * 1000
    weight = 0.99 * m - (m - 1)
    queued_p99 = weight * queued_wait
    assert queued_p99 > 4 * unqueued, (queued_p99, unqueued)  # a cliff the search can find
    return round(0.6 * queued_p99), unqueued, queued_p99


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    root = tmp_path_factory.mktemp("slo-search")
    lab = ExperimentLab(root=root, port=free_port(), work=root / "work", inventory=INVENTORY)
    yield lab
    lab.run("stop.yml", sglang_server_lock_force=True)
    kill_recorded_sessions(lab.run_dir)


@pytest.mark.integration
def test_the_search_finds_the_simulators_running_request_cap_on_one_live_server(lab):
    import yaml

    local = yaml.safe_load(INVENTORY.read_text())["all"]["children"]["sglang_nodes"]["vars"]
    output_len, input_len = local["sglang_bench_output_len"], local["sglang_bench_input_len"]
    assert local["sglang_bench_num_prompts_multiplier"] == 1  # num_prompts = c at c = M + 1 (cliff_slo)

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
    assert "sglang_server_stop" not in ran and "sglang_slo_search" in ran
    starts = [e for e in runner.events if e.get("event") == "runner_on_ok"
              and e["event_data"].get("task_action") == "sglang_server_start"]
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
        assert point["status"] == "ok" and point["completed"] == point["num_prompts"] == max(probe["value"], 8)
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
