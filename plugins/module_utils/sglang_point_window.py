# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What one benchmark point can be trusted for: its measurement window, its steady state and the
server's own counters (module sglang_bench, through sglang_bench_points.evaluate_point).

* **The window.** A point must complete ``min_requests`` requests and last ``min_duration_s``
  seconds (bench_serving's ``duration``). The client sizes a point that ends short once from its
  own request rate (tools/sglang_bench_client.py, ``resize``); a point still short is
  ``too_short``: recorded with its numbers, excluded from every verdict.
* **The steady state.** bench_serving's throughput divides by the whole run, ramp-up and drain
  included. The steady state is SGLang's own definition (``sglang.benchmark.steady_state`` of
  0.5.23, re-stated here for the releases that lack it): the longest interval in which at least
  ``ceil(ratio x peak)`` requests are in flight (ratio 0.8), output tokens counted by their arrival
  time (TTFT, then each inter-token gap). Per-request start times come from the client's sidecar
  ``<output_file>.requests.json``; TTFTs and gaps from bench_serving's ``--output-details`` line.
* **The server's counters.** With ``--enable-metrics`` SGLang counts requests, prompt, generated
  and cached tokens itself (``/metrics``, Prometheus text). The client reads them before and after
  each point (sidecar ``<output_file>.metrics.json``); a point whose client totals disagree with the
  server's beyond ``COUNTER_TOLERANCE`` fails as ``counter_mismatch``: on the H200 a streamed-error
  point was 8 successful requests to bench_serving and 0 to the server.
* **Goodput.** With a workload that states latency limits (``goodput_slo``), the share of the
  point's requests, and of its output tokens, whose own TTFT, TPOT and end-to-end latency each met
  every limit (``goodput``); a failed request meets none. From the same per-request data as the
  steady state.
* **The workload the server saw.** A workload that states the prefix-cache hit rate its points must
  show (``cache_hit_target``) is checked against the server's own counters (cached / prompt tokens
  over the point): outside the target's band by more than its margin, the point did not measure the
  workload it says (``workload_mismatch``).

