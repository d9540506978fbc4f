# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""SLO search: the highest load at which a live server still meets a latency SLO.

Pure logic for module sglang_slo_search (docs/slo-search.md): parse and check
an SLO (a list of ``{"metric": ..., "max": ...}`` or ``{"metric": ...,
"min": ...}``), judge one probe's metrics against it, and bisect over an
integer load dimension (concurrency, or request rate in whole requests per
second) with a probe callable that measures one value. Nothing here sends a
request; the module's probe runs SGLang's bench_serving (sglang_bench_points).
Standard library (and sglang_bench_points' sample rules) only: this code runs on the target host.

The monotonicity assumption
---------------------------
Bisection is only right when the SLO's verdict is monotone in the load: if
the SLO holds at load ``v`` it holds at every load below ``v``, and if it
fails at ``v`` it fails above. For latency percentiles against concurrency
on one server this is what queueing gives (more requests in flight never
make a request faster), but a measurement is noisy: near the threshold two
runs of the same point can disagree. The search never re-tests what it has
decided, so it cannot see a contradiction on its own; ``confirm`` measures
the deciding value once more at the end, and ``monotonicity_violations``
reports every pair of probes that contradicts the assumption (a pass above a
failure, or one value both passing and failing). Such an answer is returned
with warnings and ``consistent: false``.
"""

import math
import re
import time

try:  # Inside AnsiballZ.
    from ansible.module_utils.sglang_bench_points import (
        GOODPUT_KEYS,
        goodput_min_samples,
        min_samples,
        percentile_quantile,
    )
except ImportError:  # pytest and tools put module_utils on sys.path.
    from sglang_bench_points import GOODPUT_KEYS, goodput_min_samples, min_samples, percentile_quantile

# Metric names are the keys of bench_serving's result line, as a ledger point
# carries them (sglang_bench_points.METRIC_KEYS): latencies in ms (an SLO
# bounds them from above) and throughputs (bounded from below). Newer
# bench_serving versions add percentiles (p90_tpot_ms, p95_ttft_ms, ...); the
# pattern admits them, and a probe whose result lacks the metric fails with
# that said.
LATENCY_METRIC = re.compile(r"^(mean|median|std|p\d{1,2}(?:\.\d+)?)_(ttft|tpot|itl|e2e_latency)_ms$")
THROUGHPUT_METRICS = ("request_throughput", "input_throughput", "output_throughput", "total_throughput")
# Goodput (sglang_bench_points.GOODPUT_KEYS), counted against the workload's goodput_slo: the shares
# (0 to 1) and the requests per second that met every limit, each bounded from below.
GOODPUT_METRICS = tuple(GOODPUT_KEYS)
GOODPUT_SHARES = tuple(m for m in GOODPUT_METRICS if m.endswith("_share"))
BOUNDS = ("max", "min")
DIMENSIONS = ("concurrency", "request_rate")

# Outcomes of a search.
OUTCOME_BRACKETED = "bracketed"  # a passing and a failing value within tolerance of each other
OUTCOME_LOW_FAILS = "low_fails"  # the SLO fails already at the low end: no answer
OUTCOME_HIGH_PASSES = "high_passes"  # the SLO holds at the high end: answer = high, not bounded

# Failure class of a probe whose callable raised.
PROBE_RAISED = "probe_raised"


class SloError(ValueError):
    """An SLO spec or search range that cannot be used; the message says what and how to fix it."""


def _number(value, where):
    if isinstance(value, bool):
        raise SloError(f"{where} must be a number, got {value!r}")
    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            raise SloError(f"{where} must be a number, got {value!r}") from None
    if not isinstance(value, (int, float)):
        raise SloError(f"{where} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0:
        raise SloError(f"{where} must be a finite number >= 0, got {value!r}")
    return value


def metric_bound(metric):
    """The bound an SLO on ``metric`` takes ("max" for a latency, "min" for a throughput), or None."""
    if LATENCY_METRIC.match(metric):
        return "max"
    if metric in THROUGHPUT_METRICS or metric in GOODPUT_METRICS:
        return "min"
    return None


def parse_slo(spec):
    """Check an SLO spec; return it as a list of ``{"metric", "bound", "limit"}``.

    ``spec``: one ``{"metric": "p99_ttft_ms", "max": 500}`` or a list of them
    (all must hold). A latency metric (``<stat>_<ttft|tpot|itl|e2e_latency>_ms``)
    takes ``max``, a throughput (``output_throughput``, ...) takes ``min``.
    Raises SloError naming the entry and what to change.
    """
    if isinstance(spec, dict):
        spec = [spec]
    if not isinstance(spec, (list, tuple)) or not spec:
        raise SloError(
            "the SLO must be a non-empty list of {metric, max} (or {metric, min}) entries, got "
            f"{spec!r}; for example [{{\"metric\": \"p99_ttft_ms\", \"max\": 500}}]"
        )
    parsed, seen = [], set()
    for index, entry in enumerate(spec):
        where = f"slo[{index}]"
        if not isinstance(entry, dict):
            raise SloError(f"{where} must be a mapping {{metric, max}}, got {entry!r}")
        unknown = sorted(set(entry) - {"metric", "max", "min"})
        if unknown:
            raise SloError(
                f"{where} has unknown key(s) {', '.join(map(str, unknown))}; the keys are metric and max or min"
            )
        metric = entry.get("metric")
        if not isinstance(metric, str) or not metric.strip():
            raise SloError(f"{where} needs a metric name, for example p99_ttft_ms or median_tpot_ms")
        metric = metric.strip()
        wanted = metric_bound(metric)
        if wanted is None:
            raise SloError(
                f"{where}: {metric!r} is not a metric of bench_serving's result: use a latency "
                "<mean|median|std|pNN>_<ttft|tpot|itl|e2e_latency>_ms (with max) or one of "
                f"{', '.join(THROUGHPUT_METRICS + GOODPUT_METRICS)} (with min)"
            )
        given = [bound for bound in BOUNDS if bound in entry]
        if len(given) != 1:
            raise SloError(f"{where} ({metric}) needs exactly one of max or min, got {given or 'neither'}")
        bound = given[0]
        if bound != wanted:
            raise SloError(
                f"{where}: {metric} is bounded with {wanted} ({'lower' if wanted == 'max' else 'higher'} "
                f"is better), not {bound}"
            )
        limit = _number(entry[bound], f"{where}.{bound} ({metric})")
        if metric in GOODPUT_SHARES and limit > 1:
            raise SloError(f"{where}.min ({metric}) = {limit:g}: a share is at most 1 (0.9 = 90 % of requests)")
        if (metric, bound) in seen:
            raise SloError(f"{where}: {metric} {bound} is given twice; keep one")
        seen.add((metric, bound))
        parsed.append({"metric": metric, "bound": bound, "limit": limit})
    return parsed


def goodput_target_problems(slo, workload):
    """Why ``slo`` (parsed) cannot be searched with ``workload``: a goodput metric needs the
    workload's goodput_slo (the limits each request is counted against). A list of sentences."""
    wanted = [check["metric"] for check in slo if check["metric"] in GOODPUT_METRICS]
    if wanted and not (workload or {}).get("goodput_slo"):
        return [
            f"{', '.join(wanted)} counts the requests that met the workload's goodput_slo, and this workload "
            "states none: give it one (a workload of data/workloads.yml with goodput_slo, or "
            "sglang_bench_workload_override goodput_slo: {ttft_ms: ..., tpot_ms: ...})"
        ]
    return []


def probe_min_requests(slo, workload):
    """The requests a probe needs for every bound of ``slo`` to be a value, by sglang_bench_points'
    rules: a percentile's ``min_samples(q)`` (p99: 100), a goodput metric's ``goodput_min_samples`` of
    the workload's goodput_slo (attainment 0.9: 10); 1 for the rest."""
    need = [1]
    for check in slo:
        quantile = percentile_quantile(check["metric"])
        if quantile is not None:
            need.append(min_samples(quantile))
        elif check["metric"] in GOODPUT_METRICS:
            need.append(goodput_min_samples((workload or {}).get("goodput_slo")))
    return max(need)


def describe_slo(slo):
    """One line for messages: 'p99_ttft_ms <= 500, median_tpot_ms <= 50'."""
    return ", ".join(
        "{} {} {:g}".format(check["metric"], "<=" if check["bound"] == "max" else ">=", check["limit"]) for check in slo
    )


def probe_metrics(slo, *sources):
    """The SLO's metrics from the first source that has each (a ledger point, then the raw result line)."""
    found = {}
    for check in slo:
        for source in sources:
            value = (source or {}).get(check["metric"])
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                found[check["metric"]] = value
                break
    return found


def evaluate(slo, metrics):
    """Judge one probe's metrics: ``(met, checks)``; a missing metric does not meet its SLO."""
    checks = []
    for check in slo:
        value = (metrics or {}).get(check["metric"])
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            checks.append(dict(check, value=None, met=False, missing=True))
            continue
        met = value <= check["limit"] if check["bound"] == "max" else value >= check["limit"]
        checks.append(dict(check, value=value, met=bool(met), missing=False))
    return all(c["met"] for c in checks), checks


def check_range(low, high, tolerance):
    """Refuse a search range that cannot be bisected (SloError)."""
    for name, value in (("low", low), ("high", high), ("tolerance", tolerance)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise SloError(f"{name} must be an integer >= 1, got {value!r}")
    if low > high:
        raise SloError(f"low ({low}) is above high ({high}); give low <= high")


def bisection_steps(low, high, tolerance):
    """Worst-case number of bisection probes strictly between low and high."""
    gap, steps = high - low, 0
    while gap > tolerance:
        gap = gap - gap // 2  # the larger half of (lo, mid, hi)
        steps += 1
    return steps


def max_probes(low, high, tolerance, confirm=False):
    """Most probes a search makes: low, high, the bisection, and the confirmation."""
    check_range(low, high, tolerance)
    return 1 + (1 if high > low else 0) + bisection_steps(low, high, tolerance) + (1 if confirm else 0)


def monotonicity_violations(probes):
    """Pairs of probes that contradict the monotonicity assumption, as sentences.

    A contradiction is a value that met the SLO above one that did not, or
    one value measured twice with different verdicts.
    """
    warnings = []
    for i, first in enumerate(probes):
        for second in probes[i + 1 :]:
            a, b = first["value"], second["value"]
            if a == b and first["met"] != second["met"]:
                warnings.append(
                    f"{a} met the SLO in probe {first['index'] if first['met'] else second['index']} and failed it "
                    f"in probe {second['index'] if first['met'] else first['index']}: the measurement is not "
                    "repeatable at this load"
                )
                continue
            passed, failed = (first, second) if first["met"] else (second, first)
            if passed["met"] and not failed["met"] and passed["value"] > failed["value"]:
                warnings.append(
                    f"{passed['value']} met the SLO (probe {passed['index']}) but the lower {failed['value']} did "
                    f"not (probe {failed['index']}): the SLO is not monotone in the load here"
                )
    return warnings


def _error_of(value):
    if value is None:
        return None
    if isinstance(value, dict):
        return {"class": str(value.get("class") or "probe_failed"), "message": str(value.get("message") or "")}
    return {"class": "probe_failed", "message": str(value)}


def run_probe(probe, slo, value, index, clock=time.time):
    """Measure one value with ``probe`` and judge it; never raises for the probe's own failure.

    ``probe(value)`` returns a mapping with ``metrics`` (metric -> number),
    optionally ``error`` (``{class, message}`` or a string: the measurement
    failed, e.g. an incomplete bench_serving point) and anything else (kept as
    ``detail``). A probe that raises or reports an error does not meet the
    SLO; its error is recorded.
    """
    started = clock()
    try:
        outcome = probe(value)
    except Exception as exc:  # noqa: BLE001 - a failed probe is a data point, not a crash
        outcome = {"metrics": {}, "error": {"class": PROBE_RAISED, "message": f"{type(exc).__name__}: {exc}"}}
    if not isinstance(outcome, dict):
        outcome = {"metrics": {}, "error": {"class": "probe_failed", "message": f"probe returned {outcome!r}"}}
    metrics = dict(outcome.get("metrics") or {})
    error = _error_of(outcome.get("error"))
    met, checks = evaluate(slo, metrics)
    if error is None and not met and any(c["missing"] for c in checks):
        missing = ", ".join(c["metric"] for c in checks if c["missing"])
        error = {"class": "metric_missing", "message": f"the result has no value for {missing}"}
    detail = dict((k, v) for k, v in outcome.items() if k not in ("metrics", "error"))
    return {
        "index": index,
        "value": value,
        "met": bool(met and error is None),
        "checks": checks,
        "metrics": metrics,
        "error": error,
        "detail": detail,
        "wall_s": round(clock() - started, 3),
    }


def search(probe, slo, low, high, tolerance=1, confirm=False, clock=time.time):
    """Bisect ``[low, high]`` for the highest integer load that meets ``slo``.

    ``probe(value)`` measures one load (see run_probe); ``slo`` comes from
    parse_slo. The low end is probed first: when it already fails there is no
    answer (``answer`` None, outcome ``low_fails``). Then the high end: when it
    passes, ``answer`` is ``high`` and the search is not bounded (outcome
    ``high_passes``; raise ``high`` to find the limit). Otherwise the bracket
    (highest passing, lowest failing) is halved until they are at most
    ``tolerance`` apart (outcome ``bracketed``): the true threshold then lies
    in ``[answer, answer + tolerance)``. With ``confirm`` the deciding value
    (the answer, or ``low`` when there is none) is measured once more.

    Returns ``{answer, bounded, outcome, reason, probes, steps, warnings,
    consistent, low, high, tolerance, bracket}``; ``probes`` in the order they
    ran, each with its metrics and its verdict per SLO entry (run_probe).
    """
    check_range(low, high, tolerance)
    if not slo:
        raise SloError("the SLO is empty; give at least one {metric, max} entry")
    probes = []

    def measure(value):
        result = run_probe(probe, slo, value, len(probes), clock)
        probes.append(result)
        return result["met"]

    rule = describe_slo(slo)
    bracket = None
    if not measure(low):
        answer, bounded, outcome = None, False, OUTCOME_LOW_FAILS
        error = probes[-1]["error"]
        reason = f"the SLO ({rule}) is not met even at the low end {low}" + (
            f": the probe failed ({error['class']}: {error['message']})" if error else ""
        ) + "; there is no answer in the range (lower low, or relax the SLO)"
    elif high == low or measure(high):
        answer, bounded, outcome = high, False, OUTCOME_HIGH_PASSES
        reason = (
            f"not bounded: the SLO ({rule}) still holds at the high end {high}; the highest load that meets "
            "it is at least this (raise high to find it)"
        )
    else:
        lo, hi = low, high
        while hi - lo > tolerance:
            mid = (lo + hi) // 2
            if measure(mid):
                lo = mid
            else:
                hi = mid
        answer, bounded, outcome, bracket = lo, True, OUTCOME_BRACKETED, [lo, hi]
        reason = f"{lo} meets the SLO ({rule}) and {hi} does not (tolerance {tolerance})"
    if confirm:
        measure(answer if answer is not None else low)
    warnings = monotonicity_violations(probes)
    return {
        "answer": answer,
        "bounded": bounded,
        "outcome": outcome,
        "reason": reason,
        "bracket": bracket,
        "probes": probes,
        "steps": len(probes),
        "warnings": warnings,
        "consistent": not warnings,
        "low": low,
        "high": high,
        "tolerance": tolerance,
    }
