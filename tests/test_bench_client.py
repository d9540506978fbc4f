"""SGLang's REAL bench_serving (through tools/sglang_bench_client.py) against the simulator.

The JSONL parsed here is written by the real client during the test run, so the
parser is checked against what bench_serving 0.5.10.post1 actually writes,
including its non-standard ``Infinity`` for ``--request-rate inf``. The
incomplete point (completed < num_prompts) from the real client is tested
through the role in test_bench_ansible.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins" / "module_utils"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sglang_bench_results as br  # noqa: E402
import sglang_ledger as ledger  # noqa: E402
import sim_helpers  # noqa: E402

pytestmark = pytest.mark.integration

SHIM = [sys.executable, str(REPO / "tools" / "sglang_bench_client.py")]
CLIENT_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("tokenizer")
    subprocess.run(
        [sys.executable, "-m", "sglang_sim.make_tokenizer", str(folder)],
        env={**sim_helpers.sim_env(Path("/nonexistent")), "PYTHONPATH": str(sim_helpers.SIMULATOR)},
        check=True,
        capture_output=True,
    )
    return folder


def start_sim(tmp_path_factory, tokenizer_dir, *extra_argv, **env):
    tmp = tmp_path_factory.mktemp("sim")
    manifest, _ = sim_helpers.manifest_for_tests(tmp)
    port = sim_helpers.free_port()
    argv = [
        "--model-path",
        str(tokenizer_dir),
        "--served-model-name",
        "glm-5",
        "--tp-size",
        "8",
        "--port",
        str(port),
        *extra_argv,
    ]
    server = sim_helpers.SimServer(
        argv, sim_helpers.sim_env(manifest, SGLANG_SIM_TOKENIZER=str(tokenizer_dir), **env), tmp / "sim.log", port
    )
    try:
        server.wait_ready()
    except BaseException:
        server.stop()
        raise
    return server


@pytest.fixture(scope="module")
def sim(tmp_path_factory, tokenizer_dir):
    server = start_sim(tmp_path_factory, tokenizer_dir)
    yield server
    server.stop()


def client_argv(server, tokenizer_dir, out, **kwargs):
    settings = dict(
        concurrency=4, num_prompts=8, input_len=32, output_len=16, dataset_name="random-ids", output_details=True
    )
    settings.update(kwargs)
    return br.build_client_argv(
        SHIM, "127.0.0.1", server.port, output_file=str(out), tokenizer=str(tokenizer_dir), **settings
    )


def test_real_client_point_is_parsed(sim, tokenizer_dir, tmp_path):
    out = tmp_path / "c4_r0.jsonl"
    argv = client_argv(sim, tokenizer_dir, out)
    point, outcome = br.run_point(argv, str(out), 4, 0, 8, env=CLIENT_ENV, timeout=300, log_path=str(out) + ".log")
    assert outcome["rc"] == 0, outcome["output"][-3000:]

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
        assert point[key] == raw[key], key
        assert isinstance(point[key], float) and point[key] > 0, key
    assert point["total_throughput"] > point["output_throughput"]
    assert point["measured_concurrency"] == raw["concurrency"]
    assert point["client_echo"]["request_rate"] == "inf" and point["client_echo"]["max_concurrency"] == 4
    assert raw["server_info"]["synthetic"] is True

    record = ledger.build_record("sim", "baseline", "run", {"request_rate": raw["request_rate"]}, points=[point])
    line = ledger.encode_record(record).decode()
    strict = json.loads(line, parse_constant=lambda c: pytest.fail(f"ledger wrote non-JSON {c}"))
    assert strict["workload"]["request_rate"] == "inf"
    assert strict["points"][0]["output_throughput"] == raw["output_throughput"]


def test_range_ratio_zero_shortens_requests(sim, tokenizer_dir, tmp_path):
    """bench_serving's default ratio 0.0 draws lengths down to 1 (why data/benchmark.yml sets 1.0)."""
    out = tmp_path / "ratio0.jsonl"
    argv = client_argv(sim, tokenizer_dir, out, range_ratio=0.0, num_prompts=12, output_len=64)
    point, outcome = br.run_point(argv, str(out), 4, 0, 12, env=CLIENT_ENV, timeout=300, log_path=str(out) + ".log")
    assert point["status"] == "ok", outcome["output"][-3000:]
    assert point["total_output_tokens"] < 12 * 64


def test_unreachable_server_is_classified(tokenizer_dir, tmp_path):
    out = tmp_path / "none.jsonl"
    port = sim_helpers.free_port()
    argv = br.build_client_argv(
        SHIM,
        "127.0.0.1",
        port,
        1,
        4,
        8,
        8,
        str(out),
        str(tokenizer_dir),
        dataset_name="random-ids",
        extra_args=["--ready-check-timeout-sec", "1"],
    )
    point, outcome = br.run_point(argv, str(out), 1, 0, 4, env=CLIENT_ENV, timeout=120, log_path=str(out) + ".log")
    assert outcome["rc"] != 0
    assert point["status"] == "failed" and point["failure"]["class"] == "server_unreachable"
    assert point["completed"] is None
