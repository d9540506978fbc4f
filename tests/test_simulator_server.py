"""The SYNTHETIC SGLang-protocol simulator as real processes.

Each test starts ``python -m sglang_sim.launch_server`` in its own session on
a free loopback port, checks the process tree (psutil), the HTTP API in
SGLang's shapes, the fault modes, the command-line errors, and runs SGLang's
real bench_serving client against it. Every server started here is stopped
by SIGKILL to its process group in a fixture finalizer. No timing is asserted.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))

from sim_helpers import (  # noqa: E402
    PYTHON,
    REPO,
    SimServer,
    free_port,
    manifest_for_tests,
    sim_env,
    wait_for,
)

BENCH_CLIENT = REPO / "tools" / "sglang_bench_client.py"


@pytest.fixture(scope="session")
def manifest(tmp_path_factory):
    path, which = manifest_for_tests(tmp_path_factory.mktemp("manifest"))
    print(f"simulator tests use the {which} flag manifest: {path}")
    return path


@pytest.fixture(scope="session")
def tok_dir(tmp_path_factory):
    """The simulated model's tokenizer, written by the real CLI."""
    folder = tmp_path_factory.mktemp("model") / "sim-model"
    env = sim_env(Path("/nonexistent"))
    result = subprocess.run(
        [PYTHON, "-m", "sglang_sim.make_tokenizer", str(folder), "--sharegpt", "60"],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "SYNTHETIC" in result.stdout
    return folder


@pytest.fixture
def start(manifest, tmp_path):
    """Start simulators; all of them are SIGKILLed (process group) at teardown."""
    servers: list[SimServer] = []

    def _start(*argv: str, port: int | None = None, **env: str) -> SimServer:
        port = free_port() if port is None else port
        full = [*argv, "--host", "127.0.0.1", "--port", str(port)]
        server = SimServer(full, sim_env(manifest, **env), tmp_path / f"sim{len(servers)}.log", port)
        servers.append(server)
        return server

    yield _start
    for server in servers:
        server.stop()


@pytest.fixture(scope="module")
def shared_server(manifest, tok_dir, tmp_path_factory):
    """One ready TP2 server for the read-only API tests (deprecated flags included)."""
    port = free_port()
    server = SimServer(
        ["--model-path", str(tok_dir), "--served-model-name", "glm-5", "--tp-size", "2",
         "--enable-piecewise-cuda-graph", "--stream-output", "--host", "127.0.0.1", "--port", str(port)],
        sim_env(manifest),
        tmp_path_factory.mktemp("shared") / "sim.log",
        port,
    )
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def titles(server: SimServer) -> list[str]:
    names = []
    for proc in server.tree():
        try:
            cmd = " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if cmd.startswith("sglang::"):
            names.append(cmd.strip())
    return sorted(names)


def stderr_lines(result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


# --- process tree ------------------------------------------------------------------


def test_process_tree_has_sglang_titles(shared_server):
    assert titles(shared_server) == [
        "sglang::detokenizer", "sglang::scheduler_TP0", "sglang::scheduler_TP1",
    ]
    main = psutil.Process(shared_server.proc.pid)
    assert "sglang_sim.launch_server" in " ".join(main.cmdline())
    for child in main.children():
        assert os.getpgid(child.pid) == shared_server.pgid


def test_dp_size_two_runs_a_data_parallel_controller(start, tok_dir):
    server = start("--model-path", str(tok_dir), "--dp-size", "2", "--tp-size", "2")
    server.wait_ready()
    main = psutil.Process(server.proc.pid)
    direct = sorted(" ".join(c.cmdline()).strip() for c in main.children()
                    if " ".join(c.cmdline()).startswith("sglang::"))
    assert direct == ["sglang::data_parallel_controller", "sglang::detokenizer"]
    assert titles(server) == [
        "sglang::data_parallel_controller", "sglang::detokenizer",
        "sglang::scheduler_DP0_TP0", "sglang::scheduler_DP0_TP1",
        "sglang::scheduler_DP1_TP0", "sglang::scheduler_DP1_TP1",
    ]
    assert "Launch DP1 starting at GPU #2." in server.log()


# --- HTTP API shapes -----------------------------------------------------------------------


def test_log_is_labelled_and_sglang_shaped(shared_server):
    log = shared_server.log()
    assert log.splitlines()[0].startswith("[sglang-sim] SYNTHETIC")
    for needle in (
        "server_args=ServerArgs(model_path=",
        "TP0] Load weight begin.",
        "Loading safetensors checkpoint shards: 100% Completed",
        "TP1] KV Cache is allocated. #tokens:",
        "TP0] Capture cuda graph begin.",
        "INFO:     Uvicorn running on http://127.0.0.1:",
        "The server is fired up and ready to roll!",
        "The command line argument '--enable-piecewise-cuda-graph' is deprecated",
        "'--stream-output' is deprecated and will be removed in a future release. "
        "Use '--incremental-streaming-output' instead.",
    ):
        assert needle in log, needle
    assert log.index("Load weight begin") < log.index("The server is fired up")


def test_health_and_info_endpoints(shared_server):
    url = shared_server.url
    assert requests.get(url + "/health", timeout=5).status_code == 200
    assert requests.get(url + "/health_generate", timeout=30).status_code == 200
    for path in ("/model_info", "/get_model_info"):
        info = requests.get(url + path, timeout=5).json()
        assert info["is_generation"] is True and info["synthetic"] is True
        assert info["model_path"].endswith("sim-model")
        assert info["architectures"] == ["SglangSimSyntheticForCausalLM"]
    for path in ("/server_info", "/get_server_info"):
        info = requests.get(url + path, timeout=5).json()
        assert info["synthetic"] is True and info["version"] == "0.5.10.post1"
        assert info["tp_size"] == 2 and info["served_model_name"] == "glm-5"
        assert info["incremental_streaming_output"] is True  # the deprecated alias parsed
        assert info["simulator"]["schedulers"] == ["sglang::scheduler_TP0", "sglang::scheduler_TP1"]
        assert info["internal_states"][0]["synthetic"] is True
    models = requests.get(url + "/v1/models", timeout=5).json()
    assert [m["id"] for m in models["data"]] == ["glm-5"]
    assert requests.get(url + "/v1/models/glm-5", timeout=5).json()["id"] == "glm-5"
    assert requests.get(url + "/v1/models/other", timeout=5).status_code == 404
    flushed = requests.post(url + "/flush_cache", timeout=5)
    assert flushed.status_code == 200 and flushed.text.startswith("Cache flushed.")
    load = requests.get(url + "/get_load", timeout=5).json()
    assert load[0]["synthetic"] is True and "num_reqs" in load[0]
    assert requests.get(url + "/no_such_endpoint", timeout=5).status_code == 404


def test_generate_non_stream(shared_server):
    body = {"text": "the batch is ready", "sampling_params": {"max_new_tokens": 7, "ignore_eos": True}}
    out = requests.post(shared_server.url + "/generate", json=body, timeout=30).json()
    meta = out["meta_info"]
    assert meta["prompt_tokens"] == 4 and meta["completion_tokens"] == 7
    assert meta["finish_reason"] == {"type": "length", "length": 7}
    assert meta["cached_tokens"] == 0 and meta["synthetic"] is True
    assert meta["e2e_latency"] > 0 and meta["id"]
    assert len(out["output_ids"]) == 7 and len(out["text"].split()) == 7
    by_ids = requests.post(shared_server.url + "/generate", timeout=30,
                           json={"input_ids": [5, 6, 7, 8, 9], "sampling_params": {"max_new_tokens": 2}})
    assert by_ids.json()["meta_info"]["prompt_tokens"] == 5


def test_generate_stream_format(shared_server):
    body = {"text": "a b c", "stream": True, "sampling_params": {"max_new_tokens": 5, "ignore_eos": True}}
    with requests.post(shared_server.url + "/generate", json=body, stream=True, timeout=30) as resp:
        assert resp.status_code == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        raw = resp.content.decode()
    events = [e for e in raw.split("\n\n") if e]
    assert all(e.startswith("data: ") for e in events)
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[len("data: "):]) for e in events[:-1]]
    counts = [c["meta_info"]["completion_tokens"] for c in chunks]
    assert counts == sorted(counts) and counts[-1] == 5
    assert chunks[-1]["meta_info"]["finish_reason"]["type"] == "length"
    assert all(c["meta_info"]["finish_reason"] is None for c in chunks[:-1])
    texts = [c["text"] for c in chunks]
    assert all(texts[i + 1].startswith(texts[i]) for i in range(len(texts) - 1))  # cumulative


