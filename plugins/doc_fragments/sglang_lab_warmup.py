# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Option ``warmup`` of the modules that warm a server up from the resolved settings (sglang_bench,
sglang_warmup): the ``warmup`` block of data/benchmark.yml as role sglang_bench resolves it.

Both turn it into rounds with settings_from_spec() in plugins/module_utils/sglang_warmup_rounds.py,
and both declare its suboptions with WARMUP_SETTINGS_OPTIONS from the same file. What each module
does with the warm-up (beside the client's import, or on its own) is in its own description.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  warmup:
    description:
      - The resolved C(warmup) block of data/benchmark.yml, as role sglang_bench resolves it.
      - With O(warmup.concurrency=measured), one round per level of O(warmup.levels) (for
        M(sglang_bench), default its O(concurrency), the measured concurrencies), each of
        max(level, O(warmup.requests)) requests. With an integer, one round of
        O(warmup.requests) at that concurrency; O(warmup.levels) is then ignored.
    type: dict
    suboptions:
      requests:
        description: Warm-up requests (per round with levels).
        type: int
        required: true
      concurrency:
        description: C(measured), or an integer - every request at that concurrency, one round.
        type: raw
        required: true
      levels:
        description: The concurrencies to warm up at with C(measured).
        type: list
        elements: int
      input_len:
        description: Approximate prompt length in tokens.
        type: int
        required: true
      max_new_tokens:
        description: Tokens each warm-up request generates.
        type: int
        required: true
      timeout_s:
        description: Seconds each warm-up request may take.
        type: int
        required: true
"""
