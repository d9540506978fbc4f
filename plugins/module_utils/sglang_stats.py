# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Statistics of a campaign: medians of repeats, intervals, verdicts, calibration and SLO views.

Pure functions over ledger records (docs/ledger.md) that carry a ``campaign``
key (one record per cell: one server start of one arm, measured with one
workload, repeat r). Used by tools/campaign_report.py; importable as
``ansible.module_utils.sglang_stats`` and, with plugins/module_utils on
``sys.path``, as ``sglang_stats``. Needs numpy and scipy, so it runs on the
controller only (no module ships it to a target host).

Method (docs/campaign-statistics.md explains it at length, with the measured
error rates):

* **Cell value.** A cell's value at a concurrency is the median of its ok
  points there (a cell normally has one point per concurrency). The ok points
  of a failed cell count: each of them completed every request it sent.
* **Summary** (descriptive: the report's error bars). Over the repeats of an
  arm: n, the median, and a percentile-bootstrap confidence interval of the
  median: ``resamples`` samples of size n drawn with replacement from the n
  values, the median of each, and the (1 - confidence) / 2 and
  (1 + confidence) / 2 quantiles of those medians (numpy's default linear
  interpolation), seeded. No interval for n < 2. It is never used for a
  verdict: with n = 2 it is just the two values' spread.
* **Comparison.** On the logarithms of the repeats' values: d = mean(log
  candidate) - mean(log baseline), with Welch's t interval (unequal variances,
  Welch-Satterthwaite degrees of freedom). Both are transformed back to a
  relative difference in percent of the baseline, exp(d) - 1: the ratio of the
  geometric means, and an interval that is calibrated at small n when the
  noise is roughly log-normal (multiplicative), which throughput and latency
  noise is. When one side has zero variance, Welch's df is the other side's
  n - 1; when both have, there is no verdict (the noise cannot be estimated).
  A value that is not finite or <= 0 has no logarithm: it is dropped, and the
  comparison's ``notes`` say so; a side left with no value is no_data.
* **Family.** The comparisons of one arm with the baseline on one host and
  workload (every point and verdict metric: output tok/s and mean TPOT; total
  tok/s is the same requests' output tok/s times a fixed factor, so it is
  shown but is not a second test) are one family; each of its
  intervals is computed at confidence 1 - alpha / m (Bonferroni), m the
  number of its comparisons that can have an interval, so that the chance of
  any false verdict in the family is at most alpha (simultaneous intervals).
* **Verdict.** ``better`` or ``worse`` when the whole interval lies on one side
  of 0 (direction by ``higher_is_better``: throughput up is better, TPOT and
  TTFT down are better); ``indistinguishable`` when it contains 0 (an end
  exactly at 0 counts as containing it); ``no_verdict`` when either side has
  fewer than 2 values ("one repeat: no verdict possible"); ``no_data`` when a
  side has no (positive) value.
* **Determinism.** The bootstrap is seeded (default 0) and the t interval has
  no randomness, so the same values always give the same intervals and verdicts.

Assumptions: the repeats of an arm are independent draws from one
distribution (what the campaign's interleaving of arms, baseline, t1, t2,
baseline-aa, baseline, ..., is there to make plausible: slow drift of the node
then spreads over every arm instead of favouring one), roughly log-normal
(the t interval's assumption; on normal noise of a few percent it behaves the
same, simulate_verdicts measures both), and the cells compared ran on the
same host, hardware, model, workload and simulator settings
(``campaign_analysis`` enforces that). Pairing of repeats (r1 with r1) is not
used. With 2 repeats a side Welch's df is between 1 and 2, so the intervals
are wide: calibrated, but only large changes get a verdict.