def test_openai_completions_and_chat(shared_server):
    url = shared_server.url
    plain = requests.post(url + "/v1/completions", timeout=30,
                          json={"model": "glm-5", "prompt": "hello there", "max_tokens": 6, "ignore_eos": True})
    body = plain.json()
    assert body["object"] == "text_completion" and body["synthetic"] is True
    assert body["usage"]["completion_tokens"] == 6 and body["usage"]["prompt_tokens"] == 2
    assert body["choices"][0]["finish_reason"] == "length"
    with requests.post(url + "/v1/completions", stream=True, timeout=30,
                       json={"prompt": "x", "max_tokens": 4, "ignore_eos": True, "stream": True}) as resp:
        events = [e for e in resp.content.decode().split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    chunks = [json.loads(e[6:]) for e in events[:-1]]
    streamed = "".join(c["choices"][0]["text"] for c in chunks)  # deltas add up to 4 tokens
    assert len(streamed.split()) == 4
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    chat = requests.post(url + "/v1/chat/completions", timeout=30,
                         json={"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3,
                               "ignore_eos": True}).json()
    assert chat["choices"][0]["message"]["role"] == "assistant"
    assert chat["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"sampling_params": {"max_new_tokens": 2}}, 400),
        ({"text": "x", "sampling_params": {"max_new_tokens": -1}}, 400),
        ({"text": "x", "sampling_params": "nope"}, 400),
    ],
)
def test_generate_rejects_bad_requests(shared_server, body, status):
    resp = requests.post(shared_server.url + "/generate", json=body, timeout=10)
    assert resp.status_code == status
    assert "error" in resp.json()


