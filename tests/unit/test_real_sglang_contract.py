"""Contract tests: the project's own decisions replayed on what REAL SGLang 0.5.17 did on an H200.

tests/fixtures/real-sglang/0.5.17-h200-tp1/ is what `make real-gpu-check` (tools/device/) recorded
on the lent H200 with a 2-layer random-weight Llama (docs/real-sglang.md): the playbooks' output,
the server logs, the ledger, bench_serving's raw JSONL, and a timeline of the endpoints, the GPU
memory and the process tree sampled every 0.2 s. Phases a and b ran back to back on one machine
(the top folder); phase-c and phase-d ran later, each on a fresh machine.

Nothing here talks to a server. Each test feeds recorded bytes through today's code - the ledger
validation, the lying-point rules, the crash catalog, the failure decision and its closing message,
the ready-wait's log follower and health poller, the provenance, the verified stop, the
preflight - and compares its answer with what the recording says happened, so a change to that
code that would decide differently on real SGLang fails here.
"""

from __future__ import annotations

import datetime
import gzip
import io
import json
import re
import time
from pathlib import Path

import pytest
import sglang_bench_points as points
import sglang_crash
import sglang_failure
import sglang_ledger as ledger
import sglang_preflight
import sglang_process
import sglang_provenance
import sglang_ready
import yaml
from helpers.paths import FIXTURES, REPO
from helpers.recordings import playbook_tasks, printed_by, replay_stop, shown_msg, stopped_entries, tasks

REC = FIXTURES / "real-sglang" / "0.5.17-h200-tp1"
LOGS = REC / "work" / "logs"
CATALOG = sglang_crash.compile_catalog(
    yaml.safe_load((REPO / "data" / "crash_signatures.yml").read_text())
)


@pytest.fixture
def utc(monkeypatch):
    """The device's local time: SGLang stamps its log lines in it, and it was UTC there."""
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def records(folder=REC):
    return [json.loads(line) for line in (folder / "work" / "results" / "ledger.jsonl").read_text().splitlines()]


def timeline(folder=REC):
    # tools/device/record.py writes timeline.jsonl; it is committed gzipped (a tenth of the size), since
    # the whole working tree travels to the device with the kit, under the carry's 64 MiB.
    text = gzip.decompress((folder / "timeline.jsonl.gz").read_bytes()).decode()
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def log_of(record):
    """The kept server log of ``record``'s start: the rotated log (tiny-chunk.log.N) whose first
    stamped line is the first one at or after the record's server start."""
    started = sglang_process.parse_iso(record["launch"]["server"]["started_at"])
    name = Path(record["launch"]["server"]["log"]).name
    candidates = []
    for path in LOGS.glob(name + "*"):
        first = next(t for t in map(sglang_ready.line_time, path.read_text(errors="replace").splitlines()) if t)
        if first >= started:
            candidates.append((first, path))
    return min(candidates)[1]


def expected_failure_class(tier):
    """The tier's expected_failure_class: data/tiers.yml, with the inventory's tiers over it."""
    catalog = dict(yaml.safe_load((REPO / "data" / "tiers.yml").read_text())["tiers"])
    inventory = yaml.safe_load((REPO / "inventory" / "h200-device.yml").read_text())
    catalog.update(inventory["all"]["children"]["sglang_nodes"]["vars"].get("sglang_launch_extra_tiers", {}))
    return (catalog.get(tier) or {}).get("expected_failure_class")


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


def test_the_recorded_server_info_gives_the_records_model_and_target():
    """/server_info as real SGLang answered it, through today's provenance: the record's model
    block, real SGLang (not the simulator), the version the record names. A dead server (the
    start-up crash, the SIGKILLed scheduler) did not answer: its model is the launch's, and its argv
    still says real SGLang."""
    body = (REC / "server_info.json").read_bytes()
    info, reason = sglang_provenance.fetch_server_info("127.0.0.1", 30000, opener=lambda url, timeout: io.BytesIO(body))
    assert reason is None and info["version"] == "0.5.17"
    for record in records():
        answered = info if record["server_info"] is not None else None
        argv = record["launch"]["argv"]
        model = sglang_provenance.model_from(answered, argv[argv.index("--model") + 1])
        assert model == record["model"], record["record_id"]
        assert sglang_provenance.target_is_simulator(answered, argv) is record["target_is_simulator"] is False
        if answered:
            assert answered["version"] == record["server_info"]["version"] == record["versions"]["sglang"]
    assert [r["server_info"] is None for r in records()] == [False, False, True, False, True]


