#!/usr/bin/env python3
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the report of one campaign from ledgers.

    python tools/campaign_report.py --ledger results/node-a/ledger.jsonl [--ledger ...]
        --campaign NAME --out-dir results [--calibration results/calibration-NAME.json]
        [--slo results/node-a/slo.jsonl ...] [--tier-docs docs/tiers] [--tiers data/tiers.yml] [--check]
    python tools/campaign_report.py --results-dir results [--campaign NAME] [--check]

Reads the records of campaign NAME (the ``campaign`` key of each cell's record)
from every ledger given (a missing one is a warning and a line in the report;
all missing is an error), takes the latest final record of every (host, cell)
(a cell with only transient failures is listed as pending, not as a crash),
and writes into DIR:

* ``campaign-<NAME>.md``: the tier status table; the output quality per host and
  arm with the campaign's quality rule (docs/quality.md); each host's noise floor (the
  A/A verdict and widest interval, one table); with ``--calibration`` (the
  JSON the campaign playbook writes) and any calibration records of the
  ledgers, the node calibration; per host the A/A noise floor, every tier's
  verdict per point with the difference (ratio of geometric means) and its
  simultaneous interval, the medians of the repeats with their bootstrap
  intervals, TTFT and TPOT percentiles, warm-up seconds, and the failed and
  excluded cells; with ``--slo`` (repeatable; JSON lines, one SLO search
  each), the SLO search answers and probes per host;
* ``campaign-<NAME>.png``: per host and workload, output tok/s against
  concurrency (medians with interval error bars), the difference against the
  baseline with its interval (the A/A arm is the noise floor), output tok/s
  against per-user output tok/s (1000 / mean TPOT), TTFT and TPOT percentiles
  and the warm-up seconds;
* ``campaign-<NAME>.html``: the same analysis as one self-contained page (tools/campaign_html.py:
  plotly, inlined): throughput per GPU against per-user tok/s with the Pareto frontier, the
  verdicts and noise floor, the latency percentiles with their sample sizes, the failures with
  their remedy and every number's provenance.

``--results-dir DIR`` instead of ``--ledger``: every ``DIR/<host>/ledger.jsonl``, and a report of
each campaign found in them (only ``--campaign``'s when given) from the ledgers that hold its
records, with ``DIR/calibration-<NAME>.json`` and ``DIR/<host>/slo_search.jsonl`` where they exist
(``make report`` runs this).

With ``--tier-docs DIR`` it also writes each campaign tier's verdict into the
status block of ``DIR/<tier>.md`` (the markers tools/render_tier_docs.py
writes, replaced by tools/report.py's replace_status; tools/report.py writes
the same block, the last one run wins). With ``--check`` nothing is written: it
prints ``out of date: <path>`` for every file that would change and exits 1
when there is one.

Any record from the simulator labels the title, every table and the PNG
SYNTHETIC (and the HTML page's banner and charts). A missing or empty ``--calibration`` or ``--slo`` file is a warning
line in the report (and on stderr), not a failure. Files are rewritten only
when their content changes, each printed as ``changed: <path>``. The statistics live in
plugins/module_utils/sglang_stats.py; the method is docs/campaign-statistics.md.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugins" / "module_utils"))

# tools/report.py sits beside this file (its folder is on sys.path): its inputs, formatting and the
# tier page's status-block replacement are reused, not copied.
import report  # noqa: E402
import sglang_quality  # noqa: E402
import sglang_stats as stats  # noqa: E402
from sglang_ledger import parse_ledger_text, read_ledger  # noqa: E402

CAMPAIGN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SYNTHETIC = "SYNTHETIC"
METRIC_LABELS = {
    "output_throughput": "output tok/s",
    "total_throughput": "total tok/s",
    "mean_tpot_ms": "mean TPOT ms",
    "median_ttft_ms": "TTFT p50 ms",
    "p99_ttft_ms": "TTFT p99 ms",
    "median_tpot_ms": "TPOT p50 ms",
    "p99_tpot_ms": "TPOT p99 ms",
    stats.PER_USER: "per-user tok/s",
    "goodput_request_share": "goodput requests",
    "goodput_token_share": "goodput output tokens",
}
VERDICT_TEXT = {
    stats.BETTER: "better",
    stats.WORSE: "**worse**",
    stats.INDISTINGUISHABLE: "indistinguishable",
    stats.NO_VERDICT: "no verdict",
    stats.NO_DATA: "n/a",
}
WIDE_NOTE = (
    f"With {stats.WIDE_N} repeats on a side, Welch's df is between 1 and 2 and the t quantile is large: these "
    "intervals are wide. They are calibrated (same-distribution data gives a false verdict in about 2% of "
    "arms at 2 repeats, docs/campaign-statistics.md), so only large changes get a verdict; 3 or more repeats "
    "narrow them a lot. An end beyond +1000% is written as the ratio (×N)."
)
# The difference panel's y-axis reaches at least ±this; wider intervals are cut (see build_png).
DIFF_AXIS_CAP_PCT = 60.0
PER_USER_RULE = (
    "per-user output tok/s = 1000 / mean TPOT (ms) of each cell: the decode rate one user sees, "
    "TTFT excluded (not output tok/s ÷ concurrency, which mixes in TTFT, ramp-up and drain)"
)


# ---------------------------------------------------------------- inputs


def load_records(paths: list[Path]) -> tuple[list[dict], list[str]]:
    """The records of every ledger, in the order given and ledger order within each."""
    records: list[dict] = []
    problems: list[str] = []
    for path in paths:
        found, bad = read_ledger(str(path))
        problems += [f"{path}:{item['line']}: {item['error']} (line skipped)" for item in bad]
        for record in found:
            record.setdefault("host", path.parent.name)
            records.append(record)
    return records, problems


def load_calibration(path: Path, campaign: str) -> dict:
    """``{"path", "view", "warnings"}`` for --calibration: the file's calibration_view, or None with
    a warning when the file is missing, empty or not JSON."""
    found = {"path": str(path), "view": None, "warnings": []}
    if not path.is_file():
        found["warnings"].append(f"no calibration file at {path}: the node calibration is not shown")
        return found
    text = path.read_text(encoding="utf-8", errors="replace")
    if not text.strip():
        found["warnings"].append(f"the calibration file {path} is empty")
        return found
    try:
        data = json.loads(text)
    except ValueError as exc:
        found["warnings"].append(f"the calibration file {path} is not JSON ({exc})")
        return found
    found["view"] = stats.calibration_view(data, campaign)
    return found


def load_slo(paths: list[Path]) -> dict:
    """``{"searches", "warnings"}`` for --slo: every SLO search line of the files (stats.slo_view; a
    line without a host takes the file's folder name, results/<host>/slo.jsonl); a missing or
    empty file, a torn line or a line that is not a search is a warning."""
    found: dict = {"searches": [], "warnings": []}
    for path in paths:
        if not path.is_file():
            found["warnings"].append(f"no SLO search file at {path}")
            continue
        lines, bad = parse_ledger_text(path.read_text(encoding="utf-8", errors="replace"))
        found["warnings"] += [f"{path}:{item['line']}: {item['error']} (line skipped)" for item in bad]
        views = [stats.slo_view(line, default_host=path.parent.name) for line in lines]
        if len(views) > len([v for v in views if v]):
            found["warnings"].append(f"{path}: {views.count(None)} line(s) are not SLO searches (skipped)")
        if not lines and not bad:
            found["warnings"].append(f"the SLO search file {path} is empty")
        found["searches"] += [v for v in views if v]
    found["searches"].sort(key=lambda v: (v["host"], str(v["started_at"] or "")))
    return found


def tier_catalog(path: Path | None) -> tuple[dict, list[str]]:
    """data/tiers.yml's tiers as {id: spec} and their ids in catalog order; empty when absent."""
    entries = report.load_tiers(path)
    return {e["id"]: e for e in entries}, [e["id"] for e in entries]


# ---------------------------------------------------------------- formatting


def fmt_num(value: float | None, digits: int = 2) -> str:
    return report.fmt_num(value, digits)


def fmt_pct(value: float | None) -> str:
    """``+12.0%``; from +1000% on the ratio instead (``×2.7e+14``), which stays readable where a
    2-repeat interval with df near 1 reaches astronomical upper ends."""
    if value is None:
        return "—"
    return f"×{1 + value / 100:.3g}" if value >= 1000.0 else f"{value:+.1f}%"


def fmt_summary(summary: dict | None, digits: int = 2) -> str:
    """``median [ci_low–ci_high] n=N``; ``median (n=1)`` without an interval; ``n/a (n=16)`` for a percentile
    withheld for its sample size (requests per cell); — without a value."""
    if summary and summary["median"] is None and summary.get("withheld"):
        return f"n/a (n={summary['withheld']['n']})"
    if not summary or summary["median"] is None:
        return "—"
    text = fmt_num(summary["median"], digits)
    if summary["ci_low"] is None:
        return f"{text} (n={summary['n']})"
    return f"{text} [{fmt_num(summary['ci_low'], digits)}–{fmt_num(summary['ci_high'], digits)}] n={summary['n']}"


def fmt_difference(result: dict | None) -> str:
    """``+12.0% [+10.1%, +13.9%]``, or the difference with the reason there is no interval."""
    if not result:
        return "—"
    if result["delta_pct"] is None:
        return f"— ({result['reason']})" if result.get("reason") else "—"
    text = fmt_pct(result["delta_pct"])
    if result["ci_low_pct"] is None:
        return f"{text} ({result['reason']})" if result.get("reason") else text
    return f"{text} [{fmt_pct(result['ci_low_pct'])}, {fmt_pct(result['ci_high_pct'])}]"


def fmt_verdict(result: dict | None) -> str:
    """The verdict's word."""
    if not result:
        return "—"
    return VERDICT_TEXT.get(result["verdict"], result["verdict"])


def fmt_confidence(value: float) -> str:
    """0.95 -> ``95%``, 1 - 0.05 / 9 -> ``99.44%``."""
    return f"{value * 100:.4g}%"


def fmt_family(family: dict | None) -> str:
    """``simultaneous 95% intervals over the 6 comparisons of this arm (each at 99.17%)``."""
    if not family or not family["size"]:
        return "no comparison of this arm has an interval"
    if family["size"] == 1:
        return f"one comparison with an interval, at {fmt_confidence(family['confidence'])}"
    return (
        f"simultaneous {fmt_confidence(family['confidence'])} intervals over the {family['size']} comparisons "
        f"of this arm (each at {fmt_confidence(family['comparison_confidence'])})"
    )


def wide(results: list[dict]) -> bool:
    """True when a comparison with an interval has at most WIDE_N repeats on a side (WIDE_NOTE)."""
    return any(r["ci_low_pct"] is not None and min(r["n_candidate"], r["n_baseline"]) <= stats.WIDE_N for r in results)


def fmt_floor_verdict(floor: dict) -> str:
    if floor["holds"] is True:
        return f"holds: all {floor['decided']} decided comparisons indistinguishable"
    if floor["holds"] is False:
        where = ", ".join(
            f"{METRIC_LABELS[o['metric']]} at {stats.load_label(o['concurrency'])} {o['verdict']}"
            for o in floor["outside"]
        )
        return f"**FAILS**: a verdict where there must be none ({where})"
    return "undecided (fewer than two repeats on a side)"


def fmt_widest(floor: dict) -> str:
    """The A/A arm's widest interval and where: ``[-4.1%, +4.3%] (output tok/s at c=16)``."""
    widest = floor.get("widest")
    if not widest:
        return "not available"
    return (
        f"[{fmt_pct(widest['ci_low_pct'])}, {fmt_pct(widest['ci_high_pct'])}] "
        f"({METRIC_LABELS[widest['metric']]} at {stats.load_label(widest['concurrency'])})"
    )


def fmt_status(state: dict) -> str:
    """One status-table cell."""
    status = state["status"]
    if status == stats.STATUS_CRASHED:
        classes = ", ".join(f"`{c}`" for c in sorted(state["failure_classes"]))
        return f"crashed ({classes} in {state['failed_cells']} of {state['cells']} cells)"
    if status == stats.STATUS_TESTED:
        return f"tested, no verdict ({state['reason']})"
    if status == stats.STATUS_BASELINE:
        return "baseline (reference)"
    if status == stats.STATUS_NOT_RUNNABLE:
        return "not runnable"
    if status == stats.STATUS_NOT_IN_CAMPAIGN:
        return "not in campaign"
    if status == stats.STATUS_QUALITY_REGRESSED:
        speed = fmt_status({**state, "status": state["speed_status"]})
        reason = state["quality"].removeprefix(f"{stats.STATUS_QUALITY_REGRESSED} (").removesuffix(")")
        return f"**{stats.STATUS_QUALITY_REGRESSED}** ({reason}; speed: {speed})"
    counts = state["verdicts"]
    detail = ", ".join(
        f"{counts[v]} {v}" for v in (stats.BETTER, stats.WORSE, stats.INDISTINGUISHABLE) if counts.get(v)
    )
    return f"{'**worse**' if status == stats.WORSE else status} ({detail} of {sum(counts.values())})"


def table(header: list[str], rows: list[list[str]], synthetic: bool, align: str | None = None) -> list[str]:
    """A markdown table; its first header cell says SYNTHETIC when the numbers are."""
    header = list(header)
    if synthetic:
        header[0] = f"{header[0]} ({SYNTHETIC})"
    lines = ["| " + " | ".join(header) + " |", "|" + (align or "---|" * len(header))]
    lines += ["| " + " | ".join(report.md_escape(c) for c in row) + " |" for row in rows]
    return lines


def arm_order(names: list[str], analysis_arms: dict, order: list[str]) -> list[str]:
    """Baseline arm, A/A arm, then tiers in catalog order, then the rest by name."""
    rank = {stats.ROLE_BASELINE: 0, stats.ROLE_AA: 1, stats.ROLE_TIER: 2, None: 3}

    def key(name):
        arm = analysis_arms.get(name) or {}
        tier = arm.get("tier") or name
        return (rank.get(arm.get("role"), 3), order.index(tier) if tier in order else len(order), name)

    return sorted(names, key=key)


# ---------------------------------------------------------------- markdown


def build_markdown(
    analysis: dict,
    order: list[str],
    problems: list[str],
    png_name: str,
    calibration: dict | None = None,
    slo: dict | None = None,
) -> str:
    """The report. ``calibration``: ``{"path", "view": calibration_view or None, "warnings"}`` when
    --calibration was given; ``slo``: ``{"searches": [slo_view], "warnings"}`` when --slo was."""
    synthetic = analysis["synthetic"]
    name = analysis["campaign"]
    method = analysis["method"]
    confidence = f"{method['confidence'] * 100:g}%"
    title = f"# Campaign `{name}`" + (" — SYNTHETIC (simulator)" if synthetic else "")
    out = [title, ""]
    if synthetic:
        out += [report.SYNTHETIC_BANNER, ""]
    hosts = analysis["hosts"]
    counts = analysis["counts"]
    if not hosts:
        out += [f"No cell of campaign `{name}` found in the ledgers given.", ""]
        out += calibration_section(analysis, calibration)
        out += slo_section(slo)
        return "\n".join(out)
    newest = max(
        (
            cell["recorded_at"] or ""
            for host in hosts.values()
            for workload in host["workloads"].values()
            for arm in workload["arms"].values()
            for cell in arm["cells"]
        ),
        default="",
    )
    out += [
        f"{counts['cells']} cell(s) on {len(hosts)} host(s): the latest final record of each "
        f"({counts['superseded']} earlier final record(s) superseded, {counts['not_final']} transient failure(s), "
        f"{counts['other_campaign']} record(s) of other campaigns and {counts['without_campaign']} without a "
        f"campaign left out); newest record {newest}.",
        "",
        f"Method: a cell's value is the median of its ok points at a concurrency (at a rate for a request-rate "
        f"sweep); an arm's value is the "
        f"median over its repeats with a {confidence} percentile-bootstrap interval "
        f"({method['resamples']} resamples, seed {method['seed']}; descriptive: the error bars). Every arm is "
        "compared with the baseline arm of the same host and workload only, on the logarithms of the repeats: "
        "difference = ratio of geometric means, exp(mean log arm − mean log baseline) − 1, with Welch's t "
        "interval on the log values (Welch–Satterthwaite df) transformed back the same way. The comparisons "
        f"of one arm on one host and workload (every point and metric) are one family: its intervals are "
        f"simultaneous {confidence} intervals over its m comparisons (Bonferroni: each at 1 − "
        f"{1 - method['confidence']:g}/m), so a false verdict anywhere in the arm has a chance of at most "
        f"{1 - method['confidence']:g}. Verdict: better / worse when the whole interval lies on one side of 0 "
        "(TPOT: lower is better), indistinguishable when it contains 0, no verdict with one repeat. The A/A "
        "arm runs the baseline tier again as its own arm: it must be indistinguishable, and its interval is the "
        "host's noise floor. With 2 repeats the intervals are wide: only large changes get a verdict "
        "(docs/campaign-statistics.md).",
        "",
        f"![campaign {name}]({png_name})",
        "",
    ]
    out += status_section(analysis, order)
    out += quality_section(analysis, order)
    out += noise_floor_section(analysis)
    out += calibration_section(analysis, calibration)
    if analysis["pending"]:
        out += [
            "## Pending cells",
            "",
            "Their only records failed with a transient class (not final: the next run of the campaign tries "
            "them again); they count nowhere above.",
            "",
        ]
        rows = [[p["host"], p["cell"], str(p["attempt"]), f"`{p['failure_class']}`"] for p in analysis["pending"]]
        out += table(["Host", "Cell", "Attempt", "Class"], rows, synthetic)
        out.append("")
    excluded = {h["host"]: h for h in ((calibration or {}).get("view") or {}).get("hosts", []) if h["excluded"]}
    for host, data in hosts.items():
        label = " — SYNTHETIC (simulator)" if data["synthetic"] else ""
        out += [f"## Host {host}{label}", ""]
        if host in excluded:
            reasons = "; ".join(excluded[host]["reasons"]) or "no reason given"
            out += [f"**The node calibration excluded this host** ({report.md_escape(reasons)}).", ""]
        out += first_start_lines(data.get("first_start"))
        for workload, part in data["workloads"].items():
            out += workload_sections(host, workload, part, data["synthetic"] or synthetic, order, method)
    out += slo_section(slo)
    everything = problems + analysis["problems"]
    if everything:
        out += ["## Problems", ""] + [f"- {report.md_escape(p)}" for p in everything] + [""]
    return "\n".join(out)


def first_start_lines(first: dict | None) -> list[str]:
    """The host's first server start of the campaign (sglang_stats.first_start): taken by the
    calibration cell, or flagged on the cell that carries it."""
    if not first:
        return []
    if first["taken_by"]:
        return [f"First start on this host (a cold node): taken by the {first['taken_by']} cell, before "
                f"cell `{report.md_escape(first['cell'])}`.", ""]
    return [f"**First start on this host (a cold node): cell `{report.md_escape(first['cell'])}`** (arm "
            f"{report.md_escape(first['arm'])}). A cold node's first start is often an outlier (on the H200, "
            "4943 against 7371-7977 output tok/s); the cell is kept in its arm. Enable the campaign's "
            "`calibration` so that a calibration cell takes that start.", ""]


STATUS_RULE = (
    "Per host, over every point and workload: crashed when any of its latest cells failed (with the "
    "class); better / worse when some (point, metric) has that verdict and none the other; mixed when "
    "both; indistinguishable when every decided comparison is; tested when none could be decided. "
    "quality_regressed, whatever the speed, when the campaign's quality rule flags the tier (Output quality, "
    "below)."
)
QUALITY_RULE = (
    "Each cell's greedy outputs of the prompt set (docs/quality.md), held against every baseline cell's of "
    "the same host, over every workload: the arm's token agreement is the mean over those pairs (the lowest "
    "in brackets). The A/A floor is the lowest agreement of the A/A arm's pairs: the least the baseline "
    "agreed with itself in this campaign."
)


def quality_rows(analysis: dict, order: list[str]) -> tuple[list[str], list[list[str]]]:
    """The output-quality table (header, rows): per host and arm, the records with outputs, the token
    agreement with the baseline and the verdict (sglang_stats.host_quality). Shared by the markdown and
    the HTML page."""
    rows = []
    for host, data in analysis["hosts"].items():
        arms = data["quality"]["arms"]
        for name in arm_order(list(arms), data["status"], order):
            entry = arms[name]
            agreement = (
                f"{quality_percent(entry['token_agreement'])} (lowest {quality_percent(entry['min_token_agreement'])})"
                if entry["token_agreement"] is not None else "—"
            )
            identical = f"{entry['identical_share'] * 100:.0f} %" if entry["identical_share"] is not None else "—"
            verdict = entry["verdict"]
            if entry["regressed"]:
                verdict = f"**{verdict}**"
            rows.append([host, f"`{name}`", f"{entry['with_outputs']} / {entry['records']}", str(entry["pairs"]),
                         agreement, identical, verdict])
    header = ["Host", "Arm", "Records with outputs", "Pairs", "Token agreement with the baseline",
              "Identical prompts", "Quality verdict"]
    return header, rows


def quality_percent(share: float | None) -> str:
    return sglang_quality.percent(share) if share is not None else "—"


def quality_rule_line(host: str, quality: dict) -> str:
    floor = quality["floor"]
    floor_text = (
        f"A/A floor {quality_percent(floor['token_agreement'])} ({floor['pairs']} pair(s) of "
        f"{', '.join(floor['arms'])})" if floor else f"{sglang_quality.NO_AA_FLOOR} (no A/A arm with outputs)"
    )
    rule = quality["rule"]
    if rule:
        margin = rule[sglang_quality.RULE_MARGIN]
        return (f"{host}: {floor_text}. Rule (campaign file `quality.rule`): a tier arm whose agreement is below "
                f"the A/A floor minus {quality_percent(margin)} is **{stats.STATUS_QUALITY_REGRESSED}**, whatever "
                "its speed" + ("." if floor else f"; with {sglang_quality.NO_AA_FLOOR} it decides nothing."))
    return f"{host}: {floor_text}. No rule: the campaign file sets no `quality.rule`, so no tier is flagged."


def quality_section(analysis: dict, order: list[str]) -> list[str]:
    """Per host and arm, the output quality of the campaign's cells and the campaign's rule."""
    header, rows = quality_rows(analysis, order)
    out = ["## Output quality", "", QUALITY_RULE, ""]
    out += [f"- {report.md_escape(quality_rule_line(h, d['quality']))}" for h, d in analysis["hosts"].items()]
    out += [""] + table(header, rows, analysis["synthetic"])
    return out + [""]
NOISE_FLOOR_RULE = (
    "The A/A arm (the baseline tier again, as its own arm) against the baseline, per host and workload. It "
    "must be indistinguishable everywhere; a verdict means that host's intervals understate its noise, "
    "and its tier verdicts are unconfirmed. The widest interval is about the smallest change that host "
    "can show everywhere with this many repeats (an end beyond +1000% is written as the ratio, ×N)."
)


def status_rows(analysis: dict, order: list[str]) -> tuple[list[str], list[list[str]]]:
    """The tier status table (header, rows): one row per arm or catalog tier, one column per host.
    Shared by the markdown and the HTML page."""
    hosts = analysis["hosts"]
    names: set[str] = set()
    arms: dict[str, dict] = {}
    for data in hosts.values():
        for arm_name, state in data["status"].items():
            names.add(arm_name)
            arms.setdefault(arm_name, state)
    rows = []
    for arm_name in arm_order(sorted(names), arms, order):
        cells = [arm_name]
        for data in hosts.values():
            state = data["status"].get(arm_name)
            cells.append(fmt_status(state) if state else "not on this host")
        rows.append(cells)
    return ["Arm / tier", *hosts], rows


def status_section(analysis: dict, order: list[str]) -> list[str]:
    hosts = analysis["hosts"]
    header, rows = status_rows(analysis, order)
    out = ["## Tier status", "", STATUS_RULE, ""]
    out += table(header, rows, analysis["synthetic"])
    failing = [h for h, d in hosts.items() if d["aa_holds"] is False]
    if failing:
        out += [
            "",
            f"**The A/A arm has a verdict on {', '.join(failing)}**: the intervals there understate the "
            "noise, so read that host's verdicts as unconfirmed.",
        ]
    return out + [""]


def noise_floor_rows(analysis: dict) -> tuple[list[str], list[list[str]]]:
    """Each host's noise floor (header, rows): the A/A verdict and the widest interval per host and
    workload. Shared by the markdown and the HTML page."""
    rows = []
    for host, data in analysis["hosts"].items():
        for workload, part in data["workloads"].items():
            if not part["aa"]:
                rows.append([host, workload, "—", "—", "no A/A arm: no measured noise floor", "—", "—"])
            for floor in part["aa"]:
                repeats = floor["repeats"]
                rows.append(
                    [
                        host,
                        workload,
                        f"`{floor['arm']}`",
                        f"{repeats[0]} / {repeats[1]}" if repeats else "—",
                        fmt_floor_verdict(floor),
                        fmt_widest(floor),
                        (
                            f"{fmt_confidence(floor['family']['confidence'])} over {floor['family']['size']} "
                            f"(each {fmt_confidence(floor['family']['comparison_confidence'])})"
                            if floor["family"] and floor["family"]["size"]
                            else "—"
                        ),
                    ]
                )
    header = [
        "Host",
        "Workload",
        "A/A arm",
        "Repeats (A/A / baseline)",
        "A/A verdict",
        "Widest interval",
        "Simultaneous",
    ]
    return header, rows


def noise_floor_section(analysis: dict) -> list[str]:
    """Each host's noise floor in one table: the A/A verdict and the widest interval per host and workload."""
    header, rows = noise_floor_rows(analysis)
    out = ["## Each host's noise floor", "", NOISE_FLOOR_RULE, ""]
    out += table(header, rows, analysis["synthetic"])
    return out + [""]


def calibration_section(analysis: dict, calibration: dict | None) -> list[str]:
    """The node calibration: the --calibration file's hosts, and the calibration records of the
    ledgers (which count in no arm and no verdict). Nothing when there is neither."""
    records = analysis["calibration"]
    if calibration is None and not records:
        return []
    out = [
        "## Node calibration",
        "",
        "The baseline measured once per host before the campaign. Calibration cells count in no arm and no "
        "verdict; they are listed here only.",
        "",
    ]
    if calibration is not None:
        out += [f"> warning: {report.md_escape(w)}" for w in calibration["warnings"]]
        out += [""] if calibration["warnings"] else []
    view = (calibration or {}).get("view")
    if view is not None:
        metric = METRIC_LABELS.get(view["metric"], view["metric"])
        limit = view["max_deviation_pct"]
        out += [
            f"From `{report.md_escape(calibration['path'])}` (campaign `{view['campaign']}`): {metric} per "
            f"{stats.load_axis(view['concurrencies'])}, its deviation from the fleet median, throttling and telemetry"
            + (f"; a host is flagged beyond ±{limit:g}% deviation" if limit is not None else "")
            + ". An excluded host's cells are not to be compared with the others'."
            + (" One host only: there is no fleet to compare it with." if view["single_host"] else ""),
            "",
        ]
        concurrencies = view["concurrencies"]
        rows = [
            [
                h["host"],
                *(fmt_num(h["values"].get(c)) for c in concurrencies),
                fmt_pct(h["deviation_pct"]),
                ", ".join(h["throttling"]) or "none",
                h["telemetry"],
                "**flagged**" if h["flagged"] else "no",
                "**excluded**" if h["excluded"] else "no",
                "; ".join(h["reasons"]) or "—",
            ]
            for h in view["hosts"]
        ]
        if view["hosts"]:
            label = "fleet median" if view["fleet_median_source"] == "file" else "fleet median (of the hosts above)"
            rows.append([label, *(fmt_num(view["fleet_median"].get(c)) for c in concurrencies), *["—"] * 6])
            synthetic = analysis["synthetic"] or any(r["synthetic"] for r in records)
            out += table(
                [
                    "Host",
                    *(f"{metric} {stats.load_label(c)}" for c in concurrencies),
                    "Deviation from fleet median",
                    "Throttling",
                    "Telemetry",
                    "Flagged",
                    "Excluded",
                    "Reasons",
                ],
                rows,
                synthetic,
            )
            out.append("")
        else:
            out += ["The calibration file lists no host.", ""]
        out += [f"- {report.md_escape(p)}" for p in view["problems"]] + ([""] if view["problems"] else [])
    if records:
        out += ["Calibration records in the ledgers (the latest of each host and cell):", ""]
        rows = [
            [
                str(r["host"]),
                str(r["cell"]),
                r["status"] if r["status"] == "success" else f"{r['status']} (`{r['failure_class']}`)",
                "; ".join(f"{stats.load_label(c)}: {fmt_num(v)}" for c, v in r["values"].items()) or "—",
                str(r["recorded_at"] or "—"),
            ]
            for r in records
        ]
        out += table(
            ["Host", "Cell", "Status", f"output tok/s per {stats.load_axis(c for r in records for c in r['values'])}",
             "Recorded"],
            rows,
            any(r["synthetic"] for r in records),
        )
        out.append("")
    return out


def fmt_answer(search: dict) -> str:
    """The search's answer in words."""
    if search["status"] == "failed" and search["failure"]:
        prefix = f"search failed ({report.short(search['failure'], 120)}); "
    else:
        prefix = ""
    if search["answer"] is None:
        return prefix + f"none meets it (not even the low end, {search['low']})"
    if search["bounded"] is False or search["outcome"] == "high_passes":
        return prefix + f"{search['answer']}, not bounded (the high end still meets it: raise high)"
    bracket = search["bracket"]
    detail = (
        f" ({bracket[0]} meets it, {bracket[1]} does not)" if isinstance(bracket, list) and len(bracket) == 2 else ""
    )
    return prefix + f"{search['answer']}{detail}"


def slo_section(slo: dict | None) -> list[str]:
    """The SLO searches (goodput) per host: the SLO, the answer and the probes. Nothing without --slo."""
    if slo is None:
        return []
    searches = slo["searches"]
    synthetic = any(s["synthetic"] for s in searches)
    out = [
        "## SLO search (goodput)" + (" — SYNTHETIC (simulator)" if synthetic else ""),
        "",
        "The highest load at which every SLO entry holds, by bisection on a running server "
        "(module sglang_slo_search, docs/slo-search.md). One search per line of the files given.",
        "",
    ]
    out += [f"> warning: {report.md_escape(w)}" for w in slo["warnings"]]
    out += [""] if slo["warnings"] else []
    if not searches:
        return out + ["No SLO search to show.", ""]
    for host in sorted({s["host"] for s in searches}):
        out += [f"### SLO search: host `{host}`", ""]
        for search in [s for s in searches if s["host"] == host]:
            by_rate = search["dimension"] == "request_rate"
            fixed = search["fixed"]
            load = (
                f"request rate (req/s) at max concurrency {fixed.get('max_concurrency', '—')}"
                if by_rate
                else f"concurrency at request rate {fixed.get('request_rate', '—')}"
            )
            out += [
                f"Tier `{search['tier']}`, SLO {' and '.join(f'`{e}`' for e in search['slo']) or '—'}, {load}, "
                f"range {search['low']}–{search['high']} (tolerance {search['tolerance']}), run "
                f"`{search['run_id']}`: **answer {fmt_answer(search)}**."
                + (f" {report.md_escape(search['reason'])}" if search["reason"] else ""),
                "",
            ]
            if search["consistent"] is False or search["warnings"]:
                out += ["**Not consistent** with the monotonicity assumption:"]
                out += [f"- {report.md_escape(w)}" for w in search["warnings"]] + [""]
            rows = [
                [
                    str(p["index"]),
                    str(p["value"]),
                    str(p["num_prompts"] if p["num_prompts"] is not None else "—"),
                    *(fmt_num(p["checks"].get(m)) for m in search["metrics"]),
                    "yes" if p["met"] else "**no**",
                    (p["status"] or "—") + (f" ({report.short(p['error'], 80)})" if p["error"] else ""),
                ]
                for p in search["probes"]
            ]
            out += table(
                ["Probe", "Request rate" if by_rate else "Concurrency", "Prompts", *search["metrics"], "Met", "Status"],
                rows,
                search["synthetic"],
                "---:|---:|---:|" + "---:|" * len(search["metrics"]) + "---|---|",
            )
            out.append("")
    return out


PRECISION_RULE = (
    "How precisely each arm's repeats measured it: the half-width of the simultaneous interval of its mean "
    "output tok/s (every concurrency, log scale), and the smallest change against the baseline that these "
    "repeats could call better or worse (the widest half-width of its comparison intervals). With a precision "
    "target in the campaign file, the campaign adds interleaved rounds until each arm is within it or reaches "
    "max_repeats (docs/campaign-statistics.md)."
)


def precision_section(arms: dict, names: list[str], where: str, confidence: str, synthetic: bool) -> list[str]:
    """Each arm's precision (stats.arm_precision_state): repeats, interval, target, what ended the repeats."""
    rows = []
    for name in names:
        state = arms[name].get("precision") or {}
        target = state.get("target")
        rows.append([
            name,
            arms[name]["role"],
            str(state.get("n", 0)),
            f"±{fmt_num(state['widest_pct'], 1)}%" if state.get("widest_pct") is not None else "— (one repeat)",
            f"±{fmt_num(target['target_pct'], 1)}% (max {target['max_repeats']})" if target else "none",
            state.get("state") or "—",
            f"±{fmt_num(state['smallest_change_pct'], 1)}%" if state.get("smallest_change_pct") is not None else "—",
        ])
    out = [f"### Precision of the repeats: {where}", "", PRECISION_RULE, ""]
    out += table(
        ["Arm", "Role", "Repeats", f"Mean's simultaneous {confidence} interval", "Target", "Repeats ended",
         "Smallest change visible"],
        rows,
        synthetic,
        "---|---|---:|---:|---|---|---:|",
    )
    return out + [""]


def has_goodput(arms: dict, names: list[str]) -> bool:
    """Whether any cell of these arms has a goodput share, measured or withheld for its sample size."""
    return any(
        (point[m]["median"] is not None or point[m].get("withheld"))
        for a in names
        for point in arms[a]["points"].values()
        for m in stats.GOODPUT_METRICS
    )


def goodput_section(arms: dict, names: list[str], where: str, confidence: str, synthetic: bool) -> list:
    """The goodput table (a workload with a goodput_slo): per arm and concurrency, the median over the
    repeats of the share of requests, and of output tokens, that met every limit; ``n/a (n=8)`` where a
    cell's share came from fewer requests than its attainment needs. Empty when no cell has one."""
    metrics = stats.GOODPUT_METRICS
    if not has_goodput(arms, names):
        return []
    out = [
        f"### Goodput: {where}",
        "",
        "The share of a cell's requests, and of its output tokens, whose own TTFT, TPOT and end-to-end latency "
        "met every limit of the workload's `goodput_slo` (a failed request meets none); the median over the "
        f"repeats with its {confidence} interval. Descriptive: no verdict.",
        "",
    ]
    rows = [
        [arm_name, stats.load_tick(c), *(fmt_summary(arms[arm_name]["points"][c][m], 3) for m in metrics)]
        for arm_name in names
        for c in arms[arm_name]["concurrencies"]
    ]
    loads = [c for a in names for c in arms[a]["concurrencies"]]
    out += table(["Arm", stats.load_heading(loads), *(METRIC_LABELS[m] for m in metrics)], rows, synthetic,
                 "---|---:|" + "---:|" * len(metrics))
    return out + [""]


def workload_sections(host: str, workload: str, part: dict, synthetic: bool, order: list[str], method: dict) -> list:
    out = []
    arms = part["arms"]
    names = arm_order(list(arms), arms, order)
    baseline = part["baseline_arm"]
    confidence = f"{method['confidence'] * 100:g}%"
    verdict_metrics = [m for m, _ in stats.VERDICT_METRICS]
    where = f"`{host}`, workload `{workload}`"
    column = stats.load_heading([c for a in arms.values() for c in a["concurrencies"]])

    out += [f"### A/A noise floor: {where}", ""]
    if not part["aa"]:
        out += ["No A/A arm ran here: there is no measured noise floor for this host.", ""]
    for floor in part["aa"]:
        out += [
            f"`{floor['arm']}` (tier `{floor['tier']}`) against `{baseline}`: {fmt_floor_verdict(floor)}; the "
            f"widest interval is {fmt_widest(floor)}. A tier's difference inside this band is not evidence of a "
            f"change. {fmt_family(floor['family']).capitalize()}.",
            "",
        ]
        rows = [
            [stats.load_tick(c)] + [fmt_difference(point[m]) + f" {fmt_verdict(point[m])}" for m in verdict_metrics]
            for c, point in floor["points"].items()
        ]
        out += table(
            [column, *(f"Δ {METRIC_LABELS[m]} [simultaneous {confidence} CI]" for m in verdict_metrics)],
            rows,
            synthetic,
            "---:|" + "---|" * len(verdict_metrics),
        )
        out += ["", WIDE_NOTE] if wide([r for p in floor["points"].values() for r in p.values()]) else []
        out.append("")

    out += [f"### Verdicts against `{baseline}`: {where}", ""]
    rows = []
    for arm_name in names:
        arm = arms[arm_name]
        if arm["role"] != stats.ROLE_TIER:
            continue
        if not arm["comparison"]:
            rows.append([arm_name, "—", "—", *["— (no ok point)"] * len(verdict_metrics)])
        for c, point in (arm["comparison"] or {}).items():
            first = point[verdict_metrics[0]]
            rows.append(
                [arm_name, stats.load_tick(c), f"{first['n_candidate']} / {first['n_baseline']}"]
                + [f"{fmt_difference(point[m])} {fmt_verdict(point[m])}" for m in verdict_metrics]
            )
    if rows:
        out += table(
            [
                "Tier",
                column,
                "Repeats (tier / baseline)",
                *(f"Δ {METRIC_LABELS[m]} [simultaneous {confidence} CI], verdict" for m in verdict_metrics),
            ],
            rows,
            synthetic,
            "---|---:|---:|" + "---|" * len(verdict_metrics),
        )
        results = [
            r
            for a in arms.values()
            if a["role"] == stats.ROLE_TIER
            for p in (a["comparison"] or {}).values()
            for r in p.values()
        ]
        out += [""] + [
            f"- `{arm_name}`: {fmt_family(arms[arm_name]['family'])}."
            for arm_name in names
            if arms[arm_name]["role"] == stats.ROLE_TIER and arms[arm_name]["family"]
        ]
        out += ["", WIDE_NOTE] if wide(results) else []
    else:
        out.append("No tier arm ran here.")
    out.append("")
    out += precision_section(arms, names, where, confidence, synthetic)

    shown = [*verdict_metrics, stats.PER_USER]
    out += [
        f"### Medians of the repeats with their {confidence} interval: {where}",
        "",
        f"Throughput against interactivity: {PER_USER_RULE}.",
        "",
    ]
    rows = [
        [arm_name, stats.load_tick(c), *(fmt_summary(arms[arm_name]["points"][c][m]) for m in shown)]
        for arm_name in names
        for c in arms[arm_name]["concurrencies"]
    ]
    out += table(
        ["Arm", column, *(METRIC_LABELS[m] for m in shown)], rows, synthetic, "---|---:|" + "---:|" * len(shown)
    )
    out.append("")

    out += [
        f"### TTFT and TPOT percentiles: {where}",
        "",
        "Each cell is bench_serving's percentile over that cell's requests; the table gives the median of "
        f"those over the repeats, with its {confidence} interval (not a percentile of all requests pooled).",
        "",
    ]
    rows = [
        [arm_name, stats.load_tick(c), *(fmt_summary(arms[arm_name]["points"][c][m]) for m in stats.LATENCY_METRICS)]
        for arm_name in names
        for c in arms[arm_name]["concurrencies"]
    ]
    out += table(
        ["Arm", column, *(METRIC_LABELS[m] for m in stats.LATENCY_METRICS)],
        rows,
        synthetic,
        "---|---:|" + "---:|" * len(stats.LATENCY_METRICS),
    )
    out.append("")

    out += goodput_section(arms, names, where, confidence, synthetic)

    out += [f"### Warm-up: {where}", ""]
    rows = []
    for arm_name in names:
        warmup = arms[arm_name]["warmup"]
        per = "; ".join(f"c={c}: {fmt_summary(s)} s" for c, s in warmup["per_concurrency"].items()) or "—"
        rows.append([arm_name, str(len(arms[arm_name]["cells"])), fmt_summary(warmup["seconds"]), per])
    out += table(["Arm", "Cells", "Warm-up seconds", "Per concurrency"], rows, synthetic, "---|---:|---:|---|")
    out.append("")

    failed = [(a, c) for a in names for c in arms[a]["cells"] if c["status"] != "success"]
    if failed or part["excluded"]:
        out += [f"### Failed and excluded cells: {where}", ""]
        rows = [
            [
                c["cell"],
                str(c["attempt"] or "—"),
                f"`{c['failure_class']}`",
                c["failure_step"] or "—",
                report.short(c["failure_message"]),
                f"{c['ok_points']}/{c['points']}",
            ]
            for _, c in failed
        ]
        rows += [[e["cell"], "—", "excluded", "—", e["reason"], "—"] for e in part["excluded"]]
        out += table(
            ["Cell", "Attempt", "Class", "Step", "Message", "Ok points"], rows, synthetic, "---|---:|---|---|---|---:|"
        )
        out.append("")
    return out


# ---------------------------------------------------------------- tier pages


def tier_block(analysis: dict, tier: str, report_name: str) -> str | None:
    """The status block of one tier page; None when no arm of the campaign ran that tier."""
    lines = []
    name = analysis["campaign"]
    for host, data in analysis["hosts"].items():
        synthetic = " (SYNTHETIC simulator)" if data["synthetic"] else ""
        for arm_name, state in data["status"].items():
            if state["tier"] != tier or state["role"] is None:
                continue
            head = (
                f"- **{state['status'].replace('_', ' ')}** in campaign `{name}` on {host}{synthetic}, arm `{arm_name}`"
            )
            if state["status"] == stats.STATUS_CRASHED:
                classes = ", ".join(f"`{c}` ×{n}" for c, n in sorted(state["failure_classes"].items()))
                lines.append(f"{head}: {classes} of {state['cells']} cells.")
                continue
            details = []
            for workload, part in data["workloads"].items():
                arm = part["arms"].get(arm_name)
                if arm is None:
                    continue
                if state["role"] == stats.ROLE_BASELINE:
                    floor = part["aa"][0] if part["aa"] else None
                    if floor is None:
                        details.append(f"workload `{workload}`: no A/A arm")
                    else:
                        holds = {True: "holds", False: "FAILS", None: "undecided"}[floor["holds"]]
                        band = f", widest interval {fmt_widest(floor)}" if floor["widest"] else ""
                        details.append(f"workload `{workload}`: A/A noise floor {holds}{band}")
                    continue
                if not arm["comparison"]:
                    details.append(f"workload `{workload}`: no ok point")
                    continue
                top = max(arm["comparison"])
                result = arm["comparison"][top]["output_throughput"]
                details.append(
                    f"workload `{workload}`: output tok/s at {stats.load_words(top)} {fmt_difference(result)} "
                    f"({VERDICT_TEXT.get(result['verdict'], result['verdict']).strip('*')}, "
                    f"{result['n_candidate']} vs {result['n_baseline']} repeats)"
                )
            reason = f" ({state['reason']})" if state.get("reason") else ""
            lines.append(f"{head}{reason}: " + "; ".join(details) + f". Report: `{report_name}`.")
    return "\n".join(lines) if lines else None


def tier_pages(analysis: dict, docs_dir: Path, report_name: str) -> dict[Path, bytes]:
    """The new text of every tier page the campaign has a verdict for."""
    pages: dict[Path, bytes] = {}
    tiers = sorted({s["tier"] for h in analysis["hosts"].values() for s in h["status"].values() if s["role"]})
    for tier in tiers:
        block = tier_block(analysis, tier, report_name)
        page = docs_dir / f"{tier}.md"
        if block is None:
            continue
        if not page.exists():
            report.warn(f"{page} does not exist; its status block is not written")
            continue
        updated = report.replace_status(page.read_text(encoding="utf-8"), block, tier)
        if updated is None:
            report.warn(f"{page} has no {report.STATUS_BEGIN} ... {report.STATUS_END} markers; skipped")
            continue
        pages[page] = updated.encode("utf-8")
    return pages


# ---------------------------------------------------------------- chart


def build_png(analysis: dict, order: list[str]) -> bytes:
    """The chart as PNG bytes: one block of six panels per host and workload."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    synthetic = analysis["synthetic"]
    groups = [(h, w, part) for h, d in analysis["hosts"].items() for w, part in d["workloads"].items()]
    rows = max(1, len(groups)) * 2
    fig, axes = plt.subplots(rows, 3, figsize=(18, 4.6 * rows), squeeze=False)
    colors = plt.get_cmap("tab10").colors
    if not groups:
        for ax in axes.flat:
            ax.text(0.5, 0.5, "no cell of this campaign", ha="center", va="center", transform=ax.transAxes)
    for index, (host, workload, part) in enumerate(groups):
        arms = part["arms"]
        names = arm_order(list(arms), arms, order)
        color = {name: colors[i % len(colors)] for i, name in enumerate(names)}
        ticks = sorted({c for a in arms.values() for c in a["concurrencies"]})
        top, bottom = axes[2 * index], axes[2 * index + 1]
        where = f"{host} / {workload}"

        def log_x(ax, ticks=ticks):
            ax.set_xscale("log")
            if ticks:
                ax.set_xticks(ticks)
                ax.xaxis.set_major_formatter(ScalarFormatter())
                ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel(f"{stats.load_axis(ticks)} (log scale)")

        # Output tok/s: medians of the repeats with their interval as error bars.
        ax = top[0]
        for i, name in enumerate(names):
            xs, ys, low, high = [], [], [], []
            for c in arms[name]["concurrencies"]:
                s = arms[name]["points"][c]["output_throughput"]
                if s["median"] is None:
                    continue
                xs.append(c * 1.04 ** (i - (len(names) - 1) / 2))
                ys.append(s["median"])
                low.append(s["median"] - (s["ci_low"] if s["ci_low"] is not None else s["median"]))
                high.append((s["ci_high"] if s["ci_high"] is not None else s["median"]) - s["median"])
            if xs:
                ax.errorbar(
                    xs,
                    ys,
                    yerr=[low, high],
                    marker="o",
                    capsize=3,
                    color=color[name],
                    label=name,
                    linestyle="--" if arms[name]["role"] == stats.ROLE_AA else "-",
                )
        log_x(ax)
        ax.set_yscale("log")
        ax.set_ylabel("output tok/s (median, CI; log scale)")
        crashed = [
            f"{n} ({', '.join(sorted({c['failure_class'] for c in arms[n]['cells'] if c['failure_class']}))})"
            for n in names
            if arms[n]["status"]["status"] == stats.STATUS_CRASHED
        ]
        if crashed:
            ax.text(0.02, 0.02, "crashed: " + "; ".join(crashed), transform=ax.transAxes, fontsize=7, color="darkred")
        ax.set_title(f"{where}: output tok/s, repeats as error bars")

        # The difference against the baseline with its interval; the A/A arm is the noise floor.
        ax = top[1]
        others = [n for n in names if arms[n]["comparison"]]
        # A 2-repeat interval with df near 1 can reach +1e16 %: the axis is cut at DIFF_AXIS_CAP_PCT
        # (or beyond the largest difference), and an interval that goes further ends in a triangle.
        shown = [
            abs(r["delta_pct"])
            for n in others
            for p in arms[n]["comparison"].values()
            if (r := p.get("output_throughput")) and r["delta_pct"] is not None
        ]
        cap = max([DIFF_AXIS_CAP_PCT] + [1.5 * v for v in shown])
        cut = False
        for i, name in enumerate(others):
            xs, ys, low, high, hollow = [], [], [], [], []
            for position, c in enumerate(ticks):
                result = (arms[name]["comparison"] or {}).get(c, {}).get("output_throughput")
                if not result or result["delta_pct"] is None:
                    continue
                xs.append(position + (i - (len(others) - 1) / 2) * 0.12)
                ys.append(result["delta_pct"])
                ci = result["ci_low_pct"] is not None
                low.append(result["delta_pct"] - result["ci_low_pct"] if ci else 0.0)
                high.append(result["ci_high_pct"] - result["delta_pct"] if ci else 0.0)
                hollow.append(not ci)
                for end, marker in ((result["ci_high_pct"], "^"), (-(result["ci_low_pct"] or 0.0), "v")):
                    if ci and end > cap:
                        ax.plot(xs[-1], cap if marker == "^" else -cap, marker=marker, color=color[name])
                        cut = True
            if xs:
                ax.errorbar(
                    xs,
                    ys,
                    yerr=[low, high],
                    fmt="o",
                    capsize=3,
                    color=color[name],
                    label=name,
                    markerfacecolor="none" if all(hollow) else color[name],
                )
        ax.axhline(0.0, color="black", linewidth=0.8)
        ax.set_ylim(-min(cap, 100.0) * 1.08, cap * 1.08)
        if cut:
            ax.text(
                0.02,
                0.02,
                f"▲▼ interval beyond the axis (cut at ±{cap:.0f}%; see the tables)",
                transform=ax.transAxes,
                fontsize=7,
            )
        ax.set_xticks(range(len(ticks)))
        ax.set_xticklabels([stats.load_tick(c) for c in ticks])
        ax.set_xlabel(stats.load_axis(ticks))
        ax.set_ylabel("Δ output tok/s vs baseline (%)")
        ax.set_title(f"{where}: ratio of geometric means, simultaneous CI (A/A = noise floor)")

        # Throughput against per-user interactivity.
        ax = top[2]
        for name in names:
            xs, ys, labels = [], [], []
            for c in arms[name]["concurrencies"]:
                user = arms[name]["points"][c][stats.PER_USER]["median"]
                total = arms[name]["points"][c]["output_throughput"]["median"]
                if user is not None and total is not None:
                    xs.append(user)
                    ys.append(total)
                    labels.append(c)
            if xs:
                ax.plot(xs, ys, marker="o", color=color[name], label=name)
                for x, y, c in zip(xs, ys, labels, strict=True):
                    ax.annotate(stats.load_label(c), (x, y), fontsize=7, textcoords="offset points", xytext=(4, 4))
        ax.set_xlabel("per-user output tok/s = 1000 / mean TPOT (ms)")
        ax.set_yscale("log")
        ax.set_ylabel("output tok/s, all users (log scale)")
        ax.set_title(f"{where}: throughput vs interactivity")

        # TTFT and TPOT percentiles: p50 solid, p99 dashed.
        for ax, (p50, p99, label) in zip(
            bottom[:2],
            (("median_ttft_ms", "p99_ttft_ms", "TTFT ms"), ("median_tpot_ms", "p99_tpot_ms", "TPOT ms")),
            strict=True,
        ):
            for name in names:
                for metric, style in ((p50, "-"), (p99, ":")):
                    xs = [c for c in arms[name]["concurrencies"] if arms[name]["points"][c][metric]["median"]]
                    ys = [arms[name]["points"][c][metric]["median"] for c in xs]
                    if xs:
                        ax.plot(
                            xs,
                            ys,
                            marker=".",
                            linestyle=style,
                            color=color[name],
                            label=f"{name} {'p50' if metric == p50 else 'p99'}",
                        )
            log_x(ax)
            ax.set_yscale("log")
            ax.set_ylabel(f"{label} (median of repeats)")
            ax.set_title(f"{where}: {label} p50 (solid) and p99 (dotted)")

        # Warm-up seconds per arm: median of the cells, min–max as the bar.
        ax = bottom[2]
        shown = [n for n in names if arms[n]["warmup"]["seconds"]["median"] is not None]
        for position, name in enumerate(shown):
            s = arms[name]["warmup"]["seconds"]
            ax.bar(
                position,
                s["median"],
                color=color[name],
                yerr=[[s["median"] - s["min"]], [s["max"] - s["median"]]],
                capsize=3,
            )
        ax.set_xticks(range(len(shown)))
        ax.set_xticklabels(shown, rotation=20, fontsize=7, ha="right")
        ax.set_ylabel("warm-up seconds (median, min–max)")
        ax.set_title(f"{where}: warm-up")
        if not shown:
            ax.text(0.5, 0.5, "no warm-up recorded", ha="center", va="center", transform=ax.transAxes)

    for ax in axes.flat:
        ax.grid(True, which="both", alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    title = (
        f"SGLang campaign {analysis['campaign']}: medians of repeats (bootstrap CIs); "
        "differences with simultaneous Welch t CIs on logs"
    )
    return report.labelled_png(fig, plt, title, synthetic, watermark_size=40, top=0.98, dpi=80)


# ---------------------------------------------------------------- output


def campaigns_in(results_dir: Path) -> dict[str, list[Path]]:
    """``{campaign: [its hosts' ledgers]}`` of every ``results_dir/<host>/ledger.jsonl``: each
    campaign with the ledgers that hold at least one of its records (what the campaign playbook
    passes: its own hosts' ledgers)."""
    found: dict[str, list[Path]] = {}
    for path in sorted(results_dir.glob("*/ledger.jsonl")):
        records, _ = read_ledger(str(path))
        for name in sorted(
            {(r.get("campaign") or {}).get("name") for r in records if isinstance(r.get("campaign"), dict)} - {None}
        ):
            found.setdefault(str(name), []).append(path)
    return dict(sorted(found.items()))


def report_outputs(
    campaign: str,
    ledgers: list[Path],
    out_dir: Path,
    tiers: Path | None,
    calibration_path: Path | None = None,
    slo_paths: list[Path] | None = None,
    tier_docs: Path | None = None,
) -> tuple[dict[Path, bytes], dict]:
    """Every file of one campaign's report and its bytes: ``campaign-<NAME>.md``, ``.png`` and
    ``.html`` in ``out_dir`` (one analysis, three renderers), and with ``tier_docs`` the tier
    pages' status blocks. Also returns the analysis."""
    import campaign_html

    present = [p for p in ledgers if p.is_file()]
    missing = [f"no such ledger: {p} (its host is missing from this report)" for p in ledgers if not p.is_file()]
    records, problems = load_records(present)
    problems = missing + problems
    for problem in problems:
        report.warn(problem)
    catalog, order = tier_catalog(tiers)
    analysis = stats.campaign_analysis(records, campaign, catalog=catalog)
    calibration = load_calibration(calibration_path, campaign) if calibration_path is not None else None
    slo = load_slo(slo_paths) if slo_paths else None
    for warning in (calibration or {}).get("warnings", []) + (slo or {}).get("warnings", []):
        report.warn(warning)
    md_path = out_dir / f"campaign-{campaign}.md"
    png_path = out_dir / f"campaign-{campaign}.png"
    html_path = out_dir / f"campaign-{campaign}.html"
    outputs = {
        md_path: build_markdown(analysis, order, problems, png_path.name, calibration, slo).encode("utf-8"),
        png_path: build_png(analysis, order),
        html_path: campaign_html.build_html(
            analysis, order, problems, records, md_name=md_path.name, catalog=campaign_html.load_catalog()
        ),
    }
    if tier_docs is not None:
        outputs.update(tier_pages(analysis, tier_docs, md_path.name))
    return outputs, analysis


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ledger", type=Path, action="append", help="a ledger.jsonl (repeatable)")
    parser.add_argument(
        "--results-dir",
        type=Path,
        help="instead of --ledger: every DIR/<host>/ledger.jsonl, a report for each campaign in them (or --campaign), "
        "with DIR/calibration-<NAME>.json and DIR/<host>/slo_search.jsonl where they exist",
    )
    parser.add_argument("--campaign", help="the campaign's name (required with --ledger)")
    parser.add_argument("--out-dir", type=Path, help="where the report goes (default: --results-dir)")
    parser.add_argument(
        "--calibration", type=Path, help="the node calibration JSON the campaign playbook writes (shown, not compared)"
    )
    parser.add_argument(
        "--slo", type=Path, action="append", help="an SLO searches file, JSON lines (repeatable; results/<host>/...)"
    )
    parser.add_argument("--tier-docs", type=Path, help="write each tier's verdict into DIR/<tier>.md")
    parser.add_argument("--tiers", type=Path, default=ROOT / "data" / "tiers.yml", help="the tier catalog")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file is out of date")
    args = parser.parse_args(argv)
    if (args.ledger is None) == (args.results_dir is None):
        parser.error("give --ledger (one or more) or --results-dir, not both")
    if args.campaign is not None and not CAMPAIGN_NAME.match(args.campaign):
        parser.error(f"--campaign {args.campaign!r}: use letters, digits, '.', '_' and '-' only")
    if args.results_dir is not None:
        if args.calibration or args.slo:
            parser.error(
                "--results-dir finds the calibration and SLO files itself; --calibration and --slo go with --ledger"
            )
        jobs = []
        for name, ledgers in campaigns_in(args.results_dir).items():
            if args.campaign in (None, name) and CAMPAIGN_NAME.match(name):
                calibration = args.results_dir / f"calibration-{name}.json"
                slo = [p.parent / "slo_search.jsonl" for p in ledgers if (p.parent / "slo_search.jsonl").is_file()]
                jobs.append((name, ledgers, calibration if calibration.is_file() else None, slo))
        if not jobs:
            print(f"campaign report: no campaign record in {args.results_dir}/*/ledger.jsonl")
            return 0
        out_dir = args.out_dir or args.results_dir
    else:
        if args.campaign is None or args.out_dir is None:
            parser.error("--ledger needs --campaign and --out-dir")
        # A host whose ledger was never fetched leaves the others' report standing; none at all is a mistake.
        if not any(p.is_file() for p in args.ledger):
            parser.error(f"no such ledger: {', '.join(str(p) for p in args.ledger)}")
        jobs = [(args.campaign, args.ledger, args.calibration, args.slo)]
        out_dir = args.out_dir
    stale = []
    for name, ledgers, calibration, slo in jobs:
        outputs, analysis = report_outputs(name, ledgers, out_dir, args.tiers, calibration, slo, args.tier_docs)
        if args.check:
            stale += [p for p, data in outputs.items() if not p.is_file() or p.read_bytes() != data]
            continue
        for path, data in outputs.items():
            report.write_if_changed(path, data)
        print(
            f"campaign report: {out_dir / f'campaign-{name}'}.md, .png and .html from {analysis['counts']['cells']} "
            "cell(s)" + (" — SYNTHETIC" if analysis["synthetic"] else "")
        )
    for path in stale:
        print(f"out of date: {path}")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
