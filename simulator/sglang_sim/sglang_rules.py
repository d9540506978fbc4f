# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What SGLang decides from its server args, release by release, with the source of each rule.

Pure functions, unit-tested. Two families of SGLang are told apart by the flag manifest's
``sglang_version``:

- **0.5.10.post1 and older** ("the pin"): rules and log wording from that wheel's sources
  (``srt/server_args.py``, ``srt/model_executor/model_runner.py``, ``cuda_graph_runner.py``,
  ``model_runner_kv_cache_mixin.py``, ``http_server.py``, ``utils/common.py``).
- **newer** (0.5.11 on): what real SGLang 0.5.17 did on an H200
  (``tests/fixtures/real-sglang/probe-0.5.17-h200-tp1*``), and where the recordings are silent,
  0.5.23's sources (``srt/arg_groups/cuda_graph_hook.py``,
  ``srt/model_executor/model_runner_components/cuda_graph_setup.py``,
  ``srt/mem_cache/kv_cache_configurator.py``). The checkout has no manifest of 0.5.11 to 0.5.16;
  they are treated as new.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

NEW_FAMILY_SINCE = (0, 5, 11)

# --- versions -------------------------------------------------------------------------


def version_key(version: str | None) -> tuple[int, ...]:
    """'0.5.10.post1' -> (0, 5, 10, 1); '0.5.23' -> (0, 5, 23, 0); None or junk -> (0,)."""
    match = re.match(r"^\s*(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?", str(version or ""))
    if not match:
        return (0,)
    major, minor, patch, post = match.groups()
    return (int(major), int(minor), int(patch or 0), int(post or 0))


def is_new_family(version: str | None) -> bool:
    """True for SGLang 0.5.11 and later (0.5.17's recorded wording), False for the pin and older."""
    return version_key(version)[:3] >= NEW_FAMILY_SINCE


# --- shared helpers ---------------------------------------------------------------------


def _int(args: Mapping[str, Any], key: str, default: int = 0) -> int:
    value = args.get(key)
    try:
        return default if value is None else int(value)
    except (TypeError, ValueError):
        return default


# --- piecewise CUDA graph of the pin (0.5.10.post1) -----------------------------------------

# 0.5.10.post1 srt/configs/model_config.py: piecewise_cuda_graph_disabled_model_archs
PIECEWISE_DISABLED_ARCHS = (
    "DeepseekV32ForCausalLM",
    "Qwen3NextForCausalLM",
    "GlmMoeDsaForCausalLM",  # GLM-5
    "BailingMoeV2_5ForCausalLM",
    "LLaDAModelLM",
)
# 0.5.10.post1 srt/configs/model_config.py: is_deepseek_nsa (first architecture, with index_topk)
NSA_ARCHS = (
    "DeepseekV3ForCausalLM",
    "DeepseekV32ForCausalLM",
    "DeepseekV3ForCausalLMNextN",
    "MistralLarge3ForCausalLM",
    "PixtralForConditionalGeneration",
    "GlmMoeDsaForCausalLM",
)
PIECEWISE_DISABLED_LINE = "Disable piecewise CUDA graph because --disable-piecewise-cuda-graph is set"


def piecewise_auto_disable_reasons(args: Mapping[str, Any], model_config: Mapping[str, Any]) -> list[str]:
    """Why 0.5.10.post1's ServerArgs._handle_piecewise_cuda_graph turns the piecewise CUDA graph
    off (empty: it stays on). ``--enforce-piecewise-cuda-graph`` skips every rule. Rules that need
    the real model or hardware (multimodal, GGUF files, non-CUDA devices) are left out."""
    if args.get("enforce_piecewise_cuda_graph"):
        return []
    archs = [str(a) for a in (model_config.get("architectures") or [])]
    reasons = []
    if any(a in PIECEWISE_DISABLED_ARCHS for a in archs) or (
        archs and archs[0] in NSA_ARCHS and model_config.get("index_topk") is not None
    ):
        reasons.append(f"model architecture {archs[0]}")
    checks = (
        ("speculative decoding", args.get("speculative_algorithm") is not None),
        ("DP attention", bool(args.get("enable_dp_attention"))),
        ("torch.compile", bool(args.get("enable_torch_compile"))),
        ("pipeline parallelism", _int(args, "pp_size", 1) > 1),
        ("MoE A2A backend", str(args.get("moe_a2a_backend") or "none") != "none"),
        ("LoRA", bool(args.get("lora_paths") or args.get("enable_lora"))),
        ("GGUF", args.get("load_format") == "gguf" or args.get("quantization") == "gguf"),
        ("DLLM", args.get("dllm_algorithm") is not None),
        ("CPU offload", float(args.get("cpu_offload_gb") or 0) > 0
         or bool(args.get("enable_hierarchical_cache"))),
        ("deterministic inference", bool(args.get("enable_deterministic_inference"))),
        ("PD disaggregation", str(args.get("disaggregation_mode") or "null") != "null"),
        ("symmetric memory", bool(args.get("enable_symm_mem"))),
        ("expert distribution recorder", bool(args.get("enable_eplb"))
         or args.get("expert_distribution_recorder_mode") is not None),
        ("context parallel", _int(args, "attn_cp_size", 1) > 1),
    )
    reasons.extend(name for name, hit in checks if hit)
    return reasons