def test_the_server_logs_give_the_recorded_startup_phases(utc):
    """Each start's kept log through today's log follower (its phase marks) and startup_phases,
    from the recorded server start to the ready the record's total implies: the phases the ledger
    holds. A start that never got ready (tiny-nomem) has no warm-up and no total."""
    for record in records():
        recorded = record["launch"]["startup_phases"]
        follower = sglang_ready.LogFollower(str(log_of(record)), CATALOG)
        while follower.poll():
            pass
        started = sglang_process.parse_iso(record["launch"]["server"]["started_at"])
        ready = started + recorded["total"] if "total" in recorded else None
        phases = sglang_ready.startup_phases(follower.state["marks"], started_at=started, ready_at=ready)
        assert phases == recorded, (record["tier"], record["record_id"])
        if ready is not None:
            assert 40 <= phases["total"] <= 90 and phases["init"] >= 30  # imports dominate a tiny model's start


# --------------------------------------------------------------------------- a point that cannot lie


def test_the_oversized_point_fails_from_the_raw_result_and_the_server_log(utc):
    """bench_serving said 16 of 16 completed; its raw result and the server log's ``[http_server]
    Error`` lines inside the point's window, through today's rules, fail the point exactly as the
    ledger recorded it."""
    record = records()[3]
    (point,) = record["points"]
    raw_file = REC / "work" / "results" / "raw" / record["run_id"] / Path(point["output_file"]).name
    raw = json.loads(raw_file.read_text().splitlines()[-1])
    assert raw["completed"] == point["num_prompts"] and raw["mean_ttft_ms"] == 0  # what bench_serving claimed
    window = tuple(datetime.datetime.fromisoformat(point[key]).timestamp() for key in ("started_at", "ended_at"))
    errors = points.server_errors_by_window(log_of(record).read_text(errors="replace"), {"point": window})["point"]
    rebuilt = points.point_from_result(raw, point["concurrency"], point["repeat"], point["num_prompts"], errors)
    assert rebuilt["status"] == point["status"] == "failed"
    assert rebuilt["failure"] == point["failure"]
    assert rebuilt["failure"]["class"] == "streamed_error"
    # The numbers alone already fail it; the log's lines are one more signal.
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
    lines = (LOGS / log).read_text(errors="replace").splitlines()
    got = sglang_crash.classify_outcome(CATALOG, lines)
    assert got["outcome"] == outcome, (log, got["report"])
    if crash_class:
        assert got["report"]["crash_class"] == crash_class
        assert got["report"]["remedy"]


def closing_message(output):
    """The failed experiment's closing message (the msg of its last fatal result), line by line."""
    block = output[output.rindex("FAILED! =>"):]
    return yaml.safe_load("\n".join(line[4:] for line in block.splitlines()[1:] if line.startswith("    ")))["msg"]


