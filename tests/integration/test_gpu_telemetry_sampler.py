"""plugins/module_utils/gpu_telemetry.py's sampler as real processes: its start/stop cycle with a
stand-in nvidia-smi that prints known rows in loop mode, one that ignores SIGTERM, and one that
cannot start. The summary and the pure parts are in tests/unit/test_gpu_telemetry.py."""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import helpers.gpu as support
import pytest
from ansible.module_utils import gpu_telemetry as telemetry
from helpers.gpu import assert_summary, expected_summary, fed_rows
from helpers.processes import session_pids


def wait_until(predicate, what, timeout_s=60.0):
    """Bounded wait for a condition (a deadline against hangs, not a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what} after {timeout_s} s")
        time.sleep(0.05)


@pytest.fixture
def sampler_files(tmp_path):
    csv_path = str(tmp_path / "run" / "bench.gpu.csv")
    os.makedirs(os.path.dirname(csv_path))
    pidfile, stderr_path = telemetry.default_paths(csv_path)
    started = []
    yield csv_path, pidfile, stderr_path, started
    for pid in started:  # never leave a sampler behind, whatever the test did
        if telemetry.process_alive(pid):
            telemetry.stop_sampler(pid, 5)


def test_start_stop_cycle_records_fed_rows(tmp_path, sampler_files):
    csv_path, pidfile, stderr_path, started = sampler_files
    stand_in = support.make_stand_in(tmp_path / "bin", {"lms.rows": (support.SYNTH / "telemetry-2gpu.csv").read_text()})
    argv = telemetry.sampler_argv(str(stand_in), 20)

    pid = telemetry.start_sampler(argv, csv_path, pidfile, stderr_path)
    started.append(pid)
    assert telemetry.read_pidfile(pidfile) == pid
    assert telemetry.wait_for_first_sample(csv_path, pid, 60)
    assert telemetry.sampler_pid(pidfile, csv_path) == pid
    assert telemetry.runs_argv(pid, argv)
    assert not telemetry.runs_argv(pid, telemetry.sampler_argv(str(stand_in), 1000))

    rows = fed_rows()
    wait_until(lambda: telemetry.count_rows(csv_path) == len(rows), "all fed rows in the CSV")
    assert pid in session_pids(pid)

    assert telemetry.stop_sampler(pid, 10) == "sigterm"
    assert not telemetry.process_alive(pid)
    assert session_pids(pid) == []  # the stand-in's sleep child went with it
    assert telemetry.sampler_pid(pidfile, csv_path) is None

    lines = Path(csv_path).read_text().splitlines()
    assert lines[0] == telemetry.CSV_HEADER
    written = [line.split(", ") for line in lines[1:]]
    assert [r[1:] for r in written] == [r[1:] for r in rows]
    assert all(re.fullmatch(r"\d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{3}", r[0]) for r in written)
    assert_summary(telemetry.summarize(csv_path), expected_summary(rows))
    assert Path(stderr_path).read_text() == ""


def start_script_sampler(tmp_path, sampler_files, first_lines):
    """A sampler that is a bash script: ``first_lines``, then one sample line, then it idles. Started
    and seen sampling; returns its pid."""
    csv_path, pidfile, stderr_path, started = sampler_files
    script = tmp_path / "sampler.sh"
    script.write_text(f"#!/usr/bin/env bash\n{first_lines}\necho 't, 0, GPU-x, 1.0, 2, 3, 4, 5, 6'\n"
                      "while :; do sleep 1; done\n")
    script.chmod(0o755)
    pid = telemetry.start_sampler([str(script)] + telemetry.sampler_argv("x", 1000)[1:], csv_path, pidfile,
                                  stderr_path)
    started.append(pid)
    assert telemetry.wait_for_first_sample(csv_path, pid, 60)
    return pid


def test_sampler_ignoring_sigterm_is_killed(tmp_path, sampler_files):
    pid = start_script_sampler(tmp_path, sampler_files, "trap '' TERM")
    assert telemetry.stop_sampler(pid, 0.5) == "sigkill"
    assert not telemetry.process_alive(pid) and session_pids(pid) == []


def test_a_child_that_outlives_the_sampler_is_waited_for_and_killed(tmp_path, sampler_files):
    # The sampler dies at SIGTERM, its child ignores it: the stop is over only when the whole group
    # is gone (CI on a loaded machine once saw the stand-in's child outlive its leader's stop).
    # The child says when its trap is set: a child that exists but has not run `trap` yet dies at
    # SIGTERM like its leader, and the stop rightly needs no SIGKILL (a loaded CI machine saw it).
    ready = tmp_path / "child-trap-set"
    pid = start_script_sampler(
        tmp_path, sampler_files, f"bash -c \"trap '' TERM; touch {ready}; while :; do sleep 1; done\" &")
    wait_until(ready.exists, "the sampler's child to ignore SIGTERM")
    assert len(telemetry.group_members(pid)) >= 2
    assert telemetry.stop_sampler(pid, 0.5) == "sigkill"
    assert not telemetry.process_alive(pid) and session_pids(pid) == [] and telemetry.group_members(pid) == []


def test_sampler_that_cannot_start_writes_no_sample(tmp_path, sampler_files):
    csv_path, pidfile, stderr_path, started = sampler_files
    mismatch = (support.SYNTH / "nvml-mismatch.txt").read_text()
    stand_in = support.make_stand_in(tmp_path / "bin", {"lms.out": mismatch, "lms.rc": "18"})
    pid = telemetry.start_sampler(telemetry.sampler_argv(str(stand_in), 20), csv_path, pidfile, stderr_path)
    started.append(pid)
    assert telemetry.wait_for_first_sample(csv_path, pid, 60) is False
    assert not telemetry.process_alive(pid)
    # nvidia-smi prints the NVML message on stdout, so it lands in the CSV, not as a sample.
    assert "Driver/library version mismatch" in Path(csv_path).read_text()
    assert telemetry.summarize(csv_path) == {}
