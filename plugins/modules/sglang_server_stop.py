#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Stop the SGLang server and prove it is gone: no process left, port free, GPU memory released.

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_server_stop
short_description: Stop an SGLang server and verify that nothing of it is left
version_added: "1.0.0"
description:
  - Finds the server's processes by the session id recorded at start (every child keeps it,
    even when orphaned), by the pidfile's process and its descendants, and, as a safety net
    (O(kill_by_pattern)), by command lines that match SGLang's process titles.
  - Sends SIGTERM to all of them, waits O(grace_seconds), sends SIGKILL to the survivors, then
    verifies that none runs, that the port is free and, where nvidia-smi exists, that none of
    those PIDs holds GPU memory (polled up to O(gpu_release_timeout_seconds)).
  - Never signals its own process or any of its ancestors (Ansible, the shell, sshd).
  - A zombie (exited, not yet collected by its parent) holds no memory, GPU context or socket;
    it counts as gone and is listed under RV(zombies), never as a survivor.
  - Fails, naming PID, command line and state (for example disk-sleep 'D'), when a process
    survives SIGKILL; fails naming the holder when the port stays taken.
  - On success the pidfile is removed and server.json becomes server.last.json.
  - Interrupted (SIGINT, or SIGTERM, which Ansible passes from ansible-playbook to the module)
    while it waits for the SIGTERM to work, it does not leave half a server holding GPU memory
    and the port. It sends SIGKILL to every process of the server at once, verifies as usual,
    and then fails with RV(interrupted) set (the play's rescue records the attempt as interrupted).
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_server.run_dir
  - sglang_lab_server.psutil
  - sglang_lab_server.port
  - sglang_lab_server.patterns
  - sglang_lab_nvidia_smi
options:
  grace_seconds:
    description: Seconds between SIGTERM and SIGKILL.
    type: float
    default: 30
  kill_wait_seconds:
    description: Seconds to wait for the processes after SIGKILL before calling them survivors.
    type: float
    default: 10
  orphan_grace_seconds:
    description:
      - Once the server's top processes (the recorded pid, the session leader and their direct
        children) are gone, the processes still running are orphans that SGLang's main process
        did not take down (for example a scheduler that ignores SIGTERM); they get this many
        seconds more, not the rest of O(grace_seconds), before SIGKILL.
    type: float
    default: 1
  workers_gone_grace_seconds:
    description:
      - Once every SGLang GPU worker (a C(sglang::scheduler*) or
        C(sglang::data_parallel_controller) process) has exited on the SIGTERM, the
        processes still running get this many seconds more before SIGKILL. After our own
        SIGTERM, SGLang 0.5.17's main process logs the scheduler's exit as a crash and sleeps
        5 s "before crash diagnostics" while holding the port; this ends that sleep. A worker
        that ignores SIGTERM keeps O(grace_seconds). Set it to O(grace_seconds) to wait the
        sleep out.
    type: float
    default: 0.5
  kill_by_pattern:
    description:
      - Also stop processes whose command line matches O(patterns) even when they are not in the
        recorded session (a server started by hand, or state lost). Meant for a node dedicated
        to these experiments; reported in RV(kill_by_pattern).
    type: bool
    default: true
  max_rounds:
    description: How many times to look again for server processes that appeared during the stop.
    type: int
    default: 3
  port_release_timeout_seconds:
    description: Seconds to wait for the port to become free after the processes are gone.
    type: float
    default: 15
  gpu_check:
    description:
      - Verify with nvidia-smi that no stopped PID still holds GPU memory.
      - Skipped, and said so in RV(gpu), where nvidia-smi is missing.
    type: bool
    default: true
  gpu_release_timeout_seconds:
    description: Seconds to poll nvidia-smi until the stopped PIDs no longer hold GPU memory.
    type: float
    default: 60
attributes:
  check_mode:
    support: full
    details: Reports what would be stopped and changes nothing.
  idempotent:
    support: full
    details: With nothing running, nothing is done and RV(ignore:changed) is false.
"""

EXAMPLES = r"""
- name: Stop the SGLang server
  sglang_server_stop:
    run_dir: /root/sglang-lab/run
    port: 8000
    grace_seconds: 30
  register: sglang_server_stop_result
