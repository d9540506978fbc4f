"""What every test module shares: one import path, and the helpers written once.

Import path. This file is the only place that changes it: the directories below go on
``sys.path`` (so ``import sglang_tiers``, ``import check_tiers``, ``import sglang_sim``,
``import gpu_test_support`` work in any test), and plugins/module_utils is added to
``ansible.module_utils`` (as ansible.cfg does for the modules), so
``from ansible.module_utils import sglang_process`` imports the code the modules import.
plugins/module_utils comes before plugins/modules: both hold a ``gpu_telemetry.py``, and the
plain name means the logic, not the module.

Helpers, used as ``from conftest import ...`` (tests/ is on sys.path, as pytest puts it there):

- processes: ``session_pids``, ``kill_session``, ``kill_recorded_sessions``, ``free_port``,
  ``wait_for``;
- Ansible: ``ansible_env``, ``run_playbook`` (ansible-runner), ``playbook_cli`` (plain
  ansible-playbook, what a person runs), ``local_inventory``, ``PlaybookLab`` (a test's folder,
  node and inventory), and readers of runner events (``events``, ``task_results``, ``failures``,
  ``final_failure``, ``tail``);
- experiments on the simulator: ``ExperimentLab`` (a PlaybookLab for playbooks/experiment.yml),
  ``actions_run``, ``alive``, ``assert_untouched`` (nothing stopped or started, same server, same
  ledger) and ``SERVER_ACTIONS``;
- the SYNTHETIC simulator: ``SimServer``, ``sim_env``, ``manifest_for_tests``, and the
  fixtures ``sim_manifest``, ``sim_tokenizer`` and ``sim_start``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import ansible.module_utils
import psutil
import pytest
import requests

REPO = Path(__file__).resolve().parents[1]
TESTS = REPO / "tests"
MODULE_UTILS = REPO / "plugins" / "module_utils"
SIMULATOR = REPO / "simulator"
IMPORT_PATHS = (
    MODULE_UTILS,
    REPO / "plugins" / "modules",
    REPO / "tools",
    SIMULATOR,
    TESTS / "fixtures" / "nvidia-smi",  # gpu_test_support: stand-in nvidia-smi and recorded output
)
for _path in reversed(IMPORT_PATHS):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))
if str(MODULE_UTILS) not in ansible.module_utils.__path__:
    ansible.module_utils.__path__.append(str(MODULE_UTILS))

PYTHON = sys.executable
VENV_BIN = Path(sys.executable).parent
ANSIBLE_CFG = REPO / "ansible.cfg"
REAL_MANIFEST = REPO / "data" / "flag_manifests" / "sglang-0.5.10.post1.json"


# --------------------------------------------------------------------------- processes


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


def wait_for(predicate, timeout: float, interval: float = 0.1):
    """Poll ``predicate`` until it returns a truthy value (bounded); returns its last value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


# --------------------------------------------------------------------------- Ansible


