"""Benchmark points and provenance: pure functions, plus the cell runner and the client loader
(tools/sglang_bench_client.py, for real) driving a stand-in bench_serving package.

The real bench_serving against the simulator is in tests/integration/test_bench_client.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import pytest
import sglang_bench_points as bp
import sglang_provenance as prov
from helpers.paths import REPO
from helpers.processes import wait_for as wait_until
from helpers.processes import write_server_state

# One result line shaped as bench_serving 0.5.10.post1 writes it (keys from its source,
# values made up); the real client's output is tested in tests/integration/test_bench_client.py.
RESULT_LINE = (
    '{"tag": null, "backend": "sglang", "dataset_name": "random", "request_rate": Infinity, '
    '"max_concurrency": 10, "random_input_len": 1024, "random_output_len": 1024, '
    '"random_range_ratio": 1.0, "duration": 538.4, "completed": 20, "total_input_tokens": 20480, '
    '"total_output_tokens": 20480, "request_throughput": 0.037, "input_throughput": 38.0, '
    '"output_throughput": 38.03, "total_throughput": 82.73, "mean_ttft_ms": 812.0, '
    '"median_ttft_ms": 700.0, "p99_ttft_ms": 2100.0, "mean_tpot_ms": 262.1, "median_tpot_ms": 260.0, '
    '"p99_tpot_ms": 300.0, "mean_itl_ms": 262.0, "median_itl_ms": 250.0, "p99_itl_ms": 400.0, '
    '"mean_e2e_latency_ms": 268900.0, "median_e2e_latency_ms": 268000.0, "p99_e2e_latency_ms": 280000.0, '
    '"concurrency": 9.6, "accept_length": null}'
)


@pytest.mark.parametrize(
    ("concurrency", "multiplier", "floor", "expected"),
    [(1, 2, 10, 10), (10, 2, 10, 20), (256, 2, 10, 512), (1024, 2, 10, 2048), (3, 4, 1, 12)],
)
def test_num_prompts_rule(concurrency, multiplier, floor, expected):
    assert bp.num_prompts_for(concurrency, multiplier, floor) == expected


@pytest.mark.parametrize("bad", [(0, 2, 10), (1, 0, 10), (1, 2, 0)])
def test_num_prompts_rule_rejects_nonsense(bad):
    with pytest.raises(ValueError):
        bp.num_prompts_for(*bad)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("inf", "inf"), ("Infinity", "inf"), (float("inf"), "inf"), (None, "inf"), ("2.5", "2.5"), (4, "4.0")],
)
def test_format_request_rate(value, expected):
    assert bp.format_request_rate(value) == expected


def test_format_request_rate_rejects_words():
    with pytest.raises(ValueError):
        bp.format_request_rate("fast")


def test_client_argv_has_every_setting():
    argv = bp.build_client_argv(
        ["/env/bin/python", "-m", "sglang.bench_serving"],
        host="127.0.0.1",
        port=8000,
        concurrency=256,
        num_prompts=512,
        input_len=1024,
        output_len=1024,
        output_file="/r/c256.jsonl",
        tokenizer="org/model",
        dataset_path="/data/sharegpt.json",
        seed=7,
        output_details=True,
        extra_args=["--ready-check-timeout-sec", "5"],
    )
    assert argv[:3] == ["/env/bin/python", "-m", "sglang.bench_serving"]
    pairs = dict(zip(argv[3::1], argv[4::1], strict=False))
    for flag, value in {
        "--backend": "sglang",
        "--host": "127.0.0.1",
        "--port": "8000",
        "--dataset-name": "random",
        "--dataset-path": "/data/sharegpt.json",
        "--random-input-len": "1024",
        "--random-output-len": "1024",
        "--random-range-ratio": "1.0",
        "--num-prompts": "512",
        "--max-concurrency": "256",
        "--request-rate": "inf",
        "--seed": "7",
        "--tokenizer": "org/model",
        "--model": "org/model",
        "--output-file": "/r/c256.jsonl",
        "--ready-check-timeout-sec": "5",
    }.items():
        assert pairs.get(flag) == value, flag
    assert "--output-details" in argv and "--disable-tqdm" in argv


def test_client_argv_is_accepted_by_the_real_parser():
    """Every flag we build exists in the installed bench_serving's own argparse."""
    import ast
    import importlib.util

    root = Path(list(importlib.util.find_spec("sglang").submodule_search_locations)[0])
    tree = ast.parse((root / "bench_serving.py").read_text())
    known = {
        arg.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"
        for arg in node.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--")
    }
    argv = bp.build_client_argv(
        ["python"],
        "h",
        1,
        1,
        1,
        1,
        1,
        "o",
        "t",
        dataset_path="d",
        served_model_name="m",
        output_details=True,
        warmup_requests=0,
        tag="x",
        extra_request_body={"return_logprob": True},
    )
    used = {a for a in argv if a.startswith("--")}
    assert used <= known, used - known