def test_health_is_503_while_loading(start, tok_dir):
    server = start("--model-path", str(tok_dir), SGLANG_SIM_LOAD_SECONDS="3")

    def answered():
        try:
            return requests.get(server.url + "/health", timeout=2).status_code
        except requests.ConnectionError:
            return None

    assert wait_for(answered, timeout=20, interval=0.05) == 503, server.log()
    assert "fired up" not in server.log()
    assert requests.get(server.url + "/health_generate", timeout=2).status_code == 503
    assert requests.get(server.url + "/v1/models", timeout=2).status_code == 503
    server.wait_ready()
    assert requests.get(server.url + "/health_generate", timeout=30).status_code == 200


# --- command line errors ---------------------------------------------------------------------


def run_cli(manifest_path, *argv, **env):
    return subprocess.run(
        [PYTHON, "-m", "sglang_sim.launch_server", *argv],
        env=sim_env(manifest_path, **env), capture_output=True, text=True, timeout=60, check=False,
    )


@pytest.mark.parametrize(
    ("argv", "env", "message"),
    [
        (["--model-path", "m", "--no-such-flag"], {}, "error: unrecognized arguments: --no-such-flag"),
        (["--model-path", "m", "--kv-cache-dtype", "fp5"], {}, "error: argument --kv-cache-dtype: invalid choice"),
        (["--model-path", "m", "--port", "abc"], {}, "error: argument --port: invalid int value: 'abc'"),
        (["--model-path", "m", "--port", "65536"], {}, "error: argument --port: 65536 is out of range"),
        (["--port", "8000"], {}, "error: the following arguments are required: --model-path/--model"),
        (["--model-path", "m"], {"SGLANG_SIM_FAULT": "meteor"}, "[sglang-sim] error: SGLANG_SIM_FAULT"),
        (["--model-path", "m"], {"SGLANG_SIM_MANIFEST": "/nonexistent/m.json"},
         "[sglang-sim] error: SGLANG_SIM_MANIFEST=/nonexistent/m.json does not name a file"),
    ],
)
def test_bad_command_line_is_one_error_line(manifest, argv, env, message):
    result = run_cli(manifest, *argv, **env)
    assert result.returncode == 2
    errors = [line for line in stderr_lines(result) if "error" in line]
    assert len(errors) == 1, result.stderr
    assert message in errors[0]
    assert result.stdout.startswith("[sglang-sim] SYNTHETIC")
    assert "Traceback" not in result.stderr


def test_gpu_mode_without_torch_is_one_error_line(manifest):
    try:
        import torch  # noqa: F401
    except ImportError:
        result = run_cli(manifest, "--model-path", "m", SGLANG_SIM_GPU_MEM_MB="64")
        assert result.returncode == 2
        assert stderr_lines(result)[-1].startswith("[sglang-sim] error: GPU mode")
        assert "needs torch" in result.stderr
        return
    pytest.skip("torch is installed here, so the missing-torch error cannot be shown")


# --- lifecycle and faults ---------------------------------------------------------------------


