"""plugins/module_utils/gpu_telemetry.py: the CSV summary, the sampler's command line and pid file.
The sampler's start/stop cycle with a stand-in nvidia-smi (real processes) is in
tests/integration/test_gpu_telemetry_sampler.py."""

from __future__ import annotations

import os
import re
import statistics

import helpers.gpu as support
import pytest
from ansible.module_utils import gpu_telemetry as telemetry
from helpers.gpu import COLUMNS, assert_summary, expected_summary, fed_rows

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


def test_pidfile_of_another_process_is_not_a_sampler(tmp_path):
    csv_path = str(tmp_path / "t.csv")
    pidfile = tmp_path / "t.pid"
    assert telemetry.sampler_pid(str(pidfile), csv_path) is None
    pidfile.write_text(f"{os.getpid()}\n")
    assert telemetry.sampler_pid(str(pidfile), csv_path) is None
    pidfile.write_text("not a pid\n")
    assert telemetry.read_pidfile(str(pidfile)) is None
