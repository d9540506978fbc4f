#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# What SGLang server runs here: tier, since when, processes, health, port, GPU memory, lock.

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_server_status
short_description: Report the SGLang server of this host as facts
version_added: "1.0.0"
description:
  - Reads the run state written by M(sglang_server_start) and checks it against the live
    system; sets the fact C(sglang_server) (under C(ansible_facts)).
  - Lists the processes of the server's session, the holder of the port, the health answer,
    GPU memory per GPU and the server's compute processes (where nvidia-smi exists), the
    experiment lock, and SGLang processes outside the recorded session (C(unmanaged)).
  - Read-only.
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_attributes.read_only
  - sglang_lab_facts
  - sglang_lab_server.run_dir
  - sglang_lab_server.psutil
  - sglang_lab_server.port
  - sglang_lab_server.health
  - sglang_lab_server.patterns
  - sglang_lab_nvidia_smi
options:
  health:
    description: Probe the health endpoints.
    type: bool
    default: true
  health_timeout_seconds:
    description: Timeout of one health request.
    type: float
    default: 5
  gpu:
    description: Read GPU memory with nvidia-smi (reported as unavailable where it is missing).
    type: bool
    default: true
attributes:
  facts:
    details: Sets C(ansible_facts.sglang_server).
"""

EXAMPLES = r"""
- name: Read the server status
  sglang_server_status:
    run_dir: /root/sglang-lab/run
    port: 8000

- name: Show the tier that runs
  ansible.builtin.debug:
    msg: "{{ ansible_facts['sglang_server']['tier'] }}"
"""

RETURN = r"""
extends_documentation_fragment:
  - sglang_lab_facts
ansible_facts:
  contains:
    sglang_server:
      description: >-
        running, tier, pid, sid, port, started_at, uptime_s, script, script_sha256, log,
        processes (pid, status, cmdline, rss_mib), port_holders, health (path, status, code),
        gpu (available, error, gpus, server_processes), lock, last (server.last.json),
        unmanaged (SGLang processes outside the session), wait (last wait_ready progress),
        exit_status.
      type: dict
      returned: always
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.sglang_process import (
    KILL_PATTERNS,
    LAST_STATE_NAME,
    STATE_NAME,
    WAIT_STATE_NAME,
    cmdline_matches,
    compile_patterns,
    describe,
    gpu_memory_table,
    parse_iso,
    port_holders,
    psutil,
    read_exit_status,
    read_json,
    server_alive,
    session_processes,
)
from ansible.module_utils.sglang_ready import http_base, probe

try:
    from ansible.module_utils.nvidia_smi import gpu_snapshot

    HAS_NVIDIA_SMI_UTILS = True
except ImportError:
    HAS_NVIDIA_SMI_UTILS = False

LOCK_NAME = "sglang.lock"


def health_check(host, port, paths, timeout):
    base = http_base(host, port)
    status, code, used = "down", None, paths[0]
    for path in paths:
        used = path
        status, code = probe(base + path, timeout)
        if status != "missing":
            break
    return {"path": used, "status": status, "code": code}


def main():
    argument_spec = dict(
        run_dir=dict(type="path", required=True),
        port=dict(type="int", required=True),
        host=dict(type="str", default="127.0.0.1"),
        health=dict(type="bool", default=True),
        health_paths=dict(type="list", elements="str", default=["/health_generate", "/health"]),
        health_timeout_seconds=dict(type="float", default=5.0),
        gpu=dict(type="bool", default=True),
        nvidia_smi=dict(type="str", default="nvidia-smi"),
        # None: the built-in SGLang patterns, KILL_PATTERNS in module_utils/sglang_process.py.
        patterns=dict(type="list", elements="str"),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    if psutil is None:
        module.fail_json(msg=missing_required_lib("psutil"))
    p = module.params
    run_dir = p["run_dir"]
    state = read_json(os.path.join(run_dir, STATE_NAME)) or {}
    running = server_alive(state) if state else False
    facts = {
        "running": running,
        "recorded": bool(state),
        "tier": state.get("tier"),
        "pid": state.get("pid"),
        "sid": state.get("sid"),
        "port": p["port"],
        "recorded_port": state.get("port"),
        "started_at": state.get("started_at"),
        "uptime_s": None,
        "script": state.get("script"),
        "script_sha256": state.get("script_sha256"),
        "log": state.get("log"),
        "exit_status": read_exit_status(run_dir) if state else None,
        "processes": [],
        "lock": read_json(os.path.join(run_dir, LOCK_NAME)),
        "last": read_json(os.path.join(run_dir, LAST_STATE_NAME)),
        "wait": (read_json(os.path.join(run_dir, WAIT_STATE_NAME)) or {}).get("progress"),
    }
    started = parse_iso(state.get("started_at"))
    session_pids = set()
    if running and state.get("sid"):
        facts["uptime_s"] = round(time.time() - started, 1) if started else None
        for proc in session_processes(state["sid"], None if started is None else started - 2.0):
            info = describe(proc)
            try:
                info["rss_mib"] = round(proc.memory_info().rss / 1048576.0, 1)
            except psutil.Error:
                info["rss_mib"] = None
            info.pop("create_time", None)
            facts["processes"].append(info)
            session_pids.add(proc.pid)
    facts["port_holders"] = port_holders(p["port"])

    unmanaged = []
    compiled = compile_patterns(KILL_PATTERNS if p["patterns"] is None else p["patterns"])
    for proc in psutil.process_iter(["pid", "cmdline"]):
        if proc.pid in session_pids or proc.pid == os.getpid():
            continue
        cmdline = " ".join(proc.info["cmdline"] or ()).strip()
        if cmdline and cmdline_matches(cmdline, compiled):
            unmanaged.append({"pid": proc.pid, "cmdline": cmdline})
    facts["unmanaged"] = unmanaged

    if p["health"]:
        facts["health"] = health_check(p["host"], p["port"], p["health_paths"], p["health_timeout_seconds"])
    else:
        facts["health"] = None

    if p["gpu"] and HAS_NVIDIA_SMI_UTILS:
        snapshot = gpu_snapshot(module.run_command, p["nvidia_smi"])
        facts["gpu"] = {
            "available": snapshot.get("available"),
            "error": snapshot.get("error"),
            "gpus": gpu_memory_table(snapshot),
            "server_processes": [app for app in snapshot.get("processes", []) if app.get("pid") in session_pids],
            "other_processes": [app for app in snapshot.get("processes", []) if app.get("pid") not in session_pids],
        }
    else:
        facts["gpu"] = {
            "available": False,
            "error": "gpu check disabled" if not p["gpu"] else "module_utils nvidia_smi is not installed",
            "gpus": [],
            "server_processes": [],
            "other_processes": [],
        }
    module.exit_json(changed=False, ansible_facts={"sglang_server": facts})


if __name__ == "__main__":
    main()
