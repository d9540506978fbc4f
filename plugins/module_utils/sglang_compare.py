# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Compare a ledger record with the baseline: the experiment's verdicts, by the campaign's method.

Pure functions over ledger records (docs/ledger.md), used by modules sglang_bench_compare and
sglang_ledger_append (its ``compare`` option) and by tools/report.py. Standard library only; the
statistics are sglang_interval's, the same code the campaign report's verdicts come from
(docs/campaign-statistics.md). There is no fixed threshold: a verdict needs an interval.

**Arms.** The candidate arm is the record and every earlier successful record of the same tier
with the same launch script (``launch.script_sha256``); the baseline arm is every earlier
successful record of the baseline tier with the script of the latest of them. Both only from
records that share the record's host, target kind (simulator or not), model, workload (dataset,
lengths, range ratio) and simulator settings. A record is one server start; its value at a
concurrency is the median of its ok points there (its within-server repeats).

**Scope.** Per concurrency:

* ``server_starts`` - both arms have at least 2 records with a value: the interval is over
  server starts, the variation a user meets when running the tier again.
* ``within_server`` - otherwise, when the record and the latest baseline record each have at
  least 2 ok repeats there (``sglang_bench_repeats``): the interval is over those repeats, one
  server start each, and it is shown - but it gives no verdict. It covers the noise between
  back-to-back runs on a warm server, not what changes between starts (placement, compilation,
  a cold node): simulate_experiment finds 17 % of A/A records with a false verdict when such
  intervals decide (1 start, 3 repeats, 5 % start-to-start and 5 % point noise), against 3.7 %
  over 3 starts a side. The table labels it ``in-server``.
* otherwise one value a side: the change is shown, the verdict is ``no_verdict`` ("one repeat:
  no verdict possible").

**Family.** The record's comparisons (every concurrency, output tok/s and mean TPOT) are one
Bonferroni family at ``confidence`` (default 0.95): the chance of any false verdict in the
record is at most 5 %. Total tok/s is the same requests' output tok/s times a fixed factor (the
seeded prompts' lengths), so it is shown with its interval but is not a second test (``in_family``
false). ``simulate_experiment`` measures the false-verdict rate of this path on data of one
distribution.