Records whose ``campaign.role`` is ``calibration`` (a fleet's node-calibration
cell, the baseline measured once per host before the campaign) enter no arm
and no verdict: they are listed apart (``calibration``). A record with any
other role outside ROLES is left out and named in ``problems``.
"""

from collections import Counter

import numpy as np

try:  # Inside AnsiballZ.
    from ansible.module_utils.sglang_campaign import arm_precision, is_final
    from ansible.module_utils.sglang_compare import (
        GOODPUT_METRICS,
        METRICS,
        VERDICT_METRICS,
        RequestRate,  # noqa: F401 - for tools/: the loads' own class and labels
        concurrencies,
        load_axis,  # noqa: F401 - for tools/: the loads' own class and labels
        load_heading,  # noqa: F401 - for tools/: the loads' own class and labels
        load_label,  # noqa: F401 - for tools/: the loads' own class and labels
        load_tick,  # noqa: F401 - for tools/: the loads' own class and labels
        load_words,  # noqa: F401 - for tools/: the loads' own class and labels
        model_key,
        parse_load_key,
        point_load,
        record_value,
        simulator_key,
        withheld_samples,
        workload_key,
    )
    from ansible.module_utils.sglang_interval import (
        BETTER,
        DEFAULT_CONFIDENCE,
        INDISTINGUISHABLE,
        NO_DATA,
        NO_VERDICT,
        ONE_REPEAT,
        WORSE,
        ZERO_SPREAD,
        compare,
        compare_family,
        decidable,
        family_confidence,
        finite_numbers,
        welch_interval,
    )
    from ansible.module_utils.sglang_quality import QUALITY_REGRESSED, campaign_quality
except ImportError:  # pytest and tools/ scripts put module_utils on sys.path.
    from sglang_campaign import arm_precision, is_final
    from sglang_compare import (
        GOODPUT_METRICS,
        METRICS,
        VERDICT_METRICS,
        RequestRate,  # noqa: F401 - for tools/: the loads' own class and labels
        concurrencies,
        load_axis,  # noqa: F401 - for tools/: the loads' own class and labels
        load_heading,  # noqa: F401 - for tools/: the loads' own class and labels
        load_label,  # noqa: F401 - for tools/: the loads' own class and labels
        load_tick,  # noqa: F401 - for tools/: the loads' own class and labels
        load_words,  # noqa: F401 - for tools/: the loads' own class and labels
        model_key,
        parse_load_key,
        point_load,
        record_value,
        simulator_key,
        withheld_samples,
        workload_key,
    )
    from sglang_interval import (
        BETTER,
        DEFAULT_CONFIDENCE,
        INDISTINGUISHABLE,
        NO_DATA,
        NO_VERDICT,
        ONE_REPEAT,
        WORSE,
        ZERO_SPREAD,
        compare,
        compare_family,
        decidable,
        family_confidence,
        finite_numbers,
        welch_interval,
    )
    from sglang_quality import QUALITY_REGRESSED, campaign_quality

# The comparison itself (compare, compare_family, welch_interval and the verdict names) lives in
# sglang_interval, standard library only, so that the experiment's modules and the campaign report
# reach every verdict by the same code. Re-exported here for the report tools.
__all__ = ["BETTER", "WORSE", "INDISTINGUISHABLE", "NO_VERDICT", "NO_DATA", "ONE_REPEAT", "ZERO_SPREAD", "compare",
           "compare_family", "decidable", "family_confidence", "welch_interval"]

# Status of an arm on a host (over its points, verdict metrics and workloads).
STATUS_BASELINE = "baseline"  # the reference arm itself
STATUS_TESTED = "tested"  # ran, but no verdict was possible (one repeat, no baseline)
STATUS_MIXED = "mixed"  # better at some (point, metric), worse at others
STATUS_CRASHED = "crashed"  # at least one of its latest cells failed (classes given)
STATUS_NOT_RUNNABLE = "not_runnable"  # the tier catalog says it cannot run yet
STATUS_NOT_IN_CAMPAIGN = "not_in_campaign"  # runnable, but no cell of this campaign ran it
# The campaign's quality rule (campaign file quality.rule, docs/quality.md): the tier's output agreement
# with the baseline fell below the A/A floor minus the margin. Wins over any speed status (not crashed).
STATUS_QUALITY_REGRESSED = QUALITY_REGRESSED

# Campaign roles. The arms' roles: compared with the baseline (or the baseline itself).
ROLE_BASELINE = "baseline"
ROLE_AA = "aa"
ROLE_TIER = "tier"
ROLES = (ROLE_BASELINE, ROLE_AA, ROLE_TIER)
# A fleet's node-calibration cell: the baseline once per host before the campaign. Listed apart;
# never an arm, never compared.
ROLE_CALIBRATION = "calibration"
KNOWN_ROLES = (*ROLES, ROLE_CALIBRATION)

# Latency percentiles shown per arm and point (lower is better); descriptive, no verdict.
LATENCY_METRICS = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms")
# Per-user interactivity, derived per cell: 1000 / mean TPOT (ms) = output tok/s one user sees
# while decoding (TTFT excluded).
PER_USER = "per_user_output_tps"
# Goodput shares (sglang_compare.GOODPUT_METRICS) for a workload with a goodput_slo; descriptive,
# no verdict, withheld for their sample size as the percentiles are.
SUMMARY_METRICS = tuple(m for m, _ in METRICS) + LATENCY_METRICS + (PER_USER,) + GOODPUT_METRICS
# The metric of the node calibration (the calibration cells' values).
CALIBRATION_METRIC = "output_throughput"

# At most this many repeats on a side: Welch's df is at most 2, the t quantile large, the
# interval wide (calibrated, but only large changes get a verdict). The report says so.
WIDE_N = 2

DEFAULT_RESAMPLES = 10000
DEFAULT_SEED = 0


_numbers = finite_numbers


def _bounds(confidence):
    if not 0.0 < float(confidence) < 1.0:
        raise ValueError(f"confidence must be between 0 and 1 (exclusive), got {confidence!r}")
    alpha = 1.0 - float(confidence)
    return alpha / 2.0, 1.0 - alpha / 2.0


def _resampled_medians(rng, values, resamples):
    """Medians of ``resamples`` bootstrap samples (with replacement, size n) of ``values``."""
    array = np.asarray(values, dtype=float)
    index = rng.integers(0, len(array), size=(int(resamples), len(array)))
    return np.median(array[index], axis=1)


def cell_value(record, concurrency, metric):
    """The cell's value at a point: the median over the record's ok points at ``concurrency``.

    ``metric`` is a bench_serving key, or PER_USER (1000 / ``mean_tpot_ms`` of each point).
    None when the record has no ok point with that metric there.
    """
    if metric != PER_USER:  # the experiment's own per-record value (sglang_compare)
        return record_value(record, concurrency, metric)
    values = []
    for point in record.get("points") or []:
        if point_load(point) != concurrency or point.get("status") != "ok":
            continue
        tpot = _numbers([point.get("mean_tpot_ms")])
        values += [1000.0 / tpot[0]] if tpot and tpot[0] > 0 else []
    return float(np.median(values)) if values else None


def summarize(values, confidence=DEFAULT_CONFIDENCE, resamples=DEFAULT_RESAMPLES, seed=DEFAULT_SEED):
    """n, median, min, max and the percentile-bootstrap interval of the median.

    Returns ``{"n", "values", "median", "min", "max", "ci_low", "ci_high", "confidence"}``;
    ``ci_low``/``ci_high`` are None when n < 2, and everything but n, values and confidence is
    None when there is no value. Descriptive only (error bars): no verdict comes from it.
    """
    numbers = _numbers(values)
    summary = {
        "n": len(numbers),
        "values": numbers,
        "median": None,
        "min": None,
        "max": None,
        "ci_low": None,
        "ci_high": None,
        "confidence": float(confidence),
    }
    low_q, high_q = _bounds(confidence)
    if not numbers:
        return summary
    summary.update({"median": float(np.median(numbers)), "min": min(numbers), "max": max(numbers)})
    if len(numbers) >= 2:
        medians = _resampled_medians(np.random.default_rng(seed), numbers, resamples)
        low, high = np.quantile(medians, [low_q, high_q])
        summary.update({"ci_low": float(low), "ci_high": float(high)})
    return summary


def simulate_verdicts(
    n,
    effect_pct=0.0,
    noise_pct=3.0,
    distribution="lognormal",
    family=6,
    trials=1000,
    confidence=DEFAULT_CONFIDENCE,
    adjust=True,
    seed=2026,
):
    """Monte-Carlo error rates of compare_family: ``trials`` families of ``family`` comparisons.

    Each comparison draws n baseline values around 100 and n candidate values around
    100 * (1 + effect_pct / 100), independently (the worst case for Bonferroni: metrics of one
    point move together, which makes it conservative). ``distribution``: ``lognormal`` (value
    times exp(N(0, noise_pct / 100))) or ``normal`` (sd noise_pct % of the mean). ``adjust``
    False compares each at ``confidence`` (no Bonferroni). Returns ``{"per_comparison":
    share of comparisons with a verdict, "family_wise": share of families with at least one,
    "better": share of comparisons found better}``; with effect 0 the first two are the false
    verdict rates, with an effect ``better`` is the power.
    """
    if distribution not in ("lognormal", "normal"):
        raise ValueError(f"distribution must be lognormal or normal, got {distribution!r}")
    rng = np.random.default_rng(seed)
    sigma = noise_pct / 100.0

    def draw(centre):
        if distribution == "lognormal":
            return centre * np.exp(rng.normal(0.0, sigma, n))
        return rng.normal(centre, centre * sigma, n)

    verdicts = families = better = 0
    for _ in range(trials):
        pairs = {}
        for index in range(family):
            baseline = draw(100.0)
            pairs[index] = (list(draw(100.0 * (1.0 + effect_pct / 100.0))), list(baseline), True)
        if adjust:
            results, _ = compare_family(pairs, confidence)
        else:
            results = {k: compare(c, b, h, confidence) for k, (c, b, h) in pairs.items()}
        found = [r["verdict"] for r in results.values() if r["verdict"] in (BETTER, WORSE)]
        verdicts += len(found)
        better += found.count(BETTER)
        families += bool(found)
    total = trials * family
    return {"per_comparison": verdicts / total, "family_wise": families / trials, "better": better / total}


# ---------------------------------------------------------------- records of a campaign


def gpu_names(record):
    """The sorted GPU names of the record's nvidia-smi snapshot; None when it has none."""
    gpu = record.get("gpu") or {}
    names = [g.get("name") for g in gpu.get("gpus") or [] if isinstance(g, dict) and g.get("name")]
    return tuple(sorted(names)) if names else None


