"""The SYNTHETIC SGLang-protocol simulator as real processes.

Each test starts ``python -m sglang_sim.launch_server`` in its own session on
a free loopback port, checks the process tree (psutil), the HTTP API in
SGLang's shapes, the fault modes, the command-line errors, and runs SGLang's
real bench_serving client against it. Every server started here is stopped
by SIGKILL to its process group in a fixture finalizer (sim_start, tests/integration/conftest.py).
No timing is asserted.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import time

import psutil
import pytest
import requests
import sglang_crash
from helpers.paths import PYTHON, REPO
from helpers.processes import free_port, wait_for
from helpers.sim import SimServer, sim_env

BENCH_CLIENT = REPO / "tools" / "sglang_bench_client.py"


@pytest.fixture(scope="module")
def shared_server(sim_manifest, sim_tokenizer, tmp_path_factory):
    """One ready TP2 server for the read-only API tests (deprecated flags included)."""
    port = free_port()
    server = SimServer(
        ["--model-path", str(sim_tokenizer), "--served-model-name", "glm-5", "--tp-size", "2",
         "--enable-piecewise-cuda-graph", "--stream-output", "--host", "127.0.0.1", "--port", str(port)],
        sim_env(sim_manifest),
        tmp_path_factory.mktemp("shared") / "sim.log",
        port,
    )
    yield from serving(server)


def serving(server: SimServer):
    """A module fixture's body: ``server`` ready for the module's tests, stopped after them."""
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def health_status(server: SimServer) -> int | None:
    """The status code of /health; None while the port refuses connections."""
    try:
        return requests.get(server.url + "/health", timeout=2).status_code
    except requests.ConnectionError:
        return None


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


def test_dp_size_two_runs_a_data_parallel_controller(sim_start, sim_tokenizer):
    server = sim_start("--model-path", str(sim_tokenizer), "--dp-size", "2", "--tp-size", "2")
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
    # no --enable-metrics: no /metrics route, FastAPI's 404 (recorded on 0.5.17)
    metrics = requests.get(url + "/metrics", timeout=5)
    assert (metrics.status_code, metrics.json()) == (404, {"detail": "Not Found"})


def test_the_listening_socket_keeps_its_backlog(shared_server):
    """A c=1024 warm-up connects 1024 clients at once: the simulator listens with its own backlog
    (sglang_sim.server.LISTEN_BACKLOG), not the 128 that aiohttp's SockSite would set again; with 128 a
    busy event loop lost 19 of them to resets on the 2-core CI machine. `ss` shows a listening socket's
    backlog as its Send-Q (the kernel caps it at net.core.somaxconn)."""
    from sglang_sim.server import LISTEN_BACKLOG

    somaxconn = int(open("/proc/sys/net/core/somaxconn").read())
    listed = subprocess.run(["ss", "-Hltn", f"sport = :{shared_server.port}"], capture_output=True, text=True,
                            check=True).stdout.splitlines()
    assert [int(line.split()[2]) for line in listed] == [min(LISTEN_BACKLOG, somaxconn)]


def test_generate_non_stream(shared_server):
    body = {"text": "the batch is ready", "sampling_params": {"max_new_tokens": 7, "ignore_eos": True}}
    assert requests.post(shared_server.url + "/flush_cache", timeout=5).status_code == 200
    out = requests.post(shared_server.url + "/generate", json=body, timeout=30).json()
    meta = out["meta_info"]
    assert meta["prompt_tokens"] == 4 and meta["completion_tokens"] == 7
    assert meta["finish_reason"] == {"type": "length", "length": 7}
    assert meta["cached_tokens"] == 0 and meta["cached_tokens_details"] is None and meta["synthetic"] is True
    assert meta["e2e_latency"] > 0 and meta["id"]
    assert len(out["output_ids"]) == 7 and len(out["text"].split()) == 7
    # the same prompt again: the radix cache has it; SGLang computes the last token all the same
    again = requests.post(shared_server.url + "/generate", json=body, timeout=30).json()["meta_info"]
    assert (again["cached_tokens"], again["cached_tokens_details"]) == (3, {"device": 3, "host": 0})
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


def test_port_is_refused_while_loading_then_health_is_503_during_the_warmup(sim_start, sim_tokenizer):
    """As real SGLang (tests/integration/test_simulator_contract.py replays the recording): no listening port
    until the load is done, then only the health endpoints wait for the warm-up request."""
    server = sim_start("--model-path", str(sim_tokenizer), SGLANG_SIM_LOAD_SECONDS="4")
    assert wait_for(lambda: "Load weight begin" in server.log(), timeout=30), server.log()
    with pytest.raises(requests.ConnectionError):
        requests.get(server.url + "/health", timeout=2)
    assert wait_for(lambda: health_status(server), timeout=30, interval=0.05) == 503, server.log()
    assert "fired up" not in server.log() and "max_total_num_tokens=" in server.log()
    assert requests.get(server.url + "/health_generate", timeout=2).status_code == 503
    assert requests.get(server.url + "/v1/models", timeout=2).status_code == 200
    assert requests.get(server.url + "/model_info", timeout=2).status_code == 200
    server.wait_ready()
    assert requests.get(server.url + "/health_generate", timeout=30).status_code == 200


def test_skip_server_warmup_has_no_503_phase(sim_start, sim_tokenizer):
    server = sim_start("--model-path", str(sim_tokenizer), "--skip-server-warmup", SGLANG_SIM_LOAD_SECONDS="2")
    assert wait_for(lambda: health_status(server), timeout=30, interval=0.02) == 200, server.log()
    log = server.log()
    # recorded order with --skip-server-warmup: ready before uvicorn's last two lines
    assert log.index("Waiting for application startup.") < log.index("fired up") < log.index("Uvicorn running on")


def test_too_long_prompt_streamed_is_200_with_the_pins_error_chunk(sim_start, sim_tokenizer):
    """0.5.10.post1's http_server stream_results: HTTP 200, ``data: {"error": {"message": ...}}``
    (no type/code: those came later, see the contract test), ``data: [DONE]``; 400 unstreamed."""
    server = sim_start("--model-path", str(sim_tokenizer), "--context-length", "64")
    server.wait_ready()
    payload = {"input_ids": list(range(100)), "sampling_params": {"max_new_tokens": 4}}
    streamed = requests.post(server.url + "/generate", json={**payload, "stream": True}, timeout=30)
    message = "The input (100 tokens) is longer than the model's context length (64 tokens)."
    assert streamed.status_code == 200
    assert streamed.text == 'data: {"error":{"message":"' + message + '"}}\n\ndata: [DONE]\n\n'
    plain = requests.post(server.url + "/generate", json=payload, timeout=30)
    assert plain.status_code == 400 and plain.json() == {"error": {"message": message}}
    assert wait_for(lambda: server.log().count(f"[http_server] Error: {message}") == 2, timeout=5), server.log()


def test_disable_cuda_graph_prints_no_line_of_its_own(sim_start, sim_tokenizer):
    """0.5.10.post1's init_cuda_graphs returns silently under --disable-cuda-graph; the piecewise
    CUDA graph is still captured (no auto-disable rule applies)."""
    server = sim_start("--model-path", str(sim_tokenizer), "--disable-cuda-graph", SGLANG_SIM_LOAD_SECONDS="0.2")
    server.wait_ready()
    log = server.log()
    assert "Disable cuda graph" not in log and "Capture cuda graph" not in log
    assert "Capture piecewise CUDA graph begin." in log and "Capture piecewise CUDA graph end." in log
    assert "dtype=torch.bfloat16" not in log.split("Load weight end.")[1].splitlines()[0]


@pytest.fixture
def glm5_model(sim_tokenizer, tmp_path):
    """The simulated model folder with GLM-5's architecture (GlmMoeDsaForCausalLM, DSA index_topk)."""
    import shutil

    folder = tmp_path / "glm-5"
    shutil.copytree(sim_tokenizer, folder)
    (folder / "config.json").write_text(json.dumps(
        {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "index_topk": 2048,
         "max_position_embeddings": 202752}))
    return folder