Standard library only: this runs on the target host.
"""

import json
import math
import re

# SGLang 0.5.23's default (--steady-state-concurrency-ratio).
STEADY_RATIO = 0.8
# Below this share of the run, the steady window is reported but too short to stand for the point.
STEADY_MIN_SHARE = 0.5

# Counters compared per point, with what the client's side is. Generation tokens: the server counts
# what it generated, bench_serving what it received; they agree exactly on an honest point (1056 =
# 1024 + the warm-up's 32 on the H200). The tolerance covers requests that end between the two
# reads of /metrics (a health probe, another client): 1 request, 2 % of the tokens plus one
# request's output.
COUNTER_TOLERANCE = {"requests": (1, 0.0), "generation_tokens": (0, 0.02)}

_LINE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
# Gauges reported once per scheduler rank: the same value on every TP/PP/EP rank of one DP rank.
_RANK_LABELS = ("tp_rank", "pp_rank", "moe_ep_rank")
COUNTERS = {
    "requests": "sglang:num_requests_total",
    "prompt_tokens": "sglang:prompt_tokens_total",
    "generation_tokens": "sglang:generation_tokens_total",
    "cached_tokens": "sglang:cached_tokens_total",
    "queue_time_sum_s": "sglang:queue_time_seconds_sum",
    "queue_time_count": "sglang:queue_time_seconds_count",
}
GAUGES = {
    "running": "sglang:num_running_reqs",
    "queued": "sglang:num_queue_reqs",
    "spec_accept_length": "sglang:spec_accept_length",
}


def parse_prometheus(text):
    """``{name: [(labels, value)]}`` from Prometheus text (comments and bad lines skipped)."""
    found = {}
    for line in (text or "").splitlines():
        if not line or line.startswith("#"):
            continue
        match = _LINE.match(line.strip())
        if not match:
            continue
        try:
            value = float(match.group(3))
        except ValueError:
            continue
        labels = dict(_LABEL.findall(match.group(2) or ""))
        found.setdefault(match.group(1), []).append((labels, value))
    return found


def _counter(parsed, name):
    rows = parsed.get(name)
    return None if rows is None else sum(value for _labels, value in rows)


def _gauge(parsed, name):
    """Summed over DP ranks, one value per rank group (the TP ranks of one DP rank repeat it)."""
    rows = parsed.get(name)
    if rows is None:
        return None
    groups = {}
    for labels, value in rows:
        key = tuple(sorted((k, v) for k, v in labels.items() if k not in _RANK_LABELS))
        groups[key] = max(groups.get(key, value), value)
    return sum(groups.values())


def server_totals(text):
    """The counters and gauges a point uses, from one /metrics text (None for an absent name)."""
    parsed = parse_prometheus(text)
    totals = {key: _counter(parsed, name) for key, name in COUNTERS.items()}
    totals.update({key: _gauge(parsed, name) for key, name in GAUGES.items()})
    return totals


def server_metrics(sidecar, duration_s=None):
    """The point's ``server_metrics`` block from the client's sidecar (``before``/``after`` texts,
    ``during`` samples), or ``{"available": False, "reason"}``."""
    if not isinstance(sidecar, dict):
        return {"available": False, "reason": "the client wrote no /metrics readings"}
    if sidecar.get("error"):
        return {"available": False, "reason": str(sidecar["error"])[:300]}
    before, after = server_totals(sidecar.get("before")), server_totals(sidecar.get("after"))
    if before["requests"] is None or after["requests"] is None:
        return {"available": False, "reason": "/metrics has no sglang:num_requests_total (no --enable-metrics?)"}
    block = {"available": True}
    for key in COUNTERS:
        if before[key] is not None and after[key] is not None:
            block[key] = round(after[key] - before[key], 6)
    prompt, cached = block.get("prompt_tokens"), block.get("cached_tokens")
    block["cache_hit_rate"] = round(cached / prompt, 4) if prompt and cached is not None else None
    count, total = block.pop("queue_time_count", None), block.pop("queue_time_sum_s", None)
    block["queue_time_mean_s"] = round(total / count, 6) if count and total is not None else None
    if isinstance(duration_s, (int, float)) and duration_s > 0 and block.get("generation_tokens") is not None:
        block["output_throughput"] = round(block["generation_tokens"] / duration_s, 3)
    if after["spec_accept_length"] is not None:
        block["spec_accept_length"] = after["spec_accept_length"]
    samples = [s for s in sidecar.get("during") or [] if isinstance(s, dict)]
    for key in ("running", "queued"):
        values = [s[key] for s in samples if isinstance(s.get(key), (int, float))]
        if values:
            block[f"{key}_max"] = max(values)
            block[f"{key}_mean"] = round(sum(values) / len(values), 3)
    block["samples"] = len(samples)
    return block


def counter_mismatches(result, block, warmup_requests=0, warmup_output_len=0):
    """Where the client's totals and the server's counters disagree beyond COUNTER_TOLERANCE.

    The client's side: its completed requests and output tokens, plus bench_serving's own warm-up
    requests of this point (``--warmup-requests``, each generating ``warmup_output_len`` tokens),
    which the server counts too. Returns a list of sentences (empty: they agree)."""
    if not block or not block.get("available"):
        return []
    completed = int(result.get("completed") or 0)
    client = {
        "requests": completed + int(warmup_requests or 0),
        "generation_tokens": int(result.get("total_output_tokens") or 0)
        + int(warmup_requests or 0) * int(warmup_output_len or 0),
    }
    per_request = client["generation_tokens"] / client["requests"] if client["requests"] else 0
    found = []
    for key, (slack, share) in COUNTER_TOLERANCE.items():
        server = block.get(key)
        if server is None:
            continue
        allowed = slack + share * client[key] + (per_request if key == "generation_tokens" else 0)
        if abs(server - client[key]) > allowed:
            found.append(f"the server counted {server:g} {key.replace('_', ' ')} where the client reports "
                         f"{client[key]} (tolerance {allowed:g})")
    return found


def steady_state(result, requests, ratio=STEADY_RATIO):
    """The point's steady state from bench_serving's ``--output-details`` line and the client's
    per-request start times (``requests``: ``{"requests": [[start_s, latency_s, success], ...]}``,
    in bench_serving's request order). None when either is missing or nothing succeeded."""
    rows = (requests or {}).get("requests") if isinstance(requests, dict) else None
    ttfts, itls, lens = result.get("ttfts"), result.get("itls"), result.get("output_lens")
    if not isinstance(rows, list) or not all(isinstance(x, list) for x in (ttfts, itls, lens)):
        return None
    if not (len(rows) == len(ttfts) == len(itls) == len(lens)):
        return None
    ok = [i for i, row in enumerate(rows) if len(row) >= 3 and row[2] and row[1] > 0]
    if not ok:
        return None
    events = {}
    for i in ok:
        start, latency = rows[i][0], rows[i][1]
        events[start] = events.get(start, 0) + 1
        events[start + latency] = events.get(start + latency, 0) - 1
    times = sorted(events)
    intervals, in_flight = [], 0
    for index, moment in enumerate(times[:-1]):
        in_flight += events[moment]
        if times[index + 1] > moment:
            intervals.append((moment, times[index + 1], in_flight))
    peak = max((item[2] for item in intervals), default=0)
    threshold = max(1, math.ceil(peak * ratio))
    spans, begin, end = [], None, None
    for low, high, active in intervals:
        if active >= threshold:
            begin = low if begin is None else begin
            end = high
        elif begin is not None:
            spans.append((begin, end))
            begin = end = None
    if begin is not None:
        spans.append((begin, end))
    if not spans:
        return None
    low, high = max(spans, key=lambda span: span[1] - span[0])
    window = high - low
    tokens = 0.0
    for i in ok:
        stamps = [rows[i][0] + float(ttfts[i] or 0.0)]
        for gap in itls[i] or []:
            stamps.append(stamps[-1] + float(gap))
        inside = sum(1 for t in stamps if low <= t <= high)
        tokens += float(lens[i] or 0) * inside / len(stamps)
    run = max(rows[i][0] + rows[i][1] for i in ok) - min(rows[i][0] for i in ok)
    finished = sum(1 for i in ok if low <= rows[i][0] + rows[i][1] <= high)
    return {
        "ratio": ratio,
        "concurrency_threshold": threshold,
        "peak_concurrency": peak,
        "window_s": round(window, 6),
        "share_of_run": round(window / run, 4) if run > 0 else None,
        "output_tokens": round(tokens, 3),
        "output_throughput": round(tokens / window, 3) if window > 0 else None,
        "request_throughput": round(finished / window, 6) if window > 0 else None,
        "representative": bool(run > 0 and window / run >= STEADY_MIN_SHARE),
    }


GOODPUT_LIMITS = ("ttft_ms", "tpot_ms", "e2e_ms")


def request_latencies(result, requests=None):
    """Each request's own TTFT, TPOT and end-to-end latency in ms, in bench_serving's request order,
    from its ``--output-details`` line: a list of ``{ok, ttft_ms, tpot_ms, e2e_ms, output_len}``, or
    None without the details. A request that failed (an error, or no success in the client's
    ``requests`` sidecar) is ``ok: False``. TPOT is bench_serving's own, (latency - TTFT) /
    (output tokens - 1), None for a request of one token (bench_serving leaves it out too). The
    latency is the sidecar's (bench_serving's ``latency``), else TTFT plus the inter-token gaps."""
    ttfts, itls, lens = result.get("ttfts"), result.get("itls"), result.get("output_lens")
    if not all(isinstance(x, list) for x in (ttfts, itls, lens)) or not (len(ttfts) == len(itls) == len(lens)):
        return None
    errors = result.get("errors") if isinstance(result.get("errors"), list) else []
    rows = (requests or {}).get("requests") if isinstance(requests, dict) else None
    if not isinstance(rows, list) or len(rows) != len(ttfts):
        rows = None
    found = []
    for i, (ttft, gaps, length) in enumerate(zip(ttfts, itls, lens, strict=True)):
        ok = not (i < len(errors) and errors[i]) and isinstance(ttft, (int, float)) and ttft > 0
        if rows is not None:
            ok = ok and len(rows[i]) >= 3 and bool(rows[i][2])
        length = int(length) if isinstance(length, (int, float)) else 0
        if not ok:
            found.append({"ok": False, "ttft_ms": None, "tpot_ms": None, "e2e_ms": None, "output_len": length})
            continue
        if rows is not None and isinstance(rows[i][1], (int, float)):
            latency = float(rows[i][1])
        else:
            latency = float(ttft) + sum(float(g) for g in gaps or [] if isinstance(g, (int, float)))
        tpot = (latency - float(ttft)) / (length - 1) * 1000.0 if length > 1 else None
        found.append(
            {"ok": True, "ttft_ms": float(ttft) * 1000.0, "tpot_ms": tpot, "e2e_ms": latency * 1000.0,
             "output_len": length}
        )
    return found


def goodput(result, requests, slo):
    """The point's goodput under ``slo`` (the workload's ``goodput_slo``: limits in ms of
    GOODPUT_LIMITS): how many requests met every limit, of how many sent, and their output tokens
    of all output tokens; None without a limit or without ``--output-details``. A request with no
    TPOT (one token) meets a TPOT limit; a failed request meets nothing. ``request_throughput`` is
    the requests that met it per second of bench_serving's ``duration``. The sample rule is the
    caller's (sglang_bench_points.apply_goodput)."""
    limits = dict((name, float(slo[name])) for name in GOODPUT_LIMITS if (slo or {}).get(name) is not None)
    latencies = request_latencies(result, requests) if limits else None
    if not latencies:
        return None
    missed = dict((name, 0) for name in limits)
    met, met_tokens = 0, 0
    for row in latencies:
        over = [name for name in limits if not row["ok"] or (row[name] is not None and row[name] > limits[name])]
        for name in over:
            missed[name] += 1
        if not over:
            met += 1
            met_tokens += row["output_len"]
    tokens = sum(row["output_len"] for row in latencies if row["ok"])
    duration = result.get("duration")
    return {
        "slo": limits,
        "requests": len(latencies),
        "met": met,
        "request_share": round(met / len(latencies), 6),
        "output_tokens": tokens,
        "met_output_tokens": met_tokens,
        "token_share": round(met_tokens / tokens, 6) if tokens else None,
        "request_throughput": (
            round(met / duration, 6) if isinstance(duration, (int, float)) and duration > 0 else None
        ),
        "missed": missed,
        "failed": sum(1 for row in latencies if not row["ok"]),
    }


def _distribution(values):
    """``{n, min, mean, median, p90, max}`` of a list of token counts (the whole population a point sent,
    nearest-rank quantiles), None for none."""
    values = sorted(int(v) for v in values)
    if not values:
        return None

    def rank(q):
        return values[max(0, math.ceil(q * len(values)) - 1)]

    return {"n": len(values), "min": values[0], "mean": round(sum(values) / len(values), 3),
            "median": rank(0.5), "p90": rank(0.9), "max": values[-1]}


def length_distribution(result):
    """The prompt and output lengths a point really sent and received, from bench_serving's
    ``--output-details`` line (``input_lens``: its tokenizer's count of each prompt; ``output_lens``),
    over the requests that succeeded: ``{"input": ..., "output": ...}`` (_distribution), or None
    without the details. A corpus (sharegpt) point records it: its prompts are the corpus's own."""
    inputs, outputs = result.get("input_lens"), result.get("output_lens")
    if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
        return None
    errors = result.get("errors") if isinstance(result.get("errors"), list) else []
    ok = [i for i in range(len(inputs)) if not (i < len(errors) and errors[i])
          and isinstance(inputs[i], (int, float)) and isinstance(outputs[i], (int, float))]
    if not ok:
        return None
    return {"input": _distribution(inputs[i] for i in ok), "output": _distribution(outputs[i] for i in ok)}


def cache_hit_band(num_prompts, groups, system_len, question_len, concurrency):
    """The prefix-cache hit rates a cold generated-shared-prefix point of one turn can show, as
    ``(low, high)`` shares of prompt tokens, from bench_serving's construction: ``groups`` system
    prompts of ``system_len`` tokens, each before ``num_prompts / groups`` questions of
    ``question_len``, sent ``concurrency`` at a time from a flushed cache.

    High: every request but its group's first finds the system prompt cached, (N - G) / N x S / (S + Q).
    Low: a request finds nothing only when it is its group's first or was sent before any request
    finished (the first wave of ``concurrency``, which holds at least one group's first), so at most
    c + G - 1 miss: max(0, N - c - G + 1) / N x S / (S + Q). At concurrency 1 both are the same;
    at a concurrency near the prompts the low end is 0 (every request in flight before any prefill
    ended). Token counts are bench_serving's nominal lengths: the server counts what it tokenized."""
    n, g, c = int(num_prompts), int(groups), int(concurrency)
    if n < 1 or g < 1 or c < 1:
        raise ValueError(f"prompts, groups and concurrency must be >= 1, got {n}, {g}, {c}")
    share = float(system_len) / float(system_len + question_len)
    high = max(0, n - g) / n * share
    low = max(0, n - c - g + 1) / n * share
    return round(min(low, high), 4), round(high, 4)


def cache_mismatch(hit_rate, band, margin):
    """Why a point's server-side hit rate is not the workload's (a sentence), or None: below the
    band's low end or above its high end by more than ``margin``."""
    low, high = band
    if hit_rate < low - margin:
        return (f"the server found {hit_rate:.1%} of the prompt tokens cached, below the workload's "
                f"{low:.1%}-{high:.1%} by more than its margin {margin:g}")
    if hit_rate > high + margin:
        return (f"the server found {hit_rate:.1%} of the prompt tokens cached, above the workload's "
                f"{low:.1%}-{high:.1%} by more than its margin {margin:g}")
    return None


def window_shortfall(result, window):
    """Why a completed point is too short for its measurement window (``{min_requests,
    min_duration_s}``), or None. bench_serving's ``duration`` and ``completed``."""
    if not window:
        return None
    reasons = []
    completed = int(result.get("completed") or 0)
    duration = result.get("duration")
    need_requests = int(window.get("min_requests") or 0)
    need_seconds = float(window.get("min_duration_s") or 0)
    if completed < need_requests:
        reasons.append(f"{completed} requests completed, the window needs {need_requests}")
    if isinstance(duration, (int, float)) and duration < need_seconds:
        reasons.append(f"it lasted {duration:.2f} s, the window needs {need_seconds:g} s")
    return "; ".join(reasons) or None


def read_sidecar(path):
    """A client sidecar (JSON) or None."""
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None
