"""Ansible: ansible-playbook through ansible-runner (``run_playbook``, ``run_play``) or plain
(``playbook_cli``, what a person runs), local inventories, the readers of runner events, and the
labs the playbook tests run in (``PlaybookLab``; ``ExperimentLab`` and ``experiment_lab_fixture``
for playbooks/experiment.yml on the simulator)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
import yaml

from helpers import integration_only
from helpers.paths import ANSIBLE_CFG, LOCAL_INVENTORY, REPO, VENV_BIN
from helpers.processes import alive, free_port, kill_recorded_sessions


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


def _ansible_runner(private_dir: Path, playbook: Path, inventory: str | Path, extravars: dict | None,
                    cmdline: str | None, envvars: dict | None):
    import ansible_runner

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


@integration_only
def run_playbook(private_dir: Path, playbook: str | Path, inventory: str | Path, extravars: dict | None = None,
                 cmdline: str | None = None, envvars: dict | None = None):
    """ansible-playbook through ansible-runner from the repository root; returns the runner
    (status, rc, stats, events). ``private_dir`` must not exist yet: each run gets its own."""
    private_dir = Path(private_dir)
    private_dir.mkdir(parents=True)
    playbook = Path(playbook)
    if not playbook.is_absolute():
        playbook = REPO / "playbooks" / playbook
    return _ansible_runner(private_dir, playbook, inventory, extravars, cmdline, envvars)


@integration_only
def run_play(folder: Path, playbook: Path | str | list, inventory: Path | str | None = None, *,
             host: str = "localhost", extravars: dict | None = None, cmdline: str | None = None,
             envvars: dict | None = None):
    """A playbook through ansible-runner in the next ``runner-N`` folder of ``folder``; returns
    (runner, ``results_by_task(runner)``).

    ``playbook``: a Path, the playbook's YAML text (a str) or its plays (a list). ``inventory``: a
    Path, an inventory's text (a str), or None: ``host`` alone on the local connection (this
    interpreter). Text and plays are written into the runner folder, next to nothing else."""
    folder = Path(folder)
    data = folder / f"runner-{len(list(folder.glob('runner-*')))}"
    data.mkdir(parents=True)
    if isinstance(playbook, list):
        playbook = yaml.safe_dump(playbook, sort_keys=False)
    if isinstance(playbook, str):
        (data / "playbook.yml").write_text(playbook)
        playbook = data / "playbook.yml"
    if inventory is None:
        inventory = local_inventory(data / "inventory.json", host, group=None)
    elif isinstance(inventory, str):
        (data / "inventory.yml").write_text(inventory)
        inventory = data / "inventory.yml"
    runner = _ansible_runner(data, Path(playbook), inventory, extravars, cmdline, envvars)
    return runner, results_by_task(runner)


@integration_only
def playbook_cli(*args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    """Plain ansible-playbook (what a person runs) from the repository root; text output."""
    return subprocess.run(
        [str(VENV_BIN / "ansible-playbook"), *args],
        cwd=REPO, env={**os.environ, **ansible_env(ANSIBLE_FORCE_COLOR="0")}, capture_output=True, text=True,
        timeout=timeout, check=False,
    )


def local_inventory(path: Path, host: str, group: str | None = "sglang_nodes", group_vars: dict | None = None) -> Path:
    """Write an inventory with one host on the local connection (this interpreter) in ``group``
    (None: directly under ``all``, with ``group_vars`` as all's vars)."""
    hosts = {host: {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}}
    if group is None:
        data = {"all": {"hosts": hosts, **({"vars": group_vars} if group_vars else {})}}
    else:
        data = {"all": {"children": {group: {"hosts": hosts, "vars": group_vars or {}}}}}
    path.write_text(json.dumps(data))
    return path


# --------------------------------------------------------------------------- runner events


def events(runner, kinds=("runner_on_ok", "runner_on_failed")) -> list[dict]:
    """The event_data of the runner's events of these kinds, in order."""
    return [e["event_data"] for e in runner.events if e.get("event") in kinds]


def results_by_task(runner) -> dict[str, list[tuple[str, dict]]]:
    """{task name: [(event name, result)]} of the ok, failed and skipped events, in order."""
    results: dict[str, list[tuple[str, dict]]] = {}
    for event in runner.events:
        if event.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_skipped"):
            data = event["event_data"]
            results.setdefault(data["task"], []).append((event["event"], data.get("res", {})))
    return results


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


def action_name(event_data) -> str:
    """The task's module, with its state for sglang_server (``sglang_server:stopped``)."""
    action = event_data.get("task_action")
    if action == "sglang_server":  # every result names its state (RV state)
        return f"sglang_server:{(event_data.get('res') or {}).get('state')}"
    return action


def actions_run(runner) -> set:
    """Module names of the tasks that ran (ok or failed; skipped ones excluded); sglang_server
    with its state (action_name)."""
    return {action_name(d) for d in events(runner)}


# --------------------------------------------------------------------------- labs


@integration_only
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


@integration_only
class ExperimentLab(PlaybookLab):
    """A PlaybookLab for playbooks/experiment.yml on the simulator (inventory/local.yml): every run
    moves the work dir, the port and the controller's results into the lab; the host's ledger,
    its controller copy and the server's health are at hand."""

    host = "sim-local"
    # The output-quality check (docs/quality.md) costs about 4 s a cycle on inventory/local.yml
    # (12 prompts x 32 tokens, one at a time, at the simulator's c=1 speed); CI time is short, so
    # a lab turns it off unless it tests it (tests/integration/test_quality.py).
    quality_enabled = False

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
            "sglang_bench_quality_enabled": self.quality_enabled,
        }

    def run(self, playbook="experiment.yml", cmdline=None, **extravars):
        return self.play(playbook, {**self.base_vars(), **extravars}, cmdline)

    def succeed(self, playbook="experiment.yml", cmdline=None, **extravars):
        """``run``, which must end successful; returns the runner."""
        runner = self.run(playbook, cmdline, **extravars)
        assert runner.status == "successful", tail(runner)
        return runner

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
            self.succeed("start.yml", tier="baseline")
        assert self.healthy()
        return self.server()


