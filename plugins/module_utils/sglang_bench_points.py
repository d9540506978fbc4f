# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Benchmark points for module sglang_bench: the client's command line, the
plan of one cell, running it in one client process, parsing its result lines
and classifying failed points.

The client is tools/sglang_bench_client.py (SGLang's real bench_serving,
loaded once); its plan and status-line protocol are described there. The
provenance of a record is sglang_provenance.py. Standard library only: this
code runs on the target host. Key names follow SGLang's bench_serving JSONL
(docs/ledger.md). Pure functions, except those that read files or run the
client, each documented as such.
"""

import datetime
import json
import math
import os
import re
import signal
import subprocess
import threading
import time

try:  # Inside AnsiballZ.
    from ansible.module_utils.sglang_ledger import POINT_FAILED, POINT_OK, POINT_TOO_SHORT, to_json_safe
    from ansible.module_utils.sglang_point_window import (
        cache_hit_band,
        cache_mismatch,
        counter_mismatches,
        goodput,
        length_distribution,
        read_sidecar,
        server_metrics,
        steady_state,
        window_shortfall,
    )
    from ansible.module_utils.sglang_workload_options import (
        BACKEND,
        DEFAULT_ATTAINMENT,
        EXPECTED_HIT_RATE,
        MULTI_TURN_BACKEND,
        backend_for,
    )
except ImportError:  # pytest and tools put module_utils on sys.path.
    from sglang_ledger import POINT_FAILED, POINT_OK, POINT_TOO_SHORT, to_json_safe
    from sglang_point_window import (
        cache_hit_band,
        cache_mismatch,
        counter_mismatches,
        goodput,
        length_distribution,
        read_sidecar,
        server_metrics,
        steady_state,
        window_shortfall,
    )
    from sglang_workload_options import (
        BACKEND,
        DEFAULT_ATTAINMENT,
        EXPECTED_HIT_RATE,
        MULTI_TURN_BACKEND,
        backend_for,
    )


# Result keys copied from a bench_serving JSONL line into a ledger point,
# unchanged in name and unit (ms, tok/s, req/s, s).
METRIC_KEYS = (
    "duration",
    "completed",
    "total_input_tokens",
    "total_output_tokens",
    "total_output_tokens_retokenized",
    "request_throughput",
    "input_throughput",
    "output_throughput",
    "total_throughput",
    "max_output_tokens_per_s",
    "max_concurrent_requests",
    "mean_ttft_ms",
    "median_ttft_ms",
    "std_ttft_ms",
    "p99_ttft_ms",
    "mean_tpot_ms",
    "median_tpot_ms",
    "std_tpot_ms",
    "p99_tpot_ms",
    "mean_itl_ms",
    "median_itl_ms",
    "std_itl_ms",
    "p95_itl_ms",
    "p99_itl_ms",
    "mean_e2e_latency_ms",
    "median_e2e_latency_ms",
    "std_e2e_latency_ms",
    "p90_e2e_latency_ms",
    "p99_e2e_latency_ms",
    "accept_length",
)
# bench_serving's "concurrency" is the measured mean number of requests in
# flight; the ledger's point "concurrency" is the --max-concurrency asked for.
RENAMED_KEYS = {"concurrency": "measured_concurrency"}
# Arguments bench_serving echoes into its result line.
ECHO_KEYS = (
    "backend",
    "dataset_name",
    "request_rate",
    "max_concurrency",
    "random_input_len",
    "random_output_len",
    "random_range_ratio",
    "tag",
)

# Client output that says why bench_serving failed, most specific first.
_CLIENT_FAILURES = (
    (
        "server_unreachable",
        re.compile(
            r"Server at \S+ is not ready|Failed to fetch model from|"
            r"Cannot connect to host|Connection refused|Connection reset by peer|"
            r"Connection aborted|RemoteDisconnected|Server disconnected"
        ),
    ),
    (
        "hf_gated_or_offline",
        re.compile(
            r"LocalEntryNotFoundError|offline mode is enabled|HF_HUB_OFFLINE|"
            r"couldn't connect to 'https://huggingface.co'|GatedRepoError|"
            r"is not a local folder and is not a valid model identifier"
        ),
    ),
    (
        "incomplete_point",
        re.compile(r"name 'result' is not defined|Error running benchmark for request rate"),
    ),
)


# A percentile from too few samples is not that percentile: with n < 1 / (1 - q) requests the
# expected number of samples above the q-quantile is below one, so bench_serving's "p99" of 16
# requests is their maximum whatever the distribution (the SLO search on the H200 read p99 TTFT
# 82-126 ms at c=1 from 16 requests against medians of 13-20 ms). Such a value is withheld:
# the point's key is null and ``withheld_percentiles`` keeps the value, the sample size and the
# size it needed, so every reader shows "n/a (n=16)". Medians need one sample.
PERCENTILE_RE = re.compile(r"^(median|p(\d{1,2}(?:\.\d+)?))_(ttft|tpot|itl|e2e_latency)_ms$")


def percentile_quantile(key):
    """The quantile a bench_serving percentile key names (``p99_ttft_ms`` -> 0.99), or None."""
    match = PERCENTILE_RE.match(str(key))
    if not match:
        return None
    return 0.5 if match.group(1) == "median" else float(match.group(2)) / 100.0


def min_samples(quantile):
    """The samples a quantile needs: 1 for the median and below, else ceil(1 / (1 - q)) (p99: 100)."""
    if quantile <= 0.5:
        return 1
    return math.ceil(round(1.0 / (1.0 - quantile), 9))


def percentile_samples(result, completed):
    """The samples behind each kind of latency of one bench_serving result: ``{ttft, e2e_latency, tpot, itl}``.

    TTFT and end-to-end latency: one per completed request. TPOT: one per completed request with
    more than one output token (bench_serving skips the others). ITL: every inter-token gap.
    Exact from ``--output-details`` (``output_lens``, ``itls``); without them, from the totals."""
    requests = int(completed or 0)
    lens = result.get("output_lens")
    itls = result.get("itls")
    errors = result.get("errors") or []
    if isinstance(lens, list) and lens:
        ok = [n for i, n in enumerate(lens) if isinstance(n, (int, float)) and not (i < len(errors) and errors[i])]
        tpot = sum(1 for n in ok if n > 1)
    else:
        tpot = requests
    if isinstance(itls, list) and itls:
        itl = sum(len(gaps) for gaps in itls if isinstance(gaps, list))
    else:
        total = result.get("total_output_tokens")
        itl = max(0, int(total) - requests) if isinstance(total, (int, float)) else 0
    return {"ttft": requests, "e2e_latency": requests, "tpot": min(tpot, requests), "itl": itl}


def unsupported_percentiles(values, samples):
    """The percentiles of ``values`` (a point or a result line) that ``samples`` cannot support:
    ``{key: {"value", "n", "min_n"}}``."""
    found = {}
    for key, value in values.items():
        quantile = percentile_quantile(key)
        if quantile is None or value is None:
            continue
        kind = PERCENTILE_RE.match(key).group(3)
        need = min_samples(quantile)
        if samples.get(kind, 0) < need:
            found[key] = {"value": value, "n": samples.get(kind, 0), "min_n": need}
    return found


def withhold_percentiles(point, result, completed):
    """Null every percentile of ``point`` its sample cannot support; keep why in ``withheld_percentiles``."""
    samples = percentile_samples(result, completed)
    withheld = unsupported_percentiles(point, samples)
    for key in withheld:
        point[key] = None
    point["samples"] = samples
    if withheld:
        point["withheld_percentiles"] = withheld
    return point


# Goodput (sglang_point_window.goodput) as the point's own metrics, beside bench_serving's: the share
# of requests and of output tokens that met every limit of the workload's goodput_slo, and the
# requests that met it per second. Higher is better; the SLO search can bound them with ``min``.
GOODPUT_KEYS = {
    "goodput_request_share": "request_share",
    "goodput_token_share": "token_share",
    "goodput_request_throughput": "request_throughput",
}


def goodput_attainment(slo):
    """The share of requests the workload's goodput_slo asks to meet its limits (DEFAULT_ATTAINMENT unless it says)."""
    attainment = (slo or {}).get("attainment")
    return float(DEFAULT_ATTAINMENT if attainment is None else attainment)


