# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The workload option of the modules that take the resolved benchmark settings whole
(sglang_bench, sglang_slo_search, sglang_ledger_append), and (``sglang_lab_workload.client``) the
client options of the two that run bench_serving points.

Declared once in plugins/module_utils/sglang_workload_options.py (WORKLOAD_ARGUMENT_SPEC,
CLIENT_ARGUMENT_SPEC); tests/unit/test_module_docs.py checks that both agree, option for option.
"""

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
options:
  workload:
    description:
      - The workload, whole - the resolved benchmark settings in the ledger record's own shape
        (role sglang_bench resolves them once from data/benchmark.yml, its overrides and a campaign
        workload; docs/benchmark.md). Recorded as the record's C(workload).
    type: dict
    required: true
    suboptions:
      settings_file:
        description: The settings file the workload was resolved from.
        type: str
      name:
        description:
          - The catalogue workload it was resolved from (data/workloads.yml, C(-e workload=NAME));
            absent when none was named.
        type: str
      client:
        description: The benchmark client.
        type: str
        default: sglang.bench_serving
      backend:
        description: bench_serving's C(--backend).
        type: str
        default: sglang
      dataset_name:
        description:
          - bench_serving dataset - C(random), C(random-ids), C(sharegpt) (the conversations of a
            ShareGPT-format file) or C(generated-shared-prefix) (groups of prompts behind a shared
            system prompt each).
        type: str
        default: random
      dataset_path:
        description: Local dataset file (the ShareGPT-format JSON for C(random) and C(sharegpt)).
        type: str
      input_len:
        description:
          - Input tokens per request (C(--random-input-len)); for C(generated-shared-prefix) the
            question after the shared system prompt (C(--gsp-question-len)); not sent for
            C(sharegpt), whose prompts are the corpus's own.
        type: int
        required: true
      output_len:
        description:
          - Output tokens per request (C(--random-output-len); C(--sharegpt-output-len),
            C(--gsp-output-len) for those datasets).
        type: int
        required: true
      random_range_ratio:
        description: C(--random-range-ratio); 1.0 makes every request full length.
        type: float
        default: 1.0
      concurrency:
        description:
          - The concurrency points (C(--max-concurrency)), in the order they run within each repeat.
            M(sglang_bench) needs them; a search probes its own.
        type: list
        elements: int
      num_prompts:
        description:
          - A point's num_prompts is max(multiplier * load, floor). The load is the point's
            concurrency, or the probed request rate when M(sglang_slo_search) searches the request
            rate (multiplier seconds of arrivals). O(num_prompts) replaces the rule.
        type: dict
        suboptions:
          multiplier:
            description: Prompts per unit of load.
            type: int
          floor:
            description: Smallest num_prompts.
            type: int
      request_rate:
        description:
          - C(--request-rate) of every point; C(inf) sends all requests at once. Replaced by the
            probed value when M(sglang_slo_search) searches the request rate.
        type: str
        default: inf
      request_rates:
        description:
          - A request-rate sweep - one point per rate (requests per second, Poisson arrivals through
            C(--request-rate)), each at the one O(workload.concurrency) as its cap, instead of one
            point per concurrency. A point sends the window's arrivals, ceil(rate x
            C(measurement.min_duration_s)), at least the C(num_prompts) floor. Part of the workload's
            identity.
        type: list
        elements: float
      burstiness:
        description:
          - The arrivals' burstiness; 1.0 is Poisson, the only process bench_serving of SGLang 0.5.17
            sends. Any other value (gamma arrivals) is refused - that bench_serving has no
            C(--burstiness), and this project builds no traffic generator of its own.
        type: float
        default: 1.0
      seed:
        description: C(--seed) for prompt and length sampling, the same for every point.
        type: int
        default: 1
      repeats:
        description: How many times the whole list of concurrency points runs (the outer loop).
        type: int
        default: 1
      warmup:
        description: The resolved warm-up block (recorded; the warm-up itself takes it as O(warmup)).
        type: dict
      measurement:
        description:
          - What every point is measured with (data/benchmark.yml C(measurement); docs/benchmark.md).
            Omitted, a point has no window, keeps the cache as it is and reads no counters.
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
              - C(cold) flushes the server's prefix cache (C(/flush_cache), which waits for an idle
                server) before every point; C(warm) leaves it.
            type: str
            choices: [cold, warm]
            default: warm
          server_metrics:
            description:
              - Read the server's C(/metrics) before, during (each second) and after every point; the
                point keeps C(server_metrics), and client totals the server did not count fail it as
                C(counter_mismatch). Needs C(--enable-metrics) in the launch; without it the point
                says so (C(server_metrics.available) false) and is not checked.
            type: bool
            default: false
      confidence:
        description: The comparison's simultaneous confidence (between 0 and 1).
        type: float
      extra_request_body:
        description:
          - >-
            A JSON object bench_serving merges into every request it sends (C(--extra-request-body)),
            for example C({"sampling_params": {"temperature": 0.7, "max_new_tokens": 1024}}) or
            C({"return_logprob": true}); empty sends bench_serving's own requests.
          - Its keys replace bench_serving's at the top of the C(/generate) body, so a
            C(sampling_params) must give C(max_new_tokens) too (refused otherwise).
          - Part of the workload's identity - records with different bodies are not compared.
        type: dict
        default: {}
      gsp_num_groups:
        description:
          - C(generated-shared-prefix) only - the groups, each with a system prompt of its own
            (C(--gsp-num-groups)). bench_serving sends groups x prompts per group requests, so a
            point's prompts are rounded up to a multiple of it (C(--gsp-prompts-per-group) =
            prompts / groups).
        type: int
      gsp_system_prompt_len:
        description: C(generated-shared-prefix) only - the shared system prompt's tokens (C(--gsp-system-prompt-len)).
        type: int
      gsp_num_turns:
        description:
          - C(generated-shared-prefix) only - the turns of each conversation (C(--gsp-num-turns)).
            Above 1 every prompt is a conversation of that many questions behind its group's system
            prompt, each answer sent back in the next turn, through bench_serving's chat backend
            (C(--backend sglang-oai-chat), the only way SGLang 0.5.17's bench_serving sends them).
            bench_serving counts each turn as a request, so a point completes num_prompts x turns.
        type: int
        default: 1
      cache_hit_target:
        description:
          - The server's prefix-cache hit rate (cached / prompt tokens of C(/metrics) over the point)
            every point must show, within O(workload.cache_hit_target.margin); outside, the point fails
            as C(workload_mismatch) (it did not measure the workload it states). Needs
            C(measurement.server_metrics).
        type: dict
        suboptions:
          rate:
            description:
              - A share within [0, 1], or C(expected) for C(generated-shared-prefix) of one turn - the
                band a cold point can reach at its prompts, groups and concurrency
                (docs/benchmark.md, "The workload the server saw").
            type: raw
            required: true
          margin:
            description: How far outside the band the hit rate may be, a share within [0, 1).
            type: float
            required: true
      goodput_slo:
        description:
          - The latency limits a request must meet to count towards the point's goodput (the share
            of requests, and of output tokens, that met every limit; docs/benchmark.md, "Goodput").
            Omitted, points have no goodput. Not part of the workload's identity.
        type: dict
        suboptions:
          ttft_ms:
            description: The most a request's time to first token may take, in ms.
            type: float
          tpot_ms:
            description: The most a request's time per output token after the first may take, in ms.
            type: float
          e2e_ms:
            description: The most a request's end-to-end latency may take, in ms.
            type: float
          attainment:
            description:
              - The share of requests expected to meet the limits (DistServe's 0.9 by default); a
                goodput share needs ceil(1 / (1 - attainment)) requests, else it is withheld.
            type: float
            default: 0.9
"""

    CLIENT = r"""
options:
  client_env:
    description: Extra environment for the client, for example C(HF_HUB_OFFLINE=1).
    type: dict
    default: {}
  num_prompts:
    description: Requests sent at every point, instead of O(workload.num_prompts)'s rule.
    type: int
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
"""