def test_the_workload_reaches_the_client_argv_whole():
    """client_settings: the workload's settings as bench_serving arguments, extra_request_body as
    the JSON text bench_serving's --extra-request-body reads with json.loads; empty, no flag."""
    import json

    workload = {"input_len": 64, "output_len": 32, "dataset_name": "random-ids", "dataset_path": None,
                "random_range_ratio": 0.5, "seed": 3,
                "extra_request_body": {"sampling_params": {"temperature": 0.7, "max_new_tokens": 32}}}
    point = dict(host="h", port=1, concurrency=4, num_prompts=8, output_file="o", tokenizer="t")
    argv = bp.build_client_argv([], **point, **bp.client_settings(workload))
    pairs = dict(zip(argv[0::1], argv[1::1], strict=False))
    assert (pairs["--random-input-len"], pairs["--random-output-len"], pairs["--random-range-ratio"]) \
        == ("64", "32", "0.5")
    assert (pairs["--dataset-name"], pairs["--seed"]) == ("random-ids", "3")
    assert json.loads(pairs["--extra-request-body"]) == workload["extra_request_body"]
    for empty in ({}, None):
        argv = bp.build_client_argv([], **point, **bp.client_settings(dict(workload, extra_request_body=empty)))
        assert "--extra-request-body" not in argv


def test_point_from_a_complete_result():
    raw = bp.parse_result_lines(RESULT_LINE)[-1]
    assert raw["request_rate"] == float("inf")  # what json.loads makes of Infinity
    point = bp.point_from_result(raw, concurrency=10, repeat=0, num_prompts=20)
    assert point["status"] == "ok" and point["failure"] is None
    assert point["completed"] == 20 and point["failed"] == 0
    for key in ("output_throughput", "total_throughput", "mean_tpot_ms", "p99_itl_ms", "duration"):
        assert point[key] == raw[key]
    assert point["measured_concurrency"] == raw["concurrency"]
    assert point["concurrency"] == 10
    assert point["client_echo"]["request_rate"] == "inf"
    json.loads(json.dumps(point), parse_constant=lambda c: pytest.fail(f"non-JSON constant {c}"))


@pytest.mark.parametrize(("completed", "num_prompts"), [(17, 20), (0, 20), (1, 2)])
def test_incomplete_point_is_failed_with_the_count(completed, num_prompts):
    raw = dict(bp.parse_result_lines(RESULT_LINE)[-1], completed=completed)
    point = bp.point_from_result(raw, concurrency=10, repeat=1, num_prompts=num_prompts)
    assert point["status"] == "failed"
    assert point["failed"] == num_prompts - completed
    assert point["failure"]["class"] == "incomplete_point"
    assert f"completed {completed} of {num_prompts}" in point["failure"]["message"]
    assert f"({num_prompts - completed} failed)" in point["failure"]["message"]


def test_error_summary_counts_messages():
    errors = ["", "Bad Request: input (73 tokens) too long", "", "Bad Request: input (80 tokens) too long",
              "reset", None]
    assert bp.summarize_errors(errors) == [
        {"error": "Bad Request: input (73 tokens) too long", "count": 2},
        {"error": "reset", "count": 1},
    ]


def test_error_summary_keeps_the_total():
    errors = [f"error kind {chr(97 + i)}" for i in range(8)] * 2
    summary = bp.summarize_errors(errors, limit=3)
    assert len(summary) == 4 and summary[-1]["error"] == "(other errors)"
    assert sum(item["count"] for item in summary) == len(errors)


@pytest.mark.parametrize(
    ("rc", "output", "timed_out", "expected"),
    [
        (1, "Server at http://127.0.0.1:1/v1/models is not ready. Exiting.", False, "server_unreachable"),
        (1, "ConnectionResetError(104, 'Connection reset by peer')", False, "server_unreachable"),
        (1, "huggingface_hub.errors.LocalEntryNotFoundError: offline mode is enabled", False, "hf_gated_or_offline"),
        (1, "NameError: name 'result' is not defined", False, "incomplete_point"),
        (2, "usage: bench_serving: error: unrecognized arguments", False, "bench_client_failed"),
        (-9, "", True, "bench_timeout"),
    ],
)
def test_classify_client_failure(rc, output, timed_out, expected):
    failure_class, reason = bp.classify_client_failure(rc, output, timed_out)
    assert failure_class == expected and reason


# ------------------------------------------------------------ one cell, one client process

LOADER = REPO / "tools" / "sglang_bench_client.py"

# A stand-in for bench_serving: what each point does is chosen by its --tag. It records every
# import of itself (one line per process that imported it) and every tokenizer load.
FAKE_BENCH = '''
import argparse, asyncio, json, os, signal, subprocess, sys, time

STATE = os.environ["FAKE_BENCH_STATE"]
with open(os.path.join(STATE, "imports"), "a") as handle:
    handle.write(f"{os.getpid()}\\n")


def get_tokenizer(name):
    with open(os.path.join(STATE, "tokenizer_loads"), "a") as handle:
        handle.write(f"{name}\\n")
    return object()


def check_chat_template(name):
    get_tokenizer(name)
    return True


def run_benchmark(args):
    check_chat_template(args.tokenizer)
    get_tokenizer(args.tokenizer)
    behaviour = args.tag or "ok"
    print(f"fake bench_serving pid {os.getpid()}: concurrency {args.max_concurrency}, {behaviour}")
    if behaviour == "raise":
        raise RuntimeError("Cannot connect to host 127.0.0.1:9 ssl:default [Connection refused]")
    if behaviour == "exit":
        print("Server at http://127.0.0.1:9/v1/models is not ready. Exiting.")
        sys.exit(1)
    if behaviour == "hang":
        time.sleep(600)
    if behaviour == "async-hang":
        async def wait():
            await asyncio.gather(asyncio.sleep(600), asyncio.sleep(600))
        asyncio.run(wait())
    if behaviour == "crash":
        os.kill(os.getpid(), signal.SIGKILL)
    if behaviour == "grandchild":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open(os.path.join(STATE, "child.pid.tmp"), "w") as handle:
            handle.write(str(child.pid))
        os.replace(os.path.join(STATE, "child.pid.tmp"), os.path.join(STATE, "child.pid"))
        time.sleep(600)
    completed = args.num_prompts - (1 if behaviour == "partial" else 0)
    result = {"backend": "sglang", "request_rate": float("inf"), "max_concurrency": args.max_concurrency,
              "completed": completed, "duration": 1.5, "output_throughput": 10.0 * args.max_concurrency,
              "total_throughput": 20.0 * args.max_concurrency, "mean_tpot_ms": 5.0, "concurrency": 0.9}
    with open(args.output_file, "a") as handle:
        handle.write(json.dumps(result) + "\\n")


def cli_main():
    parser = argparse.ArgumentParser()
    for flag in ("--output-file", "--tag", "--tokenizer"):
        parser.add_argument(flag)
    parser.add_argument("--num-prompts", type=int)
    parser.add_argument("--max-concurrency", type=int)
    args, _unknown = parser.parse_known_args()
    run_benchmark(args)
'''