"""

RETURN = r"""
stopped:
  description: One record per process found, with how it was found and what happened to it.
  returned: always
  type: list
  elements: dict
  sample:
    - pid: 4242
      cmdline: python3 -m sglang.launch_server --model-path x --tp-size 8
      found_by: [pidfile, session]
      signals: [TERM]
      outcome: exited-on-term
survivors:
  description: Processes that still ran after SIGKILL (the module fails when there are any).
  returned: always
  type: list
  elements: dict
zombies:
  description: Processes that exited but whose status nobody collected; they hold nothing.
  returned: always
  type: list
  elements: dict
port:
  description: The port check after the stop (free, holders).
  returned: always
  type: dict
gpu:
  description: >-
    GPU verification: available, checked, released, holding (compute processes of the stopped
    PIDs still on a GPU), memory_settled / pending_gpus (whether each GPU's memory.used has come
    down by what those PIDs held; the driver frees it shortly after the process list empties),
    before / after (memory used per GPU, MiB, after taken from the settled read), error.
  returned: always
  type: dict
kill_by_pattern:
  description: Whether the command-line safety net was used.
  returned: always
  type: bool
protected:
  description: Processes that matched but were left alone because they are this module or its ancestors.
  returned: always
  type: list
  elements: dict
timings:
  description:
    - Seconds spent in the TERM phase and in total; C(workers_gone_s) when the GPU workers had all
      exited on the SIGTERM and the rest was given O(workers_gone_grace_seconds) (records of
      processes killed then say C(after_workers)).
  returned: always
  type: dict
interrupted:
  description: >-
    The signal (C(SIGINT) or C(SIGTERM)) that interrupted the stop; the server's remaining
    processes were then killed with SIGKILL and the result verified. Absent when not interrupted.
  returned: when interrupted
  type: str
cleaned:
  description: >-
    Run-state files removed (server.json is kept as server.last.json). Cleaning the state of a
    server that had already exited does not count as a change: RV(ignore:changed) is true only
    when a process was signalled.
  returned: success
  type: list
  elements: str