**A/A floor.** When the ledger holds a campaign's A/A arm for the same host and workload, each
concurrency shows that campaign's interval of A/A against its baseline (output tok/s): what
"no change" looked like on this host.
"""

import math

try:  # Inside AnsiballZ.
    from ansible.module_utils.sglang_interval import (
        DECIDED,
        DEFAULT_CONFIDENCE,
        NO_VERDICT,
        ONE_REPEAT,
        check_confidence,
        compare,
        compare_family,
        finite_numbers,
        median,
    )
    from ansible.module_utils.sglang_ledger import POINT_TOO_SHORT
    from ansible.module_utils.sglang_quality import quality_comparison, quality_lines
    from ansible.module_utils.sglang_workload_options import extra_identity
except ImportError:  # pytest and tools/ scripts put module_utils on sys.path.
    from sglang_interval import (
        DECIDED,
        DEFAULT_CONFIDENCE,
        NO_VERDICT,
        ONE_REPEAT,
        check_confidence,
        compare,
        compare_family,
        finite_numbers,
        median,
    )
    from sglang_ledger import POINT_TOO_SHORT
    from sglang_quality import quality_comparison, quality_lines
    from sglang_workload_options import extra_identity

NO_BASELINE = "no_baseline"
NO_DATA = "no_data"

# Shown metrics: bench_serving key -> True when higher is better.
METRICS = (
    ("output_throughput", True),
    ("total_throughput", True),
    ("mean_tpot_ms", False),
)
# The metrics that are tested (a family member each, per concurrency). total_throughput is
# output_throughput times (input + output tokens) / output tokens of the same seeded requests.
VERDICT_METRICS = (
    ("output_throughput", True),
    ("mean_tpot_ms", False),
)
DEPENDENT_METRICS = {"total_throughput": "output_throughput"}

SCOPE_STARTS = "server_starts"
SCOPE_WITHIN = "within_server"
WITHIN_ONLY = (
    "within one server start a side: the interval does not cover start-to-start variation, so it gives no "
    "verdict; run the tier and the baseline again for one"
)
AA_METRIC = "output_throughput"
# Goodput (sglang_bench_points.GOODPUT_KEYS): shown beside the table for a workload with a
# goodput_slo, per arm and concurrency, in no verdict (a share near 1 has no spread to test, and
# its SLO is the workload's choice, not the server's).
GOODPUT_METRICS = ("goodput_request_share", "goodput_token_share")


def summarize(values):
    """Median and spread of repeated measurements.

    Returns ``{"n", "median", "min", "max", "spread_pct"}``; None for no values.
    ``spread_pct`` is (max - min) / median in percent.
    """
    numbers = sorted(finite_numbers(values))
    if not numbers:
        return None
    mid = median(numbers)
    return {
        "n": len(numbers),
        "median": mid,
        "min": numbers[0],
        "max": numbers[-1],
        "spread_pct": ((numbers[-1] - numbers[0]) / mid * 100.0) if mid else None,
    }


def delta_pct(candidate, baseline):
    """Percent change from baseline to candidate; None when undefined."""
    if candidate is None or baseline in (None, 0):
        return None
    return (float(candidate) - float(baseline)) / float(baseline) * 100.0


def model_key(record):
    """The model identity used to match records."""
    model = record.get("model") or {}
    if isinstance(model, dict):
        return model.get("model_path") or model.get("served_model_name")
    return model


def workload_key(record):
    """The workload identity used to match records: the settings that say what a request is
    (sglang_workload_options.WORKLOAD_IDENTITY). The first four as they were always compared; a
    later one only where it is not its default, so records made before it existed keep their key."""
    workload = record.get("workload") or {}
    ratio = workload.get("random_range_ratio")
    return (
        workload.get("dataset_name"),
        workload.get("input_len"),
        workload.get("output_len"),
        float(ratio) if isinstance(ratio, (int, float)) else ratio,
    ) + extra_identity(workload)


# Simulator knobs that change the outputs and not the speed: a tier that sets them is the one
# the output-quality check must compare with the baseline (docs/quality.md).
OUTPUT_ONLY_KNOBS = ("SGLANG_SIM_NUMERICS",)


def simulator_key(record):
    """The simulator's own knobs (SGLANG_SIM_* in the launch env), for simulator records only.

    Its speed factor scales every synthetic number, so records made at different speeds are not
    comparable (seen: -86% "worse" after a speed change). Faults are left out: a faulted run
    fails and is never a baseline. So are OUTPUT_ONLY_KNOBS (SGLANG_SIM_NUMERICS).
    """
    if not record.get("target_is_simulator"):
        return ()
    env = ((record.get("launch") or {}).get("env")) or {}
    knobs = (k for k in env if k.startswith("SGLANG_SIM_") and not k.startswith("SGLANG_SIM_FAULT")
             and k not in OUTPUT_ONLY_KNOBS)
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


class RequestRate(float):
    """The load of a point of a request-rate sweep (the workload's request_rates): its Poisson rate
    in requests per second, shown as such (``8 req/s``) wherever a concurrency would be."""

    def __str__(self):
        return f"{float(self):g} req/s"

    def __format__(self, spec):
        return str(self) if not spec else float.__format__(self, spec)


def point_load(point):
    """The load a point was measured at, its key in every comparison: its concurrency (an int), or
    for a point of a request-rate sweep (a numeric ``request_rate``, sglang_bench_points.point_tags)
    its rate as a RequestRate; None for neither. A sweep's records never meet a concurrency sweep's:
    request_rates is part of the workload's identity."""
    rate = point.get("request_rate")
    if isinstance(rate, (int, float)) and not isinstance(rate, bool):
        return RequestRate(rate)
    concurrency = point.get("concurrency")
    return concurrency if isinstance(concurrency, int) and not isinstance(concurrency, bool) else None


def load_key(load):
    """A load as a JSON object key: ``"16"`` for a concurrency, ``"8 req/s"`` for a rate
    (parse_load_key reads it back)."""
    return str(load)


def parse_load_key(key):
    """The load of a JSON object key that load_key wrote: a concurrency (``"16"`` or 16, a whole
    number >= 1), or a RequestRate (``"8 req/s"``, a rate > 0); None for anything else."""
    if isinstance(key, bool):
        return None
    if isinstance(key, int):
        return key if key >= 1 else None
    text = str(key).strip()
    if text.isdigit():
        return int(text) if int(text) >= 1 else None
    number, _, unit = text.partition(" ")
    if unit.strip() != "req/s":
        return None
    try:
        rate = float(number)
    except ValueError:
        return None
    return RequestRate(rate) if math.isfinite(rate) and rate > 0 else None


def load_label(load):
    """``c=16`` for a concurrency, ``8 req/s`` for a rate of a request-rate sweep."""
    return str(load) if isinstance(load, RequestRate) else f"c={load}"


def load_words(load):
    """A load in a sentence: ``concurrency 16``, or ``0.5 req/s`` for a rate."""
    return str(load) if isinstance(load, RequestRate) else f"concurrency {load}"


def load_axis(loads):
    """What a set of loads varies, for an axis or a column: ``request rate (req/s)`` when they are
    a request-rate sweep's rates, else ``concurrency``."""
    return "request rate (req/s)" if any(isinstance(load, RequestRate) for load in loads) else "concurrency"


def load_heading(loads):
    """The heading of a table's load column: ``Concurrency``, or ``Request rate (req/s)``."""
    axis = load_axis(loads)
    return axis[0].upper() + axis[1:]


def load_tick(load):
    """A load under a heading or on an axis that names it (load_heading, load_axis): ``16``, or a
    rate as a number (``0.5``; the heading says req/s)."""
    return f"{load:g}" if isinstance(load, RequestRate) else str(load)


def ok_values(record, concurrency, metric):
    """The metric's values over the record's ok points at one load (point_load: a concurrency, or a rate)."""
    return [
        point.get(metric)
        for point in record.get("points") or []
        if point_load(point) == concurrency
        and point.get("status") == "ok"
        and isinstance(point.get(metric), (int, float))
    ]


def concurrencies(record):
    """Sorted loads (point_load: concurrencies, or a request-rate sweep's rates) of the record's points."""
    return sorted(set(point_load(point) for point in record.get("points") or [] if point_load(point) is not None))


def script_sha(record):
    """The launch script's identity: two records of one tier with different scripts are different arms."""
    return ((record.get("launch") or {}).get("script_sha256")) or None


def record_value(record, concurrency, metric):
    """The record's value at a point: the median of its ok points at ``concurrency`` (None if none)."""
    values = finite_numbers(ok_values(record, concurrency, metric))
    return median(values) if values else None


def withheld_samples(records, concurrency, metric):
    """``{"n", "min_n"}`` when ``metric`` was withheld at ``concurrency`` in any of the records' ok points
    (too few requests for that percentile or goodput share: module_utils sglang_bench_points); the
    smallest sample seen, so a report can say ``n/a (n=16)``. None when nothing was withheld."""
    found = [
        (point.get("withheld_percentiles") or {}).get(metric)
        for record in records
        for point in record.get("points") or []
        if point_load(point) == concurrency and point.get("status") == "ok"
    ]
    found = [entry for entry in found if isinstance(entry, dict)]
    if not found:
        return None
    return {"n": min(entry.get("n", 0) for entry in found), "min_n": max(entry.get("min_n", 0) for entry in found)}


def goodput_slo(record):
    """The limits a record's goodput was counted against (its workload's ``goodput_slo``), or None."""
    slo = (record.get("workload") or {}).get("goodput_slo")
    return slo if isinstance(slo, dict) else None


def _goodput_side(arm, concurrency, metric):
    values, _ids = _side(arm, concurrency, metric)
    summary = summarize(values)
    withheld = withheld_samples(arm, concurrency, metric)
    if summary is None and withheld:
        summary = {"n": 0, "median": None, "withheld": withheld}
    return summary


def _position(records, record):
    """How many records come before ``record`` in the ledger (all of them when it is not there)."""
    for index, candidate in enumerate(records):
        if candidate.get("record_id") and candidate.get("record_id") == record.get("record_id"):
            return index
    return len(records)


def arms(records, record, baseline_tier="baseline"):
    """``(candidate records, baseline records)`` in ledger order: the module docstring's arms."""
    earlier = records[: _position(records, record)]
    key = match_key(record)
    comparable = [
        r for r in earlier
        if r.get("status") == "success" and r.get("record_id") != record.get("record_id") and match_key(r) == key
    ]
    candidate = [
        r for r in comparable
        if r.get("tier") == record.get("tier") and script_sha(r) == script_sha(record)
    ] + [record]
    baselines = [r for r in comparable if r.get("tier") == baseline_tier]
    if record.get("tier") == baseline_tier:
        # A baseline is compared with the baselines before it (an A/A); it is its own arm of one.
        candidate = [record]
    if baselines:
        latest = script_sha(baselines[-1])
        baselines = [r for r in baselines if script_sha(r) == latest]
    return candidate, baselines


def find_baseline(records, record, concurrency, baseline_tier="baseline"):
    """The latest baseline record of the baseline arm with a value at ``concurrency`` (or None)."""
    _, baselines = arms(records, record, baseline_tier)
    for candidate in reversed(baselines):
        if any(ok_values(candidate, concurrency, metric) for metric, _ in METRICS):
            return candidate
    return None


def _side(arm, concurrency, metric):
    """(values, record ids) of an arm's records that have a value at the point."""
    values, ids = [], []
    for r in arm:
        value = record_value(r, concurrency, metric)
        if value is not None:
            values.append(value)
            ids.append(r.get("record_id"))
    return values, ids


def _scope(candidate_arm, baseline_arm, record, concurrency):
    """(scope, candidate records, baseline records) for one concurrency, by the docstring's rule."""
    with_value = [
        [r for r in arm if any(record_value(r, concurrency, m) is not None for m, _ in METRICS)]
        for arm in (candidate_arm, baseline_arm)
    ]
    cand, base = with_value
    if len(cand) >= 2 and len(base) >= 2:
        return SCOPE_STARTS, cand, base
    latest = base[-1:] if base else []
    repeats = lambda r: max(len(ok_values(r, concurrency, m)) for m, _ in METRICS)  # noqa: E731
    if latest and repeats(record) >= 2 and repeats(latest[0]) >= 2:
        return SCOPE_WITHIN, [record], latest
    return SCOPE_STARTS, cand, base


def aa_floor(records, record, concurrency, confidence=DEFAULT_CONFIDENCE):
    """The latest campaign's A/A interval (output tok/s) for the record's host and workload, or None.

    Returns ``{"campaign", "n_aa", "n_baseline", "delta_pct", "ci_low_pct", "ci_high_pct",
    "verdict"}`` from the cells of the last campaign in the ledger that has successful A/A and
    baseline cells with a value at ``concurrency`` and the record's match key."""
    key = match_key(record)
    by_campaign = {}
    for r in records:
        info = r.get("campaign") or {}
        if not info.get("name") or r.get("status") != "success" or match_key(r) != key:
            continue
        value = record_value(r, concurrency, AA_METRIC)
        if value is not None and info.get("role") in ("aa", "baseline"):
            by_campaign.setdefault(info["name"], {"aa": [], "baseline": []})[info["role"]].append(value)
    for name in reversed(list(by_campaign)):
        sides = by_campaign[name]
        if len(sides["aa"]) >= 2 and len(sides["baseline"]) >= 2:
            result = compare(sides["aa"], sides["baseline"], True, confidence)
            return {"campaign": name, "n_aa": result["n_candidate"], "n_baseline": result["n_baseline"],
                    **{k: result[k] for k in ("delta_pct", "ci_low_pct", "ci_high_pct", "verdict")}}
    return None


def compare_record(record, records, confidence=DEFAULT_CONFIDENCE, baseline_tier="baseline"):
    """Compare ``record`` with the baseline, per concurrency and metric, by the module docstring's rule.

    Returns::

        {"record_id", "tier", "host", "status", "confidence", "baseline_tier", "rule",
         "family": {"size", "confidence", "comparison_confidence"},
         "points": [{"concurrency", "scope", "baseline_record_id", "baseline_record_ids",
                     "candidate_record_ids", "baseline_recorded_at", "aa_floor",
                     "metrics": {metric: {"higher_is_better", "in_family", "candidate": summary,
                                          "baseline": summary, "delta_pct", "ci_low_pct",
                                          "ci_high_pct", "verdict", "reason", "notes"}}}]}

    ``delta_pct`` is the ratio of the arms' geometric means minus 1; the summaries' medians are
    the values shown in the table."""
    confidence = check_confidence(confidence)
    candidate_arm, baseline_arm = arms(records, record, baseline_tier)
    points, pairs = [], {}
    for concurrency in concurrencies(record):
        scope, cand, base = _scope(candidate_arm, baseline_arm, record, concurrency)
        sides = {}
        for metric, higher_is_better in METRICS:
            if scope == SCOPE_WITHIN:
                c_values, b_values = ok_values(record, concurrency, metric), ok_values(base[0], concurrency, metric)
                c_ids, b_ids = [record.get("record_id")], [base[0].get("record_id")]
            else:
                c_values, c_ids = _side(cand, concurrency, metric)
                b_values, b_ids = _side(base, concurrency, metric)
            sides[metric] = (c_values, b_values, c_ids, b_ids)
            if metric not in DEPENDENT_METRICS and base and scope == SCOPE_STARTS:
                pairs[(concurrency, metric)] = (c_values, b_values, higher_is_better)
        latest = base[-1] if base else None
        candidate_ids = [r.get("record_id") for r in cand] if scope == SCOPE_STARTS else [record.get("record_id")]
        # Points of this record that completed but fell short of their window: shown, in no verdict.
        short = [
            (p.get("window") or {}).get("shortfall") or "short of its window"
            for p in record.get("points") or []
            if point_load(p) == concurrency and p.get("status") == POINT_TOO_SHORT
        ]
        goodput = None
        if goodput_slo(record):
            goodput = {
                metric: {
                    "candidate": _goodput_side(cand if scope == SCOPE_STARTS else [record], concurrency, metric),
                    "baseline": _goodput_side(
                        [r for r in base if goodput_slo(r) == goodput_slo(record)], concurrency, metric
                    ),
                }
                for metric in GOODPUT_METRICS
            }
        points.append({
            "concurrency": concurrency,
            "goodput": goodput,
            "too_short": short,
            "scope": scope,
            "baseline_record_id": latest.get("record_id") if latest else None,
            "baseline_recorded_at": latest.get("recorded_at") if latest else None,
            "baseline_record_ids": [r.get("record_id") for r in base],
            "candidate_record_ids": candidate_ids,
            "aa_floor": aa_floor(records, record, concurrency, confidence),
            "_sides": sides,
        })
    results, family = compare_family(pairs, confidence)
    for point in points:
        sides = point.pop("_sides")
        point["metrics"] = {}
        for metric, higher_is_better in METRICS:
            c_values, b_values, _, _ = sides[metric]
            key = (point["concurrency"], metric)
            if not point["baseline_record_ids"]:
                outcome = {"delta_pct": None, "ci_low_pct": None, "ci_high_pct": None, "verdict": NO_BASELINE,
                           "reason": f"no earlier successful {baseline_tier} record to compare with", "notes": []}
            elif key in results:
                outcome = results[key]
            elif point["scope"] == SCOPE_WITHIN:  # shown, never decides (the docstring's reason)
                outcome = compare(c_values, b_values, higher_is_better, confidence)
                if outcome["verdict"] not in (NO_DATA,):
                    outcome = {**outcome, "verdict": NO_VERDICT, "reason": WITHIN_ONLY}
            else:  # a dependent metric: its interval at the family's level, not a member of the family
                outcome = compare(c_values, b_values, higher_is_better, family["comparison_confidence"])
            point["metrics"][metric] = {
                "higher_is_better": higher_is_better,
                "in_family": key in results,
                "candidate": summarize(c_values),
                "baseline": summarize(b_values) if point["baseline_record_ids"] else None,
                **{k: outcome.get(k) for k in ("delta_pct", "ci_low_pct", "ci_high_pct", "verdict", "reason")},
                "notes": list(outcome.get("notes") or []),
            }
    return {
        "record_id": record.get("record_id"),
        "tier": record.get("tier"),
        "host": record.get("host"),
        "status": record.get("status"),
        "confidence": confidence,
        "baseline_tier": baseline_tier,
        "rule": (
            f"{record.get('tier')} against the {baseline_tier} records of the same host, target kind, model, "
            f"workload and launch script; Welch's t interval on the log scale, {confidence:.0%} simultaneous "
            f"over the {family['size']} tested comparisons (output tok/s and TPOT per concurrency; total tok/s "
            "follows output tok/s); a verdict only when the interval excludes 0; one value a side: no verdict"
        ),
        "family": family,
        "points": points,
        "goodput_slo": goodput_slo(record),
        "goodput_slo_text": describe_goodput_slo(goodput_slo(record)) if goodput_slo(record) else None,
    }


def simulate_experiment(starts=3, repeats=1, noise_pct=5.0, effect_pct=0.0, server_noise_pct=None,
                        concurrencies_=(1, 10, 256, 1024), trials=400, confidence=DEFAULT_CONFIDENCE, seed=2026):
    """Monte-Carlo error rates of compare_record on synthetic records: the experiment path as a user runs it.

    Each trial builds a ledger of ``starts`` baseline records then ``starts`` records of a tier
    (the order experiment.yml gives when a user runs the baseline, then the tier, a few times),
    each with ``repeats`` ok points per concurrency; every value is 100 * (1 + effect for the
    tier) times a log-normal server factor (``server_noise_pct``, shared by a record's points,
    default ``noise_pct``) and a log-normal point factor (``noise_pct``). Returns ``{"trials",
    "family_wise": share of trials whose last record got any verdict, "per_comparison", "better":
    share of tested comparisons found better}``; with effect 0 the first is the false-verdict rate."""
    import random

    rng = random.Random(seed)
    server_sigma = (noise_pct if server_noise_pct is None else server_noise_pct) / 100.0
    sigma = noise_pct / 100.0
    families = verdicts = better = tested = 0
    for trial in range(trials):
        ledger = []
        for arm, factor in (("baseline", 1.0), ("t", 1.0 + effect_pct / 100.0)):
            for start in range(starts):
                server = math.exp(rng.gauss(0.0, server_sigma))
                points = [
                    {"concurrency": c, "repeat": r, "status": "ok",
                     **{m: (100.0 * factor * server * math.exp(rng.gauss(0.0, sigma))) ** (1 if up else -1)
                        for m, up in METRICS}}
                    for c in concurrencies_ for r in range(repeats)
                ]
                ledger.append({"record_id": f"{trial}-{arm}-{start}", "tier": arm, "status": "success",
                               "host": "h", "launch": {"script_sha256": arm}, "points": points})
        result = compare_record(ledger[-1], ledger, confidence)
        found = [m["verdict"] for p in result["points"] for m in p["metrics"].values()
                 if m["in_family"] and m["verdict"] in DECIDED]
        tested += sum(1 for p in result["points"] for m in p["metrics"].values() if m["in_family"])
        verdicts += len(found)
        better += found.count("better")
        families += bool(found)
    return {"trials": trials, "family_wise": families / trials, "per_comparison": verdicts / max(tested, 1),
            "better": better / max(tested, 1)}


# How the comparison table names each metric.
METRIC_LABELS = {"output_throughput": "output tok/s", "total_throughput": "total tok/s", "mean_tpot_ms": "TPOT ms"}


def confidence_problem(confidence):
    """What is wrong with a confidence level (None when nothing is)."""
    try:
        check_confidence(confidence)
    except ValueError as exc:
        return f"{exc}; fix confidence in data/benchmark.yml (or sglang_bench_confidence)."
    return None


def share_text(summary):
    """A goodput share as the table shows it: ``97.5 %``, ``n/a (n=8)`` when withheld, ``-`` without one."""
    if not summary:
        return "-"
    if summary.get("median") is None:
        withheld = summary.get("withheld")
        return f"n/a (n={withheld['n']})" if withheld else "-"
    return f"{summary['median'] * 100:.1f} %"


def describe_goodput_slo(slo):
    """``TTFT <= 2000 ms, TPOT <= 200 ms (attainment 0.9)``."""
    names = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "e2e_ms": "E2E"}
    limits = ", ".join(f"{names[k]} <= {float(slo[k]):g} ms" for k in names if slo.get(k) is not None)
    attainment = slo.get("attainment")
    return limits + (f" (attainment {float(attainment):g})" if attainment is not None else "")


