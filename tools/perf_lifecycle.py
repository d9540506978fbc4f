#!/usr/bin/env python3
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Lifecycle latency: our modules' logic vs an anchor-style bash loop, side by side, on the simulator.

What is measured (each trial starts fresh SYNTHETIC simulator servers, TP8-shaped):

* crash detection: the fatal line (the seeds' torch._dynamo.exc.Unsupported, SGLANG_SIM_FAULT=crash_on_load)
  reaching the log -> the watcher reporting the failure. Target <= 2 s.
* ready detection: the server starting to answer (its "The server is fired up and ready to roll!" line; the
  simulator answers /health_generate 200 from that moment) -> the watcher returning. Target <= 1 s.
* verified stop of a TP8 tree with one scheduler ignoring SIGTERM (SGLANG_SIM_FAULT=ignore_sigterm): stop
  called -> every process of the server gone and the port free. Target <= grace + 1 s, zero survivors.

The ground truth of "when did the line reach the log" is a separate watcher reading the log every 5 ms.
Both sides watch the SAME server at the same time (crash, ready); a stop can only happen once, so each stop
side gets its own server.

Ours: the Python logic of the modules (sglang_ready.wait_ready, sglang_process.find_server_processes /
stop_processes / wait_port_free) called directly, with the modules' default settings; an Ansible task adds
its own start-up time around it (docs/lifecycle.md).

Anchor: the bash loops public harnesses use:
* InferenceX benchmarks/benchmark_lib.sh wait_for_ready: `until curl --silent --fail $endpoint; do kill -0 $pid
  || died; sleep 5; done` (SGLang's own test helper polls similarly);
* InferenceX stop_background_process_tree: capture descendants (pgrep -P), TERM the root, poll it every 1 s up
  to the grace period, then KILL the remaining descendants;
* and the plain `pkill -f <server command line>` + `pgrep` poll every 1 s the seeds did by hand.
The pkill pattern is restricted to this run's port so other simulators on the machine are not touched.

End to end (one experiment cycle: stop old -> start -> ready -> warm-up -> bench -> record), orchestration
overhead per cycle = wall time - the server's load time - the traffic time, in --e2e-rounds rounds (3; each a
baseline run, the measured run, the anchor): each side's figure is its median round, since one cycle on this shared
2-core machine is one noisy sample (the same tree's overhead read 9.9, 11.0 and 14.1 s in three single runs).
Target <= 10 s for the median (issue 24; it was 15 s until 2026-12-06). Traffic is what the server spends
serving the cycle's requests: the benchmark points and, on our side, the warm-up rounds (one per
measured concurrency, data/benchmark.yml warmup; the seeds' cycle has none, so the anchor has no warm-up time)
and the output-quality check's two passes (docs/quality.md; the record's quality.seconds, none on the anchor).
Each part is printed on its own.
* ours: `ansible-playbook playbooks/experiment.yml -e tier=<tier>` (inventory/local.yml, a private work dir and
  a free port, as tests/integration/test_experiment.py does). The baseline tier runs first, unmeasured, so the
  measured run has a server to stop. Load = server.json's pid_create_time -> wait_ready.json's updated_at (the
  ready-wait's result, for the record's server); traffic = the sum of the ledger record's points' `duration`
  (bench_serving's own; a point the client sized anew for its window adds its first run's) + the record's
  warm-up `seconds` (the rounds' wall time, module sglang_bench).
* anchor: tools/perf_seeds_cycle.sh, the same cycle the way the seeds did it by hand (pkill + pgrep poll, the
  launch script the playbook rendered started in the background, sleep-poll /health, bench_serving once per
  point with the settings of the playbook's record). Load = the script's start -> first 200; traffic = the sum
  of `duration` in bench_serving's output files.
The figure is computed by pure functions (ledger parsing, load, traffic, overhead) that
tests/unit/test_perf_tools.py covers; no test times anything.

Writes results/perf.json; prints a table. `make perf` runs it (`--e2e off` skips the end-to-end figure,
`--e2e only` measures nothing else).
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import platform
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import ansible.module_utils  # noqa: E402

if str(ROOT / "plugins" / "module_utils") not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(str(ROOT / "plugins" / "module_utils"))

from ansible.module_utils import sglang_crash, sglang_process, sglang_ready  # noqa: E402

# The stop target depends on the grace period; e2e_overhead_s is the target per simulator cycle.
TARGETS = {"crash_detect_s": 2.0, "ready_detect_s": 1.0, "e2e_overhead_s": 10.0}

E2E_NOTE = ("SYNTHETIC: the SGLang-protocol simulator on this machine (inventory/local.yml settings), not a real "
            "server; overhead_s = wall_s - load_s - traffic_s, where load_s is the server's start -> ready time "
            "(ours: server.json pid_create_time -> wait_ready.json updated_at; anchor: the script's start -> its "
            "first /health 200) and traffic_s = bench_traffic_s + warmup_s + quality_s: the sum of "
            "bench_serving's `duration` over the points (ours: the ledger record; anchor: bench_serving's output "
            "files), plus the warm-up "
            "rounds' wall time (ours: the record's warmup.seconds; the anchor, like the seeds, warms up nothing), "
            "plus the output-quality check's passes (ours: the record's quality.seconds; the anchor checks none). "
            "What remains is orchestration: Ansible, the stop, the checks, the bench_serving client's start-up "
            "(Python, tokenizer, dataset; ours overlaps it with the warm-up, the anchor starts one client per "
            "point, as the seeds did), bench_serving's own 1 s pause and warm-up request per point (both sides), "
            "the record (ours only). One cycle per side on a shared 2-core machine: see loadavg_1m for how busy "
            "it was.")


# ---------------------------------------------------------------------------------------------------------------
# End-to-end figure: pure helpers (tests/unit/test_perf_tools.py). No clock, no files, no processes.
# ---------------------------------------------------------------------------------------------------------------

_ISO_RX = re.compile(r"^(\d{4})-(\d\d)-(\d\d)[T ](\d\d):(\d\d):(\d\d)(\.\d+)?(Z|[+-]\d\d:?\d\d)?$")
_LOG_READY_RX = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)[^\]]*\] The server is fired up and ready to roll!")


def parse_time(value):
    """Epoch seconds of an ISO 8601 time (`2026-12-01T09:35:41+00:00`, `...41.342158Z`); naive means UTC."""
    match = _ISO_RX.match(str(value or "").strip())
    if not match:
        raise ValueError(f"not an ISO 8601 time: {value!r}")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    epoch = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0)) + float(match.group(7) or 0.0)
    zone = match.group(8)
    if zone and zone != "Z":
        sign = 1 if zone[0] == "+" else -1
        digits = zone[1:].replace(":", "")
        epoch -= sign * (int(digits[:2]) * 3600 + int(digits[2:]) * 60)
    return epoch


