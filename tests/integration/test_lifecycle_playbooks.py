"""Integration: the lifecycle playbooks (start, status, stop) against the SGLang simulator.

Real ansible-playbook runs (through ansible-runner, asserting on its events, or plain
ansible-playbook where the human-visible output is the point), real processes, real signals,
random free ports and temp dirs. The launch script is written here (it runs
``python -m sglang_sim.launch_server``); rendering it is role sglang_launch's job and is tested there.

The command-line safety net of the stop (sglang_server_kill_by_pattern) is OFF in these tests:
other test runs on the same machine start simulators too, and the net would stop them.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time

import psutil
import pytest
from ansible.module_utils import sglang_process
from helpers.paths import REPO, VENV_BIN
from helpers.playbooks import PlaybookLab, ansible_env, failures, local_inventory, playbook_cli, task_results
from helpers.processes import free_port, kill_recorded_sessions, session_pids


class Lab(PlaybookLab):
    def script(self, name, tp=2, load=1.0, fault="", extra_env=None):
        """Write a launch script for the simulator; returns its path."""
        env = {"PYTHONPATH": str(REPO / "simulator"), "SGLANG_SIM_LOAD_SECONDS": str(load), "SGLANG_SIM_SPEED": "20"}
        if fault:
            env["SGLANG_SIM_FAULT"] = fault
        env.update(extra_env or {})
        exports = "\n".join(f"export {key}={value!r}" for key, value in env.items())
        path = self.root / f"{name}.sh"
        path.write_text(
            "#!/bin/bash\n"
            f"{exports}\n"
            f"exec {sys.executable} -m sglang_sim.launch_server --model-path sim-model --served-model-name glm-5 "
            f"--tp-size {tp} --host 127.0.0.1 --port {self.port}\n"
        )
        path.chmod(0o750)
        return path

    def playbook_cli(self, playbook, *args, timeout=300):
        """Plain ansible-playbook (what a person runs); returns CompletedProcess."""
        extra = [arg for key, value in self.extra.items() for arg in ("-e", json.dumps({key: value}))]
        return playbook_cli("-i", str(self.inventory), str(REPO / "playbooks" / playbook), *extra, *args,
                            timeout=timeout)



@pytest.fixture
def lab(tmp_path):
    port = free_port()
    work = tmp_path / "work"
    inventory = local_inventory(tmp_path / "inventory.yml", "sim-test", group_vars={
        "sglang_lab_work_dir": str(work),
        "sglang_lab_port": port,
        # The simulator, on a machine without GPUs (role sglang_lab's one fallback is real SGLang).
        "sglang_lab_target": "simulator",
        "sglang_server_kill_by_pattern": False,
        "sglang_server_stop_grace_seconds": 5,
        "sglang_server_ready_window_seconds": 2,
        "sglang_server_ready_timeout_seconds": 120,
        "sglang_server_crash_signatures_file": str(REPO / "data" / "crash_signatures.yml"),
    })
    lab = Lab(root=tmp_path, port=port, work=work, inventory=inventory)
    yield lab
    # Whatever happened in the test: no process of ours is left behind.
    kill_recorded_sessions(work / "run")


# --------------------------------------------------------------------------- tests


def test_start_progress_status_stop(lab):
    script = lab.script("baseline", tp=2, load=6)
    # A person's view: plain ansible-playbook, progress lines while the simulator loads.
    start = lab.playbook_cli("start.yml", "-e", "tier=baseline", "-e", f"launch_script={script}",
                             "-e", "sglang_server_ready_window_seconds=1")
    assert start.returncode == 0, start.stdout[-3000:]
    progress = [line for line in start.stdout.splitlines() if "] sglang baseline: " in line]
    assert progress, start.stdout[-3000:]
    assert "health" in progress[0] and "log lines |" in progress[0]
    assert "tier baseline is ready after" in start.stdout
    state = lab.server()
    assert state["tier"] == "baseline" and state["sid"] == state["pid"] and state["port"] == lab.port
    assert len(session_pids(state["sid"])) >= 4  # wrapper, launch_server, 2 schedulers, detokenizer

    # Same tier and script again: nothing changes.
    again = lab.play("start.yml", {"tier": "baseline", "launch_script": str(script)})
    assert again.status == "successful"
    assert again.stats["changed"].get("sim-test", 0) == 0
    assert task_results(again, "Start the launch script of tier baseline")[0]["already_running"] is True

    status = lab.play("status.yml")
    assert status.status == "successful"
    facts = task_results(status, "Read the SGLang server status")[0]["ansible_facts"]["sglang_server"]
    assert facts["running"] and facts["tier"] == "baseline" and facts["pid"] == state["pid"]
    assert facts["health"]["status"] == "ready" and facts["health"]["code"] == 200
    assert [h["pid"] for h in facts["port_holders"]] and facts["lock"] is None
    assert any(p["cmdline"].startswith("sglang::scheduler_TP") for p in facts["processes"])
    summary = task_results(status, "Show the SGLang server status")[0]["msg"]
    assert summary[0].startswith("running: tier baseline since ")

    check = lab.play("stop.yml", cmdline="--check")
    assert check.status == "successful"
    would = task_results(check, "Stop the SGLang server and verify that nothing of it is left")[0]
    assert {r["outcome"] for r in would["stopped"]} == {"would-stop"}
    assert session_pids(state["sid"]), "check mode stopped the server"

    stop = lab.play("stop.yml")
    assert stop.status == "successful", failures(stop)
    result = task_results(stop, "Stop the SGLang server and verify that nothing of it is left")[0]
    assert result["changed"] and result["survivors"] == [] and result["port"]["free"]
    assert {r["pid"] for r in result["stopped"]} >= {state["pid"]}
    assert session_pids(state["sid"]) == []
    assert not (lab.run_dir / "server.json").exists() and not (lab.run_dir / "sglang.pid").exists()
    assert sglang_process.read_json(str(lab.run_dir / "server.last.json"))["tier"] == "baseline"

    idempotent = lab.play("stop.yml")
    assert idempotent.status == "successful"
    assert idempotent.stats["changed"].get("sim-test", 0) == 0


FAKE_NVIDIA_SMI = """#!{python}
# Test double of nvidia-smi: one GPU per scheduler of the recorded server session; a scheduler
# process holds 1000 MiB on "its" GPU while it runs.
import json, os, sys
import psutil