def goodput_lines(comparison):
    """The comparison's goodput, one line per concurrency (empty for a workload without goodput_slo):
    the tier's and the baseline's share of requests and of output tokens that met every limit."""
    points = [p for p in comparison.get("points") or [] if p.get("goodput")]
    if not points:
        return []
    lines = [f"goodput, requests / output tokens that met every limit of {comparison.get('goodput_slo_text')}:"]
    for point in points:
        goodput = point["goodput"]
        tier = " / ".join(share_text(goodput[m]["candidate"]) for m in GOODPUT_METRICS)
        base = " / ".join(share_text(goodput[m]["baseline"]) for m in GOODPUT_METRICS)
        lines.append(f"  {load_label(point['concurrency'])}: tier {tier}; baseline {base} (no verdict)")
    return lines


def ledger_comparison(record, records, confidence=DEFAULT_CONFIDENCE, baseline_tier="baseline", problems=()):
    """compare_record plus what module sglang_bench_compare returns with it: the ledger's problems (lines
    that did not parse) and the fixed-width table, labelled SYNTHETIC for a simulator record. Shared by
    that module and sglang_ledger_append (its ``compare`` option). A bad confidence is a ValueError."""
    problem = confidence_problem(confidence)
    if problem:
        raise ValueError(problem)
    comparison = compare_record(record, records, confidence, baseline_tier)
    comparison["quality"] = quality_comparison(record, records, baseline_tier)
    comparison["ledger_problems"] = list(problems)
    comparison["table"] = format_table(comparison, synthetic=bool(record.get("target_is_simulator")))
    return comparison


