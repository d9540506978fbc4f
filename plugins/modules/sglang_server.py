#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SGLang server lifecycle in one module: state stopped, started or ready."""

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_server
short_description: Bring an SGLang server to a state - stopped (verified), started, ready
version_added: "1.0.0"
description:
  - One module for the server's lifecycle, as community.docker's docker_container is for a
    container; what runs is read by M(sglang_server_info), the experiment lock is M(sglang_server_lock).
    The server is one object, O(server), with one argument spec wherever it enters.
  - C(state=stopped) - the verified stop. Finds the server's processes by the session id recorded
    at start (every child keeps it, even when orphaned), by the pidfile's process and its
    descendants, and, as a safety net (O(stop.kill_by_pattern)), by command lines that match
    SGLang's process titles (O(server.patterns)). Sends SIGTERM to all of them, waits
    O(stop.grace_seconds), sends SIGKILL to the survivors, then verifies that none runs, that the
    port is free and, where nvidia-smi exists (O(server.gpu_check)), that none of those PIDs holds
    GPU memory. Never signals its own process or any of its ancestors. A zombie counts as gone
    (RV(zombies)). Fails naming PID, command line and state when a process survives SIGKILL, and
    the holder when the port stays taken. On success the pidfile is removed and server.json
    becomes server.last.json. Interrupted (SIGINT or SIGTERM) it kills every process of the server
    at once, verifies as usual, and fails with RV(interrupted) set.
  - C(state=started) - runs O(script) detached in a session of its own (double fork, stdin from
    /dev/null, stdout and stderr to C(<server.log_dir>/<tier>.log), the previous log rotated) and
    records C(<run_dir>/sglang.pid) and C(<run_dir>/server.json). Refuses when the port is taken
    (naming the holder) or another recorded server still runs; unchanged when the same tier with
    the same script (sha256) already runs on the same port. Does not wait for readiness.
  - C(state=ready) - the ready-wait of the started server. Every O(ready.interval_seconds) reads what
    the log gained and matches each new line against the crash-signature catalog
    (O(ready.signatures), the content of C(data/crash_signatures.yml)) while a background thread
    probes the health endpoint. A fatal signature fails the task within O(ready.linger_seconds)
    with the class, the line, an excerpt and the remedy; an exit without a known signature fails
    as C(unclassified_crash), the timeout as C(hang). The timeout counts from the server's start,
    so the call can be repeated - with O(ready.window_seconds) > 0 one call watches at most that
    long and returns RV(pending) with RV(sglang_progress); the role calls it in an C(until:) loop
    and the C(sglang_progress) callback prints every retry. Its place in the log is kept in
    C(<run_dir>/wait_ready.json).
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_server.server
  - sglang_lab_server.ready
  - sglang_lab_server.psutil
