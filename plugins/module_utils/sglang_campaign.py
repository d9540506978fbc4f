# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Campaigns: a campaign file checked and expanded into cells, and planned against the ledger.

A campaign (data/campaigns/*.yml, schema data/campaigns/schema.json, docs/campaign.md) names a
baseline, tiers, workloads and a number of repeats. Its *arms* are the baseline, each tier, and
(``aa_check``) the baseline once more under the name ``<baseline>~aa``: the A/A arm, whose
comparison with the baseline measures the node's noise floor. A *cell* is one (arm, workload,
repeat); its *content key* is a sha256 over everything that decides what it measures:

- the rendered launch script's sha256 and the server's environment;
- the resolved versions (the SGLang version the flags were checked against, the target);
- the resolved workload (data/benchmark.yml with the inventory's and the workload's settings);
- the seed, the arm, the workload's name and the repeat.

The ledger is the campaign's state: each cell appends one record carrying ``campaign`` (see
``cell_record``). A cell is *final* when its latest record with the same key succeeded or failed
with a deterministic class; ``plan`` skips final cells, so re-running the same command resumes.
A transient failure (TRANSIENT_CLASSES: a refused connection, a timeout) is never final: it is
tried again once in the same run (``retry_transient``) and again by the next run.

Pending cells are grouped into *server starts*: consecutive cells (in campaign order) of the same
arm and repeat share one start (several workloads of one arm in one round). Different repeats
never share a start: a repeat is an independent server start, so that the start-to-start
variation is part of what the statistics see.

Standard library only (jsonschema is imported by ``check_campaign``, which runs on the
controller).
"""

from __future__ import annotations

import copy
import hashlib
import json
import math
import time

try:  # Inside AnsiballZ.
    from ansible.module_utils.sglang_compare import concurrencies, load_key, parse_load_key, point_load, record_value
    from ansible.module_utils.sglang_interval import finite_numbers, t_quantile
    from ansible.module_utils.sglang_schema import schema_problems
except ImportError:  # pytest and tools/ put module_utils on sys.path.
    from sglang_compare import concurrencies, load_key, parse_load_key, point_load, record_value
    from sglang_interval import finite_numbers, t_quantile
    from sglang_schema import schema_problems

ROLE_BASELINE = "baseline"
ROLE_AA = "aa"
ROLE_TIER = "tier"
AA_SUFFIX = "~aa"
ORDERS = ("interleaved", "grouped")
DEFAULT_WORKLOAD = "default"

DEFAULTS = {
    "description": "",
    "baseline": "baseline",
    "workloads": [{"name": DEFAULT_WORKLOAD, "settings": {}}],
    # Three: at two, Welch's interval has about one degree of freedom and misses even a +30%
    # change about half the time; at three it finds it (docs/campaign-statistics.md).
    "repeats": 3,
    "order": "interleaved",
    "aa_check": True,
    "budget_minutes": None,
    "retry_transient": 1,
    "hosts": None,
    "slo": [],
    "slo_search": None,
    "calibration": {},
    "precision": None,
    "quality": {},
}
# The output-quality check in every cell (docs/quality.md "In a campaign"): on unless the file says
# enabled: false; ``rule`` {aa_floor_margin: m} makes a tier arm whose token agreement with the
# baseline is below the campaign's A/A floor minus m ``quality_regressed`` in the report.
QUALITY_DEFAULTS = {"enabled": True, "rule": None}
# Repeats to a precision (docs/campaign-statistics.md, "Repeats to a precision"): after the planned
# repeats, an arm gets one more interleaved round while the simultaneous interval of its mean
# (log scale, over its workloads and concurrencies) is wider than +-target_pct, until max_repeats.
PRECISION_DEFAULTS = {"target_pct": 5.0, "max_repeats": 10, "metric": "output_throughput", "confidence": 0.95}
PRECISION_MET = "target_met"
PRECISION_MAX = "max_repeats"
PRECISION_RUNNING = "running"
PRECISION_FAILED = "arm_failed"
CALIBRATION_DEFAULTS = {
    "enabled": False,
    "max_deviation_pct": 10.0,
    "exclude_flagged": True,
    "min_sm_clock_ratio": 0.85,
    "max_temperature_c": 87.0,
}
ROLE_CALIBRATION = "calibration"
CAL_SUFFIX = "~cal"
CALIBRATION_METRIC = "output_throughput"

# Failures that a second try may not see: the network or the clock, not the tier. Every other
# class (a crash signature of data/crash_signatures.yml, an argparse error, an OOM, a dynamo/FP4
# crash, a hang) comes back the same way and is final after one try.
TRANSIENT_CLASSES = frozenset(
    {
        "warmup_refused",
        "warmup_timeout",
        "warmup_connection_lost",
        "server_unreachable",
        "bench_timeout",
        "port_in_use",
        # The run was stopped by a person or a supervisor (SIGINT / SIGTERM): the next run tries it again.
        "interrupted",
    }
)

# What the fingerprint warning compares: the node, not the cell (the key has the cell).
FINGERPRINT_KEYS = ("hostname", "kernel", "git_revision", "gpus", "sglang_version")


class CampaignError(ValueError):
    """The campaign cannot run; ``problems`` lists each."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def sha256_json(value):
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


# The workload catalogue a campaign workload may name (data/workloads.yml, beside data/benchmark.yml),
# found from this file on the controller (check_campaign runs there only).
CATALOGUE_FILES = ("data/workloads.yml", "data/workloads.schema.json", "data/benchmark.yml")


def load_catalogue(root=None):
    """The workload catalogue's checked entries by name (sglang_workload_catalogue.check_catalogue over
    data/benchmark.yml), read from the repository this file lives in (or ``root``); None when the
    files are not there. Raises CampaignError with the catalogue's own problems."""
    import os

    import yaml

    try:  # Inside AnsiballZ (never called there: the controller's check only).
        from ansible.module_utils.sglang_workload_catalogue import CatalogueError, check_catalogue
    except ImportError:
        from sglang_workload_catalogue import CatalogueError, check_catalogue

    root = root or os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [os.path.join(root, name) for name in CATALOGUE_FILES]
    if not all(os.path.exists(path) for path in paths):
        return None
    with open(paths[0], encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    with open(paths[1], encoding="utf-8") as handle:
        schema = json.load(handle)
    with open(paths[2], encoding="utf-8") as handle:
        bench = yaml.safe_load(handle)
    try:
        return check_catalogue(data, schema, bench, source=paths[0])
    except CatalogueError as exc:
        raise CampaignError(exc.problems) from None


def catalogue_workloads(campaign, catalogue, source="the campaign file"):
    """Expand the campaign's workloads that name a catalogue entry (``{name: generated-shared-prefix}``):
    the entry's settings, under the campaign workload's own ``settings`` (which win, as a campaign
    file says exactly what its cells measure), and ``catalogue: <name>``. Returns the problems: a
    setting the entry ``needs`` that the campaign's settings do not give (the inventory cannot
    supply it: nothing outside the file may change a cell), or a dataset_name other than the
    entry's (the workload would silently become another one)."""
    problems = []
    for workload in campaign["workloads"]:
        entry = (catalogue or {}).get(workload["name"])
        if entry is None:
            continue
        own = workload.get("settings") or {}
        wanted = entry["settings"].get("dataset_name")
        if own.get("dataset_name") not in (None, wanted):
            problems.append(
                f"{source}: workload {workload['name']!r} is the catalogue's (data/workloads.yml), which sends "
                f"bench_serving's {wanted} dataset, but its settings name {own['dataset_name']!r}: rename the "
                "workload, or drop dataset_name"
            )
        for name in entry.get("needs") or []:
            if own.get(name) in (None, "", [], {}):
                problems.append(
                    f"{source}: workload {workload['name']!r} is the catalogue's, which needs {name}: give it in "
                    "the workload's settings (a campaign file says what its cells measure)"
                )
        workload["settings"] = {**copy.deepcopy(entry["settings"]), **own}
        workload["catalogue"] = workload["name"]
    return problems


def check_campaign(data, schema, known_tiers, source="the campaign file", runnable_tiers=None, catalogue=None):
    """The normalized campaign (DEFAULTS filled in), or CampaignError naming every problem.

    ``known_tiers`` is the set of tier ids that exist (data/tiers.yml and the host's extra tiers
    from its inventory), or None for a check of the file's shape alone (on the controller, before
    the hosts are known: each host's extra tiers are its own); ``runnable_tiers`` those a launch
    script can be rendered for (all known, if None).
    A tier that is not runnable is moved from ``tiers`` to ``not_runnable``: the report lists it
    as such, and no cell is planned for it. Whether each runnable tier passes its checks is for
    the per-tier validation that follows.
    A workload named after an entry of the workload catalogue (``catalogue``: its checked entries by
    name; default: data/workloads.yml, load_catalogue) takes the entry's settings under its own
    (catalogue_workloads).
    """
    if not isinstance(data, dict):
        raise CampaignError([f"{source} must be a mapping with name and tiers, got {type(data).__name__}"])
    problems = schema_problems(data, schema, source)
    if problems:
        raise CampaignError(problems)
    campaign = copy.deepcopy(DEFAULTS)
    campaign.update(copy.deepcopy(data))
    for workload in campaign["workloads"]:
        workload.setdefault("settings", {})
    if catalogue is None:
        catalogue = load_catalogue()
    problems += catalogue_workloads(campaign, catalogue, source)
    campaign["calibration"] = {**CALIBRATION_DEFAULTS, **(campaign.get("calibration") or {})}
    campaign["quality"] = {**QUALITY_DEFAULTS, **(campaign.get("quality") or {})}
    if campaign["quality"]["rule"] and not campaign["quality"]["enabled"]:
        problems.append(f"{source}: quality.rule needs the quality check, which quality.enabled false turns off")
    if campaign.get("precision") is not None:
        campaign["precision"] = {**PRECISION_DEFAULTS, **campaign["precision"]}
        if campaign["precision"]["max_repeats"] < campaign["repeats"]:
            problems.append(f"{source}: precision.max_repeats ({campaign['precision']['max_repeats']}) is below "
                            f"repeats ({campaign['repeats']}); it bounds the repeats the target may add")
        if campaign["order"] != "interleaved":
            problems.append(f"{source}: precision needs order interleaved: its extra rounds are rounds of every arm "
                            "short of the target")
    if problems:
        raise CampaignError(problems)
    if known_tiers is None:  # the controller's first look: the file's own shape only
        campaign["not_runnable"] = []
        return campaign
    known = set(known_tiers)
    for tier in [campaign["baseline"], *campaign["tiers"]]:
        if tier not in known:
            problems.append(f"{source}: tier {tier!r} is not defined; known tiers: {', '.join(sorted(known))}")
    runnable = set(known if runnable_tiers is None else runnable_tiers)
    if campaign["baseline"] in known and campaign["baseline"] not in runnable:
        problems.append(f"{source}: the baseline {campaign['baseline']!r} is not runnable")
    search = campaign.get("slo_search")
    if search:
        if search["tier"] not in [campaign["baseline"], *campaign["tiers"]]:
            problems.append(f"{source}: slo_search.tier {search['tier']!r} is not the baseline or one of the tiers")
        if not campaign.get("slo"):
            problems.append(f"{source}: slo_search needs the targets in slo (e.g. [{{metric: p99_ttft_ms, max: 500}}])")
        if search.get("low", 1) > search.get("high", 64):
            problems.append(f"{source}: slo_search.low must not be above slo_search.high")
    if campaign["baseline"] in campaign["tiers"]:
        problems.append(
            f"{source}: the baseline {campaign['baseline']!r} is also listed in tiers; the baseline arm and "
            "the A/A arm (aa_check) already run it"
        )
    names = [w["name"] for w in campaign["workloads"]]
    for name in sorted({n for n in names if names.count(n) > 1}):
        problems.append(f"{source}: workload name {name!r} is used twice")
    if problems:
        raise CampaignError(problems)
    campaign["not_runnable"] = [t for t in campaign["tiers"] if t not in runnable]
    campaign["tiers"] = [t for t in campaign["tiers"] if t in runnable]
    return campaign


def arms(campaign):
    """The arms in their order within a round: baseline, the tiers, then the A/A arm."""
    out = [{"arm": campaign["baseline"], "tier": campaign["baseline"], "role": ROLE_BASELINE}]
    out += [{"arm": tier, "tier": tier, "role": ROLE_TIER} for tier in campaign["tiers"]]
    if campaign["aa_check"]:
        out.append({"arm": campaign["baseline"] + AA_SUFFIX, "tier": campaign["baseline"], "role": ROLE_AA})
    return out


def _same_start(group, cell):
    """Whether ``cell`` runs on ``group``'s server: same arm and repeat, next in campaign order."""
    return (
        group is not None
        and group["arm"] == cell["arm"]
        and group["repeat"] == cell["repeat"]
        and group["cells"][-1]["index"] == cell["index"] - 1
    )


def arm_precision(records, metric="output_throughput", confidence=0.95):
    """The widest half-width, in percent, of the simultaneous ``confidence`` intervals of an arm's mean
    ``metric`` at each concurrency of ``records`` (the arm's successful cells of one workload), on the log
    scale (a t interval over the cells, Bonferroni over the concurrencies); None below two values at a
    concurrency (one value says nothing of the spread)."""
    points = sorted({c for record in records for c in concurrencies(record)})
    widest = None
    for concurrency in points:
        values = [v for v in finite_numbers([record_value(r, concurrency, metric) for r in records]) if v > 0]
        if len(values) < 2:
            return None
        logs = [math.log(v) for v in values]
        mean = sum(logs) / len(logs)
        spread = math.sqrt(sum((x - mean) ** 2 for x in logs) / (len(logs) - 1))
        alpha = (1.0 - confidence) / len(points)
        half = t_quantile(1.0 - alpha / 2.0, len(logs) - 1) * spread / math.sqrt(len(logs))
        width = math.expm1(min(half, 686.0)) * 100.0
        widest = width if widest is None else max(widest, width)
    return widest


def _precision_rounds(campaign, cells, records_by_id):
    """The arms' precision after their cells so far, and the cells of the next round for those short of it.

    Returns ``(status, new_cells)``: status is ``{arm: {"repeats", "widest_pct", "target_pct", "state"}}``
    (state: target_met, max_repeats, running - more cells to come - or arm_failed: a final failure
    leaves the arm as it is); new_cells the next repeat of every arm short of the target, all workloads,
    in that round's rotated order."""
    spec = campaign["precision"]
    every = arms(campaign)
    status, wanting = {}, []
    for arm in every:
        mine = [c for c in cells if c["arm"] == arm["arm"]]
        repeats = max(c["repeat"] for c in mine)
        entry = {"repeats": repeats, "widest_pct": None, "target_pct": spec["target_pct"]}
        if any(c["state"] == "pending" for c in mine):
            entry["state"] = PRECISION_RUNNING
        elif any(c.get("status") != "success" for c in mine):
            entry["state"] = PRECISION_FAILED
        else:
            widths = []
            for workload in {c["workload"] for c in mine}:
                records = [records_by_id[c["record_id"]] for c in mine if c["workload"] == workload]
                widths.append(arm_precision(records, spec["metric"], spec["confidence"]))
            entry["widest_pct"] = None if None in widths else round(max(widths), 3)
            if entry["widest_pct"] is not None and entry["widest_pct"] <= spec["target_pct"]:
                entry["state"] = PRECISION_MET
            elif repeats >= spec["max_repeats"]:
                entry["state"] = PRECISION_MAX
            else:
                entry["state"] = PRECISION_RUNNING
                wanting.append(arm)
        status[arm["arm"]] = entry
    new_cells = []
    if wanting:
        repeat = max(status[a["arm"]]["repeats"] for a in wanting) + 1
        shift = (repeat - 1) % len(every)
        order = [a for a in every[shift:] + every[:shift] if a in wanting]
        for arm in order:
            for workload in [w["name"] for w in campaign["workloads"]]:
                new_cells.append({**arm, "workload": workload, "repeat": status[arm["arm"]]["repeats"] + 1,
                                  "cell": cell_id(arm["arm"], workload, status[arm["arm"]]["repeats"] + 1)})
    return status, new_cells


def calibration_cell(campaign):
    """The fleet's calibration cell: the baseline with the first workload, once per host."""
    arm = campaign["baseline"] + CAL_SUFFIX
    workload = campaign["workloads"][0]["name"]
    return {
        "arm": arm,
        "tier": campaign["baseline"],
        "role": ROLE_CALIBRATION,
        "workload": workload,
        "repeat": 1,
        "cell": cell_id(arm, workload, 1),
        "index": 0,
    }


def cell_id(arm, workload, repeat):
    return f"{arm}/{workload}/r{repeat}"


def expand_cells(campaign):
    """Every cell, in run order. interleaved: repeat-major (round after round of every arm), each
    round starting one arm later than the one before (round 1 with the baseline, round 2 with the
    first tier, ...): with a fixed order the baseline always ran first in its round and took every
    round's first start, and the very first start of a fresh machine was always a baseline (4943
    against 7371-7977 tok/s on the H200). grouped: arm-major (every repeat of one arm, then the next)."""
    rounds = range(1, int(campaign["repeats"]) + 1)
    workloads = [w["name"] for w in campaign["workloads"]]
    every = arms(campaign)
    if campaign["order"] == "grouped":
        order = [(arm, r) for arm in every for r in rounds]
    else:
        shift = lambda r: (r - 1) % len(every)  # noqa: E731 - the rotation of round r
        order = [(arm, r) for r in rounds for arm in every[shift(r):] + every[:shift(r)]]
    cells = []
    for arm, repeat in order:
        for workload in workloads:
            cells.append({**arm, "workload": workload, "repeat": repeat, "cell": cell_id(arm["arm"], workload, repeat)})
    for index, cell in enumerate(cells, start=1):
        cell["index"] = index
    return cells


def _key_workload(cfg):
    """The resolved workload without what names a file rather than what it measures."""
    return {k: v for k, v in (cfg or {}).items() if k not in ("settings_file",)}


def cell_key(cell, launch, workload_cfg):
    """The content key of ``cell``; ``launch`` is {script_sha256, env, versions}."""
    return sha256_json(
        {
            "cell": [cell["arm"], cell["workload"], cell["repeat"]],
            "script_sha256": launch.get("script_sha256"),
            "env": launch.get("env") or {},
            "versions": launch.get("versions") or {},
            "workload": _key_workload(workload_cfg),
            "seed": (workload_cfg or {}).get("seed"),
        }
    )


def is_transient(failure_class):
    return failure_class in TRANSIENT_CLASSES


def failure_class(record):
    return ((record or {}).get("failure") or {}).get("class")


def is_final(record):
    """A record that ends its cell: a success, or a failure that would come back the same way."""
    if record.get("status") == "success":
        return True
    return not is_transient(failure_class(record))


def fingerprint_changes(old, new):
    """The fingerprint keys whose values differ, both known."""
    old, new = old or {}, new or {}
    known = [k for k in FINGERPRINT_KEYS if old.get(k) not in (None, "") and new.get(k) not in (None, "")]
    return [k for k in known if old[k] != new[k]]


def campaign_records(records, name, host):
    return [r for r in records if (r.get("campaign") or {}).get("name") == name and r.get("host") == host]


def _seconds(record):
    """A record's wall time from started_at to ended_at, or None."""
    from datetime import datetime

    try:
        start = datetime.fromisoformat(str(record["started_at"]).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(record["ended_at"]).replace("Z", "+00:00"))
    except (KeyError, TypeError, ValueError):
        return None
    return max(0.0, (end - start).total_seconds())


def plan(campaign, launches, workloads, records, host, fingerprint=None, slo_records=()):
    """What is left to run on ``host``.

    ``launches``: {tier: {script_sha256, env, versions}}; ``workloads``: {name: resolved cfg};
    ``records``: the host's ledger. Returns {cells, groups, counts, warnings, mean_cell_seconds}:
    every cell with its key and state (``done`` with the final record's id and status, or
    ``pending`` with the attempt it is), and the pending cells grouped into server starts.
    """
    mine = campaign_records(records, campaign["name"], host)
    latest = {}
    attempts = {}
    for record in mine:  # ledger order is append order: the last one per key wins
        key = record["campaign"].get("key")
        latest[key] = record
        attempts[key] = max(attempts.get(key, 0), int(record["campaign"].get("attempt") or 1))
    warnings = []
    cells = []
    calibrating = bool(campaign.get("calibration", {}).get("enabled"))
    for cell in ([calibration_cell(campaign)] if calibrating else []) + expand_cells(campaign):
        cell = dict(cell)
        cell["key"] = cell_key(cell, launches[cell["tier"]], workloads[cell["workload"]])
        record = latest.get(cell["key"])
        if record is not None and is_final(record):
            changed = fingerprint_changes(record["campaign"].get("fingerprint"), fingerprint)
            if changed:
                old = record["campaign"]["fingerprint"]
                what = ", ".join(f"{k}: {old[k]} -> {fingerprint[k]}" for k in changed)
                warnings.append(
                    f"cell {cell['cell']}: its final record {record['record_id']} has the same key, but the node "
                    f"changed since ({what}); it is kept, not re-run. Start a campaign under a new name to "
                    "measure again."
                )
            cell.update(
                state="done",
                record_id=record["record_id"],
                status=record["status"],
                failure_class=failure_class(record),
            )
        else:
            previous = failure_class(record) if record is not None else None
            cell.update(state="pending", attempt=attempts.get(cell["key"], 0) + 1, previous_failure=previous)
        cells.append(cell)
    precision = None
    if campaign.get("precision"):
        by_id = {r["record_id"]: r for r in mine}
        # Extra rounds already run (by an earlier run of this command) are cells like the planned ones.
        while True:
            precision, extra = _precision_rounds(
                campaign, [c for c in cells if c["role"] != ROLE_CALIBRATION], by_id)
            if not extra:
                break
            for cell in extra:
                cell["index"] = len(cells) + 1
                cell["key"] = cell_key(cell, launches[cell["tier"]], workloads[cell["workload"]])
                record = latest.get(cell["key"])
                if record is not None and is_final(record):
                    cell.update(state="done", record_id=record["record_id"], status=record["status"],
                                failure_class=failure_class(record))
                else:
                    previous = failure_class(record) if record is not None else None
                    cell.update(state="pending", attempt=attempts.get(cell["key"], 0) + 1,
                                previous_failure=previous)
                cells.append(cell)
            if any(c["state"] == "pending" for c in extra):
                precision, _ = _precision_rounds(campaign, [c for c in cells if c["role"] != ROLE_CALIBRATION],
                                                 by_id)
                break
    calibration = None
    if calibrating:
        cal = cells[0]
        calibration = {
            "cell": cal,
            "record": latest.get(cal["key"]) if cal["state"] == "done" else None,
            "group": None
            if cal["state"] == "done"
            else {k: cal[k] for k in ("arm", "tier", "role", "repeat")}
            | {"cells": [cal], "group": 0, "name": f"{cal['arm']} r1"},
        }
    pending = [c for c in cells if c["state"] == "pending" and c["role"] != ROLE_CALIBRATION]
    groups = []
    for cell in pending:
        if _same_start(groups[-1] if groups else None, cell):
            groups[-1]["cells"].append(cell)
        else:
            groups.append({k: cell[k] for k in ("arm", "tier", "role", "repeat")} | {"cells": [cell]})
    for number, group in enumerate(groups, start=1):
        group["group"] = number
        group["name"] = f"{group['arm']} r{group['repeat']}"
    durations = [s for s in (_seconds(r) for r in mine) if s is not None]
    pending_all = [c for c in cells if c["state"] == "pending"]
    done = [c for c in cells if c["state"] == "done"]
    counts = {
        "total": len(cells),
        "done": len(done),
        "failed": sum(1 for c in done if c["status"] != "success"),
        "pending": len(pending_all),
        "retrying": sum(1 for c in pending_all if c["previous_failure"]),
        "starts": len(groups),
    }
    return {
        "cells": cells,
        "groups": groups,
        "calibration": calibration,
        "slo_search": slo_plan(campaign, launches, workloads, list(slo_records), host),
        "precision": precision,
        "counts": counts,
        "warnings": warnings,
        "mean_cell_seconds": round(sum(durations) / len(durations), 1) if durations else None,
    }


def slo_plan(campaign, launches, workloads, slo_records, host):
    """The campaign's SLO search on ``host``: its key (the tier's launch, the targets, the range,
    the first workload) and whether a line of ``slo_records`` (the host's slo_search.jsonl) with
    that key is already there; None when the campaign has no slo_search."""
    search = campaign.get("slo_search")
    if not search:
        return None
    tier = search["tier"]
    workload = campaign["workloads"][0]["name"]
    launch = launches[tier]
    key = sha256_json(
        {
            "slo": campaign.get("slo"),
            "search": search,
            "script_sha256": launch.get("script_sha256"),
            "env": launch.get("env") or {},
            "versions": launch.get("versions") or {},
            "workload": _key_workload(workloads[workload]),
        }
    )
    done = [
        r
        for r in slo_records
        if r.get("host") == host
        and (r.get("campaign") or {}).get("name") == campaign["name"]
        and (r.get("campaign") or {}).get("key") == key
        and r.get("status") == "success"
    ]
    return {
        "tier": tier,
        "workload": workload,
        "key": key,
        "done": bool(done),
        "record_id": done[-1]["record_id"] if done else None,
        "campaign": {
            "name": campaign["name"],
            "file_sha256": campaign.get("file_sha256"),
            "tier": tier,
            "key": key,
            "role": "slo_search",
            "workload": workload,
        },
    }


def cell_record(campaign, cell, attempt, fingerprint):
    """The ``campaign`` value of a cell's ledger record."""
    return {
        "name": campaign["name"],
        "file_sha256": campaign.get("file_sha256"),
        "cell": cell["cell"],
        "key": cell["key"],
        "arm": cell["arm"],
        "role": cell["role"],
        "tier": cell["tier"],
        "workload": cell["workload"],
        "repeat": cell["repeat"],
        "attempt": int(attempt),
        "fingerprint": dict(fingerprint or {}),
        **({"precision": dict(campaign["precision"])} if campaign.get("precision") else {}),
        **({"quality_rule": dict(campaign["quality"]["rule"])}
           if (campaign.get("quality") or {}).get("rule") else {}),
    }


def over_budget(started_epoch, budget_minutes, now=None):
    """Whether a new cell may no longer start."""
    if not budget_minutes:
        return False
    now = time.time() if now is None else now
    return (now - float(started_epoch)) > float(budget_minutes) * 60.0


def format_duration(seconds):
    if seconds is None:
        return "?"
    seconds = int(round(seconds))
    minutes, sec = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m" if hours else (f"{minutes}m{sec:02d}s" if minutes else f"{sec}s")


def progress_line(name, host, done, failed, left, cell_seconds, last=None):
    """One line of progress: cells done, failed and left, and the ETA from the measured cell times."""
    mean = sum(cell_seconds) / len(cell_seconds) if cell_seconds else None
    eta = mean * left if mean is not None else None
    tail = f" - last: {last}" if last else ""
    return (
        f"campaign {name} on {host}: {done} done ({failed} failed), {left} left, "
        f"ETA {format_duration(eta) if left else '0s'}"
        f"{f' ({format_duration(mean)}/cell measured)' if mean is not None else ''}{tail}"
    )


def outcome(record_result, expected, attempt_number, retry_transient):
    """What a cell's record means for its group: {recorded, ok, final, retry, class}.

    ``record_result`` is module sglang_ledger_append's last result (or None when the record step
    never ran); ``expected`` is the ``campaign`` value this try of the cell records
    (``cell_record``): a record of another cell, key or attempt - an earlier one left in the
    result when this try's record step failed - counts as none. ``attempt_number`` is the
    group's try (1-based) in this run. A cell that could not be recorded stays pending (not
    final) and asks for no retry: the next run tries it again.
    """
    record = (record_result or {}).get("record") or {}
    mine = record.get("campaign") or {}
    if any(mine.get(k) != expected.get(k) for k in ("cell", "key", "attempt")):
        return {"recorded": False, "ok": False, "final": False, "retry": False, "class": None}
    ok = record.get("status") == "success"
    klass = failure_class(record)
    transient = not ok and is_transient(klass)
    return {
        "recorded": True,
        "ok": ok,
        "final": not transient,
        "retry": transient and int(attempt_number) <= int(retry_transient),
        "class": klass,
    }


def summary(planned):
    """The plan in a few lines, for the person starting the campaign."""
    counts = planned["counts"]
    lines = [
        f"{counts['total']} cells: {counts['done']} already final in the ledger ({counts['failed']} of them failed), "
        f"{counts['pending']} to run on {counts['starts']} server start(s)"
        + (f", {counts['retrying']} of them after a transient failure" if counts["retrying"] else "")
    ]
    if planned.get("mean_cell_seconds"):
        eta = planned["mean_cell_seconds"] * counts["pending"]
        lines.append(f"estimated {format_duration(eta)} at {planned['mean_cell_seconds']} s per earlier cell")
    for group in planned["groups"]:
        lines.append(f"start {group['group']}: {group['name']} - " + ", ".join(c["cell"] for c in group["cells"]))
    if planned.get("calibration"):
        cal = planned["calibration"]
        lines.append(
            f"calibration: {cal['cell']['cell']} "
            + ("already in the ledger" if cal["group"] is None else "to run first")
        )
    if planned.get("slo_search"):
        slo = planned["slo_search"]
        lines.append(f"SLO search for {slo['tier']}: " + ("already done" if slo["done"] else "after the cells"))
    lines += [f"WARNING: {w}" for w in planned.get("warnings") or []]
    return lines


def _point_values(record, metric=CALIBRATION_METRIC):
    """{load (sglang_compare.load_key: "16" for a concurrency, "0.5 req/s" for a request-rate
    sweep's rate): median of the ok points' metric} of one record; points keyed by
    sglang_compare.point_load, as the comparison keys them."""
    by_load = {}
    for point in (record or {}).get("points") or []:
        value, load = point.get(metric), point_load(point)
        if point.get("status") == "ok" and isinstance(value, (int, float)) and load is not None:
            by_load.setdefault(load_key(load), []).append(float(value))
    return {k: _median(v) for k, v in by_load.items()}


def _median(values):
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def throttling(telemetry, min_sm_clock_ratio, max_temperature_c):
    """Signs of throttling in a gpu_telemetry summary ({gpu index: stats}): a mean SM clock under
    load below ``min_sm_clock_ratio`` of the GPU's own peak, or a temperature at or above
    ``max_temperature_c``."""
    signs = []
    for index, stats in sorted((telemetry or {}).items()):
        mean, peak = stats.get("sm_clock_mhz_mean"), stats.get("sm_clock_mhz_max")
        if mean and peak and mean / peak < min_sm_clock_ratio:
            signs.append(
                f"GPU {index}: mean SM clock {mean:.0f} MHz is {100 * mean / peak:.0f}% of its peak {peak:.0f} MHz"
            )
        hot = stats.get("temperature_c_max")
        if hot is not None and hot >= max_temperature_c:
            signs.append(f"GPU {index}: {hot:.0f} C, at or above {max_temperature_c:.0f} C")
    return signs


def calibrate(campaign, results):
    """The fleet's calibration: ``results`` maps each host to {record, telemetry, telemetry_error}
    (its calibration cell's ledger record, and the gpu_telemetry summary taken while it ran, or
    why there is none). A host is flagged when its cell failed, when its median deviation from the
    fleet's median (per load - concurrency, or a request-rate sweep's rate - over the hosts whose
    cell succeeded) exceeds
    max_deviation_pct, or when its GPUs show throttling. Flagged hosts are excluded when
    exclude_flagged. Returns the calibration document the report reads."""
    cfg = {**CALIBRATION_DEFAULTS, **(campaign.get("calibration") or {})}
    values = {}
    for host, result in results.items():
        record = (result or {}).get("record")
        if record and record.get("status") == "success":
            values[host] = _point_values(record)
    fleet = {}
    for c in sorted({c for v in values.values() for c in v}, key=parse_load_key):
        present = [v[c] for v in values.values() if c in v]
        fleet[c] = _median(present)
    hosts = {}
    for host, result in sorted(results.items()):
        result = result or {}
        record = result.get("record")
        reasons = []
        deviation = None
        if not record:
            reasons.append("no calibration record (the cell did not run)")
        elif record.get("status") != "success":
            reasons.append(f"the calibration cell failed: {failure_class(record)}")
        else:
            devs = [100.0 * (values[host][c] / fleet[c] - 1.0) for c in values[host] if fleet.get(c)]
            deviation = round(_median(devs), 2) if devs else None
            if len(values) >= 2 and deviation is not None and abs(deviation) > cfg["max_deviation_pct"]:
                reasons.append(
                    f"{CALIBRATION_METRIC} is {deviation:+.1f}% from the fleet's median "
                    f"(limit ±{cfg['max_deviation_pct']}%)"
                )
        signs = throttling(result.get("telemetry"), cfg["min_sm_clock_ratio"], cfg["max_temperature_c"])
        reasons += signs
        telemetry = "ok" if result.get("telemetry") else (result.get("telemetry_error") or "no GPU telemetry")
        flagged = bool(reasons)
        hosts[host] = {
            "values": values.get(host, {}),
            "deviation_pct": deviation,
            "throttling": signs,
            "telemetry": telemetry,
            "flagged": flagged,
            "reasons": reasons,
            "excluded": flagged and bool(cfg["exclude_flagged"]),
        }
    return {
        "campaign": campaign["name"],
        "metric": CALIBRATION_METRIC,
        "max_deviation_pct": cfg["max_deviation_pct"],
        "fleet_median": fleet,
        "single_host": len(results) < 2,
        "hosts": hosts,
    }
