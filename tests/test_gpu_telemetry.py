"""plugins/module_utils/gpu_telemetry.py: the CSV summary, and the sampler's start/stop cycle with a
stand-in nvidia-smi that prints known rows in loop mode."""

from __future__ import annotations

import os
import re
import statistics
import time
from pathlib import Path

import gpu_test_support as support
import pytest
from ansible.module_utils import gpu_telemetry as telemetry
from conftest import session_pids
from gpu_test_support import COLUMNS, assert_summary, expected_summary, fed_rows


def wait_until(predicate, what, timeout_s=60.0):
    """Bounded wait for a condition (a deadline against hangs, not a timing assertion)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"gave up waiting for {what} after {timeout_s} s")
        time.sleep(0.05)


# --- summary ---------------------------------------------------------------------------------


def test_summary_of_real_h200_loop_capture(tmp_path):
    rows_text = (support.REAL_LOOP / "lms-250.csv").read_text()
    csv_path = tmp_path / "t.csv"
    csv_path.write_text(telemetry.CSV_HEADER + "\n" + rows_text)
    rows = [line.split(", ") for line in rows_text.splitlines()]
    summary = telemetry.summarize(str(csv_path))
    assert_summary(summary, expected_summary(rows))
    assert summary["0"]["samples"] == len(rows) == 9
    # Read off the capture: an idle H200 at 345 MHz, 79.02-79.08 W, no memory in use.
    assert summary["0"]["power_w_max"] == 79.08 and summary["0"]["sm_clock_mhz_max"] == 345
    assert summary["0"]["memory_used_mib_peak"] == 0


def test_summary_with_na_values_and_two_gpus(tmp_path):
    rows = fed_rows()
    csv_path = tmp_path / "t.csv"
    csv_path.write_text(telemetry.CSV_HEADER + "\n" + "".join(", ".join(r) + "\n" for r in rows))
    summary = telemetry.summarize(str(csv_path))
    # The [N/A] power sample of GPU 1 (its second sample in telemetry-2gpu.csv) is left out of
    # its mean and max but counted as a sample: the fixture's other four values, read off the file.
    gpu1_power = [121.05, 671.42, 649.01, 201.87]
    assert [r[3] for r in rows if r[1] == "1"] == ["121.05", "[N/A]", "671.42", "649.01", "201.87"]
    assert summary["1"]["samples"] == 5
    assert summary["1"]["power_w_mean"] == pytest.approx(statistics.fmean(gpu1_power), abs=1e-3)  # 3 places
    assert summary["1"]["power_w_max"] == 671.42
    assert_summary(summary, expected_summary(rows))


def test_summary_all_na_field_is_none(tmp_path):
    csv_path = tmp_path / "t.csv"
    csv_path.write_text(telemetry.CSV_HEADER + "\n" + "t, 0, GPU-x, [N/A], 1980, 3201, 50, 100, 40\n")
    summary = telemetry.summarize(str(csv_path))
    assert summary["0"]["power_w_mean"] is None and summary["0"]["power_w_max"] is None
    assert summary["0"]["sm_clock_mhz_max"] == 1980 and summary["0"]["samples"] == 1


def test_summary_skips_cut_row_and_handles_empty(tmp_path):
    csv_path = tmp_path / "t.csv"
    assert telemetry.summarize(str(csv_path)) == {}
    csv_path.write_text(telemetry.CSV_HEADER + "\n")
    assert telemetry.summarize(str(csv_path)) == {}
    csv_path.write_text(telemetry.CSV_HEADER + "\nt, 0, GPU-x, 100.0, 1980, 3201, 50, 100, 40\nt, 0, GPU-x, 999")
    assert telemetry.summarize(str(csv_path))["0"]["samples"] == 1
    assert telemetry.summarize(str(csv_path))["0"]["power_w_max"] == 100.0


def test_sampler_query_is_the_recorded_one():
    readme = (support.REAL_LOOP / "README.md").read_text()
    recorded = re.search(r"`nvidia-smi (--query-gpu=\S+ --format=\S+) -lms 250 > FILE`", readme).group(1)
    argv = telemetry.sampler_argv("/usr/bin/nvidia-smi", 250)
    assert " ".join(argv[1:]) == recorded + " -lms 250"
    assert telemetry.CSV_HEADER.split(",") == COLUMNS


# --- the sampler's life cycle with the stand-in (real processes: integration) -----------------


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


@pytest.mark.integration
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


@pytest.mark.integration
def test_sampler_ignoring_sigterm_is_killed(tmp_path, sampler_files):
    csv_path, pidfile, stderr_path, started = sampler_files
    stubborn = tmp_path / "stubborn"
    stubborn.write_text(
        "#!/usr/bin/env bash\ntrap '' TERM\necho 't, 0, GPU-x, 1.0, 2, 3, 4, 5, 6'\n"
        "while :; do sleep 1; done\n"
    )
    stubborn.chmod(0o755)
    argv = [str(stubborn)] + telemetry.sampler_argv("x", 1000)[1:]
    pid = telemetry.start_sampler(argv, csv_path, pidfile, stderr_path)
    started.append(pid)
    assert telemetry.wait_for_first_sample(csv_path, pid, 60)
    assert telemetry.stop_sampler(pid, 0.5) == "sigkill"
    assert not telemetry.process_alive(pid) and session_pids(pid) == []


@pytest.mark.integration
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


def test_pidfile_of_another_process_is_not_a_sampler(tmp_path):
    csv_path = str(tmp_path / "t.csv")
    pidfile = tmp_path / "t.pid"
    assert telemetry.sampler_pid(str(pidfile), csv_path) is None
    pidfile.write_text(f"{os.getpid()}\n")
    assert telemetry.sampler_pid(str(pidfile), csv_path) is None
    pidfile.write_text("not a pid\n")
    assert telemetry.read_pidfile(str(pidfile)) is None
