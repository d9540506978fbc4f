"""The SYNTHETIC SGLang-protocol simulator (simulator/sglang_sim) for the tests: the flag manifest
it parses its command line with, its environment, its tokenizer, and one server as a process tree
(``SimServer``; ``start_bench_sim`` for the GLM-5 server the benchmark tests measure)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
import requests

from helpers import integration_only
from helpers.paths import PYTHON, REAL_MANIFEST, REPO, SIMULATOR
from helpers.processes import free_port


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


def make_tokenizer(folder: Path, *argv: str) -> subprocess.CompletedProcess:
    """The simulated model's tokenizer folder, written by the simulator's real CLI
    (``argv``: its options, e.g. ``--sharegpt 60``); fails the test if the CLI does."""
    result = subprocess.run(
        [PYTHON, "-m", "sglang_sim.make_tokenizer", str(folder), *argv],
        env=sim_env(Path("/nonexistent")), capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    return result


@integration_only
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


@integration_only
def start_bench_sim(folder: Path, tokenizer: Path, *argv: str, **env: str) -> SimServer:
    """A ready simulator of GLM-5 at TP 8 on a free port, the server the benchmark tests measure:
    ``tokenizer`` is its model and its tokenizer, ``argv`` and ``env`` are added to its command line
    and environment, its log is ``folder``/sim.log. Stopped again if it does not become ready."""
    port = free_port()
    server = SimServer(
        ["--model-path", str(tokenizer), "--served-model-name", "glm-5", "--tp-size", "8", "--port", str(port), *argv],
        sim_env(manifest_for_tests()[0], SGLANG_SIM_TOKENIZER=str(tokenizer), **env),
        Path(folder) / "sim.log",
        port,
    )
    try:
        server.wait_ready()
    except BaseException:
        server.stop()
        raise
    return server