def ledger_records(text):
    """The JSON object lines of a ledger (torn or non-object lines are skipped, as read_ledger does)."""
    records = []
    for line in text.splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)
    return records


def measured_record(records, tier):
    """The latest record of ``tier``; it must be a success with points (else the figure means nothing)."""
    mine = [r for r in records if r.get("tier") == tier]
    if not mine:
        raise ValueError(f"no ledger record of tier {tier}")
    record = mine[-1]
    if record.get("status") != "success":
        failure = record.get("failure") or {}
        raise ValueError(f"the {tier} run failed: {failure.get('class')} at {failure.get('step')}: "
                         f"{str(failure.get('message') or '')[:300]}")
    if not record.get("points"):
        raise ValueError(f"the record of tier {tier} has no points")
    return record


def traffic_seconds(results):
    """Benchmark traffic time: the sum of bench_serving's `duration` over the points (ledger points, or the
    result objects of bench_serving's output files). Every point must carry a duration >= 0. A point the
    client ran twice for its window (``sized``) adds its first run's duration: traffic, not orchestration."""
    total = 0.0
    results = list(results or [])
    if not results:
        raise ValueError("no points, so no traffic time")
    for point in results:
        duration = point.get("duration")
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or duration < 0:
            raise ValueError(f"point c={point.get('concurrency', point.get('max_concurrency'))} has no valid "
                             f"duration: {duration!r}")
        total += float(duration)
        first = ((point.get("sized") or {}).get("first") or {}).get("duration")
        if isinstance(first, (int, float)) and not isinstance(first, bool) and first >= 0:
            total += float(first)
    return total


def warmup_seconds(record):
    """The warm-up rounds' wall time of a ledger record (its ``warmup.seconds``), 0.0 when the record has no
    warm-up (none ran). A warm-up without a valid ``seconds`` is an error, not zero."""
    warmup = record.get("warmup")
    if not warmup:
        return 0.0
    seconds = warmup.get("seconds") if isinstance(warmup, dict) else None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
        raise ValueError(f"the record's warm-up has no valid seconds: {seconds!r}")
    return float(seconds)


def quality_seconds(record):
    """The output-quality check's wall time of a ledger record (its ``quality.seconds``: the one-at-a-time
    and the batch pass, docs/quality.md), 0.0 when the record has no check (turned off). Server work, like
    the warm-up: traffic, not orchestration. A pass that did not run (null) counts 0; a negative or
    non-numeric value is an error."""
    quality = record.get("quality")
    if not quality:
        return 0.0
    seconds = quality.get("seconds") if isinstance(quality, dict) else None
    if not isinstance(seconds, dict):
        raise ValueError(f"the record's quality check has no seconds: {seconds!r}")
    total = 0.0
    for name, value in seconds.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
            raise ValueError(f"the record's quality check has no valid {name} seconds: {value!r}")
        total += float(value)
    return total


def log_ready_epoch(log_text):
    """Epoch of the server log's "fired up" line (SGLang logs local time at 1 s resolution), or None."""
    for line in log_text.splitlines():
        match = _LOG_READY_RX.match(line)
        if match:
            return time.mktime(time.strptime(match.group(1), "%Y-%m-%d %H:%M:%S"))
    return None


def record_load_seconds(record, server_state=None, wait_state=None):
    """The server's start -> ready time of the run behind ``record``, from what that run recorded.

    start: server.json's pid_create_time (10 ms) when server.json is the record's server (same pid), else the
    record's launch.server.started_at (1 s). ready: wait_ready.json's updated_at, written when the ready-wait
    returned ready, when it belongs to the record's server ("<pid>@<started_at>"). Returns (seconds, sources).
    """
    server = ((record.get("launch") or {}).get("server")) or {}
    pid, started_at = server.get("pid"), server.get("started_at")
    if pid is None or not started_at:
        raise ValueError("the record has no launch.server pid/started_at")
    if server_state and server_state.get("pid") == pid and server_state.get("pid_create_time") is not None:
        start, start_source = float(server_state["pid_create_time"]), "server.json pid_create_time"
    else:
        start, start_source = parse_time(started_at), "ledger launch.server.started_at (1 s resolution)"
    if not wait_state or wait_state.get("server") != f"{pid}@{started_at}":
        raise ValueError(f"wait_ready.json does not belong to the record's server {pid}@{started_at}")
    progress = wait_state.get("progress") or {}
    if progress.get("health") != "ready" or wait_state.get("updated_at") is None:
        raise ValueError(f"wait_ready.json does not say ready (health {progress.get('health')!r})")
    ready = float(wait_state["updated_at"])
    if ready < start:
        raise ValueError(f"ready ({ready}) before start ({start})")
    return ready - start, {"start": start_source, "ready": "wait_ready.json updated_at"}


def overhead_seconds(wall_s, load_s, traffic_s):
    """Orchestration overhead of one cycle: wall time minus the server's load time minus benchmark traffic."""
    for name, value in (("wall", wall_s), ("load", load_s), ("traffic", traffic_s)):
        if value is None or value < 0:
            raise ValueError(f"{name} time must be a number >= 0, got {value!r}")
    overhead = wall_s - load_s - traffic_s
    if overhead < 0:
        raise ValueError(f"load {load_s:.3f} s + traffic {traffic_s:.3f} s exceed the wall time {wall_s:.3f} s")
    return overhead


def cycle_figure(wall_s, load_s, traffic_s):
    """One side's figure: wall, load, traffic, overhead (s, rounded to ms)."""
    overhead = overhead_seconds(wall_s, load_s, traffic_s)
    return {"wall_s": round(wall_s, 3), "load_s": round(load_s, 3), "traffic_s": round(traffic_s, 3),
            "overhead_s": round(overhead, 3)}


def num_prompts_for(concurrency, multiplier, floor):
    """The workload's prompts per point: max(multiplier x concurrency, floor) (role sglang_bench)."""
    return max(int(multiplier) * int(concurrency), int(floor))


def client_flags(command):
    """The client flags of a recorded point command that are not workload settings: --warmup-requests and
    --output-details (role sglang_bench's defaults, the same for every point)."""
    command = [str(word) for word in command or []]
    warmup = None
    if "--warmup-requests" in command[:-1]:
        warmup = int(command[command.index("--warmup-requests") + 1])
    return {"warmup_requests": warmup, "output_details": "--output-details" in command}


