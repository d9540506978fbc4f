"""Unit tests of the lifecycle logic in plugins/module_utils (sglang_process, sglang_lock, sglang_ready).

Real processes and real signals where the behaviour is about processes (small trees in their own
session, started and always cleaned up here); fakes where a state cannot be produced on demand
(a process stuck in disk-sleep, nvidia-smi answers). No assertion on durations.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time

import psutil
import pytest
from ansible.module_utils import sglang_crash, sglang_lock, sglang_process, sglang_ready
from helpers.paths import FIXTURES, REPO
from helpers.processes import kill_session

CATALOG = sglang_crash.load_catalog(REPO / "data" / "crash_signatures.yml")


# --------------------------------------------------------------------------- helpers


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += max(seconds, 0.01)


@pytest.fixture
def tree(tmp_path):
    """Start a small process tree in its own session; yields (pid, log); kills it afterwards."""
    started = []

    def start(script):
        log = tmp_path / "tree.log"
        pid = sglang_process.spawn_detached(["/bin/bash", "-c", script], str(log))
        started.append(pid)
        deadline = time.monotonic() + 10
        # wait until the tree is there (the script writes "up" once its children run)
        while time.monotonic() < deadline and "up" not in log.read_text():
            time.sleep(0.05)
        assert "up" in log.read_text(), log.read_text()
        return pid, log

    yield start
    for pid in started:
        kill_session(pid)


# --------------------------------------------------------------------------- files


@pytest.mark.parametrize(
    "existing, keep, expected",
    [
        ([], 3, []),
        (["x.log"], 0, [("x.log", None)]),
        (["x.log"], 3, [("x.log", "x.log.1")]),
        (["x.log", "x.log.1"], 3, [("x.log.1", "x.log.2"), ("x.log", "x.log.1")]),
        (
            ["x.log", "x.log.1", "x.log.2", "x.log.3"],
            3,
            [("x.log.3", None), ("x.log.2", "x.log.3"), ("x.log.1", "x.log.2"), ("x.log", "x.log.1")],
        ),
        (["x.log", "x.log.2"], 3, [("x.log.2", "x.log.3"), ("x.log", "x.log.1")]),
    ],
)
def test_rotation_plan(existing, keep, expected):
    assert sglang_process.rotation_plan("x.log", keep, exists=set(existing).__contains__) == expected


def test_rotate_log_keeps_n_copies(tmp_path):
    log = tmp_path / "baseline.log"
    for run in range(5):
        log.write_text(f"run {run}\n")
        sglang_process.rotate_log(str(log), 2)
    assert not log.exists()
    assert (tmp_path / "baseline.log.1").read_text() == "run 4\n"
    assert (tmp_path / "baseline.log.2").read_text() == "run 3\n"
    assert not (tmp_path / "baseline.log.3").exists()


def test_state_files_round_trip(tmp_path):
    path = tmp_path / "server.json"
    sglang_process.atomic_write_json(str(path), {"tier": "baseline", "pid": 12})
    assert sglang_process.read_json(str(path)) == {"tier": "baseline", "pid": 12}
    assert oct(path.stat().st_mode & 0o777) == "0o640"
    path.write_text("{broken")
    assert sglang_process.read_json(str(path)) is None
    assert sglang_process.read_json(str(tmp_path / "missing.json")) is None


# --------------------------------------------------------------------------- patterns and protection

PATTERNS = sglang_process.compile_patterns(sglang_process.KILL_PATTERNS)


@pytest.mark.parametrize(
    "cmdline",
    [
        "sglang::scheduler_TP0",
        "sglang::scheduler_DP1_TP3",
        "sglang::detokenizer",
        "sglang::data_parallel_controller",
        "python3 -u -m sglang.launch_server --model lukealonso/GLM-5-NVFP4 --tp-size 8",
        "/root/ml-env/bin/python /root/ml-env/bin/sglang serve --model-path x",
        "/srv/lab/.venv/bin/python -m sglang_sim.launch_server --model-path x --tp-size 8 --port 30000",
    ],
)
def test_sglang_command_lines_match(cmdline):
    assert sglang_process.cmdline_matches(cmdline, PATTERNS)


@pytest.mark.parametrize(
    "cmdline",
    [
        "tail -f /root/sglang-server-piecewise.log",
        "grep sglang::scheduler /tmp/ps.txt",
        "vim simulator/sglang_sim/launch_server.py",
        "python3 -m sglang.bench_serving --backend sglang --num-prompts 10",
        "python -m pytest tests/test_sglang_launch_server.py",
        "bash /root/run_tp8_piecewise.sh",
    ],
)
def test_other_command_lines_do_not_match(cmdline):
    assert sglang_process.cmdline_matches(cmdline, PATTERNS) is None


def test_bad_pattern_is_named():
    with pytest.raises(ValueError, match=r"'\('"):
        sglang_process.compile_patterns(["("])


def test_protected_pids_are_this_process_and_its_ancestors():
    protected = sglang_process.protected_pids()
    assert os.getpid() in protected
    assert os.getppid() in protected


# --------------------------------------------------------------------------- discovery and stop (real processes)


def test_session_finds_the_whole_tree_and_stop_ends_it(tree):
    pid, _log = tree("sleep 300 & sleep 300 & echo up; wait")
    assert os.getsid(pid) == pid
    targets, skipped = sglang_process.find_server_processes(sid=pid, pid=pid, protected={os.getpid()})
    assert skipped == []
    assert pid in targets and len(targets) == 3
    assert all("session" in entry["found_by"] and "pidfile" in entry["found_by"] for entry in targets.values())

    records, _timings = sglang_process.stop_processes(targets, grace_seconds=10)
    assert {r["outcome"] for r in records} <= {"exited-on-term"}
    assert all(r["signals"] == ["TERM"] for r in records)
    assert sglang_process.split_alive(targets)[0] == []


def test_protected_process_is_never_a_target(tree):
    pid, _log = tree("sleep 300 & echo up; wait")
    targets, skipped = sglang_process.find_server_processes(sid=pid, protected={pid})
    assert pid not in targets
    assert {"pid": pid, "found_by": "session"} in skipped


def test_process_started_before_the_server_is_not_taken_for_it(tree):
    pid, _log = tree("sleep 300 & echo up; wait")
    targets, _ = sglang_process.find_server_processes(sid=pid, started_at=time.time() + 3600, protected=set())
    assert targets == {}


def test_child_ignoring_sigterm_is_killed(tree):
    # bash ignores TERM and its sleep inherits the ignored disposition.
    pid, _log = tree("trap '' TERM; sleep 300 & echo up; wait")
    targets, _ = sglang_process.find_server_processes(sid=pid, protected={os.getpid()})
    records, _timings = sglang_process.stop_processes(targets, grace_seconds=0.5)
    assert {r["outcome"] for r in records} == {"killed"}
    assert all(r["signals"] == ["TERM", "KILL"] for r in records)


def test_orphan_ignoring_sigterm_is_killed_once_the_main_process_is_gone(tree):
    # The root (no trap) dies on SIGTERM; its child subshell ignores SIGTERM.
    pid, _log = tree("(trap '' TERM; sleep 300) & echo up; wait")
    targets, _ = sglang_process.find_server_processes(sid=pid, protected={os.getpid()})
    records, _timings = sglang_process.stop_processes(targets, grace_seconds=120, roots={pid},
                                                      orphan_grace_seconds=0.2)
    by_pid = {r["pid"]: r for r in records}
    assert by_pid[pid]["outcome"] == "exited-on-term"
    orphans = [r for r in records if r["pid"] != pid]
    assert orphans and all(r["outcome"] == "killed" and r.get("orphaned") for r in orphans)


def test_the_main_process_diagnostic_sleep_is_ended_once_the_workers_are_gone(tree):
    # SGLang 0.5.17 after our SIGTERM (tests/fixtures/real-sglang/, server_term_idle.log): the
    # scheduler exits at once, the main process traps the signal and sleeps 5 s "before crash
    # diagnostics" while it holds the port. Here: a worker titled like SGLang's scheduler that
    # dies on TERM, and a main shell that traps TERM and sleeps on.
    pid, _log = tree("(exec -a sglang::scheduler sleep 300) & trap 'sleep 30' TERM; echo up; wait; wait")
    targets, _ = sglang_process.find_server_processes(sid=pid, protected={os.getpid()})
    worker_re = re.compile(sglang_process.WORKER_PATTERN)
    workers = {p for p, e in targets.items() if worker_re.search(sglang_process.describe(e["proc"])["cmdline"])}
    assert len(workers) == 1
    started = time.monotonic()
    records, timings = sglang_process.stop_processes(targets, grace_seconds=60, roots={pid}, orphan_grace_seconds=60,
                                                     workers=workers, workers_gone_grace_seconds=0.2)
    assert time.monotonic() - started < 10  # neither the 30 s trap sleep nor the 60 s grace
    by_pid = {r["pid"]: r for r in records}
    assert by_pid[next(iter(workers))]["outcome"] == "exited-on-term"
    assert by_pid[pid]["outcome"] == "killed" and by_pid[pid].get("after_workers") is True
    assert 0 <= timings["workers_gone_s"] < timings["total_s"]
    assert sglang_process.split_alive(targets)[0] == []


def test_a_worker_that_ignores_sigterm_keeps_the_grace(tree):
    pid, _log = tree("(trap '' TERM; exec -a sglang::scheduler_TP0 sleep 300) & echo up; wait")
    targets, _ = sglang_process.find_server_processes(sid=pid, protected={os.getpid()})
    worker_re = re.compile(sglang_process.WORKER_PATTERN)
    workers = {p for p, e in targets.items() if worker_re.search(sglang_process.describe(e["proc"])["cmdline"])}
    records, timings = sglang_process.stop_processes(targets, grace_seconds=0.5, workers=workers,
                                                     workers_gone_grace_seconds=0.1)
    assert "workers_gone_s" not in timings
    assert {r["pid"]: r["outcome"] for r in records}[next(iter(workers))] == "killed"


def test_pattern_safety_net_finds_a_process_without_session_or_pidfile(tree, tmp_path):
    marker = f"sglang-lifecycle-test-{os.getpid()}-{tmp_path.name}"
    pid, _log = tree(f"exec -a {marker} sleep 300 & echo up; wait")
    pattern = f"^{marker} 300$"
    targets, _ = sglang_process.find_server_processes(patterns=[pattern], protected={os.getpid()})
    assert len(targets) == 1
    (entry,) = targets.values()
    assert entry["found_by"] == [f"pattern:{pattern}"]
    assert os.getsid(next(iter(targets))) == pid


def test_zombie_counts_as_gone_and_is_not_signalled():
    child = subprocess.Popen(["/bin/true"])
    proc = psutil.Process(child.pid)
    deadline = time.monotonic() + 10
    while proc.status() != psutil.STATUS_ZOMBIE and time.monotonic() < deadline:
        time.sleep(0.02)
    try:
        assert sglang_process.is_gone(proc)
        alive, zombies = sglang_process.split_alive({child.pid: {"proc": proc, "found_by": ["session"]}})
        assert (alive, zombies) == ([], [child.pid])
        records, _ = sglang_process.stop_processes({child.pid: {"proc": proc, "found_by": ["session"]}}, 1)
        assert records[0]["outcome"] == "zombie" and records[0]["signals"] == []
    finally:
        child.wait()


class StuckProcess:
    """A process in uninterruptible sleep: signals are delivered but it never exits."""

    pid = 999999

    def __init__(self):
        self.signals = []

    def send_signal(self, signum):
        self.signals.append(signum)

    def status(self):
        return psutil.STATUS_DISK_SLEEP

    def oneshot(self):
        import contextlib

        return contextlib.nullcontext()

    def ppid(self):
        return 1

    def name(self):
        return "python3"

    def cmdline(self):
        return ["python3", "-m", "sglang.launch_server", "--tp-size", "8"]

    def create_time(self):
        return 0.0

    def username(self):
        return "root"


def test_process_surviving_sigkill_is_reported_with_its_state():
    clock = FakeClock()
    stuck = StuckProcess()
    records, _ = sglang_process.stop_processes(
        {stuck.pid: {"proc": stuck, "found_by": ["session"]}}, 2.0, 1.0, clock=clock, sleep=clock.sleep
    )
    (record,) = records
    assert record["outcome"] == "survivor"
    assert "disk-sleep" in record["state"]
    assert "sglang.launch_server" in record["cmdline"]
    assert stuck.signals == [signal.SIGTERM, signal.SIGKILL]


# --------------------------------------------------------------------------- ports


def test_port_held_by_a_listener_names_its_process():
    # The holder is a child, not this process: pytest-xdist rewrites its workers' titles
    # (setproctitle), so this process's cmdline no longer says "python".
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import socket, sys, time\n"
         "s = socket.socket(); s.bind(('127.0.0.1', 0)); s.listen(1)\n"
         "print(s.getsockname()[1], flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        port = int(child.stdout.readline())
        status = sglang_process.port_status(port)
        assert status["free"] is False
        assert [h["pid"] for h in status["holders"]] == [child.pid]
        assert "python" in status["holders"][0]["cmdline"]
        assert f"pid {child.pid}" in sglang_process.format_holders(status["holders"])
    finally:
        child.kill()
        child.wait()
        child.stdout.close()
    assert sglang_process.port_status(port) == {"port": port, "free": True, "holders": []}


# --------------------------------------------------------------------------- GPU release


def snapshot(processes, used=(1000, 2000), available=True, known=True):
    return {
        "available": available,
        "error": None if available else "nvidia-smi not found",
        "processes_known": known,
        "gpus": [{"index": i, "name": "NVIDIA RTX PRO 6000 Blackwell", "memory_used_mib": u, "memory_total_mib": 97887}
                 for i, u in enumerate(used)],
        "processes": [{"pid": pid, "gpu_index": gpu, "used_memory_mib": mib} for pid, gpu, mib in processes],
    }


def test_gpu_release_is_polled_until_the_pids_are_gone():
    clock = FakeClock()
    answers = iter([snapshot([(100, 0, 80000), (4242, 1, 500)], (81000, 1500)),
                    snapshot([(100, 0, 80000), (4242, 1, 500)], (81000, 1500)),
                    snapshot([(4242, 1, 500)], (1000, 1500))])
    before = snapshot([(100, 0, 80000), (4242, 1, 500)], (81000, 1500))
    result = sglang_process.wait_gpu_released(lambda: next(answers), [100, 101], 30, before=before, clock=clock,
                                              sleep=clock.sleep)
    assert result["checked"] and result["released"] is True
    assert result["polls"] == 3
    assert [g["memory_used_mib"] for g in result["before"]] == [81000, 1500]
    assert [g["memory_used_mib"] for g in result["after"]] == [1000, 1500]
    assert [p["pid"] for p in result["other_processes"]] == [4242]


def test_gpu_still_held_after_the_timeout_is_reported():
    clock = FakeClock()
    result = sglang_process.wait_gpu_released(lambda: snapshot([(100, 0, 80000)]), [100], 5, clock=clock,
                                              sleep=clock.sleep)
    assert result["released"] is False
    assert result["holding"] == [{"pid": 100, "gpu_index": 0, "used_memory_mib": 80000}]


@pytest.mark.parametrize(
    "answer, checked, released",
    [(snapshot([], available=False), False, None), (snapshot([], known=False), False, None)],
    ids=["no-nvidia-smi", "process-query-failed"],
)
def test_gpu_release_unverifiable(answer, checked, released):
    clock = FakeClock()
    result = sglang_process.wait_gpu_released(lambda: answer, [100], 5, clock=clock, sleep=clock.sleep)
    assert result["checked"] is checked and result["released"] is released


def test_gpu_release_with_the_nvidia_smi_parser():
    fixtures = REPO / "tests" / "fixtures" / "nvidia-smi" / "h200-1gpu"
    from ansible.module_utils.nvidia_smi import gpu_snapshot

    apps = iter([(fixtures / "query-compute-apps-busy.csv").read_text(),
                 (fixtures / "query-compute-apps-idle.csv").read_text()])

    def run_command(argv):
        if any(arg.startswith("--query-gpu") for arg in argv):
            return 0, (fixtures / "query-gpu.csv").read_text(), ""
        return 0, next(apps), ""

    clock = FakeClock()
    result = sglang_process.wait_gpu_released(lambda: gpu_snapshot(run_command, "/bin/true"), [422], 30,
                                              clock=clock, sleep=clock.sleep)
    assert result["checked"] and result["released"] is True and result["polls"] == 2
    assert result["after"][0]["name"] == "NVIDIA H200"


# --------------------------------------------------------------------------- lock


def dead_pid():
    child = subprocess.Popen(["/bin/true"])
    child.wait()
    return child.pid


def test_lock_acquire_release_cycle(tmp_path):
    path = str(tmp_path / "sglang.lock")
    first = sglang_lock.acquire(path, "token-a", "play A", holder_pid=os.getpid())
    assert first["changed"] and first["acquired"] and first["holder"]["play"] == "play A"
    again = sglang_lock.acquire(path, "token-a", "play A", holder_pid=os.getpid())
    assert again["changed"] is False and again["acquired"]
    other = sglang_lock.acquire(path, "token-b", "play B", holder_pid=os.getpid())
    assert other["acquired"] is False and other["holder"]["token"] == "token-a"
    assert "play 'play A'" in sglang_lock.describe_holder(other["holder"])
    assert sglang_lock.release(path, "token-b")["released"] is False
    assert sglang_lock.release(path, "token-a") == {"changed": True, "released": True, "holder": first["holder"]}
    assert sglang_lock.release(path, "token-a")["changed"] is False


def test_lock_of_a_dead_holder_is_taken_over(tmp_path):
    path = str(tmp_path / "sglang.lock")
    sglang_lock.acquire(path, "token-a", "play A", holder_pid=dead_pid())
    result = sglang_lock.acquire(path, "token-b", "play B", holder_pid=os.getpid())
    assert result["acquired"] and "no longer runs" in result["took_over"]["reason"]


def test_unverifiable_lock_goes_stale_only_with_age_or_force(tmp_path):
    path = str(tmp_path / "sglang.lock")
    clock = FakeClock()
    sglang_lock.acquire(path, "token-a", "remote play", clock=clock, holder_pid=0)  # pid unknown
    assert sglang_lock.acquire(path, "token-b", "p", max_age_seconds=3600, clock=clock)["acquired"] is False
    assert sglang_lock.acquire(path, "token-b", "p", force=True, check_mode=True, clock=clock)["took_over"]
    clock.now += 7200
    result = sglang_lock.acquire(path, "token-b", "p", max_age_seconds=3600, clock=clock)
    assert result["acquired"] and "older than" in result["took_over"]["reason"]


def test_lock_check_mode_writes_nothing(tmp_path):
    path = tmp_path / "sglang.lock"
    assert sglang_lock.acquire(str(path), "t", "p", check_mode=True)["changed"]
    assert not path.exists()


class _LockModule:
    """What sglang_lock.take needs of an AnsibleModule: check_mode, warn, fail_json (raises here)."""

    def __init__(self, check_mode=False):
        self.check_mode, self.warnings = check_mode, []

    def warn(self, text):
        self.warnings.append(text)

    def fail_json(self, **result):
        raise _Failed(result)


class _Failed(Exception):
    pass


LOCK_OPTIONS = {"play": "p", "max_age_seconds": 86400, "force": False}


def test_take_creates_the_run_dir_and_holds_the_lock(tmp_path):
    run_dir = tmp_path / "run"
    taken = sglang_lock.take(_LockModule(), str(run_dir), dict(LOCK_OPTIONS, token="mine"))
    assert taken["changed"] and taken["path"] == str(run_dir / sglang_lock.LOCK_NAME)
    assert json.loads((run_dir / sglang_lock.LOCK_NAME).read_text())["token"] == "mine"
    assert not sglang_lock.take(_LockModule(), str(run_dir), dict(LOCK_OPTIONS, token="mine"))["changed"]


def test_take_refuses_another_experiments_lock_and_leaves_it(tmp_path):
    path = tmp_path / sglang_lock.LOCK_NAME
    sglang_lock.acquire(str(path), "theirs", "their play", holder_pid=os.getpid())
    before = path.read_text()
    with pytest.raises(_Failed) as refused:
        sglang_lock.take(_LockModule(), str(tmp_path), dict(LOCK_OPTIONS, token="mine"))
    result = refused.value.args[0]
    assert result["lock_refused"] is True and result["holder"]["token"] == "theirs"
    assert "locked by another experiment" in result["msg"] and f"pid {os.getpid()}" in result["msg"]
    assert path.read_text() == before


def test_take_warns_when_it_takes_over_a_dead_holders_lock(tmp_path):
    dead = subprocess.Popen(["/bin/true"])
    dead.wait()
    sglang_lock.acquire(str(tmp_path / sglang_lock.LOCK_NAME), "dead", "dead play", holder_pid=dead.pid)
    module = _LockModule()
    taken = sglang_lock.take(module, str(tmp_path), dict(LOCK_OPTIONS, token="mine"))
    assert "no longer runs" in taken["took_over"]["reason"]
    assert module.warnings and "took over a stale experiment lock" in module.warnings[0]


def test_take_in_check_mode_writes_nothing(tmp_path):
    run_dir = tmp_path / "run"
    assert sglang_lock.take(_LockModule(check_mode=True), str(run_dir), dict(LOCK_OPTIONS, token="t"))["changed"]
    assert not run_dir.exists()


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["/srv/lab/.venv/bin/python", "/srv/lab/.venv/bin/ansible-playbook", "play.yml"], True),
        (["/usr/bin/ansible-playbook", "-i", "inv", "play.yml"], True),
        (["/usr/bin/python3", "/usr/bin/ansible", "localhost", "-m", "ping"], True),
        (["/usr/bin/python3", "-m", "pytest"], False),
        (["bash"], False),
    ],
)
def test_controller_command_lines(argv, expected):
    assert sglang_lock.is_controller_cmdline(argv) is expected


def test_no_controller_outside_ansible():
    assert sglang_lock.find_controller() == (None, None)


# --------------------------------------------------------------------------- log follower and the wait


def test_log_follower_reads_increments_and_partial_lines(tmp_path):
    log = tmp_path / "t.log"
    log.write_text("")
    follower = sglang_ready.LogFollower(str(log), CATALOG)
    with open(log, "a") as handle:
        handle.write("[TP0] Load weight begin. avail mem=94.44 GB\n[TP0] Capture cuda graph be")
    assert follower.poll() == 1
    assert follower.state["last_line"].endswith("avail mem=94.44 GB")
    with open(log, "a") as handle:
        handle.write("gin. This can take up to several minutes.\ntorch.OutOfMemoryError: CUDA out of memory.\n")
    assert follower.poll() == 2
    assert follower.state["lines"] == 3
    assert follower.state["first_fatal"]["line_number"] == 3
    report = follower.classify()
    assert report["crash_class"] == "cuda_oom_graph_capture"  # the capture had begun (line 2)
    assert report["crash_line_number"] == 3


def test_log_follower_starts_over_on_a_new_file(tmp_path):
    log = tmp_path / "t.log"
    log.write_text("a\nb\nc\n")
    follower = sglang_ready.LogFollower(str(log), CATALOG)
    follower.poll()
    log.unlink()
    log.write_text("x\n")
    assert follower.poll() == 1 and follower.state["lines"] == 1


def prober_from(answers):
    """A health prober answering per path from a dict of path -> list of (status, code)."""
    def probe(url, timeout):
        path = "/" + url.split("/", 3)[3]
        queue = answers[path]
        return queue.pop(0) if len(queue) > 1 else queue[0]
    return probe


def run_wait(tmp_path, text="", alive=True, prober=None, **kwargs):
    log = tmp_path / "server.log"
    log.write_text(text)
    params = dict(
        log_path=str(log), catalog=CATALOG, is_alive=lambda: alive, host="127.0.0.1", port=1,
        deadline_s=30, interval=0.01, linger_s=0, prober=prober or prober_from({"/health_generate": [("down", None)]}),
    )
    params.update(kwargs)
    return sglang_ready.wait_ready(**params)


def test_wait_ready_when_health_answers(tmp_path):
    prober = prober_from({"/health_generate": [("down", None), ("starting", 503), ("ready", 200)]})
    result = run_wait(tmp_path, "[TP0] Load weight begin.\n", prober=prober)
    assert result["outcome"] == "ready" and result["report"] is None
    assert result["health"]["path"] == "/health_generate"


def test_wait_ready_falls_back_to_health_on_404(tmp_path):
    prober = prober_from({"/health_generate": [("missing", 404)], "/health": [("ready", 200)]})
    result = run_wait(tmp_path, prober=prober)
    assert result["outcome"] == "ready" and result["health"]["path"] == "/health"
    assert result["state"]["health_index"] == 1


def test_wait_fails_on_a_fatal_line_even_while_the_process_runs(tmp_path):
    text = "[TP0] Load weight begin.\nlaunch_server.py: error: unrecognized arguments: --enable-reasoning\n"
    result = run_wait(tmp_path, text)
    assert result["outcome"] == "crashed"
    assert result["report"]["crash_class"] == "argparse_unrecognized"
    assert result["report"]["crash_line_number"] == 2


def test_wait_reports_an_exit_without_signature(tmp_path):
    result = run_wait(tmp_path, "[TP0] Load weight begin.\nKilled\n", alive=False, exit_status_fn=lambda: 137)
    assert result["outcome"] == "exited"
    assert result["report"]["crash_class"] == "unclassified_crash"  # never nothing for a dead server
    assert result["report"]["crash_line"] == "Killed" and result["report"]["fallback"] is True
    assert "report this log" in result["report"]["remedy"].lower()
    assert result["report"]["exit_status"] == 137
    assert "Killed" in result["report"]["excerpt"]


def test_wait_times_out_as_hang_with_the_log_tail(tmp_path):
    result = run_wait(tmp_path, "[TP0] Capture cuda graph begin.\n", deadline_s=0.05)
    assert result["outcome"] == "hang"
    assert result["report"]["crash_class"] == "hang"
    assert "Capture cuda graph begin." in result["report"]["excerpt"]
    assert result["report"]["remedy"]


def test_wait_windows_continue_where_they_stopped(tmp_path):
    progress = []
    first = run_wait(tmp_path, "line 1\nline 2\n", window_s=0.05, progress_fn=progress.append)
    assert first["outcome"] == "pending" and first["progress"]["log_lines"] == 2
    assert progress and progress[-1]["last_line"] == "line 2"
    with open(tmp_path / "server.log", "a") as handle:
        handle.write("NCCL error: unhandled system error\n")
    second = sglang_ready.wait_ready(
        log_path=str(tmp_path / "server.log"), catalog=CATALOG, is_alive=lambda: True, host="127.0.0.1", port=1,
        deadline_s=30, interval=0.01, linger_s=0, state=first["state"],
        prober=prober_from({"/health_generate": [("down", None)]}),
    )
    assert second["outcome"] == "crashed" and second["report"]["crash_class"] == "nccl_error"
    assert second["report"]["crash_line_number"] == 3
    assert second["progress"]["log_lines"] == 3


def test_non_fatal_signature_is_a_warning_not_a_failure(tmp_path):
    text = ("torch/_dynamo/variables/functions.py:1692: UserWarning: Dynamo detected a call to a "
            "`functools.lru_cache`-wrapped function. Dynamo ignores the cache wrapper.\n")
    prober = prober_from({"/health_generate": [("ready", 200)]})
    result = run_wait(tmp_path, text, prober=prober)
    assert result["outcome"] == "ready"
    assert [w["class"] for w in result["warnings"]] == ["dynamo_lru_cache_warning"]


def test_probe_against_a_real_socket():
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()
    assert sglang_ready.probe(f"http://127.0.0.1:{port}/health", 1) == ("down", None)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))


def test_gpu_after_figures_wait_for_the_driver_to_free_the_memory():
    """Seen on an H200 (tests/fixtures/gpu-check): the stopped PID leaves --query-compute-apps
    about 0.2 s before memory.used drops. The "after" figures must come from the settled read."""
    clock = FakeClock()
    before = snapshot([(100, 0, 4706)], (4715, 4))
    answers = iter([snapshot([], (4712, 1)), snapshot([], (4712, 1)), snapshot([], (9, 1))])
    result = sglang_process.wait_gpu_released(lambda: next(answers), [100], 30, before=before, clock=clock,
                                              sleep=clock.sleep, interval=0.25)
    assert result["released"] is True and result["memory_settled"] is True
    assert result["polls"] == 3
    assert [g["memory_used_mib"] for g in result["after"]] == [9, 1]


def test_gpu_memory_that_never_comes_down_is_reported_not_hidden():
    clock = FakeClock()
    before = snapshot([(100, 0, 4706)], (4715, 4))
    result = sglang_process.wait_gpu_released(lambda: snapshot([], (4712, 1)), [100], 5, before=before, clock=clock,
                                              sleep=clock.sleep, interval=0.25)
    assert result["released"] is True
    assert result["memory_settled"] is False and result["pending_gpus"] == [0]


# --------------------------------------------------------------------------- progress, stall and phases

GRAPHS = FIXTURES / "real-sglang" / "probe-0.5.17-h200-tp1-graphs"


def test_probe_lines_are_not_progress_but_a_redrawn_bar_is(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("[2026-12-01 08:14:49] Load weight begin. avail mem=139.13 GB\n")
    ticks = iter(range(100, 1000))
    follower = sglang_ready.LogFollower(str(log), CATALOG)
    follower.poll(wall=lambda: next(ticks))
    first = follower.state["progress_at"]
    with log.open("a") as handle:
        handle.write('[2026-12-01 08:14:50] INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 503 Service Unavailable\n')
        handle.write('[2026-12-01 08:14:50] INFO:     127.0.0.1:2 - "GET /v1/models HTTP/1.1" 200 OK\n')
    follower.poll(wall=lambda: next(ticks))
    assert follower.state["progress_at"] == first  # our own probes are not progress
    with log.open("a") as handle:
        handle.write("Capturing batches (bs=16 avail_mem=94.80 GB):   0%|          | 0/6")
    follower.poll(wall=lambda: next(ticks))
    redrawn = follower.state["progress_at"]
    assert redrawn > first
    with log.open("a") as handle:
        handle.write("\rCapturing batches (bs=16 avail_mem=94.80 GB):  17%|#6        | 1/6")
    follower.poll(wall=lambda: next(ticks))
    assert follower.state["progress_at"] > redrawn  # the same line, redrawn with \r


def test_a_stalled_log_is_a_hang_before_the_hard_cap(tmp_path):
    now = [1000.0]

    def wall():
        now[0] += 0.5
        return now[0]

    result = run_wait(tmp_path, "[2026-12-01 08:14:49] Load weight begin.\n", deadline_s=30, stall_s=3.0,
                      started_wall=1000.0, wall=wall)
    assert result["outcome"] == "hang" and result["report"]["stalled_s"] >= 3.0
    assert "no progress in the log for" in result["report"]["crash_line"]
    assert result["elapsed_s"] < 25  # long before the 30 s cap


def test_a_log_that_keeps_advancing_is_not_a_stall(tmp_path):
    log = tmp_path / "server.log"
    log.write_text("")
    wall_now = [0.0]

    def wall():
        wall_now[0] += 1.0  # 1 s of wall time per look; the log grows every look
        with log.open("a") as handle:
            handle.write("\rCapturing batches: step")
        return wall_now[0]

    prober = prober_from({"/health_generate": [("down", None)] * 30 + [("ready", 200)]})
    result = sglang_ready.wait_ready(
        log_path=str(log), catalog=CATALOG, is_alive=lambda: True, host="127.0.0.1", port=1, deadline_s=30,
        interval=0.01, linger_s=0, prober=prober, stall_s=3.0, started_wall=0.0, wall=wall,
    )
    assert result["outcome"] == "ready", result["report"]


def test_startup_phases_of_a_real_0_5_17_start(tmp_path):
    follower = sglang_ready.LogFollower(str(GRAPHS / "server_cudagraph.log"), CATALOG)
    follower.poll()
    marks = follower.state["marks"]
    expected = {"weights_begin", "weights_end", "kv_cache_end", "capture_begin", "capture_end", "http_up", "fired_up"}
    assert expected <= set(marks)
    started = marks["weights_begin"] - 26  # the log's server_args line to weights, as recorded
    phases = sglang_ready.startup_phases(marks, started_at=started, ready_at=marks["fired_up"])
    assert phases["weights"] == 0.0 and phases["kv_cache"] == 0.0  # 0.17 s, whole-second stamps
    assert 7 <= phases["graph_capture"] <= 10  # prefill 5.11 s + decode 3.26 s in the log
    assert phases["warmup"] == 2.0 and phases["init"] == 26.0
    assert phases["total"] == round(marks["fired_up"] - started, 1)
    assert sglang_ready.startup_phases({}, started_at=1.0) == {}


def test_a_sigterm_stop_is_not_a_crash(tmp_path):
    # Real 0.5.17 after a SIGTERM (tests/fixtures/crashlogs/stopped_by_sigterm/): the log says it
    # drains, then reports its scheduler's -15 as a crash; the process is gone.
    text = (
        "[2026-12-01 07:46:10] SIGTERM received. signum=15 frame=None. Draining requests and shutting down...\n"
        "[2026-12-01 07:46:10] Subprocess scheduler_0 (pid=1637) crashed with exit code -15. Triggering SIGQUIT.\n"
    )
    result = run_wait(tmp_path, text, alive=False)
    assert result["outcome"] == "stopped", result["report"]
    assert result["report"]["crash_class"] == "stopped_by_sigterm"
    assert "Draining requests" in result["report"]["crash_line"]
