# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Per-host experiment lock: two experiments must never drive the same SGLang server at once.
#
# The lock is a JSON file <run dir>/sglang.lock naming its holder (token, pid, user, host,
# play, since). It outlives the module process that wrote it (each Ansible task is a new
# process), so it cannot be a flock held open; instead every read-check-write is serialised
# by an flock on <run dir>/sglang.lock.guard, held only for the few milliseconds of one
# module run.
#
# A holder is identified by a token the play picks once (the role uses a random one per play).
# Acquire with the same token again: nothing changes. Release needs the token.
#
# Stale locks: the holder pid is the ansible-playbook (or ansible) process found among this
# module's ancestors, which exists when the controller is this host (local connection). When
# that pid is gone (or was reused: its start time differs) the lock is stale and is taken
# over, and the result says so. When the controller is another machine the pid cannot be
# checked from here (pid_checkable false); such a lock only goes stale after max_age_seconds,
# or with force.

from __future__ import annotations

import fcntl
import getpass
import os
import socket
import time

from ansible.module_utils.sglang_process import atomic_write_json, now_iso, parse_iso, read_json

try:
    import psutil
except ImportError:
    psutil = None

LOCK_NAME = "sglang.lock"
CONTROLLER_NAMES = ("ansible-playbook", "ansible", "ansible-runner")


def is_controller_cmdline(argv):
    names = [os.path.basename(part) for part in argv[:2]]
    return any(name in CONTROLLER_NAMES for name in names)


def find_controller(pid=None):
    """(pid, create_time) of the ansible-playbook/ansible process this module runs under, or
    (None, None) when there is none on this host (the controller is another machine).

    Ansible's per-task workers are forks of the main process with the same command line, so
    the OUTERMOST process of the first run of controller processes among the ancestors is
    taken: the worker dies after the task, the main process lives as long as the play."""
    if psutil is None:
        return None, None
    found = None
    try:
        proc = psutil.Process(os.getpid() if pid is None else pid)
        for parent in proc.parents():
            try:
                argv = parent.cmdline()
            except psutil.Error:
                argv = []
            if is_controller_cmdline(argv):
                found = parent
            elif found is not None:
                break
        if found is not None:
            return found.pid, found.create_time()
    except psutil.Error:
        pass
    return None, None


def holder_alive(record):
    """True / False when the holder pid can be checked on this host, None when it cannot."""
    pid = record.get("pid")
    if not pid or record.get("host") != socket.gethostname() or psutil is None:
        return None
    try:
        proc = psutil.Process(pid)
        created = record.get("pid_create_time")
        if created is not None and abs(proc.create_time() - created) > 1.0:
            return False  # pid reused by another process
        return proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:
        return True


def describe_holder(record):
    return "pid {} (user {} on {}), play {!r}, since {}".format(
        record.get("pid") if record.get("pid") else "unknown",
        record.get("user", "?"),
        record.get("host", "?"),
        record.get("play", "?"),
        record.get("since", "?"),
    )


def stale_reason(record, max_age_seconds, clock=time.time):
    """Why ``record`` is stale, or None when it is held."""
    alive = holder_alive(record)
    if alive is False:
        return "holder pid {} no longer runs".format(record.get("pid"))
    since = parse_iso(record.get("since"))
    if max_age_seconds and since is not None and clock() - since > max_age_seconds:
        return f"older than {max_age_seconds} s"
    return None


class _Guard:
    def __init__(self, path):
        self.path = path + ".guard"
        self.fd = None

    def __enter__(self):
        self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o640)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def acquire(path, token, play, max_age_seconds=0, force=False, check_mode=False, clock=time.time, holder_pid=None):
    """Take the lock. Returns {changed, acquired, holder, took_over, reason}; acquired False
    means another holder has it (holder describes it)."""
    with _Guard(path):
        current = read_json(path)
        if current and current.get("token") == token:
            return {"changed": False, "acquired": True, "holder": current, "took_over": None}
        took_over = None
        if current:
            reason = "forced" if force else stale_reason(current, max_age_seconds, clock)
            if reason is None:
                return {"changed": False, "acquired": False, "holder": current, "took_over": None}
            took_over = dict(current, reason=reason)
        if holder_pid is None:
            pid, created = find_controller()
        else:
            pid, created = holder_pid, None
        record = {
            "token": token,
            "pid": pid,
            "pid_create_time": created,
            "pid_checkable": pid is not None,
            "user": getpass.getuser(),
            "host": socket.gethostname(),
            "play": play,
            "since": now_iso(clock),
        }
        if not check_mode:
            atomic_write_json(path, record)
        return {"changed": True, "acquired": True, "holder": record, "took_over": took_over}


def release(path, token, force=False, check_mode=False):
    """Give the lock back. Returns {changed, released, holder}; released False means the lock
    belongs to another token (holder describes it)."""
    with _Guard(path):
        current = read_json(path)
        if not current:
            return {"changed": False, "released": True, "holder": None}
        if current.get("token") != token and not force:
            return {"changed": False, "released": False, "holder": current}
        if not check_mode:
            os.unlink(path)
        return {"changed": True, "released": True, "holder": current}


# The options of taking the lock, as module sglang_server_lock (state=present) and module
# sglang_server's stop with its ``lock`` option take them: one spec for both.
LOCK_SPEC = dict(
    token=dict(type="str", required=True, no_log=False),
    play=dict(type="str", default=""),
    max_age_seconds=dict(type="int", default=86400),
    force=dict(type="bool", default=False),
)


def take(module, run_dir, lock):
    """Take the lock of ``run_dir`` for ``module`` with ``lock`` (LOCK_SPEC's options): creates the
    directory (mode 0750) when missing, warns on a stale lock taken over, and fails the module -
    naming the holder, with ``lock_refused`` true - when another experiment holds it. Returns
    {changed, holder, took_over, path}."""
    path = os.path.join(run_dir, LOCK_NAME)
    if not os.path.isdir(run_dir):
        if module.check_mode:
            return {"changed": True, "holder": None, "took_over": None, "path": path}
        os.makedirs(run_dir, mode=0o750)
    result = acquire(path, lock["token"], lock["play"], lock["max_age_seconds"], lock["force"], module.check_mode)
    if not result["acquired"]:
        module.fail_json(
            msg="the SGLang server on this host is locked by another experiment: {} (lock {}). Wait for "
            "it to finish; if that run is dead on another controller, run playbooks/stop.yml -e "
            "sglang_server_lock_force=true.".format(describe_holder(result["holder"]), path),
            lock_refused=True,
            holder=result["holder"],
            path=path,
        )
    if result["took_over"]:
        module.warn(
            f"took over a stale experiment lock ({result['took_over']['reason']}): "
            f"{describe_holder(result['took_over'])}"
        )
    return {"changed": result["changed"], "holder": result["holder"], "took_over": result["took_over"], "path": path}