state = json.load(open({state!r})) if os.path.exists({state!r}) else {{}}
held = {{}}
for proc in psutil.process_iter(["pid", "cmdline", "status"]):
    try:
        title = " ".join(proc.info["cmdline"] or ()).strip()
        if state.get("sid") and os.getsid(proc.pid) == state["sid"] and title.startswith("sglang::scheduler_TP") \\
                and proc.info["status"] != psutil.STATUS_ZOMBIE:
            held[int(title.rsplit("TP", 1)[1])] = proc.pid
    except (OSError, psutil.Error, ValueError):
        pass
if any(arg.startswith("--query-gpu") for arg in sys.argv):
    for index in range(8):
        used = 1000 if index in held else 0
        print(f"{{index}}, NVIDIA RTX PRO 6000 Blackwell Server Edition, "
              f"GPU-{{index:08d}}-0000-0000-0000-000000000000, 00000000:{{index + 1:02X}}:00.0, 580.95.05, "
              f"97887, {{used}}, {{97887 - used}}, 0, 30, 50.0, 180, 405, 12.0")
else:
    for index, pid in sorted(held.items()):
        print(f"{{pid}}, python3, 1000, GPU-{{index:08d}}-0000-0000-0000-000000000000")
"""


def test_stop_kills_a_child_that_ignores_sigterm_and_verifies_gpu_release(lab):
    fake = lab.root / "nvidia-smi"
    fake.write_text(FAKE_NVIDIA_SMI.format(python=sys.executable, state=str(lab.run_dir / "server.json")))
    fake.chmod(0o755)
    lab.extra.update(sglang_server_nvidia_smi=str(fake), sglang_server_gpu_check_required=True,
                     sglang_server_stop_grace_seconds=3, sglang_server_gpu_release_timeout_seconds=20)
    script = lab.script("tp8-stubborn", tp=8, load=1, fault="ignore_sigterm")
    start = lab.play("start.yml", {"tier": "tp8-stubborn", "launch_script": str(script)})
    assert start.status == "successful", failures(start)
    sid = lab.server()["sid"]
    schedulers = [pid for pid in session_pids(sid)
                  if " ".join(psutil.Process(pid).cmdline()).startswith("sglang::scheduler")]
    assert len(schedulers) == 8

    stop = lab.play("stop.yml")
    assert stop.status == "successful", failures(stop)
    result = task_results(stop, "Stop the SGLang server and verify that nothing of it is left")[0]
    killed = [r for r in result["stopped"] if r["signals"] == ["TERM", "KILL"]]
    assert killed and all(r["outcome"] == "killed" for r in killed)
    assert any(r["cmdline"].startswith("sglang::scheduler_TP") for r in killed)
    assert result["survivors"] == [] and result["port"]["free"]
    assert session_pids(sid) == []
    gpu = result["gpu"]
    assert gpu["checked"] and gpu["released"] is True and gpu["holding"] == []
    assert [g["memory_used_mib"] for g in gpu["before"]] == [1000] * 8
    assert [g["memory_used_mib"] for g in gpu["after"]] == [0] * 8


@pytest.mark.parametrize(
    "fault, expected_class, evidence",
    [
        ("crash_on_load", "dynamo_fp4_jit", "allocate_lock"),
        ("port_in_use", "port_in_use", "[Errno 98]"),
    ],
)
def test_failed_start_is_classified(lab, fault, expected_class, evidence):
    script = lab.script(f"fault-{fault}", tp=2, load=1, fault=fault)
    run = lab.play("start.yml", {"tier": f"fault-{fault}", "launch_script": str(script)})
    assert run.status == "failed"
    wait = task_results(run, "Wait for the SGLang server to be ready")[0]
    assert wait["crash_class"] == expected_class
    assert evidence in wait["excerpt"] and wait["remedy"]
    crash = task_results(run, "Record the crash classification for a later rescue")[0]["ansible_facts"]
    assert crash["sglang_server_crash"]["crash_class"] == expected_class
    ((task, res),) = failures(run)
    assert task == "Fail with the classified crash" and expected_class in res["msg"]
    assert not (lab.run_dir / "sglang.lock").exists(), "the lock was not given back after the failure"


def test_hang_is_classified_on_timeout(lab):
    lab.extra.update(sglang_server_ready_timeout_seconds=25)
    script = lab.script("hang", tp=2, load=1, fault="hang")
    run = lab.play("start.yml", {"tier": "hang", "launch_script": str(script)})
    assert run.status == "failed"
    wait = task_results(run, "Wait for the SGLang server to be ready")[0]
    assert wait["crash_class"] == "hang"
    assert "Uvicorn running on" in wait["excerpt"]  # the log tail shows how far it got
    assert wait["health"]["status"] in ("starting", "down", "unknown")
    stop = lab.play("stop.yml")
    assert stop.status == "successful", failures(stop)


def test_start_refused_when_the_port_is_held(lab):
    listener = socket.socket()
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", lab.port))
    listener.listen(1)
    try:
        script = lab.script("baseline", load=1)
        run = lab.play("start.yml", {"tier": "baseline", "launch_script": str(script)})
    finally:
        listener.close()
    assert run.status == "failed"
    ((task, res),) = failures(run)
    assert task == "Start the launch script of tier baseline"
    assert f"port {lab.port} is already taken by pid {os.getpid()}" in res["msg"]
    assert "pytest" in res["msg"] or "python" in res["msg"]
    assert lab.server() is None


def test_second_experiment_is_refused_by_the_lock(lab):
    release = lab.root / "release"
    holder_play = lab.root / "hold_lock.yml"
    holder_play.write_text(json.dumps([{
        "name": "Hold the experiment lock",
        "hosts": "sglang_nodes",
        "gather_facts": False,
        "tasks": [
            {"name": "Take it", "ansible.builtin.include_role": {"name": "sglang_server", "tasks_from": "lock"}},
            {"name": "Wait for the test", "ansible.builtin.wait_for": {"path": str(release), "timeout": 240}},
            {"name": "Give it back", "ansible.builtin.include_role": {"name": "sglang_server", "tasks_from": "unlock"}},
        ],
    }]))
    holder = subprocess.Popen([str(VENV_BIN / "ansible-playbook"), "-i", str(lab.inventory), str(holder_play)],
                              cwd=REPO, env={**os.environ, **ansible_env()}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        lock = lab.run_dir / "sglang.lock"
        deadline = time.monotonic() + 120
        while not lock.exists() and holder.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert lock.exists(), holder.stdout.read() if holder.poll() is not None else "no lock"
        record = json.loads(lock.read_text())
        assert record["pid"] == holder.pid and record["play"] == "Hold the experiment lock"

        script = lab.script("baseline", load=1)
        run = lab.play("start.yml", {"tier": "baseline", "launch_script": str(script)})
        assert run.status == "failed"
        ((task, res),) = failures(run)
        assert task == "Take the experiment lock of this host"
        assert f"pid {holder.pid}" in res["msg"] and "Hold the experiment lock" in res["msg"]
        assert lab.server() is None, "the refused run started a server"
    finally:
        release.write_text("done")
        out, _ = holder.communicate(timeout=120)
    assert holder.returncode == 0, out[-2000:]
    assert not (lab.run_dir / "sglang.lock").exists()


def test_stale_lock_of_a_dead_run_is_taken_over(lab):
    lab.run_dir.mkdir(parents=True)
    dead = subprocess.Popen(["/bin/true"])
    dead.wait()
    (lab.run_dir / "sglang.lock").write_text(json.dumps({
        "token": "dead-run", "pid": dead.pid, "pid_create_time": None, "pid_checkable": True, "user": "root",
        "host": socket.gethostname(), "play": "A run killed with kill -9", "since": "2026-01-01T00:00:00+00:00"}))
    run = lab.play("stop.yml")
    assert run.status == "successful", failures(run)
    taken = task_results(run, "Take the experiment lock of this host")[0]
    assert "no longer runs" in taken["took_over"]["reason"]
    assert not (lab.run_dir / "sglang.lock").exists()
