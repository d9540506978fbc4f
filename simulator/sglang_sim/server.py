# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator's main process: process tree, HTTP server, fault modes.

Started by ``sglang_sim.launch_server`` after the command line is parsed. It
starts SGLang's process tree (``sglang::scheduler[_TP<i>]``,
``sglang::detokenizer``, ``sglang::data_parallel_controller``), waits for the
schedulers to "load", only then binds --host/--port (real SGLang refuses
connections while it loads), holds /health at 503 during the warm-up request,
serves SGLang's HTTP API with tokens from the SYNTHETIC engine, and handles
SIGTERM / SIGQUIT the way SGLang's launch and running phases do, down to the
5 s sleep before crash diagnostics (scaled by SGLANG_SIM_SPEED). Behaviour
that differs between SGLang releases comes from sglang_rules. The helpers at
the top are pure and unit-tested.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from . import SIM_NAME, SIM_VERSION, logs, procs, sglang_rules
from .config import ConfigError, SimConfig
from .engine import Engine, GenRequest
from .http_api import DRAINING, HANG, LOADING, READY, ServerState, build_app
from .manifest import server_args_repr
from .metrics import SglangMetrics
from .radix_cache import RadixCache, token_key
from .throughput import build_model
from .tokenizer import TextCodec
from .topology import build_topology

logger = logging.getLogger("sglang_sim")

DEFAULT_CONTEXT_LEN = 131072
DEFAULT_SHARDS = 8
KV_BYTES_PER_TOKEN_PER_GPU = 36_000  # invented: sizes the synthetic KV cache
DRAIN_POLL_SECONDS = 5.0  # SGLang's sigterm_watchdog polls every 5 s
WATCHDOG_SECONDS = 1.0  # SGLang's SubprocessWatchdog interval
# The warm-up request (unless --skip-server-warmup) holds /health at 503 for this share of
# SGLANG_SIM_LOAD_SECONDS, after the load (recorded on 0.5.17: ~9 s after ~47 s of loading).
WARMUP_SHARE = 0.2


def fail(message: str, code: int = 2) -> NoReturn:  # noqa: F821 - typing only
    """One line on stderr, non-zero exit."""
    sys.stderr.write(f"{message}\n")
    sys.stderr.flush()
    raise SystemExit(code)


# --- pure helpers (unit-tested) ---------------------------------------------------


def resolve_tokenizer_dir(cfg: SimConfig, args: dict) -> str | None:
    """SGLANG_SIM_TOKENIZER, else --tokenizer-path / --model-path when it is a
    local folder with tokenizer.json, else None (heuristic counting)."""
    if cfg.tokenizer:
        if not (Path(cfg.tokenizer) / "tokenizer.json").is_file():
            raise ConfigError(
                f"SGLANG_SIM_TOKENIZER={cfg.tokenizer} has no tokenizer.json; "
                "write one with python -m sglang_sim.make_tokenizer DIR"
            )
        return cfg.tokenizer
    for key in ("tokenizer_path", "model_path"):
        value = args.get(key)
        if value and (Path(str(value)) / "tokenizer.json").is_file():
            return str(value)
    return None


def read_model_config(args: dict) -> dict:
    """config.json of --model-path when it is a local folder, else {}."""
    path = Path(str(args.get("model_path") or "")) / "config.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
    except (OSError, ValueError):
        return {}


def count_shards(args: dict) -> int:
    folder = Path(str(args.get("model_path") or ""))
    try:
        shards = len(list(folder.glob("*.safetensors"))) if folder.is_dir() else 0
    except OSError:
        shards = 0
    return shards or DEFAULT_SHARDS


def kv_cache_tokens(args: dict) -> int:
    """Synthetic max_total_num_tokens from --mem-fraction-static and --tp-size."""
    fraction = float(args.get("mem_fraction_static") or procs.DEFAULT_MEM_FRACTION)
    kv_gb = max(procs.SYNTH_GPU_TOTAL_GB * fraction - procs.SYNTH_INIT_GB - procs.synthetic_weights_gb(args), 1.0)
    return int(kv_gb * 1e9 / KV_BYTES_PER_TOKEN_PER_GPU)


def kv_cache_min_fraction(args: dict) -> float:
    """The --mem-fraction-static at or below which the simulated start-up fails like SGLang's:
    synthetic weights / memory before the weights (SGLang's ``1 - available/pre``)."""
    pre = procs.SYNTH_GPU_TOTAL_GB - procs.SYNTH_INIT_GB
    return procs.synthetic_weights_gb(args) / pre


