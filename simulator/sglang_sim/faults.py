# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# ruff: noqa: E501 - the tracebacks below are kept verbatim, one message per line
"""Text the fault modes print: SYNTHETIC reproductions of real crash output.

The frames follow SGLang 0.5.10's and FlashInfer's real call paths (file
names and functions from their sources; line numbers approximate), and the
exception text is what torch / CUDA print. The seeds' piecewise-CUDA-graph
crash (torch._dynamo.exc.Unsupported on ``_thread.allocate_lock`` under
``fullgraph=True``) is ``crash_on_load``; a CUDA illegal memory access in a
running scheduler (EP8 crashed under load in the seeds) is
``crash_after_requests``.
"""

from __future__ import annotations

import sys
import sysconfig


def _site() -> str:
    return sysconfig.get_paths().get("purelib") or f"{sys.prefix}/lib/python3.12/site-packages"


_FAULT_NOTES = {
    "crash_on_load": (
        "piecewise CUDA graph capture compiles the model with torch.compile(fullgraph=True); "
        "dynamo cannot trace FlashInfer's FP4 JIT (subprocess -> _thread.allocate_lock), "
        "and fullgraph=True turns that graph break into an error"
    ),
    "crash_after_requests": "a running scheduler hits a CUDA error and the server dies",
}


def injected_marker(fault: str) -> str:
    note = _FAULT_NOTES.get(fault)
    tail = f": {note}" if note else ""
    return f"[sglang-sim] SYNTHETIC fault injected: {fault} (SGLANG_SIM_FAULT){tail}"


def dynamo_warning_lines() -> list[str]:
    """The warnings the seeds' log shows just before the crash."""
    sp = _site()
    return [
        f"{sp}/torch/_dynamo/variables/functions.py:1692: UserWarning: Dynamo detected a "
        "call to a `functools.lru_cache`-wrapped function. Dynamo ignores the cache "
        "wrapper and directly traces the wrapped function. Silent incorrectness is only "
        "a *potential* risk, not something we have observed. Enable TORCH_LOGS=\"+dynamo\" "
        "for a DEBUG stack trace.",
        "  torch._dynamo.utils.warn_once(msg)",
    ]


