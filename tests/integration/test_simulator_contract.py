"""The simulator held to real recordings: what real SGLang 0.5.17 did on a lent H200.

Each test replays one recording of ``tests/fixtures/real-sglang/probe-0.5.17-h200-tp1*`` (copies
of ``shared/real-sglang/recordings/``, see the README there) and checks that the SYNTHETIC
simulator does the same thing: the same sequence of port and endpoint states while it starts,
the same process tree, the same stop sequence and log lines, the same streamed error, the same
CUDA-graph capture lines, the same start-up failure. Where the recording and the simulator
disagree, the recording wins.

The simulator runs on the flag manifest of SGLang 0.5.23, the only manifest in the checkout
newer than the pin (there is no 0.5.17 manifest); it then speaks the newer family's wording
(``sglang_sim/sglang_rules.py``). Times are compared only where the recording makes a point of
them (the port stays closed while loading; the main process outlives its scheduler by SGLang's
5 s diagnostic sleep, here scaled by SGLANG_SIM_SPEED), with wide margins for a busy machine.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
import requests
from helpers.paths import FIXTURES, PYTHON, REPO
from helpers.processes import session_pids, wait_for
from helpers.sim import SimServer

TP1 = FIXTURES / "real-sglang" / "probe-0.5.17-h200-tp1"
GRAPHS = FIXTURES / "real-sglang" / "probe-0.5.17-h200-tp1-graphs"
LYING = FIXTURES / "real-sglang" / "probe-0.5.17-h200-tp1-lying-point"
NEW_MANIFEST = REPO / "data" / "flag_manifests" / "sglang-0.5.23.json"
BENCH_CLIENT = REPO / "tools" / "sglang_bench_client.py"
PROBE_ENDPOINTS = ("/health", "/health_generate", "/model_info", "/v1/models")  # probe.py's
STOP_SPEED = 5  # SGLang's 5 s diagnostic sleep becomes 1 s


@pytest.fixture
def start_new(sim_start, sim_tokenizer):
    """Start simulators of the test model on SGLang 0.5.23's manifest: ``start_new(*argv, **env)``
    (sim_start's: every one is SIGKILLed, process group, at teardown)."""

    def start(*argv: str, **env: str) -> SimServer:
        return sim_start("--model-path", str(sim_tokenizer), *argv, manifest=NEW_MANIFEST, **env)

    return start


# --------------------------------------------------------------------------- helpers


def port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        try:
            sock.connect(("127.0.0.1", port))
            return True
        except OSError:
            return False


def status(url: str, timeout: float = 3.0):
    try:
        return requests.get(url, timeout=timeout).status_code
    except requests.RequestException as exc:
        return type(exc).__name__


def poll_timeline(server: SimServer, limit: float = 60.0) -> tuple[list[dict], str]:
    """probe.py's timeline(): alive, port and the four endpoints, recorded at each change; ends when
    both health endpoints answer 200 or the process exits. Also returns the log as it was when the
    port first opened."""
    events, state, log_at_open = [], {}, ""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        # One time stamp per poll: every answer of a poll belongs to the same moment, however long
        # the probes took on a busy machine (at_first_open groups by it).
        now = round(time.monotonic() - t0, 3)
        rc = server.proc.poll()
        cur = {"alive": rc is None, "port": port_open(server.port)}
        if cur["port"]:
            if not log_at_open:
                log_at_open = server.log()
            for path in PROBE_ENDPOINTS:
                cur[path] = status(server.url + path)
        for key, value in cur.items():
            if state.get(key) != value:
                events.append({"t": now, "what": key, "value": value})
        state = cur
        if rc is not None or (cur.get("/health") == 200 and cur.get("/health_generate") == 200):
            break
        time.sleep(0.05)
    return events, log_at_open


def per_key(events: list[dict]) -> dict[str, list]:
    """Each probed thing's successive values: {"port": [False, True], "/health": [503, 200], ...}."""
    out: dict[str, list] = {}
    for event in events:
        out.setdefault(event["what"], []).append(event["value"])
    return out


def at_first_open(events: list[dict]) -> dict:
    """The endpoint answers of the poll in which the port first answered."""
    opened = next(e["t"] for e in events if e["what"] == "port" and e["value"] is True)
    return {e["what"]: e["value"] for e in events if e["t"] == opened and e["what"].startswith("/")}


LOG_LINE = re.compile(r"^\[\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}[^\]]*\] (.*)$")


def messages(text: str) -> list[str]:
    """The messages of SGLang's timestamped log lines, without uvicorn's access lines."""
    out = []
    for line in text.splitlines():
        match = LOG_LINE.match(line)
        if match and not match.group(1).startswith("INFO:     "):
            out.append(match.group(1))
    return out


def norm(message: str) -> str:
    """Numbers that differ between machines: pids and decimal figures."""
    message = re.sub(r"\b(pid|parent_pid)=\d+", r"\1=<n>", message)
    return re.sub(r"\d+\.\d+", "<f>", message)


def tail_from(lines: list[str], start: str) -> list[str]:
    first = next(i for i, line in enumerate(lines) if line.startswith(start))
    return [norm(line) for line in lines[first:]]


def role(cmdline: str) -> str:
    if cmdline.startswith("sglang::"):
        return cmdline.split()[0]
    if "multiprocessing.resource_tracker" in cmdline:
        return "resource_tracker"
    if "launch_server" in cmdline:
        return "main"
    return "other:" + cmdline[:40]


def recorded_tree(ps_file: Path) -> dict[int, str]:
    """pid -> role of the launch_server session in a recorded ``ps -eo pid,ppid,sid,...,args``."""
    rows = [line.split(None, 8) for line in ps_file.read_text().splitlines()[1:] if line.strip()]
    main = next(int(r[0]) for r in rows if "sglang.launch_server" in r[8])
    return {int(r[0]): role(r[8]) for r in rows if int(r[2]) == main}


def sim_tree(server: SimServer) -> dict[int, str]:
    tree = {}
    for pid in session_pids(server.pgid):
        with contextlib.suppress(psutil.Error):
            tree[pid] = role(" ".join(psutil.Process(pid).cmdline()).strip())
    return tree


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def watch_stop(server: SimServer, tree: dict[int, str], limit: float = 30.0) -> dict:
    """probe.py's wait_gone(): when each process is gone, when the port is free."""
    t0 = time.monotonic()
    events, port_free = {}, None
    while time.monotonic() - t0 < limit:
        server.proc.poll()  # reap the main process once it is dead
        now = round(time.monotonic() - t0, 3)
        for pid in tree:
            if pid not in events and gone(pid):
                events[pid] = now
        if port_free is None and not port_open(server.port):
            port_free = now
        if len(events) == len(tree) and port_free is not None:
            break
        time.sleep(0.02)
    return {"events": events, "port_free_s": port_free}


def early_and_late(roles_at: dict[str, float], port_free: float) -> tuple[set, set]:
    """Split the roles into those gone at once and those gone with the port (after the sleep)."""
    early = {r for r, t in roles_at.items() if t < port_free / 2}
    return early, set(roles_at) - early


def recorded_stop(name: str, ps_file: str, log_file: str) -> dict:
    """A recorded stop: its process tree (roles), which roles went at once and which with the
    port, the port-free time and the exit status."""
    stop = json.loads((TP1 / f"stop_{name}.json").read_text())
    tree = recorded_tree(TP1 / ps_file)
    # the kill_child run's ps was taken before its scheduler existed; the log names its pid
    for pid in re.findall(r"Subprocess scheduler_0 \(pid=(\d+)\)", (TP1 / log_file).read_text()):
        tree.setdefault(int(pid), "sglang::scheduler")
    roles_at = {tree[e["pid_gone"]]: e["t"] for e in stop["events"]}
    early, late = early_and_late(roles_at, stop["port_free_s"])
    return {"roles": Counter(tree.values()), "early": early, "late": late, **stop}


# --------------------------------------------------------------------------- 1. loading


@pytest.mark.parametrize(
    ("recording", "argv"),
    [("timeline_main.json", []), ("timeline_term_idle.json", ["--skip-server-warmup"])],
)
def test_port_is_closed_while_loading_then_only_health_waits_for_the_warmup(start_new, recording, argv):
    """timeline_main.json: connection refused for ~47 s, then /health and /health_generate 503 during
    the warm-up request while /model_info and /v1/models answer 200, then 200. With
    --skip-server-warmup (timeline_term_idle.json) there is no 503 phase."""
    recorded = json.loads((TP1 / recording).read_text())
    server = start_new(*argv, SGLANG_SIM_LOAD_SECONDS="2.5")
    events, log_at_open = poll_timeline(server)
    assert per_key(events) == per_key(recorded), (events, server.log()[-3000:])
    assert at_first_open(events) == at_first_open(recorded), events
    # the port opened only after the (simulated) load: weights, KV cache, graphs
    assert "max_total_num_tokens=" in log_at_open, log_at_open[-2000:]


def test_read_only_endpoints_answer_during_the_warmup(start_new):
    """While /health is 503 for the warm-up request, the info endpoints already answer 200."""
    server = start_new(SGLANG_SIM_LOAD_SECONDS="4")
    assert wait_for(lambda: port_open(server.port), timeout=40, interval=0.02), server.log()
    answers = {path: status(server.url + path) for path in
               ("/health", "/server_info", "/get_server_info", "/model_info", "/get_model_info", "/v1/models")}
    assert answers == {"/health": 503, "/server_info": 200, "/get_server_info": 200, "/model_info": 200,
                       "/get_model_info": 200, "/v1/models": 200}
    assert "fired up" not in server.log()


# --------------------------------------------------------------------------- 2. process tree


def test_process_tree_at_tp1_is_the_recorded_one(start_new):
    """ps_main_ready.txt: the untitled main process, sglang::scheduler (no _TP0 at TP1),
    sglang::detokenizer and an untitled multiprocessing resource tracker, all in one session."""
    server = start_new(SGLANG_SIM_LOAD_SECONDS="0.4")
    server.wait_ready()
    recorded = Counter(recorded_tree(TP1 / "ps_main_ready.txt").values())
    assert recorded == Counter({"main": 1, "resource_tracker": 1, "sglang::scheduler": 1, "sglang::detokenizer": 1})
    tree = sim_tree(server)
    assert Counter(tree.values()) == recorded, tree
    tracker = next(pid for pid, r in tree.items() if r == "resource_tracker")
    assert psutil.Process(tracker).ppid() == server.proc.pid


# --------------------------------------------------------------------------- 3. stop sequence


def _stop_and_compare(server: SimServer, name: str, ps_file: str, log_file: str, send) -> None:
    recorded = recorded_stop(name, ps_file, log_file)
    tree = sim_tree(server)
    assert Counter(tree.values()) == recorded["roles"], tree
    send(tree)
    result = watch_stop(server, tree)
    assert result["port_free_s"] is not None and len(result["events"]) == len(tree), (result, server.log()[-3000:])
    roles_at = {tree[pid]: t for pid, t in result["events"].items()}
    early, late = early_and_late(roles_at, result["port_free_s"])
    assert (early, late) == (recorded["early"], recorded["late"]), (roles_at, result, server.log()[-3000:])
    sleep = 5.0 / STOP_SPEED
    # the main process and the port outlive the scheduler by SGLang's diagnostic sleep
    # (recorded: 5.7-5.9 s for 5 s; here 5 s / SGLANG_SIM_SPEED), plus at most one watchdog tick
    assert 0.8 * sleep <= result["port_free_s"] <= sleep + 1.0 + 5.0, result
    assert max(roles_at[r] for r in late) <= result["port_free_s"] + 1.5, result
    assert server.proc.wait(timeout=10) == recorded["rc"] == -signal.SIGKILL
    recorded_log = messages((TP1 / log_file).read_text())
    first = "Subprocess " if name == "sigkill_scheduler" else "SIGTERM received"
    assert tail_from(messages(server.log()), first) == tail_from(recorded_log, first), server.log()[-3000:]


@pytest.mark.parametrize(
    ("name", "ps_file", "log_file", "argv", "traffic"),
    [
        ("sigterm_after_traffic", "ps_main_ready.txt", "server_main.log", [], True),
        ("sigterm_idle", "ps_term_idle_loading.txt", "server_term_idle.log", ["--skip-server-warmup"], False),
    ],
)
def test_sigterm_to_the_session_follows_the_recording(start_new, name, ps_file, log_file, argv, traffic):
    """SIGTERM to the whole session: 'SIGTERM received ... Draining requests', the scheduler dies at
    once (so its GPU memory is free at once), 'Subprocess scheduler_0 ... crashed with exit code -15.
    Triggering SIGQUIT', 'Sleeping 5 seconds before crash diagnostics', and only then do the port,
    the main process and the resource tracker go (rc -9)."""
    server = start_new(*argv, SGLANG_SIM_LOAD_SECONDS="0.4", SGLANG_SIM_SPEED=str(STOP_SPEED))
    server.wait_ready()
    if traffic:
        for _ in range(2):
            body = {"text": "hello world", "sampling_params": {"max_new_tokens": 4, "ignore_eos": True}}
            assert requests.post(server.url + "/generate", json=body, timeout=30).status_code == 200
    _stop_and_compare(server, name, ps_file, log_file, lambda _tree: os.killpg(server.pgid, signal.SIGTERM))


def test_sigkill_of_the_scheduler_follows_the_recording(start_new):
    """server_kill_child.log / stop_sigkill_scheduler.json: the scheduler is SIGKILLed while serving;
    the main process notices ('crashed with exit code -9. Triggering SIGQUIT'), sleeps 5 s and kills
    the tree; the detokenizer goes with the main process."""
    server = start_new("--skip-server-warmup", SGLANG_SIM_LOAD_SECONDS="0.4", SGLANG_SIM_SPEED=str(STOP_SPEED))
    server.wait_ready()
    body = {"text": "hi", "sampling_params": {"max_new_tokens": 4}}
    assert requests.post(server.url + "/generate", json=body, timeout=30).status_code == 200

    def kill_scheduler(tree):
        os.kill(next(pid for pid, r in tree.items() if r == "sglang::scheduler"), signal.SIGKILL)

    _stop_and_compare(server, "sigkill_scheduler", "ps_kill_child_loading.txt", "server_kill_child.log",
                      kill_scheduler)


# --------------------------------------------------------------------------- 4. streamed errors


def _curl_capture(path: Path) -> tuple[str, int]:
    """A probe file written by ``curl -w '\\nHTTP_CODE=%{http_code}\\n'``: (body, status)."""
    body, code = path.read_text().rsplit("\nHTTP_CODE=", 1)
    return body, int(code)


def test_too_long_prompt_streamed_is_200_then_an_error_chunk(start_new):
    """generate_stream_too_long.txt: HTTP 200, ``data: {"error": {... "code": 400 ...}}``, then
    ``data: [DONE]``; generate_stream_too_long_nonstream.txt: 400. Both are logged as
    ``[http_server] Error: ...`` (server_main.log)."""
    server = start_new("--context-length", "4096", SGLANG_SIM_LOAD_SECONDS="0.4")
    server.wait_ready()
    payload = {"input_ids": [5] * 5000, "sampling_params": {"max_new_tokens": 8}}
    streamed = requests.post(server.url + "/generate", json={**payload, "stream": True}, timeout=30)
    body, code = _curl_capture(TP1 / "generate_stream_too_long.txt")
    assert (streamed.text, streamed.status_code) == (body, code) == (streamed.text, 200)
    plain = requests.post(server.url + "/generate", json=payload, timeout=30)
    body, code = _curl_capture(TP1 / "generate_stream_too_long_nonstream.txt")
    assert (plain.text, plain.status_code) == (body, code) == (plain.text, 400)
    recorded = [m for m in messages((TP1 / "server_main.log").read_text()) if m.startswith("[http_server] Error")]
    assert len(recorded) == 2
    assert wait_for(lambda: [m for m in messages(server.log()) if m.startswith("[http_server] Error")] == recorded,
                    timeout=5), server.log()[-2000:]


def test_bench_serving_counts_the_too_long_streamed_requests_as_completed(start_new, sim_tokenizer, tmp_path):
    """The lying point (bench_in5000.jsonl): 8 prompts of 5000 tokens against a 4096 context all fail,
    and SGLang's own bench_serving reports 8 completed with their output tokens, 0 retokenized
    tokens and a 0 ms TTFT, because the errors come inside HTTP 200 streams."""
    if not BENCH_CLIENT.is_file():
        pytest.fail(f"{BENCH_CLIENT} (the torch-free bench_serving launcher) is missing")
    recorded = json.loads((LYING / "bench_in5000.jsonl").read_text().splitlines()[-1])
    server = start_new("--context-length", "4096", "--skip-server-warmup", SGLANG_SIM_LOAD_SECONDS="0.4")
    server.wait_ready()
    out = tmp_path / "bench.jsonl"
    argv = [PYTHON, str(BENCH_CLIENT), "--backend", "sglang", "--host", "127.0.0.1", "--port", str(server.port),
            "--dataset-name", "random-ids", "--tokenizer", str(sim_tokenizer), "--num-prompts", "8",
            "--max-concurrency", "4", "--random-input-len", "5000", "--random-output-len", "16",
            "--random-range-ratio", "1.0", "--output-file", str(out), "--disable-tqdm", "--seed", "1"]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    result = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    row = json.loads(out.read_text().splitlines()[-1])
    for key in ("completed", "total_output_tokens", "total_output_tokens_retokenized", "mean_ttft_ms"):
        assert row[key] == recorded[key], (key, row[key], recorded[key])
    errors = [m for m in messages(server.log()) if m.startswith("[http_server] Error: The input (")]
    recorded_errors = [m for m in messages((LYING / "server.log").read_text())
                       if m.startswith("[http_server] Error: The input (")]
    assert len(errors) >= 8 and len(recorded_errors) >= 8
    shape = re.compile(r"^\[http_server\] Error: The input \((\d+) tokens\) is longer than the model's "
                       r"context length \(4096 tokens\)\.$")
    assert all(shape.match(m) and int(shape.match(m).group(1)) > 4096 for m in errors + recorded_errors), errors


# --------------------------------------------------------------------------- 5. log lines


def capture_lines(text: str) -> list[str]:
    return [norm(m) for m in messages(text) if re.match(r"(Capture|Disable) .*(CUDA|cuda) graph", m)]


def test_cuda_graph_capture_lines_use_0_5_17_wording(start_new):
    """server_cudagraph.log (--cuda-graph-max-bs-decode 16): 'Capture target prefill CUDA graph begin.
    backend=breakable, num_tokens=[...]' / '... end. elapsed=..., mem usage=... GB' and the decode
    pair, nothing about piecewise graphs."""
    server = start_new("--cuda-graph-max-bs-decode", "16", SGLANG_SIM_LOAD_SECONDS="0.4")
    server.wait_ready()
    recorded = capture_lines((GRAPHS / "server_cudagraph.log").read_text())
    assert len(recorded) == 4
    assert capture_lines(server.log()) == recorded, server.log()[-3000:]
    assert "piecewise" not in server.log().lower()


def test_disable_cuda_graph_logs_only_the_prefill_line(start_new):
    """server_main.log (--disable-cuda-graph): SGLang's deprecation warning and 'Disable prefill CUDA
    graph because cuda_graph_config resolved prefill.backend='disabled' ...'; no decode line, and no
    'Disable cuda graph because --disable-cuda-graph is set' (real SGLang never prints it)."""
    server = start_new("--disable-cuda-graph", SGLANG_SIM_LOAD_SECONDS="0.4")
    server.wait_ready()
    recorded_text = (TP1 / "server_main.log").read_text()
    recorded = capture_lines(recorded_text)
    assert recorded == [norm("Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend="
                             "'disabled' (e.g. via --cuda-graph-backend-prefill=disabled or auto-disable rules).")]
    log = server.log()
    assert capture_lines(log) == recorded, log[-3000:]
    warning = "'--disable-cuda-graph' is deprecated and will be removed in a future release."
    assert warning in recorded_text and warning in log
    assert "Disable cuda graph because" not in log and "Disable cuda graph because" not in recorded_text


def test_torch_compile_keeps_the_breakable_prefill_capture(start_new):
    """server_torch_compile.log (--enable-torch-compile --cuda-graph-max-bs-decode 8): 0.5.17 does
    not auto-disable the prefill graph under torch.compile; it captures backend=breakable, then the
    decode graphs for bs=[1, 2, 4, 8] (that run never finished its decode capture)."""
    server = start_new("--enable-torch-compile", "--cuda-graph-max-bs-decode", "8", SGLANG_SIM_LOAD_SECONDS="0.4")
    server.wait_ready()
    recorded = capture_lines((GRAPHS / "server_torch_compile.log").read_text())
    assert len(recorded) == 3 and "backend=breakable" in recorded[0] and "bs=[1, 2, 4, 8]" in recorded[2]
    assert capture_lines(server.log())[:3] == recorded, server.log()[-3000:]


# --------------------------------------------------------------------------- 6. tiny memory fraction


def test_tiny_mem_fraction_dies_during_start_up(start_new):
    """server_tiny_mem.log / timeline_tiny_mem.json (--mem-fraction-static 0.00001): the port never
    opens; right after 'Load weight end' the scheduler raises 'Loaded weights leave no GPU memory for
    the KV cache under --mem-fraction-static=1e-05 ...', the main process logs 'Received sigquit from
    a child process' and kills the tree."""
    recorded_events = json.loads((TP1 / "timeline_tiny_mem.json").read_text())
    server = start_new("--mem-fraction-static", "0.00001", "--skip-server-warmup", SGLANG_SIM_LOAD_SECONDS="0.4")
    events, _ = poll_timeline(server)
    assert per_key(events) == per_key(recorded_events) == {"alive": [True, False], "port": [False]}, events
    server.wait_exit()
    recorded_text = (TP1 / "server_tiny_mem.log").read_text()
    log = server.log()
    assert tail_from(messages(log), "Load weight end")[1:] == tail_from(messages(recorded_text), "Load weight end")[1:]
    recorded_error = next(norm(line) for line in recorded_text.splitlines() if line.startswith("ValueError: "))
    assert norm(next(line for line in log.splitlines() if line.startswith("ValueError: "))) == recorded_error
    assert "KV Cache is allocated" not in log
    assert wait_for(lambda: not server.group_alive(), timeout=10), server.group_alive()


# --------------------------------------------------------------------------- 7. /metrics (--enable-metrics)

METRICS = FIXTURES / "real-sglang" / "probe-0.5.17-h200-tp1-metrics"
# what the simulator serves (simulator/README.md); each must be in the recording as well
SERVED = {
    "sglang:num_requests_total", "sglang:prompt_tokens_total", "sglang:generation_tokens_total",
    "sglang:cached_tokens_total", "sglang:num_running_reqs", "sglang:num_queue_reqs",
    "sglang:cache_hit_rate", "sglang:token_usage", "sglang:gen_throughput", "sglang:num_used_tokens",
    "sglang:max_total_num_tokens", "sglang:queue_time_seconds", "sglang:time_to_first_token_seconds",
    "sglang:e2e_request_latency_seconds", "sglang:inter_token_latency_seconds",
    "sglang:prompt_tokens_histogram", "sglang:uncached_prompt_tokens_histogram",
    "sglang:generation_tokens_histogram", "sglang:http_requests_total", "sglang:http_responses_total",
    "sglang:http_requests_active",
}
# labels whose values do not depend on the model or the traffic
FIXED_LABELS = ("engine_type", "tp_rank", "pp_rank", "moe_ep_rank", "cache_source", "is_streaming")


def parse_metrics(text: str) -> dict[str, dict]:
    from sglang_sim.metrics import parse_exposition

    return parse_exposition(text)


def scrape(server: SimServer) -> dict[str, dict]:
    resp = requests.get(server.url + "/metrics", timeout=10)
    assert resp.status_code == 200, resp.text
    return parse_metrics(resp.text)


def shape(family: dict) -> dict[str, object]:
    """Per sample name: the label keys, the bucket bounds and the values of FIXED_LABELS."""
    out: dict[str, object] = {}
    for name, labels, _ in family["samples"]:
        entry = out.setdefault(name, {"keys": set(), "le": [], "fixed": set()})
        entry["keys"] |= set(labels)
        if "le" in labels and labels["le"] not in entry["le"]:
            entry["le"].append(labels["le"])
        entry["fixed"] |= {(k, labels[k]) for k in FIXED_LABELS if k in labels}
    return out


def value(families: dict, sample: str, **labels: str) -> float:
    """Sum of the samples named ``sample`` whose labels include ``labels`` (0 when none)."""
    family = families.get(sample) or families.get(re.sub(r"_(sum|count|bucket)$", "", sample)) or {"samples": []}
    return sum(v for n, lab, v in family["samples"] if n == sample and all(lab.get(k) == x for k, x in labels.items()))


def delta(before: dict, after: dict, sample: str, **labels: str) -> float:
    return value(after, sample, **labels) - value(before, sample, **labels)


def moved_outside_http(before: dict, after: dict) -> list[tuple]:
    """The series that changed, outside the HTTP middleware's metrics and the process CPU counter
    (NaN equal to NaN: the recording's fwd_occupancy)."""

    def series(families: dict) -> dict[tuple, float]:
        return {(n, tuple(sorted(lab.items()))): v
                for fam, data in families.items() if not fam.startswith(("sglang:http_", "sglang:process_cpu"))
                for n, lab, v in data["samples"]}

    old, new = series(before), series(after)
    return [k for k in old.keys() | new.keys()
            if not (k in old and k in new and (old[k] == new[k] or (old[k] != old[k] and new[k] != new[k])))]


def run_bench(server: SimServer, tokenizer: Path, tmp_path: Path, name: str, *argv: str) -> dict:
    """SGLang's bench_serving (tools/sglang_bench_client.py), random-ids, seed 1: its result row."""
    if not BENCH_CLIENT.is_file():
        pytest.fail(f"{BENCH_CLIENT} (the torch-free bench_serving launcher) is missing")
    out = tmp_path / f"{name}.jsonl"
    cmd = [PYTHON, str(BENCH_CLIENT), "--backend", "sglang", "--host", "127.0.0.1", "--port", str(server.port),
           "--dataset-name", "random-ids", "--tokenizer", str(tokenizer), "--random-range-ratio", "1.0",
           "--output-file", str(out), "--disable-tqdm", "--seed", "1", *argv]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return json.loads(out.read_text().splitlines()[-1])


def test_metrics_without_enable_metrics_is_fastapis_404(start_new):
    """ep_metrics_without_flag.txt: real SGLang started without --enable-metrics answers /metrics
    with FastAPI's 404 ``{"detail":"Not Found"}``."""
    recorded_code, recorded_body = (METRICS / "ep_metrics_without_flag.txt").read_text().split("\n", 1)
    server = start_new("--skip-server-warmup", SGLANG_SIM_LOAD_SECONDS="0.4")
    server.wait_ready()
    resp = requests.get(server.url + "/metrics", timeout=5)
    assert (resp.status_code, resp.text) == (int(recorded_code), recorded_body) == (404, '{"detail":"Not Found"}')
    assert resp.headers["Content-Type"].startswith("application/json")


def test_metrics_names_types_labels_and_buckets_are_the_recorded_ones(start_new):
    """honest.after.txt: every metric the simulator serves has the recorded HELP, TYPE, label keys,
    fixed label values (engine_type="unified", tp_rank="0", cache_source="device", ...) and bucket
    bounds, and the simulator serves no metric that real SGLang did not."""
    recorded = parse_metrics((METRICS / "honest.after.txt").read_text())
    server = start_new("--enable-metrics", SGLANG_SIM_LOAD_SECONDS="0.4")
    server.wait_ready()
    # the server's own warm-up (http_server._execute_server_warmup): GET /model_info, then a /generate
    # of 8 tokens, not streamed, that counts like any request (recorded: 69 /generate, 69 requests)
    warm = scrape(server)
    assert value(warm, "sglang:num_requests_total") == 1
    assert value(warm, "sglang:num_requests_total", is_streaming="false") == 1
    assert value(warm, "sglang:generation_tokens_total", is_streaming="false") == 8
    assert value(warm, "sglang:http_requests_total", endpoint="/model_info") == 1
    assert value(warm, "sglang:http_responses_total", endpoint="/generate", status_code="200") == 1
    # every /generate of the recording (the warm-up's too) counted as a request
    assert value(recorded, "sglang:http_requests_total", endpoint="/generate") == \
        value(recorded, "sglang:num_requests_total") == 102
    assert requests.get(server.url + "/health_generate", timeout=30).status_code == 200
    for stream in (True, False):  # the warm-up's prompt again: cached tokens too
        body = {"text": "The capital city of France is", "stream": stream, "sampling_params": {"max_new_tokens": 4}}
        assert requests.post(server.url + "/generate", json=body, timeout=30).status_code == 200
    resp = requests.get(server.url + "/metrics", timeout=10)
    assert resp.headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert resp.text.startswith("# sglang-sim: SYNTHETIC")
    sim = parse_metrics(resp.text)
    assert set(sim) == SERVED, set(sim) ^ SERVED
    assert not set(sim) - set(recorded), set(sim) - set(recorded)
    for name in sorted(sim):
        assert (sim[name]["type"], sim[name]["help"]) == (recorded[name]["type"], recorded[name]["help"]), name
        sim_shape, rec_shape = shape(sim[name]), shape(recorded[name])
        assert set(sim_shape) == set(rec_shape), (name, set(sim_shape), set(rec_shape))
        for sample, got in sim_shape.items():
            want = rec_shape[sample]
            assert got["keys"] == want["keys"], (sample, got["keys"], want["keys"])
            assert got["le"] == want["le"], (sample, got["le"], want["le"])
            assert got["fixed"] <= want["fixed"], (sample, got["fixed"] - want["fixed"])
    streams = {lab["is_streaming"] for _, lab, _ in sim["sglang:num_requests_total"]["samples"]}
    assert streams == {"true", "false"}


def test_metrics_count_the_honest_and_the_lying_point_as_recorded(start_new, sim_tokenizer, tmp_path):
    """README.recording.md: the honest point (32 × 128 in / 32 out at c=8, bench_serving's warm-up
    included) moved num_requests_total{is_streaming="true"} by 33 and generation_tokens_total by
    1056 = 1024 + 32; prompt_tokens_total less cached_tokens_total moved by one token per request
    (the same seed had sent the same prompts before); the lying point (8 prompts longer than the
    context) moved no request, token or latency series, only /generate's HTTP counters (+9)."""
    rec = {p: {s: parse_metrics((METRICS / f"{p}.{s}.txt").read_text()) for s in ("before", "after")}
           for p in ("honest", "lying")}
    server = start_new("--enable-metrics", "--context-length", "4096", SGLANG_SIM_LOAD_SECONDS="0.4")
    server.wait_ready()
    honest = ("--num-prompts", "32", "--max-concurrency", "8", "--random-input-len", "128", "--random-output-len", "32")
    run_bench(server, sim_tokenizer, tmp_path, "first", *honest)  # the experiment's own benchmark
    before = scrape(server)
    row = run_bench(server, sim_tokenizer, tmp_path, "honest", *honest)
    after = scrape(server)
    r_before, r_after = rec["honest"]["before"], rec["honest"]["after"]
    true, false = {"is_streaming": "true"}, {"is_streaming": "false"}
    for sample, labels in (("sglang:num_requests_total", true), ("sglang:generation_tokens_total", true),
                           ("sglang:num_requests_total", false), ("sglang:generation_tokens_total", false),
                           ("sglang:time_to_first_token_seconds_count", true),
                           ("sglang:e2e_request_latency_seconds_count", true),
                           ("sglang:inter_token_latency_seconds_count", {}),
                           ("sglang:queue_time_seconds_count", {})):
        assert delta(before, after, sample, **labels) == delta(r_before, r_after, sample, **labels), (sample, labels)
    assert delta(before, after, "sglang:num_requests_total") == row["completed"] + 1 == 33
    assert delta(before, after, "sglang:generation_tokens_total") == row["total_output_tokens"] + 32 == 1056
    # the simulator's tokenizer gives back the client's ids: its prompt count is the client's + the warm-up's
    prompt = delta(before, after, "sglang:prompt_tokens_total")
    assert prompt == row["total_input_tokens"] + row["total_input_tokens"] / row["completed"]
    recorded_prompt = delta(r_before, r_after, "sglang:prompt_tokens_total")
    for b, a, n in ((before, after, prompt), (r_before, r_after, recorded_prompt)):
        cached = delta(b, a, "sglang:cached_tokens_total", cache_source="device")
        assert n - cached == 33, (n, cached)  # one computed token per request: a hit rate near 1
    assert delta(before, after, "sglang:http_requests_total", endpoint="/generate") == \
        delta(r_before, r_after, "sglang:http_requests_total", endpoint="/generate") == 33

    before = scrape(server)
    lying = run_bench(server, sim_tokenizer, tmp_path, "lying", "--num-prompts", "8", "--max-concurrency", "4",
                      "--random-input-len", "5000", "--random-output-len", "32")
    after = scrape(server)
    assert lying["completed"] == 8  # bench_serving's word
    r_before, r_after = rec["lying"]["before"], rec["lying"]["after"]
    assert moved_outside_http(r_before, r_after) == []
    assert moved_outside_http(before, after) == []
    for sample, labels in (("sglang:http_requests_total", {"endpoint": "/generate"}),
                           ("sglang:http_responses_total", {"endpoint": "/generate", "status_code": "200"})):
        assert delta(before, after, sample, **labels) == delta(r_before, r_after, sample, **labels) == 9
