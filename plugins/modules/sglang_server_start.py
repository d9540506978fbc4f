#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Start the rendered launch script detached, in its own session, and record how to find it.

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_server_start
short_description: Start an SGLang launch script detached and record its run state
version_added: "1.0.0"
description:
  - Refuses when the port is taken, naming the process that holds it (pid and command line).
  - Refuses when another server recorded in O(run_dir) still runs; returns unchanged when the
    same tier with the same launch script (sha256) already runs on the same port.
  - Rotates the previous log (C(<log_dir>/<tier>.log) to C(.log.1) ..., keeping O(log_keep)).
  - Runs the launch script in a new session (setsid) through a double fork, stdin from
    /dev/null, stdout and stderr to the log, every other file descriptor closed. The module
    returns while the server keeps running; the server is never the module's child, so it
    leaves no defunct process behind and does not hold Ansible's pipes.
  - Writes C(<run_dir>/sglang.pid) and C(<run_dir>/server.json) (tier, pid, sid, port,
    started_at, script, script_sha256, log, plus pid_create_time and exit_file). O(run_dir) and
    O(log_dir) are created mode 0750 if missing.
  - Does not wait for readiness; use M(sglang_server_wait_ready).
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_server.run_dir
  - sglang_lab_server.psutil
  - sglang_lab_server.port
