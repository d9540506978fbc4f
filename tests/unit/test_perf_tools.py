"""The pure helpers behind `make perf`'s end-to-end figure (tools/perf_lifecycle.py), on hand-made records.

Nothing here times anything or starts a process: the figure itself is measured by `make perf` only.
"""

from __future__ import annotations

import calendar
import importlib.util
import time

import pytest
from helpers.paths import REPO

_spec = importlib.util.spec_from_file_location("perf_lifecycle", REPO / "tools" / "perf_lifecycle.py")
perf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(perf)

WORK = "/tmp/lab/work"
STARTED_AT = "2026-12-01T09:35:41+00:00"
START_EPOCH = calendar.timegm((2026, 12, 1, 9, 35, 41, 0, 0, 0))


def point(concurrency, num_prompts, duration, wall_s=5.0):
    return {
        "concurrency": concurrency,
        "repeat": 0,
        "num_prompts": num_prompts,
        "status": "ok",
        "completed": num_prompts,
        "duration": duration,
        "wall_s": wall_s,
        "command": ["/venv/bin/python", f"{WORK}/results/client/sglang_bench_client.py", "--backend", "sglang",
                    "--max-concurrency", str(concurrency), "--warmup-requests", "1", "--output-file",
                    f"{WORK}/results/raw/x/c{concurrency}_r0.jsonl", "--disable-tqdm", "--output-details"],
    }


def record(tier="t03-single-batch-overlap", status="success", points=None, pid=5938):
    return {
        "schema_version": 1,
        "record_id": f"id-{tier}",
        "run_id": f"20261201T093548Z-{tier}",
        "tier": tier,
        "status": status,
        "failure": None if status == "success" else {"class": "dynamo_fp4_jit", "step": "wait_ready",
                                                      "message": "torch._dynamo.exc.Unsupported"},
        "workload": {
            "dataset_name": "random",
            "dataset_path": f"{WORK}/sim-model/synthetic_sharegpt.json",
            "input_len": 32,
            "output_len": 16,
            "random_range_ratio": 1.0,
            "concurrency": [1, 10, 256, 1024],
            "num_prompts": {"multiplier": 1, "floor": 8},
            "request_rate": "inf",
            "seed": 1,
            "warmup": {"requests": 4, "concurrency": 2},
        },
        "points": [point(1, 8, 1.25), point(10, 10, 0.5), point(256, 256, 0.75), point(1024, 1024, 3.0)]
        if points is None else points,
        "model": {"model_path": f"{WORK}/sim-model", "served_model_name": "glm-5", "tp_size": 8},
        "client": {"command_prefix": ["/venv/bin/python", f"{WORK}/results/client/sglang_bench_client.py"]},
        "launch": {"script": f"{WORK}/launch/{tier}.sh",
                   "server": {"pid": pid, "port": 43289, "started_at": STARTED_AT, "tier": tier,
                              "log": f"{WORK}/logs/{tier}.log"}},
    }


SERVER_STATE = {"pid": 5938, "sid": 5938, "pid_create_time": START_EPOCH - 0.06, "started_at": STARTED_AT}
WAIT_STATE = {"server": f"5938@{STARTED_AT}", "progress": {"health": "ready", "health_code": 200},
              "updated_at": START_EPOCH + 4.09}


# --- parse_time ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (STARTED_AT, START_EPOCH),
        ("2026-12-01T09:35:41Z", START_EPOCH),
        ("2026-12-01T09:35:41.250000Z", START_EPOCH + 0.25),
        ("2026-12-01T11:35:41+02:00", START_EPOCH),
        ("2026-12-01T09:35:41", START_EPOCH),
    ],
)
def test_parse_time(text, expected):
    assert perf.parse_time(text) == pytest.approx(expected)


@pytest.mark.parametrize("text", ["", None, "yesterday", "2026-12-01"])
def test_parse_time_rejects(text):
    with pytest.raises(ValueError):
        perf.parse_time(text)


# --- the ledger record ----------------------------------------------------------------------------------------

def test_ledger_records_skip_torn_and_non_object_lines():
    text = '{"tier": "baseline"}\n{"tier": "t03", "points": [\n[1, 2]\n\n{"tier": "t03"}\n'
    assert perf.ledger_records(text) == [{"tier": "baseline"}, {"tier": "t03"}]


def test_measured_record_is_the_latest_of_the_tier():
    older, newer = record(), record()
    newer["record_id"] = "newer"
    assert perf.measured_record([record("baseline"), older, newer, record("baseline")],
                                "t03-single-batch-overlap")["record_id"] == "newer"