@pytest.mark.parametrize(
    ("output", "index", "step_task", "log"),
    [
        ("exp_nomem.out", 2, ("Fail with the classified crash", "wait_ready"), "tiny-nomem.log"),
        ("exp_lie.out", 3, ("Fail the benchmark when a point failed", "benchmark"), None),
        ("exp_kill.out", 4, ("Fail the benchmark when a point failed", "benchmark"), "tiny-chunk.log.1"),
    ],
)
def test_each_failure_is_decided_and_reported_as_recorded(output, index, step_task, log):
    """Each failed run, from what the rescue had (the server's log through the crash catalog, the
    record's points), through today's decide_failure: the failure the ledger holds. Its closing
    message through today's failure_report / ledger_line / restore_line: the one the run printed,
    the restored pid and the ledger path taken from it."""
    record = records()[index]
    name, step = step_task
    crash = None
    if log:
        crash = sglang_crash.classify_outcome(CATALOG, (LOGS / log).read_text(errors="replace").splitlines())["report"]
    failure = sglang_failure.decide_failure(
        points=record["points"], task={"name": name, "tags": [f"sglang_experiment_{step}"]}, crash=crash)
    kept = record["failure"]
    for key in ("class", "step", "message", "crash_line_number", "signals"):
        assert failure.get(key) == kept.get(key), key
    if crash:
        assert failure["remedy"] and failure["explanation"]

    text = (REC / output).read_text()
    said = closing_message(text).splitlines()
    restored = re.fullmatch(r"restore: tier (\S+) runs again, pid (\d+)", said[-1])
    ledger_path = re.match(r"ledger: (\S+), record ", said[-2]).group(1)
    expected = expected_failure_class(record["tier"])
    today = sglang_failure.failure_report(
        record["tier"], failure["step"], failure["class"], expected, failure["message"],
        sglang_failure.ledger_line(ledger_path, record),
        sglang_failure.restore_line(True, {"ok": True, "tier": restored[1], "pid": restored[2]}),
    ).splitlines()
    assert today[1:] == said[1:]
    if expected:  # the wording of "as expected" changed since; the decision did not
        head = f"Tier {record['tier']} failed at step '{failure['step']}': {failure['class']} (as expected"
        assert today[0].startswith(head) and said[0].startswith(head)
    else:
        assert today[0] == said[0]


# --------------------------------------------------------------------------- start-up, as the endpoints saw it


def starts(samples):
    """(first index with a process, port-open index, end-of-warm-up index) of each start in a timeline.

    The recorder's probes wait 0.5 s (tools/device/record.py). Once the warm-up is over, 0.5.17's
    /health and /health_generate run a generation before they answer and took longer than that on
    this machine, so the timeline shows "timeout" where the ready-wait (10 s per probe) saw 200:
    the warm-up ends at the first health answer that is not a 503.
    """
    found, born, opened = [], None, None
    for i, sample in enumerate(samples):
        if not sample["procs"]:
            born = opened = None
            continue
        born = i if born is None else born
        health = (sample.get("http") or {}).get("/health")
        if sample["port_open"] and opened is None and health == 503:
            opened = i
        elif opened is not None and sample["port_open"] and health != 503:
            found.append((born, opened, i))
            born = opened = None
        if not sample["port_open"]:
            opened = None
    return found


RECORDED_ANSWER = {200: ("ready", 200), 503: ("starting", 503), 404: ("missing", 404)}


def test_the_health_poller_is_not_ready_before_real_sglangs_warmup_ends():
    """Every recorded start's endpoint answers, look by look from the process's first sample, fed to
    today's HealthPoller on the paths the ready-wait probes: the port closed for tens of seconds
    while SGLang loads ("down"), then /health and /health_generate 503 during the warm-up while
    /model_info and /v1/models already answer 200. It is ready at the end of the warm-up, not one
    look earlier."""
    samples = timeline()
    found = starts(samples)
    assert len(found) >= 5
    for born, opened, warm in found:
        assert opened - born > 100  # > 20 s of a running process with nothing listening
        first = samples[opened]["http"]
        assert first["/model_info"] == 200 and first["/v1/models"] == 200  # what a wrong path would take
        looks = samples[born:warm] + [{"port_open": True, "http": {p: 200 for p in sglang_ready.DEFAULT_HEALTH_PATHS}}]

        taken = []

        def prober(url, timeout, looks=looks, seen=taken):
            sample = looks[min(len(seen), len(looks) - 1)]
            seen.append(url)
            answer = (sample.get("http") or {}).get(url[url.index("/", len("http://")):])
            return RECORDED_ANSWER.get(answer, ("down", None)) if sample["port_open"] else ("down", None)

        poller = sglang_ready.HealthPoller("127.0.0.1", 30000, interval=0, prober=prober)
        poller._run()  # the poller's own loop, in this thread: it returns at its first "ready"
        assert poller.status == "ready" and poller.probes == len(looks), (opened, warm, poller.probes)


