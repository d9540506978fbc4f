"""Contract tests: the project's own decisions replayed on what REAL SGLang 0.5.17 did on an H200.

tests/fixtures/real-sglang/0.5.17-h200-tp1/ is what `make real-gpu-check` (tools/device/) recorded
on the lent H200 with a 2-layer random-weight Llama (docs/real-sglang.md): the playbooks' output,
the server logs, the ledger, bench_serving's raw JSONL, and a timeline of the endpoints, the GPU
memory and the process tree sampled every 0.2 s. Phases a and b ran back to back on one machine
(the top folder); phase-c and phase-d ran later, each on a fresh machine.

Nothing here talks to a server: CI replays the recording, so a change to the ledger builder, the
crash catalog, the ready-wait or the lying-point rules that would decide differently on real
SGLang fails here.
"""

from __future__ import annotations

import datetime
import json
import re
from pathlib import Path

import pytest
import sglang_bench_points as points
import sglang_crash
import sglang_ledger as ledger
import sglang_ready
import yaml
from helpers.paths import FIXTURES, REPO

REC = FIXTURES / "real-sglang" / "0.5.17-h200-tp1"
CATALOG = sglang_crash.compile_catalog(
    yaml.safe_load((REPO / "data" / "crash_signatures.yml").read_text())
)


def records(folder=REC):
    return [json.loads(line) for line in (folder / "work" / "results" / "ledger.jsonl").read_text().splitlines()]


def timeline(folder=REC):
    return [json.loads(line) for line in (folder / "timeline.jsonl").read_text().splitlines() if line.strip()]


def log_epoch(line):
    return datetime.datetime.strptime(line[1:20], "%Y-%m-%d %H:%M:%S").timestamp()


# --------------------------------------------------------------------------- the ledger


def test_every_real_record_is_valid_and_says_what_happened():
    got = [
        (r["tier"], r["status"], (r["failure"] or {}).get("class"), (r["failure"] or {}).get("step"))
        for r in records()
    ]
    assert got == [
        ("baseline", "success", None, None),
        ("tiny-chunk", "success", None, None),
        ("tiny-nomem", "failed", "kv_cache_no_memory", "wait_ready"),
        ("tiny-chunk", "failed", "streamed_error", "benchmark"),
        ("tiny-chunk", "failed", "scheduler_killed", "benchmark"),
    ]
    for record in records() + records(REC / "phase-c"):
        assert ledger.validate_record(record) == [], record["record_id"]
        assert record["target_is_simulator"] is False
        assert record["versions"]["sglang"] == "0.5.17"
        assert record["git_revision"]  # the project's own, carried with the kit (no .git there)


def test_the_raw_bench_jsonl_rebuilds_every_recorded_point():
    raw_root = REC / "work" / "results" / "raw"
    checked = 0
    withheld_seen = set()
    for record in records():
        for point in record["points"]:
            raw = raw_root / record["run_id"] / Path(point["output_file"]).name
            if not raw.exists():
                # The scheduler was SIGKILLed before bench_serving wrote a result: the client's error.
                assert point["status"] == "failed" and point["failure"]["class"] == "server_unreachable"
                continue
            result = json.loads(raw.read_text().splitlines()[-1])
            rebuilt = points.point_from_result(result, point["concurrency"], point["repeat"], point["num_prompts"])
            withheld = rebuilt.get("withheld_percentiles") or {}
            for key in points.METRIC_KEYS:
                if key in withheld:
                    # Recorded before percentiles needed a sample that supports them: today's code withholds
                    # the same value, with the sample it had (16-32 requests: no p99).
                    assert rebuilt[key] is None and withheld[key]["value"] == point[key], key
                    assert withheld[key]["n"] < withheld[key]["min_n"]
                    if point["status"] == "ok":  # a lying point's empty streams have no gap at all
                        withheld_seen.add(key)
                    continue
                assert rebuilt[key] == point[key], (record["tier"], point["concurrency"], key)
            if point["status"] == "ok":
                assert rebuilt["status"] == "ok"
            checked += 1
    assert checked >= 5
    # c=1 x 16 and c=16 x 32 requests: every p99 withheld, every median of an ok point kept.
    assert {"p99_ttft_ms", "p99_tpot_ms", "p99_e2e_latency_ms"} <= withheld_seen
    assert not any(key.startswith("median_") for key in withheld_seen)


