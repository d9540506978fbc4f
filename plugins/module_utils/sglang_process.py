# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Process lifecycle of the SGLang server: find, stop (verified), start detached, port checks,
# log rotation and the run-state files. Used by the sglang_server_* modules and by
# tools/perf_lifecycle.py; tested directly by tests/unit/test_process_lifecycle_utils.py.
#
# Needs psutil on the host that runs the server (the modules fail with a clear message without
# it). Everything that waits takes `clock` / `sleep` callables so tests can drive it.
#
# Decisions (docs/lifecycle.md explains them):
#   * The primary handle on a server is its session id: the start puts the launch script in a
#     new session, and every process it creates keeps that sid even when re-parented.
#     Secondary: the pidfile's process and its descendants. Safety net (optional): command
#     lines that match SGLang's process titles.
#   * The module's own process and its ancestors (ansible, the shell, sshd) are never signalled.
#   * A zombie is an exited process whose parent has not collected its status (here: PID 1 does
#     not reap orphans). It holds no memory, no GPU context and no socket: it counts as gone
#     and is reported as a warning, never as a survivor.

from __future__ import annotations

import datetime
import errno
import hashlib
import json
import os
import re
import signal
import socket
import time

try:
    import psutil
except ImportError:  # the modules report this with missing_required_lib
    psutil = None

PIDFILE_NAME = "sglang.pid"
STATE_NAME = "server.json"
# The ready-wait's place in the log and its progress (module sglang_server, state=ready).
WAIT_STATE_NAME = "wait_ready.json"
LAST_STATE_NAME = "server.last.json"
EXIT_NAME = "server.exit"

# Command lines of SGLang server processes: the safety net of the stop and the status's list of
# unmanaged servers. Matched with re.search against the command line joined with spaces. The one
# definition: modules sglang_server (state=stopped) / sglang_server_info use it when their `patterns`
# option is not set, and role sglang_server leaves it unset unless sglang_server_kill_patterns is.
KILL_PATTERNS = (
    r"^sglang::(scheduler|detokenizer|data_parallel_controller|tokenizer_worker)",
    r"(^|\s)-m\s+sglang\.launch_server(\s|$)",
    r"(^|/)sglang\s+serve(\s|$)",
    r"(^|\s)-m\s+sglang_sim\.launch_server(\s|$)",
)

# SGLang's GPU workers: the ranks that hold GPU memory and take part in NCCL. After our own
# SIGTERM they exit at once; SGLang's main process then logs the scheduler's -15 as a crash,
# sends itself SIGQUIT and sleeps 5 s "before crash diagnostics" (recorded on 0.5.17:
# tests/fixtures/real-sglang/). Once every worker is gone nothing is left to drain, so the
# stop ends that sleep instead of waiting it out (workers_gone_grace_seconds).
WORKER_PATTERN = r"^sglang::(scheduler|data_parallel_controller)"

# psutil status -> the words used in messages.
STATE_WORDS = {
    "zombie": "zombie (exited, status not collected by its parent)",
    "disk-sleep": "disk-sleep 'D' (uninterruptible I/O; cannot be killed until it returns)",
    "stopped": "stopped 'T' (SIGSTOP/ptrace; SIGKILL still ends it)",
}


def require_psutil():
    if psutil is None:
        raise RuntimeError("psutil is required on the host that runs the SGLang server")


def now_iso(clock=time.time):
    return datetime.datetime.fromtimestamp(clock(), tz=datetime.UTC).isoformat(timespec="seconds")


def parse_iso(text):
    try:
        return datetime.datetime.fromisoformat(text).timestamp()
    except (TypeError, ValueError):
        return None


# --------------------------------------------------------------------------- files


def atomic_write_json(path, data, mode=0o640):
    tmp = f"{path}.tmp.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        json.dump(data, handle, indent=2, sort_keys=True)
        handle.write("\n")
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def read_json(path):
    """The JSON in ``path``, or None when it is missing or not valid JSON."""
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def read_pidfile(path):
    try:
        with open(path, encoding="utf-8") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


def file_sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def file_sha256_or_none(path):
    """file_sha256(), or None when the file cannot be read (missing, unreadable)."""
    try:
        return file_sha256(path)
    except OSError:
        return None