def setup_key(record):
    """What two cells must share to be compared, besides the host: target kind (simulator or
    not), model, workload shape, the simulator's speed knobs (sglang_compare's keys) and the GPU
    names (compared only when both records have them; see same_setup)."""
    return {
        "target_is_simulator": bool(record.get("target_is_simulator")),
        "model": model_key(record),
        "workload": list(workload_key(record)),
        "simulator": [list(knob) for knob in simulator_key(record)],
        "gpus": list(gpu_names(record)) if gpu_names(record) else None,
    }


def same_setup(one, other):
    """True when two setup_key values may be compared (GPU names only when both are known)."""
    for key in ("target_is_simulator", "model", "workload", "simulator"):
        if one[key] != other[key]:
            return False
    return one["gpus"] is None or other["gpus"] is None or one["gpus"] == other["gpus"]


def campaign_cells(records, campaign=None):
    """The latest final record of every (host, cell) of one campaign, and what was left out.

    ``records`` in ledger order (append order: a cell's attempts are appended one after the
    other, so the last line is the latest attempt, also when a changed launch script gave the
    cell a new content key and its attempts started again from 1). Final is
    sglang_campaign.is_final: a success, or a failure whose class would come back the same way;
    a transient failure (a refused connection, a timeout) is not final and never counts as a
    crash: a cell that has only such records is *pending* (listed in the notes). Records
    without a ``campaign`` key or of another campaign are left out. ``campaign`` None means the
    only campaign found (ValueError when there are several).

    Roles: ``baseline``, ``aa`` and ``tier`` records are cells. ``calibration`` records (the
    node calibration, the baseline once per host before the campaign) are never cells: the
    latest record of each (host, cell), whatever its status, goes to ``notes["calibration"]``.
    Any other role (or none) is left out with a line in ``notes["problems"]``.

    Returns ``(name, cells, notes)``: cells are ``{"host", "arm", "role", "tier", "workload",
    "repeat", "attempt", "cell", "index", "record"}`` in (host, ledger) order; notes count what
    was left out, and list the pending cells, the calibration records and the problems.
    """
    names = sorted({(r.get("campaign") or {}).get("name") for r in records if isinstance(r.get("campaign"), dict)})
    names = [n for n in names if n]
    if campaign is None:
        if len(names) > 1:
            raise ValueError(f"the records hold several campaigns ({', '.join(names)}): name one")
        campaign = names[0] if names else None
    notes = {"without_campaign": 0, "other_campaign": 0, "not_final": 0, "superseded": 0, "problems": []}
    latest, transient, calibration = {}, {}, {}
    for index, record in enumerate(records):
        meta = record.get("campaign")
        if not isinstance(meta, dict):
            notes["without_campaign"] += 1
            continue
        if meta.get("name") != campaign:
            notes["other_campaign"] += 1
            continue
        if meta.get("role") == ROLE_CALIBRATION:
            key = (record.get("host"), meta.get("cell") or meta.get("workload") or record.get("record_id"))
            calibration[key] = calibration_entry(record, index)
            continue
        missing = [k for k in ("cell", "arm", "role", "workload") if not meta.get(k)]
        if missing or meta.get("role") not in ROLES:
            why = (
                f"lacks {', '.join(missing)}"
                if missing
                else f"has an unknown role {meta.get('role')!r} (known: {', '.join(KNOWN_ROLES)})"
            )
            notes["problems"].append(
                f"record {record.get('record_id')}: its campaign key {why}; left out of every arm and verdict"
            )
            continue
        key = (record.get("host"), meta["cell"])
        if record.get("status") not in ("success", "failed") or not is_final(record):
            notes["not_final"] += 1
            transient[key] = ((record.get("failure") or {}).get("class"), meta.get("attempt"))
            continue
        if key in latest:
            notes["superseded"] += 1
        latest[key] = {
            "host": record.get("host"),
            "arm": meta["arm"],
            "role": meta["role"],
            "tier": meta.get("tier") or record.get("tier"),
            "workload": meta["workload"],
            "repeat": meta.get("repeat"),
            "attempt": meta.get("attempt"),
            "cell": meta["cell"],
            "index": index,
            "record": record,
        }
    notes["pending"] = [
        {"host": host, "cell": name, "failure_class": failure, "attempt": attempt}
        for (host, name), (failure, attempt) in sorted(transient.items(), key=lambda item: str(item[0]))
        if (host, name) not in latest
    ]
    notes["calibration"] = sorted(calibration.values(), key=lambda c: (str(c["host"]), c["index"]))
    cells = sorted(latest.values(), key=lambda c: (str(c["host"]), c["index"]))
    return campaign, cells, notes