@pytest.mark.parametrize(
    "argv",
    [["--tp-size", "2"], ["--tp-size", "2", "--dp-size", "2", "--enable-dp-attention"],
     ["--tp-size", "2", "--enable-torch-compile"]],
    ids=["glm-5", "dp-attention", "torch-compile"],
)
def test_pin_auto_disables_the_piecewise_cuda_graph(sim_start, sim_tokenizer, glm5_model, argv):
    """0.5.10.post1 ServerArgs._handle_piecewise_cuda_graph: GLM-5's architecture, DP attention and
    torch.compile turn the piecewise CUDA graph off by setting --disable-piecewise-cuda-graph, and
    model_runner.init_piecewise_cuda_graphs then logs that flag's line."""
    model = glm5_model if argv == ["--tp-size", "2"] else sim_tokenizer
    server = sim_start("--model-path", str(model), *argv, SGLANG_SIM_LOAD_SECONDS="0.2")
    server.wait_ready()
    log = server.log()
    assert "Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set" in log
    assert "Capture piecewise CUDA graph" not in log
    assert "Capture cuda graph begin." in log  # the decode graphs are still captured
    info = requests.get(server.url + "/server_info", timeout=5).json()
    assert info["disable_piecewise_cuda_graph"] is True


def test_tiny_mem_fraction_fails_with_the_pins_message(sim_start, sim_tokenizer, crash_catalog):
    """0.5.10.post1 MemoryPoolConfig.__post_init__: 'Not enough memory. Please try to increase
    --mem-fraction-static.', raised in the scheduler; the tree dies before the port opens."""
    server = sim_start("--model-path", str(sim_tokenizer), "--mem-fraction-static", "0.00001")
    assert server.wait_exit() == -signal.SIGKILL
    log = server.log()
    assert ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. "
            "Current value: mem_fraction_static=1e-05") in log
    assert "Scheduler hit an exception: Traceback" in log and "KV Cache is allocated" not in log
    assert "Received sigquit from a child process. It usually means the child failed." in log
    assert "Uvicorn running" not in log
    module, catalog = crash_catalog
    report = module.classify_text(catalog, log)
    # the catalog calls this cuda_oom_load; a dedicated class (kv_cache_no_memory) may replace it
    assert report is not None and report["crash_class"] in ("cuda_oom_load", "kv_cache_no_memory"), report
    assert wait_for(lambda: not server.group_alive(), timeout=10), server.group_alive()


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
def test_bad_command_line_is_one_error_line(sim_manifest, argv, env, message):
    result = run_cli(sim_manifest, *argv, **env)
    assert result.returncode == 2
    errors = [line for line in stderr_lines(result) if "error" in line]
    assert len(errors) == 1, result.stderr
    assert message in errors[0]
    assert result.stdout.startswith("[sglang-sim] SYNTHETIC")
    assert "Traceback" not in result.stderr


