# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator's child processes: schedulers, detokenizer, DP controller.

Each sets the process title SGLang sets (``sglang::scheduler_TP3``,
``sglang::detokenizer``, ``sglang::data_parallel_controller``), logs SGLang's
start-up lines with SGLang's log prefix and then idles. Token production is
simulated in the main process; a scheduler only "loads", reports ready over
its pipe and waits for a command (``crash``).

Lifecycle, as documented in simulator/README.md:
- a child ends when the main process kills it (SIGKILL on a crash, like
  SGLang's kill_process_tree; on SIGTERM to the main process after draining)
  or when it gets SIGTERM itself (default action);
- a child does NOT end when merely orphaned (no PR_SET_PDEATHSIG): if the main
  process is SIGKILLed, the children linger until killed, which is the
  "lingering processes" case the stop logic must handle;
- under fault ``ignore_sigterm`` one scheduler ignores SIGTERM and the main
  process leaves it alone on its way out, so only SIGKILL ends it.

Kept light (standard library + setproctitle): spawn re-imports this module in
every child.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import sys
import time
import traceback
from typing import Any

import setproctitle

from . import faults, logs, sglang_rules

logger = logging.getLogger("sglang_sim")

# Synthetic device numbers for the log lines (RTX PRO 6000 Blackwell: 96 GB).
SYNTH_GPU_TOTAL_GB = 94.97
SYNTH_INIT_GB = 0.53  # "Init torch distributed ends. ... mem usage=0.53 GB"
SYNTH_WEIGHTS_GB_TP1 = 62.40  # weights per GPU at --tp-size 1; divided by the TP size
DEFAULT_MEM_FRACTION = 0.88


def synthetic_weights_gb(args: dict) -> float:
    """The simulated model's weights on one GPU (SYNTHETIC)."""
    return SYNTH_WEIGHTS_GB_TP1 / max(int(args.get("tp_size") or 1), 1)
# GPU-mode objects (device memory) that must live as long as the process.
_KEEP_ALIVE: list = []


def _idle_forever() -> None:
    """Block until killed. Survives the parent's death (no PDEATHSIG)."""
    while True:
        time.sleep(3600)


def _wait_for_commands(conn) -> None:
    """Serve commands from the main process; idle on after it is gone."""
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            _idle_forever()
        if isinstance(message, dict) and message.get("cmd") == "crash":
            return


# --- GPU mode -----------------------------------------------------------------


def gpu_setup(spec: dict, ctx: dict):
    """GPU mode: hold SGLANG_SIM_GPU_MEM_MB MiB on cuda:<gpu_id>, optionally run
    one NCCL all-reduce over all schedulers. Returns what must stay alive.

    Raises RuntimeError with a clear message when torch/CUDA is missing.
    """
    gpu = ctx["gpu"]
    try:
        import torch
    except ImportError as exc:
        raise RuntimeError(
            "[sglang-sim] GPU mode (SGLANG_SIM_GPU_MEM_MB / SGLANG_SIM_NCCL_ALLREDUCE) needs "
            f"torch with CUDA, but torch is not importable here: {exc}"
        ) from exc
    if not torch.cuda.is_available():
        raise RuntimeError(
            "[sglang-sim] GPU mode needs CUDA, but torch.cuda.is_available() is False "
            f"(torch {torch.__version__})"
        )
    count = torch.cuda.device_count()
    gpu_id = spec["gpu_id"]
    if gpu_id >= count:
        raise RuntimeError(
            f"[sglang-sim] GPU mode: scheduler {spec['title']} needs cuda:{gpu_id} "
            f"but only {count} GPU(s) are visible"
        )
    torch.cuda.set_device(gpu_id)
    device = torch.device(f"cuda:{gpu_id}")
    held = []
    if gpu["mem_mb"] > 0:
        block = torch.empty(gpu["mem_mb"] * 1024 * 1024, dtype=torch.uint8, device=device)
        block.fill_(1)  # touch it so the driver really backs it
        torch.cuda.synchronize(device)
        held.append(block)
        logger.info(
            f"[sglang-sim] GPU mode: holding {gpu['mem_mb']} MiB on cuda:{gpu_id} "
            f"({torch.cuda.get_device_name(gpu_id)})"
        )
    world = ctx["world_size"]
    if gpu["nccl_allreduce"]:
        if world < 2:
            logger.info("[sglang-sim] GPU mode: NCCL all-reduce skipped (world size 1)")
        else:
            import torch.distributed as dist

            dist.init_process_group(
                backend="nccl",
                init_method=f"tcp://127.0.0.1:{ctx['nccl_port']}",
                world_size=world,
                rank=spec["index"],
                device_id=device,
            )
            value = torch.full((1,), float(spec["index"] + 1), device=device)
            dist.all_reduce(value)
            torch.cuda.synchronize(device)
            expected = world * (world + 1) / 2
            got = float(value.item())
            if got != expected:
                raise RuntimeError(
                    f"[sglang-sim] NCCL all-reduce gave {got}, expected {expected}"
                )
            logger.info(
                f"[sglang-sim] GPU mode: NCCL all-reduce ok over {world} ranks "
                f"(sum {got:g}, expected {expected:g})"
            )
            dist.destroy_process_group()
    return held


def _avail_gb(spec: dict, ctx: dict, used_gb: float) -> float:
    if ctx["gpu"]["mem_mb"] > 0 or ctx["gpu"]["nccl_allreduce"]:
        try:
            import torch

            return torch.cuda.mem_get_info(spec["gpu_id"])[0] / (1 << 30)
        except Exception:  # noqa: BLE001 - only a log number
            pass
    return SYNTH_GPU_TOTAL_GB - used_gb


# --- scheduler ----------------------------------------------------------------


def _crash(ctx: dict, text: str, fault: str) -> None:
    """An injected fault: its marker line, then SGLang's scheduler failure path."""
    logs.raw(faults.injected_marker(fault))
    _fail(ctx, text)


def _fail(ctx: dict, text: str) -> None:
    """SGLang's run_scheduler_process on an exception: log it, SIGQUIT the main process, wait."""
    logger.error(text)
    try:
        os.kill(ctx["main_pid"], signal.SIGQUIT)
    except ProcessLookupError:
        pass
    _idle_forever()


def _sleep_phase(load: float) -> None:
    time.sleep(load * 0.1)


def _pin_graphs(spec: dict, ctx: dict, graphs: dict, used: float, load: float, first: bool) -> float:
    """0.5.10.post1's model_runner: init_cuda_graphs (decode), then init_piecewise_cuda_graphs."""
    if graphs["decode"]:  # --disable-cuda-graph: init_cuda_graphs returns without a line
        tic_graph = time.perf_counter()
        logger.info(
            "Capture cuda graph begin. This can take up to several minutes. "
            f"avail mem={_avail_gb(spec, ctx, used):.2f} GB"
        )
        if first:
            logger.info(f"Capture cuda graph bs {ctx['capture_bs']}")
        _sleep_phase(load)
        used += 0.85
        logger.info(
            f"Capture cuda graph end. Time elapsed: {time.perf_counter() - tic_graph:.2f} s. "
            f"mem usage=0.85 GB. avail mem={_avail_gb(spec, ctx, used):.2f} GB."
        )
    else:
        _sleep_phase(load)

    if not graphs["piecewise"]:
        # the flag or an auto-disable rule (which sets the flag): the same line either way
        logger.info(sglang_rules.PIECEWISE_DISABLED_LINE)
        if "crash_on_load" in ctx["faults"]:
            _crash(ctx, faults.dynamo_fp4_traceback(), "crash_on_load")
        _sleep_phase(load)
        return used
    tic_pcg = time.perf_counter()
    logger.info(f"Capture piecewise CUDA graph begin. avail mem={_avail_gb(spec, ctx, used):.2f} GB")
    _crash_in_capture(ctx, load)
    _sleep_phase(load)
    used += 0.40
    logger.info(
        f"Capture piecewise CUDA graph end. Time elapsed: {time.perf_counter() - tic_pcg:.2f} s. "
        f"mem usage=0.40 GB. avail mem={_avail_gb(spec, ctx, used):.2f} GB."
    )
    return used


def _crash_in_capture(ctx: dict, load: float) -> None:
    """SGLANG_SIM_FAULT=crash_on_load during a graph capture: dynamo's warnings, then the seeds' traceback."""
    if "crash_on_load" in ctx["faults"]:
        time.sleep(load * 0.05)
        for line in faults.dynamo_warning_lines():
            logs.raw(line)
        _crash(ctx, faults.dynamo_fp4_traceback(), "crash_on_load")


def _new_family_graphs(spec: dict, ctx: dict, graphs: dict, used: float, load: float) -> float:
    """0.5.17 (recorded, server_cudagraph.log): target prefill capture, then target decode capture."""
    if graphs["prefill"] == "disabled":
        logger.info(sglang_rules.PREFILL_DISABLED_LINE)
        if "crash_on_load" in ctx["faults"]:
            _crash(ctx, faults.dynamo_fp4_traceback(), "crash_on_load")
        _sleep_phase(load)
    else:
        tic = time.perf_counter()
        before = _avail_gb(spec, ctx, used)
        logger.info(
            f"Capture target prefill CUDA graph begin. backend={graphs['prefill']}, "
            f"num_tokens={graphs['prefill_num_tokens']}, avail mem={before:.2f} GB"
        )
        _crash_in_capture(ctx, load)
        _sleep_phase(load)
        used += 0.40
        logger.info(
            f"Capture target prefill CUDA graph end. elapsed={time.perf_counter() - tic:.2f} s, "
            f"mem usage=0.40 GB, avail mem={_avail_gb(spec, ctx, used):.2f} GB."
        )
    if graphs["decode"] == "disabled":  # no line (capture_decode_graph returns)
        _sleep_phase(load)
        return used
    tic = time.perf_counter()
    logger.info(
        f"Capture target decode CUDA graph begin. backend={graphs['decode']}, num_tokens_per_req=1, "
        f"bs={graphs['decode_bs']}, avail mem={_avail_gb(spec, ctx, used):.2f} GB"
    )
    _sleep_phase(load)
    used += 0.85
    logger.info(
        f"Capture target decode CUDA graph end. elapsed={time.perf_counter() - tic:.2f} s, "
        f"mem usage=0.85 GB, avail mem={_avail_gb(spec, ctx, used):.2f} GB."
    )
    return used


def run_scheduler(spec: dict, ctx: dict, conn) -> None:
    """Target of every scheduler process."""
    setproctitle.setproctitle(spec["title"])
    logs.configure(spec["prefix"])
    if spec.get("ignore_sigterm"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    args = ctx["args"]
    load = float(ctx["load_seconds"])
    first = spec["tp_rank"] == 0 and spec["pp_rank"] == 0
    try:
        tic = time.perf_counter()
        logger.info("Init torch distributed begin.")
        if ctx["gpu"]["enabled"]:
            _KEEP_ALIVE.extend(gpu_setup(spec, ctx))
        time.sleep(load * 0.1)
        logger.info(
            f"Init torch distributed ends. elapsed={time.perf_counter() - tic:.2f} s, "
            f"mem usage={SYNTH_INIT_GB:.2f} GB"
        )

        weights_gb = synthetic_weights_gb(args)
        pre_load_gb = SYNTH_GPU_TOTAL_GB - SYNTH_INIT_GB
        logger.info(f"Load weight begin. avail mem={_avail_gb(spec, ctx, SYNTH_INIT_GB):.2f} GB")
        shards = ctx["shards"]
        tic_load = time.perf_counter()
        for done in range(shards + 1):
            if first:
                logs.raw(
                    logs.progress_line(
                        "Loading safetensors checkpoint shards", done, shards,
                        time.perf_counter() - tic_load,
                    )
                )
            if done < shards:
                time.sleep(load * 0.6 / shards)
        used = SYNTH_INIT_GB + weights_gb
        # 0.5.10.post1 model_runner.load_model and 0.5.17 (recorded): no dtype in this line
        logger.info(
            f"Load weight end. elapsed={time.perf_counter() - tic_load:.2f} s, "
            f"type={ctx['architecture']}, "
            f"avail mem={_avail_gb(spec, ctx, used):.2f} GB, mem usage={weights_gb:.2f} GB."
        )

        fraction = float(args.get("mem_fraction_static") or DEFAULT_MEM_FRACTION)
        shortfall = sglang_rules.kv_cache_shortfall(pre_load_gb, weights_gb, fraction)
        if shortfall is not None:
            kind, message = sglang_rules.kv_cache_error(ctx["new_family"], fraction, shortfall)
            _fail(ctx, faults.kv_cache_no_memory_traceback(ctx["new_family"], kind, message))
        kv_gb = max(SYNTH_GPU_TOTAL_GB * fraction - used, 1.0)
        time.sleep(load * 0.1)
        logger.info(
            f"KV Cache is allocated. #tokens: {ctx['max_total_num_tokens']}, "
            f"KV size: {kv_gb:.2f} GB"
        )
        used += kv_gb
        logger.info(f"Memory pool end. avail mem={_avail_gb(spec, ctx, used):.2f} GB")

        graphs = ctx["graphs"]
        if ctx["new_family"]:
            used = _new_family_graphs(spec, ctx, graphs, used, load)
        else:
            used = _pin_graphs(spec, ctx, graphs, used, load, first)

        if first:
            logger.info(
                f"max_total_num_tokens={ctx['max_total_num_tokens']}, "
                f"chunked_prefill_size={args.get('chunked_prefill_size')}, "
                f"max_prefill_tokens={ctx['max_prefill_tokens']}, "
                f"max_running_requests={ctx['max_running_requests']}, "
                f"context_len={ctx['context_len']}, "
                f"available_gpu_mem={_avail_gb(spec, ctx, used):.2f} GB"
            )
        conn.send({"status": "ready", "index": spec["index"], "pid": os.getpid()})
    except Exception:  # noqa: BLE001 - SGLang's run_scheduler_process does the same
        _fail(ctx, f"Scheduler hit an exception: {traceback.format_exc()}")

    _wait_for_commands(conn)
    _crash(ctx, faults.scheduler_runtime_traceback(), "crash_after_requests")


# --- detokenizer and DP controller --------------------------------------------


def run_detokenizer(ctx: dict) -> None:
    setproctitle.setproctitle("sglang::detokenizer")
    logs.configure("")
    _idle_forever()


def run_dp_controller(ctx: dict, groups: list[list[tuple[dict, Any]]]) -> None:
    """SGLang's DataParallelController: start each DP group's schedulers."""
    setproctitle.setproctitle("sglang::data_parallel_controller")
    logs.configure("")
    mp = multiprocessing.get_context("spawn")
    for group in groups:
        spec0 = group[0][0]
        if not ctx["args"].get("enable_dp_attention"):
            logger.info(f"Launch DP{spec0['dp_rank']} starting at GPU #{spec0['gpu_id']}.")
        for spec, conn in group:
            proc = mp.Process(target=run_scheduler, args=(spec, ctx, conn), name=spec["title"])
            proc.start()
            conn.close()
    sys.stdout.flush()
    _idle_forever()
