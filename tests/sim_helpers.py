"""Helpers for the simulator tests: manifest, tokenizer, server processes.

The flag manifest is the project's data/flag_manifests/sglang-0.5.10.post1.json
(built by tools/build_flag_manifest.py from SGLang's server_args.py). When it
is not in the tree yet, ``provisional_manifest`` builds a stand-in with a
quick ``ast`` scan of the installed SGLang's server_args.py -- the same
source, read more roughly -- and the tests say which one they use.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import requests

REPO = Path(__file__).resolve().parents[1]
SIMULATOR = REPO / "simulator"
REAL_MANIFEST = REPO / "data" / "flag_manifests" / "sglang-0.5.10.post1.json"
PYTHON = sys.executable


def sglang_server_args_file() -> Path:
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("sglang is not installed in this interpreter (pip install --no-deps sglang)")
    return Path(list(spec.submodule_search_locations)[0]) / "srt" / "server_args.py"


def _literal(node, names: dict):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError):
        pass
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    return None


def provisional_manifest(path: Path) -> Path:
    """Write a manifest from an ast scan of the installed server_args.py."""
    source_file = sglang_server_args_file()
    tree = ast.parse(source_file.read_text(encoding="utf-8"))
    names: dict = {}
    defaults: dict = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            with contextlib.suppress(ValueError, TypeError, SyntaxError):
                names[node.targets[0].id] = ast.literal_eval(node.value)
        if isinstance(node, ast.ClassDef) and node.name == "ServerArgs":
            for item in node.body:
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) and item.value:
                    with contextlib.suppress(ValueError, TypeError, SyntaxError):
                        defaults[item.target.id] = ast.literal_eval(item.value)
    options = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr == "add_argument"):
            continue
        flags = [a.value for a in node.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if not flags or not flags[0].startswith("-"):
            continue
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        dest = _literal(kw["dest"], names) if "dest" in kw else flags[0].lstrip("-").replace("-", "_")
        action = ast.unparse(kw["action"]).strip("'\"") if "action" in kw else "store"
        action = action.split(".")[-1]
        deprecated = action.startswith("Deprecated")
        takes_value = action not in ("store_true", "store_false", "DeprecatedAction",
                                     "DeprecatedStoreTrueAction", "BooleanOptionalAction")
        default = None
        if "default" in kw:
            value = kw["default"]
            if isinstance(value, ast.Attribute) and value.attr in defaults:
                default = defaults[value.attr]
            else:
                default = _literal(value, names)
        elif dest in defaults:
            default = defaults[dest]
        replacement = _literal(kw["new_flag"], names) if "new_flag" in kw else None
        choices = _literal(kw["choices"], names) if "choices" in kw else None
        options.append({
            "flags": flags,
            "dest": dest,
            "takes_value": takes_value,
            "nargs": _literal(kw["nargs"], names) if "nargs" in kw else None,
            "type": ast.unparse(kw["type"]) if "type" in kw else ("str" if takes_value else None),
            "choices": list(choices) if isinstance(choices, (list, tuple)) else None,
            "action": action,
            "deprecated": deprecated,
            "replacement": replacement,
            "default": default if isinstance(default, (str, int, float, bool, list, type(None))) else None,
            "required": bool(_literal(kw["required"], names)) if "required" in kw else False,
        })
    data = {
        "sglang_version": "0.5.10.post1",
        "source": f"{source_file} (PROVISIONAL ast scan by tests/sim_helpers.py)",
        "source_sha256": None,
        "options": options,
    }
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")
    return path


def manifest_for_tests(tmp_dir: Path) -> tuple[Path, str]:
    """(path, which) -- the real manifest when present, else a provisional one."""
    if REAL_MANIFEST.is_file():
        return REAL_MANIFEST, "real"
    return provisional_manifest(tmp_dir / "sglang-0.5.10.post1.provisional.json"), "provisional"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def sim_env(manifest: Path, **extra: str) -> dict:
    env = dict(os.environ)
    for key in list(env):
        if key.startswith("SGLANG_SIM_"):
            del env[key]
    env.update({
        "PYTHONPATH": str(SIMULATOR),
        "PYTHONUNBUFFERED": "1",
        "SGLANG_SIM_MANIFEST": str(manifest),
        "SGLANG_SIM_LOAD_SECONDS": "0.4",
        "SGLANG_SIM_SPEED": "50",
        "HF_HUB_OFFLINE": "1",
    })
    env.update({k: str(v) for k, v in extra.items()})
    return env


class SimServer:
    """One simulator process tree started in its own session (process group)."""

    def __init__(self, argv: list[str], env: dict, log_path: Path, port: int | None):
        self.argv = argv
        self.port = port
        self.log_path = log_path
        self._log = open(log_path, "wb")  # closed in stop()
        self.proc = subprocess.Popen(
            [PYTHON, "-m", "sglang_sim.launch_server", *argv],
            env=env, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        self.pgid = self.proc.pid
        self.seen_pids: set[int] = {self.proc.pid}

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def tree(self) -> list[psutil.Process]:
        try:
            children = psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return []
        self.seen_pids.update(c.pid for c in children)
        return children

    def wait_ready(self, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"simulator exited early ({self.proc.returncode}):\n{self.log()}")
            try:
                if requests.get(self.url + "/health", timeout=2).status_code == 200:
                    self.tree()
                    return
            except requests.RequestException:
                pass
            time.sleep(0.1)
        raise AssertionError(f"simulator not ready after {timeout}s:\n{self.log()}")

    def wait_exit(self, timeout: float = 30.0) -> int:
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"simulator still running after {timeout}s:\n{self.log()}") from exc

    def group_alive(self) -> list[psutil.Process]:
        """Processes still alive in the server's process group."""
        alive = []
        for proc in psutil.process_iter(["pid"]):
            try:
                if os.getpgid(proc.pid) == self.pgid and proc.status() != psutil.STATUS_ZOMBIE:
                    alive.append(proc)
            except (ProcessLookupError, psutil.Error):
                continue
        return alive

    def stop(self) -> None:
        """SIGKILL the whole process group (also orphans) and reap the main process."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, signal.SIGKILL)
        for pid in self.seen_pids:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self._log.close()


def wait_for(predicate, timeout: float, interval: float = 0.1):
    """Poll ``predicate`` until it returns a truthy value (bounded)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()