def rotation_plan(log_path, keep, exists=os.path.exists):
    """The renames that rotate ``log_path`` keeping ``keep`` old copies, oldest first:
    a list of (source, destination); destination None means delete. Pure given ``exists``."""
    plan = []
    if not exists(log_path):
        return plan
    if keep <= 0:
        return [(log_path, None)]
    oldest = f"{log_path}.{keep}"
    if exists(oldest):
        plan.append((oldest, None))
    for number in range(keep - 1, 0, -1):
        source = f"{log_path}.{number}"
        if exists(source):
            plan.append((source, f"{log_path}.{number + 1}"))
    plan.append((log_path, log_path + ".1"))
    return plan


def rotate_log(log_path, keep):
    """Rotate ``log_path`` -> .1 -> .2 ... keeping ``keep`` copies. Returns the plan applied."""
    plan = rotation_plan(log_path, keep)
    for source, destination in plan:
        if destination is None:
            os.unlink(source)
        else:
            os.replace(source, destination)
    return plan


# --------------------------------------------------------------------------- process info


def protected_pids(pid=None):
    """``pid`` (default: this process) and all its ancestors: never to be signalled."""
    require_psutil()
    pid = os.getpid() if pid is None else pid
    protected = {pid, 0, 1}
    try:
        protected.update(parent.pid for parent in psutil.Process(pid).parents())
    except psutil.Error:
        pass
    return protected


def describe(proc):
    """A dict describing a psutil.Process (robust against it vanishing)."""
    info = {"pid": proc.pid, "ppid": None, "status": "gone", "cmdline": "", "name": ""}
    try:
        with proc.oneshot():
            info["status"] = proc.status()
            info["ppid"] = proc.ppid()
            info["name"] = proc.name()
            try:
                info["cmdline"] = " ".join(proc.cmdline()).strip()
            except psutil.ZombieProcess:
                info["cmdline"] = ""
            info["create_time"] = proc.create_time()
            try:
                info["username"] = proc.username()
            except (psutil.Error, KeyError):
                info["username"] = None
    except psutil.NoSuchProcess:
        pass
    except psutil.AccessDenied:
        info["status"] = info["status"] if info["status"] != "gone" else "unknown"
    if not info["cmdline"] and info["name"] and info["status"] != "gone":
        info["cmdline"] = "[{}]".format(info["name"])
    return info


def is_gone(proc):
    """True when the process no longer runs: it does not exist, or it is a zombie."""
    try:
        return proc.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:
        return False


def reap_if_child(pid):
    """Collect the exit status of ``pid`` if it is our child (so it does not stay a zombie)."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    except OSError:
        pass


def compile_patterns(patterns):
    compiled = []
    for pattern in patterns or ():
        try:
            compiled.append(re.compile(pattern))
        except re.error as exc:
            raise ValueError(f"kill pattern {pattern!r} does not compile: {exc}") from exc
    return compiled


def cmdline_matches(cmdline, compiled_patterns):
    """The first pattern (its text) that matches ``cmdline`` (a string), or None."""
    for pattern in compiled_patterns:
        if pattern.search(cmdline):
            return pattern.pattern
    return None


# --------------------------------------------------------------------------- discovery


def find_server_processes(sid=None, pid=None, pid_create_time=None, started_at=None, patterns=(), protected=None):
    """Find the server's processes.

    Returns (targets, skipped): ``targets`` is {pid: {"proc": psutil.Process, "found_by": [...]}}
    where found_by lists "session", "pidfile" and/or "pattern:<regex>"; ``skipped`` lists the
    protected processes that matched (this module and its ancestors), for the report.

    ``started_at`` (epoch seconds) guards against sid/pid reuse: a process created before the
    server was started cannot belong to it. ``pid_create_time`` guards the pidfile's pid.
    """
    require_psutil()
    protected = protected_pids() if protected is None else protected
    compiled = compile_patterns(patterns)
    targets, skipped = {}, []

    def add(proc, how):
        if proc.pid in protected:
            skipped.append({"pid": proc.pid, "found_by": how})
            return
        entry = targets.setdefault(proc.pid, {"proc": proc, "found_by": []})
        if how not in entry["found_by"]:
            entry["found_by"].append(how)

    not_before = None if started_at is None else started_at - 2.0

    # Secondary handle first (so psutil.Process objects carry the right create_time).
    if pid:
        try:
            root = psutil.Process(pid)
            fresh = pid_create_time is None or abs(root.create_time() - pid_create_time) < 1.0
            if fresh and (not_before is None or root.create_time() >= not_before):
                add(root, "pidfile")
                for child in root.children(recursive=True):
                    add(child, "pidfile")
        except psutil.NoSuchProcess:
            pass
        except psutil.AccessDenied:
            pass

    for proc in psutil.process_iter(["pid", "cmdline", "create_time"]):
        if sid:
            try:
                if os.getsid(proc.pid) == sid and (not_before is None or (proc.info["create_time"] or 0) >= not_before):
                    add(proc, "session")
            except (ProcessLookupError, PermissionError, OSError):
                pass
        if compiled:
            cmdline = " ".join(proc.info["cmdline"] or ()).strip()
            matched = cmdline_matches(cmdline, compiled) if cmdline else None
            if matched:
                add(proc, "pattern:" + matched)
    return targets, skipped


def split_alive(targets):
    """(alive, zombies) pids of a targets mapping."""
    alive, zombies = [], []
    for pid, entry in targets.items():
        proc = entry["proc"]
        try:
            status = proc.status()
        except psutil.NoSuchProcess:
            continue
        except psutil.AccessDenied:
            status = "unknown"
        if status == psutil.STATUS_ZOMBIE:
            zombies.append(pid)
        else:
            alive.append(pid)
    return sorted(alive), sorted(zombies)


# --------------------------------------------------------------------------- ports


def port_is_free(port, host="0.0.0.0"):
    """True when a listening socket could bind ``host:port`` now (SO_REUSEADDR, like uvicorn,
    so TIME_WAIT leftovers of a stopped server do not count as taken)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        return True
    except OSError as exc:
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            return False
        raise
    finally:
        sock.close()