def ansible_env(**extra: str) -> dict:
    """Environment for ansible-playbook: the repository's ansible.cfg, no colours, the venv first
    on PATH. For ansible-runner's ``envvars``; merge with os.environ for a subprocess."""
    env = {
        "ANSIBLE_CONFIG": str(ANSIBLE_CFG),
        "ANSIBLE_NOCOLOR": "1",
        "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    env.update({key: str(value) for key, value in extra.items()})
    return env


def run_playbook(private_dir: Path, playbook: str | Path, inventory: str | Path, extravars: dict | None = None,
                 cmdline: str | None = None, envvars: dict | None = None):
    """ansible-playbook through ansible-runner from the repository root; returns the runner
    (status, rc, stats, events). ``private_dir`` must not exist yet: each run gets its own."""
    import ansible_runner

    private_dir = Path(private_dir)
    private_dir.mkdir(parents=True)
    playbook = Path(playbook)
    if not playbook.is_absolute():
        playbook = REPO / "playbooks" / playbook
    return ansible_runner.run(
        private_data_dir=str(private_dir),
        project_dir=str(REPO),
        playbook=str(playbook),
        inventory=str(inventory),
        extravars=extravars or {},
        cmdline=cmdline,
        envvars=ansible_env(**(envvars or {})),
        quiet=True,
    )


def playbook_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Plain ansible-playbook (what a person runs) from the repository root; text output."""
    return subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), *args],
        cwd=REPO, env={**os.environ, **ansible_env(ANSIBLE_FORCE_COLOR="0")}, capture_output=True, text=True,
        timeout=timeout, check=False,
    )


def local_inventory(path: Path, host: str, group: str = "sglang_nodes", group_vars: dict | None = None) -> Path:
    """Write an inventory with one host on the local connection (this interpreter) in ``group``."""
    hosts = {host: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}
    path.write_text(json.dumps({"all": {"children": {group: {"hosts": hosts, "vars": group_vars or {}}}}}))
    return path


@dataclass
class PlaybookLab:
    """Where a test runs playbooks against one node: its temp folder (``root``), the node's work
    dir and port, the inventory, and extra vars for every run (``extra``). Each run gets its own
    ansible-runner folder under ``root``."""

    root: Path
    port: int
    work: Path
    inventory: Path
    runs: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def run_dir(self) -> Path:
        return self.work / "run"

    def server(self) -> dict | None:
        """The lifecycle's record of the running server (run/server.json); None when there is none."""
        try:
            return json.loads((self.run_dir / "server.json").read_text())
        except (OSError, ValueError):
            return None

    def play(self, playbook: str | Path, extravars: dict | None = None, cmdline: str | None = None):
        """``playbook`` (a name under playbooks/, or a path) through ansible-runner; returns the runner."""
        self.runs += 1
        return run_playbook(self.root / f"runner-{self.runs:02d}", playbook, self.inventory,
                            extravars={**self.extra, **(extravars or {})}, cmdline=cmdline)


class ExperimentLab(PlaybookLab):
    """A PlaybookLab for playbooks/experiment.yml on the simulator (inventory/local.yml): every run
    moves the work dir, the port and the controller's results into the lab; the host's ledger,
    its controller copy and the server's health are at hand."""

    host = "sim-local"

    @property
    def ledger(self) -> Path:
        return self.work / "results" / "ledger.jsonl"

    @property
    def controller_ledger(self) -> Path:
        return self.root / "controller-results" / self.host / "ledger.jsonl"

    def base_vars(self) -> dict:
        return {
            "sglang_lab_work_dir": str(self.work),
            "sglang_lab_port": self.port,
            "sglang_bench_controller_results_dir": str(self.root / "controller-results"),
        }

    def run(self, playbook="experiment.yml", cmdline=None, **extravars):
        return self.play(playbook, {**self.base_vars(), **extravars}, cmdline)

    def ledger_bytes(self) -> bytes:
        return self.ledger.read_bytes() if self.ledger.exists() else b""

    def records(self, data=None) -> list[dict]:
        data = self.ledger_bytes() if data is None else data
        return [json.loads(line) for line in data.splitlines() if line.strip()]

    def healthy(self) -> bool:
        try:
            return requests.get(f"http://127.0.0.1:{self.port}/health", timeout=10).status_code == 200
        except requests.RequestException:
            return False

    def ensure_server(self) -> dict:
        """A healthy server for the tests that check it is left alone (playbooks/start.yml)."""
        if not (self.healthy() and self.server()):
            runner = self.run("start.yml", tier="baseline")
            assert runner.status == "successful", tail(runner)
        assert self.healthy()
        return self.server()


def actions_run(runner) -> set:
    """Module names of the tasks that ran (ok or failed; skipped ones excluded)."""
    return {d.get("task_action") for d in events(runner)}


def alive(pid) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


# The actions that stop, start, measure or record: a run refused before the lock runs none of them.
SERVER_ACTIONS = {"sglang_server_lock", "sglang_server_stop", "sglang_server_start", "sglang_bench",
                  "sglang_ledger_append"}


def assert_untouched(lab, before_server, before_ledger, runner):
    """Nothing was stopped or started, the same server answers, the ledger and lock are as before."""
    ran = actions_run(runner)
    assert not ran & (SERVER_ACTIONS - {"sglang_server_lock"}), ran
    now = lab.server()
    assert now["pid"] == before_server["pid"] and now["started_at"] == before_server["started_at"]
    assert alive(now["pid"]) and lab.healthy()
    assert lab.ledger_bytes() == before_ledger


def events(runner, kinds=("runner_on_ok", "runner_on_failed")) -> list[dict]:
    """The event_data of the runner's events of these kinds, in order."""
    return [e["event_data"] for e in runner.events if e.get("event") in kinds]


def task_results(runner, task: str, kinds=("runner_on_ok",)) -> list[dict]:
    """The results of the task named ``task`` (one per host and loop run)."""
    return [d["res"] for d in events(runner, kinds) if d.get("task") == task]


def failures(runner) -> list[tuple[str, dict]]:
    """(task name, result) of each failed task."""
    return [(d.get("task"), d["res"]) for d in events(runner, ("runner_on_failed",))]


def final_failure(runner) -> str:
    """The message of the last failed task ('' when none failed)."""
    failed = failures(runner)
    return failed[-1][1].get("msg", "") if failed else ""


def tail(runner, size: int = 6000) -> str:
    """The end of the run's output, for an assertion message."""
    return runner.stdout.read()[-size:]


# --------------------------------------------------------------------------- the simulator


def manifest_for_tests(tmp_dir: Path | None = None) -> tuple[Path, str]:
    """(path, "real"): the project's flag manifest of SGLang 0.5.10.post1, which the simulator
    parses its command line with. It is part of the checkout: a missing one fails the test."""
    if not REAL_MANIFEST.is_file():
        pytest.fail(f"{REAL_MANIFEST.relative_to(REPO)} is missing from the checkout "
                    "(tools/build_flag_manifest.py --version 0.5.10.post1 rebuilds it)")
    return REAL_MANIFEST, "real"


def sim_env(manifest: Path, **extra: str) -> dict:
    """os.environ without SGLANG_SIM_* knobs, plus a fast simulator on ``manifest``."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("SGLANG_SIM_")}
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


@pytest.fixture(scope="session")
def sim_manifest() -> Path:
    """The flag manifest the simulators of this run parse their command line with."""
    return manifest_for_tests()[0]


@pytest.fixture(scope="session")
def sim_tokenizer(tmp_path_factory) -> Path:
    """The simulated model's tokenizer folder (with a synthetic ShareGPT file), written by the real CLI."""
    folder = tmp_path_factory.mktemp("model") / "sim-model"
    result = subprocess.run(
        [PYTHON, "-m", "sglang_sim.make_tokenizer", str(folder), "--sharegpt", "60"],
        env=sim_env(Path("/nonexistent")), capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "SYNTHETIC" in result.stdout
    return folder


@pytest.fixture
def sim_start(sim_manifest, tmp_path):
    """Start simulators: ``sim_start(*argv, port=None, **env)`` returns a SimServer on a free
    loopback port; every one started is SIGKILLed (process group) at teardown."""
    servers: list[SimServer] = []

    def start(*argv: str, port: int | None = None, **env: str) -> SimServer:
        port = free_port() if port is None else port
        full = [*argv, "--host", "127.0.0.1", "--port", str(port)]
        server = SimServer(full, sim_env(sim_manifest, **env), tmp_path / f"sim{len(servers)}.log", port)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