def test_measured_record_refuses_a_failed_run_a_missing_tier_and_no_points():
    with pytest.raises(ValueError, match="dynamo_fp4_jit at wait_ready"):
        perf.measured_record([record(status="failed")], "t03-single-batch-overlap")
    with pytest.raises(ValueError, match="no ledger record"):
        perf.measured_record([record("baseline")], "t03-single-batch-overlap")
    with pytest.raises(ValueError, match="no points"):
        perf.measured_record([record(points=[])], "t03-single-batch-overlap")


# --- traffic ------------------------------------------------------------------------------------------------

def test_traffic_is_the_sum_of_the_points_durations():
    assert perf.traffic_seconds(record()["points"]) == pytest.approx(1.25 + 0.5 + 0.75 + 3.0)


def test_traffic_from_bench_serving_result_objects():
    results = [{"max_concurrency": 1, "duration": 1.5, "completed": 8}, {"max_concurrency": 10, "duration": 0.25}]
    assert perf.traffic_seconds(results) == pytest.approx(1.75)


@pytest.mark.parametrize("duration", [None, "1.0", -0.1, True])
def test_traffic_refuses_a_point_without_a_valid_duration(duration):
    points = record()["points"]
    points[2]["duration"] = duration
    with pytest.raises(ValueError, match="c=256"):
        perf.traffic_seconds(points)


def test_traffic_refuses_no_points():
    with pytest.raises(ValueError):
        perf.traffic_seconds([])


def test_warmup_seconds_are_the_records_rounds_and_zero_without_a_warmup():
    rounds = {"seconds": 7.25, "per_level": [{"concurrency": 1, "requests": 4, "seconds": 1.5}]}
    assert perf.warmup_seconds({**record(), "warmup": rounds}) == pytest.approx(7.25)
    assert perf.warmup_seconds(record()) == 0.0  # no warm-up ran


@pytest.mark.parametrize("seconds", [None, "7", -1.0, True])
def test_warmup_seconds_refuse_a_warmup_without_valid_seconds(seconds):
    with pytest.raises(ValueError, match="warm-up"):
        perf.warmup_seconds({**record(), "warmup": {"requests": 4, "seconds": seconds}})


def test_quality_seconds_are_both_passes_and_zero_without_the_check():
    block = {"status": "ok", "seconds": {"single": 4.0, "batch": 0.36}}
    assert perf.quality_seconds({**record(), "quality": block}) == pytest.approx(4.36)
    assert perf.quality_seconds({**record(), "quality": {"seconds": {"single": 1.5, "batch": None}}}) == 1.5
    assert perf.quality_seconds(record()) == 0.0  # the check was turned off


@pytest.mark.parametrize("seconds", [None, {"single": "4"}, {"single": -1.0}, {"batch": True}])
def test_quality_seconds_refuse_a_check_without_valid_seconds(seconds):
    with pytest.raises(ValueError, match="quality"):
        perf.quality_seconds({**record(), "quality": {"status": "ok", "seconds": seconds}})


# --- load -----------------------------------------------------------------------------------------------------

def test_load_is_pid_creation_to_the_ready_waits_result():
    load, sources = perf.record_load_seconds(record(), SERVER_STATE, WAIT_STATE)
    assert load == pytest.approx(4.15)
    assert sources == {"start": "server.json pid_create_time", "ready": "wait_ready.json updated_at"}


def test_load_falls_back_to_the_records_started_at_for_another_servers_state():
    other = dict(SERVER_STATE, pid=777, pid_create_time=START_EPOCH - 100)
    load, sources = perf.record_load_seconds(record(), other, WAIT_STATE)
    assert load == pytest.approx(4.09)
    assert sources["start"].startswith("ledger launch.server.started_at")


def test_load_refuses_a_ready_wait_of_another_server_or_not_ready():
    with pytest.raises(ValueError, match="does not belong"):
        perf.record_load_seconds(record(), SERVER_STATE, dict(WAIT_STATE, server=f"9999@{STARTED_AT}"))
    with pytest.raises(ValueError, match="does not belong"):
        perf.record_load_seconds(record(), SERVER_STATE, None)
    with pytest.raises(ValueError, match="does not say ready"):
        perf.record_load_seconds(record(), SERVER_STATE, dict(WAIT_STATE, progress={"health": "loading"}))
    with pytest.raises(ValueError, match="before start"):
        perf.record_load_seconds(record(), SERVER_STATE, dict(WAIT_STATE, updated_at=START_EPOCH - 1))


