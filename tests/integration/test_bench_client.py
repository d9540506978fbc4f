"""SGLang's REAL bench_serving (through tools/sglang_bench_client.py) against the simulator.

The JSONL parsed here is written by the real client during the test run, so the
parser is checked against what bench_serving 0.5.10.post1 actually writes,
including its non-standard ``Infinity`` for ``--request-rate inf``. A cell of
several points runs in one client process, as the module runs it. The
incomplete point (completed < num_prompts) from the real client is tested
through the role in test_bench_ansible.py.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import sglang_bench_points as bp
import sglang_ledger as ledger
from helpers.paths import REPO
from helpers.processes import free_port
from helpers.sim import start_bench_sim

SHIM = [sys.executable, str(REPO / "tools" / "sglang_bench_client.py")]
CLIENT_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def sim(tmp_path_factory, sim_tokenizer):
    server = start_bench_sim(tmp_path_factory.mktemp("sim"), sim_tokenizer)
    yield server
    server.stop()


def plan(port, sim_tokenizer, folder, concurrency, num_prompts=8, per_point=None, **kwargs):
    """Specs of one cell against ``port`` (``per_point``: {index: {"port": p, "extra_args": [...]}})."""
    settings = dict(input_len=32, output_len=16, dataset_name="random-ids", output_details=True)
    settings.update(kwargs)
    specs = bp.plan_points(concurrency, 1, str(folder), num_prompts=num_prompts)
    for spec in specs:
        own = dict(settings, **(per_point or {}).get(spec["index"], {}))
        spec["argv"] = bp.build_client_argv(
            [],
            "127.0.0.1",
            own.pop("port", port),
            spec["concurrency"],
            spec["num_prompts"],
            output_file=spec["output_file"],
            tokenizer=str(sim_tokenizer),
            **own,
        )
    return specs


def run_cell(specs, folder, **kwargs):
    kwargs.setdefault("point_timeout", 300)
    return bp.run_plan(SHIM, specs, str(folder / "plan.json"), str(folder / "client.log"), env=CLIENT_ENV, **kwargs)


def test_real_client_point_is_parsed(sim, sim_tokenizer, tmp_path):
    specs = plan(sim.port, sim_tokenizer, tmp_path, [4])
    (point,), outcome = run_cell(specs, tmp_path)
    assert outcome["rc"] == 0, Path(point["client_log"]).read_text()[-3000:]
    out = Path(point["output_file"])

    text = out.read_text()
    assert '"request_rate": Infinity' in text  # what the real client writes
    raw = json.loads(text.splitlines()[-1])
    assert point["status"] == "ok", point
    assert point["completed"] == raw["completed"] == 8 and point["failed"] == 0
    # --random-range-ratio 1.0 and ignore_eos: every request is exactly output_len tokens.
    assert raw["total_output_tokens"] == 8 * 16
    for key in (
        "output_throughput",
        "total_throughput",
        "request_throughput",
        "mean_ttft_ms",
        "median_ttft_ms",
        "p99_ttft_ms",
        "mean_tpot_ms",
        "median_tpot_ms",
        "p99_tpot_ms",
        "mean_itl_ms",
        "median_itl_ms",
        "p99_itl_ms",
        "mean_e2e_latency_ms",
        "median_e2e_latency_ms",
        "p99_e2e_latency_ms",
        "duration",
    ):
        if key.startswith("p99_") and key != "p99_itl_ms":
            # 8 requests support no p99 (it needs 100): withheld, bench_serving's value kept beside.
            assert point[key] is None
            assert point["withheld_percentiles"][key] == {"value": raw[key], "n": 8, "min_n": 100}
            continue
        assert point[key] == raw[key], key
        assert isinstance(point[key], float) and point[key] > 0, key
    assert point["total_throughput"] > point["output_throughput"]
    assert point["measured_concurrency"] == raw["concurrency"]
    assert point["client_echo"]["request_rate"] == "inf" and point["client_echo"]["max_concurrency"] == 4
    assert raw["server_info"]["synthetic"] is True
    assert outcome["runs"][0]["bench_module"] == "sglang.bench_serving"  # 0.5.10.post1 has no benchmark.serving

    record = ledger.build_record("sim", "baseline", "run", {"request_rate": raw["request_rate"]}, points=[point])
    line = ledger.encode_record(record).decode()
    strict = json.loads(line, parse_constant=lambda c: pytest.fail(f"ledger wrote non-JSON {c}"))
    assert strict["workload"]["request_rate"] == "inf"
    assert strict["points"][0]["output_throughput"] == raw["output_throughput"]


def test_real_client_runs_a_cell_in_one_process(sim, sim_tokenizer, tmp_path):
    """Four points, one client process; each point's numbers are its own (its own output file and log)."""
    specs = plan(sim.port, sim_tokenizer, tmp_path, [1, 2, 4, 8], num_prompts=8)
    points, outcome = run_cell(specs, tmp_path)
    assert [p["status"] for p in points] == ["ok"] * 4, [Path(p["client_log"]).read_text()[-2000:] for p in points]
    assert len(outcome["runs"]) == 1
    pids = {e["pid"] for e in bp.parse_status_lines(Path(outcome["log"]).read_text())}
    assert pids == {outcome["runs"][0]["pid"]}
    for point in points:
        assert point["client_echo"]["max_concurrency"] == point["concurrency"]
        assert point["completed"] == 8 and point["total_output_tokens"] == 8 * 16
        assert len(Path(point["output_file"]).read_text().splitlines()) == 1
        assert f"Max request concurrency:                 {point['concurrency']}" in Path(
            point["client_log"]
        ).read_text()


