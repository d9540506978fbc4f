"""The gpu_telemetry module run by real ansible-playbook (through ansible-runner): start, idempotent
start, check mode, stop with summary, idempotent stop, and the skip/failure paths, with a stand-in
nvidia-smi that prints known rows in loop mode."""

from __future__ import annotations

import json
import re
from pathlib import Path

import helpers.gpu as support
from ansible.module_utils import gpu_telemetry as telemetry
from helpers.gpu import assert_summary, expected_summary, fed_rows
from helpers.playbooks import run_play
from helpers.processes import session_pids

PLAYBOOK = """\
- name: GPU telemetry around a benchmark
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Start telemetry
      gpu_telemetry:
        state: started
        path: {csv}
        nvidia_smi: {stand_in}
        interval_ms: 20
    - name: Start telemetry again
      gpu_telemetry:
        state: started
        path: {csv}
        nvidia_smi: {stand_in}
        interval_ms: 20
    - name: Start telemetry with another interval in check mode
      gpu_telemetry:
        state: started
        path: {csv}
        nvidia_smi: {stand_in}
        interval_ms: 30
      check_mode: true
    - name: Wait for the last fed sample
      ansible.builtin.wait_for:
        path: {csv}
        search_regex: {last_row}
        timeout: 60
    - name: Stop telemetry in check mode
      gpu_telemetry:
        state: stopped
        path: {csv}
      check_mode: true
    - name: Stop telemetry
      gpu_telemetry:
        state: stopped
        path: {csv}
    - name: Stop telemetry again
      gpu_telemetry:
        state: stopped
        path: {csv}
    - name: Start telemetry without nvidia-smi
      gpu_telemetry:
        state: started
        path: {csv_missing}
        nvidia_smi: {missing}
      register: skipped_start
    - name: Show the skipped result
      ansible.builtin.debug:
        var: skipped_start
    - name: Start telemetry whose nvidia-smi cannot read the GPUs
      gpu_telemetry:
        state: started
        path: {csv_broken}
        nvidia_smi: {broken}
        interval_ms: 20
      ignore_errors: true
    - name: Start telemetry into a missing folder
      gpu_telemetry:
        state: started
        path: {csv_nofolder}
        nvidia_smi: {stand_in}
      ignore_errors: true
"""


def test_gpu_telemetry_module(tmp_path):
    results_dir = tmp_path / "results"
    results_dir.mkdir()
    csv_path = results_dir / "baseline-c256.gpu.csv"
    rows_text = (support.SYNTH / "telemetry-2gpu.csv").read_text()
    stand_in = support.make_stand_in(tmp_path / "good", {"lms.rows": rows_text})
    mismatch = (support.SYNTH / "nvml-mismatch.txt").read_text()
    broken = support.make_stand_in(tmp_path / "broken", {"lms.out": mismatch, "lms.rc": "18"})
    last_row = [line for line in rows_text.splitlines() if line.strip()][-1]
    q = json.dumps
    playbook = PLAYBOOK.format(
        csv=q(str(csv_path)),
        stand_in=q(str(stand_in)),
        last_row=q(re.escape(last_row)),
        csv_missing=q(str(results_dir / "missing.gpu.csv")),
        missing=q(str(tmp_path / "absent" / "nvidia-smi")),
        csv_broken=q(str(results_dir / "broken.gpu.csv")),
        broken=q(str(broken)),
        csv_nofolder=q(str(tmp_path / "no-such-folder" / "x.gpu.csv")),
    )

    started_pid = None
    try:
        runner, results = run_play(tmp_path, playbook)

        def only(task):
            assert len(results.get(task, [])) == 1, (task, results.get(task), runner.stdout.read())
            return results[task][0]

        event, start = only("Start telemetry")
        started_pid = start.get("pid")
        assert event == "runner_on_ok", start
        assert start["changed"] is True and start["running"] is True
        assert start["path"] == str(csv_path) and start["pidfile"] == f"{csv_path}.pid"

        event, again = only("Start telemetry again")
        assert event == "runner_on_ok" and again["changed"] is False and again["pid"] == started_pid

        event, other = only("Start telemetry with another interval in check mode")
        assert event == "runner_on_ok" and other["changed"] is True

        event, check_stop = only("Stop telemetry in check mode")
        assert event == "runner_on_ok" and check_stop["changed"] is True and check_stop["running"] is True
        assert check_stop["stopped_by"] is None

        event, stop = only("Stop telemetry")
        assert event == "runner_on_ok", stop
        assert stop["changed"] is True and stop["running"] is False
        assert stop["pid"] == started_pid and stop["stopped_by"] == "sigterm"
        rows = fed_rows()
        assert_summary(stop["summary"], expected_summary(rows))
        assert stop["sampler_messages"] == ""

        event, stop_again = only("Stop telemetry again")
        assert event == "runner_on_ok" and stop_again["changed"] is False
        assert stop_again["stopped_by"] is None and stop_again["summary"] == stop["summary"]

        event, skip = only("Start telemetry without nvidia-smi")
        assert event == "runner_on_skipped", skip
        # ansible-runner leaves the result out of skip events; the next task shows it.
        skip = only("Show the skipped result")[1]["skipped_start"]
        assert skip["skipped"] is True and skip["changed"] is False and skip["pid"] is None
        assert "nvidia-smi not found" in skip["msg"]
        assert not (results_dir / "missing.gpu.csv").exists()
        assert not (results_dir / "missing.gpu.csv.pid").exists()

        event, fail = only("Start telemetry whose nvidia-smi cannot read the GPUs")
        assert event == "runner_on_failed"
        assert "wrote no sample" in fail["msg"] and "and exited" in fail["msg"]
        assert "Driver/library version mismatch" in fail["msg"]
        assert not (results_dir / "broken.gpu.csv.pid").exists()

        event, nofolder = only("Start telemetry into a missing folder")
        assert event == "runner_on_failed" and "does not exist" in nofolder["msg"]

        # The sampler and its session are gone; the CSV holds exactly the fed rows.
        assert not telemetry.process_alive(started_pid)
        assert session_pids(started_pid) == []
        assert not Path(f"{csv_path}.pid").exists()
        lines = csv_path.read_text().splitlines()
        assert lines[0] == telemetry.CSV_HEADER
        assert [line.split(", ")[1:] for line in lines[1:]] == [r[1:] for r in rows]
        assert runner.status == "successful", runner.stdout.read()
    finally:
        if started_pid and telemetry.process_alive(started_pid):
            telemetry.stop_sampler(started_pid, 5)
        for pidfile in results_dir.glob("*.pid"):
            pid = telemetry.read_pidfile(str(pidfile))
            if pid and telemetry.process_alive(pid) and pid in session_pids(pid):
                telemetry.stop_sampler(pid, 5)