def test_gpu_mode_without_torch_is_one_error_line(sim_manifest):
    try:
        import torch  # noqa: F401
    except ImportError:
        result = run_cli(sim_manifest, "--model-path", "m", SGLANG_SIM_GPU_MEM_MB="64")
        assert result.returncode == 2
        assert stderr_lines(result)[-1].startswith("[sglang-sim] error: GPU mode")
        assert "needs torch" in result.stderr
        return
    pytest.skip("torch is installed here, so the missing-torch error cannot be shown")


# --- lifecycle and faults ---------------------------------------------------------------------


def test_sigterm_drains_and_ends_the_tree(sim_start, sim_tokenizer):
    server = sim_start("--model-path", str(sim_tokenizer), "--tp-size", "2")
    server.wait_ready()
    pids = [p.pid for p in server.tree()]
    os.kill(server.proc.pid, signal.SIGTERM)
    rc = server.wait_exit()
    assert rc == -signal.SIGKILL  # SGLang ends by kill_process_tree(include_parent=True)
    assert wait_for(lambda: not any(psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"
                                    for p in pids), timeout=10)
    log = server.log()
    # SGLang installs its handler with loop.add_signal_handler: no signum, no frame
    assert "SIGTERM received. signum=None frame=None. Draining requests and shutting down..." in log
    assert "Gracefully exiting... Remaining number of requests 0." in log
    assert "Sleeping 5 seconds" not in log  # only the main process was signalled: the children lived


def test_sigterm_to_the_group_sleeps_before_diagnostics_unless_switched_off(sim_start, sim_tokenizer):
    """SIGTERM to the whole group kills the schedulers at once; the main process takes the SIGQUIT
    path with SGLang's diagnostic sleep (5 s / SGLANG_SIM_SPEED), which SGLang's own variables
    SGLANG_PYSPY_DUMP_BEFORE_CRASH=0 and SGLANG_CUDA_COREDUMP_BEFORE_CRASH=0 switch off."""
    for env, sleeps in (({}, True),
                        ({"SGLANG_PYSPY_DUMP_BEFORE_CRASH": "0", "SGLANG_CUDA_COREDUMP_BEFORE_CRASH": "false"}, False)):
        server = sim_start("--model-path", str(sim_tokenizer), "--tp-size", "2", **env)
        server.wait_ready()
        os.killpg(server.pgid, signal.SIGTERM)
        assert server.wait_exit() == -signal.SIGKILL
        log = server.log()
        assert "Subprocess scheduler_0 (pid=" in log and "crashed with exit code -15. Triggering SIGQUIT" in log
        assert "SIGQUIT received. signum=None, frame=None. It usually means one child failed." in log
        assert ("Sleeping 5 seconds before crash diagnostics to let GPU activity settle." in log) is sleeps
        assert ("No live scheduler processes found; skipping py-spy and CUDA coredump." in log) is sleeps
        assert "kill_process_tree called" not in log  # the pin (0.5.10.post1) does not log it
        assert wait_for(lambda s=server: not s.group_alive(), timeout=10), server.group_alive()