def fake_sglang(tmp_path: Path, layout: str = "0.5.10") -> Path:
    """A stand-in sglang package: heavy __init__ files that must not run, and a bench_serving
    module laid out as 0.5.10.post1 (sglang/bench_serving.py, __main__ block) or 0.5.23
    (sglang/benchmark/serving.py with cli_main(), reading FAKE_BOOTSTRAP_HOST, and a
    deprecated sglang/bench_serving.py wrapper)."""
    root = tmp_path / "site"
    pkg = root / "sglang"
    for sub in ("", "srt", "srt/utils", "srt/disaggregation", "benchmark"):
        (pkg / sub).mkdir(parents=True, exist_ok=True)
    heavy = 'raise ImportError("a heavy __init__ ran: the loader must skip it")\n'
    for sub in ("", "srt", "srt/utils", "srt/disaggregation"):
        (pkg / sub / "__init__.py").write_text(heavy)
    (pkg / "benchmark" / "__init__.py").write_text("")
    (pkg / "srt" / "disaggregation" / "utils.py").write_text(
        'import torch_is_not_here\nFAKE_BOOTSTRAP_HOST = "2.2.2.2"\n'
    )
    if layout == "0.5.10":
        (pkg / "bench_serving.py").write_text(
            FAKE_BENCH + '\nif __name__ == "__main__":\n    cli_main()\n'
        )
    else:
        (pkg / "benchmark" / "serving.py").write_text(
            "from sglang.srt.disaggregation.utils import FAKE_BOOTSTRAP_HOST\n"
            + FAKE_BENCH
            + '\nif __name__ == "__main__":\n    cli_main()\n'
        )
        (pkg / "bench_serving.py").write_text('raise AssertionError("the deprecated wrapper was imported")\n')
    state = tmp_path / "state"
    state.mkdir(exist_ok=True)
    return root


def fake_env(tmp_path: Path, root: Path) -> dict:
    return {"PYTHONPATH": str(root), "FAKE_BENCH_STATE": str(tmp_path / "state")}


