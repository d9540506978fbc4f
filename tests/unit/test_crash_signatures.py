"""The crash-signature catalog (data/crash_signatures.yml) against real SGLang log lines.

Every line below is taken from a public GitHub issue / PR (URL next to it), from SGLang's own
source (the wheel: version and file named next to it) or from a log of the corpus
(tests/fixtures/crashlogs/, index.yml gives its source), trimmed to the line that matters.
Where an issue quoted a line cut short, the cut is completed in the same wording and the case
says "completed". Healthy start-up lines (same sources) must not match any fatal signature.
Whole real logs are scored in tests/unit/test_crash_corpus.py.
"""

from __future__ import annotations

import importlib.util
import sys

import pytest
from ansible.module_utils import sglang_crash
from helpers.paths import REPO

CATALOG_PATH = REPO / "data" / "crash_signatures.yml"

# The classes the shared contract (brief) promises, plus the non-log ones.
CONTRACT_CLASSES = {
    "dynamo_fp4_jit", "cuda_oom_load", "cuda_oom_graph_capture", "cuda_graph_capture_failed",
    "nccl_error", "port_in_use", "argparse_unrecognized", "argparse_invalid_choice",
    "model_not_found", "hf_gated_or_offline", "no_kernel_image", "unsupported_arch",
    "scheduler_watchdog_timeout", "scheduler_exception", "hang", "process_exited",
}


@pytest.fixture(scope="module")
def catalog():
    return sglang_crash.load_catalog(CATALOG_PATH)


# --------------------------------------------------------------------------- catalog shape


def test_catalog_has_every_contract_class(catalog):
    classes = {entry["class"] for entry in catalog}
    assert CONTRACT_CLASSES <= classes, CONTRACT_CLASSES - classes


def test_catalog_entries_are_complete(catalog):
    for entry in catalog:
        assert entry["explanation"].strip(), entry["class"]
        assert entry["remedy"].strip(), entry["class"]
        if entry["class"] in sglang_crash.NON_LOG_CLASSES:
            assert entry["pattern"] is None
        else:
            assert entry["pattern"] is not None, entry["class"]


def test_only_the_consequence_lines_are_generic(catalog):
    # Rule 3 of the catalog header: generic entries name a crash only when its burst holds no
    # specific cause; that is what scheduler_exception is for, and nothing else.
    generic = {entry["class"] for entry in catalog if entry["generic"]}
    assert generic == {"scheduler_exception"}
    assert all(entry["generic"] for entry in catalog if entry["class"] == "scheduler_exception")
    assert all(not entry["fatal"] for entry in catalog if entry["hint"] or entry["outcome"])


@pytest.mark.parametrize(
    "entries, message",
    [
        ([], "non-empty list"),
        ([{"class": "x", "regex": "a", "explanation": "e", "remedy": "r"}], "lacks fatal"),
        ([{"class": "x", "regex": "(", "explanation": "e", "remedy": "r", "fatal": True}], "does not compile"),
        ([{"class": "x", "regex": "a", "explanation": "e", "remedy": "r", "fatal": "yes"}], "true or false"),
        ([{"class": "x", "regex": "a", "explanation": "e", "remedy": "r", "fatal": False, "generic": True}],
         "generic entry must be fatal"),
        ([{"class": "x", "regex": "a", "explanation": "e", "remedy": "r", "fatal": True, "hint": True}],
         "hint entry must not be fatal"),
        ([{"class": "x", "regex": "a", "explanation": "e", "remedy": "r", "fatal": True, "outcome": "stopped"}],
         "outcome entry must not be fatal"),
        ([{"class": "x", "regex": "a", "explanation": "e", "remedy": "r", "fatal": False, "outcome": "gone"}],
         "outcome must be"),
    ],
)
def test_compile_catalog_names_the_problem(entries, message):
    with pytest.raises(sglang_crash.CatalogError, match=message):
        sglang_crash.compile_catalog(entries)


# --------------------------------------------------------------------------- one line, one class