def test_sigterm_while_loading_ends_the_tree(sim_start, sim_tokenizer):
    server = sim_start("--model-path", str(sim_tokenizer), "--tp-size", "2", SGLANG_SIM_LOAD_SECONDS="8")
    assert wait_for(lambda: "Load weight begin" in server.log(), timeout=30), server.log()
    os.kill(server.proc.pid, signal.SIGTERM)
    assert server.wait_exit() == -signal.SIGTERM  # no handler yet in SGLang's launch phase
    assert wait_for(lambda: not server.group_alive(), timeout=10), server.group_alive()


def test_children_survive_being_orphaned(sim_start, sim_tokenizer):
    server = sim_start("--model-path", str(sim_tokenizer))
    server.wait_ready()
    assert titles(server) == ["sglang::detokenizer", "sglang::scheduler"]  # tp 1: no TP suffix
    children = [c for c in server.tree() if " ".join(c.cmdline()).startswith("sglang::")]
    os.kill(server.proc.pid, signal.SIGKILL)
    server.wait_exit()
    time.sleep(0.5)  # give an orphan-triggered exit (PDEATHSIG, pipe EOF) the chance to happen
    assert all(c.is_running() and c.status() != psutil.STATUS_ZOMBIE for c in children)
    assert len(children) == 2  # lingering, as on the node; the fixture kills the group


def test_fault_crash_on_load(sim_start, sim_tokenizer):
    server = sim_start("--model-path", str(sim_tokenizer), "--tp-size", "2", SGLANG_SIM_FAULT="crash_on_load")
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