options:
  state:
    description: The state to bring the server to.
    type: str
    required: true
    choices: [stopped, started, ready]
  script:
    description:
      - C(state=started) - the rendered launch script (executable, for example C(<launch dir>/<tier>.sh)
        mode 0750).
    type: path
  tier:
    description: C(state=started) - the tier id the script launches (names the log file).
    type: str
  env:
    description: C(state=started) - extra environment variables for the script (on top of the module's environment).
    type: dict
    default: {}
  settle_seconds:
    description:
      - C(state=started) - seconds to watch the new process before returning, to report an immediate
        exit (bad interpreter, missing file).
    type: float
    default: 0.5
  stop:
    description: C(state=stopped) - how the stop proceeds.
    type: dict
    default: {}
    suboptions:
      grace_seconds:
        description: Seconds between SIGTERM and SIGKILL.
        type: float
        default: 30.0
      kill_wait_seconds:
        description: Seconds to wait for the processes after SIGKILL before calling them survivors.
        type: float
        default: 10.0
      orphan_grace_seconds:
        description:
          - Once the server's top processes (the recorded pid, the session leader and their direct
            children) are gone, the processes still running (orphans) get this many seconds more,
            not the rest of O(stop.grace_seconds), before SIGKILL.
        type: float
        default: 1.0
      workers_gone_grace_seconds:
        description:
          - Once every SGLang GPU worker (C(sglang::scheduler*), C(sglang::data_parallel_controller))
            has exited on the SIGTERM, the processes still running get this many seconds more before
            SIGKILL (SGLang 0.5.17's main process otherwise sleeps 5 s "before crash diagnostics"
            holding the port).
        type: float
        default: 0.2
      kill_by_pattern:
        description:
          - Also stop processes whose command line matches O(server.patterns) even when they are not
            in the recorded session (a server started by hand, or state lost). Reported in
            RV(kill_by_pattern).
        type: bool
        default: true
      max_rounds:
        description: How many times to look again for server processes that appeared during the stop.
        type: int
        default: 3
      port_release_timeout_seconds:
        description: Seconds to wait for the port to become free after the processes are gone.
        type: float
        default: 15.0
      gpu_release_timeout_seconds:
        description: Seconds to poll nvidia-smi until the stopped PIDs no longer hold GPU memory.
        type: float
        default: 60.0
  lock:
    description:
      - C(state=stopped) - take the per-host experiment lock first, as M(sglang_server_lock) with
        C(state=present) takes it, in the same call. A caller that locks and then stops (role
        sglang_experiment's cycle) saves a module call. Nothing is looked at or stopped unless the
        lock is held; another experiment's lock fails the call with RV(lock_refused) set.
      - Left out, the stop takes no lock.
    type: dict
    suboptions:
      token:
        description: The holder's token, as M(sglang_server_lock)'s option of that name.
        type: str
        required: true
      play:
        description: The name recorded for the holder, as M(sglang_server_lock)'s.
        type: str
        default: ""
      max_age_seconds:
        description: When an unverifiable lock counts as stale, as M(sglang_server_lock)'s (0 never).
        type: int
        default: 86400
      force:
        description: Take the lock whoever holds it, as M(sglang_server_lock)'s.
        type: bool
        default: false
attributes:
  check_mode:
    support: full
    details:
      - stopped - reports what would be stopped; started - checks the script, the port and a running
        server, starts nothing; ready - waits the same way (it only reads) without saving its place.
  idempotent:
    support: full
    details:
      - stopped with nothing running, and started with the same tier and script running, change
        nothing (RV(ignore:changed) false); ready changes only its place in the log.
"""

EXAMPLES = r"""
- name: Stop the SGLang server and verify that nothing of it is left
  sglang_server:
    state: stopped
    server:
      run_dir: /root/sglang-lab/run
      port: 8000
    stop:
      grace_seconds: 30

- name: Start the tier's launch script
  sglang_server:
    state: started
    server:
      run_dir: /root/sglang-lab/run
      port: 8000
      log_dir: /root/sglang-lab/logs
    script: /root/sglang-lab/launch/baseline.sh
    tier: baseline

- name: Wait for it, one 5 s window per call, with progress between the calls
  sglang_server:
    state: ready
    server:
      run_dir: /root/sglang-lab/run
      port: 8000
    ready:
      signatures: "{{ lookup('ansible.builtin.file', 'data/crash_signatures.yml') | from_yaml }}"
      window_seconds: 5
  register: ready
  until: not (ready.pending | default(false))
  retries: 800
  delay: 0
"""

RETURN = r"""
state:
  description: The state this call was asked for (O(state)), in every result, failed or not.
  returned: always
  type: str
  sample: stopped
msg:
  description: What was done, in one line.
  returned: always
  type: str
stopped:
  description: state=stopped - one record per process found, how it was found and what happened to it.
  returned: state=stopped
  type: list
  elements: dict
  sample:
    - pid: 4242
      cmdline: python3 -m sglang.launch_server --model-path x --tp-size 8
      found_by: [pidfile, session]
      signals: [TERM]
      outcome: exited-on-term
survivors:
  description: state=stopped - processes that still ran after SIGKILL (the module fails when there are any).
  returned: state=stopped
  type: list
  elements: dict
zombies:
  description: state=stopped - processes that exited but whose status nobody collected; they hold nothing.
  returned: state=stopped
  type: list
  elements: dict
port:
  description: state=stopped - the port check after the stop (free, holders).
  returned: state=stopped
  type: dict
gpu:
  description: >-
    state=stopped - GPU verification: available, checked, released, holding (compute processes of
    the stopped PIDs still on a GPU), memory_settled / pending_gpus, before / after (MiB per GPU), error.
  returned: state=stopped
  type: dict
kill_by_pattern:
  description: state=stopped - whether the command-line safety net was used.
  returned: state=stopped
  type: bool
protected:
  description: state=stopped - processes that matched but were left alone (this module or its ancestors).
  returned: state=stopped
  type: list
  elements: dict
timings:
  description:
    - state=stopped - seconds in the TERM phase and in total; C(workers_gone_s) when the GPU workers
      all exited on SIGTERM.
  returned: state=stopped
  type: dict
lock:
  description:
    - state=stopped with O(lock) - the lock taken (changed, holder, took_over, path), as
      M(sglang_server_lock) returns it.
  returned: state=stopped, with O(lock)
  type: dict
lock_refused:
  description: state=stopped with O(lock) - true when another experiment holds the lock; nothing was stopped.
  returned: when refused
  type: bool
interrupted:
  description: state=stopped - the signal that interrupted the stop (the rest was killed and the result verified).
  returned: when interrupted
  type: str
cleaned:
  description: state=stopped - run-state files removed (server.json is kept as server.last.json).
  returned: state=stopped, success
  type: list
  elements: str
server:
  description:
    - state=started - the run state written to server.json (tier, pid, sid, port, started_at, script,
      script_sha256, log).
  returned: state=started
  type: dict
rotated:
  description: state=started - the log renames done, oldest first (source, destination; null means deleted).
  returned: state=started
  type: list
  elements: list
already_running:
  description: state=started - true when the same tier and script were already running, so nothing was started.
  returned: state=started
  type: bool
ready:
  description: state=ready - true when the health endpoint answered 200.
  returned: state=ready
  type: bool
pending:
  description: state=ready - true when the window ended before the server was ready (call again).
  returned: state=ready, when pending
  type: bool
phases:
  description:
    - state=ready - seconds per start-up phase read from the log's timestamps (C(init), C(weights),
      C(kv_cache), C(graph_capture), C(warmup), C(total)); also kept in C(<run_dir>/wait_ready.json).
  returned: state=ready
  type: dict