def calibration_entry(record, index=None):
    """What the report lists of one calibration record: where, its status, and CALIBRATION_METRIC
    per concurrency (cell_value)."""
    meta = record.get("campaign") or {}
    values = {c: cell_value(record, c, CALIBRATION_METRIC) for c in concurrencies(record)}
    return {
        "host": record.get("host"),
        "cell": meta.get("cell"),
        "arm": meta.get("arm"),
        "tier": meta.get("tier") or record.get("tier"),
        "workload": meta.get("workload"),
        "attempt": meta.get("attempt"),
        "record_id": record.get("record_id"),
        "recorded_at": record.get("recorded_at"),
        "status": record.get("status"),
        "failure_class": (record.get("failure") or {}).get("class") if record.get("status") != "success" else None,
        "synthetic": bool(record.get("target_is_simulator")),
        "values": {c: v for c, v in values.items() if v is not None},
        "index": index,
    }


def _cell_entry(cell):
    record = cell["record"]
    failure = record.get("failure") or {}
    points = record.get("points") or []
    warmup = record.get("warmup") if isinstance(record.get("warmup"), dict) else {}
    return {
        "cell": cell["cell"],
        "repeat": cell["repeat"],
        "attempt": cell["attempt"],
        "record_id": record.get("record_id"),
        "run_id": record.get("run_id"),
        "recorded_at": record.get("recorded_at"),
        "status": record.get("status"),
        "synthetic": bool(record.get("target_is_simulator")),
        "failure_class": (failure.get("class") or "unclassified") if record.get("status") != "success" else None,
        "failure_step": failure.get("step"),
        "failure_message": failure.get("message"),
        "points": len(points),
        "ok_points": sum(1 for p in points if p.get("status") == "ok"),
        "warmup_seconds": _numbers([warmup.get("seconds")])[0] if _numbers([warmup.get("seconds")]) else None,
        "warmup_per_concurrency": {
            item.get("concurrency"): item.get("seconds")
            # "per_concurrency" as issue 13 names it; "per_level" as module sglang_warmup writes it.
            for item in warmup.get("per_concurrency") or warmup.get("per_level") or []
            if isinstance(item, dict) and isinstance(item.get("concurrency"), int)
        },
    }


def _reference(cells, baseline_arm):
    """The cell whose setup the others must match: the latest successful baseline cell, else
    the latest successful cell, else the latest cell."""
    for wanted in (
        lambda c: c["arm"] == baseline_arm and c["record"].get("status") == "success",
        lambda c: c["record"].get("status") == "success",
        lambda c: True,
    ):
        found = [c for c in cells if wanted(c)]
        if found:
            return found[-1]
    return None


def _arm_order(arms):
    rank = {ROLE_BASELINE: 0, ROLE_AA: 1, ROLE_TIER: 2}
    return sorted(arms, key=lambda a: (rank[arms[a]["role"]], a))


def arm_status(cells, comparisons, role):
    """The status of one arm from its cells and its comparisons with the baseline.

    ``cells``: cell entries (campaign_analysis's ``cells``); ``comparisons``: compare() results
    of the verdict metrics at every point (any workload). crashed when any cell failed (with
    the classes and counts); for the baseline arm ``baseline``; else better / worse (some
    verdict one way, none the other), mixed (both), indistinguishable (at least one
    comparison, none with a verdict), tested (no verdict possible anywhere; ``reason`` says
    why).
    """
    failed = [c for c in cells if c["status"] != "success"]
    verdicts = Counter(c["verdict"] for c in comparisons)
    status = {
        "status": None,
        "cells": len(cells),
        "failed_cells": len(failed),
        "failure_classes": dict(Counter(c["failure_class"] for c in failed)),
        "verdicts": dict(verdicts),
        "reason": None,
    }
    if failed:
        status["status"] = STATUS_CRASHED
    elif role == ROLE_BASELINE:
        status["status"] = STATUS_BASELINE
    elif verdicts[BETTER] and verdicts[WORSE]:
        status["status"] = STATUS_MIXED
    elif verdicts[BETTER]:
        status["status"] = BETTER
    elif verdicts[WORSE]:
        status["status"] = WORSE
    elif verdicts[INDISTINGUISHABLE]:
        status["status"] = INDISTINGUISHABLE
    else:
        status["status"] = STATUS_TESTED
        reasons = sorted({c["reason"] for c in comparisons if c.get("reason")})
        status["reason"] = "; ".join(reasons) or "no comparison with a baseline"
    return status