# (class, line, source)
SINGLE_LINES = [
    ("dynamo_unsupported",
     "[2026-02-28 15:04:30 TP0] Scheduler hit an exception: torch._dynamo.exc.Unsupported: Logger not "
     "supported for non-export cases. To avoid graph breaks caused by logger in compile-mode, it is "
     "recommended to disable logging by adding logging methods to config.ignore_logger_methods",
     "https://github.com/sgl-project/sglang/pull/19573"),
    ("dynamo_unsupported",
     "torch._dynamo.exc.Unsupported: torch.* op returned non-Tensor",
     "https://github.com/sgl-project/sglang/pull/10062"),
    ("cuda_oom_graph_capture",
     "Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 has a "
     "total capacity of 95.00 GiB of which 398.19 MiB is free.",
     "https://github.com/sgl-project/sglang/issues/5285 (completed)"),
    ("kv_cache_no_memory",
     "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
     "sglang 0.5.10.post1 srt/model_executor/model_runner_kv_cache_mixin.py"),
    ("cuda_oom_load",
     "RuntimeError: CUDA error: out of memory",
     "https://github.com/sgl-project/sglang/issues/4547"),
    ("cuda_graph_capture_failed",
     "Exception: Capture cuda graph failed: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection "
     "closed by peer [10.0.0.2]:33065",
     "https://github.com/sgl-project/sglang/issues/4205 (completed)"),
    ("nccl_error",
     "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
     "https://github.com/sgl-project/sglang/issues/4289"),
    ("nccl_error",
     "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333, "
     "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1",
     "https://github.com/vllm-project/vllm/issues/10523"),
    ("port_in_use",
     "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 7878): address already in use",
     "https://github.com/wandb/openui/issues/226"),
    ("port_in_use",
     "OSError: [Errno 98] Address already in use",
     "https://github.com/microsoft/JARVIS/issues/118"),
    ("port_in_use",
     "ValueError: Port is already in use. dist_init_port=None port_base=30001 detokenizer_port=30002 "
     "nccl_port=30003 scheduler_input_port=30004",
     "sglang 0.5.10.post1 srt/server_args.py"),
    ("argparse_unrecognized",
     "launch_server.py: error: unrecognized arguments: --enable-reasoning",
     "https://github.com/sgl-project/sglang/issues/4116"),
    ("argparse_unrecognized",
     "launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2",
     "https://github.com/sgl-project/sglang/issues/12818"),
    ("argparse_invalid_choice",
     "sglang: error: argument --attention-backend: invalid choice: 'torch_sdpa' (choose from 'triton', "
     "'torch_native', 'flex_attention', 'nsa', 'cutlass_mla', 'fa3', 'fa4', 'flashinfer', 'flashmla')",
     "https://github.com/intel/llm-scaler/issues/403"),
    ("argparse_invalid_choice",
     "launch_server.py: error: argument --mm-attention-backend: invalid choice: 'triton' (choose from 'sdpa', "
     "'fa3', 'triton_attn', 'ascend_attn')",
     "https://github.com/sgl-project/sglang/pull/10835"),
    ("hf_gated_or_offline",
     "Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-2-7b/resolve/main/config.json.",
     "https://github.com/kyegomez/NeoSapiens/issues/3"),
    ("hf_gated_or_offline",
     "OSError: You are trying to access a gated repo.",
     "https://github.com/zylon-ai/private-gpt/issues/1985"),
    ("hf_gated_or_offline",
     "huggingface_hub.errors.OfflineModeIsEnabled: Cannot reach https://huggingface.co/upstage/SOLAR-10.7B-Instruct-v1.0"
     "/resolve/main/hf_quant_config.json: offline mode is enabled. To disable it, please unset the `HF_HUB_OFFLINE` "
     "environment variable.",
     "corpus hf_gated_or_offline/i5386-v045-hf-hub-offline-cannot-reach.log"),
    ("cuda_illegal_instruction",
     "RuntimeError: CUDA error: an illegal instruction was encountered",
     "corpus cuda_illegal_instruction/i4188-eagle-high-concurrency-illegal-instruction.log"),
    ("dynamo_unsupported",
     "You can suppress this exception and fall back to eager by setting:",
     "corpus dynamo_unsupported/i1923-torch-compile-flashinfer-getitem-assert.log"),
    ("warmup_failed",
     "Exception in thread Thread-1 (_wait_and_warmup):",
     "corpus warmup_failed/i1386-qwen72b-v030-warmup-json-decode.log"),
    ("no_kernel_image",
     "RuntimeError: RMSNorm failed with error code no kernel image is available for execution on the device",
     "https://github.com/sgl-project/sglang/issues/7249 (title)"),
    ("no_kernel_image",
     "RuntimeError: CUDA error: no kernel image is available for execution on the device",
     "https://github.com/Comfy-Org/ComfyUI/issues/10326"),
    ("unsupported_arch",
     "RuntimeError: Error in function 'TllmGenFmhaRunner' at /workspace/include/flashinfer/trtllm/fmha/"
     "fmhaRunner.cuh:30: Unsupported architecture",
     "https://github.com/flashinfer-ai/flashinfer/issues/3263"),
    ("unsupported_arch",
     "tvm.error.InternalError: Error in function 'TllmGenFmhaRunner' at "
     "/home/admin2/.sglang/lib/python3.12/site-packages/flashinfer/data/include/flashinfer/trtllm/fmha/"
     "fmhaRunner.cuh:37: Unsupported architecture",
     "https://github.com/sgl-project/sglang/issues/40558"),
    ("model_arch_unsupported",
     "ValueError: Unsupported architecture: MiniCPMForCausalLM",
     "sglang 0.5.10.post1 / 0.5.17 / 0.5.23 srt/configs/internvl.py (format rendered): a model's LLM "
     "architecture, not a GPU one"),
    ("scheduler_watchdog_timeout",
     "[2025-08-02 19:24:30 TP3] Watchdog timeout (self.watchdog_timeout=300)",
     "https://github.com/sgl-project/sglang/issues/7783"),
    ("scheduler_watchdog_timeout",
     "[2026-05-01 10:00:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)",
     "sglang 0.5.10.post1 srt/utils/watchdog.py (f-string rendered)"),
    ("scheduler_soft_watchdog",
     "[2026-05-01 10:00:00] TokenizerManager watchdog timeout (self.watchdog_timeout=300.0, self.soft=True)",
     "sglang 0.5.10.post1 srt/utils/watchdog.py (f-string rendered)"),
    ("cuda_illegal_memory_access",
     "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
     "torch's CUDA error text; the seeds' EP8 crash under load"),
    ("scheduler_exception",
     "[2026-05-16 12:09:37] Scheduler hit an exception: Traceback (most recent call last):",
     "https://github.com/kvcache-ai/ktransformers/issues/1969"),
    ("scheduler_exception",
     "[2025-03-11 15:02:53] Received sigquit from a child process. It usually means the child failed.",
     "https://github.com/sgl-project/sglang/issues/4289"),
    ("scheduler_killed",
     "[2026-05-01 10:00:00] Subprocess scheduler_3 (pid=81234) crashed with exit code -9. Triggering SIGQUIT "
     "for cleanup...",
     "sglang 0.5.10.post1 srt/utils/watchdog.py SubprocessWatchdog (f-string rendered)"),
    ("scheduler_exception",
     "[2026-05-01 10:00:00] Subprocess scheduler_3 (pid=81234) crashed with exit code 1. Triggering SIGQUIT "
     "for cleanup...",
     "sglang 0.5.10.post1 srt/utils/watchdog.py SubprocessWatchdog (f-string rendered)"),
    ("scheduler_exception",
     "[2026-12-01 07:47:06] SIGQUIT received. signum=None, frame=None. It usually means one child failed.",
     "corpus scheduler_killed/h200-tp1-sigkill-scheduler.log (real SGLang 0.5.17)"),
    ("scheduler_exception",
     "RuntimeError: Rank 0 scheduler died during initialization (exit code: -3). If exit code is -9 (SIGKILL), a "
     "common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.",
     "https://github.com/sgl-project/sglang/issues/25118"),
    ("scheduler_killed",
     "RuntimeError: Rank 3 scheduler died during initialization (exit code: -9). If exit code is -9 (SIGKILL), a "
     "common cause is the OS OOM killer. Run `dmesg -T | grep -i oom` to check.",
     "sglang 0.5.17 srt/entrypoints/engine.py _scheduler_died_error (f-string rendered)"),
    ("kv_cache_no_memory",
     "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=1e-05. Raise "
     "--mem-fraction-static above 0.001 (minimum viable = 1 - available/pre = 0.0006). If using speculative "
     "decoding, draft weights are now counted.",
     "corpus kv_cache_no_memory/h200-tp1-mem-fraction-tiny.log (real SGLang 0.5.17)"),
    ("kv_pool_oom",
     "RuntimeError: Prefill out of memory. Try to lower your batch size.",
     "https://github.com/sgl-project/sglang/issues/34676"),
    ("kv_pool_oom",
     "`RuntimeError: Decode out of memory. Try to lower your batch size.",
     "https://github.com/sgl-project/sglang/issues/4602"),
    ("req_pool_oom",
     "`RuntimeError: alloc_req_slots runs out of memory. Please set a smaller number for `--max-running-requests`. "
     "self.req_to_token_pool.available_size()=1, num_reqs=2,",
     "https://github.com/sgl-project/sglang/issues/10408"),
    ("piecewise_cuda_graph_failed",
     "[2026-06-10 13:08:34 TP7] Piecewise CUDA Graph failed with error: 'TcPiecewiseForwardContext' object has no "
     "attribute 'num_tokens'",
     "https://github.com/sgl-project/sglang/pull/27811"),
    ("piecewise_cuda_graph_failed",
     "Piecewise CUDA Graph capture failed.",
     "https://github.com/sgl-project/sglang/pull/28291"),
    ("memory_unbalanced",
     "ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. "
     "min_per_gpu_memory=8.8841552734375, local_gpu_memory=11.901611328125, local_gpu_memory * 0.9=10.7114501953125",
     "https://github.com/sgl-project/sglang/pull/5416"),
    ("argparse_invalid_value",
     "sglang serve: error: argument --tp-size/--tensor-parallel-size: invalid int value: 'eight'",
     "corpus argparse_invalid_value/h200-tp1-tp-size-eight.log (real SGLang 0.5.17)"),
    ("argparse_ambiguous",
     "launch_server.py: error: ambiguous option: --model could match --model-path, --model-loader-extra-config",
     "https://github.com/sgl-project/sglang/pull/7505"),
    ("warmup_failed",
     "[2024-11-26 14:25:58] Initialization failed. warmup error: Traceback (most recent call last):",
     "https://github.com/sgl-project/sglang/issues/2193"),
    ("detokenizer_exception",
     "[2026-05-29 12:21:03] DetokenizerManager hit an exception: Traceback (most recent call last):",
     "https://github.com/sgl-project/sglang/pull/29853"),
    ("tokenizer_manager_exception",
     "[2025-10-31 00:07:33] TokenizerManager hit an exception: Traceback (most recent call last):",
     "http://brainiky.site/blog/sglang-server-crash-on-abort"),
    ("stopped_by_sigterm",
     "[2026-12-01 07:48:01] SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
     "corpus stopped_by_sigterm/h200-tp1-sigterm-idle.log (real SGLang 0.5.17)"),
    ("nccl_error",
     "h100-15:139:1092 [7] socket.c:485 NCCL WARN socketStartConnect: Connect to 10.0.0.82<38455> failed : "
     "Software caused connection abort",
     "https://github.com/sgl-project/sglang/issues/5594"),
    ("unsupported_arch",
     "subprocess.CalledProcessError: Command '/opt/conda/lib/python3.11/site-packages/triton/backends/nvidia/bin/"
     "ptxas -lineinfo -v --gpu-name=sm_120 /tmp/tmpb85wo12z.ptx -o /tmp/tmpb85wo12z.ptx.o 2> /tmp/tmp9opzz4lr.log' "
     "returned non-zero exit status 255.",
     "https://github.com/RLinf/RLinf/issues/92"),
    ("model_not_found",
     "OSError: CodeGoat24/UnifiedReward-7b-v1.5 does not appear to have a file named preprocessor_config.json. "
     "Checkout 'https://huggingface.co/CodeGoat24/UnifiedReward-7b-v1.5/tree/main'for available files.",
     "https://github.com/CodeGoat24/UnifiedReward/issues/29"),
    ("cuda_device_assert",
     "RuntimeError: CUDA error: device-side assert triggered",
     "https://github.com/sgl-project/sglang/pull/3730"),
    ("model_arch_unsupported",
     "ValueError: Model architectures ['Glm4ForCausalLM'] are not supported for now. Supported architectures: "
     "dict_keys(['BaichuanForCausalLM', 'ChatGLMModel', 'CLIPModel', 'CohereForCausalLM', 'Cohere2ForCausalLM', "
     "'DbrxForCausalLM', 'DeepseekForCausalLM', 'MultiModalityCausalLM', 'DeepseekV3ForCausalLMNextN', "
     "'DeepseekV2ForCausalLM', 'DeepseekV3ForCausalLM', 'DeepseekVL2ForCausalLM', 'ExaoneForCausalLM', "
     "'GemmaForCausalLM', 'Gemma2ForCausalLM', 'Gemma2ForSequenceClassification', 'Gemma3ForCausalLM', "
     "'Gemma3ForConditionalGeneration', 'GPT2LMHeadMode",
     "https://github.com/sgl-project/sglang/issues/5441"),
    ("dynamo_lru_cache_warning",
     "/usr/local/lib/python3.12/dist-packages/torch/_dynamo/variables/functions.py:1575: UserWarning: Dynamo "
     "detected a call to a `functools.lru_cache`-wrapped function. Dynamo ignores the cache wrapper and directly "
     "traces the wrapped function. Silent incorrectness is only a *potential* risk, not something we have "
     "observed. Enable TORCH_LOGS=\"+dynamo\" for a DEBUG stack trace.",
     "https://github.com/sgl-project/sglang/pull/10062"),
    # corpus missing_dependency/i3525-docker-outlines-datasets-module-missing.log (fit, cohort 3's change)
    ("missing_dependency",
     "inference_engine  | ModuleNotFoundError: No module named 'datasets'",
     "https://github.com/sgl-project/sglang/issues/3525"),
    # Held-out misses of cohorts 1 and 2, studied and moved to fit to teach these lines
    # (docs/crash-corpus.md, "Cohort 5's change").
    ("sgl_kernel_abi_mismatch",
     "ImportError: /opt/conda/lib/python3.10/site-packages/sgl_kernel/common_ops.abi3.so: undefined symbol: "
     "cuGreenCtxStreamCreate",
     "https://github.com/sgl-project/sglang/issues/8131"),
    ("sgl_kernel_abi_mismatch",
     "- ModuleNotFoundError: No module named 'common_ops'",
     "https://github.com/sgl-project/sglang/pull/13948"),
    ("invalid_device_ordinal",
     "RuntimeError: HIP error: invalid device ordinal",
     "https://github.com/sgl-project/sglang/issues/3200"),
    ("triton_out_of_resources",
     "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 106496, Hardware limit: "
     "101376. Reducing block sizes or `num_stages` may help.",
     "https://github.com/sgl-project/sglang/issues/3451"),
    ("quantization_mismatch",
     "ValueError: Quantization method specified in the model config (awq) does not match the quantization "
     "method specified in the `quantization` argument (awq_marlin).",
     "https://github.com/sgl-project/sglang/issues/1792"),
    ("missing_dependency",
     "ImportError: cannot import name '_set_default_torch_dtype' from 'vllm.model_executor.model_loader' "
     "(/home/jess/.local/lib/python3.10/site-packages/vllm/model_executor/model_loader/__init__.py)",
     "https://github.com/sgl-project/sglang/issues/391"),
    ("missing_dependency",
     'RuntimeError: Form data requires "python-multipart" to be installed.',
     "https://github.com/sgl-project/sglang/issues/949"),
    ("cuda_graph_capture_failed",
     "RuntimeError: CUDA error: operation not permitted when stream is capturing",
     "https://github.com/sgl-project/sglang/issues/7918"),
    ("cuda_device_assert",
     "../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], thread: [4,0,0] Assertion "
     '`-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.',
     "https://github.com/sgl-project/sglang/issues/271"),
    # Studied after cohort 5's first score and moved to fit (docs/crash-corpus.md)
    ("cuda_graph_capture_failed",
     "4. disable cuda graph by --disable-cuda-graph. (Not recommonded. Huge perf loss)",
     "https://github.com/sgl-project/sglang/issues/6218"),
    ("scheduler_exception",
     "[23:17:08 TP4] Exception in run_tp_server:",
     "https://github.com/sgl-project/sglang/issues/1479"),
]