sglang_progress:
  description:
    - state=ready - progress of the wait (tier, elapsed since start, timeout, health, last log line,
      log lines read).
  returned: state=ready
  type: dict
warnings_found:
  description: state=ready - non-fatal catalog matches (class, first line, count).
  returned: state=ready
  type: list
  elements: dict
health:
  description: state=ready - health path used, last status and HTTP code.
  returned: state=ready
  type: dict
crash_class:
  description: state=ready - class of the failure (a catalog class, unclassified_crash, hang, or stopped_by_sigterm).
  returned: state=ready, failure
  type: str
  sample: dynamo_fp4_jit
crash_line:
  description: state=ready - the log line that matched (or what stands for it).
  returned: state=ready, failure
  type: str
crash_line_number:
  description: state=ready - line number of RV(crash_line) in the log.
  returned: state=ready, failure
  type: int
excerpt:
  description: state=ready - the log around the matching line (the log tail for hang / unclassified_crash).
  returned: state=ready, failure
  type: str
explanation:
  description: state=ready - what the class means (from the catalog).
  returned: state=ready, failure
  type: str
remedy:
  description: state=ready - what to do (from the catalog).
  returned: state=ready, failure
  type: str
log:
  description: state=ready - the server log that was read.
  returned: state=ready
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_lock import LOCK_SPEC
from ansible.module_utils.sglang_lock import take as take_lock
from ansible.module_utils.sglang_server_ops import (
    READY_SPEC,
    STATES,
    STOP_SPEC,
    require_psutil,
    run_ready,
    run_started,
    run_stopped,
    server_option,
    settings,
    sub_option,
)


def main():
    argument_spec = dict(
        state=dict(type="str", required=True, choices=list(STATES)),
        server=server_option(),
        script=dict(type="path"),
        tier=dict(type="str"),
        env=dict(type="dict", default={}),
        settle_seconds=dict(type="float", default=0.5),
        stop=sub_option(STOP_SPEC),
        ready=sub_option(READY_SPEC),
        lock=dict(type="dict", options=LOCK_SPEC),
    )
    module = AnsibleModule(
        argument_spec=argument_spec,
        required_if=[("state", "started", ("script", "tier"))],
        supports_check_mode=True,
    )
    require_psutil(module)
    state = module.params["state"]
    # Every result names the state it was asked for (RV(state)): a log or a test tells a stop
    # from a start from a ready-wait by the result alone.
    # With O(lock), every result of the stop names the lock taken too (RV(lock)).
    extra = {"state": state}
    exit_json, fail_json = module.exit_json, module.fail_json
    module.exit_json = lambda **result: exit_json(**extra, **result)
    module.fail_json = lambda msg, **result: fail_json(msg=msg, **extra, **result)
    p = settings(module.params, "stop", "ready")
    if state == "stopped":
        if p.get("lock"):
            # Before the stop looks at anything: another experiment's lock fails here (lock_refused).
            extra["lock"] = take_lock(module, p["run_dir"], p["lock"])
        run_stopped(module, p)
    elif state == "started":
        if not p["log_dir"]:
            module.fail_json(msg="sglang_server (state=started): server.log_dir (for the server log) is required")
        run_started(module, p)
    else:
        if not p["signatures"]:
            module.fail_json(msg="sglang_server (state=ready): ready.signatures, the crash catalog, is required")
        run_ready(module, p)


if __name__ == "__main__":
    main()
