# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Warm-up rounds against SGLang's native /generate endpoint.

Used by module sglang_warmup (the warm-up on its own) and by module sglang_bench,
which warms the server up while its benchmark client process imports
bench_serving (the two overlap; the client starts its first point only after the
warm-up succeeded). Standard library only: this code runs on the target host.
Module sglang_warmup ships sglang_bench_settings with it for WARMUP_MEASURED
(that file imports only ``re``).

A round is ``(concurrency, requests)``. With levels (the benchmark's concurrency
points), one round per level of max(level, requests) requests, because SGLang
compiles kernels and captures graphs per batch shape; without, one round of
``requests`` at ``concurrency``.

The resolved settings' ``warmup`` block (module_utils/sglang_bench_settings.py) becomes
run_warmup's settings in one place, settings_from_spec, for both modules; its options
are declared once, WARMUP_SETTINGS_OPTIONS.
"""

import json
import time
from concurrent.futures import ThreadPoolExecutor
from urllib.error import HTTPError, URLError
from urllib.request import Request, urlopen

try:  # Inside AnsiballZ.
    from ansible.module_utils.sglang_bench_settings import WARMUP_MEASURED
except ImportError:  # pytest and tools put module_utils on sys.path.
    from sglang_bench_settings import WARMUP_MEASURED

BODY_LIMIT = 4000
FAILURE_CLASS = "warmup_failed"
FAILURE_STEP = "warmup"


def warmup_rounds(requests, concurrency, levels=None):
    """The rounds to send: [(concurrency, requests)], in order."""
    if levels:
        return [(int(level), max(int(level), int(requests))) for level in levels]
    return [(int(concurrency), int(requests))]


# The resolved warm-up block as a module option (option warmup of sglang_bench and sglang_warmup,
# documented once by doc fragment sglang_lab_warmup): the keys of cfg["warmup"] in
# module_utils/sglang_bench_settings.py.
WARMUP_SETTINGS_OPTIONS = dict(
    requests=dict(type="int", required=True),
    concurrency=dict(type="raw", required=True),
    levels=dict(type="list", elements="int"),
    input_len=dict(type="int", required=True),
    max_new_tokens=dict(type="int", required=True),
    timeout_s=dict(type="int", required=True),
)


def settings_from_spec(spec, measured_levels=None):
    """run_warmup's settings {requests, concurrency, levels, input_len, max_new_tokens, timeout}
    from the resolved warm-up block (WARMUP_SETTINGS_OPTIONS), or ValueError for a bad concurrency.

    ``concurrency`` C(measured): one round per level, ``spec["levels"]`` or else
    ``measured_levels`` (the benchmark's concurrency points), the first level as the
    concurrency. An integer: every request at that concurrency, one round; levels ignored.
    The values are not range-checked here (check_settings does that).
    """
    measured = spec["concurrency"] == WARMUP_MEASURED
    levels = spec.get("levels") or (measured_levels if measured else None)
    if measured and not levels:
        raise ValueError(
            f"warmup.concurrency is {WARMUP_MEASURED!r} but there is no level to warm up at; give "
            "warmup.levels (the measured concurrencies, as role sglang_bench resolves them) or an integer concurrency."
        )
    try:
        concurrency = int(levels[0]) if measured else int(spec["concurrency"])
    except (TypeError, ValueError, IndexError):
        raise ValueError(
            f"warmup.concurrency must be an integer >= 1 or {WARMUP_MEASURED!r}, got {spec['concurrency']!r}; "
            "fix warmup.concurrency in data/benchmark.yml or sglang_bench_warmup_concurrency."
        ) from None
    return dict(
        requests=spec["requests"],
        concurrency=concurrency,
        levels=list(levels) if measured else None,
        input_len=spec["input_len"],
        max_new_tokens=spec["max_new_tokens"],
        timeout=spec["timeout_s"],
    )


def requests_in(rounds):
    """How many requests the rounds send."""
    return sum(count for _level, count in rounds)


def check_settings(settings):
    """The first problem with warm-up settings ({requests, concurrency, levels, input_len,
    max_new_tokens, timeout}) as a message, else None."""
    for name in ("requests", "concurrency", "input_len", "max_new_tokens", "timeout"):
        value = settings.get(name)
        if value is not None and value < 1:
            return (
                f"{name} must be >= 1, got {value}; fix role variable sglang_bench_warmup_{name} "
                f"or warmup.{name} in data/benchmark.yml."
            )
    if any(level < 1 for level in settings.get("levels") or []):
        return f"every level must be >= 1, got {settings.get('levels')}"
    return None


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


def generate_url(host, port):
    return f"http://{host}:{port}/generate"


def run_warmup(url, rounds, input_len, max_new_tokens, timeout, sender=send):
    """Send the rounds (side effect); stop after the first round with a failed request.

    Returns ``(summary, failure)``. ``summary``: url, requests, succeeded, seconds (all
    rounds), per_level [{concurrency, requests, seconds}], latency_s {min, median, max},
    completion_tokens. ``failure``: None, or {msg, failure_class, failure_step, status,
    body} for the first failed request (what a failed task returns).
    """
    summary = {"url": url, "requests": 0, "succeeded": 0, "latency_s": None, "completion_tokens": None}
    outcomes = []
    summary["per_level"] = []
    began = time.monotonic()
    for level, count in rounds:
        start = time.monotonic()
        payloads = [warmup_payload(len(outcomes) + i, input_len, max_new_tokens) for i in range(count)]
        pool = ThreadPoolExecutor(max_workers=max(1, min(level, count)))
        try:
            round_outcomes = list(pool.map(lambda body: sender(url, body, timeout), payloads))
        except BaseException:
            # Interrupted (KeyboardInterrupt / SIGTERM): the queued requests are not sent, and the
            # module does not wait for the ones in flight to end (a `with` would wait for all).
            pool.shutdown(wait=False, cancel_futures=True)
            raise
        pool.shutdown(wait=True)
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
    if seconds:
        summary["latency_s"] = {
            "min": round(seconds[0], 4),
            "median": round(seconds[len(seconds) // 2], 4),
            "max": round(seconds[-1], 4),
        }
    tokens = [o.get("tokens") for o in outcomes if isinstance(o.get("tokens"), int)]
    summary["completion_tokens"] = sum(tokens) if tokens else None
    failures = [(i, o) for i, o in enumerate(outcomes) if not o["ok"]]
    if not failures:
        return summary, None
    index, first = failures[0]
    return summary, {
        "msg": (
            f"{len(failures)} of {len(outcomes)} warm-up requests to {url} failed; first (request "
            f"{index}): HTTP {first['status']}: {first['body']}. The server is up but cannot serve; see its log."
        ),
        "failure_class": FAILURE_CLASS,
        "failure_step": FAILURE_STEP,
        "status": first["status"],
        "body": first["body"],
    }