@pytest.mark.parametrize("expected, line, source", SINGLE_LINES,
                         ids=[f"{case[0]}-{i}" for i, case in enumerate(SINGLE_LINES)])
def test_single_line_is_classified(catalog, expected, line, source):
    entry = sglang_crash.match_line(catalog, line, context=([line], 0))
    assert entry is not None, f"no signature matched {line!r} ({source})"
    assert entry["class"] == expected, f"{line!r} ({source})"


def test_every_log_class_has_a_real_line():
    # the FP4 case and a weight-name KeyError need the lines around them (a burst)
    covered = {case[0] for case in SINGLE_LINES} | {"dynamo_fp4_jit", "weights_mismatch"}
    log_classes = {e["class"] for e in sglang_crash.load_catalog(CATALOG_PATH) if e["pattern"] is not None}
    assert log_classes <= covered, log_classes - covered


# --------------------------------------------------------------------------- bursts (a crash prints many lines)

# From https://github.com/sgl-project/sglang/issues/23386 (FlashInfer FP4 JIT under piecewise CUDA
# graph, traceback abridged) with the exception line of the seeds' crash (msg 979/983).
DYNAMO_FP4_BURST = """\
[2026-04-20 10:11:12 TP2] Capture piecewise CUDA graph begin. avail mem=10.55 GB
/usr/local/lib/python3.12/dist-packages/torch/_dynamo/variables/functions.py:1692: UserWarning: Dynamo detected a \
call to a `functools.lru_cache`-wrapped function. Dynamo ignores the cache wrapper and directly traces the wrapped \
function. Silent incorrectness is only a *potential* risk, not something we have observed.
  torch._dynamo.utils.warn_once(msg)
[2026-04-20 10:11:13 TP2] Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/scheduler.py", line 3600, in run_scheduler_process
    scheduler = Scheduler(
torch._dynamo.exc.Unsupported: Attempted to call function marked as skipped
  Explanation: Dynamo developers have intentionally marked that the function `allocate_lock` in file `_thread` \
should not be traced.

from user code:
    "-DENABLE_FP4" if is_cuda_version_at_least("12.8") else "",
  File "/usr/local/lib/python3.12/dist-packages/flashinfer/jit/cpp_ext.py", line 91, in is_cuda_version_at_least
    return get_cuda_version() >= Version(version_str)
  File "/usr/local/lib/python3.12/dist-packages/torch/_dynamo/polyfills/__init__.py", line 264, in getattr_and_trace
    return fn(*args[2:], **kwargs)
  File "/usr/local/lib/python3.12/dist-packages/flashinfer/jit/cpp_ext.py", line 73, in get_cuda_version
    txt = subprocess.check_output([nvcc, "--version"], text=True)
  File "/usr/lib/python3.12/subprocess.py", line 828, in __init__
    self._waitpid_lock = threading.Lock()

Set TORCHDYNAMO_VERBOSE=1 for the internal stack trace (please do this especially if you're reporting a bug to PyTorch).

Piecewise CUDA Graph is enabled by default as an experimental feature.
To work around this error, add --disable-piecewise-cuda-graph to your launch command.
[2026-04-20 10:11:13] Received sigquit from a child process. It usually means the child failed.
"""

# OOM after graph capture began (line shapes from https://github.com/sgl-project/sglang/issues/1751 and
# the torch OOM message format; composed).
OOM_DURING_CAPTURE = """\
[2024-10-22 06:31:49 TP0] Memory pool end. avail mem=8.38 GB
[2024-10-22 06:31:49 TP0] Capture cuda graph begin. This can take up to several minutes.
[2024-10-22 06:31:52 TP0] Scheduler hit an exception: Traceback (most recent call last):
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 94.97 GiB \
of which 1.02 GiB is free.
[2024-10-22 06:31:52] Received sigquit from a child process. It usually means the child failed.
"""

# OOM while loading weights (line shapes from https://github.com/kvcache-ai/ktransformers/issues/1969,
# an SGLang-based server; the OOM line is torch's message format; composed).
OOM_AT_LOAD = """\
[2026-05-16 12:09:37] Load weight begin. avail mem=23.20 GB
[2026-05-16 12:09:37] Detected fp8 checkpoint.
[2026-05-16 12:09:38] Scheduler hit an exception: Traceback (most recent call last):
  File "/root/.venv/lib/python3.12/site-packages/sglang/srt/model_executor/model_runner.py", line 495, in initialize
    self.load_model()
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.75 GiB. GPU 3 has a total capacity of 23.52 GiB \
of which 1.13 GiB is free.
[2026-05-16 12:09:38] Received sigquit from a child process. It usually means the child failed.
"""

GENERIC_SCHEDULER_CRASH = """\
[2026-05-01 10:00:00 TP1] Scheduler hit an exception: Traceback (most recent call last):
  File "/root/ml-env/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 3600, in run_scheduler_process
    scheduler = Scheduler(
AttributeError: 'NoneType' object has no attribute 'shape'
[2026-05-01 10:00:00] Received sigquit from a child process. It usually means the child failed.
"""


@pytest.mark.parametrize(
    "text, expected, expected_line",
    [
        (DYNAMO_FP4_BURST, "dynamo_fp4_jit",
         "torch._dynamo.exc.Unsupported: Attempted to call function marked as skipped"),
        (OOM_DURING_CAPTURE, "cuda_oom_graph_capture", "torch.OutOfMemoryError: CUDA out of memory."),
        (OOM_AT_LOAD, "cuda_oom_load", "torch.OutOfMemoryError: CUDA out of memory."),
        (GENERIC_SCHEDULER_CRASH, "scheduler_exception", "Scheduler hit an exception"),
    ],
    ids=["dynamo-fp4", "oom-capture", "oom-load", "generic"],
)
def test_burst_is_classified_by_the_most_specific_signature(catalog, text, expected, expected_line):
    report = sglang_crash.classify_text(catalog, text)
    assert report is not None
    assert report["crash_class"] == expected
    assert expected_line in report["crash_line"]
    assert report["crash_line"] in report["excerpt"]
    assert report["remedy"]


def test_dynamo_without_fp4_context_is_not_called_fp4(catalog):
    text = DYNAMO_FP4_BURST
    for marker in ("allocate_lock", "fp4", "flashinfer/jit/", "get_cuda_version", "is_cuda_version_at_least"):
        text = "\n".join(line for line in text.splitlines() if marker not in line)
    report = sglang_crash.classify_text(catalog, text)
    assert report["crash_class"] == "dynamo_unsupported"