def test_sigterm_drains_and_ends_the_tree(start, tok_dir):
    server = start("--model-path", str(tok_dir), "--tp-size", "2")
    server.wait_ready()
    pids = [p.pid for p in server.tree()]
    os.kill(server.proc.pid, signal.SIGTERM)
    rc = server.wait_exit()
    assert rc == -signal.SIGKILL  # SGLang ends by kill_process_tree(include_parent=True)
    assert wait_for(lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                                    for p in pids), timeout=10)
    log = server.log()
    assert "SIGTERM received. signum=15" in log and "Draining requests and shutting down..." in log
    assert "Gracefully exiting... Remaining number of requests 0." in log


def test_sigterm_while_loading_ends_the_tree(start, tok_dir):
    server = start("--model-path", str(tok_dir), "--tp-size", "2", SGLANG_SIM_LOAD_SECONDS="8")
    assert wait_for(lambda: "Load weight begin" in server.log(), timeout=30), server.log()
    os.kill(server.proc.pid, signal.SIGTERM)
    assert server.wait_exit() == -signal.SIGTERM  # no handler yet in SGLang's launch phase
    assert wait_for(lambda: not server.group_alive(), timeout=10), server.group_alive()


def test_children_survive_being_orphaned(start, tok_dir):
    server = start("--model-path", str(tok_dir))
    server.wait_ready()
    assert titles(server) == ["sglang::detokenizer", "sglang::scheduler"]  # tp 1: no TP suffix
    children = [c for c in server.tree() if " ".join(c.cmdline()).startswith("sglang::")]
    os.kill(server.proc.pid, signal.SIGKILL)
    server.wait_exit()
    time.sleep(0.5)  # give an orphan-triggered exit (PDEATHSIG, pipe EOF) the chance to happen
    assert all(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
    assert len(children) == 2  # lingering, as on the node; the fixture kills the group


def test_fault_crash_on_load(start, tok_dir):
    server = start("--model-path", str(tok_dir), "--tp-size", "2", SGLANG_SIM_FAULT="crash_on_load")
    rc = server.wait_exit()
    assert rc == -signal.SIGKILL
    log = server.log()
    for needle in (
        "Capture piecewise CUDA graph begin.",
        "Scheduler hit an exception: Traceback (most recent call last):",
        "torch._dynamo.exc.Unsupported: Attempted to call function marked as skipped",
        "Dynamo does not know how to trace the builtin `_thread.allocate_lock.`",
        "fullgraph",
        "Received sigquit from a child process. It usually means the child failed.",
        "[sglang-sim] SYNTHETIC fault injected: crash_on_load",
    ):
        assert needle in log, needle
    assert "fired up" not in log
    assert wait_for(lambda: not server.group_alive(), timeout=10), server.group_alive()


def test_fault_crash_after_requests(start, tok_dir):
    server = start("--model-path", str(tok_dir), "--tp-size", "2",
                   SGLANG_SIM_FAULT="crash_after_requests", SGLANG_SIM_FAULT_AFTER="2")
    server.wait_ready()
    body = {"text": "one two", "sampling_params": {"max_new_tokens": 3, "ignore_eos": True}}
    for _ in range(2):
        resp = requests.post(server.url + "/generate", json=body, timeout=30)
        assert resp.status_code == 200 and resp.json()["meta_info"]["completion_tokens"] == 3
    rc = server.wait_exit()
    assert rc == -signal.SIGKILL
    log = server.log()
    assert "TP0] Scheduler hit an exception: Traceback" in log
    assert "CUDA error: an illegal memory access was encountered" in log
    assert "SIGQUIT received. signum=3" in log and "It usually means one child failed." in log
    assert wait_for(lambda: not server.group_alive(), timeout=10), server.group_alive()


def test_fault_hang_never_answers_health(start, tok_dir):
    server = start("--model-path", str(tok_dir), SGLANG_SIM_FAULT="hang")
    assert wait_for(lambda: "Uvicorn running on" in server.log(), timeout=30), server.log()
    for path in ("/health", "/health_generate"):
        with pytest.raises(requests.Timeout):
            requests.get(server.url + path, timeout=1.0)
    assert server.proc.poll() is None
    assert "fired up" not in server.log()
    os.kill(server.proc.pid, signal.SIGTERM)  # a hung server still stops on SIGTERM
    assert server.wait_exit() == -signal.SIGKILL


def test_fault_ignore_sigterm_leaves_a_scheduler_for_sigkill(start, tok_dir):
    server = start("--model-path", str(tok_dir), "--tp-size", "2", SGLANG_SIM_FAULT="ignore_sigterm")
    server.wait_ready()
    os.killpg(server.pgid, signal.SIGTERM)  # what a stop step sends first
    server.wait_exit()

    def survivors():
        out = []
        for proc in server.group_alive():
            try:
                out.append(" ".join(proc.cmdline()).strip())
            except psutil.Error:
                pass
        return out

    left = wait_for(lambda: survivors() == ["sglang::scheduler_TP1"], timeout=10)
    assert left, survivors()
    os.killpg(server.pgid, signal.SIGTERM)  # still ignored
    assert wait_for(lambda: survivors() == ["sglang::scheduler_TP1"], timeout=1)
    os.killpg(server.pgid, signal.SIGKILL)
    assert wait_for(lambda: not server.group_alive(), timeout=10)


@pytest.mark.parametrize("how", ["fault", "real"])
def test_port_in_use(start, tok_dir, how):
    holder = None
    port = free_port()
    if how == "real":
        holder = socket.socket()
        holder.bind(("127.0.0.1", port))
        holder.listen(1)
    try:
        env = {"SGLANG_SIM_FAULT": "port_in_use"} if how == "fault" else {}
        server = start("--model-path", str(tok_dir), port=port, **env)
        assert server.wait_exit() == 1
    finally:
        if holder is not None:
            holder.close()
    log = server.log()
    assert (f"ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', {port}): "
            "address already in use") in log
    assert "fired up" not in log
    assert wait_for(lambda: not server.group_alive(), timeout=10), server.group_alive()


# --- SGLang's real benchmark client ------------------------------------------------------------


@pytest.mark.parametrize("dataset", ["random-ids", "random"])
def test_real_bench_serving_client(shared_server, tok_dir, tmp_path, dataset):
    if not BENCH_CLIENT.is_file():
        pytest.fail(f"{BENCH_CLIENT} (the torch-free bench_serving launcher) is missing")
    out = tmp_path / "bench.jsonl"
    argv = [
        PYTHON, str(BENCH_CLIENT), "--backend", "sglang", "--host", "127.0.0.1",
        "--port", str(shared_server.port), "--dataset-name", dataset,
        "--random-input-len", "32", "--random-output-len", "16", "--random-range-ratio", "1.0",
        "--num-prompts", "20", "--max-concurrency", "4", "--tokenizer", str(tok_dir),
        "--output-file", str(out), "--disable-tqdm", "--seed", "1",
    ]
    if dataset == "random":
        argv += ["--dataset-path", str(tok_dir / "synthetic_sharegpt.json")]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180,
                            cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 1
    row = rows[0]
    assert row["completed"] == 20
    assert row["total_output_tokens"] == 20 * 16  # ignore_eos: every request gets max_new_tokens
    assert row["total_input_tokens"] == 20 * 32
    assert row["total_output_tokens_retokenized"] == 20 * 16
    assert row["server_info"]["synthetic"] is True
    assert row["output_throughput"] > 0 and row["mean_ttft_ms"] > 0


# --- the project's crash catalog reads the simulator's crashes ---------------------------------


@pytest.fixture(scope="module")
def crash_catalog():
    catalog_file = REPO / "data" / "crash_signatures.yml"
    classifier = REPO / "plugins" / "module_utils" / "sglang_crash.py"
    if not (catalog_file.is_file() and classifier.is_file()):
        pytest.skip("data/crash_signatures.yml or plugins/module_utils/sglang_crash.py is not in the tree")
    sys.path.insert(0, str(classifier.parent))
    import sglang_crash

    return sglang_crash, sglang_crash.load_catalog(catalog_file)


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["--tp-size", "2"], {"SGLANG_SIM_FAULT": "crash_on_load"}, "dynamo_fp4_jit"),
        ([], {"SGLANG_SIM_FAULT": "crash_after_requests", "SGLANG_SIM_FAULT_AFTER": "0"},
         "cuda_illegal_memory_access"),
        ([], {"SGLANG_SIM_FAULT": "port_in_use"}, "port_in_use"),
        (["--no-such-flag"], {}, "argparse_unrecognized"),
        (["--kv-cache-dtype", "fp5"], {}, "argparse_invalid_choice"),
    ],
)
def test_fault_logs_match_the_crash_catalog(start, tok_dir, crash_catalog, argv, env, expected):
    module, catalog = crash_catalog
    server = start("--model-path", str(tok_dir), *argv, **env)
    server.wait_exit()
    report = module.classify_text(catalog, server.log())
    assert report is not None and report["crash_class"] == expected, report