def bench_settings(record):
    """The benchmark settings the playbook used, from its record: what the anchor must send the same way."""
    workload = record.get("workload") or {}
    counts = workload.get("num_prompts") or {}
    floor = int(((workload.get("measurement") or {}).get("min_requests")) or 0)
    planned = {int(c): max(num_prompts_for(c, counts["multiplier"], counts["floor"]), floor)
               for c in workload["concurrency"]}
    # What each point sent: the plan, or what the client sized a short point to (its window). A point that
    # started from the count the host kept for it (sglang_point_sizes: an earlier run of it sent more) says
    # what it had planned.
    sent = {}
    for point in record.get("points") or []:
        concurrency, prompts = int(point["concurrency"]), int(point["num_prompts"])
        first = ((point.get("sized") or {}).get("first") or {}).get("num_prompts")
        pinned = point.get("pinned") or {}
        if pinned and (first or prompts) != pinned.get("num_prompts"):
            raise ValueError(f"the record's point at c={concurrency} ({prompts} prompts) did not start at the count "
                             f"it was pinned to ({pinned})")
        if concurrency not in planned or (pinned.get("planned") or first or prompts) != planned[concurrency]:
            raise ValueError(f"the record's point at c={concurrency} ({prompts} prompts) is not the workload's plan "
                             f"{sorted(planned.items())}")
        sent.setdefault(concurrency, prompts)
    points = [(c, sent.get(c, n)) for c, n in planned.items()]
    return {
        "points": points,
        "dataset_name": workload["dataset_name"],
        "dataset_path": workload.get("dataset_path"),
        "input_len": int(workload["input_len"]),
        "output_len": int(workload["output_len"]),
        "range_ratio": float(workload["random_range_ratio"]),
        "request_rate": str(workload["request_rate"]),
        "seed": int(workload["seed"]),
        "tokenizer": (record.get("model") or {}).get("model_path"),
        "python": ((record.get("client") or {}).get("command_prefix") or [None])[0],
        **client_flags((record.get("points") or [{}])[0].get("command")),
    }


def inventory_mismatches(workload, inventory_vars, work_dir):
    """Where the record's workload differs from the inventory's sglang_bench_* overrides (inventory/local.yml):
    [(setting, inventory value, recorded value)]. Only the overrides the inventory sets are compared."""
    pairs = {"dataset_name": ("dataset_name",), "dataset_path": ("dataset_path",), "input_len": ("input_len",),
             "output_len": ("output_len",), "num_prompts_multiplier": ("num_prompts", "multiplier"),
             "num_prompts_floor": ("num_prompts", "floor"), "concurrency": ("concurrency",),
             "warmup_requests": ("warmup", "requests")}
    found = []
    for name, keys in pairs.items():
        if inventory_vars.get(f"sglang_bench_{name}") is None:
            continue
        want = inventory_vars[f"sglang_bench_{name}"]
        if isinstance(want, str):
            want = want.replace("{{ sglang_lab_work_dir }}", str(work_dir))
        got = workload
        for key in keys:
            got = (got or {}).get(key)
        if want != got:
            found.append((name, want, got))
    return found


def parse_anchor_events(stdout):
    """The events tools/perf_seeds_cycle.sh prints ("<event> <epoch> [detail]") as {event: epoch}, with the
    points as {"points": {c: {"begin", "end", "rc"}}}, "pid" and "outcome"."""
    events, points = {}, {}
    for line in stdout.splitlines():
        words = line.split()
        if len(words) < 2:
            continue
        try:
            at = float(words[1])
        except ValueError:
            continue
        name, rest = words[0], words[2:]
        if name == "point_begin" and rest:
            points.setdefault(int(rest[0]), {})["begin"] = at
        elif name == "point_end" and len(rest) >= 2:
            points.setdefault(int(rest[0]), {}).update(end=at, rc=int(rest[1]))
        elif name == "pid" and rest:
            events["pid"] = int(rest[0])
        elif name == "end":
            events["end"], events["outcome"] = at, (rest[0] if rest else None)
        else:
            events[name] = at
    events["points"] = points
    return events


def anchor_load_seconds(events):
    """The anchor's load time as its poll saw it: just before the launch -> the first /health 200."""
    if "start" not in events or "ready" not in events:
        raise ValueError("the anchor printed no start/ready events")
    return events["ready"] - events["start"]


ANCHOR_WAIT = r"""
# InferenceX wait_for_ready (benchmarks/benchmark_lib.sh), reduced to its loop.
endpoint="$1"; pid="$2"; interval="$3"
until curl --output /dev/null --silent --fail "$endpoint"; do
    if ! kill -0 "$pid" 2>/dev/null; then echo "DIED $EPOCHREALTIME"; exit 1; fi
    sleep "$interval"
done
echo "READY $EPOCHREALTIME"
"""

ANCHOR_TREE_STOP = r"""
# InferenceX stop_background_process_tree (benchmarks/benchmark_lib.sh), reduced.
root_pid="$1"; grace_seconds="$2"
running() { kill -0 "$1" 2>/dev/null || return 1; local s; s=$(ps -o stat= -p "$1" 2>/dev/null) || return 1;
            [[ -n "$s" && "${s:0:1}" != "Z" ]]; }
descendants() { local c; while read -r c; do [[ -n "$c" ]] || continue; echo "$c"; descendants "$c";
                done < <(pgrep -P "$1" 2>/dev/null || true); }
all=$(descendants "$root_pid")
kill -TERM "$root_pid" 2>/dev/null || true
deadline=$((SECONDS + grace_seconds))
while running "$root_pid" && [[ $SECONDS -lt $deadline ]]; do sleep 1; done
for c in $root_pid $all; do running "$c" && kill -KILL "$c" 2>/dev/null; done
echo "DONE $EPOCHREALTIME"
"""

ANCHOR_PKILL_STOP = r"""
# What the seeds did by hand: pkill the server's command line, poll pgrep until it is gone.
pattern="$1"
pkill -TERM -f -- "$pattern" || true
for _ in $(seq 1 60); do pgrep -f -- "$pattern" >/dev/null || break; sleep 1; done
echo "DONE $EPOCHREALTIME"
"""


# ---------------------------------------------------------------------------------------------------------------
# End-to-end figure: the runs.
# ---------------------------------------------------------------------------------------------------------------

VENV_BIN = Path(sys.executable).parent


def _read_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def _read_text(path):
    try:
        return Path(path).read_text(errors="replace") if path else ""
    except OSError:
        return ""


def _playbook_failure(log):
    """The last `fatal:` block of an ansible-playbook log (else its tail): what to print when a run failed."""
    text = _read_text(log)
    at = text.rfind("fatal: [")
    if at < 0:
        return text[-1500:]
    block = text[at:].split("\n\n", 1)[0]
    return block[:1500]