def test_log_ready_epoch_reads_the_fired_up_line_in_local_time():
    log = ("[2026-12-01 09:35:42 TP0] Load weight begin. avail mem=94.44 GB\n"
           "[2026-12-01 09:35:44] The server is fired up and ready to roll!\n")
    assert perf.log_ready_epoch(log) == time.mktime((2026, 12, 1, 9, 35, 44, 0, 0, -1))
    assert perf.log_ready_epoch("[2026-12-01 09:35:42 TP0] Load weight begin.\n") is None


# --- overhead -------------------------------------------------------------------------------------------------

def test_overhead_is_wall_minus_load_minus_traffic():
    assert perf.overhead_seconds(57.0, 4.15, 5.5) == pytest.approx(47.35)
    assert perf.cycle_figure(57.0, 4.15, 5.5) == {"wall_s": 57.0, "load_s": 4.15, "traffic_s": 5.5,
                                                  "overhead_s": 47.35}


def test_overhead_on_the_hand_made_record():
    load, _ = perf.record_load_seconds(record(), SERVER_STATE, WAIT_STATE)
    figure = perf.cycle_figure(30.0, load, perf.traffic_seconds(record()["points"]))
    assert figure["overhead_s"] == pytest.approx(30.0 - 4.15 - 5.5, abs=1e-3)


@pytest.mark.parametrize(("wall", "load", "traffic"), [(10, 6, 5), (-1, 0, 0), (10, None, 1), (10, 1, -1)])
def test_overhead_refuses_impossible_inputs(wall, load, traffic):
    with pytest.raises(ValueError):
        perf.overhead_seconds(wall, load, traffic)


# --- the anchor's settings and events -------------------------------------------------------------------------

def test_bench_settings_are_the_records():
    settings = perf.bench_settings(record())
    assert settings["points"] == [(1, 8), (10, 10), (256, 256), (1024, 1024)]
    assert settings["dataset_path"] == f"{WORK}/sim-model/synthetic_sharegpt.json"
    assert (settings["input_len"], settings["output_len"], settings["range_ratio"]) == (32, 16, 1.0)
    assert (settings["request_rate"], settings["seed"], settings["tokenizer"]) == ("inf", 1, f"{WORK}/sim-model")
    assert (settings["warmup_requests"], settings["output_details"]) == (1, True)
    assert settings["python"] == "/venv/bin/python"


def test_bench_settings_refuse_points_the_workload_does_not_make():
    bad = record(points=[point(10, 20, 0.5)])
    with pytest.raises(ValueError, match="not the workload"):
        perf.bench_settings(bad)


def test_bench_settings_send_what_a_sized_point_sent():
    # A point short of its window was run again with more prompts: the anchor sends those.
    sized = point(10, 62, 0.6)
    sized["sized"] = {"first": {"num_prompts": 10, "duration": 0.1}, "num_prompts": 62}
    settings = perf.bench_settings(record(points=[point(1, 8, 1.0), sized]))
    assert settings["points"][:2] == [(1, 8), (10, 62)]
    # Both runs of the sized point were traffic.
    assert perf.traffic_seconds([point(1, 8, 1.0), sized]) == pytest.approx(1.0 + 0.6 + 0.1)
    # The window's min_requests raises the plan itself.
    workload = dict(record()["workload"], measurement={"min_requests": 20})
    assert perf.bench_settings(dict(record(points=[point(1, 20, 1.0)]), workload=workload))["points"][0] == (1, 20)
    with pytest.raises(ValueError, match="not the workload"):
        perf.bench_settings(record(points=[point(1, 20, 1.0)]))


def test_bench_settings_send_what_a_pinned_point_sent():
    # A point that started from the count the host kept for it (an earlier run sent 18) planned 10.
    pinned = dict(point(10, 18, 0.6), pinned={"planned": 10, "num_prompts": 18})
    assert perf.bench_settings(record(points=[point(1, 8, 1.0), pinned]))["points"][:2] == [(1, 8), (10, 18)]
    # Pinned and then sized anew: its first run was the pinned count.
    resized = dict(point(10, 30, 0.6), pinned={"planned": 10, "num_prompts": 18},
                   sized={"first": {"num_prompts": 18, "duration": 0.2}, "num_prompts": 30})
    assert perf.bench_settings(record(points=[point(1, 8, 1.0), resized]))["points"][:2] == [(1, 8), (10, 30)]
    with pytest.raises(ValueError, match="did not start at the count"):
        perf.bench_settings(record(points=[dict(point(10, 20, 0.6), pinned={"planned": 10, "num_prompts": 18})]))
    with pytest.raises(ValueError, match="not the workload"):
        perf.bench_settings(record(points=[dict(point(10, 18, 0.6), pinned={"planned": 12, "num_prompts": 18})]))