def _workload_analysis(cells, options):
    """One host's one workload: arms, their point summaries, comparisons and the A/A result."""
    confidence = options["confidence"]
    baselines = sorted({c["arm"] for c in cells if c["role"] == ROLE_BASELINE})
    problems = []
    if len(baselines) > 1:
        problems.append(f"several baseline arms ({', '.join(baselines)}); {baselines[0]} is the reference")
    baseline_arm = baselines[0] if baselines else None
    reference = _reference(cells, baseline_arm)
    reference_setup = setup_key(reference["record"]) if reference else None
    arms, excluded = {}, []
    for cell in cells:
        arm = arms.setdefault(
            cell["arm"], {"arm": cell["arm"], "role": cell["role"], "tier": cell["tier"], "cells": [], "_used": []}
        )
        entry = _cell_entry(cell)
        arm["cells"].append(entry)
        setup = setup_key(cell["record"])
        if reference_setup is not None and not same_setup(setup, reference_setup):
            differs = sorted(k for k in setup if setup[k] != reference_setup[k])
            excluded.append(
                {
                    "cell": cell["cell"],
                    "record_id": entry["record_id"],
                    "reason": f"its {', '.join(differs)} differ(s) from the reference cell {reference['cell']}",
                }
            )
            continue
        arm["_used"].append(cell["record"])
    used_records = {}
    for arm in arms.values():
        used = used_records[arm["arm"]] = arm.pop("_used")
        loads = sorted(set().union(*(concurrencies(r) for r in used)))
        arm["concurrencies"] = loads
        arm["points"] = {}
        for concurrency in loads:
            values = {m: [] for m in SUMMARY_METRICS}
            for record in used:
                for metric in SUMMARY_METRICS:
                    value = cell_value(record, concurrency, metric)
                    if value is not None:
                        values[metric].append(value)
            arm["points"][concurrency] = {m: summarize(v, **options) for m, v in values.items()}
            for metric in LATENCY_METRICS + GOODPUT_METRICS:
                withheld = withheld_samples(used, concurrency, metric)
                if withheld:
                    arm["points"][concurrency][metric]["withheld"] = withheld
        per_concurrency = {}
        for entry in arm["cells"]:
            for concurrency, seconds in entry["warmup_per_concurrency"].items():
                per_concurrency.setdefault(concurrency, []).append(seconds)
        arm["warmup"] = {
            "seconds": summarize([c["warmup_seconds"] for c in arm["cells"]], **options),
            "per_concurrency": {c: summarize(v, **options) for c, v in sorted(per_concurrency.items())},
        }
    base = arms.get(baseline_arm)
    for arm in arms.values():
        arm["comparison"] = None
        arm["family"] = None
        if arm["role"] == ROLE_BASELINE:
            continue
        # One family: this arm against the baseline at every point and verdict metric.
        pairs = {}
        for concurrency in arm["concurrencies"]:
            for metric, higher_is_better in VERDICT_METRICS:
                mine = arm["points"][concurrency][metric]["values"]
                theirs = base["points"][concurrency][metric]["values"] if base and concurrency in base["points"] else []
                pairs[(concurrency, metric)] = (mine, theirs, higher_is_better)
        results, arm["family"] = compare_family(pairs, confidence)
        arm["comparison"] = {}
        for (concurrency, metric), result in results.items():
            if base is None:
                result["reason"] = "no baseline arm on this host and workload"
            arm["comparison"].setdefault(concurrency, {})[metric] = result
    for arm in arms.values():
        comparisons = [r for point in (arm["comparison"] or {}).values() for r in point.values()]
        arm["status"] = arm_status(arm["cells"], comparisons, arm["role"])
        arm["precision"] = arm_precision_state(arm, used_records[arm["arm"]], comparisons, confidence)
    aa_arms = [a for a in _arm_order(arms) if arms[a]["role"] == ROLE_AA]
    return {
        "baseline_arm": baseline_arm,
        "reference": (
            {"cell": reference["cell"], "record_id": reference["record"].get("record_id"), "setup": reference_setup}
            if reference
            else None
        ),
        "excluded": excluded,
        "problems": problems,
        "arms": {a: arms[a] for a in _arm_order(arms)},
        "aa": [noise_floor(arms[a]) for a in aa_arms],
    }


def arm_precision_state(arm, records, comparisons, confidence=DEFAULT_CONFIDENCE):
    """How precisely the arm's repeats measured it (campaign file ``precision``; docs/campaign-statistics.md):
    ``{"n", "widest_pct", "target", "state", "smallest_change_pct"}``. ``widest_pct``: the half-width of the
    simultaneous interval of the arm's mean headline metric (sglang_campaign.arm_precision); ``target`` the
    campaign's target, from its cells' records (None without one), ``state`` what ended the repeats;
    ``smallest_change_pct``: the widest half-width of the arm's comparison intervals against the baseline,
    the smallest change these repeats could call better or worse (None for the baseline or without one)."""
    succeeded = [r for r in records if r.get("status") == "success"]
    target = next(((r.get("campaign") or {}).get("precision") for r in records
                   if (r.get("campaign") or {}).get("precision")), None)
    metric = (target or {}).get("metric", "output_throughput")
    widest = arm_precision(succeeded, metric, (target or {}).get("confidence", confidence))
    state = None
    if target:
        if widest is not None and widest <= target["target_pct"]:
            state = "target met"
        elif len(succeeded) >= target["max_repeats"]:
            state = "max_repeats reached"
        elif arm["status"]["failed_cells"]:
            state = "a cell failed: no more rounds"
        else:
            state = "stopped short (the budget or an interrupt); the next run adds rounds"
    halves = [(r["ci_high_pct"] - r["ci_low_pct"]) / 2.0 for r in comparisons if r.get("ci_low_pct") is not None]
    return {
        "n": len(succeeded),
        "widest_pct": widest,
        "target": target,
        "state": state,
        "smallest_change_pct": max(halves) if halves else None,
    }


