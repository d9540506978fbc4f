#!/usr/bin/python
# What SGLang server runs here: tier, since when, processes, health, port, GPU memory, lock.

from __future__ import annotations

DOCUMENTATION = r"""
---
module: sglang_server_status
short_description: Report the SGLang server of this host as facts
description:
  - Reads the run state written by M(sglang_server_start) and checks it against the live
    system; sets the fact C(sglang_server) (under C(ansible_facts)).
  - Lists the processes of the server's session, the holder of the port, the health answer,
    GPU memory per GPU and the server's compute processes (where nvidia-smi exists), the
    experiment lock, and SGLang processes outside the recorded session (C(unmanaged)).
  - Read-only.
version_added: "1.0.0"
author:
  - sglang-lab
requirements:
  - psutil
options:
  run_dir:
    description: Directory with the run state (server.json, sglang.lock, wait_ready.json).
    type: path
    required: true
  port:
    description: The server's HTTP port.
    type: int
    required: true
  host:
    description: Address to probe the health endpoint on.
    type: str
    default: 127.0.0.1
  health:
    description: Probe the health endpoints.
    type: bool
    default: true
  health_paths:
    description: Health endpoints in order of preference; a 404 moves to the next one.
    type: list
    elements: str
    default: [/health_generate, /health]
  health_timeout_seconds:
    description: Timeout of one health request.
    type: float
    default: 5
  gpu:
    description: Read GPU memory with nvidia-smi (reported as unavailable where it is missing).
    type: bool
    default: true
  nvidia_smi:
    description: nvidia-smi command name or path.
    type: str
    default: nvidia-smi
  patterns:
    description: Command-line regexes of SGLang server processes, to find ones outside the recorded session.
    type: list
    elements: str
    default:
      - '^sglang::(scheduler|detokenizer|data_parallel_controller|tokenizer_worker)'
      - '(^|\s)-m\s+sglang\.launch_server(\s|$)'
      - '(^|/)sglang\s+serve(\s|$)'
      - '(^|\s)-m\s+sglang_sim\.launch_server(\s|$)'
attributes:
  check_mode:
    description: Read-only, runs the same in check mode.
    support: full
  diff_mode:
    description: Not supported.
    support: none
  idempotent:
    description: Never changes anything.
    support: full
  facts:
    description: Sets C(ansible_facts.sglang_server).
    support: full
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
ansible_facts:
  description: Facts set by this module.
  returned: always
  type: dict
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
    LAST_STATE_NAME,
    STATE_NAME,
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
WAIT_STATE_NAME = "wait_ready.json"


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
        patterns=dict(
            type="list",
            elements="str",
            default=[
                r"^sglang::(scheduler|detokenizer|data_parallel_controller|tokenizer_worker)",
                r"(^|\s)-m\s+sglang\.launch_server(\s|$)",
                r"(^|/)sglang\s+serve(\s|$)",
                r"(^|\s)-m\s+sglang_sim\.launch_server(\s|$)",
            ],
        ),
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
    compiled = compile_patterns(p["patterns"])
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
