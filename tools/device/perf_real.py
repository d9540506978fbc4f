#!/usr/bin/env python3
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""PHASE=perf of make real-gpu-check: the experiment cycle against the same cycle by hand, on REAL SGLang.

    python3 tools/device/perf_real.py --out DIR --work /tmp/lab --tier baseline --runs 3 -- <ansible-playbook argv>

First one start of the launch script that neither side is charged with (``warm_start``: the first start on
a fresh machine reads everything from disk). Then, alternating and in this order, ``ours``
(``<ansible-playbook argv> playbooks/experiment.yml -e tier=<tier>``) and ``by hand``
(tools/perf_seeds_cycle.sh on the launch script the playbook rendered, with the benchmark settings of its
ledger record: the seeds' pkill + pgrep poll, the script started in the background, /health polled every
second, bench_serving once per point), ``--runs`` times each. Every run stops the server the previous one
left, so each side pays a stop. The first ``ours`` run pays SGLang's parser once (its cache is empty), as
the first experiment of a launch on a node does; the later ones find the verdict kept.

Writes DIR/perf.json: the machine, the date, the tier and workload, one entry per run (wall, load, traffic,
overhead, and for ours the start time and duration of every task, from the playbook's output stamped line by
line as it came), ``ours_wall_s`` and ``by_hand_wall_s`` (one value a run), their medians and the median ratio.
`make perf` prints the committed copy (tests/fixtures/real-sglang/0.5.17-h200-tp1/perf/perf.json) beside the
simulator's figure. The figures come from tools/perf_lifecycle.py's functions, which the unit tests cover.
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools"))

import perf_lifecycle as pl  # noqa: E402  (the path is set just above)

TASK_PREFIX = "TASK ["


