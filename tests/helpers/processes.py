"""Processes: free ports, sessions and their clean-up, the lifecycle's server state file, bounded waits."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from pathlib import Path

import psutil


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def session_pids(sid: int) -> list[int]:
    """Pids of the live (not zombie) processes whose session id is ``sid``."""
    pids = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                pids.append(proc.pid)
        except (OSError, psutil.Error):
            continue
    return pids


def kill_session(sid: int, timeout: float = 10.0) -> None:
    """Clean-up: SIGKILL every process of session ``sid`` (never this one) and wait until none is
    alive (a zombie counts as gone; one that is our child is reaped)."""
    killed = [pid for pid in session_pids(sid) if pid != os.getpid()]
    for pid in killed:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)

    def gone():
        for pid in killed:
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
        return not [pid for pid in session_pids(sid) if pid != os.getpid()]

    wait_for(gone, timeout, interval=0.05)


def kill_recorded_sessions(run_dir: Path) -> None:
    """Kill the sessions that the lifecycle's state files in ``run_dir`` record, whatever a test
    left behind (server.json: the running server; server.last.json: the one stopped last)."""
    for name in ("server.json", "server.last.json"):
        try:
            sid = json.loads((Path(run_dir) / name).read_text()).get("sid")
        except (OSError, ValueError, AttributeError):
            continue
        if sid:
            kill_session(sid)


def write_server_state(folder: Path, pid: int, port: int, command: str, **fields) -> tuple[Path, Path]:
    """A launch script ``folder``/baseline.sh that execs ``command``, and the lifecycle's record of a
    baseline server started from it, ``folder``/server.json (tier, pid, script, port and ``fields``,
    as run/server.json holds them); returns (script, state file)."""
    script = Path(folder) / "baseline.sh"
    script.write_text(f"#!/bin/bash\nexec {command}\n")
    state = Path(folder) / "server.json"
    state.write_text(json.dumps({"tier": "baseline", "pid": pid, "script": str(script), "port": port, **fields}))
    return script, state


def wait_for(predicate, timeout: float, interval: float = 0.1):
    """Poll ``predicate`` until it returns a truthy value (bounded); returns its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def alive(pid) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