def goodput_min_samples(slo):
    """The requests a goodput share needs: as a percentile at the workload's attainment (a share of
    at least 0.9 met is the statement "the 0.9-quantile is within the limit"), ceil(1 / (1 - attainment))."""
    return min_samples(goodput_attainment(slo))


def apply_goodput(point, block, slo):
    """Put a goodput block (sglang_point_window.goodput) into ``point``: ``goodput`` whole, with its
    attainment and ``min_n``, and the GOODPUT_KEYS metrics. From fewer requests than
    goodput_min_samples the metrics are null and kept under ``withheld_percentiles`` (with ``n`` and
    ``min_n``, shown as ``n/a (n=16)``), as a percentile from too few samples is. Returns the point."""
    if not block:
        return point
    need = goodput_min_samples(slo)
    block = dict(block, attainment=goodput_attainment(slo), min_n=need)
    point["goodput"] = block
    for key, source in GOODPUT_KEYS.items():
        value = block.get(source)
        if value is not None and block["requests"] < need:
            point.setdefault("withheld_percentiles", {})[key] = {"value": value, "n": block["requests"], "min_n": need}
            value = None
        point[key] = value
    return point


def num_prompts_for(concurrency, multiplier, floor):
    """Prompts for one point: max(multiplier * concurrency, floor)."""
    if concurrency < 1 or multiplier < 1 or floor < 1:
        raise ValueError(
            f"concurrency, multiplier and floor must be >= 1, got {concurrency!r}, {multiplier!r}, {floor!r}"
        )
    return max(int(multiplier) * int(concurrency), int(floor))


def format_request_rate(value):
    """Spell a request rate for the bench_serving command line ("inf" or a number)."""
    if value is None:
        return "inf"
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("inf", "infinity", "+inf"):
            return "inf"
        float(text)  # ValueError for anything that is not a number
        return text
    if value == float("inf"):
        return "inf"
    return repr(float(value))


def client_settings(workload):
    """build_client_argv's keyword arguments from a workload (sglang_workload_options.WORKLOAD_OPTIONS):
    the bench_serving settings every point of it shares. The one place a workload setting becomes
    a client argument."""
    return dict(
        input_len=workload["input_len"],
        output_len=workload["output_len"],
        dataset_name=workload.get("dataset_name") or "random",
        dataset_path=workload.get("dataset_path"),
        range_ratio=workload.get("random_range_ratio", 1.0),
        seed=workload.get("seed", 1),
        extra_request_body=workload.get("extra_request_body"),
        gsp_num_groups=workload.get("gsp_num_groups"),
        gsp_system_prompt_len=workload.get("gsp_system_prompt_len"),
        gsp_num_turns=workload.get("gsp_num_turns"),
        backend=workload.get("backend") or backend_for(workload),
    )