def test_excerpt_is_about_forty_lines_around_the_match(catalog):
    lines = [f"[2026-05-01 10:00:{i % 60:02d} TP0] filler line {i}" for i in range(100)]
    lines.insert(60, "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)")
    report = sglang_crash.classify_text(catalog, "\n".join(lines))
    excerpt = report["excerpt"].splitlines()
    assert report["crash_line_number"] == 61
    assert len(excerpt) == sglang_crash.DEFAULT_EXCERPT_BEFORE + 1 + sglang_crash.DEFAULT_EXCERPT_AFTER
    assert excerpt[sglang_crash.DEFAULT_EXCERPT_BEFORE] == lines[60]


# The 0.5.17 wording of graph capture, "Capture target decode CUDA graph begin. backend=full, ...":
# the begin line is real SGLang 0.5.17 (recordings/0.5.17-h200-tp1-graphs/server_cudagraph.log), the
# OOM line real torch text (https://github.com/sgl-project/sglang/issues/5285); composed.
OOM_DURING_CAPTURE_0517 = """\
[2026-12-01 08:14:55] Capture target prefill CUDA graph end. elapsed=5.11 s, mem usage=0.14 GB, avail mem=94.85 GB.
[2026-12-01 08:14:55] Capture target decode CUDA graph begin. backend=full, num_tokens_per_req=1, bs=[1, 2, 4, 8, 12, \
16], avail mem=94.85 GB
[2026-12-01 08:14:56] Scheduler hit an exception: Traceback (most recent call last):
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB. GPU 7 has a total capacity of 95.00 GiB \
of which 398.19 MiB is free.
[2026-12-01 08:14:56] SIGQUIT received. signum=None, frame=None. It usually means one child failed.
"""


@pytest.mark.parametrize(
    "begin_line",
    [
        "[2026-12-01 08:14:50] Capture target prefill CUDA graph begin. backend=breakable, num_tokens=[4, 8], "
        "avail mem=94.99 GB",  # 0.5.17 recordings/0.5.17-h200-tp1-graphs/server_cudagraph.log
        "[2026-12-01 08:15:57] Capture target prefill CUDA graph begin. backend=tc_piecewise, num_tokens=[4, 8], "
        "avail mem=94.99 GB",  # 0.5.17 recordings/0.5.17-h200-tp1-graphs/server_tc_piecewise.log
        "[2024-10-22 06:31:49 TP0] Capture cuda graph begin. This can take up to several minutes.",  # sglang#1751
        "[2026-04-20 10:11:12 TP2] Capture piecewise CUDA graph begin. avail mem=10.55 GB",  # 0.5.10.post1
        "[2025-10-16 09:06:22 TP0] Capture cuda graph bs [1, 2, 4, 8, 12, 16, 24, 32]",  # sglang#11716
        "[2026-05-09 12:23:55] Capture cuda graph num tokens [4, 8, 12, 16, 20, 24, 28, 32]",  # sglang#23745
        "Capturing batches (bs=512 avail_mem=3.10 GB):   0%|          | 0/52 [00:04<?, ?it/s]",  # sglang#11275
    ],
    ids=["0.5.17-prefill-breakable", "0.5.17-tc-piecewise", "0.4-begin", "0.5.10-piecewise", "bs", "num-tokens",
         "tqdm"],
)
def test_oom_after_every_releases_capture_wording_is_a_capture_oom(catalog, begin_line):
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 448.00 MiB."
    report = sglang_crash.classify_text(catalog, begin_line + "\n" + oom + "\n")
    assert report["crash_class"] == "cuda_oom_graph_capture", begin_line


def test_0517_capture_oom_burst_names_the_capture_not_the_load(catalog):
    report = sglang_crash.classify_text(catalog, OOM_DURING_CAPTURE_0517)
    assert report["crash_class"] == "cuda_oom_graph_capture"
    assert "CUDA out of memory" in report["crash_line"]
    assert "RAISE" not in report["remedy"] and "Lower --mem-fraction-static" in report["remedy"]
    without_capture = "\n".join(line for line in OOM_DURING_CAPTURE_0517.splitlines() if "CUDA graph" not in line)
    assert sglang_crash.classify_text(catalog, without_capture)["crash_class"] == "cuda_oom_load"


def test_not_enough_memory_remedy_says_raise(catalog):
    line = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    report = sglang_crash.classify_text(catalog, line)
    assert report["crash_class"] == "kv_cache_no_memory"
    assert "RAISE --mem-fraction-static" in report["remedy"]
    assert "LOWER --mem-fraction-static" in sglang_crash.signature_for_class(catalog, "cuda_oom_load")["remedy"]


# Our own SIGTERM, the tail of real SGLang 0.5.17 (recordings/0.5.17-h200-tp1/server_term_idle.log).
SIGTERM_STOP_0517 = """\
[2026-12-01 07:48:01] INFO:     127.0.0.1:49466 - "GET /v1/models HTTP/1.1" 200 OK
[2026-12-01 07:48:01] SIGTERM received. signum=None frame=None. Draining requests and shutting down...
[2026-12-01 07:48:02] Subprocess scheduler_0 (pid=2842) crashed with exit code -15. Triggering SIGQUIT for cleanup...
[2026-12-01 07:48:02] SIGQUIT received. signum=None, frame=None. It usually means one child failed.
[2026-12-01 07:48:02] Sleeping 5 seconds before crash diagnostics to let GPU activity settle.
[2026-12-01 07:48:07] No live scheduler processes found; skipping py-spy and CUDA coredump.
[2026-12-01 07:48:07] kill_process_tree called: parent_pid=2678, include_parent=True, pid=2678
"""


def test_our_sigterm_is_a_stop_not_a_crash(catalog):
    lines = SIGTERM_STOP_0517.splitlines()
    assert sglang_crash.classify_text(catalog, SIGTERM_STOP_0517) is None
    fatal, warnings, _after = sglang_crash.scan_lines(catalog, lines)
    assert fatal is None
    assert {entry["class"] for _pos, entry in warnings} == {"stopped_by_sigterm"}
    outcome = sglang_crash.classify_outcome(catalog, lines)
    assert outcome["outcome"] == sglang_crash.OUTCOME_STOPPED and outcome["fatal"] is False
    assert "SIGTERM received" in outcome["report"]["crash_line"]


def test_the_same_lines_without_our_sigterm_are_a_crash(catalog):
    lines = [line for line in SIGTERM_STOP_0517.splitlines() if "SIGTERM received" not in line]
    outcome = sglang_crash.classify_outcome(catalog, lines)
    assert outcome["outcome"] == sglang_crash.OUTCOME_CRASHED
    assert outcome["report"]["crash_class"] == "scheduler_exception"  # -15 from someone else: generic


def test_a_real_crash_after_our_sigterm_is_still_a_crash(catalog):
    text = SIGTERM_STOP_0517 + "torch.AcceleratorError: CUDA error: an illegal memory access was encountered\n"
    assert sglang_crash.classify_text(catalog, text)["crash_class"] == "cuda_illegal_memory_access"


# Rule 3: root causes over consequences, wherever they stand in the burst.
# https://github.com/sgl-project/sglang/issues/5594 (abridged): an NCCL WARN, then the generic line.
NCCL_WARN_THEN_GENERIC = """\
h100-15:139:1092 [7] socket.c:485 NCCL WARN socketStartConnect: Connect to 10.0.0.82<38455> failed : Software caused \
connection abort
h100-15:139:1092 [7] NCCL INFO transport/net.cc:687 -> 2
h100-15:132:132 [0] NCCL INFO init.cc:1837 -> 2
[2025-04-21 07:28:41 TP0] Scheduler hit an exception: Traceback (most recent call last):
"""


def test_a_hint_before_a_generic_line_names_the_crash(catalog):
    report = sglang_crash.classify_text(catalog, NCCL_WARN_THEN_GENERIC)
    assert report["crash_class"] == "nccl_error"
    assert "NCCL WARN" in report["crash_line"]


def test_a_hint_alone_never_fails_the_wait(catalog):
    first = NCCL_WARN_THEN_GENERIC.splitlines()[0]
    fatal, warnings, _after = sglang_crash.scan_lines(catalog, [first])
    assert fatal is None and [entry["class"] for _p, entry in warnings] == ["nccl_error"]
    assert sglang_crash.classify_text(catalog, first) is None


def test_a_specific_cause_after_the_generic_line_wins(catalog):
    # https://github.com/sgl-project/sglang/issues/4289: traceback, NCCL error, then sigquit.
    text = (
        "[2025-03-11 15:02:50 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)\n"
        "[2025-03-11 15:02:53] Received sigquit from a child process. It usually means the child failed.\n"
    )
    report = sglang_crash.classify_text(catalog, text)
    assert report["crash_class"] == "nccl_error"
    assert report["crash_line_number"] == 2


def test_the_burst_ends_after_burst_after_lines(catalog):
    # A specific line far after the first crash belongs to another event (filler lines: the window).
    lines = ["[2025-03-11 15:02:50 TP0] Scheduler hit an exception: Traceback (most recent call last):"]
    lines += [f"  filler {i}" for i in range(sglang_crash.DEFAULT_BURST_AFTER + 5)]
    lines.append("RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)")
    assert sglang_crash.classify_text(catalog, "\n".join(lines))["crash_class"] == "scheduler_exception"
    lines_near = lines[:10] + lines[-1:]
    assert sglang_crash.classify_text(catalog, "\n".join(lines_near))["crash_class"] == "nccl_error"


