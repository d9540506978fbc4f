# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The server lifecycle, one function per state, for modules sglang_server and sglang_server_info.

One object describes the server (SERVER_SPEC: where its run files live, its port and address,
how it is found, probed and checked on the GPUs), validated by the same argument spec wherever it
enters; each state adds its own options (STOP_SPEC, READY_SPEC, the launch's script/tier/env).
``settings`` flattens the validated options into the dict ``p`` the state functions read. Each
state function ends the module call (exit_json / fail_json), as the five modules it replaces did.
"""

from __future__ import annotations

import os
import re
import time

from ansible.module_utils.basic import missing_required_lib
from ansible.module_utils.sglang_crash import CatalogError, compile_catalog
from ansible.module_utils.sglang_lock import LOCK_NAME
from ansible.module_utils.sglang_process import (
    EXIT_NAME,
    KILL_PATTERNS,
    LAST_STATE_NAME,
    PIDFILE_NAME,
    STATE_NAME,
    WAIT_STATE_NAME,
    WORKER_PATTERN,
    Interrupted,
    atomic_write_json,
    cmdline_matches,
    compile_patterns,
    describe,
    file_sha256,
    find_server_processes,
    format_holders,
    gpu_memory_table,
    is_gone,
    now_iso,
    parse_iso,
    port_holders,
    port_status,
    protected_pids,
    psutil,
    raise_on_sigterm,
    read_exit_status,
    read_json,
    read_pidfile,
    rotate_log,
    rotation_plan,
    server_alive,
    session_processes,
    spawn_detached,
    split_alive,
    stop_processes,
    wait_gpu_released,
    wait_port_free,
    wrapper_argv,
)
from ansible.module_utils.sglang_ready import http_base, probe, startup_phases, wait_ready, write_progress

try:
    from ansible.module_utils.nvidia_smi import gpu_snapshot

    HAS_NVIDIA_SMI_UTILS = True
except ImportError:
    HAS_NVIDIA_SMI_UTILS = False

STATES = ("stopped", "started", "ready")

# The server object: one spec, one doc fragment (plugins/doc_fragments/sglang_lab_server.py).
SERVER_SPEC = dict(
    run_dir=dict(type="path", required=True),
    port=dict(type="int", required=True),
    # The address the server answers on (its health and API); never the inventory host.
    address=dict(type="str", default="127.0.0.1"),
    log_dir=dict(type="path"),
    log_keep=dict(type="int", default=5),
    # None: the built-in SGLang patterns, KILL_PATTERNS in module_utils/sglang_process.py.
    patterns=dict(type="list", elements="str"),
    health_paths=dict(type="list", elements="str", default=["/health_generate", "/health"]),
    health_timeout_seconds=dict(type="float", default=10.0),
    gpu_check=dict(type="bool", default=True),
    nvidia_smi=dict(type="str", default="nvidia-smi"),
)

# state=stopped: the verified stop.
STOP_SPEC = dict(
    grace_seconds=dict(type="float", default=30.0),
    kill_wait_seconds=dict(type="float", default=10.0),
    orphan_grace_seconds=dict(type="float", default=1.0),
    workers_gone_grace_seconds=dict(type="float", default=0.2),
    kill_by_pattern=dict(type="bool", default=True),
    max_rounds=dict(type="int", default=3),
    port_release_timeout_seconds=dict(type="float", default=15.0),
    gpu_release_timeout_seconds=dict(type="float", default=60.0),
)

# state=ready: the windowed ready-wait (and sglang_server_info's classify).
READY_SPEC = dict(
    signatures=dict(type="list", elements="dict"),
    timeout_seconds=dict(type="float", default=3600.0),
    stall_timeout_seconds=dict(type="float", default=600.0),
    window_seconds=dict(type="float", default=0.0),
    interval_seconds=dict(type="float", default=0.25),
    linger_seconds=dict(type="float", default=0.5),
    excerpt_before=dict(type="int", default=30),
    excerpt_after=dict(type="int", default=10),
)


def server_option():
    """The ``server`` option of a module: the server object, validated by SERVER_SPEC."""
    return dict(type="dict", required=True, options=SERVER_SPEC)


def sub_option(spec):
    """A state's own options as one dict option whose defaults apply when it is left out."""
    return dict(type="dict", default={}, options=spec, apply_defaults=True)


def settings(params, *groups):
    """The flat settings a state function reads: the server object's fields, then each named
    group's options, then the top-level options that were given (a left-out one is absent)."""
    flat = dict(params["server"])
    for group in groups:
        flat.update(params.get(group) or {})
    flat.update((key, value) for key, value in params.items()
                if key not in ("server",) + groups and value is not None)
    return flat


def require_psutil(module):
    if psutil is None:
        module.fail_json(msg=missing_required_lib("psutil"))


def tail(path, count=40):
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            handle.seek(max(0, handle.tell() - 65536))
            return handle.read().decode("utf-8", "replace").splitlines()[-count:]
    except OSError:
        return []


def health_check(host, port, paths, timeout):
    base = http_base(host, port)
    status, code, used = "down", None, paths[0]
    for path in paths:
        used = path
        status, code = probe(base + path, timeout)
        if status != "missing":
            break
    return {"path": used, "status": status, "code": code}


def run_started(module, p):
    """state=started: start the launch script detached, in a session of its own, and record it."""
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



def run_stopped(module, p):
    """state=stopped: the verified stop (every process of the server gone, its port free, its GPU memory released).
    Module sglang_server takes the experiment lock before it, when asked (option lock)."""
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
            module.fail_json(msg=f"sglang_server (state=stopped): {exc}; fix sglang_server_kill_patterns.")

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
        result["msg"] = f"sglang_server (state=stopped) in {run_dir}: " + " | ".join(problems)
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
            msg=f"sglang_server (state=stopped) in {run_dir}: interrupted ({interrupted}) while the server "
            f"stopped; its remaining processes were killed (SIGKILL) and the stop verified: no process left, port free",
        )
        module.fail_json(**result)
    result["msg"] = (
        f"stopped {len(alive)} process(es) of tier {state.get('tier')}" if alive else "no SGLang server was running"
    )
    module.exit_json(**result)



