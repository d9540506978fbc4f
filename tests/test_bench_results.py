"""Benchmark points and provenance: pure functions, plus the client runner with stand-in clients.

The real bench_serving against the simulator is in test_bench_client.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import textwrap
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins" / "module_utils"))

import sglang_bench_results as br  # noqa: E402

# One result line shaped as bench_serving 0.5.10.post1 writes it (keys from its source,
# values made up); the real client's output is tested in test_bench_client.py.
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
    assert br.num_prompts_for(concurrency, multiplier, floor) == expected


@pytest.mark.parametrize("bad", [(0, 2, 10), (1, 0, 10), (1, 2, 0)])
def test_num_prompts_rule_rejects_nonsense(bad):
    with pytest.raises(ValueError):
        br.num_prompts_for(*bad)


@pytest.mark.parametrize(
    ("value", "expected"),
    [("inf", "inf"), ("Infinity", "inf"), (float("inf"), "inf"), (None, "inf"), ("2.5", "2.5"), (4, "4.0")],
)
def test_format_request_rate(value, expected):
    assert br.format_request_rate(value) == expected


def test_format_request_rate_rejects_words():
    with pytest.raises(ValueError):
        br.format_request_rate("fast")


def test_client_argv_has_every_setting():
    argv = br.build_client_argv(
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
    argv = br.build_client_argv(
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
    )
    used = {a for a in argv if a.startswith("--")}
    assert used <= known, used - known


def test_point_from_a_complete_result():
    raw = br.parse_result_lines(RESULT_LINE)[-1]
    assert raw["request_rate"] == float("inf")  # what json.loads makes of Infinity
    point = br.point_from_result(raw, concurrency=10, repeat=0, num_prompts=20)
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
    raw = dict(br.parse_result_lines(RESULT_LINE)[-1], completed=completed)
    point = br.point_from_result(raw, concurrency=10, repeat=1, num_prompts=num_prompts)
    assert point["status"] == "failed"
    assert point["failed"] == num_prompts - completed
    assert point["failure"]["class"] == "incomplete_point"
    assert f"completed {completed} of {num_prompts}" in point["failure"]["message"]
    assert f"({num_prompts - completed} failed)" in point["failure"]["message"]


def test_error_summary_counts_messages():
    errors = ["", "Bad Request: input (73 tokens) too long", "", "Bad Request: input (80 tokens) too long",
              "reset", None]
    assert br.summarize_errors(errors) == [
        {"error": "Bad Request: input (73 tokens) too long", "count": 2},
        {"error": "reset", "count": 1},
    ]


def test_error_summary_keeps_the_total():
    errors = [f"error kind {chr(97 + i)}" for i in range(8)] * 2
    summary = br.summarize_errors(errors, limit=3)
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
    failure_class, reason = br.classify_client_failure(rc, output, timed_out)
    assert failure_class == expected and reason


def write_client(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "client.py"
    script.write_text(textwrap.dedent(body))
    return [sys.executable, str(script)]


def test_run_point_reads_only_the_new_line(tmp_path):
    out = tmp_path / "c10.jsonl"
    out.write_text(RESULT_LINE.replace('"completed": 20', '"completed": 3') + "\n")  # an older run
    client = write_client(
        tmp_path,
        f"""
        import sys
        path = sys.argv[sys.argv.index("--output-file") + 1]
        with open(path, "a") as handle:
            handle.write({RESULT_LINE!r} + "\\n")
    """,
    )
    argv = client + ["--output-file", str(out)]
    point, outcome = br.run_point(argv, str(out), 10, 0, 20, log_path=str(out) + ".log")
    assert outcome["rc"] == 0 and point["status"] == "ok" and point["completed"] == 20
    assert point["command"] == argv and point["output_file"] == str(out)


def test_run_point_without_result_is_failed_with_unknown_count(tmp_path):
    client = write_client(
        tmp_path,
        """
        import sys
        print("Server at http://127.0.0.1:9/v1/models is not ready. Exiting.")
        sys.exit(1)
    """,
    )
    point, outcome = br.run_point(client, str(tmp_path / "none.jsonl"), 1, 0, 10, log_path=str(tmp_path / "log"))
    assert outcome["rc"] == 1
    assert point["status"] == "failed" and point["completed"] is None and point["failed"] is None
    assert point["failure"]["class"] == "server_unreachable"
    assert "not ready" in point["failure"]["output_tail"]


def test_run_point_timeout_kills_the_client_group(tmp_path):
    pid_file = tmp_path / "child.pid"
    client = write_client(
        tmp_path,
        f"""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open({str(pid_file)!r} + ".tmp", "w") as handle:
            handle.write(str(child.pid))
        os.replace({str(pid_file)!r} + ".tmp", {str(pid_file)!r})
        time.sleep(600)
    """,
    )
    point, outcome = br.run_point(
        client, str(tmp_path / "x.jsonl"), 1, 0, 10, timeout=10, log_path=str(tmp_path / "log")
    )
    assert outcome["timed_out"] is True
    assert point["failure"]["class"] == "bench_timeout"
    assert pid_file.exists(), "the stand-in client had not started its child within the 10 s limit"
    child = int(pid_file.read_text())
    # The grandchild got the group's SIGTERM too; wait (bounded) for it to be gone.
    try:
        gone, alive = psutil.wait_procs([psutil.Process(child)], timeout=20)
    except psutil.NoSuchProcess:
        alive = []
    assert alive == [], alive


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
    assert br.versions_from_facts(facts) == expected


@pytest.mark.parametrize(
    ("torch", "cuda"), [("2.9.1+cu128", "12.8"), ("2.9.1+cu130", "13.0"), ("2.9.1", None), (None, None)]
)
def test_cuda_from_torch(torch, cuda):
    assert br.cuda_from_torch(torch) == cuda


def test_versions_facts_file_first_then_metadata(tmp_path):
    facts = tmp_path / "sglang_lab.fact"
    facts.write_text(json.dumps({"versions": {"sglang": "0.5.10.post1", "flashinfer": "0.6.7.post3"}}))
    calls = []

    def run(argv):
        calls.append(argv)
        return 0, json.dumps({"sglang": "9.9", "flashinfer": None, "torch": "2.9.1+cu128"}) + "\n", ""

    versions = br.collect_versions(str(facts), "/env/bin/python", run)
    assert versions["sglang"] == "0.5.10.post1"  # the facts file wins
    assert versions["torch"] == "2.9.1+cu128" and versions["cuda"] == "12.8"
    assert versions["source"].startswith(f"facts_file:{facts}") and "importlib.metadata" in versions["source"]
    assert calls and calls[0][0] == "/env/bin/python"


def test_versions_with_nothing_say_why(tmp_path):
    versions = br.collect_versions(str(tmp_path / "absent.fact"), None, None)
    assert all(versions[name] is None for name in br.VERSION_NAMES)
    assert "not present" in versions["reasons"]["facts_file"]
    assert set(br.VERSION_NAMES) <= set(versions["reasons"])


def test_versions_from_this_interpreter():
    """importlib.metadata run for real in this venv (sglang installed --no-deps)."""
    import subprocess
    from importlib import metadata

    def run(argv):
        proc = subprocess.run(argv, capture_output=True, text=True, check=False)
        return proc.returncode, proc.stdout, proc.stderr

    versions = br.collect_versions(None, sys.executable, run)
    assert versions["sglang"] == metadata.version("sglang")


def test_launch_provenance_from_state_and_proc(tmp_path):
    script = tmp_path / "baseline.sh"
    script.write_text("#!/bin/bash\nexec python -m sglang.launch_server --port 1\n")
    state = tmp_path / "server.json"
    state.write_text(
        json.dumps(
            {
                "tier": "baseline",
                "pid": os.getpid(),
                "script": str(script),
                "script_sha256": "recorded-at-start",
                "port": 1,
            }
        )
    )
    launch = br.launch_provenance(server_state=str(state))
    assert launch["script_sha256"] == hashlib.sha256(script.read_bytes()).hexdigest()
    assert launch["script_sha256_at_start"] == "recorded-at-start"
    assert launch["argv_source"] == "proc" and launch["argv"] == psutil.Process().cmdline()
    assert launch["server"]["tier"] == "baseline"


def test_launch_provenance_parameters_win_and_secrets_are_redacted(tmp_path):
    launch = br.launch_provenance(
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
    assert br.target_is_simulator(info, argv) is expected


def test_gpu_facts_without_nvidia_smi_say_why(monkeypatch):
    def run(argv):
        raise AssertionError("nvidia-smi must not be run when it is absent")

    monkeypatch.setenv("PATH", "/nonexistent")
    facts = br.gpu_facts(run)
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
        launch = br.launch_provenance(server_state=str(state))
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
    assert br.target_is_simulator(None, ["--tp-size", "8"], str(sim)) is True
    assert br.target_is_simulator(None, ["--tp-size", "8"], str(real)) is False
    assert br.target_is_simulator(None, None, str(tmp_path / "missing.sh")) is None
