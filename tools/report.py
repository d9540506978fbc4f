#!/usr/bin/env python3
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Build the throughput report from the controller's ledgers.

    python tools/report.py [--results-dir results] [--out-md results/report.md]
        [--out-png results/throughput.png] [--tier-docs docs/tiers]
        [--tiers data/tiers.yml] [--settings data/benchmark.yml]

Reads every ``<results-dir>/<host>/ledger.jsonl`` (fetched by role
sglang_bench; no host is contacted) and writes:

* a markdown report: per host and tier the seeds' table (concurrency, output
  tok/s, total tok/s, TPOT) with the change against the latest successful
  baseline and a verdict, the failures with their class, and each tier's
  status (tested / blocked with class / untested);
* a PNG chart of output and total tok/s against concurrency (log x), one line
  per tier and host;
* the status block of each tier page ``docs/tiers/<id>.md`` between
  ``<!-- status:begin tier=<id> -->`` and ``<!-- status:end -->``, the markers
  tools/render_tier_docs.py writes (a page without them is skipped with a
  warning).

Any record from the simulator (``target_is_simulator``) labels the markdown
and the PNG SYNTHETIC. Files are rewritten only when their content changes;
each changed file is printed as ``changed: <path>`` (the playbook's
changed_when reads it). Comparison and ledger logic live in
plugins/module_utils/sglang_compare.py and sglang_ledger.py.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugins" / "module_utils"))

# The tier page's status block: its markers are tools/render_tier_docs.py's, which writes the
# pages (this file sits beside it, so its folder is on sys.path).
from render_tier_docs import STATUS_BEGIN as PAGE_STATUS_BEGIN  # noqa: E402
from render_tier_docs import STATUS_END, STATUS_RE  # noqa: E402
from sglang_compare import (  # noqa: E402
    GOODPUT_METRICS,
    METRICS,
    compare_record,
    comparison_rows,
    concurrencies,
    interval_text,
    load_axis,
    load_heading,
    load_tick,
    load_words,
    ok_values,
    point_load,
    share_text,
    summarize,
)
from sglang_ledger import latest_record, read_ledger  # noqa: E402
from sglang_quality import BELOW_FLOOR, quality_comparison  # noqa: E402
from sglang_workload_options import extra_identity  # noqa: E402

STATUS_BEGIN = PAGE_STATUS_BEGIN.format(tier="<id>")  # the begin marker as messages name it
SYNTHETIC_TEXT = (
    "SYNTHETIC — these numbers come from the SGLang-protocol simulator "
    "(sglang_sim), not from a GPU. They test the pipeline, not SGLang."
)
SYNTHETIC_BANNER = f"> **{SYNTHETIC_TEXT}**"  # markdown; tools/campaign_html.py shows SYNTHETIC_TEXT
VERDICT_MARK = {
    "better": "better",
    "worse": "**worse**",
    "indistinguishable": "indistinguishable",
    "no_verdict": "no verdict",
    "no_baseline": "no baseline",
    "no_data": "n/a",
}


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


# ---------------------------------------------------------------- inputs


def load_ledgers(results_dir: Path) -> tuple[list[dict], list[str]]:
    """All records of ``results_dir/*/ledger.jsonl``, in per-ledger order."""
    records: list[dict] = []
    problems: list[str] = []
    for ledger in sorted(results_dir.glob("*/ledger.jsonl")):
        host_dir = ledger.parent.name
        found, bad = read_ledger(str(ledger))
        for item in bad:
            problems.append(f"{ledger}:{item['line']}: {item['error']} (line skipped)")
        for record in found:
            record.setdefault("host", host_dir)
            record["_ledger"] = str(ledger)
            records.append(record)
    return records, problems


def load_tiers(path: Path | None) -> list[dict]:
    """Tier catalog entries ({id, number, title}) in number order; [] when absent."""
    if path is None or not path.exists():
        return []
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    if isinstance(data, dict) and "tiers" in data:
        data = data["tiers"]
    entries = []
    if isinstance(data, dict):
        for tier_id, spec in data.items():
            spec = spec if isinstance(spec, dict) else {}
            entries.append({"id": str(tier_id), **spec})
    elif isinstance(data, list):
        entries = [dict(item) for item in data if isinstance(item, dict) and item.get("id")]
    for entry in entries:
        entry["id"] = str(entry["id"])
    return sorted(entries, key=lambda e: (e.get("number") if isinstance(e.get("number"), int) else 999, e["id"]))