def port_holders(port):
    """Processes with a LISTEN socket on ``port``: [{pid, cmdline, status, address}].
    A pid of None means the socket's owner is not visible to this user."""
    require_psutil()
    holders, seen = [], set()
    try:
        connections = psutil.net_connections(kind="inet")
    except psutil.AccessDenied:
        connections = []
    for conn in connections:
        if conn.status != psutil.CONN_LISTEN or not conn.laddr or conn.laddr.port != port:
            continue
        if conn.pid in seen:
            continue
        seen.add(conn.pid)
        holder = {"pid": conn.pid, "address": f"{conn.laddr.ip}:{conn.laddr.port}"}
        if conn.pid is not None:
            try:
                info = describe(psutil.Process(conn.pid))
                holder.update(cmdline=info["cmdline"], status=info["status"], username=info.get("username"))
            except psutil.NoSuchProcess:
                continue
        else:
            holder.update(cmdline=None, status=None, username=None)
        holders.append(holder)
    return holders


def port_status(port):
    """{"port", "free", "holders"}: free is the bind test; holders say who has it."""
    free = port_is_free(port)
    return {"port": port, "free": free, "holders": [] if free else port_holders(port)}


def format_holders(holders):
    if not holders:
        return "a process this user cannot see (run as root or check `ss -ltnp`)"
    parts = []
    for holder in holders:
        if holder.get("pid") is None:
            parts.append("a process this user cannot see on {}".format(holder["address"]))
        else:
            parts.append("pid {} ({}) on {}".format(holder["pid"], holder.get("cmdline") or "?", holder["address"]))
    return "; ".join(parts)


# --------------------------------------------------------------------------- stop


def _signal(proc, signum, record):
    try:
        proc.send_signal(signum)
        return True
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied as exc:
        record.setdefault("errors", []).append(f"{signal.Signals(signum).name}: {exc}")
        return False


def wait_gone(procs, timeout, clock=time.monotonic, sleep=time.sleep, interval=0.05):
    """Wait until every process in ``procs`` is gone (exited or zombie), at most ``timeout``
    seconds. Our own children are reaped on the way. Returns the processes still running."""
    deadline = clock() + timeout
    remaining = list(procs)
    while True:
        still = []
        for proc in remaining:
            reap_if_child(proc.pid)
            if not is_gone(proc):
                still.append(proc)
        remaining = still
        if not remaining or clock() >= deadline:
            return remaining
        sleep(min(interval, max(0.0, deadline - clock())))