def cell(tmp_path, behaviours, repeats=1, num_prompts=4):
    """Plan one cell whose point i does behaviours[i] (repeats outer, concurrency inner)."""
    out = tmp_path / "raw"
    out.mkdir(exist_ok=True)
    concurrency = [1, 2, 4, 8][: len(behaviours) // repeats]
    specs = bp.plan_points(concurrency, repeats, str(out), num_prompts=num_prompts)
    for spec, behaviour in zip(specs, behaviours, strict=True):
        spec["argv"] = bp.build_client_argv(
            [], "127.0.0.1", 9, spec["concurrency"], spec["num_prompts"], 8, 8, spec["output_file"], "tok",
            tag=behaviour,
        )
    return specs, str(out / "plan.json"), str(out / "client.log")


def run_cell(tmp_path, behaviours, layout="0.5.10", **kwargs):
    root = fake_sglang(tmp_path, layout)
    specs, plan, log = cell(tmp_path, behaviours, repeats=kwargs.pop("repeats", 1))
    kwargs.setdefault("point_timeout", 60)
    return bp.run_plan([sys.executable, str(LOADER)], specs, plan, log, env=fake_env(tmp_path, root), **kwargs)


def imports(tmp_path) -> list[str]:
    path = tmp_path / "state" / "imports"
    return path.read_text().split() if path.exists() else []


def test_plan_is_repeats_outer_concurrency_inner(tmp_path):
    specs = bp.plan_points([1, 10, 256], 2, str(tmp_path), multiplier=2, floor=10)
    assert [(s["repeat"], s["concurrency"], s["num_prompts"]) for s in specs] == [
        (0, 1, 10), (0, 10, 20), (0, 256, 512), (1, 1, 10), (1, 10, 20), (1, 256, 512),
    ]
    assert [s["index"] for s in specs] == list(range(6))
    assert specs[4]["id"] == "c10_r1" and specs[4]["output_file"] == str(tmp_path / "c10_r1.jsonl")
    assert specs[4]["log"] == str(tmp_path / "c10_r1.jsonl.log")
    with pytest.raises(ValueError):
        bp.plan_points([], 1, str(tmp_path), num_prompts=1)
    with pytest.raises(ValueError):
        bp.plan_points([1, 0], 1, str(tmp_path), num_prompts=1)


def test_status_lines_are_picked_out_of_the_output():
    text = (
        "PyTorch was not found.\n"
        'SGLANG_BENCH_POINT {"event": "start", "id": "c1_r0", "pid": 7}\n'
        "SGLANG_BENCH_POINT {not json\n"
        'SGLANG_BENCH_POINT {"event": "end", "id": "c1_r0", "pid": 7, "rc": 0}\n'
    )
    assert [e["event"] for e in bp.parse_status_lines(text)] == ["start", "end"]


def test_a_cell_runs_in_one_client_process(tmp_path):
    """Four points, one process: bench_serving imported once, the tokenizer loaded once."""
    points, outcome = run_cell(tmp_path, ["ok", "ok", "ok", "ok"])
    assert [p["status"] for p in points] == ["ok"] * 4, points
    assert [p["concurrency"] for p in points] == [1, 2, 4, 8]
    assert len(outcome["runs"]) == 1 and isinstance(outcome["runs"][0]["pid"], int), outcome["runs"]
    assert imports(tmp_path) == [str(outcome["runs"][0]["pid"])]  # one process imported it, once
    assert (tmp_path / "state" / "tokenizer_loads").read_text().split() == ["tok"]
    assert outcome["runs"][0]["bench_module"] == "sglang.bench_serving"
    assert outcome["runs"][0]["points"] == ["c1_r0", "c2_r0", "c4_r0", "c8_r0"] and outcome["not_run"] == []
    for point in points:
        assert point["output_throughput"] == 10.0 * point["concurrency"]
        assert point["started_at"] <= point["ended_at"] and point["wall_s"] >= 0
        log = Path(point["client_log"]).read_text()
        assert f"concurrency {point['concurrency']}, ok" in log and "SGLANG_BENCH_POINT" not in log
        assert point["command"][:2] == [sys.executable, str(LOADER)]
        assert point["command"][point["command"].index("--max-concurrency") + 1] == str(point["concurrency"])
    assert outcome["rc"] == 0


def test_the_gate_runs_while_the_client_imports_and_before_any_point(tmp_path):
    """--wait-go: the client imports bench_serving, then waits; the gate (module sglang_bench's
    warm-up) runs meanwhile, and the first point starts only after it said go."""
    seen = {}

    def gate():
        # The client is up and importing (or done) while the gate runs, and no point has started.
        seen["imported"] = wait_until(lambda: imports(tmp_path), 30)
        seen["outputs"] = sorted(p.name for p in (tmp_path / "raw").glob("*.jsonl"))
        return True

    points, outcome = run_cell(tmp_path, ["ok", "ok"], gate=gate)
    assert seen["imported"] and seen["outputs"] == []
    assert [p["status"] for p in points] == ["ok", "ok"] and outcome["gate"] is True
    events = [e["event"] for e in bp.parse_status_lines(outcome["output"])]
    assert events[:3] == ["ready", "go", "start"], events
    assert outcome["runs"][0]["command"][-1] != "--wait-go"  # the recorded command is the plain one


def test_a_gate_that_says_no_runs_no_point(tmp_path):
    points, outcome = run_cell(tmp_path, ["ok", "ok"], gate=lambda: False)
    assert points == [] and outcome["gate"] is False
    assert outcome["not_run"] == ["c1_r0", "c2_r0"] and outcome["runs"][0]["points"] == []
    assert list((tmp_path / "raw").glob("*.jsonl")) == []  # bench_serving never wrote a result


def test_a_gate_that_raises_ends_the_client_and_raises(tmp_path):
    def gate():
        wait_until(lambda: imports(tmp_path), 30)
        raise RuntimeError("the warm-up broke")

    with pytest.raises(RuntimeError, match="the warm-up broke"):
        run_cell(tmp_path, ["ok"], gate=gate)
    pid = int(imports(tmp_path)[0])
    assert wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == "zombie", 15)
    assert list((tmp_path / "raw").glob("*.jsonl")) == []


def test_the_client_runs_nothing_when_stdin_says_anything_but_go(tmp_path):
    root = fake_sglang(tmp_path)
    specs, plan, log = cell(tmp_path, ["ok"])
    bp.write_plan(plan, [dict(spec, argv=spec["argv"]) for spec in specs], 60)
    proc = subprocess.run(
        [sys.executable, str(LOADER), "--plan", plan, "--wait-go"], input="stop\n", capture_output=True,
        text=True, env={**os.environ, **fake_env(tmp_path, root)}, timeout=60, check=False,
    )
    assert proc.returncode == 3, proc.stderr
    assert [e["event"] for e in bp.parse_status_lines(proc.stdout)] == ["ready", "aborted", "done"]
    assert list((tmp_path / "raw").glob("*.jsonl")) == []