def load_confidence(path: Path | None, override: float | None) -> float:
    """The comparison's confidence: ``--confidence``, else the settings file's, else 0.95."""
    if override is not None:
        return float(override)
    if path is not None and path.exists():
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        if "confidence" in data:
            return float(data["confidence"])
    return 0.95


# ---------------------------------------------------------------- analysis


def tier_order(records: list[dict], catalog: list[dict], baseline: str) -> list[str]:
    """Baseline first, then catalog order, then any other tier seen, by name."""
    order = [baseline]
    order += [t["id"] for t in catalog if t["id"] != baseline]
    order += sorted({r.get("tier") for r in records if r.get("tier") and r.get("tier") not in order})
    return order


def is_synthetic(records: list[dict]) -> bool:
    return any(r.get("target_is_simulator") for r in records)


def hosts_of(records: list[dict]) -> list[str]:
    return sorted({r.get("host") for r in records if r.get("host")})


def latest(records: list[dict], host: str, tier: str, status: str | None = None) -> dict | None:
    return latest_record(records, tier=tier, host=host, status=status)


def host_records(records: list[dict], host: str) -> list[dict]:
    return [r for r in records if r.get("host") == host]


def tier_status(records: list[dict], host: str, tier: str) -> dict:
    """tested / blocked (class) / untested for one tier on one host, by its latest record."""
    last = latest(records, host, tier)
    if last is None:
        return {"status": "untested"}
    if last.get("status") == "success":
        return {"status": "tested", "record": last}
    failure = last.get("failure") or {}
    return {
        "status": "blocked",
        "class": failure.get("class") or "unclassified",
        "record": last,
        "last_success": latest(records, host, tier, "success"),
    }


# ---------------------------------------------------------------- formatting


def fmt_num(value: float | None, digits: int = 2) -> str:
    if value is None:
        return "—"
    return f"{value:,.{digits}f}"


def fmt_summary(summary: dict | None, digits: int = 2) -> str:
    if not summary:
        return "—"
    text = fmt_num(summary["median"], digits)
    if summary["n"] > 1:
        text += f" [{fmt_num(summary['min'], digits)}–{fmt_num(summary['max'], digits)}, n={summary['n']}]"
    return text


def fmt_delta(metric: dict) -> str:
    """The change, with its interval when there is one: ``+12.0% [+3.1%, +21.7%]``."""
    if metric["delta_pct"] is None:
        return "—"
    text = f"{metric['delta_pct']:+.1f}%"
    if metric.get("ci_low_pct") is not None:
        text += " " + interval_text(metric["ci_low_pct"], metric["ci_high_pct"])
    return text


def md_escape(text: object) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ").strip()