def stop_processes(
    targets,
    grace_seconds,
    kill_wait_seconds=5.0,
    roots=(),
    orphan_grace_seconds=None,
    workers=(),
    workers_gone_grace_seconds=None,
    clock=time.monotonic,
    sleep=time.sleep,
    interval=0.05,
):
    """SIGTERM every target, wait up to ``grace_seconds``, SIGKILL the survivors, wait for them.

    ``roots``: pids of the server's top processes (the session leader, the pidfile's process).
    Once every root is gone, what is left is orphaned: SGLang's main process tears its children
    down itself, so a child still running then (one that ignores SIGTERM) only gets
    ``orphan_grace_seconds`` more before SIGKILL instead of the rest of the grace period.
    None (or no root among the targets) waits the whole grace period.

    ``workers``: pids of SGLang's GPU workers (WORKER_PATTERN). Once every one of them has
    exited on the SIGTERM, the rest (SGLang's main process in its 5 s diagnostic sleep, the
    detokenizer, the resource tracker) get ``workers_gone_grace_seconds`` more before SIGKILL.
    A worker that ignores SIGTERM keeps the ordinary grace. None disables the shortcut
    (the module always passes a number).

    Returns (records, timings): per-process records (pid, cmdline, found_by, status_before,
    signals sent "TERM"/"KILL", outcome "exited-on-term" | "killed" | "survivor" | "zombie" |
    "gone-before", state of a survivor, errors) and {"term_phase_s", "total_s"}.
    Zombies are not signalled (nothing to signal).
    """
    records = {}
    live = []
    for pid, entry in sorted(targets.items()):
        proc = entry["proc"]
        info = describe(proc)
        record = {
            "pid": pid,
            "cmdline": info["cmdline"],
            "found_by": list(entry["found_by"]),
            "status_before": info["status"],
            "signals": [],
        }
        records[pid] = record
        if info["status"] == "gone":
            record["outcome"] = "gone-before"
        elif info["status"] == psutil.STATUS_ZOMBIE:
            record["outcome"] = "zombie"
        else:
            live.append(proc)

    started = clock()
    for proc in live:
        if _signal(proc, signal.SIGTERM, records[proc.pid]):
            records[proc.pid]["signals"].append("TERM")

    root_pids = {proc.pid for proc in live if proc.pid in set(roots)}
    worker_pids = {proc.pid for proc in live if proc.pid in set(workers)}
    deadline = started + grace_seconds
    orphaned_at = None
    workers_gone_at = None
    survivors = list(live)
    while True:
        still = []
        for proc in survivors:
            reap_if_child(proc.pid)
            if not is_gone(proc):
                still.append(proc)
        survivors = still
        now = clock()
        if not survivors or now >= deadline:
            break
        if root_pids and orphan_grace_seconds is not None and orphaned_at is None:
            if not any(proc.pid in root_pids for proc in survivors):
                orphaned_at = now
                deadline = min(deadline, now + orphan_grace_seconds)
                continue
        if worker_pids and workers_gone_grace_seconds is not None and workers_gone_at is None:
            if not any(proc.pid in worker_pids for proc in survivors):
                workers_gone_at = now
                deadline = min(deadline, now + workers_gone_grace_seconds)
                continue
        sleep(min(interval, max(0.0, deadline - now)))
    term_done = clock()

    for proc in live:
        if proc not in survivors:
            records[proc.pid]["outcome"] = "exited-on-term"
    for proc in survivors:
        if _signal(proc, signal.SIGKILL, records[proc.pid]):
            records[proc.pid]["signals"].append("KILL")
    still = wait_gone(survivors, kill_wait_seconds, clock=clock, sleep=sleep)
    for proc in survivors:
        record = records[proc.pid]
        if proc in still:
            record["outcome"] = "survivor"
            info = describe(proc)
            record["status_after"] = info["status"]
            record["state"] = STATE_WORDS.get(info["status"], info["status"])
        else:
            record["outcome"] = "killed"
            if orphaned_at is not None:
                record["orphaned"] = True
            elif workers_gone_at is not None:
                record["after_workers"] = True
    for proc in live:
        try:
            if proc.status() == psutil.STATUS_ZOMBIE:
                records[proc.pid]["zombie_after"] = True
        except psutil.NoSuchProcess:
            pass
    timings = {"term_phase_s": round(term_done - started, 3), "total_s": round(clock() - started, 3)}
    if workers_gone_at is not None:
        timings["workers_gone_s"] = round(workers_gone_at - started, 3)
    return [records[pid] for pid in sorted(records)], timings


def wait_port_free(port, timeout, clock=time.monotonic, sleep=time.sleep, interval=0.1):
    deadline = clock() + timeout
    while True:
        if port_is_free(port):
            return {"port": port, "free": True, "holders": []}
        if clock() >= deadline:
            return port_status(port)
        sleep(interval)


