# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator's own knobs, read from SGLANG_SIM_* environment variables.

The command line mirrors SGLang's exactly, so everything that is the
simulator's own (load time, speed, faults, GPU mode) comes from the
environment. ``parse_env`` is pure: it takes a mapping and returns a frozen
SimConfig or raises ConfigError with a one-line message.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

FAULTS = (
    "crash_on_load",
    "crash_after_requests",
    "hang",
    "ignore_sigterm",
    "port_in_use",
)

DEFAULT_LOAD_SECONDS = 2.0
DEFAULT_SPEED = 1.0
DEFAULT_FAULT_AFTER = 10
# SGLANG_SIM_NUMERICS: greedy outputs as the "exact" arithmetic gives them, or "perturbed", a
# stand-in for a tier that changes the arithmetic (numerics.py). SYNTHETIC either way.
NUMERICS = ("exact", "perturbed")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"", "0", "false", "no", "off"}
# SGLang's own variables (EnvBool, default True since 0.5.11; srt/environ.py): with either on, the
# main process sleeps 5 s before its crash diagnostics when a child fails while serving.
CRASH_DIAGNOSTICS_VARS = ("SGLANG_PYSPY_DUMP_BEFORE_CRASH", "SGLANG_CUDA_COREDUMP_BEFORE_CRASH")
_SGLANG_TRUE = {"true", "1", "yes", "y"}
_SGLANG_FALSE = {"false", "0", "no", "n"}


class ConfigError(ValueError):
    """An SGLANG_SIM_* variable has a value the simulator cannot use."""


@dataclass(frozen=True)
class GpuConfig:
    """GPU mode: hold real device memory and/or run one NCCL all-reduce."""

    mem_mb: int = 0
    nccl_allreduce: bool = False

    @property
    def enabled(self) -> bool:
        return self.mem_mb > 0 or self.nccl_allreduce


@dataclass(frozen=True)
class SimConfig:
    load_seconds: float = DEFAULT_LOAD_SECONDS
    speed: float = DEFAULT_SPEED
    faults: frozenset[str] = field(default_factory=frozenset)
    fault_after: int = DEFAULT_FAULT_AFTER
    tokenizer: str | None = None
    gpu: GpuConfig = field(default_factory=GpuConfig)
    crash_diagnostics: bool = True  # SGLang's SGLANG_PYSPY_DUMP_BEFORE_CRASH / ..._CUDA_COREDUMP_...
    numerics: str = "exact"  # SGLANG_SIM_NUMERICS

    @property
    def diagnostics_sleep_seconds(self) -> float:
        """SGLang's 5 s sleep before crash diagnostics, divided by SGLANG_SIM_SPEED (0 when off)."""
        return 5.0 / self.speed if self.crash_diagnostics else 0.0

    def has(self, fault: str) -> bool:
        return fault in self.faults

    def describe(self) -> dict:
        """JSON-ready summary for /server_info."""
        return {
            "load_seconds": self.load_seconds,
            "speed": self.speed,
            "faults": sorted(self.faults),
            "fault_after": self.fault_after if self.has("crash_after_requests") else None,
            "tokenizer": self.tokenizer,
            "gpu_mem_mb": self.gpu.mem_mb,
            "nccl_allreduce": self.gpu.nccl_allreduce,
            "crash_diagnostics_sleep_s": self.diagnostics_sleep_seconds,
            "numerics": self.numerics,
        }


def _number(env: Mapping[str, str], name: str, default: float, minimum: float,
            strict: bool = False) -> float:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a number") from None
    if not math.isfinite(value):
        raise ConfigError(f"{name}={raw!r} must be a finite number")
    if value < minimum or (strict and value == minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise ConfigError(f"{name}={raw!r} must be {bound}")
    return value


def _integer(env: Mapping[str, str], name: str, default: int, minimum: int) -> int:
    raw = env.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not an integer") from None
    if value < minimum:
        raise ConfigError(f"{name}={raw!r} must be >= {minimum}")
    return value


def _boolean(env: Mapping[str, str], name: str) -> bool:
    raw = env.get(name, "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ConfigError(f"{name}={env.get(name)!r} is not a boolean (use 1 or 0)")


def _sglang_boolean(env: Mapping[str, str], name: str, default: bool) -> bool:
    """SGLang's EnvBool: unset is the default; true/1/yes/y or false/0/no/n, any case."""
    raw = env.get(name)
    if raw is None or raw.strip() == "":
        return default
    value = raw.strip().lower()
    if value in _SGLANG_TRUE:
        return True
    if value in _SGLANG_FALSE:
        return False
    raise ConfigError(f"{name}={raw!r} is not a valid boolean value (SGLang's EnvBool)")


def parse_faults(raw: str) -> frozenset[str]:
    """'hang, ignore_sigterm' -> {'hang', 'ignore_sigterm'}; unknown names fail."""
    names = [part.strip() for part in raw.split(",") if part.strip()]
    unknown = [name for name in names if name not in FAULTS]
    if unknown:
        raise ConfigError(
            f"SGLANG_SIM_FAULT names unknown fault(s) {', '.join(unknown)}; "
            f"known: {', '.join(FAULTS)}"
        )
    return frozenset(names)


def parse_numerics(raw: str) -> str:
    """'' -> 'exact'; 'exact' or 'perturbed'; anything else fails."""
    value = raw.strip().lower() or "exact"
    if value not in NUMERICS:
        raise ConfigError(f"SGLANG_SIM_NUMERICS={raw!r} is not one of {', '.join(NUMERICS)}")
    return value


def parse_env(env: Mapping[str, str]) -> SimConfig:
    """Build the SimConfig from an environment mapping."""
    return SimConfig(
        load_seconds=_number(env, "SGLANG_SIM_LOAD_SECONDS", DEFAULT_LOAD_SECONDS, 0.0),
        speed=_number(env, "SGLANG_SIM_SPEED", DEFAULT_SPEED, 0.0, strict=True),
        faults=parse_faults(env.get("SGLANG_SIM_FAULT", "")),
        fault_after=_integer(env, "SGLANG_SIM_FAULT_AFTER", DEFAULT_FAULT_AFTER, 0),
        tokenizer=env.get("SGLANG_SIM_TOKENIZER") or None,
        gpu=GpuConfig(
            mem_mb=_integer(env, "SGLANG_SIM_GPU_MEM_MB", 0, 0),
            nccl_allreduce=_boolean(env, "SGLANG_SIM_NCCL_ALLREDUCE"),
        ),
        crash_diagnostics=any([_sglang_boolean(env, name, True) for name in CRASH_DIAGNOSTICS_VARS]),
        numerics=parse_numerics(env.get("SGLANG_SIM_NUMERICS", "")),
    )