def stamped_run(command, log_path, timeout):
    """Run ``command``, writing each output line to ``log_path`` prefixed with its arrival time
    (seconds since the start). Returns (rc, wall_s, [(t, line)])."""
    lines = []
    start = time.monotonic()
    with open(log_path, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(command, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True, bufsize=1)
        for line in proc.stdout:
            at = time.monotonic() - start
            lines.append((at, line.rstrip("\n")))
            log.write(f"{at:9.3f} {line}")
            if at > timeout:
                proc.kill()
        rc = proc.wait()
    return rc, time.monotonic() - start, lines


def task_times(lines, wall_s):
    """Each task's start (its banner) and duration (to the next banner, or the end) from stamped lines."""
    banners = [(at, line[len(TASK_PREFIX):].split("]", 1)[0]) for at, line in lines if line.startswith(TASK_PREFIX)]
    tasks = []
    for index, (at, name) in enumerate(banners):
        end = banners[index + 1][0] if index + 1 < len(banners) else wall_s
        tasks.append({"task": name, "start_s": round(at, 3), "duration_s": round(end - at, 3)})
    return tasks


# The steps of the cycle, as the task names show them (first match wins), for the breakdown.
STEPS = (
    ("parser", ("prepare_server_args",)),
    ("validate", ("sglang_launch :", "sglang_experiment : ", "Validat", "Check", "Resolve")),
    ("stop", ("sglang_server : Stop", "Stop the running server", "verif")),
    ("start", ("Start the launch script", "sglang_server : Start", "Show the started server")),
    ("standby", ("beside the loading server",)),
    ("ready", ("Wait until", "ready")),
    ("measure", ("Benchmark every point", "Warm up")),
    ("record", ("Record", "ledger", "Append")),
)


def step_breakdown(tasks):
    """Seconds per step of the cycle (STEPS), the rest as ``other``."""
    totals = {name: 0.0 for name, _ in STEPS}
    totals["other"] = 0.0
    for task in tasks:
        for name, needles in STEPS:
            if any(needle in task["task"] for needle in needles):
                totals[name] += task["duration_s"]
                break
        else:
            totals["other"] += task["duration_s"]
    return {name: round(value, 3) for name, value in totals.items()}


def ours(args, index, out):
    log = out / f"ours_{index}.out"
    command = list(args.playbook) + ["playbooks/experiment.yml", "-e", f"tier={args.tier}"]
    rc, wall, lines = stamped_run(command, log, args.timeout)
    work = Path(args.work)
    entry = {"side": "ours", "run": index, "rc": rc, "wall_s": round(wall, 3), "log": log.name}
    if rc != 0:
        entry["error"] = "\n".join(line for _, line in lines[-30:])
        return entry, None
    record = pl.measured_record(pl.ledger_records((work / "results" / "ledger.jsonl").read_text()), args.tier)
    server_state = pl._read_json(work / "run" / "server.json") or {}
    load, _sources = pl.record_load_seconds(record, server_state, pl._read_json(work / "run" / "wait_ready.json"))
    bench, warmup = pl.traffic_seconds(record["points"]), pl.warmup_seconds(record)
    tasks = task_times(lines, wall)
    entry.update(pl.cycle_figure(wall, load, bench + warmup), bench_traffic_s=round(bench, 3),
                 warmup_s=round(warmup, 3), record_id=record.get("record_id"), steps=step_breakdown(tasks),
                 tasks=tasks, standby_client=bool((record.get("client") or {}).get("standby")))
    return entry, record


def by_hand(args, index, out, record):
    private = out / f"hand_{index}"
    private.mkdir(parents=True, exist_ok=True)
    anchor = pl.run_anchor_cycle(private, record, args.port, 1, args.timeout, module="sglang.launch_server")
    (out / f"hand_{index}.out").write_text(json.dumps({k: anchor[k] for k in ("rc", "events", "command", "stderr")},
                                                      indent=1, default=str))
    entry = {"side": "by_hand", "run": index, "rc": anchor["rc"], "wall_s": round(anchor["wall_s"], 3)}
    if anchor["rc"] != 0 or not anchor["results"]:
        entry["error"] = anchor["stderr"][-2000:]
        return entry
    events = anchor["events"]
    traffic = pl.traffic_seconds(anchor["results"].values())
    entry.update(pl.cycle_figure(anchor["wall_s"], pl.anchor_load_seconds(events), traffic),
                 bench_traffic_s=round(traffic, 3),
                 stop_s=round(events["stopped"] - events["begin"], 3) if "stopped" in events else None,
                 points_s={str(c): round(p["end"] - p["begin"], 3) for c, p in events["points"].items()})
    return entry


def warm_start(args, out):
    """One start of the tier's launch script that neither side is charged with: the first SGLang start on a
    fresh machine reads every file from disk (phase e: 4943 against 7371-7977 tok/s; phase perf of
    2026-12-03: a 64 s ready-wait against 49 s), and whichever side ran first paid it. start.yml without
    SGLang's parser (the first ``ours`` run still pays it), then stop.yml. Returns what each took."""
    entry = {}
    for name, extra in (("start", ["playbooks/start.yml", "-e", f"tier={args.tier}",
                                   "-e", "sglang_launch_validate_with_real_parser=false"]),
                        ("stop", ["playbooks/stop.yml"])):
        rc, wall, lines = stamped_run(list(args.playbook) + extra, out / f"warm_{name}.out", args.timeout)
        entry[name] = {"rc": rc, "wall_s": round(wall, 3)}
        if rc != 0:
            entry[name]["error"] = "\n".join(line for _, line in lines[-30:])
            break
    return entry


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--work", required=True, help="the inventory's sglang_lab_work_dir")
    parser.add_argument("--tier", default="baseline")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--port", type=int, default=30000)
    parser.add_argument("--timeout", type=int, default=400)
    parser.add_argument("--copy-to", help="also write perf.json here after every run ($OUT/perf.json)")
    parser.add_argument("--no-warm-start", dest="warm_start", action="store_false",
                        help="skip the uncharged first start of the launch script (warm_start)")
    parser.add_argument("playbook", nargs="+", help="the ansible-playbook command, after --")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    runs, record = [], None
    args.warm = warm_start(args, args.out) if args.warm_start else None
    if args.warm:
        print(f"warm start (charged to neither side): {args.warm}", flush=True)
    for index in range(1, args.runs + 1):
        entry, record = ours(args, index, args.out)
        runs.append(entry)
        print(f"ours {index}: rc {entry['rc']} wall {entry['wall_s']} s {entry.get('steps', '')}", flush=True)
        write(args, runs, record)
        if record is None:
            break
        entry = by_hand(args, index, args.out, record)
        runs.append(entry)
        print(f"by hand {index}: rc {entry['rc']} wall {entry['wall_s']} s", flush=True)
        write(args, runs, record)
    result = write(args, runs, record)
    print(json.dumps({k: result.get(k) for k in ("ours_wall_s", "by_hand_wall_s", "median_ratio")}))
    return 0 if result["ours_wall_s"] and result["by_hand_wall_s"] else 1


def write(args, runs, record):
    """perf.json from the runs so far (after every run: a call cut short keeps what it measured)."""
    ours_walls = [r["wall_s"] for r in runs if r["side"] == "ours" and r["rc"] == 0]
    hand_walls = [r["wall_s"] for r in runs if r["side"] == "by_hand" and r["rc"] == 0]
    result = {
        "what": "experiment.yml against the same cycle by hand (tools/perf_seeds_cycle.sh), alternating, real SGLang",
        "machine": platform.node(),
        "gpu": subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout.strip(),
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "tier": args.tier,
        "workload": (record or {}).get("workload"),
        "warm_start": getattr(args, "warm", None),
        "runs": runs,
        "ours_wall_s": ours_walls,
        "by_hand_wall_s": hand_walls,
        "median_ours_s": statistics.median(ours_walls) if ours_walls else None,
        "median_by_hand_s": statistics.median(hand_walls) if hand_walls else None,
    }
    if ours_walls and hand_walls:
        result["median_ratio"] = round(result["median_ours_s"] / result["median_by_hand_s"], 3)
    text = json.dumps(result, indent=1) + "\n"
    (args.out / "perf.json").write_text(text)
    if args.copy_to:
        Path(args.copy_to).write_text(text)
    return result


if __name__ == "__main__":
    sys.exit(main())