def gpu_memory_table(snapshot):
    """[{index, name, memory_used_mib, memory_total_mib}] of a gpu_snapshot."""
    return [
        {
            "index": gpu.get("index"),
            "name": gpu.get("name"),
            "memory_used_mib": gpu.get("memory_used_mib"),
            "memory_total_mib": gpu.get("memory_total_mib"),
        }
        for gpu in snapshot.get("gpus", [])
    ]


def pids_on_gpu(snapshot, pids):
    wanted = set(pids)
    return [dict(app) for app in snapshot.get("processes", []) if app.get("pid") in wanted]


def held_by_gpu(snapshots, pids):
    """{gpu_index: MiB} the largest amount ``pids`` were seen holding on each GPU, over ``snapshots``."""
    held = {}
    for snapshot in snapshots:
        per_gpu = {}
        for app in pids_on_gpu(snapshot or {}, pids):
            index = app.get("gpu_index")
            per_gpu[index] = per_gpu.get(index, 0) + (app.get("used_memory_mib") or 0)
        for index, mib in per_gpu.items():
            held[index] = max(held.get(index, 0), mib)
    return held


def memory_not_yet_freed(before, snapshot, held, slack_mib=64):
    """GPU indexes whose used memory has not yet dropped by what the stopped PIDs held.

    nvidia-smi drops a process from --query-compute-apps a little before the driver has freed
    its memory (seen on an H200: 0.2 s after exit the list was empty while memory.used still
    showed the full amount). The "after" figures of a verified stop must come from a read where
    memory.used is down by what those PIDs held (``slack_mib`` allows for other work and rounding).
    """
    used_before = {gpu.get("index"): gpu.get("memory_used_mib") for gpu in (before or {}).get("gpus", [])}
    pending = []
    for gpu in snapshot.get("gpus", []):
        index = gpu.get("index")
        mib = held.get(index, 0)
        if not mib or used_before.get(index) is None or gpu.get("memory_used_mib") is None:
            continue
        if gpu["memory_used_mib"] > used_before[index] - mib + slack_mib:
            pending.append(index)
    return pending


def wait_gpu_released(snapshot_fn, pids, timeout, before=None, clock=time.monotonic, sleep=time.sleep, interval=1.0):
    """Poll ``snapshot_fn()`` (a nvidia_smi.gpu_snapshot result) until no compute process of
    ``pids`` holds GPU memory and each GPU's memory.used has dropped by what they held, at most
    ``timeout`` seconds.

    Returns {available, checked, released, holding, memory_settled, pending_gpus, before, after,
    error, polls, waited_s}. ``available`` False (no nvidia-smi / NVML trouble) means nothing
    could be verified. ``released`` is about the process list; ``memory_settled`` False means a
    GPU's memory had not come down by the timeout (reported, and ``after`` is the last read).
    """
    start = clock()
    snapshot = snapshot_fn()
    result = {
        "available": bool(snapshot.get("available")),
        "error": snapshot.get("error"),
        "checked": False,
        "released": None,
        "holding": [],
        "memory_settled": None,
        "pending_gpus": [],
        "before": gpu_memory_table(before) if before else None,
        "after": None,
        "polls": 1,
    }
    if not snapshot.get("available"):
        result["waited_s"] = 0.0
        return result
    known = snapshot.get("processes_known", True)
    seen = [before, snapshot]
    while True:
        holding = pids_on_gpu(snapshot, pids)
        pending = [] if holding else memory_not_yet_freed(before, snapshot, held_by_gpu(seen, pids))
        if (not holding and not pending) or clock() - start >= timeout:
            break
        sleep(interval)
        snapshot = snapshot_fn()
        seen.append(snapshot)
        result["polls"] += 1
        if not snapshot.get("available"):
            break
        known = snapshot.get("processes_known", True)
    result.update(
        checked=bool(known),
        released=(not holding) if known else None,
        holding=holding,
        memory_settled=(not holding and not pending) if before else None,
        pending_gpus=pending,
        after=gpu_memory_table(snapshot),
        other_processes=[app for app in snapshot.get("processes", []) if app.get("pid") not in set(pids)],
        waited_s=round(clock() - start, 3),
    )
    return result


# --------------------------------------------------------------------------- start