@pytest.mark.parametrize(
    ("behaviour", "failure_class", "completed"),
    [
        ("raise", "server_unreachable", None),  # an exception inside bench_serving
        ("exit", "server_unreachable", None),  # bench_serving's own sys.exit(1)
        ("partial", "incomplete_point", 3),  # a result line with completed < num_prompts
    ],
)
def test_a_failing_middle_point_keeps_its_class_and_the_others_run(tmp_path, behaviour, failure_class, completed):
    points, outcome = run_cell(tmp_path, ["ok", behaviour, "ok"], stop_on_failure=False)
    assert [p["status"] for p in points] == ["ok", "failed", "ok"], points
    middle = points[1]
    assert middle["failure"]["class"] == failure_class and middle["completed"] == completed
    assert middle["concurrency"] == 2 and middle["repeat"] == 0
    assert len(outcome["runs"]) == 1 and len(imports(tmp_path)) == 1
    assert outcome["rc"] == 1  # the client says that not every point was ok


def test_stop_on_failure_ends_the_cell_at_the_failed_point(tmp_path):
    points, outcome = run_cell(tmp_path, ["ok", "exit", "ok", "ok"], stop_on_failure=True)
    assert [(p["concurrency"], p["status"]) for p in points] == [(1, "ok"), (2, "failed")]
    assert outcome["not_run"] == ["c4_r0", "c8_r0"]
    assert not (tmp_path / "raw" / "c4_r0.jsonl.log").exists()


def test_a_too_short_point_does_not_stop_the_cell(tmp_path):
    """too_short is no failure: with stop_on_failure the points after it still run and are kept
    (a too_short c=10 once ended a simulator record at [1, 10] that still read success)."""
    root = fake_sglang(tmp_path)
    specs, plan, log = cell(tmp_path, ["ok", "ok", "ok"])
    # The middle point cannot meet its window and cannot grow (max_prompts = its own 4 prompts).
    specs[1]["window"] = {"min_requests": 100, "min_duration_s": 0, "max_prompts": 4}
    points, outcome = bp.run_plan(
        [sys.executable, str(LOADER)], specs, plan, log, env=fake_env(tmp_path, root), point_timeout=60,
        stop_on_failure=True,
    )
    assert [(p["concurrency"], p["status"]) for p in points] == [(1, "ok"), (2, "too_short"), (4, "ok")]
    assert outcome["not_run"] == [] and len(outcome["runs"]) == 1


def test_points_left_when_the_cell_time_runs_out_fail_and_are_not_dropped(tmp_path):
    """The overall limit used up between client processes: the unstarted points are failed
    bench_timeout points, never silently missing from a record."""
    root = fake_sglang(tmp_path)
    specs, plan, log = cell(tmp_path, ["crash", "ok"])
    ticks = iter([0.0, 0.0] + [1e9] * 100)  # the deadline is passed once the first process is gone
    points, outcome = bp.run_plan(
        [sys.executable, str(LOADER)], specs, plan, log, env=fake_env(tmp_path, root), point_timeout=60,
        timeout=600, stop_on_failure=False, clock=lambda: next(ticks),
    )
    assert [(p["concurrency"], p["status"]) for p in points] == [(1, "failed"), (2, "failed")], points
    assert points[1]["failure"]["class"] == "bench_timeout" and "not started" in points[1]["failure"]["message"]


def test_the_per_point_deadline_stops_the_point_inside_the_client(tmp_path):
    """A point past its deadline fails with bench_timeout, in blocking code and inside asyncio;
    the next point runs in the same process."""
    points, outcome = run_cell(
        tmp_path, ["hang", "async-hang", "ok"], stop_on_failure=False, point_timeout=2, timeout=60
    )
    assert [p["status"] for p in points] == ["failed", "failed", "ok"], points
    for point in points[:2]:
        assert point["failure"]["class"] == "bench_timeout", point["failure"]
        assert "per-point deadline of 2 s" in point["failure"]["message"]
        assert 1.5 < point["wall_s"] < 30
        assert "ran past its deadline" in Path(point["client_log"]).read_text()
    assert len(outcome["runs"]) == 1 and outcome["runs"][0]["timed_out"] is False


def test_the_overall_timeout_kills_the_client_group(tmp_path):
    """Past the overall limit the client's process group is killed (a grandchild too); the
    point it was in is bench_timeout, and the points it never started do not run: they are
    failed bench_timeout points too, never missing from the record."""
    points, outcome = run_cell(
        tmp_path, ["ok", "grandchild", "ok"], stop_on_failure=False, point_timeout=600, timeout=10
    )
    assert [p["status"] for p in points] == ["ok", "failed", "failed"], points
    assert points[1]["failure"]["class"] == points[2]["failure"]["class"] == "bench_timeout"
    assert "not started" in points[2]["failure"]["message"]
    assert "overall time limit of 10 s" in points[1]["failure"]["message"]
    assert outcome["runs"][0]["timed_out"] is True and outcome["not_run"] == ["c4_r0"]
    pid_file = tmp_path / "state" / "child.pid"
    assert pid_file.exists(), "the stand-in had not started its child within the 10 s limit"
    try:
        gone, alive = psutil.wait_procs([psutil.Process(int(pid_file.read_text()))], timeout=20)
    except psutil.NoSuchProcess:
        alive = []
    assert alive == [], alive


def test_a_client_that_dies_is_restarted_for_the_points_it_never_started(tmp_path):
    points, outcome = run_cell(tmp_path, ["ok", "crash", "ok", "ok"], stop_on_failure=False)
    assert [p["status"] for p in points] == ["ok", "failed", "ok", "ok"], points
    assert points[1]["failure"]["class"] == "bench_client_failed" and points[1]["completed"] is None
    assert [run["points"] for run in outcome["runs"]] == [["c1_r0", "c2_r0"], ["c4_r0", "c8_r0"]]
    assert outcome["runs"][0]["rc"] == -9 and len(imports(tmp_path)) == 2