def comparison_rows(comparison):
    """The comparison as table rows, one per (concurrency, metric), in METRICS order.

    Each row: concurrency, scope, metric, label, candidate and baseline summaries (or None),
    delta_pct, ci_low_pct, ci_high_pct, verdict, reason, in_family and aa_floor (the point's).
    The experiment's text table (format_table) and the report's markdown table (tools/report.py)
    are both built from these rows.
    """
    rows = []
    for point in comparison.get("points") or []:
        for metric, _ in METRICS:
            entry = point["metrics"][metric]
            rows.append({
                "concurrency": point["concurrency"],
                "scope": point.get("scope"),
                "metric": metric,
                "label": METRIC_LABELS[metric],
                "candidate": entry["candidate"],
                "baseline": entry["baseline"],
                "delta_pct": entry["delta_pct"],
                "ci_low_pct": entry.get("ci_low_pct"),
                "ci_high_pct": entry.get("ci_high_pct"),
                "verdict": entry["verdict"],
                "reason": entry.get("reason"),
                "in_family": entry.get("in_family", True),
                "aa_floor": point.get("aa_floor") if metric == AA_METRIC else None,
            })
    return rows


def interval_text(low, high):
    """``[-3.1%, +2.5%]`` (``-`` when there is no interval)."""
    if low is None or high is None:
        return "-"
    return f"[{low:+.1f}%, {high:+.1f}%]"