def spawn_detached(argv, log_path, cwd=None, env=None):
    """Start ``argv`` in a new session, detached: stdin /dev/null, stdout+stderr appended to
    ``log_path``, every other fd closed. Returns its pid (the session leader, so sid == pid).

    A double fork: the intermediate child starts the server and exits at once, and we reap it;
    the server is re-parented to init (or the nearest subreaper) and never becomes our zombie,
    and it does not hold our stdout, so Ansible does not wait for it.
    """
    import subprocess

    read_end, write_end = os.pipe()
    intermediate = os.fork()
    if intermediate == 0:  # pragma: no cover - runs in the forked child
        code = 0
        try:
            os.close(read_end)
            with open(os.devnull, "rb") as devnull, open(log_path, "ab", buffering=0) as log:
                proc = subprocess.Popen(
                    argv,
                    stdin=devnull,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=cwd,
                    env=env,
                    close_fds=True,
                    start_new_session=True,
                )
            os.write(write_end, b"%d" % proc.pid)
        except BaseException as exc:  # report to the parent, never return into its code
            try:
                os.write(write_end, b"E" + repr(exc).encode("utf-8", "replace"))
            except OSError:
                pass
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    chunks = []
    while True:
        chunk = os.read(read_end, 4096)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    os.waitpid(intermediate, 0)
    answer = b"".join(chunks).decode("utf-8", "replace")
    if not answer or answer.startswith("E"):
        raise OSError("could not start {}: {}".format(argv[0], answer[1:] or "no answer from the launcher"))
    return int(answer)


# The wrapper that runs the launch script: it keeps the session, writes the script's exit
# status next to the state (so a later wait can say "exited with 1" / "killed by SIGKILL"),
# and appends one line to the log for the person reading it.
WRAPPER = (
    # A TERM trap (not an ignore: the script must not inherit SIG_IGN) keeps the wrapper alive
    # until the script has exited, so the stop can tell "the server is down" from "only the
    # wrapper is down", and the exit status gets written on a stop too.
    "trap 'true' TERM; "
    'script="$1"; exit_file="$2"; "$script"; rc=$?; '
    'printf "%s\\n" "$rc" > "$exit_file"; '
    'printf "# sglang_server: launch script exited rc=%s at %s\\n" "$rc" "$(date -u +%Y-%m-%dT%H:%M:%SZ)"; '
    "exit $rc"
)


def wrapper_argv(script, exit_file, shell="/bin/bash"):
    return [shell, "-c", WRAPPER, "sglang-server-wrapper", script, exit_file]


def session_processes(sid, not_before=None):
    """Running (non-zombie) processes of session ``sid``."""
    require_psutil()
    found = []
    for proc in psutil.process_iter(["pid", "create_time", "status"]):
        try:
            if os.getsid(proc.pid) != sid:
                continue
        except OSError:
            continue
        if not_before is not None and (proc.info["create_time"] or 0) < not_before:
            continue
        if proc.info["status"] == psutil.STATUS_ZOMBIE:
            continue
        found.append(proc)
    return found


def server_alive(state):
    """True when the server recorded in ``state`` (server.json) still has a running process:
    its pid (same create_time) or any process of its session."""
    require_psutil()
    if not state:
        return False
    pid = state.get("pid")
    if pid:
        try:
            proc = psutil.Process(pid)
            created = state.get("pid_create_time")
            if (created is None or abs(proc.create_time() - created) < 1.0) and not is_gone(proc):
                return True
        except psutil.NoSuchProcess:
            pass
    sid = state.get("sid")
    if sid:
        started = parse_iso(state.get("started_at"))
        return bool(session_processes(sid, None if started is None else started - 2.0))
    return False


def read_exit_status(run_dir):
    try:
        with open(os.path.join(run_dir, EXIT_NAME), encoding="utf-8") as handle:
            return int(handle.read().strip())
    except (OSError, ValueError):
        return None


# ------------------------------------------------------------------ interrupts


class Interrupted(KeyboardInterrupt):
    """SIGTERM, raised where the module is, so that its clean-up (the client's group) runs."""


def raise_on_sigterm():
    """Make SIGTERM raise Interrupted in this process instead of ending it at once (modules
    sglang_bench and sglang_server, state=stopped).

    Ansible passes SIGINT and SIGTERM of ansible-playbook to the worker's process group, the
    module's included (ansible-core's WorkerProcess._term). SIGINT already raises
    KeyboardInterrupt; SIGTERM would end the module without running any clean-up."""

    def _raise(signum, frame):  # noqa: ARG001 - signal handler signature
        raise Interrupted(f"signal {signum}")

    signal.signal(signal.SIGTERM, _raise)
