# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The workload and client options of the modules that run bench_serving points (sglang_bench,
sglang_slo_search).

Both hand them to build_client_argv() in plugins/module_utils/sglang_bench_points.py, one point at
a time; a probe of sglang_slo_search is one such point. The options whose meaning differs between
the two (request_rate, client_warmup_requests, point_timeout, timeout, client_command, output_dir)
stay in each module's own documentation.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  client_env:
    description: Extra environment for the client, for example C(HF_HUB_OFFLINE=1).
    type: dict
    default: {}
  num_prompts:
    description:
      - Requests sent at every point (C(--num-prompts)); a probe of M(sglang_slo_search) is one
        point. Give this or O(num_prompts_multiplier) and O(num_prompts_floor).
    type: int
  num_prompts_multiplier:
    description:
      - With O(num_prompts_floor), a point's num_prompts is max(multiplier * load, floor)
        (data/benchmark.yml's rule). The load is the point's concurrency (slots times the
        multiplier), or the probed request rate when M(sglang_slo_search) searches the request
        rate (multiplier seconds of arrivals).
    type: int
  num_prompts_floor:
    description: Smallest num_prompts for the rule above.
    type: int
  input_len:
    description: Input tokens per request (C(--random-input-len)).
    type: int
    required: true
  output_len:
    description: Output tokens per request (C(--random-output-len)).
    type: int
    required: true
  range_ratio:
    description: C(--random-range-ratio); 1.0 makes every request full length.
    type: float
    default: 1.0
  dataset_name:
    description: bench_serving dataset (C(random) or C(random-ids)).
    type: str
    default: random
  dataset_path:
    description: Local dataset file (the ShareGPT JSON for C(random)).
    type: path
  seed:
    description: C(--seed) for prompt and length sampling, the same for every point.
    type: int
    default: 1
  tokenizer:
    description:
      - Tokenizer path or Hugging Face id for the client. When omitted, the
        one the server itself loaded - C(/server_info)'s C(tokenizer_path),
        else its C(model_path) (the HF id resolved from the local cache on a
        GPU node, the generated tokenizer folder on the simulator).
    type: str
  model:
    description:
      - C(--model) for the client; defaults to O(tokenizer). Also the model
        name recorded when C(/server_info) is not available.
    type: str
  served_model_name:
    description: C(--served-model-name) for the client.
    type: str
  output_details:
    description:
      - Add C(--output-details) so per-request errors are kept; a point
        then carries the most common error messages.
    type: bool
    default: false
  extra_args:
    description: More bench_serving arguments for every point, appended last.
    type: list
    elements: str
    default: []
  measurement:
    description:
      - What every point is measured with (data/benchmark.yml C(measurement), resolved by the
        sglang_bench_settings filter; docs/benchmark.md). Omitted, a point has no window, keeps the
        cache as it is and reads no counters.
    type: dict
    suboptions:
      min_requests:
        description: A point's num_prompts is at least this; fewer completed requests is C(too_short).
        type: int
        default: 0
      min_duration_s:
        description:
          - A point that lasts less is run once more in the same client, sized from its own request
            rate (1.2 x the window); still shorter, it is C(too_short) (recorded, in no verdict).
        type: float
        default: 0
      max_prompts:
        description: The most prompts that sizing may give a point.
        type: int
        default: 20000
      cache:
        description:
          - C(cold) flushes the server's prefix cache (C(/flush_cache), which waits for an idle server)
            before every point; C(warm) leaves it.
        type: str
        choices: [cold, warm]
        default: warm
      server_metrics:
        description:
          - Read the server's C(/metrics) before, during (each second) and after every point; the
            point keeps C(server_metrics), and client totals the server did not count fail it as
            C(counter_mismatch). Needs C(--enable-metrics) in the launch; without it the point says
            so (C(server_metrics.available) false) and is not checked.
        type: bool
        default: false
"""