def noise_floor(aa_arm):
    """The A/A result of one aa arm: its difference and interval per point and verdict metric,
    whether it holds (every comparison indistinguishable; None when none had a verdict), the
    widest interval (its half-width and where) and the family's simultaneous confidence."""
    points = aa_arm.get("comparison") or {}
    verdicts = [r["verdict"] for point in points.values() for r in point.values()]
    decided = [v for v in verdicts if v in (BETTER, WORSE, INDISTINGUISHABLE)]
    outside = [
        {"concurrency": c, "metric": m, "verdict": r["verdict"]}
        for c, point in points.items()
        for m, r in point.items()
        if r["verdict"] in (BETTER, WORSE)
    ]
    intervals = [
        {
            "concurrency": c,
            "metric": m,
            "ci_low_pct": r["ci_low_pct"],
            "ci_high_pct": r["ci_high_pct"],
            "half_width_pct": (r["ci_high_pct"] - r["ci_low_pct"]) / 2.0,
        }
        for c, point in points.items()
        for m, r in point.items()
        if r["ci_low_pct"] is not None
    ]
    widest = max(intervals, key=lambda i: i["half_width_pct"]) if intervals else None
    repeats = [(r["n_candidate"], r["n_baseline"]) for point in points.values() for r in point.values()]
    return {
        "arm": aa_arm["arm"],
        "tier": aa_arm["tier"],
        "points": points,
        "holds": (not outside) if decided else None,
        "outside": outside,
        "comparisons": len(verdicts),
        "decided": len(decided),
        "max_ci_half_width_pct": widest["half_width_pct"] if widest else None,
        "widest": widest,
        "family": aa_arm.get("family"),
        "repeats": (min(r[0] for r in repeats), min(r[1] for r in repeats)) if repeats else None,
        "failed_cells": aa_arm["status"]["failed_cells"],
    }


def campaign_analysis(
    records,
    campaign=None,
    catalog=None,
    confidence=DEFAULT_CONFIDENCE,
    resamples=DEFAULT_RESAMPLES,
    seed=DEFAULT_SEED,
):
    """Everything the campaign report shows, computed from the ledger records.

    ``records``: ledger records in ledger order (any mix of hosts and campaigns); ``campaign``:
    the campaign's name (None: the only one found); ``catalog``: optional tier catalog
    (``data/tiers.yml``'s ``tiers`` mapping: id -> {runnable, ...}), so that tiers without a
    cell get not_runnable or not_in_campaign. ``confidence`` is each family's (simultaneous)
    confidence and the point summaries'; ``resamples`` and ``seed`` are the summaries' bootstrap.

    Records are grouped host -> workload -> arm -> concurrency. Every arm is compared with the
    baseline arm of the same host and workload only, and only with cells of the same setup
    (setup_key: target kind, model, workload shape, simulator knobs, GPU names); cells of
    another setup than the reference cell are listed in ``excluded``, never mixed in.
    Calibration records are listed under ``calibration`` and nowhere else.

    Returns ``{"campaign", "synthetic", "method", "counts", "pending", "problems",
    "calibration": [calibration_entry], "hosts": {host: {"synthetic", "workloads": {workload:
    {"baseline_arm", "reference", "excluded", "problems", "arms": {arm: {"arm", "role", "tier",
    "cells", "concurrencies", "points": {c: {metric: summary}}, "warmup", "comparison": {c:
    {metric: compare result}} | None, "family": compare_family's family | None, "status"}},
    "aa": [noise floor]}}, "status": {arm or tier: arm status + "role", "tier", "quality" (the arm's
    quality verdict), "speed_status" (only when the quality rule replaced the status)}, "quality":
    host_quality, "aa_holds"}}}``.
    """
    options = {"confidence": confidence, "resamples": resamples, "seed": seed}
    name, cells, notes = campaign_cells(records, campaign)
    analysis = {
        "campaign": name,
        "synthetic": any(c["record"].get("target_is_simulator") for c in cells),
        "method": {
            "summary": "median of repeats with a percentile-bootstrap interval (descriptive)",
            "statistic": "ratio of geometric means: exp(mean log arm - mean log baseline) - 1",
            "interval": "Welch's t on log values (Welch-Satterthwaite df), transformed back: exp(d) - 1",
            "family": "one arm against the baseline on one host and workload, every point and verdict metric",
            "adjustment": "Bonferroni: each interval at 1 - (1 - confidence) / m",
            "confidence": float(confidence),
            "resamples": int(resamples),
            "seed": seed,
            "verdict_metrics": [m for m, _ in VERDICT_METRICS],
        },
        "counts": {
            "cells": len(cells),
            "calibration": len(notes["calibration"]),
            **{k: v for k, v in notes.items() if k not in ("problems", "pending", "calibration")},
        },
        "pending": notes["pending"],
        "calibration": notes["calibration"],
        "problems": list(notes["problems"]),
        "hosts": {},
    }
    for host in sorted({str(c["host"]) for c in cells}):
        mine = [c for c in cells if str(c["host"]) == host]
        workloads = {}
        for workload in sorted({c["workload"] for c in mine}):
            workloads[workload] = _workload_analysis([c for c in mine if c["workload"] == workload], options)
            analysis["problems"] += [f"{host}/{workload}: {p}" for p in workloads[workload]["problems"]]
        quality = host_quality(mine)
        analysis["hosts"][host] = {
            "synthetic": any(c["record"].get("target_is_simulator") for c in mine),
            "workloads": workloads,
            "status": apply_quality_rule(_host_status(workloads, catalog), quality),
            "quality": quality,
            "aa_holds": _aa_holds(workloads),
            "first_start": first_start(mine, [c for c in notes["calibration"] if str(c["host"]) == host]),
        }
    return analysis


def host_quality(cells):
    """The output quality of one host's arms (sglang_quality.campaign_quality) from its cells: the
    successful records of each arm over every workload, the baseline arm and the A/A arms by role,
    and the rule the latest cell's record carries (``campaign.quality_rule``, from the campaign
    file's ``quality.rule``; None without one)."""
    arms, roles = {}, {}
    for cell in cells:
        roles.setdefault(cell["arm"], cell["role"])
        mine = arms.setdefault(cell["arm"], [])
        if cell["record"].get("status") == "success":
            mine.append(cell["record"])
    baselines = sorted(a for a, r in roles.items() if r == ROLE_BASELINE)
    rule = next((meta["quality_rule"] for meta in (c["record"].get("campaign") or {} for c in reversed(cells))
                 if meta.get("quality_rule")), None)
    return campaign_quality(arms, baselines[0] if baselines else None,
                            sorted(a for a, r in roles.items() if r == ROLE_AA), rule)


