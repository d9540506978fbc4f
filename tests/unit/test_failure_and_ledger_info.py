"""The experiment's decisions in Python: where a run failed, its failure class, the ledger queries.

Table-driven tests of pure helpers (module_utils/sglang_failure.py, sglang_ledger.ledger_info) on
the shapes the real roles hand them (the comparison table is tests/unit/test_compare.py's): the
ansible_failed_task of an include with ``apply: tags``, the ready-wait's sglang_server_crash,
sglang_warmup's failure_class, and sglang_bench's failed points.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sglang_failure as failure
import sglang_ledger as ledger

CRASH = {
    "crash_class": "dynamo_fp4_jit",
    "crash_line": "torch._dynamo.exc.Unsupported: Attempted to call function marked as skipped",
    "crash_line_number": 41,
    "excerpt": "x" * 5000,
    "explanation": "dynamo cannot trace FlashInfer's FP4 JIT",
    "remedy": "drop --enforce-piecewise-cuda-graph",
    "exit_status": 1,
    "log": "/work/logs/t01.log",
    "msg": "did not become ready",
}


def task(step, name="some task", *extra):
    return {"name": name, "tags": [*extra, f"sglang_experiment_{step}"] if step else list(extra)}


@pytest.mark.parametrize(
    ("tags", "expected"),
    [
        (["sglang_server_stop", "sglang_experiment_stop"], "stop"),
        (["always", "sglang_experiment_patches"], "patches"),
        # A stop run inside the start step: the start is what failed.
        (["sglang_server_stop", "sglang_experiment_stop", "sglang_experiment_start"], "start"),
        (["sglang_server_wait_ready", "sglang_experiment_wait_ready"], "wait_ready"),
        (["sglang_bench", "sglang_bench_warmup", "sglang_experiment_warmup"], "warmup"),
        (["sglang_bench_benchmark", "sglang_experiment_benchmark", "experiment"], "benchmark"),
        (["sglang_experiment_record"], "record"),
        (["sglang_experiment_measure"], None),  # not a step
        (["always"], None),
        ([], None),
    ],
)
def test_failed_step_from_the_tags(tags, expected):
    assert failure.failed_step({"name": "t", "tags": tags}) == expected
    assert failure.failed_step(tags) == expected


def test_a_given_failure_wins():
    given = {"class": "warmup_failed", "step": "warmup", "message": "HTTP 500"}
    assert failure.decide_failure(failure=given, crash=CRASH, task=task("warmup")) == given


def test_a_crash_at_start_up_carries_its_evidence():
    got = failure.decide_failure(
        task=task("wait_ready", "Fail with the classified crash"), result={"msg": "did not become ready"}, crash=CRASH
    )
    assert got["class"] == "dynamo_fp4_jit" and got["step"] == "wait_ready"
    assert got["message"] == CRASH["crash_line"]
    assert got["remedy"] == CRASH["remedy"] and got["crash_line_number"] == 41 and got["exit_status"] == 1
    assert len(got["excerpt"]) == failure.EXCERPT_CHARS and got["task"] == "Fail with the classified crash"


def test_a_death_under_the_benchmark_is_the_crash_not_the_point():
    points = [{"concurrency": 1, "status": "ok"}, {"concurrency": 10, "status": "failed", "failure": {"class": "x"}}]
    got = failure.decide_failure(points, task=task("benchmark"), result={"msg": "1 point failed"}, crash=CRASH)
    assert got["class"] == "dynamo_fp4_jit" and got["step"] == "benchmark"


def test_a_taken_port_at_start():
    result = {"msg": "port 30000 is taken by pid 7", "port": {"free": False}}
    got = failure.decide_failure(task=task("start"), result=result)
    assert got == {"class": "port_in_use", "step": "start", "message": result["msg"], "task": "some task"}
    # The same result outside the start step is not a port clash.
    assert failure.decide_failure(task=task("stop"), result=result)["class"] == "stop_failed"


def test_the_failed_tasks_own_class():
    result = {"msg": "warm-up got HTTP 503", "failure_class": "warmup_failed", "status": 503, "body": "busy"}
    got = failure.decide_failure(task=task("warmup"), result=result)
    assert got == {"class": "warmup_failed", "step": "warmup", "message": result["msg"], "status": 503, "body": "busy"}


def test_the_first_failed_point():
    points = [
        {"concurrency": 1, "repeat": 0, "status": "ok"},
        {
            "concurrency": 10,
            "repeat": 0,
            "status": "failed",
            "failure": {"class": "incomplete_point", "message": "7 of 10", "output_tail": "..."},
        },
        {"concurrency": 256, "repeat": 0, "status": "failed", "failure": {"class": "client_timeout"}},
    ]
    got = failure.decide_failure(points, task=task("benchmark"), result={"msg": "1 point failed"})
    assert got == {"class": "incomplete_point", "message": "7 of 10", "step": "benchmark", "concurrency": 10,
                   "repeat": 0}


@pytest.mark.parametrize(
    ("step", "expected"),
    [("stop", "stop_failed"), ("patches", "patches_failed"), ("record", "record_failed"), (None, "unclassified")],
)
def test_any_other_failure_gets_a_class(step, expected):
    got = failure.decide_failure(task=task(step, "Apply the patch"), result={"msg": "patch does not apply"})
    assert got["class"] == expected and got["message"] == "patch does not apply"
    assert got["step"] == (step or "Apply the patch")


def test_nothing_failed():
    assert failure.decide_failure([{"concurrency": 1, "status": "ok"}]) is None


def test_build_record_uses_the_decision():
    record = ledger.build_record("h", "t01", "run", {}, failed_task=task("wait_ready"), crash=CRASH)
    assert record["status"] == "failed" and record["failure"]["class"] == "dynamo_fp4_jit"
    assert ledger.validate_record(record) == []


@pytest.mark.parametrize(
    ("expected", "actual", "text"),
    [
        ("dynamo_fp4_jit", "dynamo_fp4_jit", "dynamo_fp4_jit (as expected: the tier's expected_failure_class)"),
        ("dynamo_fp4_jit", "cuda_oom_load", "cuda_oom_load (the tier's expected_failure_class is dynamo_fp4_jit)"),
        (None, "incomplete_point", "incomplete_point\n"),
    ],
)
def test_failure_report(expected, actual, text):
    message = failure.failure_report("t01", "wait_ready", actual, expected, "line", "ledger x", "restore y")
    assert message.startswith(f"Tier t01 failed at step 'wait_ready': {text}")
    assert message.endswith("line\nledger: ledger x\nrestore: restore y")


def test_ledger_and_restore_lines():
    record = {"record_id": "r1", "status": "failed", "points": [{}, {}]}
    assert failure.ledger_line("/l.jsonl", record) == "/l.jsonl, record r1 (failed, 2 point(s) kept)"
    assert failure.ledger_line("/l.jsonl", record, error="disk full").startswith("NOT recorded - disk full")
    assert failure.restore_line(False).startswith("off (sglang_experiment_restore: false)")
    assert failure.restore_line(True, {"ok": True, "tier": "baseline", "pid": 7}) == "tier baseline runs again, pid 7"
    assert failure.restore_line(True, {"ok": False, "tier": "baseline", "msg": "boom"}) == "tier baseline FAILED - boom"


def rec(host, tier, status, rid):
    return {"host": host, "tier": tier, "status": status, "record_id": rid}


LEDGER = [
    rec("a", "baseline", "success", "1"),
    rec("b", "t05", "success", "2"),
    rec("a", "t03", "success", "3"),
    rec("a", "baseline", "failed", "4"),
    rec("a", "t01", "failed", "5"),
    rec("b", "t04", "failed", "6"),
]


def test_ledger_info_per_host():
    info = ledger.ledger_info(LEDGER, "a")
    assert info["count"] == 4 and info["record"]["record_id"] == "5"
    assert info["last_good_tier"] == "t03" and info["last_good_record_id"] == "3"
    assert info["baseline"]["record_id"] == "1"  # the failed baseline 4 does not count
    other = ledger.ledger_info(LEDGER, "b")
    assert other["record"]["record_id"] == "6" and other["last_good_tier"] == "t05" and other["baseline"] is None
    assert other["last_good_record_id"] == "2"


def test_ledger_info_by_record_id_and_empty():
    assert ledger.ledger_info(LEDGER, "a", record_id="3")["record"]["tier"] == "t03"
    assert ledger.ledger_info(LEDGER, "a", record_id="6")["record"] is None  # host b's record
    empty = ledger.ledger_info([], "a", baseline_tier="base")
    assert empty == {"count": 0, "record": None, "last_good_tier": "base", "last_good_record_id": None,
                     "baseline": None}


# --------------------------------------------------------------------------- the restore plan

SHA = "ab" * 32


def restore_ledger(tmp_path, env=None):
    """Host a: a good t03 run from <tmp>/launch/t03.sh, then a failed t01; the kept copy and its .json."""
    script = tmp_path / "launch" / "t03.sh"
    good = dict(rec("a", "t03", "success", "3"),
                launch={"script": str(script), "script_sha256": SHA, "env": env or {"A": "1", "TOKEN": "<redacted>"}})
    kept_sh, kept_json = ledger.launch_archive_paths(str(script), "t03", SHA)
    return [rec("a", "baseline", "success", "1"), good, rec("a", "t01", "failed", "5")], kept_sh, kept_json


def test_the_restore_starts_the_kept_copy_with_its_patches_and_env(tmp_path):
    records, kept_sh, kept_json = restore_ledger(tmp_path)
    Path(kept_json).parent.mkdir(parents=True)
    Path(kept_json).write_text(json.dumps({"patches": [{"id": "p1", "state": "applied"}]}))
    plan = ledger.restore_plan(records, "a", tiers={"t03": {"patches": ["catalog"]}},
                               sha256_of=lambda path: SHA if path == kept_sh else "0" * 64)
    assert plan["tier"] == "t03" and plan["record_id"] == "3" and plan["from_record"]
    assert plan["script"] == kept_sh and plan["problem"] is None
    assert plan["patches"] == [{"id": "p1", "state": "applied"}] and plan["patches_from"] == "kept"
    assert plan["env"] == {"A": "1"}  # the redacted value is not started with
    assert "from the launch script of record 3" in plan["msg"]


def test_the_restore_falls_back_to_the_script_and_the_catalog(tmp_path):
    records, kept_sh, _ = restore_ledger(tmp_path)
    script = records[1]["launch"]["script"]
    plan = ledger.restore_plan(records, "a", tiers={"t03": {"patches": ["catalog"]}},
                               sha256_of=lambda path: SHA if path == script else None)
    assert plan["script"] == script and plan["patches"] == ["catalog"] and plan["patches_from"] == "catalog"
    assert plan["checked"] == [{"path": kept_sh, "sha256": "missing"}, {"path": script, "sha256": SHA}]


def test_the_restore_refuses_bytes_that_did_not_work(tmp_path):
    records, _, _ = restore_ledger(tmp_path)
    plan = ledger.restore_plan(records, "a", sha256_of=lambda path: "cd" * 32)
    assert plan["script"] is None and plan["from_record"]
    assert SHA in plan["problem"] and "start a tier by hand" in plan["problem"]


def test_a_host_without_a_good_record_renders_the_baseline_fresh():
    plan = ledger.restore_plan([rec("a", "t01", "failed", "5"), rec("b", "t03", "success", "3")], "a",
                               baseline_tier="base", sha256_of=lambda path: SHA)
    assert not plan["from_record"] and plan["tier"] == "base" and plan["record_id"] is None
    assert plan["problem"] is None and "has no successful record" in plan["msg"]