@integration_only
@contextlib.contextmanager
def experiment_lab(root: Path, lab_class: type[ExperimentLab] = ExperimentLab):
    """An ExperimentLab (or ``lab_class``) in ``root`` on a free port with inventory/local.yml.
    On exit, whatever happened: the verified stop (lock forced), then a kill of any session the
    lifecycle's state files still record."""
    lab = lab_class(root=root, port=free_port(), work=root / "work", inventory=LOCAL_INVENTORY)
    try:
        yield lab
    finally:
        lab.run("stop.yml", sglang_server_lock_force=True)
        kill_recorded_sessions(lab.run_dir)


@integration_only
def experiment_lab_fixture(name: str, lab_class: type[ExperimentLab] = ExperimentLab):
    """A module-scoped fixture ``lab``: one ``experiment_lab`` in a temp folder named ``name``,
    for all the module's tests. In the module: ``lab = experiment_lab_fixture("guard")``."""

    @pytest.fixture(scope="module", name="lab")
    def lab_fixture(tmp_path_factory):
        with experiment_lab(tmp_path_factory.mktemp(name), lab_class) as lab:
            yield lab

    return lab_fixture


# The actions that stop, start, measure or record: a run refused before the lock runs none of them.
SERVER_ACTIONS = {"sglang_server_lock", "sglang_server:stopped", "sglang_server:started", "sglang_bench",
                  "sglang_ledger_append"}


def assert_untouched(lab, before_server, before_ledger, runner):
    """Nothing was stopped or started, the same server answers, the ledger and lock are as before. A
    call refused by another experiment's lock (a stop that was to take it: lock_refused) touched nothing."""
    ran = {action_name(d) for d in events(runner) if not (d.get("res") or {}).get("lock_refused")}
    assert not ran & (SERVER_ACTIONS - {"sglang_server_lock"}), ran
    now = lab.server()
    assert now["pid"] == before_server["pid"] and now["started_at"] == before_server["started_at"]
    assert alive(now["pid"]) and lab.healthy()
    assert lab.ledger_bytes() == before_ledger