def pin_graph_plan(args: Mapping[str, Any], model_config: Mapping[str, Any]) -> dict[str, Any]:
    """0.5.10.post1: whether the decode CUDA graph and the piecewise CUDA graph are captured, and
    the lines the main process logs while resolving the server args.

    ``--disable-cuda-graph`` skips the decode capture without a line (model_runner.init_cuda_graphs
    returns). The piecewise graph is off with ``--disable-piecewise-cuda-graph`` or an auto-disable
    rule; either way init_piecewise_cuda_graphs logs PIECEWISE_DISABLED_LINE, since the rules set
    that flag. The MoE runner rule (server_args.py, _handle_moe_kernel_config) logs its own line.
    """
    main_lines = []
    piecewise = not args.get("disable_piecewise_cuda_graph")
    reasons = piecewise_auto_disable_reasons(args, model_config)
    if reasons:
        piecewise = False
    archs = [str(a) for a in (model_config.get("architectures") or [])]
    backend = args.get("moe_runner_backend")
    if (not args.get("enforce_piecewise_cuda_graph") and backend in ("flashinfer_trtllm", "flashinfer_mxfp4")
            and (archs[:1] or [""])[0] != "GptOssForCausalLM"):
        piecewise = False
        reasons.append(f"MoE runner backend {backend}")
        main_lines.append(
            f"Piecewise cuda graph is disabled for MoE runner backend '{backend}' (bypassed topk "
            "is incompatible with torch.compile)."
        )
    return {
        "decode": not args.get("disable_cuda_graph"),
        "piecewise": piecewise,
        "piecewise_reasons": reasons,
        "main_lines": main_lines,
    }


# --- prefill and decode CUDA graphs of the new family (0.5.17 recorded, 0.5.23 sources) -----

DEFAULT_PREFILL_BACKEND = "breakable"  # recorded: "Capture target prefill CUDA graph begin. backend=breakable"
DEFAULT_DECODE_BACKEND = "full"  # recorded: "Capture target decode CUDA graph begin. backend=full"
PREFILL_DISABLED_LINE = (
    "Disable prefill CUDA graph because cuda_graph_config resolved prefill.backend='disabled' "
    "(e.g. via --cuda-graph-backend-prefill=disabled or auto-disable rules)."
)
_VALIDATED_A2A = ("none", "deepep", "megamoe", "flashinfer")


def prefill_capture_sizes(max_bs: int) -> list[int]:
    """0.5.23 generate_prefill_cuda_graph_batch_sizes; max 8192 gives 0.5.17's recorded list."""
    sizes = (
        list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
        + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_bs + 1, 512))
    )
    return [s for s in sizes if s <= max_bs]


def decode_capture_sizes(max_bs: int, padding_disabled: bool = False, speculative: bool = False) -> list[int]:
    """0.5.23 generate_decode_cuda_graph_batch_sizes (max 16 gives 0.5.17's [1, 2, 4, 8, 12, 16])."""
    if padding_disabled:
        sizes = list(range(1, max_bs + 1))
    elif not speculative:
        sizes = ([1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 512, 16))
                 + list(range(512, max_bs + 1, 32)))
    else:
        sizes = (list(range(1, 9)) + list(range(10, 33, 2)) + list(range(40, 65, 4)) + list(range(72, 257, 8))
                 + list(range(272, max_bs + 1, 16)))
    sizes = [s for s in sizes if s <= max_bs]
    if max_bs not in sizes:
        sizes.append(max_bs)
    return sizes