def short(text: object, limit: int = 160) -> str:
    text = md_escape(text or "")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def tier_table(record: dict, comparison: dict) -> list[str]:
    """The seeds' table for one record, with deltas and verdicts against the baseline.

    Built from sglang_compare.comparison_rows, the rows the experiment's own
    text table is made of, so both show the same numbers and verdicts.
    """
    lines = [
        f"| {load_heading(concurrencies(record))} | Output tok/s | Total tok/s | TPOT (ms) "
        "| Δ output | Δ total | Δ TPOT | Verdict (output / total / TPOT) |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    by_concurrency: dict[int, list[dict]] = {}
    for row in comparison_rows(comparison):
        by_concurrency.setdefault(row["concurrency"], []).append(row)
    for concurrency in concurrencies(record):
        rows = by_concurrency.get(concurrency, [])
        cells = [load_tick(concurrency)]
        cells += [fmt_summary(r["candidate"]) for r in rows] or ["—"] * len(METRICS)
        cells += [fmt_delta(r) for r in rows] or ["—"] * len(METRICS)
        verdicts = [VERDICT_MARK.get(r["verdict"], r["verdict"]) + ("" if r["in_family"] else "*") for r in rows]
        failed = [
            p for p in record.get("points") or [] if point_load(p) == concurrency and p.get("status") != "ok"
        ]
        if failed:
            verdicts.append(f"{len(failed)} failed point(s)")
        cells.append(" / ".join(verdicts) if verdicts else "—")
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def goodput_table(comparison: dict) -> list[str]:
    """The goodput of a record whose workload states a goodput_slo (sglang_compare's per-point goodput):
    per concurrency the tier's and the baseline's share of requests and of output tokens that met every
    limit, ``n/a (n=8)`` when withheld for its sample size. Empty without one."""
    points = [p for p in comparison.get("points") or [] if p.get("goodput")]
    if not points:
        return []
    lines = [
        f"Goodput: the share of requests / of output tokens that met every limit of "
        f"{md_escape(comparison.get('goodput_slo_text'))} (descriptive, no verdict).",
        "",
        f"| {load_heading(p['concurrency'] for p in points)} | Requests | Output tokens | Baseline requests "
        "| Baseline output tokens |",
        "|---:|---:|---:|---:|---:|",
    ]
    for point in points:
        goodput = point["goodput"]
        cells = [share_text(goodput[m]["candidate"]) for m in GOODPUT_METRICS]
        cells += [share_text(goodput[m]["baseline"]) for m in GOODPUT_METRICS]
        lines.append(f"| {load_tick(point['concurrency'])} | " + " | ".join(cells) + " |")
    return lines + [""]


def build_markdown(
    records: list[dict], catalog: list[dict], confidence: float, baseline: str, problems: list[str]
) -> str:
    synthetic = is_synthetic(records)
    title = "# SGLang throughput report" + (" — SYNTHETIC (simulator)" if synthetic else "")
    out = [title, ""]
    if synthetic:
        out += [SYNTHETIC_BANNER, ""]
    if not records:
        out += ["No ledger records found (results/<host>/ledger.jsonl). Run an experiment first.", ""]
        return "\n".join(out)
    ledgers = sorted({r["_ledger"] for r in records})
    newest = max((r.get("recorded_at") or "" for r in records), default="")
    out += [
        f"Built from {len(records)} record(s) in {len(ledgers)} ledger(s); newest record {newest}.",
        "Each table shows the tier's latest successful run: medians over its server starts "
        "([min–max, n] when there are several). Δ is the ratio of geometric means against the "
        f"`{baseline}` runs of the same host, model, workload and launch script (for `{baseline}` itself: "
        f"the ones before), with its {confidence:.0%} simultaneous interval over server starts. A verdict "
        "only when the interval excludes 0; one start a side, or repeats within one start: no verdict. "
        "TPOT is better when lower; * total tok/s follows output tok/s (not a test of its own).",
        "",
    ]
    names = {t["id"]: t.get("title") for t in catalog}
    order = tier_order(records, catalog, baseline)
    for host in hosts_of(records):
        mine = host_records(records, host)
        label = " — SYNTHETIC (simulator)" if is_synthetic(mine) else ""
        out += [f"## Host {host}{label}", ""]
        workload = (mine[-1].get("workload") or {}) if mine else {}
        if workload:
            out += [
                f"Workload of the newest record: {workload.get('dataset_name')} dataset, input "
                f"{workload.get('input_len')} / output {workload.get('output_len')} tokens, range ratio "
                f"{workload.get('random_range_ratio')}, request rate {workload.get('request_rate')}, "
                f"seed {workload.get('seed')}"
                + "".join(f", {name} {value}" for name, value in extra_identity(workload)) + ".",
                "",
            ]
        for tier in order:
            record = latest(mine, host, tier, "success")
            if record is None:
                continue
            comparison = compare_record(record, mine, confidence, baseline)
            heading = f"### {tier}" + (f" — {names[tier]}" if names.get(tier) else "")
            model = (record.get("model") or {}).get("model_path") or "unknown model"
            out += [
                heading,
                "",
                f"Run `{record.get('run_id')}` recorded {record.get('recorded_at')}, model `{model}`, "
                f"git `{record.get('git_revision') or 'unknown'}`"
                + (", SYNTHETIC" if record.get("target_is_simulator") else "")
                + ".",
                "",
                *tier_table(record, comparison),
                "",
                *goodput_table(comparison),
            ]
            if record.get("quality"):  # the output-quality check (docs/quality.md), beside the speed verdicts
                quality = quality_comparison(record, mine, baseline)
                flag = BELOW_FLOOR if quality.get("below_floor") else ""
                out += [f"Output quality: {md_escape(quality['verdict'] + flag)}.", ""]
        failures = [r for r in mine if r.get("status") != "success"]
        if failures:
            out += [
                f"### Failures on {host}",
                "",
                "| Tier | Run | Recorded | Class | Step | Message | Points ok |",
                "|---|---|---|---|---|---|---:|",
            ]
            for record in failures:
                failure = record.get("failure") or {}
                points = record.get("points") or []
                ok = sum(1 for p in points if p.get("status") == "ok")
                out.append(
                    f"| {md_escape(record.get('tier'))} | {md_escape(record.get('run_id'))} | "
                    f"{md_escape(record.get('recorded_at'))} | `{md_escape(failure.get('class'))}` | "
                    f"{md_escape(failure.get('step') or '—')} | {short(failure.get('message'))} | {ok}/{len(points)} |"
                )
            out.append("")
    out += [
        "## Tier status",
        "",
        "| Tier | " + " | ".join(hosts_of(records)) + " |",
        "|---|" + "---|" * len(hosts_of(records)),
    ]
    for tier in order:
        cells = []
        for host in hosts_of(records):
            state = tier_status(records, host, tier)
            if state["status"] == "blocked":
                cells.append(f"blocked (`{state['class']}`)")
            else:
                cells.append(state["status"])
        out.append(f"| {tier} | " + " | ".join(cells) + " |")
    out.append("")
    if problems:
        out += ["## Ledger problems", ""] + [f"- {md_escape(p)}" for p in problems] + [""]
    return "\n".join(out)


def status_block(records: list[dict], tier: str, confidence: float, baseline: str) -> str:
    """Markdown for one tier page's status block."""
    lines = []
    hosts = hosts_of(records)
    for host in hosts:
        state = tier_status(records, host, tier)
        synthetic = (
            " (SYNTHETIC simulator)"
            if any(r.get("target_is_simulator") for r in records if r.get("host") == host)
            else ""
        )
        if state["status"] == "untested":
            lines.append(f"- **untested** on {host}{synthetic}: no ledger record.")
            continue
        record = state["record"]
        if state["status"] == "blocked":
            failure = record.get("failure") or {}
            lines.append(
                f"- **blocked** on {host}{synthetic}: `{state['class']}` at step "
                f"{failure.get('step') or 'unknown'}, run `{record.get('run_id')}` "
                f"({record.get('recorded_at')}): {short(failure.get('message'), 200)}"
            )
            continue
        comparison = compare_record(record, [r for r in records if r.get("host") == host], confidence, baseline)
        top = comparison["points"][-1] if comparison["points"] else None
        detail = ""
        if top:
            metric = top["metrics"]["output_throughput"]
            value = metric["candidate"]["median"] if metric["candidate"] else None
            delta = fmt_delta(metric)
            detail = (
                f": output {fmt_num(value)} tok/s at {load_words(top['concurrency'])}"
                f" ({delta} vs {baseline}, {VERDICT_MARK.get(metric['verdict'], metric['verdict'])})"
            )
        lines.append(
            f"- **tested** on {host}{synthetic}, run `{record.get('run_id')}` ({record.get('recorded_at')}){detail}."
        )
    if not hosts:
        lines.append("- **untested**: no ledger record.")
    return "\n".join(lines)


def replace_status(text: str, block: str, tier: str | None = None) -> str | None:
    """Page text with the body of its status block (render_tier_docs' markers) replaced by
    ``block``, the markers kept; None when the page has no such block (of ``tier``, if given)."""
    for match in STATUS_RE.finditer(text):
        if tier is None or match["tier"] == tier:
            begin = PAGE_STATUS_BEGIN.format(tier=match["tier"])
            return f"{text[: match.start()]}{begin}\n{block}\n{STATUS_END}{text[match.end() :]}"
    return None


# ---------------------------------------------------------------- chart


def build_png(records: list[dict], catalog: list[dict], baseline: str) -> bytes:
    """The chart as PNG bytes (deterministic for the same records)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    hosts = hosts_of(records) or ["(none)"]
    synthetic = is_synthetic(records)
    fig, axes = plt.subplots(len(hosts), 2, figsize=(12, 4.5 * len(hosts)), squeeze=False)
    order = tier_order(records, catalog, baseline)
    axis = load_axis(c for r in records for c in concurrencies(r))
    for row, host in enumerate(hosts):
        mine = host_records(records, host)
        for col, (metric, label) in enumerate(
            (("output_throughput", "output tok/s"), ("total_throughput", "total tok/s"))
        ):
            ax = axes[row][col]
            plotted = 0
            for tier in order:
                record = latest(mine, host, tier, "success")
                if record is None:
                    continue
                xs, ys = [], []
                for concurrency in concurrencies(record):
                    summary = summarize(ok_values(record, concurrency, metric))
                    if summary:
                        xs.append(concurrency)
                        ys.append(summary["median"])
                if xs:
                    ax.plot(xs, ys, marker="o", linewidth=2 if tier == baseline else 1.3, label=tier)
                    plotted += 1
            ax.set_xscale("log")
            ticks = sorted({c for r in mine for c in concurrencies(r)})
            if ticks:
                ax.set_xticks(ticks)
                ax.xaxis.set_major_formatter(ScalarFormatter())
                ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel(f"{load_axis(ticks)} (log scale)")
            ax.set_ylabel(label)
            ax.set_title(f"{host}: {label} vs {load_axis(ticks)}")
            ax.grid(True, which="both", alpha=0.3)
            if plotted:
                ax.legend(fontsize=8)
            else:
                ax.text(0.5, 0.5, "no successful run", ha="center", va="center", transform=ax.transAxes)
    return labelled_png(fig, plt, f"SGLang throughput vs {axis}", synthetic, watermark_size=44, top=0.96, dpi=100)


def labelled_png(fig, plt, title, synthetic, watermark_size, top, dpi):
    """The figure as PNG bytes, titled; a SYNTHETIC figure (simulator numbers) says so on every axes, in
    its title and in the PNG's text chunks, where tools (and tests) can read it. Shared with
    tools/campaign_report.py. Closes the figure."""
    if synthetic:
        for ax in fig.axes:
            ax.text(0.5, 0.5, "SYNTHETIC", transform=ax.transAxes, ha="center", va="center",
                    fontsize=watermark_size, color="red", alpha=0.18, rotation=25, fontweight="bold")
        title = "SYNTHETIC (simulator, not a GPU) — " + title
    fig.suptitle(title, fontsize=14, color="red" if synthetic else "black", fontweight="bold")
    fig.tight_layout(rect=(0, 0, 1, top))
    buffer = io.BytesIO()
    metadata = {"Software": None, "Title": title}
    if synthetic:
        metadata["Description"] = "SYNTHETIC: numbers from the SGLang-protocol simulator, not from a GPU"
    fig.savefig(buffer, format="png", dpi=dpi, metadata=metadata)
    plt.close(fig)
    return buffer.getvalue()


# ---------------------------------------------------------------- output


def write_if_changed(path: Path, data: bytes) -> bool:
    if path.exists() and path.read_bytes() == data:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    print(f"changed: {path}")
    return True


def update_tier_docs(records, catalog, docs_dir: Path, confidence: float, baseline: str) -> list[Path]:
    changed = []
    tiers = [t["id"] for t in catalog] or sorted({r.get("tier") for r in records if r.get("tier")})
    for tier in tiers:
        page = docs_dir / f"{tier}.md"
        if not page.exists():
            warn(f"{page} does not exist; its status block is not written")
            continue
        text = page.read_text(encoding="utf-8")
        updated = replace_status(text, status_block(records, tier, confidence, baseline))
        if updated is None:
            warn(f"{page} has no {STATUS_BEGIN} ... {STATUS_END} markers; skipped")
            continue
        if write_if_changed(page, updated.encode("utf-8")):
            changed.append(page)
    return changed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results-dir", type=Path, default=ROOT / "results")
    parser.add_argument("--out-md", type=Path)
    parser.add_argument("--out-png", type=Path)
    parser.add_argument("--tier-docs", type=Path, default=ROOT / "docs" / "tiers")
    parser.add_argument("--no-tier-docs", action="store_true", help="do not touch the tier pages")
    parser.add_argument("--tiers", type=Path, default=ROOT / "data" / "tiers.yml")
    parser.add_argument("--settings", type=Path, default=ROOT / "data" / "benchmark.yml")
    parser.add_argument("--confidence", type=float, help="the comparison's confidence, 0-1 (default: settings file)")
    parser.add_argument("--baseline-tier", default="baseline")
    args = parser.parse_args(argv)
    out_md = args.out_md or args.results_dir / "report.md"
    out_png = args.out_png or args.results_dir / "throughput.png"

    records, problems = load_ledgers(args.results_dir)
    for problem in problems:
        warn(problem)
    catalog = load_tiers(args.tiers)
    confidence = load_confidence(args.settings, args.confidence)
    markdown = build_markdown(records, catalog, confidence, args.baseline_tier, problems)
    write_if_changed(out_md, markdown.encode("utf-8"))
    write_if_changed(out_png, build_png(records, catalog, args.baseline_tier))
    if not args.no_tier_docs:
        update_tier_docs(records, catalog, args.tier_docs, confidence, args.baseline_tier)
    print(
        f"report: {out_md} and {out_png} from {len(records)} record(s)"
        + (" — SYNTHETIC" if is_synthetic(records) else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