def watch(module, p, deadline_s=None, save_place=True):
    """Watch the recorded server's log, process and health (sglang_ready.wait_ready) until it is
    ready, crashed, exited, hung, or the window ends; returns (server, outcome, common), or
    (None, None, None) when no server is recorded. ``deadline_s``: seconds from now (default: the
    timeout counted from the server's start); ``save_place``: keep the place in the log."""
    try:
        catalog = compile_catalog(p["signatures"])
    except CatalogError as exc:
        module.fail_json(msg=f"crash-signature catalog (sglang_server_crash_signatures_file): {exc}")

    server = read_json(os.path.join(p["run_dir"], STATE_NAME))
    if not server:
        return None, None, None
    log_path = server.get("log")
    started_epoch = parse_iso(server.get("started_at")) or time.time()
    if deadline_s is None:
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
        if module.check_mode or not save_place:
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
        host=p["address"],
        port=p["port"],
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
    return server, outcome, common


def failure_message(server, outcome, timeout_seconds):
    """One line for a server that did not become ready: what happened, class, line, remedy, log."""
    report = outcome["report"] or {}
    what = {
        "crashed": "crashed",
        "exited": "exited before it was ready",
        "stopped": "was stopped with SIGTERM before it was ready (a requested stop, not a crash)",
        "hang": (
            "stopped making progress in its log"
            if report.get("stalled_s") is not None
            else f"was not ready after {timeout_seconds:.0f} s"
        ),
    }[outcome["outcome"]]
    return "SGLang tier {} {}: {}. {} Remedy: {} Log: {}".format(
        server.get("tier"),
        what,
        report.get("crash_class"),
        ("Line {}: {}.".format(report.get("crash_line_number"), report.get("crash_line")))
        if report.get("crash_line")
        else "",
        report.get("remedy"),
        server.get("log"),
    )


def run_ready(module, p):
    """state=ready: watch the log and the health endpoint until ready, a crash, a hang, or the window ends (pending)."""
    server, outcome, common = watch(module, p)
    if server is None:
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
    tier = server.get("tier")
    progress = common["sglang_progress"]
    if outcome["outcome"] == "ready":
        used = outcome["health"]["path"]
        elapsed = progress["elapsed_s"]
        module.exit_json(ready=True, msg=f"tier {tier} is ready after {elapsed:.1f} s ({used} answered 200)", **common)
    if outcome["outcome"] == "pending":
        elapsed, timeout = progress["elapsed_s"], p["timeout_seconds"]
        msg = f"tier {tier} not ready yet after {elapsed:.0f} s of {timeout:.0f} s"
        module.exit_json(ready=False, pending=True, msg=msg, **common)
    module.fail_json(msg=failure_message(server, outcome, p["timeout_seconds"]), ready=False,
                     **(outcome["report"] or {}), **common)


def classify(module, p, grace_seconds):
    """sglang_server_info's classify: a recorded server that does not answer healthy gets
    ``grace_seconds`` to die; its log is then read with the crash catalog, as the ready-wait reads
    it. Returns the crash (tier, crash_class, crash_line, crash_line_number, excerpt, explanation,
    remedy, exit_status, log, msg), or None when the server answered ready meanwhile."""
    server, outcome, _common = watch(module, dict(p, window_seconds=0), deadline_s=grace_seconds, save_place=False)
    if server is None or outcome["outcome"] in ("ready", "pending"):
        return None
    report = outcome["report"] or {}
    crash = {key: report.get(key) for key in (
        "crash_class", "crash_line", "crash_line_number", "excerpt", "explanation", "remedy", "exit_status")}
    crash.update(tier=server.get("tier"), log=server.get("log"),
                 msg=failure_message(server, outcome, grace_seconds))
    return crash


def run_info(module, p):
    """sglang_server_info: what runs, its health, the port, GPU memory, the lock (facts)."""
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
        facts["health"] = health_check(p["address"], p["port"], p["health_paths"], p["health_timeout_seconds"])
    else:
        facts["health"] = None

    gpu = p.get("gpu", p["gpu_check"])  # sglang_server_info's gpu, else the server object's
    if gpu and HAS_NVIDIA_SMI_UTILS:
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
            "error": "gpu check disabled" if not gpu else "module_utils nvidia_smi is not installed",
            "gpus": [],
            "server_processes": [],
            "other_processes": [],
        }
    if p["classify"]:
        healthy = facts["running"] and (facts["health"] or {}).get("status") == "ready"
        facts["crash"] = None if healthy or not facts["recorded"] else classify(module, p, p["classify_grace_seconds"])
    module.exit_json(changed=False, ansible_facts={"sglang_server": facts})