def apply_quality_rule(status, quality):
    """``status`` (_host_status) with the quality verdict of each arm (``quality``), and the status
    ``quality_regressed`` for a tier arm the campaign's rule flags, whatever its speed verdict (kept
    as ``speed_status``). A crashed arm stays crashed: it cannot be deployed either way."""
    for name, state in status.items():
        entry = quality["arms"].get(name)
        state["quality"] = entry["verdict"] if entry else None
        if entry and entry["regressed"] and state["role"] == ROLE_TIER and state["status"] != STATUS_CRASHED:
            state["speed_status"] = state["status"]
            state["status"] = STATUS_QUALITY_REGRESSED
    return status


def first_start(cells, calibration):
    """The host's first server start of the campaign, the cold node's: ``{"cell", "arm", "tier",
    "taken_by"}``, ``taken_by`` ``calibration`` when a calibration cell ran before every cell (it
    took the cold start), else None: that cell's numbers carry it (phase-e on the H200: 4943
    against 7371-7977 output tok/s). Flagged in the report, kept in its arm. Ledger order (``index``)
    is run order on one host. None when the host has no cell."""
    if not cells:
        return None
    first = min(cells, key=lambda c: c["index"])
    taken = any(c.get("index") is not None and c["index"] < first["index"] for c in calibration)
    return {"cell": first["cell"], "arm": first["arm"], "tier": first["tier"],
            "taken_by": ROLE_CALIBRATION if taken else None}


def _aa_holds(workloads):
    """False when any A/A arm of the host has a verdict, True when at least one had a decided
    comparison and none a verdict, None when no A/A comparison could decide."""
    floors = [f for w in workloads.values() for f in w["aa"]]
    if any(f["holds"] is False for f in floors):
        return False
    return True if any(f["holds"] for f in floors) else None


def _host_status(workloads, catalog):
    """Each arm's status over every workload of the host, plus the catalog's tiers without a cell."""
    arms = {}
    for workload in workloads.values():
        for name, arm in workload["arms"].items():
            entry = arms.setdefault(name, {"role": arm["role"], "tier": arm["tier"], "cells": [], "comparisons": []})
            entry["cells"] += arm["cells"]
            entry["comparisons"] += [r for p in (arm["comparison"] or {}).values() for r in p.values()]
    status = {}
    for name, entry in arms.items():
        status[name] = {
            "role": entry["role"],
            "tier": entry["tier"],
            **arm_status(entry["cells"], entry["comparisons"], entry["role"]),
        }
    ran = {entry["tier"] for entry in arms.values()}
    for tier_id, spec in (catalog or {}).items():
        if tier_id in ran or tier_id in status:
            continue
        runnable = bool((spec or {}).get("runnable"))
        status[tier_id] = {
            "role": None,
            "tier": tier_id,
            "status": STATUS_NOT_IN_CAMPAIGN if runnable else STATUS_NOT_RUNNABLE,
            "cells": 0,
            "failed_cells": 0,
            "failure_classes": {},
            "verdicts": {},
            "reason": None,
        }
    return status


# ---------------------------------------------------------------- node calibration and SLO searches


def _strings(value):
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value if v is not None]
    return [str(value)]


def calibration_view(data, campaign=None):
    """The node-calibration file that the campaign playbook writes, as the report shows it.

    ``data``: ``{"campaign", "metric", "max_deviation_pct", "hosts": {host: {"values":
    {"<load>": float}, "deviation_pct": float | None, "throttling": [str], "telemetry":
    "ok" | why unavailable, "flagged": bool, "reasons": [str], "excluded": bool}}}``, optionally
    with ``fleet_median`` ({"<load>": float}, what the deviations are relative to) and
    ``single_host`` (one host: no fleet to compare with).
    ``campaign``: the report's campaign (another name in the file is a problem, not an error).

    A ``<load>`` key is sglang_compare.load_key's: ``"16"`` for a concurrency, ``"0.5 req/s"`` for
    a request-rate sweep's rate (read back by parse_load_key).

    Returns ``{"campaign", "metric", "max_deviation_pct", "single_host", "concurrencies" (the
    loads: ints, or RequestRates for a rate sweep), "hosts": [{"host", "values": {load: float},
    "deviation_pct", "throttling", "telemetry", "flagged", "reasons", "excluded"}] sorted by
    host, "fleet_median": {load: float},
    "fleet_median_source": "file" | "hosts", "problems": [str]}``: the file's fleet median when
    it has one, else the median over the hosts listed. Whatever is malformed is named in
    ``problems`` and left out.
    """
    view = {
        "campaign": None,
        "metric": CALIBRATION_METRIC,
        "max_deviation_pct": None,
        "concurrencies": [],
        "hosts": [],
        "fleet_median": {},
        "fleet_median_source": "hosts",
        "single_host": False,
        "problems": [],
    }
    if not isinstance(data, dict):
        view["problems"].append(f"the calibration file holds a {type(data).__name__}, not an object")
        return view
    view["campaign"] = data.get("campaign")
    view["metric"] = data.get("metric") or CALIBRATION_METRIC
    view["max_deviation_pct"] = (_numbers([data.get("max_deviation_pct")]) or [None])[0]
    view["single_host"] = bool(data.get("single_host"))
    if campaign is not None and view["campaign"] is not None and view["campaign"] != campaign:
        view["problems"].append(f"the calibration file is for campaign {view['campaign']!r}, not {campaign!r}")
    hosts = data.get("hosts")
    if not isinstance(hosts, dict):
        view["problems"].append("the calibration file has no hosts object")
        return view
    for host in sorted(hosts, key=str):
        entry = hosts[host]
        if not isinstance(entry, dict):
            view["problems"].append(f"calibration of host {host}: not an object; left out")
            continue
        values = {}
        for key, value in (entry.get("values") or {}).items() if isinstance(entry.get("values"), dict) else []:
            concurrency, number = parse_load_key(key), _numbers([value])
            if concurrency is None or not number:
                view["problems"].append(f"calibration of host {host}: value {key!r}: {value!r} is not usable")
                continue
            values[concurrency] = number[0]
        view["hosts"].append(
            {
                "host": str(host),
                "values": dict(sorted(values.items())),
                "deviation_pct": (_numbers([entry.get("deviation_pct")]) or [None])[0],
                "throttling": _strings(entry.get("throttling")),
                "telemetry": str(entry.get("telemetry")) if entry.get("telemetry") is not None else "not reported",
                "flagged": bool(entry.get("flagged")),
                "reasons": _strings(entry.get("reasons")),
                "excluded": bool(entry.get("excluded")),
            }
        )
    given = data.get("fleet_median") if isinstance(data.get("fleet_median"), dict) else {}
    given = {parse_load_key(k): _numbers([v]) for k, v in given.items()}
    given = {c: v[0] for c, v in given.items() if c is not None and v}
    view["concurrencies"] = sorted({c for h in view["hosts"] for c in h["values"]} | set(given))
    if given:
        view["fleet_median"], view["fleet_median_source"] = dict(sorted(given.items())), "file"
    else:
        view["fleet_median"] = {
            c: float(np.median([h["values"][c] for h in view["hosts"] if c in h["values"]]))
            for c in view["concurrencies"]
        }
    return view