"""

import os
import re
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.sglang_process import (
    KILL_PATTERNS,
    LAST_STATE_NAME,
    PIDFILE_NAME,
    STATE_NAME,
    WAIT_STATE_NAME,
    WORKER_PATTERN,
    Interrupted,
    atomic_write_json,
    describe,
    find_server_processes,
    format_holders,
    now_iso,
    parse_iso,
    protected_pids,
    psutil,
    raise_on_sigterm,
    read_json,
    read_pidfile,
    split_alive,
    stop_processes,
    wait_gpu_released,
    wait_port_free,
)

try:
    from ansible.module_utils.nvidia_smi import gpu_snapshot

    HAS_NVIDIA_SMI_UTILS = True
except ImportError:
    HAS_NVIDIA_SMI_UTILS = False



def main():
    argument_spec = dict(
        run_dir=dict(type="path", required=True),
        port=dict(type="int", required=True),
        grace_seconds=dict(type="float", default=30.0),
        kill_wait_seconds=dict(type="float", default=10.0),
        orphan_grace_seconds=dict(type="float", default=1.0),
        workers_gone_grace_seconds=dict(type="float", default=0.5),
        kill_by_pattern=dict(type="bool", default=True),
        # None: the built-in SGLang patterns, KILL_PATTERNS in module_utils/sglang_process.py.
        patterns=dict(type="list", elements="str"),
        max_rounds=dict(type="int", default=3),
        port_release_timeout_seconds=dict(type="float", default=15.0),
        gpu_check=dict(type="bool", default=True),
        nvidia_smi=dict(type="str", default="nvidia-smi"),
        gpu_release_timeout_seconds=dict(type="float", default=60.0),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    if psutil is None:
        module.fail_json(msg=missing_required_lib("psutil"))
    p = module.params
    started = time.monotonic()
    run_dir = p["run_dir"]
    state_path = os.path.join(run_dir, STATE_NAME)
    pidfile = os.path.join(run_dir, PIDFILE_NAME)
    state = read_json(state_path) or {}
    pid = state.get("pid")
    if not pid:
        # server.json lost: trust the pidfile only if its pid is still our wrapper (pid reuse).
        pid = read_pidfile(pidfile)
        try:
            if pid and "sglang-server-wrapper" not in " ".join(psutil.Process(pid).cmdline()):
                pid = None
        except psutil.Error:
            pid = None
    if not p["kill_by_pattern"]:
        patterns = []
    else:
        patterns = KILL_PATTERNS if p["patterns"] is None else p["patterns"]
    protected = protected_pids()

    def discover():
        try:
            return find_server_processes(
                sid=state.get("sid"),
                pid=pid,
                pid_create_time=state.get("pid_create_time"),
                started_at=parse_iso(state.get("started_at")),
                patterns=patterns,
                protected=protected,
            )
        except ValueError as exc:
            module.fail_json(msg=f"sglang_server_stop: {exc}; fix sglang_server_kill_patterns.")

    targets, skipped = discover()
    alive, zombies_before = split_alive(targets)

    gpu_before = None
    snapshot_fn = None
    if p["gpu_check"] and HAS_NVIDIA_SMI_UTILS:

        def snapshot_fn():
            return gpu_snapshot(module.run_command, p["nvidia_smi"])

        gpu_before = snapshot_fn()

    result = dict(
        changed=bool(alive),
        kill_by_pattern=p["kill_by_pattern"],
        protected=skipped,
        state_file=state_path if state else None,
        tier=state.get("tier"),
    )

    if module.check_mode:
        result.update(
            stopped=[
                dict(describe(targets[pid_]["proc"]), found_by=targets[pid_]["found_by"], outcome="would-stop")
                for pid_ in alive
            ],
            survivors=[],
            zombies=[describe(targets[pid_]["proc"]) for pid_ in zombies_before],
            port={"port": p["port"], "checked": False},
            gpu={"available": bool(gpu_before and gpu_before.get("available")), "checked": False},
            timings={},
        )
        module.exit_json(**result)

    roots = set()
    for top in {pid, state.get("sid")} - {None}:
        if top in targets:
            roots.add(top)
            try:
                roots.update(child.pid for child in targets[top]["proc"].children())
            except psutil.Error:
                pass

    worker_re = re.compile(WORKER_PATTERN)
    workers = {pid_ for pid_, entry in targets.items() if worker_re.search(describe(entry["proc"])["cmdline"] or "")}

    records, handled = [], set()
    term_phase = 0.0
    workers_gone = None
    interrupted = None
    raise_on_sigterm()
    try:
        for _round in range(max(1, p["max_rounds"])):
            batch = {pid_: entry for pid_, entry in targets.items() if pid_ not in handled}
            if not batch:
                break
            round_records, timings = stop_processes(
                batch,
                p["grace_seconds"],
                p["kill_wait_seconds"],
                roots=roots,
                orphan_grace_seconds=p["orphan_grace_seconds"],
                workers=workers,
                workers_gone_grace_seconds=p["workers_gone_grace_seconds"],
            )
            term_phase += timings["term_phase_s"]
            if workers_gone is None and "workers_gone_s" in timings:
                workers_gone = round(term_phase - timings["term_phase_s"] + timings["workers_gone_s"], 3)
            records.extend(round_records)
            handled.update(batch)
            # Anything started during the stop (a child forked just before SIGTERM)?
            targets, more_skipped = discover()
            skipped.extend(item for item in more_skipped if item not in skipped)
            targets = {pid_: entry for pid_, entry in targets.items() if pid_ not in handled}
            still_alive, _zombies = split_alive(targets)
            targets = {pid_: targets[pid_] for pid_ in still_alive}
    except KeyboardInterrupt as exc:  # SIGINT, or SIGTERM through raise_on_sigterm
        interrupted = "SIGTERM" if isinstance(exc, Interrupted) else "SIGINT"
        # The interrupted round's records are lost with it; the kill pass records every process
        # still found, so the result still lists what was signalled and how it ended.
        rest, more_skipped = discover()
        skipped.extend(item for item in more_skipped if item not in skipped)
        rest_alive, _zombies = split_alive(rest)
        kill_records, _timings = stop_processes(
            {pid_: rest[pid_] for pid_ in rest_alive},
            0.0,
            p["kill_wait_seconds"],
            roots=roots,
            orphan_grace_seconds=0.0,
            workers=workers,
            workers_gone_grace_seconds=0.0,
        )
        records.extend(kill_records)

    survivors = [record for record in records if record.get("outcome") == "survivor"]
    zombies = [
        {"pid": record["pid"], "cmdline": record["cmdline"]}
        for record in records
        if record.get("outcome") == "zombie" or record.get("zombie_after")
    ]
    stopped_pids = [record["pid"] for record in records if record.get("outcome") not in ("gone-before",)]

    port = wait_port_free(p["port"], p["port_release_timeout_seconds"])
    if snapshot_fn is not None:
        gpu = wait_gpu_released(
            snapshot_fn, stopped_pids, p["gpu_release_timeout_seconds"], before=gpu_before, interval=0.25
        )
    elif p["gpu_check"]:
        gpu = {"available": False, "checked": False, "error": "module_utils nvidia_smi is not installed"}
    else:
        gpu = {"available": None, "checked": False, "error": "gpu_check is false"}

    result.update(
        changed=bool(alive) or any(record.get("signals") for record in records),
        stopped=records,
        survivors=survivors,
        zombies=zombies,
        port=port,
        gpu=gpu,
        timings=dict(
            {"term_phase_s": round(term_phase, 3), "total_s": round(time.monotonic() - started, 3)},
            **({"workers_gone_s": workers_gone} if workers_gone is not None else {}),
        ),
    )
    if zombies:
        module.warn(
            f"{len(zombies)} stopped process(es) remain as zombies (exited; their parent has not collected "
            f"the exit status): pids {', '.join(str(z['pid']) for z in zombies)}. They hold no memory, GPU "
            "context or port."
        )

    problems = []
    if survivors:
        problems.append(
            "these processes survived SIGKILL: "
            + "; ".join(
                "pid {} ({}) state {}".format(s["pid"], s["cmdline"] or "?", s.get("state", s.get("status_after")))
                for s in survivors
            )
            + ". A process in disk-sleep 'D' ends when its I/O returns (check the storage/driver); "
            "otherwise check that this user may signal it"
        )
    if not port["free"]:
        problems.append(
            f"port {p['port']} is still taken by {format_holders(port['holders'])} after "
            f"{p['port_release_timeout_seconds']:.0f} s; stop that process or choose another sglang_server_port"
        )
    if gpu.get("checked") and gpu.get("released") is False:
        problems.append(
            "GPU memory is still held by stopped PIDs after {:.0f} s: {}; nvidia-smi shows them, so the "
            "driver has not torn down their CUDA context yet (a D-state process or a hung GPU: check dmesg)".format(
                p["gpu_release_timeout_seconds"],
                ", ".join(
                    "pid {} on GPU {} ({} MiB)".format(h["pid"], h.get("gpu_index"), h.get("used_memory_mib"))
                    for h in gpu["holding"]
                ),
            )
        )
    if gpu.get("memory_settled") is False and not gpu.get("holding"):
        module.warn(
            "no stopped PID is listed on a GPU any more, but memory.used on GPU(s) {} had not come down by "
            "what they held within {:.0f} s; another process may have allocated meanwhile (see gpu.after)".format(
                ", ".join(str(i) for i in gpu.get("pending_gpus", [])), p["gpu_release_timeout_seconds"]
            )
        )
    if problems:
        result["msg"] = f"sglang_server_stop in {run_dir}: " + " | ".join(problems)
        module.fail_json(**result)

    if state:
        atomic_write_json(
            os.path.join(run_dir, LAST_STATE_NAME),
            dict(state, stopped_at=now_iso(), stopped_pids=stopped_pids),
        )
        os.unlink(state_path)
    cleaned = [state_path] if state else []
    for leftover in (pidfile, os.path.join(run_dir, WAIT_STATE_NAME)):
        if os.path.exists(leftover):
            os.unlink(leftover)
            cleaned.append(leftover)
    # `changed` says whether a server was running; moving stale state files after a crash is
    # bookkeeping, listed here.
    result["cleaned"] = cleaned
    if interrupted:
        result.update(
            interrupted=interrupted,
            msg=f"sglang_server_stop in {run_dir}: interrupted ({interrupted}) while the server stopped; its "
            f"remaining processes were killed (SIGKILL) and the stop verified: no process left, port free",
        )
        module.fail_json(**result)
    result["msg"] = (
        f"stopped {len(alive)} process(es) of tier {state.get('tier')}" if alive else "no SGLang server was running"
    )
    module.exit_json(**result)


if __name__ == "__main__":
    main()
