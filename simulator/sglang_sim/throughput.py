# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The simulator's SYNTHETIC speed model (see throughput_model.yml).

Pure functions: load the table, match it against parsed server args, and
return the iteration times the engine sleeps for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

MODEL_FILE = Path(__file__).resolve().parent / "throughput_model.yml"


def load_table(path: Path = MODEL_FILE) -> dict[str, Any]:
    with open(path, encoding="utf-8") as handle:
        table = yaml.safe_load(handle)
    if not isinstance(table, dict) or "model" not in table:
        raise ValueError(f"{path}: expected a mapping with a 'model' key")
    table.setdefault("flag_effects", [])
    return table


def effect_matches(effect: Mapping[str, Any], args: Mapping[str, Any]) -> bool:
    """Does one flag_effects entry apply to these server args?"""
    value = args.get(effect["dest"])
    when = effect.get("when", True)
    if when == "set":
        return value is not None and value is not False
    if isinstance(when, bool):
        return bool(value) is when
    if isinstance(value, str) or isinstance(when, str):
        return str(value) == str(when)
    return value == when


@dataclass(frozen=True)
class ThroughputModel:
    decode_step_ms: float
    decode_step_ms_per_request: float
    prefill_step_ms: float
    prefill_ms_per_token: float
    max_prefill_tokens: int
    max_running_requests: int
    decode_log_interval: int
    continuous_decode_steps: int = 1
    decode_speedup: float = 1.0
    prefill_speedup: float = 1.0
    applied: tuple[dict, ...] = field(default_factory=tuple)

    def decode_step_seconds(self, running: int) -> float:
        """Simulated seconds of one decode iteration over ``running`` requests."""
        ms = self.decode_step_ms + self.decode_step_ms_per_request * max(running, 0)
        return ms / self.decode_speedup / 1000.0

    def prefill_seconds(self, new_tokens: int) -> float:
        """Simulated seconds of one prefill iteration of ``new_tokens`` tokens."""
        ms = self.prefill_step_ms + self.prefill_ms_per_token * max(new_tokens, 0)
        return ms / self.prefill_speedup / 1000.0

    def steady_output_rate(self, running: int) -> float:
        """Tokens/s (simulated) of the whole batch in steady decode."""
        if running <= 0:
            return 0.0
        return running / self.decode_step_seconds(running)

    def describe(self) -> dict[str, Any]:
        return {
            "synthetic": True,
            "decode_step_ms": self.decode_step_ms,
            "decode_step_ms_per_request": self.decode_step_ms_per_request,
            "prefill_step_ms": self.prefill_step_ms,
            "prefill_ms_per_token": self.prefill_ms_per_token,
            "max_prefill_tokens": self.max_prefill_tokens,
            "max_running_requests": self.max_running_requests,
            "continuous_decode_steps": self.continuous_decode_steps,
            "decode_speedup": round(self.decode_speedup, 6),
            "prefill_speedup": round(self.prefill_speedup, 6),
            "flag_effects_applied": list(self.applied),
        }


def _positive_int(value: Any, default: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return default
    return number if number > 0 else default


def build_model(args: Mapping[str, Any], table: Mapping[str, Any] | None = None) -> ThroughputModel:
    """Apply the table's flag effects and the server's limits to the base model."""
    table = load_table() if table is None else table
    base = table["model"]
    decode_speedup = 1.0
    prefill_speedup = 1.0
    applied = []
    for effect in table.get("flag_effects") or []:
        if effect_matches(effect, args):
            decode_speedup *= float(effect.get("decode_speedup", 1.0))
            prefill_speedup *= float(effect.get("prefill_speedup", 1.0))
            applied.append(
                {
                    "dest": effect["dest"],
                    "when": effect.get("when", True),
                    "decode_speedup": effect.get("decode_speedup", 1.0),
                    "prefill_speedup": effect.get("prefill_speedup", 1.0),
                }
            )
    return ThroughputModel(
        decode_step_ms=float(base["decode_step_ms"]),
        decode_step_ms_per_request=float(base["decode_step_ms_per_request"]),
        prefill_step_ms=float(base["prefill_step_ms"]),
        prefill_ms_per_token=float(base["prefill_ms_per_token"]),
        max_prefill_tokens=_positive_int(
            args.get("max_prefill_tokens"), int(base["max_prefill_tokens"])
        ),
        max_running_requests=_positive_int(
            args.get("max_running_requests"), int(base["max_running_requests"])
        ),
        decode_log_interval=_positive_int(
            args.get("decode_log_interval"), int(base["decode_log_interval"])
        ),
        continuous_decode_steps=_positive_int(args.get("num_continuous_decode_steps"), 1),
        decode_speedup=decode_speedup,
        prefill_speedup=prefill_speedup,
        applied=tuple(applied),
    )