def shared_prefix_prompts(num_prompts, groups):
    """A point's prompts for generated-shared-prefix: bench_serving sends num_groups x
    prompts-per-group requests whatever --num-prompts says, so the count is rounded up to a
    multiple of the groups (the point's num_prompts is then what it sends). Unchanged without groups."""
    if not groups:
        return int(num_prompts)
    groups = int(groups)
    return -(-int(num_prompts) // groups) * groups


def build_client_argv(
    client_command,
    host,
    port,
    concurrency,
    num_prompts,
    input_len,
    output_len,
    output_file,
    tokenizer,
    dataset_name="random",
    dataset_path=None,
    range_ratio=1.0,
    request_rate="inf",
    seed=1,
    model=None,
    served_model_name=None,
    output_details=False,
    warmup_requests=None,
    tag=None,
    extra_args=None,
    extra_request_body=None,
    gsp_num_groups=None,
    gsp_system_prompt_len=None,
    gsp_num_turns=None,
    backend=BACKEND,
):
    """Return the full bench_serving command line for one point.

    The lengths go to the dataset's own flags: random/random-ids --random-input-len and
    --random-output-len; sharegpt --sharegpt-output-len (the prompts are the corpus's own);
    generated-shared-prefix --gsp-question-len, --gsp-output-len, --gsp-range-ratio, with
    --gsp-num-groups, --gsp-system-prompt-len and --gsp-prompts-per-group = num_prompts / groups
    (ValueError when num_prompts is not a multiple of the groups: shared_prefix_prompts), and
    --gsp-num-turns for a multi-turn one, which bench_serving 0.5.17 sends only through its chat
    backend (``backend`` MULTI_TURN_BACKEND; ValueError otherwise)."""
    turns = int(gsp_num_turns or 1)
    if turns > 1 and backend != MULTI_TURN_BACKEND:
        raise ValueError(
            f"gsp_num_turns {turns} needs bench_serving's chat backend {MULTI_TURN_BACKEND} (its multi-turn code "
            f"asserts one), not {backend!r}"
        )
    argv = list(client_command) + [
        "--backend",
        str(backend),
        "--host",
        str(host),
        "--port",
        str(port),
        "--dataset-name",
        str(dataset_name),
    ]
    if dataset_path:
        argv += ["--dataset-path", str(dataset_path)]
    argv += [
        "--random-input-len",
        str(int(input_len)),
        "--random-output-len",
        str(int(output_len)),
        "--random-range-ratio",
        str(float(range_ratio)),
        "--num-prompts",
        str(int(num_prompts)),
    ]
    if dataset_name == "sharegpt":
        argv += ["--sharegpt-output-len", str(int(output_len))]
    if dataset_name == "generated-shared-prefix":
        if not gsp_num_groups or not gsp_system_prompt_len:
            raise ValueError("generated-shared-prefix needs gsp_num_groups and gsp_system_prompt_len")
        if int(num_prompts) % int(gsp_num_groups):
            raise ValueError(f"num_prompts {num_prompts} is not a multiple of gsp_num_groups {gsp_num_groups}")
        argv += [
            "--gsp-num-groups",
            str(int(gsp_num_groups)),
            "--gsp-prompts-per-group",
            str(int(num_prompts) // int(gsp_num_groups)),
            "--gsp-system-prompt-len",
            str(int(gsp_system_prompt_len)),
            "--gsp-question-len",
            str(int(input_len)),
            "--gsp-output-len",
            str(int(output_len)),
            "--gsp-range-ratio",
            str(float(range_ratio)),
        ]
        if turns > 1:
            argv += ["--gsp-num-turns", str(turns)]
    argv += [
        "--max-concurrency",
        str(int(concurrency)),
        "--request-rate",
        format_request_rate(request_rate),
        "--seed",
        str(int(seed)),
        "--tokenizer",
        str(tokenizer),
        "--model",
        str(model or tokenizer),
    ]
    if served_model_name:
        argv += ["--served-model-name", str(served_model_name)]
    if warmup_requests is not None:
        argv += ["--warmup-requests", str(int(warmup_requests))]
    if tag:
        argv += ["--tag", str(tag)]
    if extra_request_body:
        argv += ["--extra-request-body", json.dumps(extra_request_body, sort_keys=True)]
    argv += ["--output-file", str(output_file), "--disable-tqdm"]
    if output_details:
        argv.append("--output-details")
    argv += [str(a) for a in (extra_args or [])]
    return argv


def parse_result_lines(text):
    """Parse bench_serving JSONL text; return the list of objects.

    json.loads accepts the ``Infinity`` that bench_serving writes for
    ``--request-rate inf``; callers pass results through to_json_safe before
    they leave as strict JSON.
    """
    results = []
    for line in text.splitlines():
        line = line.strip()
        if not line:
            continue
        value = json.loads(line)
        if isinstance(value, dict):
            results.append(value)
    return results


def read_new_results(path, offset=0):
    """Return the result objects bench_serving appended to ``path`` after ``offset``.

    bench_serving opens its output file in append mode, so a reused file holds
    older lines; only the bytes written by this run are parsed.
    """
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read()
    except OSError:
        return []
    return parse_result_lines(data.decode("utf-8", errors="replace"))


def summarize_errors(errors, limit=5, width=300):
    """Count request errors by message, digits ignored; return [{error, count}].

    Messages that differ only in numbers ("The input (73 tokens) ...") count
    as one; ``error`` is the first example. Beyond ``limit`` groups the rest
    are summed under "(other errors)", so the counts always add up to the
    number of failed requests that reported an error.
    """
    groups = {}
    for error in errors or []:
        if not error:
            continue
        text = str(error).strip()[:width]
        key = re.sub(r"\d+", "N", text)
        if key not in groups:
            groups[key] = {"error": text, "count": 0}
        groups[key]["count"] += 1
    ranked = sorted(groups.values(), key=lambda item: (-item["count"], item["error"]))
    summary = ranked[:limit]
    rest = sum(item["count"] for item in ranked[limit:])
    if rest:
        summary.append({"error": "(other errors)", "count": rest})
    return summary


# A point that cannot lie. A streamed /generate that fails validation answers HTTP 200, an
# error chunk and [DONE]; bench_serving counts it as completed (recorded on real SGLang 0.5.17:
# tests/fixtures/real-sglang/probe-0.5.17-h200-tp1-lying-point/ - 8 of 8 failed, reported as 8
# successful at 12x the real output tok/s, TTFT 0, 0 retokenized tokens, no errors). Any of
# these signals fails an otherwise complete point with class streamed_error:
#   - a mean TTFT of 0 ms over completed requests (no first token ever arrived);
#   - the client's retokenized output below RETOKENIZED_FLOOR of the output it reports;
#   - more request errors (--output-details) than failed requests;
#   - "[http_server] Error" lines in the server's log while the point ran.
RETOKENIZED_FLOOR = 0.5
SERVER_ERROR_RE = re.compile(r"\[http_server\] Error: ?(.*)")
LOG_TIME_RE = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")


def lying_signals(result, num_prompts, server_errors=()):
    """Why a result that bench_serving calls complete is not to be believed (empty: believe it)."""
    signals = []
    completed = result.get("completed") or 0
    if not completed:
        return signals
    ttft = result.get("mean_ttft_ms")
    if isinstance(ttft, (int, float)) and ttft <= 0:
        signals.append(f"mean TTFT is {ttft} ms over {completed} completed requests (no first token arrived)")
    reported = result.get("total_output_tokens")
    retokenized = result.get("total_output_tokens_retokenized")
    if isinstance(reported, (int, float)) and isinstance(retokenized, (int, float)) and reported > 0:
        if retokenized < RETOKENIZED_FLOOR * reported:
            signals.append(
                f"the client retokenized {int(retokenized)} output tokens of the {int(reported)} reported"
            )
    errors = [e for e in result.get("errors") or [] if e]
    if len(errors) > max(0, int(num_prompts) - int(completed)):
        signals.append(f"{len(errors)} request error(s) for {int(num_prompts) - int(completed)} failed request(s)")
    if server_errors:
        signals.append(
            f"{len(server_errors)} '[http_server] Error' line(s) in the server log during the point, "
            f"first: {server_errors[0][:200]}"
        )
    return signals


def server_errors_by_window(log_text, windows):
    """``[http_server] Error`` lines of ``log_text`` per point window (id -> [message]).

    ``windows``: id -> (start, end) as epoch seconds; a line belongs to a window when its
    timestamp (SGLang logs whole seconds, local time) falls within it, one second of slack
    each side. Lines without a timestamp belong to every window (a single-point cell).
    """
    found = dict((key, []) for key in windows)
    for line in (log_text or "").splitlines():
        match = SERVER_ERROR_RE.search(line)
        if not match:
            continue
        stamp = LOG_TIME_RE.match(line)
        when = None
        if stamp:
            try:
                when = datetime.datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
            except ValueError:
                when = None
        for key, (start, end) in windows.items():
            if when is None or (start is not None and end is not None and start - 1 <= when <= end + 1):
                found[key].append(match.group(1).strip())
    return found


def point_from_result(result, concurrency, repeat, num_prompts, server_errors=(), turns=1):
    """Build a ledger point from one bench_serving result object.

    The point is "ok" only when bench_serving completed every request it was to send:
    ``num_prompts``, or for a multi-turn point (``turns`` > 1, --gsp-num-turns) num_prompts
    conversations of ``turns`` requests each, which bench_serving counts one by one (its
    multi-turn outputs are flattened before calculate_metrics). Otherwise it is "failed" with
    class incomplete_point and the counts in its message.
    """
    turns = max(1, int(turns or 1))
    point = {
        "concurrency": int(concurrency),
        "repeat": int(repeat),
        "num_prompts": int(num_prompts),
    }
    if turns > 1:
        point["turns"] = turns
        point["requests"] = int(num_prompts) * turns
    num_prompts = int(num_prompts) * turns
    for key in METRIC_KEYS:
        point[key] = result.get(key)
    for source, target in RENAMED_KEYS.items():
        point[target] = result.get(source)
    point["client_echo"] = dict((key, result.get(key)) for key in ECHO_KEYS if key in result)
    completed = result.get("completed")
    completed = int(completed) if isinstance(completed, (int, float)) else 0
    point["completed"] = completed
    point["failed"] = int(num_prompts) - completed
    withhold_percentiles(point, result, completed)
    if "errors" in result:
        point["errors"] = summarize_errors(result.get("errors"))
    signals = lying_signals(result, num_prompts, server_errors) if completed == int(num_prompts) else []
    if completed == int(num_prompts) and not signals:
        point["status"] = POINT_OK
        point["failure"] = None
    elif signals:
        point["status"] = POINT_FAILED
        point["failure"] = {
            "class": "streamed_error",
            "step": "benchmark",
            "message": (
                f"bench_serving counted {completed} of {int(num_prompts)} requests as completed at concurrency "
                f"{int(concurrency)}, but " + "; ".join(signals)
                + " - the server answered errors inside HTTP 200 streams"
            ),
            "signals": signals,
        }
    else:
        point["status"] = POINT_FAILED
        point["failure"] = {
            "class": "incomplete_point",
            "step": "benchmark",
            "message": (
                f"completed {completed} of {int(num_prompts)} requests "
                f"({point['failed']} failed) at concurrency {int(concurrency)}"
            ),
        }
    return to_json_safe(point)


def failed_point(concurrency, repeat, num_prompts, failure_class, message):
    """Build a failed point for a run that produced no result line.

    Without a result line the number of completed requests is unknown, so
    ``completed`` and ``failed`` are null (not a guessed 0).
    """
    return {
        "concurrency": int(concurrency),
        "repeat": int(repeat),
        "num_prompts": int(num_prompts),
        "status": POINT_FAILED,
        "completed": None,
        "failed": None,
        "failure": {
            "class": failure_class,
            "step": "benchmark",
            "message": f"{message}; no result line, so the completed count is unknown",
        },
    }


def classify_client_failure(returncode, output, timed_out=False, timeout_reason=None):
    """Return ``(class, reason)`` for a bench_serving run without a result line.

    ``timeout_reason`` words a timeout (the per-point deadline inside the
    client, or the client process's overall limit); the class is the same.
    """
    if timed_out:
        return "bench_timeout", timeout_reason or "bench_serving ran past its time limit and was killed"
    for failure_class, pattern in _CLIENT_FAILURES:
        match = pattern.search(output or "")
        if match:
            if failure_class == "incomplete_point":
                return failure_class, "every request failed; bench_serving wrote no result"
            return failure_class, f"bench_serving output: {match.group(0)}"
    return "bench_client_failed", f"bench_serving exited with {returncode} and wrote no result"


def tail(text, limit=4000):
    """Return the last ``limit`` characters of ``text``."""
    text = text or ""
    return text[-limit:]


class Beside:
    """``function(*args)`` run in a daemon thread beside the caller (module sglang_bench: the record's
    provenance while the quality check's requests run). ``result()`` waits for it and returns what it
    returned, or raises what it raised. A daemon, so a module that fails meanwhile (an interrupt) does
    not wait for it to end."""

    def __init__(self, function, *args):
        self._outcome = {}
        self._thread = threading.Thread(target=self._run, args=(function,) + args, daemon=True)
        self._thread.start()

    def _run(self, function, *args):
        try:
            self._outcome["value"] = function(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by result()
            self._outcome["error"] = exc

    def result(self):
        self._thread.join()
        if "error" in self._outcome:
            raise self._outcome["error"]
        return self._outcome["value"]


def run_client(argv, env=None, timeout=None, log_path=None, cwd=None, gate=None, clock=time.monotonic):
    """Run the benchmark client process (side effect); return its outcome.

    The client runs in its own session so a timeout kills its whole process
    group. Its stdout and stderr go to ``log_path`` (kept beside the JSONL
    files), whose text is returned. Returns ``{"rc", "timed_out", "output",
    "log", "gate"}``.

    ``gate``: a callable run while the client imports bench_serving (the client
    gets ``--wait-go`` and waits on stdin before its first point). A true result
    tells the client to go; a false one (or an exception, re-raised after) ends
    the client before it runs anything, and ``gate`` is then False in the outcome.
    ``timeout`` covers the gate too.
    """
    full_env = dict(os.environ)
    full_env.update(dict((str(k), str(v)) for k, v in (env or {}).items()))
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    log_path = log_path or os.devnull
    timed_out, went = False, None
    began = clock()
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            list(argv) + (["--wait-go"] if gate else []),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.PIPE if gate else subprocess.DEVNULL,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            if gate:
                try:
                    went = bool(gate())
                except BaseException:
                    _release(proc, False)
                    raise
                _release(proc, went)
            if went is False:
                _kill_group(proc)
                rc = proc.returncode
            else:
                left = None if timeout is None else max(0.0, timeout - (clock() - began))
                try:
                    rc = proc.wait(timeout=left)
                except subprocess.TimeoutExpired:
                    timed_out = True
                    _kill_group(proc)
                    rc = proc.returncode
        except BaseException:
            # Interrupted (KeyboardInterrupt, or SIGTERM through raise_on_sigterm) or broken:
            # the client runs in a session of its own, so nothing else would end it.
            _kill_group(proc, grace=INTERRUPT_GRACE_S)
            raise
    output = ""
    if log_path != os.devnull:
        with open(log_path, "rb") as handle:
            output = handle.read().decode("utf-8", errors="replace")
    return {"rc": rc, "timed_out": timed_out, "output": output, "log": log_path, "gate": went}


def _release(proc, go):
    """Answer a client that waits on stdin (--wait-go): "go", else "abort"; a client
    that already died is not an error here (its exit status tells)."""
    try:
        proc.stdin.write(b"go\n" if go else b"abort\n")
        proc.stdin.close()
    except (OSError, ValueError):
        pass


def _kill_group(proc, grace=10.0):
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except OSError:
            pass
        try:
            proc.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


# Seconds an interrupted module gives its client between SIGTERM and SIGKILL: the whole
# clean-up must end within the 2 s an interrupt may leave a client running (docs/benchmark.md).
INTERRUPT_GRACE_S = 0.5


# ------------------------------------------------------------------ the standby client
# A client started beside the server (mode standby) imports bench_serving while the server
# loads; the measure step attaches to it (run_plan's ``standby``). Its directory holds
# state.json (written here), client.log (its stdout), go.json / abort (written here).
STANDBY_STATE = "state.json"
STANDBY_LOG = "client.log"
STANDBY_GO = "go.json"
STANDBY_ABORT = "abort"
# How often an attached module looks at the client's log and pid.
ATTACH_POLL_S = 0.05


def _proc_start(pid):
    """Start time of a live, non-zombie process from /proc (None when gone); see the client's."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError, ValueError):
        return None
    return None if fields[0] in ("Z", "X") else fields[19]


def standby_key(client_command, env):
    """What a standby client must match to be used: its command and environment."""
    return json.dumps({"command": list(client_command), "env": dict((str(k), str(v)) for k, v in (env or {}).items())},
                      sort_keys=True)


def end_standby(directory, reason="replaced"):
    """Stop a standby client of ``directory`` if one runs (abort file, then its group); True when one ran."""
    state = read_standby(directory)
    if not state:
        return False
    try:
        with open(os.path.join(directory, STANDBY_ABORT), "w", encoding="utf-8") as handle:
            handle.write(reason + "\n")
    except OSError:
        pass
    _kill_pid_group(state["pid"], state.get("start"), INTERRUPT_GRACE_S)
    return True


def read_standby(directory):
    """The state of the standby client of ``directory`` when it still runs, else None."""
    try:
        with open(os.path.join(directory, STANDBY_STATE), encoding="utf-8") as handle:
            state = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(state, dict) or not isinstance(state.get("pid"), int):
        return None
    start = _proc_start(state["pid"])
    if start is None or start != state.get("start"):
        return None
    return state


def start_standby(client_command, directory, env=None, server_pid=None, leash_pid=None, max_wait=None):
    """Start a client in standby beside the server (side effect); return its state.

    Any standby client left in ``directory`` is ended first. The client gets a session of
    its own and outlives this call; the leash (``leash_pid``, the controller when it runs on
    this host), the server's pid and ``max_wait`` bound its life until a measure step
    attaches to it (tools/sglang_bench_client.py, "The leash")."""
    os.makedirs(directory, 0o750, exist_ok=True)
    end_standby(directory)
    for name in (STANDBY_GO, STANDBY_ABORT, STANDBY_STATE):
        try:
            os.unlink(os.path.join(directory, name))
        except FileNotFoundError:
            pass
    argv = list(client_command) + ["--standby", directory]
    if server_pid:
        argv += ["--server-pid", str(int(server_pid))]
    if leash_pid:
        argv += ["--leash", str(int(leash_pid))]
    if max_wait:
        argv += ["--max-wait", str(max_wait)]
    full_env = dict(os.environ)
    full_env.update(dict((str(k), str(v)) for k, v in (env or {}).items()))
    full_env.setdefault("PYTHONUNBUFFERED", "1")
    log_path = os.path.join(directory, STANDBY_LOG)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=full_env,
            start_new_session=True, close_fds=True,
        )
    state = {
        "pid": proc.pid,
        "start": _proc_start(proc.pid),
        "key": standby_key(client_command, env),
        "command": argv,
        "log": log_path,
        "server_pid": server_pid,
        "leash_pid": leash_pid,
        "started_at": _iso(time.time()),
    }
    tmp = os.path.join(directory, STANDBY_STATE + ".tmp")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(state, handle)
    os.replace(tmp, os.path.join(directory, STANDBY_STATE))
    return state


def _kill_pid_group(pid, start, grace):
    """SIGTERM, then SIGKILL after ``grace`` s, to the group of a process that is not our child."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if _proc_start(pid) is None or (start and _proc_start(pid) != start):
            return
        try:
            os.killpg(pid, sig)
        except OSError:
            return
        end = time.monotonic() + grace
        while time.monotonic() < end:
            if _proc_start(pid) is None:
                return
            time.sleep(0.02)


def attach_client(state, plan_path, timeout=None, gate=None, clock=time.monotonic):
    """Run the plan in the standby client of ``state`` (side effect); run_client's outcome.

    The gate (the warm-up) runs first; then go.json names the plan and hands the client's
    leash to this process, and this call waits until the client says ``done`` and ends, or
    dies, or passes ``timeout``. Its rc is the one it reports in ``done`` (None when it died
    without one: then 137). Interrupted, it kills the client's group before re-raising."""
    directory = os.path.dirname(state["log"])
    began = clock()
    timed_out, went = False, None
    pid, start = state["pid"], state.get("start")
    try:
        if gate:
            went = bool(gate())
        if went is False:
            with open(os.path.join(directory, STANDBY_ABORT), "w", encoding="utf-8") as handle:
                handle.write("warm-up failed\n")
            _wait_gone(pid, start, 5.0)
            _kill_pid_group(pid, start, INTERRUPT_GRACE_S)
        else:
            tmp = os.path.join(directory, STANDBY_GO + ".tmp")
            with open(tmp, "w", encoding="utf-8") as handle:
                json.dump({"plan": plan_path, "leash_pid": os.getpid()}, handle)
            os.replace(tmp, os.path.join(directory, STANDBY_GO))
            while _proc_start(pid) is not None and _proc_start(pid) == start:
                if timeout is not None and clock() - began > timeout:
                    timed_out = True
                    _kill_pid_group(pid, start, 10.0)
                    break
                if '"event": "done"' in _read_text(state["log"]):
                    _wait_gone(pid, start, 5.0)
                    break
                time.sleep(ATTACH_POLL_S)
    except BaseException:
        _kill_pid_group(pid, start, INTERRUPT_GRACE_S)
        raise
    output = _read_text(state["log"])
    done = next((e for e in reversed(parse_status_lines(output)) if e.get("event") == "done"), None)
    rc = done.get("rc") if done else None
    if rc is None:
        rc = 3 if went is False else 137
    return {"rc": rc, "timed_out": timed_out, "output": output, "log": state["log"], "gate": went}


def _wait_gone(pid, start, limit):
    end = time.monotonic() + limit
    while time.monotonic() < end:
        now = _proc_start(pid)
        if now is None or (start and now != start):
            return True
        time.sleep(0.02)
    return False


# ------------------------------------------------------------------ one cell
# The prefix of the client's status lines (tools/sglang_bench_client.py).
STATUS_PREFIX = "SGLANG_BENCH_POINT "
# Seconds the client process gets beyond the sum of its points' deadlines
# (interpreter start, import of bench_serving, tokenizer load) when no
# overall timeout is given.
STARTUP_ALLOWANCE_S = 300


def rate_text(rate):
    """A request rate as a point's id and file name spell it: ``8``, ``0.5``."""
    return f"{float(rate):g}"


def point_id(concurrency, repeat, rate=None):
    """A point's id: ``c<C>_r<R>``, or ``c<C>_q<rate>_r<R>`` for a point of a request-rate sweep."""
    middle = "" if rate is None else f"_q{rate_text(rate)}"
    return f"c{int(concurrency)}{middle}_r{int(repeat)}"


def point_file(concurrency, repeat, rate=None):
    """Name of a point's bench_serving output file: ``<point id>.jsonl``."""
    return point_id(concurrency, repeat, rate) + ".jsonl"


def rate_prompts(rate, floor, min_duration_s):
    """Prompts for one point of a request-rate sweep: the arrivals of the measurement window at that
    rate, ceil(rate x min_duration_s), at least ``floor`` (an open loop's duration is its prompts /
    rate, so a count made for a concurrency would run 512 s at 1 req/s)."""
    return max(int(floor or 1), math.ceil(float(rate) * float(min_duration_s or 0)))


def plan_points(
    concurrency, repeats, output_dir, num_prompts=None, multiplier=None, floor=None, min_requests=0, groups=None,
    rates=None, min_duration_s=0,
):
    """The points of one cell, repeats outer and concurrency (or request rate) inner.

    Each is ``{index, id, concurrency, repeat, num_prompts, output_file, log}``;
    num_prompts is the given number for every point, else
    max(multiplier * concurrency, floor), and at least ``min_requests`` (the
    measurement window's) either way, rounded up to a multiple of ``groups``
    (generated-shared-prefix's gsp_num_groups: shared_prefix_prompts). With ``rates`` (the
    workload's request_rates, a request-rate sweep) there is one point per rate, each with
    ``request_rate`` and the one ``concurrency`` as its cap, and num_prompts from rate_prompts.
    ValueError for nonsense.
    """
    concurrency = [int(c) for c in concurrency or []]
    if not concurrency:
        raise ValueError("concurrency must list at least one point")
    if int(repeats) < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats!r}")
    if rates and len(concurrency) != 1:
        raise ValueError(f"a request-rate sweep runs at one concurrency cap, got {concurrency!r}")
    loads = [(concurrency[0], float(rate)) for rate in rates] if rates else [(c, None) for c in concurrency]
    points = []
    for repeat in range(int(repeats)):
        for conc, rate in loads:
            if conc < 1:
                raise ValueError(f"every concurrency must be >= 1, got {conc!r}")
            if rate is not None and not (rate > 0 and math.isfinite(rate)):
                raise ValueError(f"every request rate must be a finite number > 0, got {rate!r}")
            if num_prompts is not None:
                prompts = int(num_prompts)
            elif rate is not None:
                prompts = rate_prompts(rate, floor, min_duration_s)
            else:
                prompts = num_prompts_for(conc, multiplier, floor)
            prompts = shared_prefix_prompts(max(prompts, int(min_requests or 0)), groups)
            output_file = os.path.join(output_dir, point_file(conc, repeat, rate))
            point = {
                "index": len(points),
                "id": point_id(conc, repeat, rate),
                "concurrency": conc,
                "repeat": repeat,
                "num_prompts": prompts,
                "output_file": output_file,
                "log": output_file + ".log",
            }
            if rate is not None:
                point["request_rate"] = rate
            points.append(point)
    return points


def point_tags(spec):
    """What a ledger point takes from its planned point beyond bench_serving's result: the request
    rate of a request-rate sweep's point (its key in the comparison, sglang_compare.point_load), and
    ``pinned`` when it started from the prompt count the host kept for it (sglang_point_sizes)."""
    tags = {"request_rate": spec["request_rate"]} if spec.get("request_rate") is not None else {}
    if spec.get("pinned"):
        tags["pinned"] = dict(spec["pinned"])
    return tags


def default_timeout(n_points, point_timeout):
    """The client process's overall limit: every point's deadline plus STARTUP_ALLOWANCE_S."""
    return int(n_points) * int(point_timeout) + STARTUP_ALLOWANCE_S


def parse_status_lines(text):
    """The client's status events (dicts) from its stdout, in order; other lines are ignored."""
    events = []
    for line in (text or "").splitlines():
        if not line.startswith(STATUS_PREFIX):
            continue
        try:
            event = json.loads(line[len(STATUS_PREFIX) :])
        except ValueError:
            continue
        if isinstance(event, dict) and "event" in event:
            events.append(event)
    return events


def _iso(epoch):
    if not isinstance(epoch, (int, float)):
        return None
    moment = datetime.datetime.fromtimestamp(epoch, datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _read_text(path):
    try:
        with open(path, "rb") as handle:
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _read_from(path, offset):
    """The text ``path`` gained after ``offset`` bytes ('' when unreadable)."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            return handle.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def _copy_text(text, path):
    """Keep a standby client's log in the cell's directory, where the plain client's goes."""
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(text)


def _size(path):
    return os.path.getsize(path) if os.path.exists(path) else 0


def _argv_value(argv, flag, default=0):
    argv = list(argv or [])
    try:
        return argv[argv.index(flag) + 1]
    except (ValueError, IndexError):
        return default


def measure_point(point, spec, result, end=None):
    """What the point's measurement says of an ok point (module_utils sglang_point_window): the
    steady state, the server's counters (a disagreement fails it as counter_mismatch), the cache
    flush and sizing the client did, and the window (short: ``too_short``). Reads the client's
    sidecars beside the output file. Returns the point."""
    end = end or {}
    output_file = spec["output_file"]
    if end.get("sized"):
        point["sized"] = end["sized"]
    if end.get("cache_flush"):
        point["cache"] = {"flushed": bool(end["cache_flush"].get("ok")), "flush": end["cache_flush"]}
    requests = read_sidecar(output_file + ".requests.json")
    steady = steady_state(result, requests)
    if steady:
        point["steady_state"] = steady
    if spec.get("goodput_slo"):
        apply_goodput(point, goodput(result, requests, spec["goodput_slo"]), spec["goodput_slo"])
    if _argv_value(spec.get("argv"), "--dataset-name", None) == "sharegpt":
        # A corpus point: the lengths it really sent are the corpus's, not a setting's.
        lengths = length_distribution(result)
        if lengths:
            point["lengths"] = lengths
    if spec.get("metrics"):
        block = server_metrics(read_sidecar(output_file + ".metrics.json"), result.get("duration"))
        point["server_metrics"] = block
        if block.get("cache_hit_rate") is not None:
            point.setdefault("cache", {})["hit_rate"] = block["cache_hit_rate"]
        argv = spec.get("argv")
        warmup = int(_argv_value(argv, "--warmup-requests", 1))  # bench_serving's default: 1
        warmup *= int(_argv_value(argv, "--gsp-num-turns", 1))  # a multi-turn warm-up is a whole conversation
        mismatches = counter_mismatches(result, block, warmup, int(_argv_value(argv, "--random-output-len")))
        if mismatches and point["status"] == POINT_OK:
            point["status"] = POINT_FAILED
            point["failure"] = {
                "class": "counter_mismatch",
                "step": "benchmark",
                "message": "bench_serving and the server's own counters (/metrics) disagree: " + "; ".join(mismatches),
                "signals": mismatches,
            }
        elif mismatches and isinstance(point.get("failure"), dict):
            # Already failed on other evidence (a streamed error): the counters are a second witness,
            # kept beside the first (on the H100 recording: 651 completed to the client, 0 to the server).
            signals = point["failure"].setdefault("signals", [])
            signals.extend("the server's own counters disagree: " + m for m in mismatches)
    if spec.get("cache_hit_target"):
        check_cache_target(point, spec)
    short = window_shortfall(result, spec.get("window"))
    if short:
        point["window"] = dict(spec["window"], shortfall=short)
        if point["status"] == POINT_OK:
            point["status"] = POINT_TOO_SHORT
    return point


def check_cache_target(point, spec):
    """Check the point's server-side cache hit rate against the workload's ``cache_hit_target`` (the
    spec's, from point_extras): the band is the target's rate, or for EXPECTED_HIT_RATE what
    bench_serving's generated-shared-prefix construction lets a cold point reach at its prompts,
    groups and concurrency (sglang_point_window.cache_hit_band, read from the point's own argv).
    Keeps ``cache.target`` (``band``, ``margin``, ``checked`` and why not); outside the band by more
    than the margin an ok or too_short point fails as ``workload_mismatch``. Returns the point."""
    target = spec["cache_hit_target"]
    margin = float(target.get("margin") or 0)
    rate = str(target.get("rate")).strip().lower()
    entry = {"rate": target.get("rate"), "margin": margin, "checked": False}
    cache = point.setdefault("cache", {})
    cache["target"] = entry
    argv = spec.get("argv") or []
    if rate == EXPECTED_HIT_RATE:
        groups = int(_argv_value(argv, "--gsp-num-groups", 0))
        if not groups or int(_argv_value(argv, "--gsp-num-turns", 1)) > 1:
            entry["reason"] = "the expected band is computed for generated-shared-prefix of one turn only"
            return point
        if not cache.get("flushed"):
            entry["reason"] = "the cache was not flushed before the point: the expected band assumes a cold start"
            return point
        band = cache_hit_band(
            spec["num_prompts"], groups, int(_argv_value(argv, "--gsp-system-prompt-len")),
            int(_argv_value(argv, "--gsp-question-len")), spec["concurrency"],
        )
    else:
        band = (float(rate), float(rate))
    entry["band"] = list(band)
    hit_rate = cache.get("hit_rate")
    if not isinstance(hit_rate, (int, float)):
        entry["reason"] = "no server-side hit rate (the server's /metrics were not read, or counted no prompt)"
        return point
    entry["checked"] = True
    mismatch = cache_mismatch(float(hit_rate), band, margin)
    entry["mismatch"] = mismatch
    if mismatch and point["status"] in (POINT_OK, POINT_TOO_SHORT):
        point["status"] = POINT_FAILED
        point["failure"] = {
            "class": "workload_mismatch",
            "step": "benchmark",
            "message": (
                f"{mismatch} at concurrency {int(spec['concurrency'])}: the point did not measure the workload it "
                "states (cache_hit_target); its numbers are kept, in no verdict"
            ),
            "signals": [mismatch],
        }
    elif mismatch and isinstance(point.get("failure"), dict):
        point["failure"].setdefault("signals", []).append(mismatch)
    return point


def evaluate_point(spec, offset, rc, timed_out, output, timeout_reason=None, server_errors=(), end=None):
    """The ledger point for one planned point after the client ran it (reads its output file).

    A new result line (and no timeout) gives the point its metrics and its
    ok/incomplete status (point_from_result), then what its measurement says
    (measure_point); a result with a non-zero exit is bench_client_failed; no
    result line is classified from the point's output. ``end``: the client's
    end event of the point.
    """
    concurrency, repeat, num_prompts = spec["concurrency"], spec["repeat"], spec["num_prompts"]
    results = read_new_results(spec["output_file"], offset)
    if results and not timed_out:
        turns = int(_argv_value(spec.get("argv"), "--gsp-num-turns", 1))
        point = point_from_result(results[-1], concurrency, repeat, num_prompts, server_errors, turns)
        if rc != 0 and point["status"] == POINT_OK:
            point["status"] = POINT_FAILED
            point["failure"] = {
                "class": "bench_client_failed",
                "step": "benchmark",
                "message": f"bench_serving wrote a result but exited {rc}",
            }
        point = to_json_safe(measure_point(point, spec, results[-1], end))
    else:
        failure_class, reason = classify_client_failure(rc, output, timed_out, timeout_reason)
        point = failed_point(concurrency, repeat, num_prompts, failure_class, reason)
        point["failure"]["output_tail"] = tail(output, 2000)
    return point


def point_warmup_requests(configured, warmed_up):
    """bench_serving's ``--warmup-requests`` for every point: ``configured`` when set, else 0 when the
    module's own warm-up rounds ran just before the points (they already warmed every measured
    level; bench_serving's single request, and the 1 s settle pause after it, would follow them
    to no purpose), else None (bench_serving's default, 1)."""
    if configured is not None:
        return int(configured)
    return 0 if warmed_up else None


# What a plan point may carry beyond bench_serving's arguments (tools/sglang_bench_client.py).
PLAN_EXTRAS = ("window", "flush_cache", "metrics")


def measurement_extras(measurement, host, port):
    """The plan keys of a point measured with ``measurement`` (the workload's block): its window, the
    cache flush before it, the /metrics readings around it. Empty for no measurement."""
    found = {}
    if not measurement:
        return found
    if measurement.get("min_requests") or measurement.get("min_duration_s"):
        found["window"] = {
            "min_requests": int(measurement.get("min_requests") or 0),
            "min_duration_s": float(measurement.get("min_duration_s") or 0),
            "max_prompts": int(measurement.get("max_prompts") or 20000),
        }
    base = "http://{}:{}".format(f"[{host}]" if ":" in str(host) else host, int(port))
    if measurement.get("cache") == "cold":
        found["flush_cache"] = {"url": base + "/flush_cache", "timeout_s": 60}
    if measurement.get("server_metrics"):
        found["metrics"] = {"url": base + "/metrics", "interval_s": 1.0}
    return found


def point_extras(workload, host, port):
    """What every planned point of ``workload`` carries beyond bench_serving's arguments: its
    measurement's plan keys (measurement_extras) and, for the point's own evaluation (not the
    client's plan), the workload's ``goodput_slo`` and ``cache_hit_target``."""
    found = measurement_extras((workload or {}).get("measurement") or {}, host, port)
    for key in ("goodput_slo", "cache_hit_target"):
        if (workload or {}).get(key):
            found[key] = dict(workload[key])
    return found


def write_plan(path, specs, point_timeout=None, stop_on_failure=True):
    """Write the client's plan file (side effect); return the plan."""
    plan = {
        "stop_on_failure": bool(stop_on_failure),
        "points": [
            dict(
                {
                    "id": spec["id"],
                    "argv": list(spec["argv"]),
                    "output_file": spec["output_file"],
                    "log": spec["log"],
                    "num_prompts": spec["num_prompts"],
                    "timeout": point_timeout,
                },
                **{key: spec[key] for key in PLAN_EXTRAS if spec.get(key)},
            )
            for spec in specs
        ],
    }
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(plan, handle, indent=1)
        handle.write("\n")
    return plan


def run_plan(
    client_command,
    specs,
    plan_path,
    log_path,
    env=None,
    point_timeout=None,
    timeout=None,
    stop_on_failure=True,
    clock=time.monotonic,
    server_log=None,
    gate=None,
    standby=None,
):
    """Run every planned point in one client process (side effect); return ``(points, outcome)``.

    ``specs`` come from plan_points with ``argv`` (bench_serving's arguments,
    without the client command) added. The client gets the whole plan and
    runs the points in order; ``point_timeout`` is each point's deadline
    inside the client, ``timeout`` the limit of the whole client process
    (default: default_timeout), after which its process group is killed.

    Per point: the client's status lines say when it started and ended and
    how bench_serving returned; the point's own output file and log then give
    its result and, without a result, its failure class (evaluate_point).
    A point the process died in (killed at the overall limit, or crashed) is
    classified from its log. With ``stop_on_failure`` the plan ends at the
    first failed point; without it, points that a dead client never started
    get a fresh client process (while time is left). When the client never
    started a point (it could not import bench_serving, say), the first
    point (every point, without ``stop_on_failure``) fails with what it said.
    ``server_log``: the server's log; the ``[http_server] Error`` lines it
    gains while a point runs fail that point (lying_signals).

    ``gate``: run_client's gate, for the first client process only (module
    sglang_bench warms the server up in it). When it says no, nothing runs:
    no points, and ``outcome['gate']`` is False.

    ``standby``: the state of a standby client (read_standby) to run the first process's
    plan in, instead of starting one: it imported bench_serving while the server loaded.

    ``outcome``: ``runs`` (one entry per client process: ``pid``,
    ``bench_module`` (the bench_serving module it imported), ``rc``,
    ``timed_out``, ``log``, ``command``, ``points`` (ids it ran)),
    ``not_run`` (ids of planned points that did not run), ``rc`` (the last
    process's exit status) and ``output`` (the last process's own output).
    """
    if timeout is None:
        timeout = default_timeout(len(specs), point_timeout or 0)
    deadline = clock() + timeout
    remaining = list(specs)
    points, runs = [], []
    outcome = {"rc": None, "timed_out": False, "output": "", "log": log_path}
    stop = spent = False
    while remaining and not stop:
        left = deadline - clock()
        if left <= 0:
            spent = True
            break
        number = len(runs)
        run_plan_path = plan_path if number == 0 else f"{plan_path}.{number}"
        run_log = log_path if number == 0 else f"{log_path}.{number}"
        offsets = dict((spec["id"], _size(spec["output_file"])) for spec in remaining)
        log_offset = _size(server_log) if server_log else 0
        write_plan(run_plan_path, remaining, point_timeout, stop_on_failure)
        argv = list(client_command) + ["--plan", run_plan_path]
        if number == 0 and standby:
            outcome = attach_client(standby, run_plan_path, timeout=left, gate=gate)
            argv = list(standby["command"])
            _copy_text(outcome["output"], run_log)
            outcome["log"] = run_log
        else:
            outcome = run_client(argv, env=env, timeout=left, log_path=run_log, gate=gate if number == 0 else None)
        if outcome["gate"] is False:
            runs.append({"pid": None, "bench_module": None, "standby": bool(standby), "rc": outcome["rc"],
                         "timed_out": False, "log": run_log, "command": argv, "points": []})
            break
        events = parse_status_lines(outcome["output"])
        by_id = {}
        for event in events:
            if event.get("event") in ("start", "end") and "id" in event:
                by_id.setdefault(event["id"], {})[event["event"]] = event
        server_errors = {}
        if server_log:
            windows = dict(
                (key, (seen.get("start", {}).get("t"), seen.get("end", {}).get("t"))) for key, seen in by_id.items()
            )
            server_errors = server_errors_by_window(_read_from(server_log, log_offset), windows)
        pids = sorted(set(e["pid"] for e in events if isinstance(e.get("pid"), int)))
        ready = next((e for e in events if e.get("event") == "ready"), {})
        run = {
            "pid": pids[0] if len(pids) == 1 else (pids or None),
            "bench_module": ready.get("module"),
            # Whether this process was the standby client, started beside the server.
            "standby": bool(number == 0 and standby),
            "rc": outcome["rc"],
            "timed_out": outcome["timed_out"],
            "log": run_log,
            "command": argv,
            "points": [],
        }
        runs.append(run)
        if outcome["timed_out"]:
            killed = f"the client process ran past its overall time limit of {int(timeout)} s and was killed"
        else:
            killed = None
        left_over = []
        for spec in remaining:
            seen = by_id.get(spec["id"], {})
            if stop or "start" not in seen:
                left_over.append(spec)
                continue
            end = seen.get("end")
            output = _read_text(spec["log"])
            if end is not None:
                timed_out = bool(end.get("timed_out"))
                reason = None
                if timed_out:
                    reason = (
                        f"bench_serving ran past its per-point deadline of {point_timeout} s "
                        "and was stopped inside the client"
                    )
                # A point the client sized anew (its window) ran with the prompts its end event says.
                sent = end.get("num_prompts")
                measured = dict(spec, num_prompts=sent) if isinstance(sent, int) and sent > 0 else spec
                point = evaluate_point(
                    measured, offsets[spec["id"]], end.get("rc", 1), timed_out, output, reason,
                    server_errors.get(spec["id"], ()), end,
                )
            else:  # the process ended (or was killed) during this point
                own_lines = [line for line in outcome["output"].splitlines() if not line.startswith(STATUS_PREFIX)]
                tail_of_run = tail("\n".join(own_lines), 2000)
                point = evaluate_point(
                    spec,
                    offsets[spec["id"]],
                    outcome["rc"] if outcome["rc"] else 1,
                    outcome["timed_out"],
                    output + "\n" + tail_of_run,
                    killed,
                )
            point["started_at"] = _iso(seen["start"].get("t"))
            point["ended_at"] = _iso((end or {}).get("t")) or _iso(time.time())
            if end is not None and isinstance(end.get("wall_s"), (int, float)):
                point["wall_s"] = end["wall_s"]
            elif isinstance(seen["start"].get("t"), (int, float)):
                point["wall_s"] = round(time.time() - seen["start"]["t"], 3)
            if end is not None and isinstance(end.get("settle_pause_skipped"), int):
                # The client skipped bench_serving's 1 s settle pause (no warm-up request, no flush).
                point["settle_pause_skipped"] = end["settle_pause_skipped"]
            point["output_file"] = spec["output_file"]
            point["client_log"] = spec["log"]
            point["command"] = list(client_command) + list(spec["argv"])
            point.update(point_tags(spec))
            points.append(to_json_safe(point))
            run["points"].append(spec["id"])
            # Only a failed point stops the cell: a too_short point is recorded (in no verdict) and
            # the points after it still run (a too_short c=10 once dropped c=256 and c=1024 from a
            # record that said success).
            if point["status"] == POINT_FAILED and stop_on_failure:
                stop = True
        if not run["points"]:
            # Nothing started: the client failed before its first point.
            failure_class, reason = classify_client_failure(
                outcome["rc"], outcome["output"], outcome["timed_out"], killed
            )
            for spec in remaining[:1] if stop_on_failure else remaining:
                point = failed_point(spec["concurrency"], spec["repeat"], spec["num_prompts"], failure_class, reason)
                point["failure"]["output_tail"] = tail(outcome["output"], 2000)
                point["output_file"] = spec["output_file"]
                point["client_log"] = run_log
                point["command"] = list(client_command) + list(spec["argv"])
                point.update(point_tags(spec))
                points.append(point)
            left_over = remaining[1:] if stop_on_failure else []
            stop = True
        remaining = left_over
    if remaining and spent:
        # The overall time limit ran out between client processes: the points that never started
        # fail as bench_timeout, so no record can read complete with points missing.
        reason = f"not started: the cell's overall time limit of {int(timeout)} s was used up"
        for spec in remaining:
            point = failed_point(spec["concurrency"], spec["repeat"], spec["num_prompts"], "bench_timeout", reason)
            point["output_file"] = spec["output_file"]
            point["command"] = list(client_command) + list(spec["argv"])
            point.update(point_tags(spec))
            points.append(point)
    outcome = dict(outcome)
    outcome.setdefault("gate", None)
    outcome["runs"] = runs
    outcome["not_run"] = [spec["id"] for spec in remaining]
    return points, outcome