def graph_plan(args: dict, model_config: dict, new_family: bool) -> dict:
    """What the schedulers capture (sglang_rules), for the manifest's SGLang family."""
    if new_family:
        return sglang_rules.new_graph_plan(args)
    return sglang_rules.pin_graph_plan(args, model_config)


def capture_batch_sizes(args: dict) -> list[int]:
    limit = int(args.get("cuda_graph_max_bs") or 256)
    sizes = [1, 2, 4, 8, 12, 16, 24, 32] + list(range(40, limit + 1, 8))
    return [s for s in sizes if s <= limit]


def check_gpu_mode(cfg: SimConfig, find_spec=importlib.util.find_spec) -> None:
    """GPU mode needs torch; say so before any process starts."""
    if cfg.gpu.enabled and find_spec("torch") is None:
        raise ConfigError(
            "GPU mode (SGLANG_SIM_GPU_MEM_MB / SGLANG_SIM_NCCL_ALLREDUCE) needs torch with "
            f"CUDA, but torch is not installed for {sys.executable}"
        )


def bind_error_text(host: str, port: int, strerror: str = "address already in use",
                    errno_: int = 98) -> str:
    """What asyncio/uvicorn log when the HTTP port cannot be bound."""
    return f"[Errno {errno_}] error while attempting to bind on address ({host!r}, {port}): {strerror}"


# The listening socket's accept queue. uvicorn's default (real SGLang's HTTP server) is 2048; the
# simulator keeps 4096, which the local inventory's c=1024 warm-up round and points need when the event
# loop is busy. aiohttp's SockSite listens again with its own backlog (128 unless told), which once
# made a c=1024 warm-up lose 19 connections to resets on the loaded 2-core CI machine.
LISTEN_BACKLOG = 4096


def bind_socket(host: str, port: int) -> socket.socket:
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    family, _, _, _, address = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


# --- process tree -------------------------------------------------------------------


def kill_process_tree(skip: set[int], include_parent: bool, log: bool = False) -> None:
    """SGLang's kill_process_tree: SIGKILL every descendant, then maybe itself. ``log``: its first
    line, which SGLang logs since 0.5.11 (0.5.17 recorded, 0.5.23 utils/common.py; not 0.5.10.post1)."""
    if log:
        pid = os.getpid()
        logger.info(f"kill_process_tree called: parent_pid={pid}, include_parent={include_parent}, pid={pid}")
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        children = []
    for child in children:
        if child.pid in skip:
            continue
        try:
            child.kill()
        except psutil.Error:
            pass
    if include_parent:
        sys.stderr.flush()
        sys.stdout.flush()
        os.kill(os.getpid(), signal.SIGKILL)


def live_schedulers() -> list[psutil.Process]:
    """SGLang's collect_scheduler_processes: descendants titled sglang::scheduler*."""
    found = []
    try:
        children = psutil.Process().children(recursive=True)
    except psutil.Error:
        return found
    for child in children:
        try:
            if " ".join(child.cmdline()).startswith("sglang::scheduler"):
                found.append(child)
        except (psutil.Error, OSError):
            continue
    return found