def n_text(row):
    """How many values each side had, and over what: ``3/2 starts`` or ``4/4 in-server``."""
    if not row["candidate"] or not row["baseline"]:
        return "-"
    unit = "in-server" if row["scope"] == SCOPE_WITHIN else "starts"
    return f"{row['candidate']['n']}/{row['baseline']['n']} {unit}"


def verdict_text(row):
    """The verdict cell: the verdict, marked when the metric is not a test of its own."""
    if row["verdict"] == NO_VERDICT and row["reason"] == ONE_REPEAT:
        return "no_verdict (one repeat)"
    if row["reason"] == WITHIN_ONLY:
        return "no_verdict (in-server)"
    if not row["in_family"] and row["verdict"] != NO_BASELINE:
        return f"({row['verdict']}; follows output tok/s)"
    return row["verdict"]


def format_table(comparison, host=None, synthetic=False):
    """The comparison as the fixed-width text table the experiment prints."""
    row = "{:>6}  {:<13} {:>12} {:>12} {:>8}  {:<18} {:<14} {}"
    family = comparison.get("family") or {}
    title = (
        f"{comparison.get('tier')} vs {comparison.get('baseline_tier')} on {host or comparison.get('host')}: "
        f"geometric means, {comparison.get('confidence', DEFAULT_CONFIDENCE):.0%} simultaneous intervals over "
        f"{family.get('size', 0)} tested comparisons (TPOT: lower is better)"
    )
    if synthetic:
        title += " - SYNTHETIC numbers from the simulator"
    rows = comparison_rows(comparison)
    # A request-rate sweep's points are keyed by their rate (point_load).
    load = "req/s" if load_axis([r["concurrency"] for r in rows]) != "concurrency" else "c"
    lines = [title, row.format(load, "metric", "baseline", "tier", "delta", "interval", "n", "verdict")]
    for r in rows:
        lines.append(
            row.format(
                r["concurrency"],
                r["label"],
                f"{r['baseline']['median']:.2f}" if r["baseline"] else "-",
                f"{r['candidate']['median']:.2f}" if r["candidate"] else "-",
                f"{r['delta_pct']:+.1f}%" if r["delta_pct"] is not None else "-",
                interval_text(r["ci_low_pct"], r["ci_high_pct"]),
                n_text(r),
                verdict_text(r),
            ).rstrip()
        )
    floors = [
        f"{load_label(r['concurrency'])} {interval_text(r['aa_floor']['ci_low_pct'], r['aa_floor']['ci_high_pct'])}"
        for r in rows if r["aa_floor"]
    ]
    if floors:
        name = next(r["aa_floor"]["campaign"] for r in rows if r["aa_floor"])
        lines.append(f"A/A floor on this host (campaign {name}, output tok/s): " + ", ".join(floors))
    if any(r["scope"] == SCOPE_WITHIN for r in rows):
        lines.append(
            "in-server: repeats within one server start a side; start-to-start variation is not in the interval, "
            "so it gives no verdict"
        )
    lines.extend(goodput_lines(comparison))
    for point in comparison.get("points") or []:
        if point.get("too_short"):
            lines.append(
                f"{load_label(point['concurrency'])}: too_short, in no verdict ({point['too_short'][0]}); give the "
                "point more prompts or a longer window (data/benchmark.yml measurement)"
            )
    if any(r["verdict"] == NO_VERDICT and r["reason"] == ONE_REPEAT for r in rows):
        lines.append(
            "one repeat: run the tier (and the baseline) again - each run is one server start - for an interval "
            "over starts, or set sglang_bench_repeats >= 2 for one within a start"
        )
    references = []
    for point in comparison.get("points") or []:
        for record_id in point.get("baseline_record_ids") or []:
            if record_id not in references:
                references.append(record_id)
    lines.append("baseline record(s): " + (", ".join(references) or "none (no earlier successful baseline)"))
    lines.extend(quality_lines(comparison.get("quality")))
    return "\n".join(lines)
