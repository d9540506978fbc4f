"""The gpu_facts module run by real ansible-playbook (through ansible-runner) against a stand-in
nvidia-smi that prints recorded output."""

from __future__ import annotations

import json

import helpers.gpu as support
from ansible.module_utils.nvidia_smi import build_snapshot
from helpers.playbooks import run_play

PLAYBOOK = """\
- name: Read GPUs through stand-in nvidia-smi scripts
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Facts from the stand-in found on PATH
      gpu_facts:
      environment:
        PATH: {busy_path}
    - name: Facts in check mode
      gpu_facts:
        nvidia_smi: {busy}
      check_mode: true
    - name: Facts with N/A fields
      gpu_facts:
        nvidia_smi: {na}
    - name: Facts on eight GPUs
      gpu_facts:
        nvidia_smi: {eight}
    - name: Facts with the NVML mismatch
      gpu_facts:
        nvidia_smi: {mismatch}
    - name: Facts without nvidia-smi
      gpu_facts:
        nvidia_smi: {missing}
    - name: Facts without nvidia-smi and fail_on_missing
      gpu_facts:
        nvidia_smi: {missing}
        fail_on_missing: true
      ignore_errors: true
    - name: Facts with a bad timeout
      gpu_facts:
        nvidia_smi: {busy}
        timeout: 0
      ignore_errors: true
"""


def fixture_text(folder, name):
    return (folder / name).read_text()


def test_gpu_facts_module(tmp_path):
    real, synth = support.REAL, support.SYNTH
    cases = {
        "busy": (fixture_text(real, "query-gpu.csv"), fixture_text(real, "query-compute-apps-busy.csv"), 0),
        "na": (fixture_text(synth, "query-gpu-na.csv"), fixture_text(real, "query-compute-apps-idle.csv"), 0),
        "eight": (fixture_text(synth, "query-gpu-8gpu.csv"), fixture_text(synth, "query-compute-apps-8gpu.csv"), 0),
        "mismatch": (fixture_text(synth, "nvml-mismatch.txt"), "", 18),
    }
    stand_ins = {}
    for name, (gpu_text, apps_text, rc) in cases.items():
        files = {"query-gpu.out": gpu_text, "query-compute-apps.out": apps_text}
        if rc:
            files["query-gpu.rc"] = str(rc)
        stand_ins[name] = support.make_stand_in(tmp_path / name, files)
    missing = tmp_path / "absent" / "nvidia-smi"
    playbook = PLAYBOOK.format(
        busy_path=json.dumps(f"{tmp_path / 'busy'}:/usr/bin:/bin"),
        missing=json.dumps(str(missing)),
        **{name: json.dumps(str(path)) for name, path in stand_ins.items()},
    )

    runner, results = run_play(tmp_path, playbook)

    def only(task):
        assert len(results.get(task, [])) == 1, (task, results.get(task), runner.stdout.read())
        return results[task][0]

    def expected(name):
        gpu_text, apps_text, rc = cases[name]
        snap = build_snapshot((rc, gpu_text, ""), None if rc else (0, apps_text, ""), str(stand_ins[name]))
        snap["count"] = len(snap["gpus"])
        return snap

    for task, name in [
        ("Facts from the stand-in found on PATH", "busy"),
        ("Facts in check mode", "busy"),
        ("Facts with N/A fields", "na"),
        ("Facts on eight GPUs", "eight"),
        ("Facts with the NVML mismatch", "mismatch"),
    ]:
        event, res = only(task)
        assert event == "runner_on_ok", (task, res)
        assert res["changed"] is False, task
        assert res["ansible_facts"] == {"gpu_facts": expected(name)}, task

    busy = only("Facts from the stand-in found on PATH")[1]["ansible_facts"]["gpu_facts"]
    assert busy["count"] == 1 and busy["gpus"][0]["processes"][0]["pid"] == 422
    assert only("Facts with the NVML mismatch")[1]["ansible_facts"]["gpu_facts"]["error_class"] == "nvml_mismatch"

    event, res = only("Facts without nvidia-smi")
    assert event == "runner_on_ok" and res["changed"] is False
    facts = res["ansible_facts"]["gpu_facts"]
    assert facts["available"] is False and facts["error_class"] == "missing" and str(missing) in facts["error"]

    event, res = only("Facts without nvidia-smi and fail_on_missing")
    assert event == "runner_on_failed"
    assert "missing" in res["msg"] and str(missing) in res["msg"]

    event, res = only("Facts with a bad timeout")
    assert event == "runner_on_failed" and "timeout" in res["msg"]
    assert runner.status == "successful", runner.stdout.read()
