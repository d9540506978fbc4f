#!/usr/bin/env python3
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

Writes results/perf.json; prints a table. `make perf` runs it.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
import ansible.module_utils  # noqa: E402

if str(ROOT / "plugins" / "module_utils") not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(str(ROOT / "plugins" / "module_utils"))

from ansible.module_utils import sglang_crash, sglang_process, sglang_ready  # noqa: E402

TARGETS = {"crash_detect_s": 2.0, "ready_detect_s": 1.0}  # stop target depends on the grace period

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
    parser.add_argument("--out", default=str(ROOT / "results" / "perf.json"))
    args = parser.parse_args(argv)
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
    passes = {
        "crash_detect": crash["max"] is not None and crash["max"] <= TARGETS["crash_detect_s"],
        "ready_detect": ready["max"] is not None and ready["max"] <= TARGETS["ready_detect_s"],
        "stop": stop["max"] is not None and stop["max"] <= stop_target and stop["survivors_max"] == 0
        and stop["port_free_all"],
    }
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
        },
        "targets": {"crash_detect_s": TARGETS["crash_detect_s"], "ready_detect_s": TARGETS["ready_detect_s"],
                    "stop_s": stop_target, "stop_survivors": 0},
        "pass": passes,
        "all_pass": all(passes.values()),
        "stats": {"crash_detect": crash, "anchor_crash_detect": anchor_crash, "ready_detect": ready,
                  "anchor_ready_detect": anchor_ready, "stop": stop, "anchor_stop": anchor_stop_s,
                  "anchor_pkill_stop": pkill},
        "trials": detail,
        "settings": {"trials": args.trials, "grace_s": args.grace, "tp": args.tp, "load_seconds": args.load_seconds,
                     "anchor_interval_s": args.anchor_interval, "ours_interval_s": 0.25, "ours_linger_s": 0.5,
                     "ours_orphan_grace_s": 1.0},
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
    print(f"wrote {out}")
    return 0 if result["all_pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
