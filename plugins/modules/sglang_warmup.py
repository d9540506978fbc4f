#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
module: sglang_warmup
short_description: Warm an SGLang server up with requests to /generate
version_added: "1.0.0"
description:
  - Sends O(requests) generation requests to the SGLang server's native
    C(/generate) endpoint, at most O(concurrency) at a time, each asking for
    O(max_new_tokens) tokens with C(ignore_eos), so the first benchmark point
    does not pay for kernel JIT, graph capture or cold caches.
  - With O(levels), one round per level instead, each of max(level, O(requests))
    requests at that concurrency. SGLang compiles kernels and captures graphs per
    batch shape, so every concurrency the benchmark will measure is warmed up
    first. Each round's wall time is returned.
  - Or O(warmup), the resolved warm-up of data/benchmark.yml as role
    sglang_bench resolves it (its C(warmup) entry point passes it), instead of
    O(requests), O(concurrency), O(levels), O(input_len), O(max_new_tokens) and
    O(timeout); the module decides the rounds from it exactly as M(sglang_bench)
    does for its option O(warmup).
  - Any failed request fails the task with the server's HTTP status and
    response body (or the connection error), failure class C(warmup_failed).
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_server
  - sglang_lab_warmup
options:
  requests:
    description: Number of warm-up requests.
    type: int
    default: 8
  concurrency:
    description: Requests in flight at a time (ignored when O(levels) is given).
    type: int
    default: 2
  levels:
    description:
      - Concurrencies to warm up at, one round each, in this order (for example the
        benchmark's concurrency points).
    type: list
    elements: int
  input_len:
    description:
      - Approximate prompt length in tokens (a repeated word; the exact
        count depends on the tokenizer).
    type: int
    default: 128
  max_new_tokens:
    description: Tokens each request generates.
    type: int
    default: 32
  timeout:
    description: Seconds each request may take.
    type: int
    default: 600
attributes:
  check_mode:
    support: full
    details: Reports what it would send and sends nothing.
  idempotent:
    support: full
    details: Sends load but changes no configuration; always C(changed=false).
seealso:
  - module: sglang_bench
"""

EXAMPLES = r"""
- name: Warm the server up
  sglang_warmup:
    port: 8000
    requests: 8
    concurrency: 2

- name: Warm the server up as data/benchmark.yml says (role sglang_bench's warmup entry point)
  sglang_warmup:
    port: 8000
    warmup:
      requests: 4
      concurrency: measured
      levels: [1, 10, 256]
      input_len: 128
      max_new_tokens: 32
      timeout_s: 600
"""

RETURN = r"""
warmup:
  description: What was sent and how it went.
  returned: always
  type: dict
  contains:
    url:
      description: The endpoint.
      type: str
    requests:
      description: Requests sent (0 in check mode).
      type: int
    succeeded:
      description: Requests answered with HTTP 200 and a JSON body.
      type: int
    latency_s:
      description: min, median and max seconds per request.
      type: dict
    completion_tokens:
      description: Sum of meta_info.completion_tokens where the server reports it.
      type: int
    seconds:
      description: Wall time of the whole warm-up.
      type: float
    per_level:
      description: One entry per round - concurrency, requests and seconds.
      type: list
      elements: dict
failure_class:
  description: C(warmup_failed) when a request failed (read by role sglang_bench's record step).
  returned: failure
  type: str
failure_step:
  description: C(warmup) when a request failed.
  returned: failure
  type: str
status:
  description: HTTP status of the first failed request (null for a connection error).
  returned: failure
  type: int
body:
  description: Response body (or error text) of the first failed request.
  returned: failure
  type: str
"""


from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.sglang_warmup_rounds import (
    WARMUP_SETTINGS_OPTIONS,
    check_settings,
    generate_url,
    requests_in,
    run_warmup,
    settings_from_spec,
    warmup_rounds,
)

# The options O(warmup) replaces.
SETTING_OPTIONS = ("requests", "concurrency", "levels", "input_len", "max_new_tokens", "timeout")


def main():
    argument_spec = dict(
        address=dict(type="str", default="127.0.0.1"),
        port=dict(type="int", default=30000),
        requests=dict(type="int", default=8),
        concurrency=dict(type="int", default=2),
        levels=dict(type="list", elements="int"),
        input_len=dict(type="int", default=128),
        max_new_tokens=dict(type="int", default=32),
        timeout=dict(type="int", default=600),
        warmup=dict(type="dict", options=WARMUP_SETTINGS_OPTIONS),
    )
    module = AnsibleModule(
        argument_spec=argument_spec,
        mutually_exclusive=[("warmup", name) for name in SETTING_OPTIONS],
        supports_check_mode=True,
    )
    p = module.params
    if p["warmup"] is None:
        settings = {name: p[name] for name in SETTING_OPTIONS}
    else:
        try:
            settings = settings_from_spec(p["warmup"])
        except ValueError as exc:
            module.fail_json(msg=f"sglang_warmup: {exc}")
    problem = check_settings(settings)
    if problem:
        module.fail_json(msg=f"sglang_warmup: {problem}")
    url = generate_url(p["address"], p["port"])
    rounds = warmup_rounds(settings["requests"], settings["concurrency"], settings["levels"])
    if module.check_mode:
        summary = {"url": url, "requests": 0, "succeeded": 0, "latency_s": None, "completion_tokens": None,
                   "would_send": requests_in(rounds)}
        module.exit_json(
            changed=False, warmup=summary, msg=f"check mode: would send {summary['would_send']} requests to {url}"
        )
    summary, failure = run_warmup(url, rounds, settings["input_len"], settings["max_new_tokens"], settings["timeout"])
    if failure:
        failure = dict(failure, msg="sglang_warmup: " + failure["msg"])
        module.fail_json(warmup=summary, **failure)
    module.exit_json(changed=False, warmup=summary)


if __name__ == "__main__":
    main()