def test_a_client_that_dies_with_stop_on_failure_is_not_restarted(tmp_path):
    points, outcome = run_cell(tmp_path, ["ok", "crash", "ok"], stop_on_failure=True)
    assert [p["status"] for p in points] == ["ok", "failed"]
    assert len(outcome["runs"]) == 1 and outcome["not_run"] == ["c4_r0"]


@pytest.mark.parametrize(("stop_on_failure", "failed"), [(True, 1), (False, 3)])
def test_a_client_that_never_starts_a_point_fails_the_plan(tmp_path, stop_on_failure, failed):
    """No bench_serving to import: no point starts; the client's own words classify the failure."""
    root = fake_sglang(tmp_path)
    (root / "sglang" / "bench_serving.py").unlink()
    specs, plan, log = cell(tmp_path, ["ok", "ok", "ok"])
    points, outcome = bp.run_plan(
        [sys.executable, str(LOADER)], specs, plan, log, env=fake_env(tmp_path, root),
        point_timeout=60, stop_on_failure=stop_on_failure,
    )
    assert len(points) == failed and len(outcome["runs"]) == 1
    assert all(p["failure"]["class"] == "bench_client_failed" for p in points)
    assert "none of sglang.benchmark.serving, sglang.bench_serving" in points[0]["failure"]["output_tail"]
    assert outcome["rc"] == 2


def test_the_loader_prefers_sglang_benchmark_serving(tmp_path):
    """0.5.23's layout: sglang.benchmark.serving (cli_main, FAKE_BOOTSTRAP_HOST through the shell),
    never the deprecated sglang.bench_serving wrapper."""
    points, outcome = run_cell(tmp_path, ["ok", "ok"], layout="0.5.23")
    assert [p["status"] for p in points] == ["ok", "ok"], Path(outcome["log"]).read_text()
    assert outcome["runs"][0]["bench_module"] == "sglang.benchmark.serving"
    assert len(imports(tmp_path)) == 1


def test_full_sglang_imports_the_real_package_inits(tmp_path):
    """--full-sglang (the GPU node) imports sglang through its own __init__; the default skips it."""
    root = fake_sglang(tmp_path)
    state = tmp_path / "state"
    (root / "sglang" / "__init__.py").write_text(
        f"open({str(state / 'inits')!r}, 'a').write('sglang\\n')\n"
    )
    specs, plan, log = cell(tmp_path, ["ok"])
    command = [sys.executable, str(LOADER), "--full-sglang"]
    points, outcome = bp.run_plan(command, specs, plan, log, env=fake_env(tmp_path, root), point_timeout=60)
    assert points[0]["status"] == "ok", Path(log).read_text()
    assert (state / "inits").read_text().split() == ["sglang"]
    assert points[0]["command"][:3] == command


def test_the_single_point_command_line_still_works(tmp_path):
    """Without --plan the loader is bench_serving's own command line: output and exit status."""
    root = fake_sglang(tmp_path)
    out = tmp_path / "one.jsonl"
    argv = bp.build_client_argv([sys.executable, str(LOADER)], "h", 9, 4, 8, 8, 8, str(out), "tok")
    env = {**os.environ, **fake_env(tmp_path, root)}
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "concurrency 4, ok" in proc.stdout and "SGLANG_BENCH_POINT" not in proc.stdout
    assert json.loads(out.read_text())["completed"] == 8
    proc = subprocess.run(argv + ["--tag", "exit"], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 1 and "is not ready" in proc.stdout


# ------------------------------------------------------------ provenance


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (
            {"versions": {"sglang": "0.5.10.post1", "torch": "2.9.1+cu128"}},
            {"sglang": "0.5.10.post1", "torch": "2.9.1+cu128"},
        ),
        (
            {"sglang_version": "0.5.10.post1", "flashinfer": {"version": "0.6.7.post3"}, "cuda": "12.8"},
            {"sglang": "0.5.10.post1", "flashinfer": "0.6.7.post3", "cuda": "12.8"},
        ),
        ({"unrelated": 1}, {}),
    ],
)
def test_versions_from_facts(facts, expected):
    assert prov.versions_from_facts(facts) == expected


@pytest.mark.parametrize(
    ("torch", "cuda"), [("2.9.1+cu128", "12.8"), ("2.9.1+cu130", "13.0"), ("2.9.1", None), (None, None)]
)
def test_cuda_from_torch(torch, cuda):
    assert prov.cuda_from_torch(torch) == cuda


def test_versions_facts_file_first_then_metadata(tmp_path):
    facts = tmp_path / "sglang_lab.fact"
    facts.write_text(json.dumps({"versions": {"sglang": "0.5.10.post1", "flashinfer": "0.6.7.post3"}}))
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, json.dumps({"sglang": "9.9", "flashinfer": None, "torch": "2.9.1+cu128"}) + "\n", ""

    versions = prov.collect_versions(str(facts), "/env/bin/python", run)
    assert versions["sglang"] == "0.5.10.post1"  # the facts file wins
    assert versions["torch"] == "2.9.1+cu128" and versions["cuda"] == "12.8"
    assert versions["source"].startswith(f"facts_file:{facts}") and "importlib.metadata" in versions["source"]
    assert calls and calls[0][0] == "/env/bin/python"