def test_gated_repo_burst_is_named_by_its_cannot_access_line(catalog):
    # https://github.com/kyegomez/NeoSapiens/issues/3: the GatedRepoError line (whose own regex was removed,
    # see REMOVED_SIGNATURES) comes with "Cannot access gated repo" in the same traceback.
    text = (
        "huggingface_hub.utils._errors.GatedRepoError: 401 Client Error. (Request ID: "
        "Root=1-661471eb-38c6ceb05c22031f04f730f7;54f54e0f-18d7-4cbf-a882-a291b1abd4b4)\n"
        "Cannot access gated repo for url https://huggingface.co/meta-llama/Llama-2-7b/resolve/main/config.json.\n"
    )
    assert sglang_crash.classify_text(catalog, text)["crash_class"] == "hf_gated_or_offline"


# Lines whose signature was REMOVED from the catalogue: they come from Hugging Face / transformers
# (outside SGLang), and no real SGLang log in the corpus shows them, so nothing proves the regex
# (docs/crash-corpus.md lists them with the rule). Kept here with their sources so that re-adding
# one goes with a real SGLang log in tests/fixtures/crashlogs/.
REMOVED_SIGNATURES = [
    ("hf_gated_or_offline", "GatedRepoError",
     "huggingface_hub.utils._errors.GatedRepoError: 401 Client Error. (Request ID: "
     "Root=1-661471eb-38c6ceb05c22031f04f730f7;54f54e0f-18d7-4cbf-a882-a291b1abd4b4)",
     "https://github.com/kyegomez/NeoSapiens/issues/3"),
    ("hf_gated_or_offline", "LocalEntryNotFoundError",
     "LocalEntryNotFoundError: Cannot find an appropriate cached snapshot folder for the specified revision on "
     "the local disk and outgoing traffic has been disabled. To enable repo look-ups and downloads online, "
     "pass 'local_files_only=False' as input.",
     "https://github.com/harry0703/MoneyPrinterTurbo/issues/196 (completed)"),
    ("model_not_found", "is not a local folder and is not a valid model identifier",
     "OSError: glm-4-9b is not a local folder and is not a valid model identifier listed on "
     "'https://huggingface.co/models' If this is a private repository, make sure to pass a token having "
     "permission to this repo either by logging in with `huggingface-cli login` or by passing `token=<your_token>`",
     "https://github.com/liucongg/ChatGLM-Finetuning/issues/148"),
]


@pytest.mark.parametrize("former_class, regex, line, source", REMOVED_SIGNATURES,
                         ids=[case[1] for case in REMOVED_SIGNATURES])
def test_removed_signatures_are_documented_and_gone(catalog, former_class, regex, line, source):
    doc = (REPO / "docs" / "crash-corpus.md").read_text(encoding="utf-8")
    assert regex in doc, f"docs/crash-corpus.md does not list the removed regex {regex!r}"
    entry = sglang_crash.match_line(catalog, line, context=([line], 0))
    assert entry is None or entry["class"] != former_class, (line, source)


# --------------------------------------------------------------------------- healthy logs

# A normal SGLang start-up, line shapes from https://github.com/sgl-project/sglang/issues/2468,
# https://github.com/sgl-project/sglang/pull/11716, https://github.com/sgl-project/sglang/issues/1751 and
# SGLang 0.5.10.post1's log calls (srt/utils/network.py, srt/utils/watchdog.py, http_server.py).
HEALTHY_LOG = """\
[2026-05-01 10:00:00] server_args=ServerArgs(model_path='lukealonso/GLM-5-NVFP4', tp_size=8, \
mem_fraction_static=0.92, disable_cuda_graph=True, enable_piecewise_cuda_graph=False, watchdog_timeout=300, \
soft_watchdog_timeout=None, nccl_port=None, dist_timeout=None, enable_torch_compile=False)
[2026-05-01 10:00:01] Port 30001 is already in use, trying port 30002
[2026-05-01 10:00:02 TP0] Init torch distributed begin.
NCCL version 2.27.3+cuda12.9
[2026-05-01 10:00:03 TP0] Init torch distributed ends. elapsed=0.20 s, mem usage=0.53 GB
[2026-05-01 10:00:03 TP0] Load weight begin. avail mem=94.44 GB
Loading safetensors checkpoint shards:  50% Completed | 40/80 [01:10<01:10,  1.75s/it]
[2026-05-01 10:03:00 TP0] Using default MoE kernel config. Performance might be sub-optimal! Config file not found \
at /root/ml-env/lib/python3.12/site-packages/sglang/srt/layers/moe/fused_moe_triton/configs/E=257,N=256.json
[2026-05-01 10:03:10 TP0] Load weight end. type=MistralForCausalLM, dtype=torch.bfloat16, avail mem=9.69 GB
[2026-05-01 10:03:11 TP0] KV Cache is allocated. #tokens: 2090100, KV size: 75.24 GB
[2026-05-01 10:03:11 TP0] Memory pool end. avail mem=2.44 GB
[2026-05-01 10:03:11 TP0] Capture cuda graph begin. This can take up to several minutes.
Capturing batches (bs=1 avail_mem=9.86 GB): 100%|██████████| 52/52 [00:08<00:00,  6.45it/s]
[2025-10-16 09:06:30 TP0] Registering 8372 cuda graph addresses
[2026-05-01 10:03:13 TP0] Capture cuda graph end. Time elapsed: 2.19 s. mem usage=1.98 GB. avail mem=9.79 GB.
[2026-05-01 10:03:13 TP0] Capture piecewise CUDA graph begin. avail mem=9.79 GB
/usr/local/lib/python3.12/dist-packages/torch/_dynamo/variables/functions.py:1575: UserWarning: Dynamo detected a \
call to a `functools.lru_cache`-wrapped function. Dynamo ignores the cache wrapper and directly traces the wrapped \
function. Silent incorrectness is only a *potential* risk, not something we have observed.
[2026-05-01 10:03:20 TP0] Capture piecewise CUDA graph end. Time elapsed: 7.00 s. mem usage=0.50 GB.
[2026-05-01 10:03:20 TP0] Watchdog Scheduler initialized.
[2026-05-01 10:03:20 TP0] max_total_num_tokens=56524, max_prefill_tokens=16384, max_running_requests=2049, \
context_len=32768
[2026-05-01 10:03:21] INFO:     Started server process [3831493]
[2026-05-01 10:03:21] INFO:     Waiting for application startup.
[2026-05-01 10:03:21] INFO:     Application startup complete.
[2026-05-01 10:03:21] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2026-05-01 10:03:22] INFO:     127.0.0.1:40418 - "GET /health_generate HTTP/1.1" 503 Service Unavailable
[2026-05-01 10:03:23] INFO:     127.0.0.1:40418 - "GET / HTTP/1.1" 404 Not Found
[2026-05-01 10:03:24] INFO:     127.0.0.1:44632 - "POST /generate HTTP/1.1" 200 OK
[2026-05-01 10:03:24] The server is fired up and ready to roll!
[2026-05-01 10:03:30 TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, \
#running-req: 0, #queue-req: 0
"""


def test_healthy_startup_matches_no_fatal_signature(catalog):
    fatal, warnings, _after = sglang_crash.scan_lines(catalog, HEALTHY_LOG.splitlines())
    assert fatal is None, HEALTHY_LOG.splitlines()[fatal]
    assert sglang_crash.classify_text(catalog, HEALTHY_LOG) is None
    assert [entry["class"] for _pos, entry in warnings] == ["dynamo_lru_cache_warning"]


@pytest.mark.parametrize("line", HEALTHY_LOG.splitlines())
def test_each_healthy_line_is_not_fatal(catalog, line):
    entry = sglang_crash.match_line(catalog, line, after_seen={e["index"] for e in catalog}, context=([line], 0))
    assert entry is None or not entry["fatal"], entry and entry["class"]


# --------------------------------------------------------------------------- the simulator's fault text