def dynamo_fp4_traceback() -> str:
    """crash_on_load: piecewise CUDA graph capture traced into FlashInfer's FP4 JIT."""
    sp = _site()
    return f"""Scheduler hit an exception: Traceback (most recent call last):
  File "{sp}/sglang/srt/managers/scheduler.py", line 3600, in run_scheduler_process
    scheduler = Scheduler(
                ^^^^^^^^^^
  File "{sp}/sglang/srt/managers/scheduler.py", line 372, in __init__
    self.init_model_worker()
  File "{sp}/sglang/srt/managers/scheduler.py", line 566, in init_model_worker
    self.tp_worker = TpModelWorker(
                     ^^^^^^^^^^^^^^
  File "{sp}/sglang/srt/managers/tp_worker.py", line 262, in __init__
    self._model_runner = ModelRunner(
                         ^^^^^^^^^^^^
  File "{sp}/sglang/srt/model_executor/model_runner.py", line 402, in __init__
    self.initialize(pre_model_load_memory)
  File "{sp}/sglang/srt/model_executor/model_runner.py", line 673, in initialize
    self.init_piecewise_cuda_graphs()
  File "{sp}/sglang/srt/model_executor/model_runner.py", line 2569, in init_piecewise_cuda_graphs
    self.piecewise_cuda_graph_runner = PiecewiseCudaGraphRunner(self)
                                       ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{sp}/sglang/srt/model_executor/piecewise_cuda_graph_runner.py", line 309, in __init__
    self.warmup_compile(num_tokens=num_tokens)
  File "{sp}/sglang/srt/model_executor/piecewise_cuda_graph_runner.py", line 392, in warmup_compile
    _ = self.model_runner.model.forward(
        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{sp}/sglang/srt/compilation/compile.py", line 179, in install_torch_compiled
    bound, fullgraph=fullgraph, backend=backend_factory
  File "{sp}/torch/_dynamo/eval_frame.py", line 841, in compile_wrapper
    raise e.with_traceback(None) from e.__cause__  # User compiler error
    ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
torch._dynamo.exc.Unsupported: Attempted to call function marked as skipped
  Explanation: Dynamo does not know how to trace the builtin `_thread.allocate_lock.` This function is either a Python builtin (e.g. _warnings.warn) or a third-party C/C++ Python extension (perhaps created with pybind).
  Hint: If it is a Python builtin, please file an issue on GitHub so the PyTorch team can add support for it and see the next case for a workaround.
  Hint: If it is a third-party C/C++ Python extension, please either wrap it into a PyTorch-understood custom operator (see https://pytorch.org/tutorials/advanced/custom_ops_landing_page.html for more details) or, if it is traceable, use `torch.compiler.allow_in_graph`.

  Developer debug context: module: _thread, qualname: allocate_lock, skip reason: <missing reason>

 For more details about this graph break, please visit: https://meta-pytorch.github.io/compile-graph-break-site/gb/gb0007.html

from user code:
   File "{sp}/sglang/srt/layers/quantization/modelopt_quant.py", line 1251, in apply
    x_fp4, x_scale_interleaved = fp4_quantize(x, layer.input_scale_inv)
  File "{sp}/flashinfer/fp4_quantization.py", line 639, in fp4_quantize
    x_q, sf = get_fp4_quantization_module(f"{{major}}{{minor}}").fp4_quantize(
  File "{sp}/flashinfer/fp4_quantization.py", line 123, in gen_fp4_quantization_module
    "-DENABLE_FP4" if is_cuda_version_at_least("12.8") else "",
  File "{sp}/flashinfer/jit/cpp_ext.py", line 87, in is_cuda_version_at_least
    return get_cuda_version() >= Version(version_str)
  File "{sp}/torch/_dynamo/polyfills/__init__.py", line 264, in getattr_and_trace
    return fn(*args[2:], **kwargs)
  File "{sp}/flashinfer/jit/cpp_ext.py", line 74, in get_cuda_version
    txt = subprocess.check_output([nvcc, "--version"], text=True)
  File "/usr/lib/python3.12/subprocess.py", line 466, in check_output
    return run(*popenargs, stdout=PIPE, timeout=timeout, check=True,
  File "/usr/lib/python3.12/subprocess.py", line 548, in run
    with Popen(*popenargs, **kwargs) as process:
  File "/usr/lib/python3.12/subprocess.py", line 1026, in __init__
    self._waitpid_lock = threading.Lock()

Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug to PyTorch). For even more developer context, set TORCH_LOGS="+dynamo"
"""


def scheduler_runtime_traceback() -> str:
    """crash_after_requests: a running scheduler dies on a CUDA error."""
    sp = _site()
    return f"""Scheduler hit an exception: Traceback (most recent call last):
  File "{sp}/sglang/srt/managers/scheduler.py", line 3611, in run_scheduler_process
    scheduler.run_event_loop()
  File "{sp}/sglang/srt/managers/scheduler.py", line 3492, in run_event_loop
    dispatch_event_loop(self)
  File "{sp}/sglang/srt/managers/scheduler.py", line 1203, in event_loop_overlap
    batch_result = self.run_batch(batch)
                   ^^^^^^^^^^^^^^^^^^^^^
  File "{sp}/sglang/srt/managers/scheduler.py", line 2318, in run_batch
    batch_result = self.model_worker.forward_batch_generation(
                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{sp}/sglang/srt/managers/tp_worker.py", line 437, in forward_batch_generation
    logits_output, can_run_cuda_graph = self.model_runner.forward(
                                        ^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{sp}/sglang/srt/model_executor/model_runner.py", line 2702, in forward
    output = self._forward_raw(
             ^^^^^^^^^^^^^^^^^^
  File "{sp}/sglang/srt/layers/moe/fused_moe_triton/layer.py", line 981, in forward
    combine_input = self.run_moe_core(
                    ^^^^^^^^^^^^^^^^^^
  File "{sp}/sglang/srt/layers/moe/token_dispatcher/standard.py", line 152, in combine
    hidden_states = hidden_states.sum(dim=1)
                    ^^^^^^^^^^^^^^^^^^^^^^^^
torch.AcceleratorError: CUDA error: an illegal memory access was encountered
CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.
For debugging consider passing CUDA_LAUNCH_BLOCKING=1
Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.

"""


