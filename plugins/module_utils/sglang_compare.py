# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compare a ledger record with the latest successful baseline.

Pure functions over ledger records (docs/ledger.md), used by module
sglang_bench_compare and tools/report.py. Standard library only.

A record is compared, concurrency by concurrency, with the latest record that
is from the baseline tier, successful, from the same host and target kind
(simulator or not), for the same model, dataset, input and output length and
range ratio, and that has ok points at that concurrency. Repeats of a point
are reduced to their median; the spread (min/max, and the interquartile range
from four repeats up) is reported beside it. The verdict compares the median's
change with the noise threshold, which the output states.
"""

BETTER = "better"
WORSE = "worse"
WITHIN_NOISE = "within_noise"
NO_BASELINE = "no_baseline"
NO_DATA = "no_data"

# Compared metrics: bench_serving key -> True when higher is better.
METRICS = (
    ("output_throughput", True),
    ("total_throughput", True),
    ("mean_tpot_ms", False),
)


def _median(sorted_values):
    n = len(sorted_values)
    mid = n // 2
    if n % 2:
        return float(sorted_values[mid])
    return (sorted_values[mid - 1] + sorted_values[mid]) / 2.0


def _quantile(sorted_values, q):
    """Linear-interpolation quantile (numpy's default, "inclusive")."""
    if len(sorted_values) == 1:
        return float(sorted_values[0])
    position = (len(sorted_values) - 1) * q
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    fraction = position - low
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * fraction


def summarize(values):
    """Median and spread of repeated measurements.

    Returns ``{"n", "median", "min", "max", "spread_pct"}`` plus ``"q1"``,
    ``"q3"`` and ``"iqr"`` when there are at least four values; None for no
    values. ``spread_pct`` is (max - min) / median in percent.
    """
    numbers = sorted(float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool))
    if not numbers:
        return None
    median = _median(numbers)
    summary = {
        "n": len(numbers),
        "median": median,
        "min": numbers[0],
        "max": numbers[-1],
        "spread_pct": ((numbers[-1] - numbers[0]) / median * 100.0) if median else None,
    }
    if len(numbers) >= 4:
        q1 = _quantile(numbers, 0.25)
        q3 = _quantile(numbers, 0.75)
        summary.update({"q1": q1, "q3": q3, "iqr": q3 - q1})
    return summary


def delta_pct(candidate, baseline):
    """Percent change from baseline to candidate; None when undefined."""
    if candidate is None or baseline in (None, 0):
        return None
    return (float(candidate) - float(baseline)) / float(baseline) * 100.0


def verdict(change_pct, threshold_pct, higher_is_better=True):
    """better / worse / within_noise for a change against the threshold.

    A change of exactly the threshold is within noise. For a lower-is-better
    metric (TPOT) a negative change is better.
    """
    if change_pct is None:
        return NO_DATA
    if abs(change_pct) <= float(threshold_pct):
        return WITHIN_NOISE
    improved = change_pct > 0 if higher_is_better else change_pct < 0
    return BETTER if improved else WORSE


def model_key(record):
    """The model identity used to match records."""
    model = record.get("model") or {}
    if isinstance(model, dict):
        return model.get("model_path") or model.get("served_model_name")
    return model


def workload_key(record):
    """The workload identity used to match records (lengths and shape)."""
    workload = record.get("workload") or {}
    ratio = workload.get("random_range_ratio")
    return (
        workload.get("dataset_name"),
        workload.get("input_len"),
        workload.get("output_len"),
        float(ratio) if isinstance(ratio, (int, float)) else ratio,
    )


def simulator_key(record):
    """The simulator's own knobs (SGLANG_SIM_* in the launch env), for simulator records only.

    Its speed factor scales every synthetic number, so records made at different speeds are not
    comparable (seen: -86% "worse" after a speed change). Faults are left out: a faulted run
    fails and is never a baseline.
    """
    if not record.get("target_is_simulator"):
        return ()
    env = ((record.get("launch") or {}).get("env")) or {}
    knobs = (k for k in env if k.startswith("SGLANG_SIM_") and not k.startswith("SGLANG_SIM_FAULT"))
    return tuple(sorted((k, str(env[k])) for k in knobs))


def match_key(record):
    """Everything two records must share to be compared."""
    return (
        record.get("host"),
        bool(record.get("target_is_simulator")),
        model_key(record),
        workload_key(record),
        simulator_key(record),
    )


def ok_values(record, concurrency, metric):
    """The metric's values over the record's ok points at one concurrency."""
    return [
        point.get(metric)
        for point in record.get("points") or []
        if point.get("concurrency") == concurrency
        and point.get("status") == "ok"
        and isinstance(point.get(metric), (int, float))
    ]


def concurrencies(record):
    """Sorted concurrencies that appear in the record's points."""
    return sorted(
        set(
            point.get("concurrency")
            for point in record.get("points") or []
            if isinstance(point.get("concurrency"), int)
        )
    )


def find_baseline(records, record, concurrency, baseline_tier="baseline"):
    """Latest successful baseline record comparable with ``record`` at a concurrency.

    ``records`` are in ledger order (append order = time order); "latest" is
    the last matching one that comes before ``record`` when ``record`` is in
    the list, so a baseline is compared with the baseline before it.
    """
    limit = len(records)
    for index, candidate in enumerate(records):
        if candidate.get("record_id") and candidate.get("record_id") == record.get("record_id"):
            limit = index
            break
    key = match_key(record)
    for candidate in reversed(records[:limit]):
        if candidate.get("tier") != baseline_tier or candidate.get("status") != "success":
            continue
        if candidate.get("record_id") == record.get("record_id"):
            continue
        if match_key(candidate) != key:
            continue
        if any(ok_values(candidate, concurrency, metric) for metric, _ in METRICS):
            return candidate
    return None