def test_the_server_info_is_recorded_as_the_server_answered():
    answered = json.loads((REC / "server_info.json").read_text())
    record = records()[0]
    assert answered["version"] == "0.5.17" == record["server_info"]["version"]
    assert record["model"]["model_path"] == answered["model_path"] == "/tmp/tiny-llama"


def test_startup_phases_are_recorded_for_every_start():
    for record in records()[:2] + records()[3:]:
        phases = record["launch"]["startup_phases"]
        assert {"init", "weights", "kv_cache", "warmup", "total"} <= set(phases), record["tier"]
        assert 40 <= phases["total"] <= 90 and phases["init"] >= 30  # imports dominate a tiny model's start
    nomem = records()[2]["launch"]["startup_phases"]
    assert "total" not in nomem and "init" in nomem  # it never got ready


# --------------------------------------------------------------------------- a point that cannot lie


def test_bench_serving_called_the_oversized_point_a_success_and_the_ledger_did_not():
    record = records()[3]
    (point,) = record["points"]
    raw_file = REC / "work" / "results" / "raw" / record["run_id"] / Path(point["output_file"]).name
    raw = json.loads(raw_file.read_text().splitlines()[-1])
    assert raw["completed"] == point["num_prompts"] and raw["mean_ttft_ms"] == 0  # what bench_serving claimed
    assert point["status"] == "failed" and point["failure"]["class"] == "streamed_error"
    assert any("mean TTFT is 0" in s for s in point["failure"]["signals"])
    assert any("[http_server] Error" in s and "longer than the model's context length" in s
               for s in point["failure"]["signals"])
    # The rule on its own, from the numbers alone:
    assert points.point_from_result(raw, point["concurrency"], 0, point["num_prompts"])["status"] == "failed"


# --------------------------------------------------------------------------- the crash catalog


@pytest.mark.parametrize(
    ("log", "outcome", "crash_class"),
    [
        ("tiny-nomem.log", "crashed", "kv_cache_no_memory"),
        ("tiny-chunk.log.1", "crashed", "scheduler_killed"),  # SIGKILLed under load
        ("baseline.log", "stopped_by_sigterm", None),  # our own stops: not crashes
        ("tiny-chunk.log", "stopped_by_sigterm", None),
        ("tiny-chunk.log.2", "stopped_by_sigterm", None),
        ("tiny-chunk.log.3", "stopped_by_sigterm", None),
        ("tiny-chunk.log.4", "stopped_by_sigterm", None),
        ("tiny-chunk.log.5", "stopped_by_sigterm", None),
    ],
)
def test_each_real_log_is_classified(log, outcome, crash_class):
    lines = (REC / "work" / "logs" / log).read_text(errors="replace").splitlines()
    got = sglang_crash.classify_outcome(CATALOG, lines)
    assert got["outcome"] == outcome, (log, got["report"])
    if crash_class:
        assert got["report"]["crash_class"] == crash_class
        assert got["report"]["remedy"]


def test_the_start_up_crash_names_its_remedy_and_was_restored():
    out = (REC / "exp_nomem.out").read_text()
    assert "failed at step 'wait_ready': kv_cache_no_memory (as expected, data/tiers.yml)" in out
    assert "Loaded weights leave no GPU memory for the KV cache" in out
    assert re.search(r"restore: tier tiny-chunk runs again, pid \d+", out)
    for name in ("exp_lie.out", "exp_kill.out"):
        assert re.search(r"restore: tier tiny-chunk runs again, pid \d+", (REC / name).read_text()), name


# --------------------------------------------------------------------------- start-up, as the endpoints saw it


def starts(samples):
    """(port-open index, end-of-warm-up index) of each start in a timeline.

    The recorder's probes wait 0.5 s (tools/device/record.py). Once the warm-up is over, 0.5.17's
    /health and /health_generate run a generation before they answer and took longer than that on
    this machine, so the timeline shows "timeout" where the ready-wait (10 s per probe) saw 200:
    the warm-up ends at the first health answer that is not a 503.
    """
    found, opened = [], None
    for i, sample in enumerate(samples):
        health = (sample.get("http") or {}).get("/health")
        if sample["port_open"] and opened is None and health == 503:
            opened = i
        elif opened is not None and sample["port_open"] and health != 503:
            found.append((opened, i))
            opened = None
        if not sample["port_open"]:
            opened = None
    return found


