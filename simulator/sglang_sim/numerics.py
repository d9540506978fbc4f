# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Greedy outputs and their log-probabilities, as pure functions of the prompt (SYNTHETIC).

A greedy request (temperature 0) gets the same tokens every time it is sent, alone or in a
batch: its seed is the prompt's, not the request id's. Its log-probabilities are a function of
the seed and the position. ``SGLANG_SIM_NUMERICS=perturbed`` stands in for a tier that changes
the arithmetic (another dtype, a fused kernel): about a third of the prompts diverge from some
position on, and every log-probability moves by a few thousandths. Nothing here is a model.
"""

from __future__ import annotations

import zlib

# The seed a diverged position draws from instead (any odd constant).
_DIVERGED = 0x5BD1E995


def greedy_seed(text: str | None, input_ids: list | None) -> int:
    """The seed of a greedy request: its prompt alone (no request id)."""
    basis = text if text is not None else ",".join(map(str, input_ids or []))
    return zlib.crc32(("greedy|" + basis).encode("utf-8", "replace"))


def divergence_position(seed: int, numerics: str) -> int | None:
    """Where a perturbed greedy output leaves the exact one (None: it never does).

    One prompt in three diverges, at output position 1 to 16."""
    if numerics != "perturbed" or seed % 3 != 0:
        return None
    return 1 + (seed >> 4) % 16


def token_seed(seed: int, position: int, diverge_at: int | None) -> int:
    """The seed the codec draws output position ``position`` from."""
    if diverge_at is not None and position >= diverge_at:
        return seed ^ _DIVERGED
    return seed


def token_logprob(seed: int, position: int, numerics: str) -> float:
    """Log-probability of the chosen token at ``position``: in [-4.0, -0.001], deterministic.

    Perturbed numerics move it by -0.004 to +0.004 (never above 0)."""
    value = -0.001 - (zlib.crc32(f"{seed}:{position}".encode()) % 4000) / 1000.0
    if numerics == "perturbed":
        value += ((zlib.crc32(f"p{seed}:{position}".encode()) % 9) - 4) / 1000.0
    return round(min(value, -0.0001), 6)