def test_num_prompts_and_client_flags():
    assert [perf.num_prompts_for(c, 1, 8) for c in (1, 10, 256)] == [8, 10, 256]
    assert perf.num_prompts_for(10, 2, 10) == 20
    assert perf.client_flags(["x", "--warmup-requests"]) == {"warmup_requests": None, "output_details": False}


def test_inventory_mismatches():
    inventory = {"sglang_bench_dataset_name": "random",
                 "sglang_bench_dataset_path": "{{ sglang_lab_work_dir }}/sim-model/synthetic_sharegpt.json",
                 "sglang_bench_input_len": 32, "sglang_bench_output_len": 16,
                 "sglang_bench_num_prompts_multiplier": 1, "sglang_bench_num_prompts_floor": 8,
                 "sglang_bench_warmup_requests": 4, "sglang_bench_concurrency": None}
    assert perf.inventory_mismatches(record()["workload"], inventory, WORK) == []
    assert perf.inventory_mismatches(record()["workload"], dict(inventory, sglang_bench_input_len=64), WORK) == [
        ("input_len", 64, 32)]


def test_anchor_events_and_load():
    # What tools/perf_seeds_cycle.sh prints: "<event> <epoch> [detail]".
    stdout = ("begin 100.0\nstop_sent 100.1\nstopped 101.2\nstart 101.25\npid 101.26 4242\nready 105.5\n"
              "point_begin 105.6 1\npoint_end 111.6 1 0\npoint_begin 111.7 10\nnoise line\n"
              "point_end 116.7 10 0\nend 116.8 ok\n")
    events = perf.parse_anchor_events(stdout)
    assert events["pid"] == 4242 and events["outcome"] == "ok"
    assert events["points"] == {1: {"begin": 105.6, "end": 111.6, "rc": 0}, 10: {"begin": 111.7, "end": 116.7,
                                                                                "rc": 0}}
    assert perf.anchor_load_seconds(events) == pytest.approx(4.25)
    with pytest.raises(ValueError):
        perf.anchor_load_seconds(perf.parse_anchor_events("begin 1.0\nend 2.0 failed\n"))


# --- rounds ---------------------------------------------------------------------------------------------------

def _round(overhead, wall):
    return dict(perf.cycle_figure(wall, 4.0, wall - 4.0 - overhead), record_id=f"r{wall}")


def test_a_side_is_its_median_round_with_every_rounds_overhead():
    rounds = [_round(14.05, 34.0), _round(9.92, 30.0), _round(11.04, 31.0)]
    side = perf.median_side(rounds)
    # The round with the median overhead, whole (its wall, load and record belong together).
    assert side["record_id"] == "r31.0" and side["overhead_s"] == pytest.approx(11.04)
    assert side["overhead_median_s"] == pytest.approx(11.04)
    assert side["overheads_s"] == [14.05, 9.92, 11.04] and side["rounds"] == 3


def test_an_even_count_shows_the_lower_middle_round_and_the_true_median():
    side = perf.median_side([_round(12.0, 33.0), _round(9.0, 30.0)])
    assert side["record_id"] == "r30.0"
    assert side["overhead_median_s"] == pytest.approx(10.5)


def test_one_round_is_its_own_median_and_no_round_is_an_error():
    assert perf.median_side([_round(9.5, 30.0)])["overhead_median_s"] == pytest.approx(9.5)
    with pytest.raises(ValueError, match="no rounds"):
        perf.median_side([])


def test_an_ab_is_read_round_by_round():
    _ab_spec = importlib.util.spec_from_file_location("perf_ab", REPO / "tools" / "perf_ab.py")
    ab = importlib.util.module_from_spec(_ab_spec)
    _ab_spec.loader.exec_module(ab)
    summary = ab.paired_summary([12.26, 11.89, 12.71], [11.45, 10.46, 11.65])
    assert summary["before_median_s"] == pytest.approx(12.26) and summary["after_median_s"] == pytest.approx(11.45)
    assert summary["differences_s"] == [0.81, 1.43, 1.06]
    assert summary["difference_median_s"] == pytest.approx(1.06)
    with pytest.raises(ValueError, match="same number of rounds"):
        ab.paired_summary([1.0], [1.0, 2.0])