def test_real_sglang_does_not_listen_while_loading_and_health_waits_for_the_warmup():
    samples = timeline()
    assert len(starts(samples)) >= 5
    for opened, warm in starts(samples):
        first = samples[opened]
        # The port opens straight into the warm-up: health 503 while the read-only endpoints answer.
        assert first["http"]["/health"] == 503 and first["http"]["/health_generate"] == 503
        assert first["http"]["/model_info"] == 200 and first["http"]["/v1/models"] == 200
        # Before it opened, for tens of seconds after the process appeared: nothing listened.
        before = [s for s in samples[max(0, opened - 150):opened] if s["procs"]]
        assert before and not any(s["port_open"] for s in before)
        assert samples[warm]["t"] > first["t"]


def test_the_ready_wait_is_not_ready_during_the_real_warmup(tmp_path):
    samples = timeline()
    opened, warm = starts(samples)[0]
    # What the endpoint said at each look: the recorded 503s, then ready (as the ready-wait saw it).
    answers = [("starting", 503) for _ in samples[opened:warm]] + [("ready", 200)]
    probes = []

    def prober(url, timeout):
        probes.append(url)
        return answers[min(len(probes) - 1, len(answers) - 1)]

    text = (REC / "work" / "logs" / "baseline.log").read_text(errors="replace")
    path = tmp_path / "baseline.log"
    path.write_text(text[: text.index("The server is fired up")])  # the log as it stood while it started
    result = sglang_ready.wait_ready(
        log_path=str(path), catalog=CATALOG, is_alive=lambda: True, host="127.0.0.1", port=1, deadline_s=60,
        interval=0.01, linger_s=0, prober=prober,
    )
    assert result["outcome"] == "ready" and result["report"] is None
    assert len(probes) >= len(answers)  # every 503 of the warm-up was seen first
    assert {"weights_begin", "weights_end", "kv_cache_end", "http_up"} <= set(result["marks"])
    assert "ready after 58.3 s" in (REC / "exp_baseline.out").read_text()


# --------------------------------------------------------------------------- the verified stop


@pytest.mark.parametrize(("folder", "name"), [("phase-c", "stop_after_traffic.out"), ("phase-d", "stop_d.out")])
def test_the_verified_stop_of_real_sglang_takes_under_a_second(folder, name):
    out = (REC / folder / name).read_text()
    took = re.search(r"took ([0-9.]+) s, the GPU workers were gone after ([0-9.]+) s", out)
    assert took, out[-2000:]
    assert float(took.group(1)) <= 1.0
    assert "'port 30000: free'" in out and "released=True" in out
    # SGLang's main process was killed in its 5 s diagnostic sleep, not waited for.
    assert "TERM+KILL -> killed: /opt/torch/.venv/bin/python3 -u -m sglang.launch_server" in out
    assert "TERM -> exited-on-term: sglang::scheduler" in out


def test_after_the_stop_nothing_is_left_and_the_gpu_is_free():
    samples = timeline(REC / "phase-d")
    log = (REC / "phase-d" / "work" / "logs" / "baseline.log").read_text().splitlines()
    sigterm = log_epoch(next(line for line in log if "SIGTERM received" in line))
    after = [s for s in samples if s["t"] >= sigterm + 2.0]  # whole-second log stamps: +1 s slack, +1 s stop
    assert after, "the timeline ends before the stop"
    assert all(not s["port_open"] and not s["procs"] for s in after)
    gpu = [s["gpu_mib"][0] for s in after if s.get("gpu_mib")]
    assert gpu and max(gpu) <= 64  # MiB: released


def test_the_patches_step_was_refused_before_the_stop_and_the_server_kept_serving():
    summary = (REC / "phase-d" / "summary.txt").read_text()
    line = next(line for line in summary.splitlines() if line.startswith("== exp_patches_refused_d"))
    before, after = re.search(r"server pid (\S+) -> (\S+)", line).groups()
    assert before == after != "none"
    assert (REC / "phase-d" / "health_after_refusal_d.txt").read_text().strip() == "200"
    out = (REC / "phase-d" / "exp_patches_refused_d.out").read_text()
    assert "The experiment cannot run; nothing was stopped or started" in out
    assert "needs flashinfer-python installed in the ml-env" in out
    assert "sglang_server_stop" not in out and "Stop the running server" not in out