def describe_slo_entry(entry):
    """``p99_ttft_ms <= 420`` from ``{metric, bound, limit}`` (module sglang_slo_search's form) or
    ``{metric, max}`` / ``{metric, min}`` (the playbook's)."""
    if not isinstance(entry, dict):
        return str(entry)
    bound, limit = entry.get("bound"), entry.get("limit")
    if bound is None:
        bound = "max" if "max" in entry else "min" if "min" in entry else None
        limit = entry.get(bound) if bound else None
    sign = {"max": "<=", "min": ">="}.get(bound, "?")
    number = _numbers([limit])
    return f"{entry.get('metric')} {sign} {number[0]:g}" if number else f"{entry.get('metric')} {sign} {limit}"


def slo_view(line, default_host=None):
    """One line of an SLO searches file (docs/slo-search.md) as the report shows it; None when the
    line is not an SLO search.

    The line is either the ledger-style record module sglang_slo_search appends (``kind:
    slo_search``, ``host`` and ``status`` beside the search under ``slo_search``) or the search
    itself (``tier``, ``slo``, ``dimension``, ``probes``, ``answer``, ``bounded``, ...). Its host is
    the line's ``host``, else ``default_host`` (the file's folder: results/<host>/...).

    Returns ``{"host", "tier", "slo": [text], "dimension", "fixed", "low", "high", "tolerance",
    "answer", "bounded", "outcome", "reason", "bracket", "consistent", "warnings", "synthetic",
    "status", "failure", "run_id", "started_at", "metrics": [SLO metric names], "probes":
    [{"index", "value", "concurrency", "request_rate", "num_prompts", "met", "status", "error",
    "checks": {metric: value}}]}``.
    """
    if not isinstance(line, dict):
        return None
    search = line["slo_search"] if isinstance(line.get("slo_search"), dict) else line
    if not any(k in search for k in ("probes", "answer", "slo")):
        return None
    slo = search.get("slo") if isinstance(search.get("slo"), list) else []
    metrics = [e.get("metric") for e in slo if isinstance(e, dict) and e.get("metric")]
    probes = []
    for index, probe in enumerate(search.get("probes") or []):
        if not isinstance(probe, dict):
            continue
        error = probe.get("error") if isinstance(probe.get("error"), dict) else None
        checks = {
            c.get("metric"): c.get("value")
            for c in probe.get("checks") or []
            if isinstance(c, dict) and c.get("metric")
        }
        probes.append(
            {
                "index": probe.get("index", index),
                "value": probe.get("value"),
                "concurrency": probe.get("concurrency"),
                "request_rate": probe.get("request_rate"),
                "num_prompts": probe.get("num_prompts"),
                "met": probe.get("met"),
                "status": probe.get("status"),
                "error": f"{error.get('class')}: {error.get('message') or ''}".rstrip(": ") if error else None,
                "checks": checks,
            }
        )
    answer, bounded = search.get("answer"), search.get("bounded")
    outcome = search.get("outcome") or (
        "low_fails" if answer is None else "high_passes" if bounded is False else "bracketed"
    )
    failure = line.get("failure") if isinstance(line.get("failure"), dict) else None
    return {
        "host": str(line.get("host") or search.get("host") or default_host or "unknown host"),
        "tier": search.get("tier") or line.get("tier"),
        "slo": [describe_slo_entry(e) for e in slo],
        "metrics": metrics,
        "dimension": search.get("dimension") or "concurrency",
        "fixed": search.get("fixed") if isinstance(search.get("fixed"), dict) else {},
        "low": search.get("low"),
        "high": search.get("high"),
        "tolerance": search.get("tolerance"),
        "answer": answer,
        "bounded": bounded,
        "outcome": outcome,
        "reason": search.get("reason"),
        "bracket": search.get("bracket"),
        "consistent": search.get("consistent"),
        "warnings": _strings(search.get("warnings")),
        "synthetic": bool(search.get("synthetic") or line.get("target_is_simulator")),
        "status": line.get("status"),
        "failure": f"{failure.get('class')}: {failure.get('message')}" if failure else None,
        "run_id": search.get("run_id") or line.get("run_id"),
        "started_at": search.get("started_at") or line.get("started_at") or line.get("recorded_at"),
        "probes": probes,
    }