def test_fault_crash_after_requests(sim_start, sim_tokenizer):
    server = sim_start("--model-path", str(sim_tokenizer), "--tp-size", "2",
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
    assert "SIGQUIT received. signum=None, frame=None. It usually means one child failed." in log
    assert "Sleeping 5 seconds before crash diagnostics" in log
    assert wait_for(lambda: not server.group_alive(), timeout=10), server.group_alive()


def test_fault_hang_never_answers_health(sim_start, sim_tokenizer):
    server = sim_start("--model-path", str(sim_tokenizer), SGLANG_SIM_FAULT="hang")
    assert wait_for(lambda: "Uvicorn running on" in server.log(), timeout=30), server.log()
    for path in ("/health", "/health_generate"):
        with pytest.raises(requests.Timeout):
            requests.get(server.url + path, timeout=1.0)
    assert server.proc.poll() is None
    assert "fired up" not in server.log()
    os.kill(server.proc.pid, signal.SIGTERM)  # a hung server still stops on SIGTERM
    assert server.wait_exit() == -signal.SIGKILL


def test_fault_ignore_sigterm_leaves_a_scheduler_for_sigkill(sim_start, sim_tokenizer):
    server = sim_start("--model-path", str(sim_tokenizer), "--tp-size", "2", SGLANG_SIM_FAULT="ignore_sigterm")
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
def test_port_in_use(sim_start, sim_tokenizer, how):
    holder = None
    port = free_port()
    if how == "real":
        holder = socket.socket()
        holder.bind(("127.0.0.1", port))
        holder.listen(1)
    try:
        env = {"SGLANG_SIM_FAULT": "port_in_use"} if how == "fault" else {}
        server = sim_start("--model-path", str(sim_tokenizer), port=port, **env)
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
def test_real_bench_serving_client(shared_server, sim_tokenizer, tmp_path, dataset):
    if not BENCH_CLIENT.is_file():
        pytest.fail(f"{BENCH_CLIENT} (the torch-free bench_serving launcher) is missing")
    out = tmp_path / "bench.jsonl"
    argv = [
        PYTHON, str(BENCH_CLIENT), "--backend", "sglang", "--host", "127.0.0.1",
        "--port", str(shared_server.port), "--dataset-name", dataset,
        "--random-input-len", "32", "--random-output-len", "16", "--random-range-ratio", "1.0",
        "--num-prompts", "20", "--max-concurrency", "4", "--tokenizer", str(sim_tokenizer),
        "--output-file", str(out), "--disable-tqdm", "--seed", "1",
    ]
    if dataset == "random":
        argv += ["--dataset-path", str(sim_tokenizer / "synthetic_sharegpt.json")]
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
    return sglang_crash, sglang_crash.load_catalog(REPO / "data" / "crash_signatures.yml")


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
def test_fault_logs_match_the_crash_catalog(sim_start, sim_tokenizer, crash_catalog, argv, env, expected):
    module, catalog = crash_catalog
    server = sim_start("--model-path", str(sim_tokenizer), *argv, **env)
    server.wait_exit()
    report = module.classify_text(catalog, server.log())
    assert report is not None and report["crash_class"] == expected, report


# --- /metrics (--enable-metrics) and the radix cache, on the pin's collectors ------------------------


@pytest.fixture(scope="module")
def metrics_server(sim_manifest, sim_tokenizer, tmp_path_factory):
    """One ready server with --enable-metrics and a 4096-token context (0.5.10.post1's manifest)."""
    port = free_port()
    server = SimServer(
        ["--model-path", str(sim_tokenizer), "--served-model-name", "glm-5", "--enable-metrics",
         "--context-length", "4096", "--host", "127.0.0.1", "--port", str(port)],
        sim_env(sim_manifest, SGLANG_SIM_TOKENIZER=str(sim_tokenizer)),
        tmp_path_factory.mktemp("metrics") / "sim.log",
        port,
    )
    yield from serving(server)


def scrape(server: SimServer) -> dict[tuple, float]:
    """/metrics as {(sample name, sorted labels): value}."""
    resp = requests.get(server.url + "/metrics", timeout=10)
    assert resp.status_code == 200 and resp.text.startswith("# sglang-sim: SYNTHETIC"), resp.text[:200]
    out = {}
    for line in resp.text.splitlines():
        if line and not line.startswith("#"):
            series, number = line.rsplit(" ", 1)
            name, _, labels = series.partition("{")
            out[(name, tuple(sorted(re.findall(r'(\w+)="([^"]*)"', labels))))] = float(number)
    return out


def moved(before: dict, after: dict, name: str, **labels: str) -> float:
    """How much the series named ``name`` whose labels include ``labels`` moved, together."""

    def total(data):
        return sum(v for (n, lab), v in data.items() if n == name and set(labels.items()) <= set(lab))

    return total(after) - total(before)


def stream_generate(url: str, body: dict) -> list[dict]:
    with requests.post(url + "/generate", json={**body, "stream": True}, stream=True, timeout=30) as resp:
        assert resp.status_code == 200
        events = [e for e in resp.content.decode().split("\n\n") if e]
    assert events[-1] == "data: [DONE]"
    return [json.loads(e[len("data: "):]) for e in events[:-1]]


def test_metrics_count_what_finished_and_nothing_of_a_streamed_error(metrics_server):
    """Requests, prompt and generation tokens move by exactly what was sent; the request whose error
    came inside an HTTP 200 stream moves only the HTTP counters; /health_generate only the
    scheduler's queue time. The pin labels request metrics by model_name alone."""
    url = metrics_server.url
    before = scrape(metrics_server)
    body = {"text": "the batch is ready", "sampling_params": {"max_new_tokens": 7, "ignore_eos": True}}
    assert requests.post(url + "/generate", json=body, timeout=30).json()["meta_info"]["prompt_tokens"] == 4
    chunks = stream_generate(url, {"input_ids": [5] * 10, "sampling_params": {"max_new_tokens": 5, "ignore_eos": True}})
    assert chunks[-1]["meta_info"]["completion_tokens"] == 5
    error = stream_generate(url, {"input_ids": [5] * 5000, "sampling_params": {"max_new_tokens": 5}})
    assert "error" in error[0]
    assert requests.get(url + "/health_generate", timeout=30).status_code == 200
    after = scrape(metrics_server)
    assert moved(before, after, "sglang:num_requests_total", model_name="glm-5") == 2
    assert moved(before, after, "sglang:prompt_tokens_total") == 14
    assert moved(before, after, "sglang:generation_tokens_total") == 12
    assert moved(before, after, "sglang:time_to_first_token_seconds_count") == 2
    assert moved(before, after, "sglang:inter_token_latency_seconds_count") == 4  # streamed: 5 tokens, 4 gaps
    assert moved(before, after, "sglang:e2e_request_latency_seconds_count") == 2
    assert moved(before, after, "sglang:queue_time_seconds_count") == 3  # the health check too
    assert moved(before, after, "sglang:http_requests_total", endpoint="/generate") == 3
    assert moved(before, after, "sglang:http_responses_total", endpoint="/generate", status_code="200") == 3
    assert moved(before, after, "sglang:http_requests_total", endpoint="/health_generate") == 1
    request_labels = {lab for (n, lab) in after if n == "sglang:num_requests_total"}
    assert request_labels == {(("model_name", "glm-5"),)}
    scheduler = {"model_name": "glm-5", "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
    assert after[("sglang:num_running_reqs", tuple(sorted(scheduler.items())))] == 0


def hit_rate_of_a_point(server: SimServer, tokenizer, tmp_path, name: str) -> tuple[dict, float]:
    """One bench_serving point (random-ids, seed 1, 20 × 32 in / 8 out at c=4) and the server's
    hit rate over it: Δ cached_tokens_total / Δ prompt_tokens_total."""
    before = scrape(server)
    out = tmp_path / f"{name}.jsonl"
    argv = [PYTHON, str(BENCH_CLIENT), "--backend", "sglang", "--host", "127.0.0.1", "--port", str(server.port),
            "--dataset-name", "random-ids", "--random-input-len", "32", "--random-output-len", "8",
            "--random-range-ratio", "1.0", "--num-prompts", "20", "--max-concurrency", "4",
            "--tokenizer", str(tokenizer), "--output-file", str(out), "--disable-tqdm", "--seed", "1"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    row = json.loads(out.read_text().splitlines()[-1])
    after = scrape(server)
    # the client's numbers and the server's counters agree (bench_serving's warm-up request included)
    assert moved(before, after, "sglang:num_requests_total") == row["completed"] + 1 == 21
    assert moved(before, after, "sglang:generation_tokens_total") == row["total_output_tokens"] + 8
    prompt = moved(before, after, "sglang:prompt_tokens_total")
    assert prompt == row["total_input_tokens"] + 32
    return row, moved(before, after, "sglang:cached_tokens_total") / prompt


def test_a_repeat_of_the_seeded_prompts_is_served_from_the_cache_until_a_flush(metrics_server, sim_tokenizer,
                                                                              tmp_path):
    """Same seed, same prompts: the repeat is nearly all cache hits (one computed token per
    request); after /flush_cache only bench_serving's warm-up hits (it sends the first prompt)."""
    if not BENCH_CLIENT.is_file():
        pytest.fail(f"{BENCH_CLIENT} (the torch-free bench_serving launcher) is missing")
    assert requests.post(metrics_server.url + "/flush_cache", timeout=5).status_code == 200
    _, first = hit_rate_of_a_point(metrics_server, sim_tokenizer, tmp_path, "first")
    _, repeat = hit_rate_of_a_point(metrics_server, sim_tokenizer, tmp_path, "repeat")
    assert requests.post(metrics_server.url + "/flush_cache", timeout=5).status_code == 200
    _, flushed = hit_rate_of_a_point(metrics_server, sim_tokenizer, tmp_path, "flushed")
    assert first == flushed == 31 / (21 * 32)  # the warm-up's prompt, less its last token
    assert repeat == 21 * 31 / (21 * 32)


def test_flush_cache_refused_while_a_request_runs_keeps_the_cache(metrics_server):
    url = metrics_server.url
    body = {"input_ids": list(range(40, 80)), "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}
    assert requests.post(url + "/flush_cache", timeout=5).status_code == 200
    assert requests.post(url + "/generate", json=body, timeout=30).json()["meta_info"]["cached_tokens"] == 0
    # about 8 s of decoding at SGLANG_SIM_SPEED=50; leaving the stream aborts it
    long = {"input_ids": [9, 9, 9], "stream": True, "sampling_params": {"max_new_tokens": 4000, "ignore_eos": True}}
    with requests.post(url + "/generate", json=long, stream=True, timeout=60) as resp:
        lines = resp.iter_lines()  # kept: a discarded line generator closes the connection (urllib3)
        next(lines)  # the long request runs
        refused = requests.post(url + "/flush_cache", timeout=5)
    assert refused.status_code == 400 and refused.text == "Flush cache failed.\n"
    assert requests.post(url + "/generate", json=body, timeout=30).json()["meta_info"]["cached_tokens"] == 39