def test_real_client_failing_middle_point(sim, sim_tokenizer, tmp_path):
    """The middle point's server is not there: server_unreachable for it, the others ok, one process."""
    specs = plan(
        sim.port,
        sim_tokenizer,
        tmp_path,
        [1, 2, 4],
        per_point={1: {"port": free_port(), "extra_args": ["--ready-check-timeout-sec", "1"]}},
    )
    points, outcome = run_cell(specs, tmp_path, stop_on_failure=False)
    assert [p["status"] for p in points] == ["ok", "failed", "ok"], points
    assert points[1]["failure"]["class"] == "server_unreachable" and points[1]["completed"] is None
    assert "is not ready" in points[1]["failure"]["output_tail"]
    assert len(outcome["runs"]) == 1


def test_real_client_deadline_inside_asyncio(sim, sim_tokenizer, tmp_path):
    """A server that accepts connections and never answers: the point's requests hang inside
    bench_serving's event loop until the per-point deadline stops them; the next point runs."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        specs = plan(
            sim.port,
            sim_tokenizer,
            tmp_path,
            [1, 2],
            per_point={0: {"port": silent.getsockname()[1], "extra_args": ["--ready-check-timeout-sec", "0"]}},
        )
        points, outcome = run_cell(specs, tmp_path, stop_on_failure=False, point_timeout=8, timeout=120)
    assert [p["status"] for p in points] == ["failed", "ok"], [p.get("failure") for p in points]
    assert points[0]["failure"]["class"] == "bench_timeout"
    assert 7 < points[0]["wall_s"] < 60
    assert len(outcome["runs"]) == 1 and outcome["runs"][0]["timed_out"] is False


def test_range_ratio_zero_shortens_requests(sim, sim_tokenizer, tmp_path):
    """bench_serving's default ratio 0.0 draws lengths down to 1 (why data/benchmark.yml sets 1.0)."""
    specs = plan(sim.port, sim_tokenizer, tmp_path, [4], num_prompts=12, range_ratio=0.0, output_len=64)
    (point,), outcome = run_cell(specs, tmp_path)
    assert point["status"] == "ok", Path(point["client_log"]).read_text()[-3000:]
    assert point["total_output_tokens"] < 12 * 64