def compare_record(record, records, threshold_pct, baseline_tier="baseline"):
    """Compare ``record`` with its baselines, per concurrency and metric.

    Returns::

        {"record_id", "tier", "host", "threshold_pct", "baseline_tier",
         "rule": "...", "points": [{"concurrency", "baseline_record_id",
         "metrics": {metric: {"higher_is_better", "candidate": summary,
         "baseline": summary, "delta_pct", "verdict"}}}]}
    """
    result = {
        "record_id": record.get("record_id"),
        "tier": record.get("tier"),
        "host": record.get("host"),
        "status": record.get("status"),
        "threshold_pct": float(threshold_pct),
        "baseline_tier": baseline_tier,
        "rule": (
            f"median of repeats vs the latest successful {baseline_tier} record of the same host, "
            f"target kind, model and workload; |delta| <= {threshold_pct}% is within noise; "
            "TPOT: lower is better"
        ),
        "points": [],
    }
    for concurrency in concurrencies(record):
        baseline = find_baseline(records, record, concurrency, baseline_tier)
        entry = {
            "concurrency": concurrency,
            "baseline_record_id": baseline.get("record_id") if baseline else None,
            "baseline_recorded_at": baseline.get("recorded_at") if baseline else None,
            "metrics": {},
        }
        for metric, higher_is_better in METRICS:
            candidate = summarize(ok_values(record, concurrency, metric))
            reference = summarize(ok_values(baseline, concurrency, metric)) if baseline else None
            change = delta_pct(candidate["median"], reference["median"]) if candidate and reference else None
            if baseline is None:
                outcome = NO_BASELINE
            elif candidate is None:
                outcome = NO_DATA
            else:
                outcome = verdict(change, threshold_pct, higher_is_better)
            entry["metrics"][metric] = {
                "higher_is_better": higher_is_better,
                "candidate": candidate,
                "baseline": reference,
                "delta_pct": change,
                "verdict": outcome,
            }
        result["points"].append(entry)
    return result



# How the comparison table names each metric.
METRIC_LABELS = {"output_throughput": "output tok/s", "total_throughput": "total tok/s", "mean_tpot_ms": "TPOT ms"}


def threshold_problem(threshold_pct):
    """What is wrong with a noise threshold (None when nothing is)."""
    if threshold_pct < 0:
        return f"threshold_pct must be >= 0, got {threshold_pct}; fix noise_threshold_pct in data/benchmark.yml."
    return None


def ledger_comparison(record, records, threshold_pct, baseline_tier="baseline", problems=()):
    """compare_record plus what module sglang_bench_compare returns with it: the ledger's problems (lines
    that did not parse) and the fixed-width table, labelled SYNTHETIC for a simulator record. Shared by
    that module and sglang_ledger_append (its ``compare`` option). A negative threshold is a ValueError."""
    problem = threshold_problem(threshold_pct)
    if problem:
        raise ValueError(problem)
    comparison = compare_record(record, records, threshold_pct, baseline_tier)
    comparison["ledger_problems"] = list(problems)
    comparison["table"] = format_table(comparison, synthetic=bool(record.get("target_is_simulator")))
    return comparison


def comparison_rows(comparison):
    """The comparison as table rows, one per (concurrency, metric), in METRICS order.

    Each row: concurrency, metric, label, candidate and baseline summaries
    (or None), delta_pct and verdict. The experiment's text table
    (format_table) and the report's markdown table (tools/report.py) are both
    built from these rows.
    """
    rows = []
    for point in comparison.get("points") or []:
        for metric, _ in METRICS:
            entry = point["metrics"][metric]
            rows.append(
                {
                    "concurrency": point["concurrency"],
                    "metric": metric,
                    "label": METRIC_LABELS[metric],
                    "candidate": entry["candidate"],
                    "baseline": entry["baseline"],
                    "delta_pct": entry["delta_pct"],
                    "verdict": entry["verdict"],
                }
            )
    return rows


def format_table(comparison, host=None, synthetic=False):
    """The comparison as the fixed-width text table the experiment prints."""
    row = "{:>6}  {:<13} {:>12} {:>12} {:>8}  {}"
    title = (
        f"{comparison.get('tier')} vs {comparison.get('baseline_tier')} on {host or comparison.get('host')}: "
        f"median of repeats, noise threshold +-{comparison.get('threshold_pct')}% (TPOT: lower is better)"
    )
    if synthetic:
        title += " - SYNTHETIC numbers from the simulator"
    lines = [title, row.format("c", "metric", "baseline", "tier", "delta", "verdict")]
    for r in comparison_rows(comparison):
        lines.append(
            row.format(
                r["concurrency"],
                r["label"],
                f"{r['baseline']['median']:.2f}" if r["baseline"] else "-",
                f"{r['candidate']['median']:.2f}" if r["candidate"] else "-",
                f"{r['delta_pct']:+.1f}%" if r["delta_pct"] is not None else "-",
                r["verdict"],
            )
        )
    references = []
    for point in comparison.get("points") or []:
        if point.get("baseline_record_id") and point["baseline_record_id"] not in references:
            references.append(point["baseline_record_id"])
    lines.append("baseline record(s): " + (", ".join(references) or "none (no earlier successful baseline)"))
    return "\n".join(lines)