def new_graph_plan(args: Mapping[str, Any]) -> dict[str, Any]:
    """The new family's prefill and decode capture: backends, sizes, and the lines the main
    process logs while resolving them (0.5.23 arg_groups/cuda_graph_hook.py).

    Precedence as parse_cuda_graph_config: --disable-cuda-graph < --disable-{prefill,decode}-cuda-graph
    < --cuda-graph-backend-{prefill,decode}. A prefill backend that any of them set is locked: the
    auto-disable rules (apply_cuda_graph_compatibility) skip it. torch.compile, DP attention and
    GLM-5 do not turn the prefill graph off here: 0.5.17 captured backend=breakable under
    --enable-torch-compile (recorded), and 0.5.23 has no such rule.
    """
    prefill = decode = None
    if args.get("disable_cuda_graph"):
        prefill = decode = "disabled"
    if args.get("disable_prefill_cuda_graph"):
        prefill = "disabled"
    if args.get("disable_decode_cuda_graph"):
        decode = "disabled"
    if args.get("cuda_graph_backend_prefill"):
        prefill = str(args["cuda_graph_backend_prefill"])
    if args.get("cuda_graph_backend_decode"):
        decode = str(args["cuda_graph_backend_decode"])
    locked = prefill is not None
    prefill = prefill or DEFAULT_PREFILL_BACKEND
    decode = decode or DEFAULT_DECODE_BACKEND
    main_lines: list[str] = []
    if not locked:
        if _int(args, "pp_size", 1) > 1 and prefill == "breakable":
            main_lines.append(
                "Disabling breakable prefill CUDA graph by default for pipeline parallelism. "
                "Set --cuda-graph-backend-prefill=breakable to opt in."
            )
            prefill = "disabled"
        elif prefill == "breakable":
            rules = (
                (None, _int(args, "attn_cp_size", 1) > 1),
                ("decode context parallel (dcp_size > 1)", _int(args, "dcp_size", 1) > 1),
                ("two-batch overlap", bool(args.get("enable_two_batch_overlap"))),
                ("unvalidated a2a backend", str(args.get("moe_a2a_backend") or "none") not in _VALIDATED_A2A),
            )
            for name, hit in rules:
                if hit:
                    if name is not None:
                        main_lines.append(
                            f"Breakable CUDA graph is incompatible with {name}; disabling prefill CUDA graph."
                        )
                    prefill = "disabled"
                    break
    prefill_max = _int(args, "cuda_graph_max_bs_prefill") or _int(args, "chunked_prefill_size") or 8192
    decode_max = _int(args, "cuda_graph_max_bs_decode") or _int(args, "cuda_graph_max_bs") or 256
    return {
        "prefill": prefill,
        "decode": decode,
        "prefill_num_tokens": prefill_capture_sizes(prefill_max),
        "decode_bs": decode_capture_sizes(decode_max, bool(args.get("disable_cuda_graph_padding")),
                                          args.get("speculative_algorithm") is not None),
        "main_lines": main_lines,
    }


# --- KV cache: --mem-fraction-static too small ------------------------------------------------


def kv_cache_shortfall(pre_load_gb: float, weights_gb: float, fraction: float) -> dict[str, float] | None:
    """SGLang's check after the weights are loaded (0.5.23 kv_cache_configurator
    _profile_available_bytes; 0.5.10.post1 profile_max_num_token): the KV cache gets
    ``available - pre * (1 - fraction)`` with ``available = pre - weights``; zero or less is fatal.
    Returns None when there is room, else the minimum viable fraction and SGLang's suggestion."""
    available = pre_load_gb - weights_gb
    rest = available - pre_load_gb * (1 - fraction)
    if rest > 0:
        return None
    minimum = 1 - available / pre_load_gb
    return {"minimum": minimum, "suggested": -(-minimum * 1000 // 1) / 1000}


def kv_cache_error(new_family: bool, fraction: float, shortfall: dict[str, float]) -> tuple[str, str]:
    """(exception class, message) that SGLang raises for a KV cache without memory."""
    if new_family:  # recorded: server_tiny_mem.log
        return "ValueError", (
            f"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={fraction}. "
            f"Raise --mem-fraction-static above {shortfall['suggested']:.3f} (minimum viable = "
            f"1 - available/pre = {shortfall['minimum']:.4f}). If using speculative decoding, "
            "draft weights are now counted."
        )
    # 0.5.10.post1 model_runner_kv_cache_mixin.MemoryPoolConfig.__post_init__
    return "RuntimeError", (
        "Not enough memory. Please try to increase --mem-fraction-static. "
        f"Current value: mem_fraction_static={fraction}"
    )


# --- streamed errors ------------------------------------------------------------------------------


def stream_error_body(new_family: bool, message: str, status: int = 400) -> dict[str, Any]:
    """The ``data:`` chunk of a streamed /generate that fails validation (http_server.py
    stream_results): 0.5.10.post1 sends the message only; 0.5.17 (recorded) adds type, code and
    retryable."""
    if not new_family:
        return {"error": {"message": message}}
    return {"error": {"message": message, "type": "invalid_request_error", "code": status, "retryable": False}}
