#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Wait until the SGLang server answers its health endpoint; fail fast, classified, on a crash.

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_server_wait_ready
short_description: Wait for an SGLang server to be ready, failing at once with a classified crash
version_added: "1.0.0"
description:
  - Every O(interval_seconds) reads what the log gained since the last look and matches each
    new line against the crash-signature catalog (O(signatures), the content of
    C(data/crash_signatures.yml)); a background thread probes C(/health_generate) (C(/health)
    when that answers 404).
  - A fatal signature fails the task within O(linger_seconds) (time for the rest of the
    traceback to reach the log), with the class, the matching line, an excerpt around it and
    the remedy. The process exiting without a known signature fails as C(unclassified_crash) with
    the exit status and log tail; the overall timeout fails as C(hang) with the log tail.
  - The timeout counts from the server's start (C(started_at) in server.json), so the wait can
    be called again and again. With O(window_seconds) > 0 one call watches at most that long and
    returns RV(ready)=false with RV(sglang_progress); the role calls it in an C(until:) loop and
    the C(sglang_progress) callback prints the progress line of every retry. Its place in the log
    is kept in C(<run_dir>/wait_ready.json).
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_server.run_dir
  - sglang_lab_server.psutil
  - sglang_lab_server.health
options:
  signatures:
    description:
      - The crash-signature catalog, a list of entries (class, regex, fatal, explanation, remedy,
        optional after / near).
    type: list
    elements: dict
    required: true
  port:
    description: Port to probe; defaults to the port in server.json.
    type: int
  timeout_seconds:
    description:
      - The hard cap - total seconds from the server's start until it counts as hung, however
        the log advances.
    type: float
    default: 3600
  stall_timeout_seconds:
    description:
      - Seconds the log may go without progress before the server counts as hung, below the
        hard cap. Progress is any new line but the access-log lines of health and info probes,
        and any change of an unfinished line (a tqdm bar redrawn with C(\\r)) - a cold GLM-5
        start (weights, FlashInfer JIT, autotune, SGLang's up to 600 s warm-up request) can
        outlast a fixed limit while it keeps printing. 0 disables it (only the hard cap).
    type: float
    default: 600
  window_seconds:
    description: Return after this many seconds with RV(ready)=false to report progress; 0 waits in one call.
    type: float
    default: 0
  interval_seconds:
    description: Seconds between two looks at log, process and health.
    type: float
    default: 0.25
  linger_seconds:
    description: Seconds to keep reading after the first fatal line, so the excerpt holds the rest of the crash.
    type: float
    default: 0.5
  health_timeout_seconds:
    description: Timeout of one health request (SGLang's /health_generate runs a one-token generation).
    type: float
    default: 10
  excerpt_before:
    description: Log lines before the matching line in RV(excerpt).
    type: int
    default: 30
  excerpt_after:
    description: Log lines after the matching line in RV(excerpt).
    type: int
    default: 10
attributes:
  check_mode:
    support: full
    details:
      - Waits the same way (it only reads) but does not save its place.
      - Without a started server it returns at once.
  idempotent:
    support: full
    details:
      - Changes nothing but its place in the log (C(<run_dir>/wait_ready.json));
        RV(ignore:changed) is always false.
"""

EXAMPLES = r"""
- name: Wait until the server is ready (one call, up to 15 minutes from its start)
  sglang_server_wait_ready:
    run_dir: /root/sglang-lab/run
    signatures: "{{ lookup('ansible.builtin.file', 'data/crash_signatures.yml') | from_yaml }}"
    timeout_seconds: 900
"""

RETURN = r"""
ready:
  description: True when the health endpoint answered 200.
  returned: success
  type: bool
phases:
  description:
    - Seconds per start-up phase read from the log's own timestamps (good to about a second) -
      C(init), C(weights), C(kv_cache), C(graph_capture), C(warmup) (HTTP up to ready) and
      C(total); a phase the log does not mark is left out. Also kept in C(<run_dir>/wait_ready.json),
      from where module sglang_bench records it in the ledger (C(launch.startup_phases)).
  returned: always
  type: dict
sglang_progress:
  description: Progress of the wait (tier, elapsed since start, timeout, health, last log line, log lines read).
  returned: always
  type: dict
warnings_found:
  description: Non-fatal catalog matches (class, first line, count).
  returned: always
  type: list
  elements: dict
health:
  description: Health path used, last status and HTTP code, probes sent in this call.
  returned: always
  type: dict
crash_class:
  description: >-
    Class of the failure (a catalog class, unclassified_crash, hang, or stopped_by_sigterm for a
    requested stop).
  returned: failure
  type: str
  sample: dynamo_fp4_jit
crash_line:
  description: The log line that matched (or what stands for it).
  returned: failure
  type: str
crash_line_number:
  description: Line number of RV(crash_line) in the log.
  returned: failure
  type: int
excerpt:
  description: The log around the matching line (the log tail for hang / unclassified_crash).
  returned: failure
  type: str
explanation:
  description: What the class means (from the catalog).
  returned: failure
  type: str
remedy:
  description: What to do (from the catalog).
  returned: failure
  type: str
log:
  description: The server log that was read.
  returned: always
  type: str
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.sglang_crash import CatalogError, compile_catalog
from ansible.module_utils.sglang_process import (
    STATE_NAME,
    WAIT_STATE_NAME,
    is_gone,
    parse_iso,
    psutil,
    read_exit_status,
    read_json,
)
from ansible.module_utils.sglang_ready import startup_phases, wait_ready, write_progress


def main():
    argument_spec = dict(
        run_dir=dict(type="path", required=True),
        signatures=dict(type="list", elements="dict", required=True),
        host=dict(type="str", default="127.0.0.1"),
        port=dict(type="int"),
        timeout_seconds=dict(type="float", default=3600.0),
        stall_timeout_seconds=dict(type="float", default=600.0),
        window_seconds=dict(type="float", default=0.0),
        interval_seconds=dict(type="float", default=0.25),
        linger_seconds=dict(type="float", default=0.5),
        health_paths=dict(type="list", elements="str", default=["/health_generate", "/health"]),
        health_timeout_seconds=dict(type="float", default=10.0),
        excerpt_before=dict(type="int", default=30),
        excerpt_after=dict(type="int", default=10),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    if psutil is None:
        module.fail_json(msg=missing_required_lib("psutil"))
    p = module.params
    try:
        catalog = compile_catalog(p["signatures"])
    except CatalogError as exc:
        module.fail_json(msg=f"crash-signature catalog (sglang_server_crash_signatures_file): {exc}")

    server = read_json(os.path.join(p["run_dir"], STATE_NAME))
    if not server:
        if module.check_mode:
            module.exit_json(
                changed=False,
                ready=False,
                skipped_reason="no server started (check mode)",
                sglang_progress={},
                warnings_found=[],
                health={},
                log=None,
            )
        module.fail_json(msg="no server is recorded in {}; start one first (playbooks/start.yml)".format(p["run_dir"]))
    port = p["port"] or server.get("port")
    log_path = server.get("log")
    started_epoch = parse_iso(server.get("started_at")) or time.time()
    deadline_s = started_epoch + p["timeout_seconds"] - time.time()

    wait_state_path = os.path.join(p["run_dir"], WAIT_STATE_NAME)
    saved = read_json(wait_state_path) or {}
    server_key = "{}@{}".format(server.get("pid"), server.get("started_at"))
    state = saved.get("state") if saved.get("server") == server_key else None

    try:
        proc = psutil.Process(server["pid"])
        created = server.get("pid_create_time")
        if created is not None and abs(proc.create_time() - created) > 1.0:
            proc = None
    except (psutil.NoSuchProcess, KeyError, TypeError):
        proc = None

    def is_alive():
        return proc is not None and not is_gone(proc)

    def progress_dict(progress):
        return {
            "tier": server.get("tier"),
            "elapsed_s": round(time.time() - started_epoch, 1),
            "timeout_s": p["timeout_seconds"],
            "health": progress.get("health"),
            "health_code": progress.get("health_code"),
            "health_path": progress.get("health_path"),
            "log_lines": progress.get("log_lines"),
            "last_line": progress.get("last_line"),
        }

    def save(progress, current_state=None, phases=None):
        if module.check_mode:
            return
        data = {"server": server_key, "progress": progress_dict(progress), "updated_at": time.time()}
        if phases is not None:
            data["phases"] = phases
        data["state"] = current_state if current_state is not None else (state or {})
        write_progress(wait_state_path, data)

    outcome = wait_ready(
        log_path=log_path,
        catalog=catalog,
        is_alive=is_alive,
        host=p["host"],
        port=port,
        deadline_s=deadline_s,
        window_s=p["window_seconds"] or None,
        interval=p["interval_seconds"],
        linger_s=p["linger_seconds"],
        health_paths=p["health_paths"],
        health_timeout=p["health_timeout_seconds"],
        state=state,
        progress_fn=lambda progress: save(progress),
        exit_status_fn=lambda: read_exit_status(p["run_dir"]),
        excerpt_before=p["excerpt_before"],
        excerpt_after=p["excerpt_after"],
        stall_s=p["stall_timeout_seconds"] or None,
        started_wall=started_epoch,
    )
    ready_wall = time.time() if outcome["outcome"] == "ready" else None
    phases = startup_phases(outcome["marks"], started_at=started_epoch, ready_at=ready_wall)
    progress = progress_dict(outcome["progress"])
    save(outcome["progress"], outcome["state"], phases)
    common = dict(
        changed=False,
        sglang_progress=progress,
        warnings_found=outcome["warnings"],
        health=outcome["health"],
        log=log_path,
        tier=server.get("tier"),
        phases=phases,
    )
    tier = server.get("tier")
    if outcome["outcome"] == "ready":
        used = outcome["health"]["path"]
        elapsed = progress["elapsed_s"]
        module.exit_json(ready=True, msg=f"tier {tier} is ready after {elapsed:.1f} s ({used} answered 200)", **common)
    if outcome["outcome"] == "pending":
        elapsed, timeout = progress["elapsed_s"], p["timeout_seconds"]
        msg = f"tier {tier} not ready yet after {elapsed:.0f} s of {timeout:.0f} s"
        module.exit_json(ready=False, pending=True, msg=msg, **common)
    report = outcome["report"] or {}
    what = {
        "crashed": "crashed",
        "exited": "exited before it was ready",
        "stopped": "was stopped with SIGTERM before it was ready (a requested stop, not a crash)",
        "hang": (
            "stopped making progress in its log"
            if (outcome["report"] or {}).get("stalled_s") is not None
            else "was not ready after {:.0f} s".format(p["timeout_seconds"])
        ),
    }[outcome["outcome"]]
    msg = "SGLang tier {} {}: {}. {} Remedy: {} Log: {}".format(
        server.get("tier"),
        what,
        report.get("crash_class"),
        ("Line {}: {}.".format(report.get("crash_line_number"), report.get("crash_line")))
        if report.get("crash_line")
        else "",
        report.get("remedy"),
        log_path,
    )
    module.fail_json(msg=msg, ready=False, **report, **common)


if __name__ == "__main__":
    main()