options:
  script:
    description: The rendered launch script (executable, for example C(<launch dir>/<tier>.sh) mode 0750).
    type: path
    required: true
  tier:
    description: Tier id the script launches (names the log file).
    type: str
    required: true
  log_dir:
    description: Directory for the logs (created mode 0750 if missing).
    type: path
    required: true
  log_keep:
    description: How many rotated logs of the tier to keep.
    type: int
    default: 5
  env:
    description: Extra environment variables for the script (on top of the module's environment).
    type: dict
    default: {}
  settle_seconds:
    description:
      - Seconds to watch the new process before returning, to report an immediate exit
        (bad interpreter, missing file).
    type: float
    default: 0.5
attributes:
  check_mode:
    support: full
    details: Checks the script, the port and a running server; starts nothing.
  idempotent:
    support: full
    details: The same tier and script already running on the port is left alone (RV(ignore:changed) false).
"""

EXAMPLES = r"""
- name: Start the tier's launch script
  sglang_server_start:
    script: /root/sglang-lab/launch/t01-piecewise-cuda-graph.sh
    tier: t01-piecewise-cuda-graph
    port: 8000
    run_dir: /root/sglang-lab/run
    log_dir: /root/sglang-lab/logs
"""

RETURN = r"""
server:
  description: The run state written to server.json.
  returned: success
  type: dict
  sample:
    tier: baseline
    pid: 5120
    sid: 5120
    port: 30000
    started_at: "2026-05-01T10:00:00+00:00"
    script: /work/main/.work/launch/baseline.sh
    script_sha256: 9f2c...
    log: /work/main/.work/logs/baseline.log
rotated:
  description: The log renames done, oldest first (source, destination; destination null means deleted).
  returned: success
  type: list
  elements: list
already_running:
  description: True when the same tier and script were already running, so nothing was started.
  returned: success
  type: bool
"""

import os
import time

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible.module_utils.sglang_process import (
    EXIT_NAME,
    PIDFILE_NAME,
    STATE_NAME,
    WAIT_STATE_NAME,
    atomic_write_json,
    file_sha256,
    format_holders,
    is_gone,
    now_iso,
    port_status,
    psutil,
    read_exit_status,
    read_json,
    rotate_log,
    rotation_plan,
    server_alive,
    spawn_detached,
    wrapper_argv,
)


def tail(path, count=40):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 65536))
            return handle.read().decode("utf-8", "replace").splitlines()[-count:]
    except OSError:
        return []


def main():
    argument_spec = dict(
        script=dict(type="path", required=True),
        tier=dict(type="str", required=True),
        port=dict(type="int", required=True),
        run_dir=dict(type="path", required=True),
        log_dir=dict(type="path", required=True),
        log_keep=dict(type="int", default=5),
        env=dict(type="dict", default={}),
        settle_seconds=dict(type="float", default=0.5),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    if psutil is None:
        module.fail_json(msg=missing_required_lib("psutil"))
    p = module.params
    script, tier, port = p["script"], p["tier"], p["port"]

    if not os.path.isfile(script):
        module.fail_json(
            msg=f"launch script {script} does not exist; render it first "
            f"(role sglang_launch, playbooks/start.yml -e tier={tier})"
        )
    if not os.access(script, os.X_OK):
        module.fail_json(
            msg=f"launch script {script} is not executable; it must be mode 0750 (role sglang_launch renders it so)"
        )
    if "/" in tier or tier in ("", ".", ".."):
        module.fail_json(msg=f"tier {tier!r} cannot name a log file; use a tier id from data/tiers.yml")

    sha = file_sha256(script)
    state_path = os.path.join(p["run_dir"], STATE_NAME)
    current = read_json(state_path)
    if current and server_alive(current):
        if current.get("tier") == tier and current.get("script_sha256") == sha and current.get("port") == port:
            module.exit_json(
                changed=False,
                already_running=True,
                server=current,
                rotated=[],
                msg="tier {} is already running (pid {} since {})".format(
                    tier, current.get("pid"), current.get("started_at")
                ),
            )
        module.fail_json(
            msg=f"another SGLang server is running from {state_path}: tier {current.get('tier')}, pid "
            f"{current.get('pid')}, port {current.get('port')}, since {current.get('started_at')} (script "
            f"{current.get('script')}). Stop it first (playbooks/stop.yml or role sglang_server tasks_from stop).",
            running=current,
        )

    port_check = port_status(port)
    if not port_check["free"]:
        module.fail_json(
            msg=f"port {port} is already taken by {format_holders(port_check['holders'])}; the server could "
            "not listen there. Stop that process (playbooks/stop.yml stops SGLang servers) or set "
            "sglang_server_port to a free port.",
            port=port_check,
        )

    log_path = os.path.join(p["log_dir"], f"{tier}.log")
    if module.check_mode:
        module.exit_json(
            changed=True,
            already_running=False,
            rotated=rotation_plan(log_path, p["log_keep"]),
            server={"tier": tier, "port": port, "script": script, "script_sha256": sha, "log": log_path},
            msg=f"would start tier {tier}",
        )

    for directory in (p["run_dir"], p["log_dir"]):
        if not os.path.isdir(directory):
            os.makedirs(directory, mode=0o750)
    rotated = rotate_log(log_path, p["log_keep"])
    exit_file = os.path.join(p["run_dir"], EXIT_NAME)
    for stale in (exit_file, os.path.join(p["run_dir"], WAIT_STATE_NAME)):
        if os.path.exists(stale):
            os.unlink(stale)

    env = dict(os.environ)
    env.update({str(key): str(value) for key, value in p["env"].items()})
    try:
        pid = spawn_detached(wrapper_argv(script, exit_file), log_path, cwd=p["run_dir"], env=env)
    except OSError as exc:
        module.fail_json(msg=f"could not start {script}: {exc}")
    proc = psutil.Process(pid)
    server = {
        "tier": tier,
        "pid": pid,
        "sid": os.getsid(pid),
        "port": port,
        "started_at": now_iso(),
        "script": script,
        "script_sha256": sha,
        "log": log_path,
        "pid_create_time": proc.create_time(),
        "exit_file": exit_file,
    }
    with open(os.path.join(p["run_dir"], PIDFILE_NAME), "w", encoding="utf-8") as handle:
        handle.write(f"{pid}\n")
    os.chmod(os.path.join(p["run_dir"], PIDFILE_NAME), 0o640)
    atomic_write_json(state_path, server)

    deadline = time.monotonic() + p["settle_seconds"]
    while time.monotonic() < deadline and not is_gone(proc):
        time.sleep(0.05)
    if is_gone(proc):
        time.sleep(0.1)  # let the wrapper write the exit status
        rc = read_exit_status(p["run_dir"])
        module.fail_json(
            msg=f"the launch script {script} exited at once (rc={rc}); see the log {log_path}. Fix the script or its "
            "interpreter / ml-env path.",
            server=server,
            exit_status=rc,
            log_tail="\n".join(tail(log_path)),
            rotated=rotated,
        )
    module.exit_json(
        changed=True,
        already_running=False,
        server=server,
        rotated=rotated,
        msg=f"started tier {tier}: pid {pid}, log {log_path}",
    )


if __name__ == "__main__":
    main()
