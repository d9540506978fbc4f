# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which scheduler processes SGLang starts for a set of server args.

Mirrors SGLang 0.5.10's launch logic (entrypoints/engine.py,
managers/data_parallel_controller.py, managers/scheduler.py
configure_scheduler): ranks, GPU ids, log prefixes and process titles.
Pure functions, unit-tested.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SchedulerSpec:
    """One scheduler process."""

    index: int  # position among all schedulers (NCCL rank in GPU mode)
    tp_rank: int
    pp_rank: int
    dp_rank: int | None
    attn_cp_rank: int
    moe_dp_rank: int
    moe_ep_rank: int
    gpu_id: int
    prefix: str  # log prefix, e.g. " DP0 TP1" (SGLang's configure_scheduler)

    @property
    def title(self) -> str:
        """setproctitle value: sglang::scheduler, sglang::scheduler_TP3, ..."""
        return "sglang::scheduler" + self.prefix.replace(" ", "_")

    @property
    def is_first(self) -> bool:
        """Rank that logs the once-per-server lines (tp_rank 0 of its group)."""
        return self.tp_rank == 0


@dataclass(frozen=True)
class Topology:
    schedulers: tuple[SchedulerSpec, ...]
    dp_size: int
    uses_dp_controller: bool

    @property
    def world_size(self) -> int:
        return len(self.schedulers)


def _int(args: Mapping[str, Any], key: str, default: int) -> int:
    value = args.get(key)
    return default if value is None else int(value)


def _prefix(args: Mapping[str, Any], dp_rank, pp_rank, attn_cp_rank, moe_dp_rank,
            tp_rank, ep_rank) -> str:
    prefix = ""
    if dp_rank is not None:
        prefix += f" DP{dp_rank}"
    if _int(args, "pp_size", 1) > 1:
        prefix += f" PP{pp_rank}"
    if _int(args, "attn_cp_size", 1) > 1:
        prefix += f" ATTN_CP{attn_cp_rank}"
    if _int(args, "moe_dp_size", 1) > 1:
        prefix += f" MOE_DP{moe_dp_rank}"
    if _int(args, "tp_size", 1) > 1:
        prefix += f" TP{tp_rank}"
    if _int(args, "ep_size", 1) > 1:
        prefix += f" EP{ep_rank}"
    return prefix


def _parallel_ranks(args: Mapping[str, Any], tp_rank: int) -> tuple[int, int, int]:
    """attn_cp_rank, moe_dp_rank, moe_ep_rank as SGLang computes them."""
    tp = _int(args, "tp_size", 1)
    dp = _int(args, "dp_size", 1) if args.get("enable_dp_attention") else 1
    cp = _int(args, "attn_cp_size", 1)
    moe_dp = _int(args, "moe_dp_size", 1)
    ep = _int(args, "ep_size", 1)
    attn_tp = max(tp // dp // cp, 1)
    attn_cp_rank = (tp_rank // attn_tp) % cp
    moe_dp_rank = tp_rank // max(tp // moe_dp, 1)
    moe_ep_rank = tp_rank % max(tp // moe_dp, 1) // max(tp // moe_dp // ep, 1)
    return attn_cp_rank, moe_dp_rank, moe_ep_rank


def build_topology(args: Mapping[str, Any]) -> Topology:
    """Scheduler processes for one node (node_rank 0 of nnodes 1)."""
    tp = _int(args, "tp_size", 1)
    pp = _int(args, "pp_size", 1)
    dp = _int(args, "dp_size", 1)
    if tp < 1 or pp < 1 or dp < 1:
        raise ValueError("tp_size, pp_size and dp_size must be >= 1")
    base = _int(args, "base_gpu_id", 0)
    step = _int(args, "gpu_id_step", 1)
    dp_attention = bool(args.get("enable_dp_attention"))

    specs: list[SchedulerSpec] = []

    def add(tp_rank, pp_rank, dp_rank, group_base):
        cp_rank, moe_dp_rank, ep_rank = _parallel_ranks(args, tp_rank)
        specs.append(
            SchedulerSpec(
                index=len(specs),
                tp_rank=tp_rank,
                pp_rank=pp_rank,
                dp_rank=dp_rank,
                attn_cp_rank=cp_rank,
                moe_dp_rank=moe_dp_rank,
                moe_ep_rank=ep_rank,
                gpu_id=base + group_base + pp_rank * tp + tp_rank * step,
                prefix=_prefix(args, dp_rank, pp_rank, cp_rank, moe_dp_rank, tp_rank, ep_rank),
            )
        )

    if dp == 1:
        for pp_rank in range(pp):
            for tp_rank in range(tp):
                add(tp_rank, pp_rank, None, 0)
    elif dp_attention:
        attn_tp = max(tp // dp, 1)
        for pp_rank in range(pp):
            for tp_rank in range(tp):
                add(tp_rank, pp_rank, tp_rank // attn_tp, 0)
    else:
        for dp_rank in range(dp):
            for pp_rank in range(pp):
                for tp_rank in range(tp):
                    add(tp_rank, pp_rank, dp_rank, dp_rank * tp * pp)
    return Topology(schedulers=tuple(specs), dp_size=dp, uses_dp_controller=dp > 1)
