#!/usr/bin/env python3
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Record what a real SGLang server does, from the outside, while the project drives it.

Run in the background on the lent H200 by tools/device/real_gpu_check.sh. Every INTERVAL
seconds it writes one JSON line to OUT/timeline.jsonl: the wall time, whether the port accepts a
connection, the HTTP status of each endpoint (or "refused"/"timeout"), the GPU memory in use
(nvidia-smi) and the SGLang processes (pid, ppid, sid, title). The lines are what the tests in
tests/unit/test_real_sglang_contract.py replay: when the port opened, when /health turned 200, how
long a stop took until the port was free, the GPU memory released and no process left.

Standard library and psutil only (both on the device image).
"""

from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import psutil

ENDPOINTS = ("/health", "/health_generate", "/model_info", "/v1/models")
SGLANG = re.compile(r"^sglang::|(^|\s)-m\s+sglang\.launch_server(\s|$)|multiprocessing\.resource_tracker")


def port_open(port):
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def status(port, path):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=0.5) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, ConnectionError) as exc:
        return "refused" if "refused" in str(exc).lower() else "error"
    except TimeoutError:
        return "timeout"


def gpu_memory():
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,memory.used", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=5, check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return None
    return [int(line.split(",")[1]) for line in out.strip().splitlines() if "," in line]


def processes():
    found = []
    for proc in psutil.process_iter(["pid", "ppid", "cmdline", "status"]):
        try:
            cmdline = " ".join(proc.info["cmdline"] or [])
            if SGLANG.search(cmdline) and proc.info["status"] != psutil.STATUS_ZOMBIE:
                found.append({"pid": proc.pid, "ppid": proc.info["ppid"], "sid": psutil.os.getsid(proc.pid),
                              "title": cmdline[:120]})
        except (psutil.Error, OSError):
            pass
    return found


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--port", type=int, default=30000)
    ap.add_argument("--out", required=True)
    ap.add_argument("--interval", type=float, default=0.2)
    ap.add_argument("--gpu-every", type=int, default=2, help="read nvidia-smi every N samples")
    args = ap.parse_args(argv)
    n = 0
    with open(f"{args.out}/timeline.jsonl", "a", buffering=1) as out:
        while True:
            t = time.time()
            sample = {"t": round(t, 3), "port_open": port_open(args.port)}
            if sample["port_open"]:
                sample["http"] = {path: status(args.port, path) for path in ENDPOINTS}
            if n % args.gpu_every == 0:
                sample["gpu_mib"] = gpu_memory()
            sample["procs"] = processes()
            out.write(json.dumps(sample) + "\n")
            n += 1
            time.sleep(max(0.0, args.interval - (time.time() - t)))


if __name__ == "__main__":
    sys.exit(main())