def run_playbook(private, tier, timeout):
    """One `ansible-playbook playbooks/experiment.yml -e tier=<tier>` against inventory/local.yml, with the
    private work dir, port and controller results dir (private/vars.json). Returns (rc, wall_s, log)."""
    log = private / f"playbook-{tier}.log"
    command = [str(VENV_BIN / "ansible-playbook"), "-i", str(ROOT / "inventory" / "local.yml"),
               str(ROOT / "playbooks" / "experiment.yml"), "-e", f"tier={tier}", "-e", f"@{private / 'vars.json'}"]
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}")
    with open(log, "wb") as handle:
        start = time.monotonic()
        try:
            rc = subprocess.run(command, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=handle,
                                stderr=subprocess.STDOUT, timeout=timeout, check=False).returncode
        except subprocess.TimeoutExpired:
            rc = 124
        wall = time.monotonic() - start
    return rc, wall, log


def run_anchor_cycle(private, record, port, interval, timeout, module=None):
    """tools/perf_seeds_cycle.sh on the tier's rendered launch script, with the record's benchmark settings.
    ``module``: the server's module for the script's pkill pattern (default: the simulator's)."""
    settings = bench_settings(record)
    out = private / "anchor"
    command = ["bash", str(ROOT / "tools" / "perf_seeds_cycle.sh"),
               "--launch", record["launch"]["script"], "--port", str(port),
               "--log", str(out / f"{record['tier']}.log"), "--out", str(out / "bench"),
               "--python", settings["python"] or sys.executable,
               "--client", str(ROOT / "tools" / "sglang_bench_client.py"),
               "--tokenizer", settings["tokenizer"],
               "--points", " ".join(f"{c}:{n}" for c, n in settings["points"]),
               "--dataset-name", settings["dataset_name"],
               "--input-len", str(settings["input_len"]), "--output-len", str(settings["output_len"]),
               "--range-ratio", str(settings["range_ratio"]), "--request-rate", settings["request_rate"],
               "--seed", str(settings["seed"]), "--interval", str(interval)]
    if module:
        command += ["--module", module]
    if settings["dataset_path"]:
        command += ["--dataset-path", settings["dataset_path"]]
    if settings["warmup_requests"] is not None:
        command += ["--warmup-requests", str(settings["warmup_requests"])]
    if settings["output_details"]:
        command.append("--output-details")
    start = time.monotonic()
    try:
        proc = subprocess.run(command, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=timeout, check=False)
        rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, stdout, stderr = 124, exc.stdout or "", exc.stderr or ""
        stdout = stdout.decode(errors="replace") if isinstance(stdout, bytes) else stdout
        stderr = stderr.decode(errors="replace") if isinstance(stderr, bytes) else stderr
    wall = time.monotonic() - start
    events = parse_anchor_events(stdout)
    results = {}
    for concurrency, _ in settings["points"]:
        path = out / "bench" / f"c{concurrency}.jsonl"
        lines = _read_json_lines(path)
        if lines:
            results[concurrency] = lines[-1]
    return {"rc": rc, "wall_s": wall, "events": events, "results": results, "settings": settings,
            "stderr": stderr[-2000:], "command": command}


def _read_json_lines(path):
    try:
        text = Path(path).read_text()
    except OSError:
        return []
    found = []
    for line in text.splitlines():
        try:
            value = json.loads(line)  # bench_serving writes Infinity for --request-rate inf; json accepts it
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def stop_private_servers(private, sids):
    """Verified stop of every server this measurement started: the known sessions, and any process whose
    command line names the private dir (the launch scripts' --model is in it). Nothing else is touched."""
    sids = {sid for sid in sids if sid}
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if any(str(private) in part for part in proc.info["cmdline"] or []):
                sids.add(os.getsid(proc.pid))
        except (psutil.Error, OSError):
            continue
    sids.discard(os.getsid(0))
    for sid in sids:
        targets, _ = sglang_process.find_server_processes(sid=sid, pid=sid)
        if targets:
            sglang_process.stop_processes(targets, 5.0, roots={sid}, orphan_grace_seconds=1.0)


