#!/usr/bin/python
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)


DOCUMENTATION = r"""
---
module: sglang_warmup
short_description: Warm an SGLang server up with requests to /generate
description:
  - Sends O(requests) generation requests to the SGLang server's native
    C(/generate) endpoint, at most O(concurrency) at a time, each asking for
    O(max_new_tokens) tokens with C(ignore_eos), so the first benchmark point
    does not pay for kernel JIT, graph capture or cold caches.
  - With O(levels), one round per level instead, each of max(level, O(requests))
    requests at that concurrency. SGLang compiles kernels and captures graphs per
    batch shape, so every concurrency the benchmark will measure is warmed up
    first. Each round's wall time is returned.
  - Any failed request fails the task with the server's HTTP status and
    response body (or the connection error), failure class C(warmup_failed).
version_added: "1.0.0"
author:
  - SGLang lab contributors
extends_documentation_fragment:
  - sglang_lab_attributes
  - sglang_lab_server
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

import json
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

from ansible.module_utils.basic import AnsibleModule

BODY_LIMIT = 4000


def warmup_payload(index, input_len, max_new_tokens):
    """The /generate request body for warm-up request ``index``."""
    words = max(1, int(input_len) - 8)
    return {
        "text": f"Warm-up request {index}. " + " ".join(["hello"] * words),
        "sampling_params": {
            "max_new_tokens": int(max_new_tokens),
            "temperature": 0.0,
            "ignore_eos": True,
        },
    }


def send(url, payload, timeout):
    """POST one request; return a dict with ok, status, body, seconds, tokens."""
    data = json.dumps(payload).encode("utf-8")
    request = Request(url, data=data, headers={"Content-Type": "application/json"})
    start = time.time()
    try:
        response = urlopen(request, timeout=timeout)
        status = response.getcode()
        body = response.read().decode("utf-8", errors="replace")
    except HTTPError as exc:
        body = exc.read().decode("utf-8", errors="replace") if hasattr(exc, "read") else ""
        return {"ok": False, "status": exc.code, "body": body[:BODY_LIMIT], "seconds": time.time() - start}
    except (URLError, OSError, ValueError) as exc:
        return {"ok": False, "status": None, "body": str(exc)[:BODY_LIMIT], "seconds": time.time() - start}
    seconds = time.time() - start
    try:
        answer = json.loads(body)
    except ValueError:
        return {"ok": False, "status": status, "body": body[:BODY_LIMIT], "seconds": seconds}
    if status != 200 or not isinstance(answer, (dict, list)):
        return {"ok": False, "status": status, "body": body[:BODY_LIMIT], "seconds": seconds}
    first = answer[0] if isinstance(answer, list) and answer else answer
    tokens = None
    if isinstance(first, dict):
        tokens = (first.get("meta_info") or {}).get("completion_tokens")
    return {"ok": True, "status": status, "body": None, "seconds": seconds, "tokens": tokens}


def main():
    argument_spec = dict(
        host=dict(type="str", default="127.0.0.1"),
        port=dict(type="int", default=30000),
        requests=dict(type="int", default=8),
        concurrency=dict(type="int", default=2),
        levels=dict(type="list", elements="int"),
        input_len=dict(type="int", default=128),
        max_new_tokens=dict(type="int", default=32),
        timeout=dict(type="int", default=600),
    )
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    p = module.params
    for name in ("requests", "concurrency", "input_len", "max_new_tokens", "timeout"):
        if p[name] < 1:
            module.fail_json(
                msg=f"sglang_warmup: {name} must be >= 1, got {p[name]}; fix role variable "
                f"sglang_bench_warmup_{name} or warmup.{name} in data/benchmark.yml."
            )
    if any(level < 1 for level in p["levels"] or []):
        module.fail_json(msg=f"sglang_warmup: every level must be >= 1, got {p['levels']}")
    url = "http://{}:{}/generate".format(p["host"], p["port"])
    rounds = [(level, max(level, p["requests"])) for level in p["levels"]] if p["levels"] else [
        (p["concurrency"], p["requests"])
    ]
    summary = {"url": url, "requests": 0, "succeeded": 0, "latency_s": None, "completion_tokens": None}
    if module.check_mode:
        summary["would_send"] = sum(count for _level, count in rounds)
        module.exit_json(
            changed=False, warmup=summary, msg=f"check mode: would send {summary['would_send']} requests to {url}"
        )

    outcomes = []
    summary["per_level"] = []
    began = time.monotonic()
    for level, count in rounds:
        start = time.monotonic()
        payloads = [warmup_payload(len(outcomes) + i, p["input_len"], p["max_new_tokens"]) for i in range(count)]
        with ThreadPoolExecutor(max_workers=min(level, count)) as pool:
            round_outcomes = list(pool.map(lambda body: send(url, body, p["timeout"]), payloads))
        outcomes.extend(round_outcomes)
        summary["per_level"].append(
            {"concurrency": level, "requests": count, "seconds": round(time.monotonic() - start, 3)}
        )
        if not all(o["ok"] for o in round_outcomes):
            break
    summary["seconds"] = round(time.monotonic() - began, 3)
    summary["requests"] = len(outcomes)
    summary["succeeded"] = sum(1 for o in outcomes if o["ok"])
    seconds = sorted(o["seconds"] for o in outcomes)
    summary["latency_s"] = {
        "min": round(seconds[0], 4),
        "median": round(seconds[len(seconds) // 2], 4),
        "max": round(seconds[-1], 4),
    }
    tokens = [o.get("tokens") for o in outcomes if isinstance(o.get("tokens"), int)]
    summary["completion_tokens"] = sum(tokens) if tokens else None
    failures = [(i, o) for i, o in enumerate(outcomes) if not o["ok"]]
    if failures:
        index, first = failures[0]
        module.fail_json(
            msg=(
                f"sglang_warmup: {len(failures)} of {len(outcomes)} warm-up requests to {url} "
                f"failed; first (request {index}): HTTP {first['status']}: {first['body']}. "
                "The server is up but cannot serve; see its log."
            ),
            failure_class="warmup_failed",
            failure_step="warmup",
            status=first["status"],
            body=first["body"],
            warmup=summary,
        )
    module.exit_json(changed=False, warmup=summary)


if __name__ == "__main__":
    main()