class _Module:
    """The part of an AnsibleModule that provenance_from_params uses."""

    def __init__(self, **params):
        self.params = dict(
            dict.fromkeys(("server_state", "launch_script", "launch_argv", "launch_env", "ml_env_python")),
            tier="baseline",
            facts_file="/etc/ansible/facts.d/sglang_lab.fact",
            git_revision="abc123",
            **params,
        )

    def run_command(self, argv):
        return 127, "", "not here"


def test_provenance_from_params_reads_the_named_server_options(monkeypatch):
    calls = []
    monkeypatch.setattr(prov, "collect_provenance", lambda **kwargs: calls.append(kwargs) or kwargs)
    monkeypatch.setattr(prov.socket, "gethostname", lambda: "node-a")
    module = _Module(server_address="10.0.0.2", server_port=31000, launch_argv=["--tp-size", "8"])

    prov.provenance_from_params(module, host_key="server_address", port_key="server_port", model="m", fetch_info=False)

    assert calls == [
        dict(
            host="10.0.0.2",
            port=31000,
            tier="baseline",
            server_state=None,
            launch_script=None,
            launch_argv=["--tp-size", "8"],
            launch_env=None,
            facts_file="/etc/ansible/facts.d/sglang_lab.fact",
            python=None,
            run=module.run_command,
            run_command=module.run_command,
            git_revision="abc123",
            hostname="node-a",
            model="m",
            fetch_info=False,
        )
    ]


@pytest.mark.parametrize(
    ("ml_env_python", "client_python", "asked"),
    [
        ("/ml-env/bin/python", "/client/bin/python", "/ml-env/bin/python"),
        (None, "/client/bin/python", "/client/bin/python"),
        (None, None, None),
    ],
)
def test_provenance_from_params_asks_the_ml_env_else_the_client(monkeypatch, ml_env_python, client_python, asked):
    calls = []
    monkeypatch.setattr(prov, "collect_provenance", lambda **kwargs: calls.append(kwargs))
    module = _Module(address="127.0.0.1", port=30000)
    module.params["ml_env_python"] = ml_env_python

    prov.provenance_from_params(module, client_python=client_python)

    assert [(c["host"], c["port"], c["python"]) for c in calls] == [("127.0.0.1", 30000, asked)]


@pytest.mark.parametrize(
    ("answer", "expected"),
    [
        (({"tokenizer_path": "/tok", "model_path": "/model"}, None), ("/tok", None)),
        (({"tokenizer_path": None, "model_path": "org/model"}, None), ("org/model", None)),
        (({"version": "0.5.10"}, None), (None, "no tokenizer_path or model_path")),
        ((None, "GET http://h:1/server_info failed: refused"), (None, "GET http://h:1/server_info failed: refused")),
    ],
)
def test_server_tokenizer_is_the_served_tokenizer_else_the_reason(monkeypatch, answer, expected):
    asked = []
    monkeypatch.setattr(prov, "fetch_server_info", lambda host, port: asked.append((host, port)) or answer)
    assert prov.server_tokenizer("h", 1) == expected
    assert asked == [("h", 1)]


def test_server_log_from_the_server_state(tmp_path):
    state = tmp_path / "server.json"
    state.write_text(json.dumps({"pid": 1, "log": "/run/sglang/server.log"}))
    assert prov.server_log(str(state)) == "/run/sglang/server.log"
    state.write_text(json.dumps({"pid": 1}))
    assert prov.server_log(str(state)) is None
    state.write_text("[1, 2]")
    assert prov.server_log(str(state)) is None
    assert prov.server_log(str(tmp_path / "absent.json")) is None
    assert prov.server_log(None) is None


def test_versions_with_nothing_say_why(tmp_path):
    versions = prov.collect_versions(str(tmp_path / "absent.fact"), None, None)
    assert all(versions[name] is None for name in prov.VERSION_NAMES)
    assert "not present" in versions["reasons"]["facts_file"]
    assert set(prov.VERSION_NAMES) <= set(versions["reasons"])


def test_versions_from_this_interpreter():
    """importlib.metadata run for real in this venv (sglang installed --no-deps)."""
    import subprocess
    from importlib import metadata

    def run(argv):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    versions = prov.collect_versions(None, sys.executable, run)
    assert versions["sglang"] == metadata.version("sglang")


def test_launch_provenance_from_state_and_proc(tmp_path):
    # A child with a known argv (pytest-xdist retitles this worker, so its own cmdline is not argv).
    argv = [sys.executable, "-c", "import time; time.sleep(60)", "--port", "1"]
    child = subprocess.Popen(argv)
    try:
        wait_until(lambda: psutil.Process(child.pid).cmdline() == argv, timeout=10)
        script, state = write_server_state(tmp_path, child.pid, 1, "python -m sglang.launch_server --port 1",
                                           script_sha256="recorded-at-start")
        launch = prov.launch_provenance(server_state=str(state))
    finally:
        child.kill()
        child.wait()
    assert launch["script_sha256"] == hashlib.sha256(script.read_bytes()).hexdigest()
    assert launch["script_sha256_at_start"] == "recorded-at-start"
    assert launch["argv_source"] == "proc" and launch["argv"] == argv
    assert launch["server"]["tier"] == "baseline"