def median_side(figures):
    """One side's summary over its rounds (each a cycle_figure dict with the side's extra fields): the figure of
    the round whose overhead is the median (the lower middle one for an even count), with the median overhead
    itself (``overhead_median_s``, statistics.median), the overheads of every round in order and the round
    count. One cycle on a shared machine is one sample of a noisy figure; the target is judged on the median."""
    if not figures:
        raise ValueError("no rounds to summarize")
    overheads = [float(f["overhead_s"]) for f in figures]
    order = sorted(range(len(figures)), key=lambda i: (overheads[i], i))
    middle = dict(figures[order[(len(figures) - 1) // 2]])
    middle.update(overhead_median_s=round(statistics.median(overheads), 3),
                  overheads_s=[round(o, 3) for o in overheads], rounds=len(figures))
    return middle


def _measure_ours(private, work, tier, timeout, sids, run=None):
    """One measured playbook run of ``tier``: its figure and the record it wrote. ``run``: the function that
    runs the playbook (run_playbook of this tree; tools/perf_ab.py passes another tree's)."""
    rc, wall, log = (run or run_playbook)(private, tier, timeout)
    server_state = _read_json(work / "run" / "server.json") or {}
    sids.append(server_state.get("sid"))
    if rc != 0:
        raise RuntimeError(f"the {tier} playbook run failed (rc {rc}, {log}):\n{_playbook_failure(log)}")
    record = measured_record(ledger_records((work / "results" / "ledger.jsonl").read_text()), tier)
    load, sources = record_load_seconds(record, server_state, _read_json(work / "run" / "wait_ready.json"))
    bench_traffic, warmup = traffic_seconds(record["points"]), warmup_seconds(record)
    quality = quality_seconds(record)
    traffic = bench_traffic + warmup + quality
    fired_up = log_ready_epoch(_read_text(record["launch"]["server"].get("log")))
    ours = dict(cycle_figure(wall, load, traffic),
                bench_traffic_s=round(bench_traffic, 3), warmup_s=round(warmup, 3),
                quality_s=round(quality, 3),
                client_wall_s=round(sum(p.get("wall_s") or 0 for p in record["points"]), 3),
                load_sources=sources, record_id=record.get("record_id"), run_id=record.get("run_id"),
                load_s_log_check=(round(fired_up - float(server_state.get("pid_create_time") or 0), 1)
                                  if fired_up and server_state.get("pid_create_time") else None),
                command=f"ansible-playbook -i inventory/local.yml playbooks/experiment.yml -e tier={tier} "
                        "(private work dir, port and controller results dir)")
    return ours, record


def _measure_anchor(private, record, settings, port, interval, timeout, sids):
    """One cycle of tools/perf_seeds_cycle.sh on the record's launch script: its figure."""
    anchor = run_anchor_cycle(private, record, port, interval, timeout)
    sids.append(anchor["events"].get("pid"))
    if anchor["rc"] != 0:
        raise RuntimeError(f"tools/perf_seeds_cycle.sh failed (rc {anchor['rc']}): {anchor['stderr']}")
    events, results = anchor["events"], anchor["results"]
    missing = [c for c, _ in settings["points"] if c not in results]
    if missing:
        raise RuntimeError(f"the anchor's bench_serving wrote no result for c={missing}")
    complete = all(results[c].get("completed") == n for c, n in settings["points"])
    anchor_traffic = traffic_seconds(results.values())
    return dict(
        cycle_figure(anchor["wall_s"], anchor_load_seconds(events), anchor_traffic),
        bench_traffic_s=round(anchor_traffic, 3), warmup_s=0.0, quality_s=0.0,
        client_wall_s=round(sum(p["end"] - p["begin"] for p in events["points"].values()), 3),
        stop_s=round(events["stopped"] - events["begin"], 3) if "stopped" in events and "begin" in events
        else None,
        points_complete=complete, health_interval_s=interval, script="tools/perf_seeds_cycle.sh",
        load_source="the script's start -> first /health 200",
        traffic_source="bench_serving output files' duration")


def measure_e2e(tier, baseline_tier, interval, timeout, rounds=3):
    """``rounds`` rounds, each: a playbook run of the baseline tier (unmeasured, so that the measured cycle stops
    a running server, as every cycle after the first does), the tier's run (measured: ours), then the anchor
    script on the tier's launch script; before a later round the anchor's server is stopped out of band (the
    baseline run then starts ours again). Returns the e2e_cycle block of perf.json: each side's median round
    (median_side) and every round's figures."""
    private = Path(tempfile.mkdtemp(prefix="perf_e2e_"))
    work, port = private / "work", free_port()
    (private / "vars.json").write_text(json.dumps({
        "sglang_lab_work_dir": str(work), "sglang_lab_port": port,
        "sglang_bench_controller_results_dir": str(private / "controller-results")}))
    block = {"tier": tier, "baseline_tier": baseline_tier, "port": port, "note": E2E_NOTE,
             "target_overhead_s": TARGETS["e2e_overhead_s"], "target_met": False, "error": None,
             "rounds_planned": rounds}
    sids = []
    block["loadavg_1m"] = {"before": round(os.getloadavg()[0], 2)}
    runs = {"ours": [], "anchor": []}
    try:
        for number in range(1, rounds + 1):
            if number > 1:
                stop_private_servers(private, sids)
            print(f"e2e: round {number}/{rounds}: {baseline_tier} run (unmeasured, leaves a server for the "
                  "measured cycle to stop)", file=sys.stderr)
            rc, wall, log = run_playbook(private, baseline_tier, timeout)
            sids.append((_read_json(work / "run" / "server.json") or {}).get("sid"))
            block.setdefault("baseline_runs", []).append({"rc": rc, "wall_s": round(wall, 3)})
            if rc != 0:
                raise RuntimeError(f"the {baseline_tier} playbook run failed (rc {rc}, {log}):\n"
                                   f"{_playbook_failure(log)}")
            print(f"e2e: round {number}/{rounds}: {tier} run (measured: ours)", file=sys.stderr)
            ours, record = _measure_ours(private, work, tier, timeout, sids)
            settings = bench_settings(record)
            if number == 1:
                inventory = yaml.safe_load((ROOT / "inventory" / "local.yml").read_text())
                mismatches = inventory_mismatches(record.get("workload"),
                                                  inventory["all"]["children"]["sglang_nodes"]["vars"], work)
                if mismatches:
                    raise RuntimeError(f"the record's workload is not inventory/local.yml's: {mismatches}")
                block["settings"] = {k: v for k, v in settings.items() if k != "points"}
                block["settings"]["from"] = "the measured ledger record (checked against inventory/local.yml)"
                block["concurrency"] = [c for c, _ in settings["points"]]
                block["num_prompts"] = {str(c): n for c, n in settings["points"]}
            if Path(record["launch"]["script"]) != work / "launch" / f"{tier}.sh":
                raise RuntimeError(f"the record's launch script {record['launch']['script']} is not "
                                   f"{work / 'launch' / f'{tier}.sh'}")
            runs["ours"].append(ours)
            print(f"e2e: round {number}/{rounds}: {tier} by hand, the seeds' way (anchor: "
                  "tools/perf_seeds_cycle.sh)", file=sys.stderr)
            runs["anchor"].append(_measure_anchor(private, record, settings, port, interval, timeout, sids))
        block["measured"] = (f"{rounds} round(s), each the second of two playbook runs ({tier}) - the first "
                             f"({baseline_tier}) ran unmeasured so that the measured cycle stops a running server, "
                             "as every cycle after the first does - then the anchor; each side's figure is its "
                             "median round")
        block["runs"] = runs
        block["ours"], block["anchor"] = median_side(runs["ours"]), median_side(runs["anchor"])
        ours_median, anchor_median = block["ours"]["overhead_median_s"], block["anchor"]["overhead_median_s"]
        block["ratio_ours_over_anchor"] = round(ours_median / anchor_median, 2) if anchor_median else None
        block["target_met"] = ours_median <= TARGETS["e2e_overhead_s"]
    except (RuntimeError, ValueError, KeyError, OSError) as exc:
        block["error"] = str(exc)[-4000:]
        block["private_dir_kept"] = str(private)
        block["runs"] = runs
    finally:
        block["loadavg_1m"]["after"] = round(os.getloadavg()[0], 2)
        stop_private_servers(private, sids)
    if block["error"] is None:
        shutil.rmtree(private, ignore_errors=True)
    return block


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LogWatcher(threading.Thread):
    """Ground truth: wall time at which each marker first appears in the log (5 ms polling)."""

    def __init__(self, path, markers):
        super().__init__(daemon=True)
        self.path, self.markers = path, {name: re.compile(rx) for name, rx in markers.items()}
        self.seen = {}
        self.stop_event = threading.Event()

    def run(self):
        offset, buffer = 0, ""
        while not self.stop_event.is_set():
            try:
                with open(self.path, encoding="utf-8", errors="replace") as handle:
                    handle.seek(offset)
                    data = handle.read()
                    offset = handle.tell()
            except OSError:
                data = ""
            if data:
                now = time.time()
                buffer += data
                lines = buffer.split("\n")
                buffer = lines.pop()
                for line in lines:
                    for name, rx in self.markers.items():
                        if name not in self.seen and rx.search(line):
                            self.seen[name] = now
            self.stop_event.wait(0.005)


class Server:
    """One simulator server started like a harness does (python in its own session, we are its parent and
    reap it at once, so `kill -0` in the anchor does not see a zombie)."""

    def __init__(self, workdir, name, port, fault="", tp=8, load_seconds=2.0):
        self.port = port
        self.log = workdir / f"{name}.log"
        script = workdir / f"{name}.sh"
        env = {"PYTHONPATH": str(ROOT / "simulator"), "SGLANG_SIM_LOAD_SECONDS": str(load_seconds),
               "SGLANG_SIM_SPEED": "20"}
        if fault:
            env["SGLANG_SIM_FAULT"] = fault
        exports = "\n".join(f"export {k}={v!r}" for k, v in env.items())
        script.write_text(f"#!/bin/bash\n{exports}\nexec {sys.executable} -m sglang_sim.launch_server "
                          f"--model-path sim-model --tp-size {tp} --host 127.0.0.1 --port {port}\n")
        script.chmod(0o750)
        self.handle = open(self.log, "ab", buffering=0)  # noqa: SIM115 - closed in cleanup()
        self.proc = subprocess.Popen([str(script)], stdin=subprocess.DEVNULL, stdout=self.handle,
                                     stderr=subprocess.STDOUT, start_new_session=True)
        self.pid = self.sid = self.proc.pid
        self.reaper = threading.Thread(target=self.proc.wait, daemon=True)
        self.reaper.start()
        self.pattern = rf"sglang_sim\.launch_server .*--port {port}( |$)"

    def alive(self):
        try:
            return psutil.Process(self.pid).status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def session_alive(self):
        return [p.pid for p in sglang_process.session_processes(self.sid)]

    def cleanup(self):
        for pid in self.session_alive():
            try:
                os.kill(pid, 9)
            except OSError:
                pass
        self.handle.close()


def run_ours_wait(server, catalog, result):
    outcome = sglang_ready.wait_ready(log_path=str(server.log), catalog=catalog, is_alive=server.alive,
                                      host="127.0.0.1", port=server.port, deadline_s=180)
    result.update(at=time.time(), outcome=outcome["outcome"],
                  crash_class=(outcome["report"] or {}).get("crash_class"))


def run_anchor(script_text, *args):
    proc = subprocess.run(["bash", "-c", script_text, "anchor", *map(str, args)], capture_output=True, text=True,
                          check=False, timeout=300)
    words = proc.stdout.split()
    return words[0] if words else "?", float(words[1]) if len(words) > 1 else time.time()


def watch_side_by_side(server, catalog, markers, anchor_interval):
    """Start the ground-truth watcher, ours and the anchor on one server; wait for both."""
    truth = LogWatcher(server.log, markers)
    truth.start()
    ours = {}
    thread = threading.Thread(target=run_ours_wait, args=(server, catalog, ours))
    thread.start()
    anchor = run_anchor(ANCHOR_WAIT, f"http://127.0.0.1:{server.port}/health", server.pid, anchor_interval)
    thread.join()
    time.sleep(0.1)
    truth.stop_event.set()
    return truth.seen, ours, anchor


def verified_stop_ours(server, grace):
    start = time.time()
    targets, _ = sglang_process.find_server_processes(sid=server.sid, pid=server.pid)
    roots = {server.pid}  # the SGLang main process (what the module's roots are: pidfile pid + its child)
    records, _ = sglang_process.stop_processes(targets, grace, roots=roots, orphan_grace_seconds=1.0)
    port = sglang_process.wait_port_free(server.port, 15)
    done = time.time()
    return {"s": done - start, "survivors": len(server.session_alive()), "port_free": port["free"],
            "killed": sum(1 for r in records if "KILL" in r["signals"]), "processes": len(records)}


def anchor_stop(server, script, *args):
    start = time.time()
    word, at = run_anchor(script, *args)
    survivors = server.session_alive()
    return {"s": at - start, "survivors": len(survivors), "port_free": sglang_process.port_is_free(server.port)}


def stats(values):
    values = [v for v in values if v is not None]
    if not values:
        return {"median": None, "max": None, "min": None, "n": 0}
    return {"median": round(statistics.median(values), 3), "max": round(max(values), 3),
            "min": round(min(values), 3), "n": len(values)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--grace", type=float, default=5.0, help="stop grace period (s) for both sides")
    parser.add_argument("--tp", type=int, default=8)
    parser.add_argument("--load-seconds", type=float, default=2.0, help="SGLANG_SIM_LOAD_SECONDS")
    parser.add_argument("--anchor-interval", type=int, default=5, help="the anchor loop's sleep (InferenceX: 5)")
    parser.add_argument("--e2e", choices=("on", "off", "only"), default="on",
                        help="the end-to-end cycle figure: on (default), off, or only that")
    parser.add_argument("--e2e-tier", default="t03-single-batch-overlap", help="the measured tier (second run)")
    parser.add_argument("--e2e-baseline-tier", default="baseline", help="the unmeasured first run")
    parser.add_argument("--e2e-rounds", type=int, default=3,
                        help="rounds of (baseline run, measured run, anchor); each side's figure is its median round "
                             "(one cycle on a shared 2-core machine varied by 3 s between runs)")
    parser.add_argument("--anchor-health-interval", type=float, default=1.0,
                        help="the anchor script's /health sleep-poll interval (s)")
    parser.add_argument("--playbook-timeout", type=int, default=900, help="per playbook run / anchor run (s)")
    parser.add_argument("--out", default=str(ROOT / "results" / "perf.json"))
    args = parser.parse_args(argv)
    if args.e2e == "only":
        args.trials = 0
    if not (ROOT / "simulator" / "sglang_sim" / "launch_server.py").is_file():
        sys.exit("perf_lifecycle: the simulator (simulator/sglang_sim) is missing; nothing to measure")

    catalog = sglang_crash.load_catalog(ROOT / "data" / "crash_signatures.yml")
    fatal_rx = r"torch\._dynamo\.exc\.Unsupported"
    ready_rx = r"The server is fired up and ready to roll!"
    rows = {k: [] for k in ("crash", "anchor_crash", "ready", "anchor_ready", "stop", "anchor_stop",
                            "anchor_pkill_stop")}
    detail = []
    with tempfile.TemporaryDirectory(prefix="perf_lifecycle_") as tmp:
        workdir = Path(tmp)
        for trial in range(args.trials):
            # 1. crash detection
            server = Server(workdir, f"crash{trial}", free_port(), fault="crash_on_load", tp=args.tp,
                            load_seconds=args.load_seconds)
            try:
                seen, ours, (word, at) = watch_side_by_side(server, catalog, {"fatal": fatal_rx},
                                                            args.anchor_interval)
            finally:
                server.cleanup()
            line_at = seen.get("fatal")
            rows["crash"].append(ours["at"] - line_at if line_at else None)
            rows["anchor_crash"].append(at - line_at if line_at and word == "DIED" else None)
            detail.append({"trial": trial, "kind": "crash", "ours_outcome": ours["outcome"],
                           "ours_class": ours["crash_class"], "anchor": word})

            # 2. ready detection (three servers, each then stopped by one method)
            for method in ("ours", "tree", "pkill"):
                server = Server(workdir, f"ready{trial}-{method}", free_port(), fault="ignore_sigterm", tp=args.tp,
                                load_seconds=args.load_seconds)
                try:
                    seen, ours, (word, at) = watch_side_by_side(server, catalog, {"ready": ready_rx},
                                                                args.anchor_interval)
                    line_at = seen.get("ready")
                    rows["ready"].append(ours["at"] - line_at if line_at and ours["outcome"] == "ready" else None)
                    rows["anchor_ready"].append(at - line_at if line_at and word == "READY" else None)
                    # 3. verified stop
                    if method == "ours":
                        stop = verified_stop_ours(server, args.grace)
                        rows["stop"].append(stop)
                    elif method == "tree":
                        stop = anchor_stop(server, ANCHOR_TREE_STOP, server.pid, int(args.grace))
                        rows["anchor_stop"].append(stop)
                    else:
                        stop = anchor_stop(server, ANCHOR_PKILL_STOP, server.pattern)
                        rows["anchor_pkill_stop"].append(stop)
                    detail.append({"trial": trial, "kind": f"ready+stop-{method}", "ours_outcome": ours["outcome"],
                                   "anchor": word, "stop": stop})
                finally:
                    server.cleanup()
            print(f"trial {trial + 1}/{args.trials} done", file=sys.stderr)

    e2e = (measure_e2e(args.e2e_tier, args.e2e_baseline_tier, args.anchor_health_interval, args.playbook_timeout,
                       rounds=args.e2e_rounds)
           if args.e2e != "off" else None)

    def stop_stats(name):
        items = rows[name]
        return dict(stats([i["s"] for i in items]), survivors_max=max((i["survivors"] for i in items), default=None),
                    port_free_all=all(i["port_free"] for i in items))

    crash, anchor_crash = stats(rows["crash"]), stats(rows["anchor_crash"])
    ready, anchor_ready = stats(rows["ready"]), stats(rows["anchor_ready"])
    stop, anchor_stop_s, pkill = stop_stats("stop"), stop_stats("anchor_stop"), stop_stats("anchor_pkill_stop")

    def ratio(a, b):
        return round(a / b, 1) if a and b else None

    stop_target = args.grace + 1.0
    passes = {}
    if args.trials:
        passes.update({
            "crash_detect": crash["max"] is not None and crash["max"] <= TARGETS["crash_detect_s"],
            "ready_detect": ready["max"] is not None and ready["max"] <= TARGETS["ready_detect_s"],
            "stop": stop["max"] is not None and stop["max"] <= stop_target and stop["survivors_max"] == 0
            and stop["port_free_all"],
        })
    if e2e is not None:
        passes["e2e_overhead"] = bool(e2e["target_met"])
    e2e_ours, e2e_anchor = (e2e or {}).get("ours") or {}, (e2e or {}).get("anchor") or {}
    result = {
        "crash_detect_s": crash["median"],
        "ready_detect_s": ready["median"],
        "stop_s": stop["median"],
        "anchor_crash_detect_s": anchor_crash["median"],
        "anchor_ready_detect_s": anchor_ready["median"],
        "anchor_stop_s": anchor_stop_s["median"],
        "anchor_pkill_stop_s": pkill["median"],
        "ratios": {
            "crash_detect_anchor_over_ours": ratio(anchor_crash["median"], crash["median"]),
            "ready_detect_anchor_over_ours": ratio(anchor_ready["median"], ready["median"]),
            "stop_anchor_over_ours": ratio(anchor_stop_s["median"], stop["median"]),
            "e2e_overhead_ours_over_anchor": (e2e or {}).get("ratio_ours_over_anchor"),
        },
        "e2e_overhead_s": e2e_ours.get("overhead_median_s"),
        "anchor_e2e_overhead_s": e2e_anchor.get("overhead_median_s"),
        "targets": {"crash_detect_s": TARGETS["crash_detect_s"], "ready_detect_s": TARGETS["ready_detect_s"],
                    "stop_s": stop_target, "stop_survivors": 0, "e2e_overhead_s": TARGETS["e2e_overhead_s"]},
        "pass": passes,
        "all_pass": bool(passes) and all(passes.values()),
        "e2e_cycle": e2e,
        "stats": {"crash_detect": crash, "anchor_crash_detect": anchor_crash, "ready_detect": ready,
                  "anchor_ready_detect": anchor_ready, "stop": stop, "anchor_stop": anchor_stop_s,
                  "anchor_pkill_stop": pkill},
        "trials": detail,
        "settings": {"trials": args.trials, "grace_s": args.grace, "tp": args.tp, "load_seconds": args.load_seconds,
                     "anchor_interval_s": args.anchor_interval, "ours_interval_s": 0.25, "ours_linger_s": 0.5,
                     "ours_orphan_grace_s": 1.0, "e2e": args.e2e, "e2e_tier": args.e2e_tier,
                     "e2e_baseline_tier": args.e2e_baseline_tier,
                     "anchor_health_interval_s": args.anchor_health_interval},
        "method": ("SYNTHETIC: simulator servers on this machine; ours = the modules' Python logic called directly "
                   "(no Ansible task start-up); anchor = InferenceX-style bash loops (see tools/perf_lifecycle.py)"),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2) + "\n")

    def fmt(value):
        return "-" if value is None else f"{value:.2f}"

    if args.trials:
        print_lifecycle(args, crash, anchor_crash, ready, anchor_ready, stop, anchor_stop_s, pkill, result, passes,
                        stop_target, fmt)
    if e2e is not None:
        print_e2e(e2e, fmt)
    print_real(REAL_PERF)
    print(f"wrote {out}")
    return 0 if result["all_pass"] else 1


# The real figure: experiment.yml against the cycle by hand on real SGLang, recorded on a lent GPU machine
# (PHASE=perf make real-gpu-check, tools/device/perf_real.py; the fixture folder keeps its first name,
# 0.5.17-h200-tp1, and the recording of 2026-12-06 09:03Z ran on an H100: perf.json's ``gpu`` says which).
# The simulator's figure above is the regression guard; this is the claim.
REAL_PERF = ROOT / "tests" / "fixtures" / "real-sglang" / "0.5.17-h200-tp1" / "perf" / "perf.json"
REAL_TARGET_RATIO = 0.75
_GPU_NAME_RX = re.compile(r"GPU \d+: (.+?) \(UUID")
_VALIDATE_FIRST_RX = re.compile(r"^== validate_first rc=(\d+) ([\d.]+) s", re.M)


def real_gpu_name(gpu):
    """The card's name from ``nvidia-smi -L`` output (perf.json's ``gpu``): each distinct name once."""
    names = _GPU_NAME_RX.findall(gpu or "")
    return ", ".join(dict.fromkeys(names)) if names else (gpu or "").strip()


def real_figure(data, summary_text=""):
    """The real recording's figure, computed here from its runs (not read from the medians perf.json holds):
    the walls of the successful runs a side, their medians and ratio, the GPU, the date and the conditions
    (the uncharged warm start, and from the phase's summary.txt the validation run first)."""
    ours = [r["wall_s"] for r in data.get("runs", []) if r["side"] == "ours" and r.get("rc") == 0]
    hand = [r["wall_s"] for r in data.get("runs", []) if r["side"] == "by_hand" and r.get("rc") == 0]
    median_ours = statistics.median(ours) if ours else None
    median_hand = statistics.median(hand) if hand else None
    ratio = round(median_ours / median_hand, 3) if ours and hand else None
    validate = _VALIDATE_FIRST_RX.search(summary_text or "")
    return {
        "gpu": real_gpu_name(data.get("gpu")) or data.get("machine"),
        "date": data.get("date"),
        "tier": data.get("tier"),
        "ours_wall_s": ours,
        "by_hand_wall_s": hand,
        "median_ours_s": median_ours,
        "median_by_hand_s": median_hand,
        "median_ratio": ratio,
        "target_ratio": REAL_TARGET_RATIO,
        "target_met": ratio is not None and ratio <= REAL_TARGET_RATIO,
        "warm_start": data.get("warm_start"),
        "validate_first_s": float(validate.group(2)) if validate and validate.group(1) == "0" else None,
    }


def print_real(path):
    """Print the committed real-SGLang recording beside the simulator's figure (its date and GPU)."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        print(f"\nReal SGLang: no recording at {path} ({exc})")
        return
    summary = Path(path).with_name("summary.txt")
    fig = real_figure(data, summary.read_text() if summary.is_file() else "")
    conditions = [f"{len(fig['ours_wall_s'])} runs a side, alternating",
                  "uncharged warm start" if fig["warm_start"] else "no uncharged warm start"]
    if fig["validate_first_s"] is not None:
        conditions.append(f"the tier validated first ({fig['validate_first_s']} s), the parser's verdict kept")
    print(f"\nReal SGLang 0.5.17 on {fig['gpu']} ({fig['date']}, tier {fig['tier']}; "
          "recorded by PHASE=perf make real-gpu-check, not measured now)")
    print(f"  conditions: {'; '.join(conditions)}")
    for run in data.get("runs", []):
        steps = run.get("steps") or {}
        detail = ", ".join(f"{k} {v:.1f}" for k, v in steps.items() if v >= 0.5) if steps else ""
        print(f"  {run['side']:<8} run {run['run']}: wall {run['wall_s']:.1f} s" + (f" ({detail})" if detail else ""))
    print(f"  median wall: ours {fig['median_ours_s']} s, by hand {fig['median_by_hand_s']} s, "
          f"ratio {fig['median_ratio']} (target <= {fig['target_ratio']}: "
          f"{'met' if fig['target_met'] else 'NOT met'})")


def print_e2e(e2e, fmt):
    print(f"\nEnd-to-end cycle, tier {e2e['tier']} (measured runs; {e2e['baseline_tier']} ran before each, "
          f"unmeasured), simulator (SYNTHETIC), {e2e.get('rounds_planned', 1)} round(s), the median round shown")
    if e2e.get("error"):
        print(f"  NOT MEASURED: {e2e['error'][-1500:]}")
        if e2e.get("private_dir_kept"):
            print(f"  (kept for inspection: {e2e['private_dir_kept']})")
        return
    print(f"  concurrency {e2e['concurrency']}, num_prompts {e2e['num_prompts']}")
    print(f"{'side':<40}{'wall':>8}{'load':>8}{'bench':>8}{'warm-up':>9}{'quality':>9}{'overhead':>10}"
          f"{'clients':>9}")
    for name, side in (("ours (ansible-playbook experiment.yml)", e2e["ours"]),
                       ("anchor (tools/perf_seeds_cycle.sh)", e2e["anchor"])):
        print(f"{name:<40}{fmt(side['wall_s']):>8}{fmt(side['load_s']):>8}{fmt(side['bench_traffic_s']):>8}"
              f"{fmt(side['warmup_s']):>9}{fmt(side.get('quality_s', 0.0)):>9}{fmt(side['overhead_s']):>10}"
              f"{fmt(side['client_wall_s']):>9}")
    for name in ("ours", "anchor"):
        side = e2e[name]
        print(f"  {name} overhead per round: {', '.join(fmt(o) for o in side['overheads_s'])}; "
              f"median {fmt(side['overhead_median_s'])}")
    print(f"median overhead ours/anchor {fmt(e2e['ratio_ours_over_anchor'])}; target ours <= "
          f"{e2e['target_overhead_s']:.0f} s: {'met' if e2e['target_met'] else 'NOT met'} "
          "(the table's rows are the median rounds; overhead = wall - load - bench traffic - warm-up rounds - "
          "quality check; clients = the points' bench_serving wall, inside the overhead)")
    print(f"  load average (1 min) before/after: {e2e['loadavg_1m'].get('before')}/{e2e['loadavg_1m'].get('after')}")


def print_lifecycle(args, crash, anchor_crash, ready, anchor_ready, stop, anchor_stop_s, pkill, result, passes,
                    stop_target, fmt):
    print(f"\nLifecycle latency, {args.trials} trial(s), TP{args.tp} simulator (SYNTHETIC), grace {args.grace:.0f} s")
    print(f"{'measure':<28}{'ours med/max':>16}{'anchor med/max':>18}{'anchor/ours':>13}{'target':>9}{'pass':>6}")
    lines = [
        ("crash detection (s)", crash, anchor_crash, result["ratios"]["crash_detect_anchor_over_ours"],
         TARGETS["crash_detect_s"], passes["crash_detect"]),
        ("ready detection (s)", ready, anchor_ready, result["ratios"]["ready_detect_anchor_over_ours"],
         TARGETS["ready_detect_s"], passes["ready_detect"]),
        ("verified stop (s)", stop, anchor_stop_s, result["ratios"]["stop_anchor_over_ours"], stop_target,
         passes["stop"]),
    ]
    for name, a, b, r, target, ok in lines:
        print(f"{name:<28}{fmt(a['median']) + '/' + fmt(a['max']):>16}{fmt(b['median']) + '/' + fmt(b['max']):>18}"
              f"{fmt(r):>13}{target:>9.1f}{'yes' if ok else 'NO':>6}")
    print(f"stop survivors (max): ours {stop['survivors_max']}, InferenceX-style tree stop "
          f"{anchor_stop_s['survivors_max']}, pkill+pgrep {pkill['survivors_max']} "
          f"(pkill+pgrep took {fmt(pkill['median'])} s)")
    print(f"port free after stop: ours {stop['port_free_all']}, tree stop {anchor_stop_s['port_free_all']}, "
          f"pkill {pkill['port_free_all']}")


if __name__ == "__main__":
    sys.exit(main())