def test_the_ready_wait_is_not_ready_during_the_real_warmup(tmp_path):
    samples = timeline()
    _, opened, warm = starts(samples)[0]
    # What the endpoint said at each look: the recorded 503s, then ready (as the ready-wait saw it).
    answers = [("starting", 503) for _ in samples[opened:warm]] + [("ready", 200)]
    probes = []

    def prober(url, timeout):
        probes.append(url)
        return answers[min(len(probes) - 1, len(answers) - 1)]

    text = (LOGS / "baseline.log").read_text(errors="replace")
    path = tmp_path / "baseline.log"
    path.write_text(text[: text.index("The server is fired up")])  # the log as it stood while it started
    result = sglang_ready.wait_ready(
        log_path=str(path), catalog=CATALOG, is_alive=lambda: True, host="127.0.0.1", port=1, deadline_s=60,
        interval=0.01, linger_s=0, prober=prober,
    )
    assert result["outcome"] == "ready" and result["report"] is None
    assert len(probes) >= len(answers)  # every 503 of the warm-up was seen first
    assert {"weights_begin", "weights_end", "kv_cache_end", "http_up"} <= set(result["marks"])


# --------------------------------------------------------------------------- the verified stop


@pytest.mark.parametrize(("folder", "name"), [("phase-c", "stop_after_traffic.out"), ("phase-d", "stop_d.out")])
def test_the_verified_stop_of_real_sglang_replayed_takes_under_a_second(folder, name):
    """The recorded stop's processes, each doing what it did on the SIGTERM (the scheduler and the
    detokenizer exit; SGLang's main process sleeps 5 s "before crash diagnostics", the wrapper traps
    TERM), through today's stop_processes with the role's settings: the same signals and outcomes,
    and the main process is killed once the GPU workers are gone, well under a second after the
    SIGTERM - not after its 5 s sleep or the 30 s grace."""
    shown = "sglang_server : Show what the stop did"
    (body,) = [b for n, _, b in tasks((REC / folder / name).read_text()) if n == shown]
    msg = shown_msg(body)
    entries = stopped_entries(msg)
    took, gone = map(float, re.search(r"took ([0-9.]+) s, the GPU workers were gone after ([0-9.]+) s",
                                      " ".join(msg)).groups())
    assert took <= 1.0
    replayed, timings = replay_stop(entries)
    assert [(p, r["signals"], r["outcome"]) for p, r in replayed.items()] == [
        (e["pid"], e["signals"], e["outcome"]) for e in entries
    ]
    (main,) = [e["pid"] for e in entries if "sglang.launch_server" in e["cmdline"]]
    assert replayed[main]["outcome"] == "killed" and replayed[main].get("after_workers") is True
    assert timings["workers_gone_s"] <= gone + 0.1 and timings["total_s"] <= took


# --------------------------------------------------------------------------- the patches step refused


def test_the_patches_step_is_refused_by_todays_preflight_before_the_stop():
    """What the ml-env answered of FlashInfer (no flashinfer-python distribution: a stand-in),
    through today's preflight: the problem and the message the run ended with. Today's experiment
    playbook checks it in its validate step, before any task of the stop; the recording ran none of
    those, and the server it found kept serving."""
    out = (REC / "phase-d" / "exp_patches_refused_d.out").read_text()
    result = yaml.safe_load("\n".join(line[4:] for line in out[out.index("FAILED! =>"):].splitlines()[1:]
                                      if line.startswith("    ")))
    (recorded,) = result["problems"]
    answered = re.search(r"it is not \((.+?); a stand-in", recorded["message"]).group(1)
    problems = sglang_preflight.flashinfer_problems({"version": None, "error": answered}, {}, [], [])
    assert problems == [recorded]
    assert sglang_preflight.format_problems(problems) == result["msg"]

    today = playbook_tasks("experiment.yml")
    preflight = printed_by(today, "sglang_experiment : Check that the whole experiment can run - baseline")
    stop_tasks = [t for t in today if t.startswith("sglang_server : Stop ")]
    assert preflight and stop_tasks
    assert today.index(preflight) < min(map(today.index, stop_tasks))
    ran = [name for name, _, _ in tasks(out)]
    assert ran[-1].endswith("Check that the whole experiment can run - baseline")
    assert not [name for name in ran if printed_by(stop_tasks, name)]

    summary = (REC / "phase-d" / "summary.txt").read_text()
    line = next(line for line in summary.splitlines() if line.startswith("== exp_patches_refused_d"))
    before, after = re.search(r"server pid (\S+) -> (\S+)", line).groups()
    assert before == after != "none"
    assert (REC / "phase-d" / "health_after_refusal_d.txt").read_text().strip() == "200"
