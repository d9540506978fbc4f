# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SGLang's Prometheus endpoint ``/metrics`` (``--enable-metrics``), fed by the SYNTHETIC engine.

Names, HELP texts, types, label sets and buckets are SGLang's (``srt/observability/
metrics_collector.py``: ``TokenizerMetricsCollector``, ``SchedulerMetricsCollector``;
``srt/utils/common.py``: ``add_prometheus_track_response_middleware``), held to real SGLang 0.5.17's
``/metrics`` in ``tests/fixtures/real-sglang/probe-0.5.17-h200-tp1-metrics/``. The text is what
prometheus_client's multiprocess collector writes (SGLang always runs it in multiprocess mode):
HELP and TYPE per metric, labels sorted by name, per series ``_sum``, the cumulative ``_bucket``
lines and ``_count``, no ``_created`` lines, values as Go floats (``33.0``, ``1.34184517e+08``),
and a labelled metric only once it has a series.

Two families (``sglang_rules.is_new_family``):

- **0.5.10.post1 (the pin)**: request metrics are labelled ``model_name`` only;
  ``queue_time_seconds`` buckets start ``0.0, 0.1, 0.2``.
- **0.5.11 and later** (recorded on 0.5.17; the same in 0.5.23's source): request metrics carry
  ``engine_type`` too, and ``prompt_tokens_total``, ``generation_tokens_total``,
  ``num_requests_total``, ``time_to_first_token_seconds`` and ``e2e_request_latency_seconds`` an
  ``is_streaming`` label; ``queue_time_seconds`` buckets start ``0.0, 0.001, 0.005``; the three
  token-length histograms are always there.

What counts when, as in SGLang (``TokenizerManager.collect_metrics``, ``Req`` time stats,
``scheduler_components/metrics_reporter.py``):

- A request counts once it finishes (``observe_one_finished_request``): prompt tokens, generation
  tokens, cached tokens (``cache_source="device"``), one request. A request refused before the
  scheduler (validation error, also inside an HTTP 200 stream) counts nothing. ``/health_generate``
  requests are sent with ``log_metrics=False``: they count only on the scheduler side
  (``queue_time_seconds``). The server's own warm-up is an HTTP ``/generate`` like any other: it
  counts (not streamed, 8 tokens).
- Time to first token: when the first output reaches the tokenizer; for a request that is not
  streamed that is when it finishes, so its TTFT equals its end-to-end latency and it adds no
  inter-token latency. A streamed request adds one inter-token observation per output chunk
  (``_sum`` += the interval, ``_count`` += the chunk's tokens).
- ``queue_time_seconds``: from entering the waiting queue to the first forward, for every request
  the scheduler runs.
- The scheduler's gauges are set when SGLang logs a batch: ``cache_hit_rate`` is the last prefill
  batch's cached / (cached + computed) tokens and goes back to 0 at the next decode log line
  (every ``--decode-log-interval`` decode steps); ``gen_throughput`` is set at decode log lines;
  when the scheduler goes idle, the running and queued requests, throughput and token usage are
  published at once (``_maybe_log_idle_metrics``). For a point's hit rate use the counters:
  Δ ``cached_tokens_total`` / Δ ``prompt_tokens_total``.

Not served: the per-stage, CUDA-graph, speculative, memory, KV-pool, routing-key, startup and
process-CPU metrics of the recording. Every number is SYNTHETIC (the engine's invented timing):
the text's first line is a comment saying so and the answer has an ``X-SGLang-Sim: synthetic``
header.
"""

from __future__ import annotations

import gzip
import math
import re
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"  # prometheus_client's CONTENT_TYPE_LATEST
# The first line: a comment, which the Prometheus text format lets parsers skip
SYNTHETIC_COMMENT = "# sglang-sim: SYNTHETIC SGLang-protocol simulator - not real performance"

# TokenizerMetricsCollector's defaults (0.5.10.post1 and 0.5.17 alike)
TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400,
               600, 1200, 1800, 2400)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040,
               0.060, 0.080, 0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000)
# SchedulerMetricsCollector.queue_time
_QUEUE_TAIL = (1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400, 500,
               600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000)
QUEUE_BUCKETS_PIN = (0.0, 0.1, 0.2, 0.5, *_QUEUE_TAIL)
QUEUE_BUCKETS_NEW = (0.0, 0.001, 0.005, 0.010, 0.050, 0.100, 0.200, 0.500, *_QUEUE_TAIL)
# 0.5.17 TokenizerMetricsCollector default_bucket_prompt_tokens (prompt, uncached and generation)
TOKEN_BUCKETS = (100, 300, 500, 700, 1000, 1500, 2000, 3000, 4000, 5000, 6000, 7000, 8000, 9000,
                 10000, 12500, 15000, 17500, 20000, 22500, 25000, 27500, 30000, 35000, 40000,
                 60000, 80000, 100000, 200000, 300000, 400000, 600000, 800000, 1000000, 1100000)


def float_to_go_string(value: float) -> str:
    """prometheus_client.utils.floatToGoString."""
    value = float(value)
    if value == math.inf:
        return "+Inf"
    if value == -math.inf:
        return "-Inf"
    if math.isnan(value):
        return "NaN"
    text = repr(value)
    dot = text.find(".")
    if value > 0 and dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return text


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _labels_text(labels: Mapping[str, str]) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{_escape(str(v))}"' for k, v in sorted(labels.items())) + "}"


def token_buckets(rule: Any, default: Sequence[float] = TOKEN_BUCKETS) -> list[float]:
    """srt/observability/utils.py generate_buckets: ``default``, ``tse MIDDLE BASE COUNT`` or
    ``custom B1 B2 ...`` (--prompt-tokens-buckets / --generation-tokens-buckets)."""
    rule = [str(x) for x in rule] if isinstance(rule, (list, tuple)) and rule else ["default"]
    if rule[0] == "tse":
        middle, base, count = float(rule[1]), float(rule[2]), int(rule[3])
        buckets, distance = [middle], 1.0
        for _ in range(math.ceil(count / 2)):
            distance *= base
            buckets += [middle + distance, max(0.0, middle - distance)]
        return sorted(set(buckets))
    if rule[0] == "custom":
        return sorted({float(x) for x in rule[1:]})
    return sorted(set(default))


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_exposition(text: str) -> dict[str, dict[str, Any]]:
    """Prometheus text (format 0.0.4) as {family: {"type", "help", "samples": [(name, labels,
    value)]}}, samples under the family whose TYPE line precedes them; other comments skipped."""
    families: dict[str, dict[str, Any]] = {}
    current = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(" ", 3)
            if len(parts) >= 3 and parts[1] in ("HELP", "TYPE"):
                family = families.setdefault(parts[2], {"type": None, "help": None, "samples": []})
                family["help" if parts[1] == "HELP" else "type"] = parts[3] if len(parts) > 3 else ""
                current = parts[2]
            continue
        match = _SAMPLE.match(line)
        if not match or current is None:
            raise ValueError(f"not a Prometheus sample line: {line!r}")
        name, labels, value = match.groups()
        families[current]["samples"].append(
            (name, dict(_LABEL.findall(labels or "")), float(value)))
    return families


# --- the Prometheus data model -----------------------------------------------------------------


class Family:
    """One metric: name, HELP, TYPE, label names; its series by label values."""

    def __init__(self, name: str, doc: str, kind: str, labelnames: Iterable[str],
                 buckets: Sequence[float] = ()):
        self.name = name
        self.doc = doc
        self.kind = kind  # counter | gauge | histogram
        self.labelnames = tuple(labelnames)
        self.buckets = tuple(float(b) for b in buckets)
        self.series: dict[tuple, list] = {}

    def _child(self, labels: Mapping[str, Any]) -> list:
        if set(labels) != set(self.labelnames):
            raise ValueError(f"{self.name}: labels {sorted(labels)} != {sorted(self.labelnames)}")
        key = tuple(str(labels[n]) for n in self.labelnames)
        child = self.series.get(key)
        if child is None:
            # counter/gauge: [value]; histogram: [sum, count per bucket (not cumulative), ..., +Inf]
            child = [0.0] if self.kind != "histogram" else [0.0] + [0] * (len(self.buckets) + 1)
            self.series[key] = child
        return child

    def inc(self, labels: Mapping[str, Any], amount: float = 1.0) -> None:
        self._child(labels)[0] += amount

    def set(self, labels: Mapping[str, Any], value: float) -> None:
        self._child(labels)[0] = float(value)

    def observe(self, labels: Mapping[str, Any], value: float, total: float | None = None,
                count: int = 1) -> None:
        """One observation of ``value`` (``count`` times, adding ``total`` to the sum; SGLang's
        observe_inter_token_latency adds a chunk's interval once and its tokens to one bucket)."""
        child = self._child(labels)
        child[0] += value * count if total is None else total
        index = next((i for i, b in enumerate(self.buckets) if value <= b), len(self.buckets))
        child[1 + index] += count

    def render(self, lines: list[str]) -> None:
        if not self.series:
            return
        lines.append(f"# HELP {self.name} {self.doc}")
        lines.append(f"# TYPE {self.name} {self.kind}")
        for key, child in self.series.items():
            labels = dict(zip(self.labelnames, key, strict=True))
            if self.kind != "histogram":
                lines.append(f"{self.name}{_labels_text(labels)} {float_to_go_string(child[0])}")
                continue
            lines.append(f"{self.name}_sum{_labels_text(labels)} {float_to_go_string(child[0])}")
            running = 0
            for bound, n in zip((*self.buckets, math.inf), child[1:], strict=True):
                running += n
                le = {**labels, "le": float_to_go_string(bound)}
                lines.append(f"{self.name}_bucket{_labels_text(le)} {float_to_go_string(running)}")
            lines.append(f"{self.name}_count{_labels_text(labels)} {float_to_go_string(running)}")


# --- SGLang's collectors ------------------------------------------------------------------------


def _engine_type(args: Mapping[str, Any]) -> str:
    """DisaggregationMode.to_engine_type."""
    mode = str(args.get("disaggregation_mode") or "null")
    return mode if mode in ("prefill", "decode") else "unified"


def _float_list(value: Any, default: Sequence[float]) -> tuple[float, ...]:
    if isinstance(value, (list, tuple)) and value:
        try:
            return tuple(float(v) for v in value)
        except (TypeError, ValueError):
            return tuple(default)
    return tuple(default)


class SglangMetrics:
    """The series one SGLang server with ``--enable-metrics`` exposes (the simulator's subset)."""

    def __init__(self, args: Mapping[str, Any], new_family: bool, max_total_num_tokens: int):
        self.new_family = new_family
        model_name = str(args.get("served_model_name") or args.get("model_path"))
        extra: dict[str, str] = {}
        if args.get("enable_priority_scheduling"):
            extra["priority"] = ""
        if isinstance(args.get("extra_metric_labels"), dict):
            extra.update({str(k): str(v) for k, v in args["extra_metric_labels"].items()})
        # TokenizerManager.init_metric_collector_watchdog; the pin has no engine_type there
        self.tokenizer_labels = {"model_name": model_name, **extra}
        if new_family:
            self.tokenizer_labels["engine_type"] = _engine_type(args)
        # SchedulerMetricsCollector of the stats-logging rank (attn TP rank 0): the simulator
        # has one engine and reports as that rank
        self.scheduler_labels = {"model_name": model_name, "engine_type": _engine_type(args),
                                 "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0", **extra}
        tok = tuple(self.tokenizer_labels)
        stream = (*tok, "is_streaming") if new_family else tok
        sched = tuple(self.scheduler_labels)
        self.families: list[Family] = []
        add = self._add
        self.prompt_tokens = add("sglang:prompt_tokens_total", "Number of prefill tokens processed.",
                                 "counter", stream)
        self.generation_tokens = add("sglang:generation_tokens_total",
                                     "Number of generation tokens processed.", "counter", stream)
        self.cached_tokens = add("sglang:cached_tokens_total",
                                 "Number of cached prompt tokens by source (device/host/storage).",
                                 "counter", (*tok, "cache_source"))
        self.num_requests = add("sglang:num_requests_total", "Number of requests processed.",
                                "counter", stream)
        self.num_aborted = add("sglang:num_aborted_requests_total", "Number of requests aborted.",
                               "counter", tok)
        self.ttft = add("sglang:time_to_first_token_seconds",
                        "Histogram of time to first token in seconds.", "histogram", stream,
                        _float_list(args.get("bucket_time_to_first_token"), TTFT_BUCKETS))
        self.itl = add("sglang:inter_token_latency_seconds",
                       "Histogram of inter-token latency in seconds.", "histogram", tok,
                       _float_list(args.get("bucket_inter_token_latency"), ITL_BUCKETS))
        self.e2e = add("sglang:e2e_request_latency_seconds",
                       "Histogram of End-to-end request latency in seconds", "histogram", stream,
                       _float_list(args.get("bucket_e2e_request_latency"), E2E_BUCKETS))
        self.token_histograms = None
        if new_family:
            prompt_buckets = token_buckets(args.get("prompt_tokens_buckets"))
            self.token_histograms = (
                add("sglang:prompt_tokens_histogram", "Histogram of prompt token length.",
                    "histogram", tok, prompt_buckets),
                add("sglang:uncached_prompt_tokens_histogram",
                    "Histogram of uncached (compute) prompt token length.", "histogram", tok,
                    prompt_buckets),
                add("sglang:generation_tokens_histogram", "Histogram of generation token length.",
                    "histogram", tok, token_buckets(args.get("generation_tokens_buckets"))),
            )
        self.queue_time = add("sglang:queue_time_seconds", "Histogram of queueing time in seconds.",
                              "histogram", sched, QUEUE_BUCKETS_NEW if new_family else QUEUE_BUCKETS_PIN)
        self.gauges = {
            name: add(f"sglang:{name}", doc, "gauge", sched)
            for name, doc in (
                ("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool."),
                ("num_running_reqs", "The number of running requests."),
                ("num_queue_reqs", "The number of requests in the waiting queue."),
                ("gen_throughput", "The generation throughput (token/s)."),
                ("cache_hit_rate", "The prefix cache hit rate."),
                ("token_usage", "The token usage."),
                ("num_used_tokens", "The number of used tokens."),
            )
        }
        self.scheduler_stats(max_total_num_tokens=max_total_num_tokens, num_running_reqs=0,
                             num_queue_reqs=0, gen_throughput=0.0, cache_hit_rate=0.0,
                             token_usage=0.0, num_used_tokens=0)
        self.http_requests = add("sglang:http_requests_total",
                                 "Total number of HTTP requests by endpoint and method", "counter",
                                 ("endpoint", "method"))
        self.http_active = add("sglang:http_requests_active", "Number of currently active HTTP requests",
                               "gauge", ("endpoint", "method"))
        self.http_responses = add("sglang:http_responses_total",
                                  "Total number of HTTP responses by endpoint and status code",
                                  "counter", ("endpoint", "status_code", "method"))

    def _add(self, name: str, doc: str, kind: str, labelnames: Iterable[str],
             buckets: Sequence[float] = ()) -> Family:
        family = Family(name, doc, kind, labelnames, buckets)
        self.families.append(family)
        return family

    def _stream(self, streamed: bool) -> dict[str, str]:
        if not self.new_family:
            return self.tokenizer_labels
        return {**self.tokenizer_labels, "is_streaming": "true" if streamed else "false"}

    # --- the tokenizer manager's side -------------------------------------------------------

    def first_output(self, ttft: float, streamed: bool) -> None:
        self.ttft.observe(self._stream(streamed), ttft)

    def next_output(self, interval: float, new_tokens: int) -> None:
        if new_tokens > 0:
            self.itl.observe(self.tokenizer_labels, interval / new_tokens, total=interval,
                             count=new_tokens)

    def finished(self, prompt_tokens: int, generation_tokens: int, cached_tokens: int,
                 e2e_latency: float, streamed: bool) -> None:
        labels = self._stream(streamed)
        self.prompt_tokens.inc(labels, prompt_tokens)
        self.generation_tokens.inc(labels, generation_tokens)
        if cached_tokens > 0:
            self.cached_tokens.inc({**self.tokenizer_labels, "cache_source": "device"}, cached_tokens)
        self.num_requests.inc(labels)
        self.e2e.observe(labels, e2e_latency)
        if self.token_histograms:
            prompt, uncached, generation = self.token_histograms
            prompt.observe(self.tokenizer_labels, prompt_tokens)
            uncached.observe(self.tokenizer_labels, prompt_tokens - cached_tokens)
            generation.observe(self.tokenizer_labels, generation_tokens)

    def aborted(self) -> None:
        self.num_aborted.inc(self.tokenizer_labels)

    # --- the scheduler's side ----------------------------------------------------------------

    def queued(self, seconds: float) -> None:
        self.queue_time.observe(self.scheduler_labels, max(seconds, 0.0))

    def scheduler_stats(self, **values: float) -> None:
        for name, value in values.items():
            self.gauges[name].set(self.scheduler_labels, value)

    # --- the HTTP middleware -----------------------------------------------------------------

    def http_begin(self, endpoint: str, method: str) -> None:
        labels = {"endpoint": endpoint, "method": method}
        self.http_requests.inc(labels)
        self.http_active.inc(labels)

    def http_end(self, endpoint: str, method: str, status: int | None) -> None:
        self.http_active.inc({"endpoint": endpoint, "method": method}, -1)
        if status is not None:
            self.http_responses.inc({"endpoint": endpoint, "method": method,
                                     "status_code": str(status)})

    # --- exposition ----------------------------------------------------------------------------

    def render(self) -> str:
        lines: list[str] = [SYNTHETIC_COMMENT]
        for family in self.families:
            family.render(lines)
        return "\n".join(lines) + "\n"

    def body(self, accept_encoding: str = "") -> tuple[bytes, dict[str, str]]:
        """prometheus_client's _bake_output: gzip when the client accepts it."""
        data = self.render().encode("utf-8")
        headers = {"Content-Type": CONTENT_TYPE, "X-SGLang-Sim": "synthetic"}
        if "gzip" in (accept_encoding or ""):
            data = gzip.compress(data, mtime=int(time.time()))
            headers["Content-Encoding"] = "gzip"
        return data, headers