class Server:
    def __init__(self, args: dict, cfg: SimConfig, manifest: dict):
        self.args = args
        self.cfg = cfg
        self.manifest = manifest
        self.new_family = sglang_rules.is_new_family(manifest.get("sglang_version"))
        self.topology = build_topology(args)
        self.model = build_model(args)
        self.codec = TextCodec(resolve_tokenizer_dir(cfg, args))
        model_config = read_model_config(args)
        self.graphs = graph_plan(args, model_config, self.new_family)
        if not self.new_family and not self.graphs["piecewise"] and "disable_piecewise_cuda_graph" in args:
            args["disable_piecewise_cuda_graph"] = True  # ServerArgs._handle_piecewise_cuda_graph sets it
        self.quitting = False
        self.context_len = int(
            args.get("context_length") or model_config.get("max_position_embeddings")
            or DEFAULT_CONTEXT_LEN
        )
        self.max_total_num_tokens = kv_cache_tokens(args)
        self.metrics = (SglangMetrics(args, self.new_family, self.max_total_num_tokens)
                        if args.get("enable_metrics") else None)
        self.procs: list[tuple[str, multiprocessing.process.BaseProcess]] = []
        self.conns: list[Any] = []
        self.stubborn_pid: int | None = None
        self.crashed = False
        self.phase = "launch"
        self.engine = Engine(
            self.model,
            self.codec,
            cfg.speed,
            self.max_total_num_tokens,
            cuda_graph=not args.get("disable_cuda_graph"),
            cache=RadixCache(self.max_total_num_tokens, enabled=not args.get("disable_radix_cache")),
            metrics=self.metrics,
            stream_interval=int(args.get("stream_interval") or 1),
        )
        self.state = ServerState(
            args,
            self.engine,
            {
                "version": manifest.get("sglang_version"),
                "new_family": self.new_family,
                "context_len": self.context_len,
                "max_total_num_tokens": self.max_total_num_tokens,
                "max_req_input_len": self.context_len - 1,
                "model_type": model_config.get("model_type"),
                "architectures": model_config.get("architectures"),
                "simulator": {
                    "name": SIM_NAME,
                    "version": SIM_VERSION,
                    "synthetic": True,
                    "note": "SYNTHETIC SGLang-protocol simulator; numbers are invented",
                    **cfg.describe(),
                    "tokenizer": self.codec.tokenizer_dir,
                    "schedulers": [s.title for s in self.topology.schedulers],
                    "throughput_model": self.model.describe(),
                },
            },
            on_request_done=self._request_done,
            metrics=self.metrics,
        )

    # --- children ---------------------------------------------------------------

    def _child_ctx(self) -> dict:
        model_config = read_model_config(self.args)
        return {
            "args": {k: v for k, v in self.args.items() if _picklable(v)},
            "load_seconds": self.cfg.load_seconds,
            "faults": sorted(self.cfg.faults),
            "gpu": {
                "enabled": self.cfg.gpu.enabled,
                "mem_mb": self.cfg.gpu.mem_mb,
                "nccl_allreduce": self.cfg.gpu.nccl_allreduce,
            },
            "main_pid": os.getpid(),
            "world_size": self.topology.world_size,
            "nccl_port": int(self.args.get("nccl_port") or _free_port()),
            "shards": count_shards(self.args),
            "architecture": (model_config.get("architectures") or ["SglangSimSyntheticForCausalLM"])[0],
            "max_total_num_tokens": self.max_total_num_tokens,
            "max_prefill_tokens": self.model.max_prefill_tokens,
            "max_running_requests": self.model.max_running_requests,
            "context_len": self.context_len,
            "capture_bs": capture_batch_sizes(self.args),
            "new_family": self.new_family,
            "graphs": self.graphs,
        }

    def start_children(self) -> None:
        mp = multiprocessing.get_context("spawn")
        ctx = self._child_ctx()
        specs = self.topology.schedulers
        stubborn = specs[-1].index if self.cfg.has("ignore_sigterm") else None
        pairs = []
        for spec in specs:
            mine, theirs = mp.Pipe(duplex=True)
            self.conns.append(mine)
            pairs.append(
                (
                    {
                        "index": spec.index,
                        "tp_rank": spec.tp_rank,
                        "pp_rank": spec.pp_rank,
                        "dp_rank": spec.dp_rank,
                        "gpu_id": spec.gpu_id,
                        "prefix": spec.prefix,
                        "title": spec.title,
                        "ignore_sigterm": spec.index == stubborn,
                    },
                    theirs,
                )
            )
        if self.topology.uses_dp_controller:
            groups: dict[Any, list] = {}
            for spec_dict, conn in pairs:
                key = spec_dict["dp_rank"] if not self.args.get("enable_dp_attention") else 0
                groups.setdefault(key, []).append((spec_dict, conn))
            proc = mp.Process(target=procs.run_dp_controller, args=(ctx, list(groups.values())),
                              name="data_parallel_controller")
            proc.start()
            self.procs.append(("data_parallel_controller", proc))
        else:
            for index, (spec_dict, conn) in enumerate(pairs):
                proc = mp.Process(target=procs.run_scheduler, args=(spec_dict, ctx, conn),
                                  name=spec_dict["title"])
                proc.start()
                self.procs.append((f"scheduler_{index}", proc))
                if spec_dict["ignore_sigterm"]:
                    self.stubborn_pid = proc.pid
        for _, conn in pairs:
            conn.close()
        detok = mp.Process(target=procs.run_detokenizer, args=(ctx,), name="detokenizer")
        detok.start()
        self.procs.append(("detokenizer", detok))

    async def wait_ready(self) -> None:
        pending = list(range(len(self.conns)))
        while pending:
            for index in list(pending):
                conn = self.conns[index]
                try:
                    if conn.poll():
                        message = conn.recv()
                        if message.get("status") != "ready":
                            raise RuntimeError(
                                "Initialization failed. Please see the error messages above."
                            )
                        if self.stubborn_pid is None and index == len(self.conns) - 1 \
                                and self.cfg.has("ignore_sigterm"):
                            self.stubborn_pid = message.get("pid")
                        pending.remove(index)
                except EOFError:
                    raise self._died_error(index) from None
            for name, proc in self.procs:
                if not proc.is_alive():
                    raise RuntimeError(
                        f"Rank {name} scheduler died during initialization "
                        f"(exit code: {proc.exitcode}). If exit code is -9 (SIGKILL), a common "
                        "cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check."
                    )
            await asyncio.sleep(0.05)

    def _died_error(self, index: int) -> RuntimeError:
        return RuntimeError(
            f"Rank {index} scheduler died during initialization (exit code: None). If exit code "
            "is -9 (SIGKILL), a common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` "
            "to check."
        )

    def skip_pids(self) -> set[int]:
        return {self.stubborn_pid} if self.stubborn_pid else set()

    # --- signals ----------------------------------------------------------------

    def on_sigquit(self, signum, frame) -> None:
        if self.quitting:
            return
        self.quitting = True
        if self.phase == "launch":
            logger.error("Received sigquit from a child process. It usually means the child failed.")
            kill_process_tree(self.skip_pids(), include_parent=True, log=self.new_family)
            return
        # running_phase_sigquit_handler, installed with loop.add_signal_handler: no signum, no frame
        logger.error("SIGQUIT received. signum=None, frame=None. It usually means one child failed.")
        self.crash_diagnostics()
        kill_process_tree(self.skip_pids(), include_parent=True, log=self.new_family)

    def crash_diagnostics(self) -> None:
        """SGLang's dump_requests_before_crash (0.5.17 recorded, 0.5.23 tokenizer_manager.py): with
        SGLANG_PYSPY_DUMP_BEFORE_CRASH or SGLANG_CUDA_COREDUMP_BEFORE_CRASH on (the default), it
        sleeps 5 s, blocking the event loop (the port stays bound, nothing is answered), then looks
        for live schedulers. Here the sleep is 5 s / SGLANG_SIM_SPEED; the py-spy dump and CUDA
        coredump of schedulers still alive are not simulated."""
        sleep = self.cfg.diagnostics_sleep_seconds
        if sleep <= 0:
            return
        logger.info("Sleeping 5 seconds before crash diagnostics to let GPU activity settle.")
        time.sleep(sleep)
        if not live_schedulers():
            logger.error("No live scheduler processes found; skipping py-spy and CUDA coredump.")

    def on_sigterm(self, signum, frame) -> None:
        if self.phase == "launch":
            # SGLang installs no SIGTERM handler before it serves: die by SIGTERM.
            kill_process_tree(self.skip_pids(), include_parent=False)
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        if self.state.status == DRAINING or self.quitting:
            return
        # sigterm_handler, installed with loop.add_signal_handler: no signum, no frame
        logger.warning("SIGTERM received. signum=None frame=None. Draining requests and shutting down...")
        previous = self.state.status
        self.state.status = DRAINING
        self.loop.call_soon_threadsafe(self._start_drain, previous)

    def _start_drain(self, previous: str) -> None:
        self.loop.create_task(self._drain(previous))

    async def _drain(self, previous: str) -> None:
        poll = max(DRAIN_POLL_SECONDS / self.cfg.speed, 0.05)
        await asyncio.sleep(poll)
        while True:
            if self.check_children():  # a SIGTERM to the whole group killed the schedulers too
                return
            rids = [r.rid for r in self.state.in_flight if not r.finished]
            logger.info(
                f"Gracefully exiting... Remaining number of requests {len(rids)}. "
                f"Remaining requests remaining_rids={rids}."
            )
            if not rids or previous == HANG:
                break
            await asyncio.sleep(poll)
        kill_process_tree(self.skip_pids(), include_parent=True, log=self.new_family)

    def check_children(self) -> bool:
        """SGLang's SubprocessWatchdog check: a child that died (not exit code 0) is logged and
        the main process SIGQUITs itself. Returns whether it did."""
        if self.quitting:
            return True
        for name, proc in self.procs:
            if proc.is_alive() or proc.exitcode == 0 or proc.pid == self.stubborn_pid:
                continue
            logger.error(
                f"Subprocess {name} (pid={proc.pid}) crashed with exit code "
                f"{proc.exitcode}. Triggering SIGQUIT for cleanup..."
            )
            os.kill(os.getpid(), signal.SIGQUIT)
            return True
        return False

    async def watchdog(self) -> None:
        """Every WATCHDOG_SECONDS (SGLang: 1 s, a thread), until it has fired once."""
        while not self.check_children():
            await asyncio.sleep(WATCHDOG_SECONDS)

    # --- faults -------------------------------------------------------------------

    def _request_done(self) -> None:
        if (
            self.cfg.has("crash_after_requests")
            and not self.crashed
            and self.state.completed_requests >= self.cfg.fault_after
        ):
            self.trigger_crash()

    def trigger_crash(self) -> None:
        self.crashed = True
        try:
            self.conns[0].send({"cmd": "crash"})
        except (OSError, EOFError, BrokenPipeError):
            os.kill(os.getpid(), signal.SIGQUIT)

    # --- main flow ------------------------------------------------------------------

    async def run(self) -> None:
        self.loop = asyncio.get_running_loop()
        signal.signal(signal.SIGQUIT, self.on_sigquit)
        signal.signal(signal.SIGTERM, self.on_sigterm)
        signal.signal(signal.SIGINT, self.on_sigterm)
        for line in self.graphs.get("main_lines", []):
            logger.info(line)
        logger.info(server_args_repr(self.args))

        # Load first: SGLang starts uvicorn only after the schedulers are ready, so the port
        # refuses connections until then (recorded on 0.5.17: ~47 s).
        self.start_children()
        await self.wait_ready()
        self.phase = "serve"

        host = str(self.args.get("host") or "127.0.0.1")
        port = int(self.args.get("port") or 30000)
        sock, bind_error = None, None
        if self.cfg.has("port_in_use"):
            bind_error = bind_error_text(host, port)
        else:
            try:
                sock = bind_socket(host, port)
            except OSError as exc:
                bind_error = bind_error_text(host, port, (exc.strerror or str(exc)).lower(),
                                             exc.errno or 98)

        uv = logs.uvicorn_logger
        uv.info(f"Started server process [{os.getpid()}]")
        uv.info("Waiting for application startup.")
        if bind_error:
            uv.info("Application startup complete.")
            uv.error(bind_error)
            uv.info("Waiting for application shutdown.")
            uv.info("Application shutdown complete.")
            kill_process_tree(self.skip_pids(), include_parent=False)
            raise SystemExit(1)

        warmup = not self.args.get("skip_server_warmup") and not self.cfg.has("hang")
        if self.cfg.has("hang"):
            self.state.status = HANG
        elif not warmup:
            # recorded with --skip-server-warmup: ready before uvicorn's last two lines
            self.state.status = READY
            logger.info("The server is fired up and ready to roll!")
        from aiohttp import web

        runner = web.AppRunner(build_app(self.state), access_log=None, handle_signals=False)
        await runner.setup()
        await web.SockSite(runner, sock, backlog=LISTEN_BACKLOG).start()
        uv.info("Application startup complete.")
        display_host = f"[{host}]" if ":" in host else host
        uv.info(f"Uvicorn running on http://{display_host}:{port} (Press CTRL+C to quit)")

        engine_task = asyncio.create_task(self.engine.run())
        watchdog_task = asyncio.create_task(self.watchdog())

        if warmup:
            await self._warmup()
            if self.state.status == LOADING:
                self.state.status = READY
            logger.info("The server is fired up and ready to roll!")
        if not self.cfg.has("hang") and self.cfg.has("crash_after_requests") and self.cfg.fault_after == 0:
            self.trigger_crash()
        await asyncio.gather(engine_task, watchdog_task)

    async def _warmup(self) -> None:
        """SGLang's warmup (http_server._execute_server_warmup): GET /model_info, then one
        /generate of 8 tokens, not streamed, while /health and /health_generate answer 503
        (WARMUP_SHARE of the load time: the first request's kernels). It is not counted for
        crash_after_requests; with --enable-metrics it counts like any request (recorded on
        0.5.17: the /generate requests and num_requests_total agree after the warm-up)."""
        await asyncio.sleep(self.cfg.load_seconds * WARMUP_SHARE)
        if self.metrics is not None:
            self.metrics.http_begin("/model_info", "GET")
            self.metrics.http_end("/model_info", "GET", 200)
            self.metrics.http_begin("/generate", "POST")
        ids = self.codec.encode("The capital city of France is")
        req = GenRequest(rid="warmup", prompt_tokens=len(ids), max_new_tokens=8, key=token_key(ids))
        self.engine.submit(req)
        while not req.finished:
            await req.changed.wait()
            req.changed.clear()
        if self.metrics is not None:
            self.metrics.http_end("/generate", "POST", 200)
        logs.uvicorn_logger.info('127.0.0.1:0 - "POST /generate HTTP/1.1" 200 OK')


def _picklable(value: Any) -> bool:
    return isinstance(value, (str, int, float, bool, type(None), list, dict, tuple))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]