def kv_cache_no_memory_traceback(new_family: bool, kind: str, message: str) -> str:
    """--mem-fraction-static too small: the weights leave nothing for the KV cache (``kind`` and
    ``message`` from sglang_rules.kv_cache_error).

    New family: the frames real SGLang 0.5.17 printed (server_tiny_mem.log). The pin: 0.5.10.post1's
    call path (line numbers from its wheel) ending in MemoryPoolConfig's RuntimeError. Not an
    injected fault: a command line the simulator rejects as SGLang does.
    """
    sp = _site()
    if new_family:
        frames = f"""  File "{sp}/sglang/srt/managers/scheduler.py", line 4931, in run_scheduler_process
    scheduler = Scheduler(
                ^^^^^^^^^^
  File "{sp}/sglang/srt/managers/scheduler.py", line 498, in __init__
    self.init_model_worker()
  File "{sp}/sglang/srt/managers/scheduler.py", line 981, in init_model_worker
    self.init_memory_pools()
  File "{sp}/sglang/srt/managers/scheduler.py", line 953, in init_memory_pools
    self.init_target_memory_pool()
  File "{sp}/sglang/srt/managers/scheduler.py", line 949, in init_target_memory_pool
    self.tp_worker.alloc_memory_pool()
  File "{sp}/sglang/srt/managers/tp_worker.py", line 399, in alloc_memory_pool
    self.model_runner.alloc_memory_pool(memory_pool_config)
  File "{sp}/sglang/srt/model_executor/model_runner.py", line 775, in alloc_memory_pool
    result = self.kv_cache_configurator.configure(
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{sp}/sglang/srt/mem_cache/kv_cache_configurator.py", line 247, in configure
    config = self._resolve_memory_pool_config(pre_model_load_memory)
             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{sp}/sglang/srt/mem_cache/kv_cache_configurator.py", line 1782, in _resolve_memory_pool_config
    available_bytes = self._profile_available_bytes(pre_model_load_memory)
                      ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{sp}/sglang/srt/mem_cache/kv_cache_configurator.py", line 1647, in _profile_available_bytes
    raise ValueError(
"""
    else:
        frames = f"""  File "{sp}/sglang/srt/managers/scheduler.py", line 3600, in run_scheduler_process
    scheduler = Scheduler(
                ^^^^^^^^^^
  File "{sp}/sglang/srt/managers/scheduler.py", line 385, in __init__
    self.init_model_worker()
  File "{sp}/sglang/srt/managers/scheduler.py", line 632, in init_model_worker
    self.init_tp_model_worker()
  File "{sp}/sglang/srt/managers/scheduler.py", line 600, in init_tp_model_worker
    self.tp_worker = TpModelWorker(**worker_kwargs)
                     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{sp}/sglang/srt/managers/tp_worker.py", line 344, in __init__
    self._model_runner = ModelRunner(
                         ^^^^^^^^^^^^
  File "{sp}/sglang/srt/model_executor/model_runner.py", line 427, in __init__
    self.initialize(pre_model_load_memory)
  File "{sp}/sglang/srt/model_executor/model_runner.py", line 623, in initialize
    self.init_memory_pool(pre_model_load_memory)
  File "{sp}/sglang/srt/model_executor/model_runner_kv_cache_mixin.py", line 899, in init_memory_pool
    self.memory_pool_config = self._resolve_memory_pool_config(
                              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
  File "{sp}/sglang/srt/model_executor/model_runner_kv_cache_mixin.py", line 885, in _resolve_memory_pool_config
    return MemoryPoolConfig(
           ^^^^^^^^^^^^^^^^^
  File "<string>", line 8, in __init__
  File "{sp}/sglang/srt/model_executor/model_runner_kv_cache_mixin.py", line 60, in __post_init__
    raise RuntimeError(msg)
"""
    return f"Scheduler hit an exception: Traceback (most recent call last):\n{frames}{kind}: {message}\n"