def test_launch_provenance_parameters_win_and_secrets_are_redacted(tmp_path):
    launch = prov.launch_provenance(
        launch_argv=["python", "-m", "sglang.launch_server"],
        launch_env={"NCCL_P2P_LEVEL": "5", "HF_TOKEN": "hf_secret", "MY_API_KEY": "k"},
    )
    assert launch["argv_source"] == "parameter" and launch["argv"][-1] == "sglang.launch_server"
    assert launch["env"] == {"HF_TOKEN": "<redacted>", "MY_API_KEY": "<redacted>", "NCCL_P2P_LEVEL": "5"}
    assert "script" in launch["reasons"]


@pytest.mark.parametrize(
    ("info", "argv", "expected"),
    [
        ({"synthetic": True}, None, True),
        ({"model_path": "x"}, ["python", "-m", "sglang_sim.launch_server"], False),
        (None, ["python", "-m", "sglang_sim.launch_server"], True),
        (None, ["python", "-m", "sglang.launch_server"], False),
        (None, None, None),
    ],
)
def test_target_is_simulator(info, argv, expected):
    assert prov.target_is_simulator(info, argv) is expected


def test_gpu_facts_without_nvidia_smi_say_why(monkeypatch):
    def run(argv):
        raise AssertionError("nvidia-smi must not be run when it is absent")

    monkeypatch.setenv("PATH", "/nonexistent")
    facts = prov.gpu_facts(run)
    assert facts["available"] is False and facts["error_class"] == "missing"


def test_launch_provenance_reads_the_execd_server_not_the_session_leader(tmp_path):
    """The recorded pid leads a shell that runs the launch script; the script's exports only exist
    in the exec'd server process (seen on the GPU check: CUDA_HOME came from the wrapper)."""
    import subprocess
    import time

    pkg = tmp_path / "fake_mod"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text("import time\ntime.sleep(60)\n")
    script = tmp_path / "tier.sh"
    script.write_text(
        "#!/usr/bin/env bash\nset -euo pipefail\nexport NCCL_P2P_LEVEL=5 CUDA_HOME=/usr/local/cuda-12.8\n"
        f"exec {sys.executable} -m fake_mod.launch_server --port 1\n"
    )
    leader = subprocess.Popen(
        ["bash", "-c", f"bash {script}; echo $? > {tmp_path}/exit"],
        cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "CUDA_HOME": "/usr/local/cuda", "PYTHONPATH": str(tmp_path)},
        start_new_session=True,
    )
    try:
        server = None
        for _ in range(100):
            kids = psutil.Process(leader.pid).children(recursive=True)
            server = next((k for k in kids if "fake_mod.launch_server" in " ".join(k.cmdline())), None)
            if server:
                break
            time.sleep(0.1)
        assert server is not None, "the launch script never exec'd the server"
        state = tmp_path / "server.json"
        state.write_text(json.dumps({"pid": leader.pid, "script": str(script)}))
        launch = prov.launch_provenance(server_state=str(state))
        assert launch["argv_source"] == "proc" and "fake_mod.launch_server" in launch["argv"]
        assert launch["env"]["CUDA_HOME"] == "/usr/local/cuda-12.8"
        assert launch["env"]["NCCL_P2P_LEVEL"] == "5"
    finally:
        os.killpg(leader.pid, 9)
        leader.wait()


def test_target_is_simulator_from_the_launch_script_when_the_server_never_answered(tmp_path):
    """A crash at load leaves no /server_info, and argv given as flags only has no module."""
    sim = tmp_path / "t01.sh"
    sim.write_text("#!/usr/bin/env bash\nexec python3 -u -m sglang_sim.launch_server \\\n  --tp-size 8\n")
    real = tmp_path / "baseline.sh"
    real.write_text("#!/usr/bin/env bash\nexec python3 -u -m sglang.launch_server \\\n  --tp-size 8\n")
    assert prov.target_is_simulator(None, ["--tp-size", "8"], str(sim)) is True
    assert prov.target_is_simulator(None, ["--tp-size", "8"], str(real)) is False
    assert prov.target_is_simulator(None, None, str(tmp_path / "missing.sh")) is None


def test_point_warmup_requests_after_the_warmup_rounds():
    """Unset: 0 after the module's warm-up rounds (nothing left for bench_serving's own request to warm),
    else bench_serving's default (no flag); a configured count always wins."""
    assert bp.point_warmup_requests(None, True) == 0
    assert bp.point_warmup_requests(None, False) is None
    assert bp.point_warmup_requests(2, True) == 2
    assert bp.point_warmup_requests(0, False) == 0


def test_beside_runs_at_once_with_the_caller_and_hands_back_its_result():
    """Module sglang_bench reads the record's provenance while the quality check's requests run: the
    work handed to Beside runs while the caller goes on (both meet at a barrier that one alone cannot
    pass), and result() gives what it returned."""
    barrier = threading.Barrier(2, timeout=10)

    def provenance(tag):
        barrier.wait()
        return {"collected": tag}

    beside = bp.Beside(provenance, "yes")
    barrier.wait()  # the caller's own work, meanwhile
    assert beside.result() == {"collected": "yes"}


def test_beside_raises_what_its_function_raised():
    def broken():
        raise ValueError("no nvidia-smi answer")

    with pytest.raises(ValueError, match="no nvidia-smi answer"):
        bp.Beside(broken).result()