def test_extra_request_body_reaches_every_request(sim, sim_tokenizer, tmp_path):
    """The workload's extra_request_body travels through the plan and the real bench_serving
    (--extra-request-body) into every /generate body: its sampling_params asks for 4 new tokens
    where output_len says 64, and the server makes 4 per request."""
    workload = {"input_len": 32, "output_len": 64, "dataset_name": "random-ids",
                "extra_request_body": {"sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}}
    specs = plan(sim.port, sim_tokenizer, tmp_path, [4], num_prompts=12, **bp.client_settings(workload))
    (point,), outcome = run_cell(specs, tmp_path)
    assert point["status"] == "ok", Path(point["client_log"]).read_text()[-3000:]
    assert point["total_output_tokens"] == 12 * 4


def test_unreachable_server_is_classified(sim_tokenizer, tmp_path):
    """The single-point command line (no --plan) still works and fails the old way."""
    out = tmp_path / "none.jsonl"
    port = free_port()
    argv = bp.build_client_argv(
        SHIM,
        "127.0.0.1",
        port,
        1,
        4,
        8,
        8,
        str(out),
        str(sim_tokenizer),
        dataset_name="random-ids",
        extra_args=["--ready-check-timeout-sec", "1"],
    )
    outcome = bp.run_client(argv, env=CLIENT_ENV, timeout=120, log_path=str(out) + ".log")
    assert outcome["rc"] != 0
    assert bp.read_new_results(str(out)) == []
    failure_class, reason = bp.classify_client_failure(outcome["rc"], outcome["output"], outcome["timed_out"])
    assert failure_class == "server_unreachable", outcome["output"][-2000:]


def test_settle_pause_skipped_only_without_warmup_or_flush(sim, sim_tokenizer, tmp_path):
    """bench_serving's 1 s pause after its warm-up is skipped for a point that sends no warm-up request and
    flushes nothing, and kept otherwise: per point, ``settle_pause_skipped`` counts the pauses the client
    left out (counted, not timed)."""
    per_point = {1: {"warmup_requests": 1}, 2: {"warmup_requests": 0, "extra_args": ["--flush-cache"]}}
    specs = plan(sim.port, sim_tokenizer, tmp_path, [1, 2, 4], num_prompts=8, warmup_requests=0,
                 per_point=per_point)
    points, outcome = run_cell(specs, tmp_path)
    assert [p["status"] for p in points] == ["ok"] * 3, [Path(p["client_log"]).read_text()[-2000:] for p in points]
    assert [p["settle_pause_skipped"] for p in points] == [1, 0, 0]
    assert "Warmup completed with 0 sequences" in Path(points[0]["client_log"]).read_text()


def test_settle_pause_kept_when_the_plan_says_always(sim, sim_tokenizer, tmp_path):
    specs = plan(sim.port, sim_tokenizer, tmp_path, [1], num_prompts=8, warmup_requests=0)
    bp.write_plan(str(tmp_path / "plan.json"), specs)
    document = json.loads((tmp_path / "plan.json").read_text())
    document["settle_pause"] = "always"
    (tmp_path / "plan.json").write_text(json.dumps(document))
    proc = subprocess.run([*SHIM, "--plan", str(tmp_path / "plan.json")], capture_output=True, text=True,
                          env=dict(os.environ, **CLIENT_ENV), timeout=300, check=False)
    ends = [e for e in bp.parse_status_lines(proc.stdout) if e.get("event") == "end"]
    assert proc.returncode == 0 and [e["settle_pause_skipped"] for e in ends] == [0], proc.stderr[-2000:]


def test_the_catalogues_datasets_run_through_the_real_client(sim, sim_tokenizer, tmp_path):
    """generated-shared-prefix and sharegpt (data/workloads.yml's generated-shared-prefix and
    chat-corpus, scaled down) through the real bench_serving against the simulator: whole groups
    (8 prompts = 2 groups x 4), and the synthetic ShareGPT file the simulator setup writes, each
    request answered with exactly output_len tokens."""
    sys.path.insert(0, str(REPO / "simulator"))
    from sglang_sim.tokenizer import write_sharegpt

    corpus = write_sharegpt(tmp_path / "synthetic_sharegpt.json", 12)
    env = {**CLIENT_ENV, "HOME": str(tmp_path)}  # bench_serving caches generated prompts under ~/.cache
    gsp = {"dataset_name": "generated-shared-prefix", "gsp_num_groups": 2, "gsp_system_prompt_len": 64,
           "input_len": 16, "output_len": 8}
    chat = {"dataset_name": "sharegpt", "dataset_path": str(corpus), "input_len": 1024, "output_len": 8}
    for name, workload in (("gsp", gsp), ("chat", chat)):
        folder = tmp_path / name
        folder.mkdir()
        specs = plan(sim.port, sim_tokenizer, folder, [4], num_prompts=8, **bp.client_settings(workload))
        (point,), _outcome = bp.run_plan(SHIM, specs, str(folder / "plan.json"), str(folder / "client.log"),
                                         env=env, point_timeout=300)
        assert point["status"] == "ok", Path(point["client_log"]).read_text()[-3000:]
        assert (point["completed"], point["total_output_tokens"]) == (8, 8 * 8), name
        log = Path(specs[0]["log"]).read_text()
        if name == "gsp":
            assert "Number of groups: 2" in log and "Prompts per group: 4" in log, log[-2000:]