def _simulator_faults():
    path = REPO / "simulator" / "sglang_sim" / "faults.py"
    spec = importlib.util.spec_from_file_location("sglang_sim_faults_for_tests", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_simulator_crash_on_load_text_is_dynamo_fp4(catalog):
    faults = _simulator_faults()
    text = "\n".join(faults.dynamo_warning_lines()) + "\n" + faults.dynamo_fp4_traceback()
    assert sglang_crash.classify_text(catalog, text)["crash_class"] == "dynamo_fp4_jit"


def test_simulator_runtime_crash_text_is_illegal_memory_access(catalog):
    faults = _simulator_faults()
    report = sglang_crash.classify_text(catalog, faults.scheduler_runtime_traceback())
    assert report["crash_class"] == "cuda_illegal_memory_access"


# --------------------------------------------------------------------------- bursts by rank, fallback (rules 5, 6)


def test_the_first_failing_rank_names_the_crash(catalog):
    # TP3 fails first with an NCCL error; TP0's CUDA assert comes first in catalog order (rule
    # 3 alone would pick it) but is printed later by another rank: rule 5 gives TP3's cause.
    lines = [
        "[2025-01-01 00:00:00 TP3] Scheduler hit an exception: Traceback (most recent call last):",
        "RuntimeError: NCCL error: unhandled system error (run with NCCL_DEBUG=INFO for details)",
        "[2025-01-01 00:00:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "RuntimeError: CUDA error: device-side assert triggered",
    ]
    report = sglang_crash.classify_text(catalog, "\n".join(lines))
    assert report["crash_class"] == "nccl_error"
    assert report["crash_rank"] == "TP3"
    assert report["root_cause_line"].startswith("RuntimeError: NCCL error: unhandled system error")


@pytest.mark.parametrize(
    "line, rank",
    [
        ("[2025-08-29 20:35:50 DP2 TP2 EP2 PP0] Scheduler hit an exception: x", "DP2 TP2 EP2 PP0"),
        ("026-05-28 00:11:09.816 DP0 TP0 EP0] Scheduler hit an exception: x", "DP0 TP0 EP0"),
        ("[rank3]:[E830 17:28:57.137971692 ProcessGroupNCCL.cpp:1515] [PG 3 Rank 3] x", "rank3"),
        ("2025-08-15 14:25:48] DetokenizerManager hit an exception: Traceback", "detokenizer"),
        ("[2025-01-01 00:00:00] TokenizerManager hit an exception: Traceback", "tokenizer_manager"),
        ("  File \"/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py\", line 1", None),
    ],
)
def test_rank_of_a_line(line, rank):
    assert sglang_crash.rank_of(line) == rank


def test_a_dead_process_without_signature_gets_the_fallback(catalog):
    lines = ["[TP0] Load weight begin.", "Traceback (most recent call last):", "ImportError: libfoo.so: cannot open"]
    dead = sglang_crash.classify_outcome(catalog, lines, exited=True)
    assert dead["outcome"] == sglang_crash.OUTCOME_CRASHED
    report = dead["report"]
    assert report["crash_class"] == "unclassified_crash" and report["fallback"] is True
    assert report["root_cause_line"] == "ImportError: libfoo.so: cannot open"
    assert "report this log" in report["remedy"].lower()
    # the same lines from a live (or still-loading) process stay clean
    assert sglang_crash.classify_outcome(catalog, lines)["outcome"] == sglang_crash.OUTCOME_CLEAN
    # a stop stays a stop, even for a dead process
    stop = ["[2025-01-01] SIGTERM received. signum=15. Draining requests and shutting down..."]
    assert sglang_crash.classify_outcome(catalog, stop, exited=True)["outcome"] == sglang_crash.OUTCOME_STOPPED


def test_the_root_cause_line_survives_long_prefixed_lines():
    # a container-runtime stamp in front of every line, and no exception: the last line stands
    lines = ["2025-07-25T07:53:08.21748708+08:00 stdout F " + "9" * 5000, "Killed"]
    assert sglang_crash.root_cause_line(lines) == (1, "Killed")
    assert sglang_crash.is_exception_line("> [2025-11-06T02:10:00.702Z] KeyError: 'lm_head.weight'")


def test_main_process_lines_are_not_a_rank(catalog):
    # SGLang's time stamp without a rank is the main process (corpus
    # scheduler_exception/i5602-v045post1-rank3-gloo-barrier-tp3.log): it reports the death of a
    # rank ("Received sigquit"), so the first failing rank is the first rank that prints a fatal
    # line after it, not the rank above it.
    main = "[2025-04-21 04:13:43] Received sigquit from a child process. It usually means the child failed."
    assert sglang_crash.rank_of(main) == sglang_crash.MAIN_RANK
    assert not sglang_crash.is_rank(sglang_crash.MAIN_RANK) and not sglang_crash.is_rank(None)
    lines = [
        main,
        "[rank3]:[E421 04:13:43.426633564 ProcessGroupGloo.cpp:143] Rank 3 successfully reached monitoredBarrier, "
        "but received errors while waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.",
        "[2025-04-21 04:13:43 TP3] Scheduler hit an exception: Traceback (most recent call last):",
    ]
    report = sglang_crash.classify_text(catalog, "\n".join(lines))
    assert report["crash_class"] == "scheduler_exception"
    assert report["crash_rank"] == "TP3"
    # the lines below a main-process line belong to it, not to the rank named above it
    ranks = sglang_crash.line_ranks(["[2025-01-01 00:00:00 TP0] x", "  y", main, "  z"])
    assert ranks == ["TP0", "TP0", "main", "main"]


def test_a_cut_excerpt_takes_the_first_rank_named_after_its_first_fatal_line(catalog):
    # corpus piecewise_cuda_graph_failed/pr27811-amd-tcpiecewise-context.log: the excerpt starts
    # inside a rank's hint, before any rank tag; TP7's own failure line is the first failing rank.
    lines = [
        "Piecewise CUDA Graph is enabled by default as an experimental feature.",
        "To work around this error, add --disable-piecewise-cuda-graph to your launch command.",
        "Please report this issue at https://github.com/sgl-project/sglang/issues/new/choose",
        "[2026-06-10 13:08:34 TP7] Piecewise CUDA Graph failed with error: 'TcPiecewiseForwardContext' object has no "
        "attribute 'num_tokens'",
    ]
    report = sglang_crash.classify_text(catalog, "\n".join(lines))
    assert report["crash_class"] == "piecewise_cuda_graph_failed"
    assert report["crash_rank"] == "TP7"
    assert report["root_cause_line"].endswith("object has no attribute 'num_tokens'")


def test_the_fallback_root_cause_without_an_exception_line_is_the_first_error_line(catalog):
    # corpus cuda_device_assert/i271-index-out-of-bounds-model-rpc.log, cut before its exception
    # line: the kernel's assertion says more than the last traceback frame.
    assertion = (
        '../aten/src/ATen/native/cuda/IndexKernel.cu:92: operator(): block: [0,0,0], thread: [4,0,0] Assertion '
        '`-sizes[i] <= index && index < sizes[i] && "index out of bounds"` failed.'
    )
    lines = [
        assertion,
        "Exception in ModelRpcClient:",
        "Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.11/site-packages/sglang/srt/managers/router/model_rpc.py", line 551, '
        "in forward_d",
    ]
    # the kernel's assertion line is a cuda_device_assert signature since i271 moved to fit; it wins
    # over the 0.1.x worker header "Exception in ModelRpcClient:" (generic), and is the root cause
    report = sglang_crash.classify_outcome(catalog, lines, exited=True)["report"]
    assert report["crash_class"] == "cuda_device_assert"
    assert report["root_cause_line"] == assertion
    # rule 6's root cause of the same lines: no exception line, so the first error line (the
    # assertion), not the last traceback frame
    assert sglang_crash.root_cause_line(lines) == (0, assertion)
    headless = [line for line in lines if not line.startswith("Exception in")]
    assert sglang_crash.root_cause_line(headless) == (0, assertion)


@pytest.mark.parametrize(
    "line",
    [
        # corpus cuda_graph_capture_failed/i4205-capture-gloo-connection-closed.log
        "Exception: Capture cuda graph failed: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection cl",
        # corpus dynamo_unsupported/pr10062-tp2-piecewise-get-device-name.log
        "torch._dynamo.exc.Unsupported: torch.* op returned non-Tensor",
    ],
)
def test_bare_and_module_qualified_exceptions_are_exception_lines(line):
    assert sglang_crash.is_exception_line(line)
    assert not sglang_crash.is_exception_line('  File "/x/scheduler.py", line 1, in run_scheduler_process')


def test_a_weight_name_keyerror_in_a_load_path_is_weights_mismatch(catalog):
    # corpus weights_mismatch/i3209-sharded-state-e-score-bias-keyerror.log (fit): the KeyError of a
    # dotted parameter name with the loader's frames around it
    lines = [
        '  File "/sgl-workspace/sglang/python/sglang/srt/model_loader/loader.py", line 605, in load_model',
        "    param_data = state_dict[key].data",
        "KeyError: 'model.layers.10.mlp.experts.e_score_correction_bias'",
    ]
    report = sglang_crash.classify_text(catalog, "\n".join(lines))
    assert report["crash_class"] == "weights_mismatch"
    # the same KeyError without a load frame near it is no weights_mismatch (a request's KeyError)
    alone = sglang_crash.classify_outcome(catalog, lines[-1:], exited=True)["report"]
    assert alone["crash_class"] != "weights_mismatch"


@pytest.mark.parametrize(
    "line, fatal",
    [
        # sglang 0.5.10.post1 / 0.5.17 / 0.5.23 (format rendered): the raises of load_weights / the loader
        ("ValueError: Weight model.layers.0.mlp.gate.e_score_correction_bias not found in params_dict", True),
        ("KeyError: \"Parameter 'lm_head.weight' not found in model.\"", True),
        ("KeyError: \"Parameter 'model.layers.61.eh_proj.weight' not found in MTP model.\"", True),
        ("ValueError: Missing keys ('model.norm.weight',) in loaded state!", True),
        # the warnings of the same wording that skip the weight and load on: a healthy start prints them
        (
            "[2026-01-05 10:00:00 TP0] Parameter model.layers.0.self_attn.k_scale not found in params_dict, "
            "skip loading",
            False,
        ),
        ("[2026-01-05 10:00:00 TP0] Parameter lm_head.weight not found in model.", False),
        ("[2026-01-05 10:00:00 TP0] Parameter model.mtp.weight not found in params_dict", False),
    ],
)
def test_sglangs_own_load_weights_raises_are_weights_mismatch(catalog, line, fatal):
    entry = sglang_crash.match_line(catalog, line, context=([line], 0))
    if fatal:
        assert entry is not None and entry["class"] == "weights_mismatch"
    else:
        assert entry is None or not entry["fatal"], entry and entry["class"]


def test_a_segfault_is_nccl_error_only_with_nccl_frames_near_it(catalog):
    # corpus nccl_error/i2803-dsv3-nccl-sigsegv-gloo-closed.log (fit since the change after cohort 6):
    # UCX's segfault line, then a native backtrace through NCCL's own functions
    lines = [
        " Caught signal 11 (Segmentation fault: address not mapped to object at address 0x3)",
        " 5 0x000000000004f5bd ncclLaunchPrepare()  /dvs/p4/build/sw/gpgpu/nccl/gitfusion/stable/src/enqueue.cc:844",
        "12 0x0000000000044b36 ncclAllGather()  /dvs/p4/build/sw/gpgpu/nccl/gitfusion/stable/src/collectives.cc:26",
    ]
    report = sglang_crash.classify_outcome(catalog, lines, exited=True)["report"]
    assert report["crash_class"] == "nccl_error"
    # the same segfault in another library's frames is not NCCL's
    other = [lines[0], " 5 0x000000000004f5bd at::native::foo()  ???:0"]
    report = sglang_crash.classify_outcome(catalog, other, exited=True)["report"]
    assert report["crash_class"] != "nccl_error"


def test_a_missing_kernel_image_inside_the_capture_wrapper_is_no_kernel_image(catalog):
    # corpus no_kernel_image/i1058-t4-flashinfer-no-kernel-image-capture.log (fit since the change
    # after cohort 6): the cause inside "Capture cuda graph failed: ..." names the crash
    line = (
        "Exception: Capture cuda graph failed: BatchDecodeWithPagedKVCache failed with error no kernel"
        " image is available for execution on the device"
    )
    assert sglang_crash.classify_outcome(catalog, [line], exited=True)["report"]["crash_class"] == "no_kernel_image"
    # another error inside the wrapper keeps the capture class
    other = "Exception: Capture cuda graph failed: Connection closed by peer"
    report = sglang_crash.classify_outcome(catalog, [other], exited=True)["report"]
    assert report["crash_class"] == "cuda_graph_capture_failed"


@pytest.mark.parametrize(
    "line, expected",
    [
        # corpus missing_dependency/i3392-*.log (fit since the change after cohort 6)
        ("AttributeError: module 'vllm._custom_ops' has no attribute 'silu_and_mul'", "missing_dependency"),
        ("AttributeError: module 'torch' has no attribute 'float8_e4m3fn'", "missing_dependency"),
        # sglang's own module lacking a name is a bug of the release, not of the install
        ("AttributeError: module 'sglang.srt.utils' has no attribute 'foo'", None),
        # an object's attribute is not a module's
        ("AttributeError: 'Qwen2_5OmniConfig' object has no attribute 'hidden_size'", None),
    ],
)
def test_a_module_attribute_of_another_package_is_missing_dependency(catalog, line, expected):
    entry = sglang_crash.match_line(catalog, line, context=([line], 0))
    assert (entry and entry["class"]) == expected


def test_a_missing_module_is_missing_dependency_only_as_an_exception_line(catalog):
    # corpus missing_dependency/i350-v01-vllm-input-metadata-module-missing.log (fit): the 0.1.x
    # router's traceback ends in the missing module; the class is the dependency, not the header
    lines = [
        "router init state: Traceback (most recent call last):",
        '  File "/x/site-packages/sglang/srt/models/gemma.py", line 12, in <module>',
        "    from vllm.model_executor.input_metadata import InputMetadata",
        "ModuleNotFoundError: No module named 'vllm.model_executor.input_metadata'",
        "",
        "detoken init state: init ok",
    ]
    report = sglang_crash.classify_outcome(catalog, lines, exited=True)["report"]
    assert report["crash_class"] == "missing_dependency" and report["fallback"] is False
    # real 0.5.17 on the H200 (fit healthy recordings): an optional feature reports the missing
    # module inside parentheses and the server lives on; that is no crash line
    optional = (
        "[2026-12-01 07:45:10] OpenAI Responses API (/v1/responses) disabled: OpenAIServingResponses init "
        "failed (ModuleNotFoundError: No module named 'openai_harmony')"
    )
    entry = sglang_crash.match_line(catalog, optional, context=([optional], 0))
    assert entry is None or not entry["fatal"], entry and entry["class"]


@pytest.mark.parametrize(
    "line",
    [
        # corpus scheduler_exception/i565-v0117-flashinfer-begin-forward-page-size.log (fit)
        "Exception in ControllerSingle:",
        # corpus missing_dependency/i373-v01-vllm-input-metadata-module-missing.log (fit)
        "router init state: Traceback (most recent call last):",
        # corpus scheduler_exception/i7903-xgrammar-recursion-guard-sigquit.log (fit), a traceback
        # pasted without its header
        '  File "~/miniconda3/envs/sglang/lib/python3.10/site-packages/sglang/srt/managers/scheduler.py", line 2747, '
        "in run_scheduler_process",
        # sglang 0.5.10.post1 / 0.5.17 / 0.5.23 srt/ray/scheduler_actor.py (format rendered): a
        # scheduler run as a Ray actor
        "[2026-01-05 10:00:00] Scheduler PP0 TP3 crashed: list index out of range",
    ],
)
def test_old_and_headerless_scheduler_crash_lines_are_generic(catalog, line):
    entry = sglang_crash.match_line(catalog, line, context=([line], 0))
    assert entry is not None and entry["class"] == "scheduler_exception" and entry.get("generic")


@pytest.mark.parametrize(
    "line",
    [
        # the 0.1.x router's healthy start (corpus missing_dependency/i350-*.log, last line)
        "router init state: init ok",
        # a request's traceback on a live server names no scheduler entry frame
        '  File "/sgl-workspace/sglang/python/sglang/srt/entrypoints/openai/serving_chat.py", line 66, in '
        "_convert_to_internal_request",
        # a frame of another function whose name starts the same way
        '  File "/x/sglang/srt/managers/scheduler.py", line 9, in run_scheduler_process_helper',
        # the soft watchdog's py-spy dump of a LIVE scheduler (utils/watchdog.py, 0.5.x) names the
        # same function in py-spy's own format, which is no traceback line
        "    run_scheduler_process (sglang/srt/managers/scheduler.py:2747)",
    ],
)
def test_lines_near_the_old_headers_are_not_crash_lines(catalog, line):
    entry = sglang_crash.match_line(catalog, line, context=([line], 0))
    assert entry is None or not entry["fatal"], entry and entry["class"]


def test_the_ray_actors_crash_line_gives_way_to_a_cause_on_the_same_line(catalog):
    # rule 1: "Scheduler PP0 TP0 crashed: {e}" carries the exception's text; a specific entry
    # that matches it (an OOM at load) comes first in the catalogue
    line = "[2026-01-05 10:00:00] Scheduler PP0 TP0 crashed: CUDA out of memory. Tried to allocate 2.00 GiB."
    assert sglang_crash.match_line(catalog, line, context=([line], 0))["class"] == "cuda_oom_load"


# --------------------------------------------------------------------------- rule 7: which process died

CRASHLOGS = REPO / "tests" / "fixtures" / "crashlogs"


def _corpus_lines(relative):
    return (CRASHLOGS / relative).read_text(encoding="utf-8", errors="replace").splitlines()


@pytest.mark.parametrize(
    "relative, root_cause",
    [
        # a bare NotImplementedError raised under model_runner.py (fit since cohort 5's change)
        ("scheduler_exception/i9652-expert-distribution-notimplemented.log", "NotImplementedError"),
        # C++ frames of the process "sglang::scheduler_TP0", then "Fatal Python error: Aborted"
        ("scheduler_exception/i13016-v055-custom-allreduce-fatal-abort.log", "Fatal Python error: Aborted"),
        # "Fatal Python error: Aborted", then faulthandler's dump with the scheduler's watchdog_thread
        # BELOW it (fit since it was studied after cohort 5's first score)
        ("scheduler_exception/i4673-dp16-fatal-abort-watchdog-thread-dump.log", "Fatal Python error: Aborted"),
    ],
)
def test_a_dead_scheduler_with_no_signature_is_a_scheduler_crash_not_a_fallback(catalog, relative, root_cause):
    lines = _corpus_lines(relative)
    report = sglang_crash.classify_outcome(catalog, lines, exited=True)["report"]
    assert report["crash_class"] == "scheduler_exception" and report["fallback"] is False
    assert report["root_cause_line"].endswith(root_cause)
    # the same log of a live process is clean: an `exited` entry never flags a running server
    assert sglang_crash.classify_outcome(catalog, lines, exited=False)["outcome"] == sglang_crash.OUTCOME_CLEAN
    assert sglang_crash.classify_burst(catalog, lines) is None


def test_a_launch_path_error_of_the_main_process_keeps_the_fallback(catalog):
    # unclassified_crash/i4862 (fit): the model config fails in the main process (launch_server,
    # engine, tokenizer manager): no scheduler frame in its traceback, so the stated fallback
    report = sglang_crash.classify_outcome(
        catalog, _corpus_lines("unclassified_crash/i4862-qwen25-omni-config-no-hidden-size.log"), exited=True
    )["report"]
    assert report["crash_class"] == "unclassified_crash" and report["fallback"] is True


def test_only_the_root_causes_own_traceback_names_the_process(catalog):
    # a scheduler frame in an EARLIER traceback (a warning's) does not make the main process's
    # later error a scheduler crash: the search starts at the root cause's own header
    frame = '  File "/sgl/python/sglang/srt/model_executor/model_runner.py", line 245, in __init__'
    main = _corpus_lines("unclassified_crash/i4862-qwen25-omni-config-no-hidden-size.log")
    lines = ["Traceback (most recent call last):", frame, "UserWarning: something", ""] + main
    report = sglang_crash.classify_outcome(catalog, lines, exited=True)["report"]
    assert report["crash_class"] == "unclassified_crash"
    # and the frame inside it does
    position = next(i for i, line in enumerate(main) if line.startswith("Traceback"))
    inside = main[: position + 1] + [frame] + main[position + 1 :]
    report = sglang_crash.classify_outcome(catalog, inside, exited=True)["report"]
    assert report["crash_class"] == "scheduler_exception" and report["crash_line"] == frame


def test_an_exited_entry_must_be_fatal():
    entry = {"class": "x", "regex": "y", "explanation": "e", "remedy": "r", "fatal": False, "exited": True}
    with pytest.raises(sglang_crash.CatalogError, match="exited"):
        sglang_crash.compile_catalog([entry])


def test_only_the_faulthandler_dump_below_a_fatal_error_counts(catalog):
    # i4673: the scheduler's frames follow "Fatal Python error: Aborted" inside faulthandler's dump;
    # a line that is not part of a dump ends it, and frames after that belong to something else
    lines = _corpus_lines("scheduler_exception/i4673-dp16-fatal-abort-watchdog-thread-dump.log")
    fatal = next(i for i, line in enumerate(lines) if line.startswith("Fatal Python error"))
    assert sglang_crash.exited_match(catalog, lines, fatal) is not None
    cut = lines[: fatal + 1] + ["[2025-03-20 10:00:00] INFO:     127.0.0.1:4000 - \"POST /generate HTTP/1.1\" 200 OK"]
    report = sglang_crash.classify_outcome(catalog, cut + lines[fatal + 1 :], exited=True)["report"]
    assert report["crash_class"] == "unclassified_crash" and report["root_cause_line"] == "Fatal Python error: Aborted"


def _cut_at_top(relative, first):
    """A real log as a paste that starts inside its traceback: from the first line holding
    ``first`` on (no header, no run_scheduler_process frame above it)."""
    lines = _corpus_lines(relative)
    return lines[next(i for i, line in enumerate(lines) if first in line) :]


def test_a_traceback_cut_at_its_top_is_named_by_the_scheduler_code_it_ran(catalog):
    # fit i55 (0.1.x) from its models/llama2.py frame on: no header, no model_rpc.py frame, only
    # model code (models/, layers/) that no process but the scheduler (TP worker) runs
    lines = _cut_at_top("scheduler_exception/i55-run-batch-model-rpc-negative-dimension.log", "models/llama2.py")
    assert sglang_crash.classify_burst(catalog, lines) is None
    report = sglang_crash.classify_outcome(catalog, lines, exited=True)["report"]
    assert report["crash_class"] == "scheduler_exception" and report["fallback"] is False
    assert "models/llama2.py" in report["crash_line"]
    assert report["root_cause_line"].startswith("RuntimeError: Trying to create tensor with negative dimension")
    # the same lines of a live process stay clean
    assert sglang_crash.classify_outcome(catalog, lines, exited=False)["outcome"] == sglang_crash.OUTCOME_CLEAN


@pytest.mark.parametrize(
    "relative",
    [
        "unclassified_crash/i4862-qwen25-omni-config-no-hidden-size.log",
        # the main process's launch path calls layers/quantization/gptq.py from the model config:
        # its frames are vetoed by the launch-path frames of the same traceback (`unless`)
        "unclassified_crash/i7583-v048-qwen3-gptq-check-marlin-nameerror.log",
    ],
)
def test_model_code_called_from_the_launch_path_keeps_the_fallback(catalog, relative):
    report = sglang_crash.classify_outcome(catalog, _corpus_lines(relative), exited=True)["report"]
    assert report["crash_class"] == "unclassified_crash" and report["fallback"] is True


def test_an_import_time_frame_does_not_name_the_scheduler(catalog):
    # every process imports the model code: a frame "in <module>" says nothing about which died
    frame = '  File "/sgl/python/sglang/srt/layers/logits_processor.py", line 3, in <module>'
    lines = ["Traceback (most recent call last):", frame, "    import foo", "ImportError: libfoo.so: cannot open"]
    report = sglang_crash.classify_outcome(catalog, lines, exited=True)["report"]
    assert report["crash_class"] == "unclassified_crash"
    runtime = lines[:1] + [frame.replace("<module>", "forward")] + lines[2:]
    report = sglang_crash.classify_outcome(catalog, runtime, exited=True)["report"]
    assert report["crash_class"] == "scheduler_exception"


@pytest.mark.parametrize(
    "frame",
    [
        # 0.5.10.post1's scheduler mixins, 0.5.17 / 0.5.23's scheduler_components, 0.2.x's controller
        '  File "/sgl/python/sglang/srt/managers/scheduler_output_processor_mixin.py", line 200, '
        "in process_batch_result_decode",
        '  File "/sgl/python/sglang/srt/managers/scheduler_components/batch_result_processor.py", line 88, in process',
        '  File "/env/lib/python3.10/site-packages/sglang/srt/managers/controller/tp_worker.py", line 188, '
        "in exposed_step",
        '  File "/sgl/python/sglang/srt/model_executor/cuda_graph_runner.py", line 310, in capture',
    ],
)
def test_scheduler_only_frames_of_every_layout_name_a_dead_scheduler(catalog, frame):
    lines = ["Traceback (most recent call last):", frame, "    x()", "ValueError: bad"]
    report = sglang_crash.classify_outcome(catalog, lines, exited=True)["report"]
    assert report["crash_class"] == "scheduler_exception" and report["crash_line"] == frame


def test_unless_belongs_to_exited_entries_only():
    entry = {"class": "x", "regex": "y", "explanation": "e", "remedy": "r", "fatal": True, "unless": "z"}
    with pytest.raises(sglang_crash.CatalogError, match="unless"):
        sglang_crash.compile_catalog([entry])


def _dump_without_sglang_frames():
    # fit i4673: "Fatal Python error: Aborted" and its second thread only (linecache / traceback
    # frames, no frame of SGLang's): the dump of a process whose own code is not in sight
    lines = _corpus_lines("scheduler_exception/i4673-dp16-fatal-abort-watchdog-thread-dump.log")
    fatal = next(i for i, line in enumerate(lines) if line.startswith("Fatal Python error"))
    second = next(i for i, line in enumerate(lines) if i > fatal + 2 and line.startswith("Thread 0x"))
    dump = lines[second : second + 6]
    assert not any("sglang" in line for line in dump)
    return lines[: fatal + 2] + dump


def test_a_faulthandler_dump_names_a_scheduler_side_process(catalog):
    # SGLang turns faulthandler on in the scheduler and the DP controller only: a fatal signal's
    # thread dump right below "Fatal Python error" is theirs, even when it shows none of their frames
    lines = _dump_without_sglang_frames()
    assert sglang_crash.classify_burst(catalog, lines) is None
    report = sglang_crash.classify_outcome(catalog, lines, exited=True)["report"]
    assert report["crash_class"] == "scheduler_exception" and report["fallback"] is False
    assert report["crash_line"].startswith("Thread 0x") and report["root_cause_line"] == "Fatal Python error: Aborted"
    assert sglang_crash.classify_outcome(catalog, lines, exited=False)["outcome"] == sglang_crash.OUTCOME_CLEAN


def test_a_dump_of_the_launch_path_or_far_from_its_fatal_line_names_no_process(catalog):
    lines = _dump_without_sglang_frames()
    # a main process run with PYTHONFAULTHANDLER=1: its main thread shows the launch path (`unless`)
    launch = lines + ['  File "/sgl/python/sglang/launch_server.py", line 14 in <module>']
    assert sglang_crash.classify_outcome(catalog, launch, exited=True)["report"]["crash_class"] == "unclassified_crash"
    # a thread header that is not the one right below the fatal line (`near`, 3 lines)
    fatal = next(i for i, line in enumerate(lines) if line.startswith("Fatal Python error"))
    far = lines[: fatal + 1] + [""] * 4 + lines[fatal + 1 :]
    assert sglang_crash.classify_outcome(catalog, far, exited=True)["report"]["crash_class"] == "unclassified_crash"
