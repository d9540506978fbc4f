"""The preflight role run by real ansible-playbook (through ansible-runner) on this machine,
against a STAND-IN nvidia-smi that prints canned --query-gpu CSV in real nvidia-smi's layout
(tests/fixtures/nvidia-smi: the synthesized 8x RTX PRO 6000 Blackwell rows and the real H200
capture). preflight only reads, so running it on localhost changes nothing."""

from __future__ import annotations

import helpers.gpu as support
import pytest
from helpers.playbooks import run_play

BLACKWELL_ROWS = (support.SYNTH / "query-gpu-8gpu.csv").read_text().splitlines()
H200_ROWS = (support.REAL / "query-gpu.csv").read_text().splitlines()

PLAYBOOK = """\
- name: Run preflight
  hosts: localhost
  gather_facts: true
  gather_subset: [min]
  roles:
    - role: preflight
      vars:
        preflight_nvidia_smi_path: {nvidia_smi}
        preflight_expect_gpu: {expect_gpu}
        preflight_gpu_count: {gpu_count}
        preflight_disk_requirements:
          - {{path: {disk_path}, min_free_gib: {min_free_gib}, purpose: model cache}}
"""


def stand_in(tmp_path, rows):
    return support.make_stand_in(
        tmp_path / "stand-in", {"query-gpu.out": "\n".join(rows) + "\n", "query-compute-apps.out": ""}
    )


def run_preflight(tmp_path, nvidia_smi, expect_gpu=True, gpu_count=8, min_free_gib=0.001):
    text = PLAYBOOK.format(
        nvidia_smi=nvidia_smi, expect_gpu=str(expect_gpu).lower(), gpu_count=gpu_count,
        disk_path=tmp_path / "not-yet" / "hf", min_free_gib=min_free_gib,
    )
    return run_play(tmp_path, text)


def failure_message(runner, results):
    failed = [res for events in results.values() for name, res in events if name == "runner_on_failed"]
    assert len(failed) == 1, failed
    # A loop task fails with "One or more items failed": the message is the failed item's.
    items = [e["event_data"]["res"]["msg"] for e in runner.events if e.get("event") == "runner_item_on_failed"]
    return items[0] if items else failed[0]["msg"]


def summary(results):
    (event, res), = results["Record the preflight summary"]
    assert event == "runner_on_ok"
    return res["ansible_facts"]["preflight_summary"]


def test_eight_blackwell_gpus_pass(tmp_path):
    runner, results = run_preflight(tmp_path, stand_in(tmp_path, BLACKWELL_ROWS))
    assert runner.status == "successful", results
    facts = summary(results)
    assert facts["gpu_checked"] is True
    assert [gpu["name"] for gpu in facts["gpus"]] == ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * 8
    assert facts["driver"] == "580.95.05"
    # The disk row was measured on the file system holding the (not yet existing) path.
    (row,) = facts["disk"]
    assert row["path"] == str(tmp_path / "not-yet" / "hf")
    assert row["free_gib"] > 0


@pytest.mark.parametrize(
    ("case", "rows", "gpu_count", "min_free_gib", "expected"),
    [
        ("driver too old", [r.replace("580.95.05", "565.57.01") for r in BLACKWELL_ROWS], 8, 0.001,
         ["NVIDIA driver 565.57.01", "too old", ">= 570.26"]),
        ("one driver of eight too old", BLACKWELL_ROWS[:7] + [BLACKWELL_ROWS[7].replace("580.95.05", "560.35.03")],
         8, 0.001, ["560.35.03", "too old"]),
        ("wrong GPU count", BLACKWELL_ROWS[:4], 8, 0.001,
         ["shows 4 GPU(s)", "expects 8 (preflight_gpu_count)"]),
        ("wrong GPU model", H200_ROWS, 1, 0.001,
         ["do not match preflight_gpu_name_regex", "found NVIDIA H200"]),
        ("too little disk", BLACKWELL_ROWS, 8, 10_000_000,
         ["not enough disk", "10000000.0 GiB needed for model cache"]),
    ],
)
def test_failures_name_what_was_found(tmp_path, case, rows, gpu_count, min_free_gib, expected):
    runner, results = run_preflight(tmp_path, stand_in(tmp_path, rows), gpu_count=gpu_count,
                                    min_free_gib=min_free_gib)
    assert runner.status == "failed", case
    message = failure_message(runner, results)
    for text in expected:
        assert text in message, (case, message)


def test_missing_nvidia_smi_fails_when_gpus_are_expected(tmp_path):
    runner, results = run_preflight(tmp_path, tmp_path / "no-such" / "nvidia-smi")
    assert runner.status == "failed"
    message = failure_message(runner, results)
    assert "expects 8 GPU(s)" in message
    assert "preflight_expect_gpu: false" in message


def test_gpu_checks_are_skipped_only_when_the_inventory_says_so(tmp_path):
    runner, results = run_preflight(tmp_path, tmp_path / "no-such" / "nvidia-smi", expect_gpu=False)
    assert runner.status == "successful", results
    (event, res), = results["Say that the GPU checks are skipped for a host without GPUs"]
    assert event == "runner_on_ok"
    assert "SKIPPED" in res["msg"] and "preflight_expect_gpu: false" in res["msg"]
    assert "Read the GPUs through nvidia-smi" not in results
    assert summary(results)["gpu_checked"] is False
