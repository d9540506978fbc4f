#!/usr/bin/env python3
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The campaign report as one self-contained HTML page (``campaign-<NAME>.html``).

tools/campaign_report.py writes it beside the markdown and the PNG, from the same analysis
(plugins/module_utils/sglang_stats.campaign_analysis): this module computes no statistic. It
renders, with plotly (the pinned PyPI package; its plotly.js is inlined once, so the page needs
no server and no network):

* per host and workload, output tok/s per GPU against per-user output tok/s (1000 / mean TPOT),
  one series per arm with the repeats' bootstrap intervals as error bars on both axes, and the
  Pareto frontier of the baseline and the tiers that did not crash and that the quality rule does not flag;
* the verdict table (the A/A arm's rows are the host's noise floor) with each difference's
  simultaneous interval, a quality column (the arm's output-quality verdict on that host,
  sglang_stats.host_quality; ``no quality check`` for records without one), and the records
  behind every row in a details row; the output-quality table and the campaign's quality rule;
* TTFT and TPOT p50 / p99 per concurrency (per request rate for a request-rate sweep: the
  points' load, sglang_stats.point_load, names every load axis, column and label), with the
  repeats (n) and the requests per cell behind each value, as a chart and a table;
* the failed, excluded and pending cells with their class and remedy;
* every cell's provenance: record id, run id, launch script sha256, SGLang / torch / CUDA /
  FlashInfer versions and the project revision; also in every chart point's hover.

A SYNTHETIC analysis (any simulator record: the same ``analysis["synthetic"]`` the markdown and
the PNG use) puts a red banner on top of the page, the word across every chart, in every chart's
title and in every table's first header cell.
"""

from __future__ import annotations

import html
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "plugins" / "module_utils"))

import campaign_report as text  # noqa: E402  (the formatting the markdown uses)
import report  # noqa: E402
import sglang_stats as stats  # noqa: E402

CRASH_SIGNATURES = ROOT / "data" / "crash_signatures.yml"
SYNTHETIC = text.SYNTHETIC
SYNTHETIC_TITLE = "SYNTHETIC (simulator, not a GPU) — "
NO_QUALITY = "no quality check"
FRONTIER = "Pareto frontier"
# plotly's modebar: no link to plotly's cloud; the PNG download works offline and stays.
PLOTLY_CONFIG = {"displaylogo": False, "responsive": True}
VERDICT_CLASS = {
    stats.BETTER: "better",
    stats.WORSE: "worse",
    stats.INDISTINGUISHABLE: "same",
    stats.NO_VERDICT: "none",
    stats.NO_DATA: "none",
}
STATUS_CLASS = {
    stats.BETTER: "better",
    stats.WORSE: "worse",
    stats.STATUS_MIXED: "mixed",
    stats.STATUS_CRASHED: "worse",
    stats.INDISTINGUISHABLE: "same",
    stats.STATUS_QUALITY_REGRESSED: "worse",
}
COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf")
STYLE = """
body { font-family: system-ui, sans-serif; margin: 0 1.5rem 3rem; color: #1a1a1a; max-width: 1500px; }
h1 { margin-top: 1rem; } h2 { border-bottom: 1px solid #ccc; margin-top: 2.2rem; } h3 { margin-top: 1.6rem; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.86rem; }
th, td { border: 1px solid #ccc; padding: 0.25rem 0.45rem; vertical-align: top; text-align: left; }
th { background: #f2f2f2; } td.num { text-align: right; white-space: nowrap; }
td.better { background: #e3f4e3; } td.worse { background: #fbe0e0; } td.mixed { background: #fff1cc; }
td.same { background: #f4f4f4; } td.none { color: #666; }
code { font-size: 0.92em; } details summary { cursor: pointer; color: #245; }
.note { color: #444; font-size: 0.9rem; max-width: 70rem; }
.chart { border: 1px solid #ddd; margin: 0.8rem 0; }
.synthetic-banner { position: sticky; top: 0; z-index: 10; background: #c00000; color: #fff;
  font-size: 1.25rem; font-weight: bold; padding: 0.6rem 1rem; margin: 0 -1.5rem; text-align: center; }
.synthetic .chart { border: 3px solid #c00000; }
"""


# ---------------------------------------------------------------- small pieces


def esc(value: object) -> str:
    return html.escape(str(value), quote=True)


def md_inline(value: object) -> str:
    """The markdown report's inline text (its ``**bold**`` and `` `code` ``) as HTML, escaped."""
    out = esc(value)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def short_hash(value: str | None, chars: int = 12) -> str:
    """``<code title="full">first chars…</code>``, or — when unknown."""
    if not value:
        return "—"
    return f'<code title="{esc(value)}">{esc(str(value)[:chars])}</code>'


def table(header: list[str], rows: list[list], synthetic: bool, caption: str | None = None) -> str:
    """An HTML table. A cell is markdown-inline text, or ``(html, css class)``, or ``("html", raw)``
    marked by a class starting with ``raw``. The first header cell says SYNTHETIC when the numbers are."""
    header = list(header)
    if synthetic:
        header[0] = f"{header[0]} ({SYNTHETIC})"
    out = ["<table>"]
    if caption:
        out.append(f"<caption class='note'>{md_inline(caption)}</caption>")
    out.append("<tr>" + "".join(f"<th>{md_inline(h)}</th>" for h in header) + "</tr>")
    for row in rows:
        cells = []
        for item in row:
            if isinstance(item, tuple):
                content, css = item
                body = content if css.startswith("raw") else md_inline(content)
                css = css.removeprefix("raw").strip()
                cells.append(f"<td class='{css}'>{body}</td>" if css else f"<td>{body}</td>")
            else:
                cells.append(f"<td>{md_inline(item)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


# ---------------------------------------------------------------- provenance


def gpus_of(record: dict) -> int | None:
    """The GPUs the record's server used, from its /server_info: tp × pp, × dp without DP attention
    (with it, the DP ranks share the TP GPUs); else the model block's tp_size; None when unknown."""
    info = record.get("server_info") if isinstance(record.get("server_info"), dict) else {}
    tp = info.get("tp_size") or (record.get("model") or {}).get("tp_size")
    if not isinstance(tp, int) or tp < 1:
        return None
    pp = info.get("pp_size") if isinstance(info.get("pp_size"), int) and info.get("pp_size") > 0 else 1
    dp = info.get("dp_size") if isinstance(info.get("dp_size"), int) and info.get("dp_size") > 0 else 1
    return tp * pp * (1 if info.get("enable_dp_attention") else dp)


def provenance(record: dict) -> dict:
    """Where one record's numbers come from: ids, the launch script's sha256, the versions."""
    versions = record.get("versions") if isinstance(record.get("versions"), dict) else {}
    launch = record.get("launch") if isinstance(record.get("launch"), dict) else {}
    failure = record.get("failure") if isinstance(record.get("failure"), dict) else {}
    return {
        "record_id": record.get("record_id"),
        "run_id": record.get("run_id"),
        "recorded_at": record.get("recorded_at"),
        "script_sha256": launch.get("script_sha256"),
        "sglang": versions.get("sglang")
        or ((record.get("campaign") or {}).get("fingerprint") or {}).get("sglang_version"),
        "torch": versions.get("torch"),
        "cuda": versions.get("cuda"),
        "flashinfer": versions.get("flashinfer"),
        "git_revision": record.get("git_revision"),
        "gpus": gpus_of(record),
        "quality": record.get("quality"),
        "remedy": failure.get("remedy"),
        "explanation": failure.get("explanation"),
    }


def provenance_line(prov: dict) -> str:
    """One line of plain text (hover) naming a record's provenance."""
    parts = [
        f"record {str(prov['record_id'] or '—')[:8]}",
        f"script {str(prov['script_sha256'] or '—')[:12]}",
        f"SGLang {prov['sglang'] or '—'}",
    ]
    parts += [f"{k} {prov[k]}" for k in ("torch", "cuda") if prov.get(k)]
    return ", ".join(parts)


def part_loads(part: dict) -> list:
    """The loads of a host and workload's arms (sglang_stats.point_load: concurrencies, or a
    request-rate sweep's rates), sorted."""
    return sorted({c for arm in part["arms"].values() for c in arm["concurrencies"]})


def load_column(part: dict) -> str:
    """The load's column heading: ``Concurrency``, or ``Request rate (req/s)`` for a rate sweep."""
    return stats.load_heading(part_loads(part))


def axis_value(load):
    """A load as a chart coordinate (a plain number: the points are placed by rate in a sweep)."""
    return float(load) if isinstance(load, stats.RequestRate) else load


def requests_at(record: dict, concurrency: int) -> int:
    """How many requests the record's ok points at ``concurrency`` completed (a percentile's sample)."""
    return sum(
        int(p.get("completed") or 0)
        for p in record.get("points") or []
        if stats.point_load(p) == concurrency and p.get("status") == "ok"
    )


class Records:
    """The analysis's cells joined with their ledger records (by record id), for provenance."""

    def __init__(self, records: list[dict]):
        self.by_id = {r.get("record_id"): r for r in records if r.get("record_id")}

    def used(self, arm: dict, part: dict) -> list[tuple[dict, dict]]:
        """(cell entry, record) of the arm's cells that the statistics used (not excluded)."""
        excluded = {e["record_id"] for e in part["excluded"]}
        return [
            (c, self.by_id[c["record_id"]])
            for c in arm["cells"]
            if c["record_id"] in self.by_id and c["record_id"] not in excluded
        ]

    def prov(self, record_id: str | None) -> dict:
        record = self.by_id.get(record_id)
        return provenance(record) if record else {**provenance({}), "record_id": record_id}


def remedy_for(failure_class: str | None, prov: dict, catalog: list | None) -> tuple[str, str]:
    """The remedy and explanation of a failed cell: what its record says, else the crash catalog's."""
    remedy, explanation = prov.get("remedy"), prov.get("explanation")
    if (not remedy or not explanation) and catalog and failure_class:
        from sglang_crash import signature_for_class

        entry = signature_for_class(catalog, failure_class) or {}
        remedy = remedy or " ".join(str(entry.get("remedy") or "").split())
        explanation = explanation or " ".join(str(entry.get("explanation") or "").split())
    return remedy or "no remedy recorded for this class", explanation or ""


def load_catalog() -> list | None:
    """data/crash_signatures.yml, compiled (sglang_crash.load_catalog); None when it is absent."""
    if not CRASH_SIGNATURES.is_file():
        return None
    from sglang_crash import load_catalog as load

    return load(str(CRASH_SIGNATURES))


# ---------------------------------------------------------------- the frontier


def pareto_frontier(points: list[dict]) -> list[dict]:
    """The points no other point beats on both axes (``x`` and ``y``, higher is better on both),
    sorted by x; of equal points the first is kept."""
    frontier = []
    for i, p in enumerate(points):
        dominated = any(
            (q["x"] >= p["x"] and q["y"] >= p["y"] and (q["x"] > p["x"] or q["y"] > p["y"]))
            or (q["x"] == p["x"] and q["y"] == p["y"] and j < i)
            for j, q in enumerate(points)
            if j != i
        )
        if not dominated:
            frontier.append(p)
    return sorted(frontier, key=lambda p: (p["x"], -p["y"]))


def pareto_series(part: dict, order: list[str], records: Records, regressed: frozenset = frozenset()) -> dict:
    """Per arm, the points of the throughput-per-GPU / per-user chart, and the frontier.

    Each point: the arm's median per-user tok/s and output tok/s at a load (a concurrency, or a
    rate of a request-rate sweep; the analysis's
    summaries), with their intervals, divided by the arm's GPU count when every arm plotted has one
    known count (``per_gpu``); else output tok/s of all GPUs. The frontier is over the baseline
    and the tiers whose status is not crashed (the A/A arm repeats the baseline) and that are not in
    ``regressed`` (the host's arms the campaign's quality rule flags: faster with changed answers is
    not a point to deploy)."""
    arms = part["arms"]
    names = text.arm_order(list(arms), arms, order)
    counts = {}
    for name in names:
        found = {provenance(r)["gpus"] for _, r in records.used(arms[name], part)}
        counts[name] = found.pop() if len(found) == 1 else None
    series = {}
    for name in names:
        arm = arms[name]
        points = []
        for c in arm["concurrencies"]:
            user = arm["points"][c][stats.PER_USER]
            total = arm["points"][c]["output_throughput"]
            if user["median"] is None or total["median"] is None:
                continue
            points.append({"arm": name, "concurrency": c, "user": user, "total": total})
        if points:
            series[name] = points
    per_gpu = bool(series) and all(counts[name] for name in series)
    for name, points in series.items():
        divide = counts[name] if per_gpu else 1
        for p in points:
            p["x"] = p["user"]["median"]
            p["y"] = p["total"]["median"] / divide
            p["y_low"] = p["total"]["ci_low"] / divide if p["total"]["ci_low"] is not None else None
            p["y_high"] = p["total"]["ci_high"] / divide if p["total"]["ci_high"] is not None else None
            p["gpus"] = counts[name]
    candidates = [
        p
        for name, points in series.items()
        if arms[name]["role"] != stats.ROLE_AA and arms[name]["status"]["status"] != stats.STATUS_CRASHED
        and name not in regressed
        for p in points
    ]
    return {"names": names, "series": series, "per_gpu": per_gpu, "frontier": pareto_frontier(candidates)}


# ---------------------------------------------------------------- charts


def _error(median: float, low: float | None, high: float | None) -> tuple[float, float]:
    return ((high - median) if high is not None else 0.0, (median - low) if low is not None else 0.0)


def mark_synthetic(fig, synthetic: bool, title: str) -> None:
    """The chart's title; a SYNTHETIC one says so in red in its title and across its plot area."""
    if synthetic:
        fig.add_annotation(
            text=SYNTHETIC,
            xref="paper",
            yref="paper",
            x=0.5,
            y=0.5,
            showarrow=False,
            textangle=-22,
            font={"size": 110, "color": "rgba(200, 0, 0, 0.22)"},
        )
        title = SYNTHETIC_TITLE + title
    fig.update_layout(
        title={"text": esc(title), "font": {"color": "#c00000" if synthetic else "#1a1a1a", "size": 17}},
        paper_bgcolor="#fff6f6" if synthetic else "#ffffff",
    )


def pareto_figure(
    where: str, part: dict, order: list[str], records: Records, synthetic: bool, regressed: frozenset = frozenset()
):
    import plotly.graph_objects as go

    data = pareto_series(part, order, records, regressed)
    arms = part["arms"]
    fig = go.Figure()
    for index, name in enumerate(data["names"]):
        points = data["series"].get(name)
        if not points:
            continue
        arm = arms[name]
        hovers = []
        for p in points:
            lines = [
                f"<b>{esc(name)}</b> at {esc(stats.load_label(p['concurrency']))}",
                f"per-user {esc(text.fmt_summary(p['user']))} tok/s",
                f"output {esc(text.fmt_summary(p['total']))} tok/s"
                + (f" on {p['gpus']} GPU(s): {p['y']:,.2f} per GPU" if data["per_gpu"] else ""),
            ]
            for cell, record in records.used(arm, part):
                value = stats.cell_value(record, p["concurrency"], "output_throughput")
                if value is None:
                    continue
                user = stats.cell_value(record, p["concurrency"], stats.PER_USER)
                lines.append(
                    f"r{cell['repeat']}: {value:,.2f} tok/s, {user:,.2f} tok/s/user — "
                    f"{esc(provenance_line(provenance(record)))}"
                )
            hovers.append("<br>".join(lines))
        crashed = arm["status"]["status"] == stats.STATUS_CRASHED
        label = name + (" (crashed)" if crashed else "")
        x_err = [_error(p["x"], p["user"]["ci_low"], p["user"]["ci_high"]) for p in points]
        y_err = [_error(p["y"], p["y_low"], p["y_high"]) for p in points]
        fig.add_trace(
            go.Scatter(
                x=[p["x"] for p in points],
                y=[p["y"] for p in points],
                mode="lines+markers+text",
                name=label,
                text=[esc(stats.load_label(p["concurrency"])) for p in points],
                textposition="top right",
                hovertext=hovers,
                hoverinfo="text",
                marker={"size": 9, "color": COLORS[index % len(COLORS)]},
                line={"dash": "dash" if arm["role"] == stats.ROLE_AA else "solid", "width": 1.5},
                error_x={
                    "type": "data",
                    "symmetric": False,
                    "array": [e[0] for e in x_err],
                    "arrayminus": [e[1] for e in x_err],
                    "thickness": 1,
                },
                error_y={
                    "type": "data",
                    "symmetric": False,
                    "array": [e[0] for e in y_err],
                    "arrayminus": [e[1] for e in y_err],
                    "thickness": 1,
                },
            )
        )
    frontier = data["frontier"]
    if frontier:
        fig.add_trace(
            go.Scatter(
                x=[p["x"] for p in frontier],
                y=[p["y"] for p in frontier],
                mode="lines+markers",
                name=FRONTIER,
                hovertext=[
                    f"{FRONTIER}: {esc(p['arm'])} at {esc(stats.load_label(p['concurrency']))}" for p in frontier
                ],
                hoverinfo="text",
                line={"color": "#222", "width": 3},
                marker={"size": 17, "symbol": "circle-open", "color": "#222", "line": {"width": 2}},
            )
        )
    y_label = (
        "output tok/s per GPU (median of repeats)"
        if data["per_gpu"]
        else ("output tok/s, all GPUs (the records do not give every arm's GPU count)")
    )
    fig.update_layout(
        xaxis={"title": {"text": "per-user output tok/s = 1000 / mean TPOT (ms)"}},
        yaxis={"title": {"text": y_label + "; log scale"}, "type": "log"},
        template="plotly_white",
        height=560,
        legend={"title": {"text": "arm (click to hide)"}},
        margin={"t": 70},
    )
    mark_synthetic(fig, synthetic, f"{where}: throughput per GPU against per-user tok/s, with the Pareto frontier")
    return fig, data


LATENCY_PANELS = (("median_ttft_ms", "p99_ttft_ms", "TTFT ms"), ("median_tpot_ms", "p99_tpot_ms", "TPOT ms"))


def latency_figure(where: str, part: dict, order: list[str], records: Records, synthetic: bool):
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    arms = part["arms"]
    names = text.arm_order(list(arms), arms, order)
    fig = make_subplots(
        rows=1, cols=2, subplot_titles=[f"{label}: p50 solid, p99 dotted" for *_, label in LATENCY_PANELS]
    )
    for index, name in enumerate(names):
        arm = arms[name]
        used = records.used(arm, part)
        for col, (p50, p99, _label) in enumerate(LATENCY_PANELS, start=1):
            for metric, dash in ((p50, "solid"), (p99, "dot")):
                xs, ys, hovers = [], [], []
                for c in arm["concurrencies"]:
                    summary = arm["points"][c][metric]
                    if summary["median"] is None:
                        continue
                    served = [requests_at(r, c) for _, r in used if stats.cell_value(r, c, metric) is not None]
                    xs.append(axis_value(c))
                    ys.append(summary["median"])
                    hovers.append(
                        f"<b>{esc(name)}</b> {esc(stats.load_label(c))}: {text.METRIC_LABELS[metric]} "
                        f"{esc(text.fmt_summary(summary))}"
                        f"<br>median of n={summary['n']} repeat(s); requests per cell: "
                        + (", ".join(str(n) for n in served) or "—")
                    )
                if xs:
                    fig.add_trace(
                        go.Scatter(
                            x=xs,
                            y=ys,
                            mode="lines+markers",
                            name=f"{name} {'p50' if metric == p50 else 'p99'}",
                            legendgroup=name,
                            showlegend=col == 1,
                            hovertext=hovers,
                            hoverinfo="text",
                            line={"dash": dash, "color": COLORS[index % len(COLORS)]},
                        ),
                        row=1,
                        col=col,
                    )
    axis = stats.load_axis(part_loads(part))
    fig.update_xaxes(type="log", title={"text": f"{axis} (log scale)"})
    fig.update_yaxes(type="log", title={"text": "ms, median of repeats (log scale)"})
    fig.update_layout(template="plotly_white", height=500, margin={"t": 90})
    mark_synthetic(fig, synthetic, f"{where}: TTFT and TPOT percentiles per {axis}")
    return fig


def figure_html(fig, div_id: str) -> str:
    """The figure as a div and its script, without plotly.js (the page inlines it once)."""
    import plotly.io as pio

    body = pio.to_html(fig, full_html=False, include_plotlyjs=False, div_id=div_id, config=PLOTLY_CONFIG)
    return f"<div class='chart' data-chart='{esc(div_id)}'>{body}</div>"


# ---------------------------------------------------------------- sections


def records_details(pairs: list[tuple[dict, dict]]) -> str:
    """A details row: the records behind a table row."""
    if not pairs:
        return "—"
    items = "".join(
        f"<li>{esc(cell['cell'])}: {esc(provenance_line(provenance(record)))}</li>" for cell, record in pairs
    )
    return f"<details><summary>{len(pairs)} record(s)</summary><ul>{items}</ul></details>"


def quality_text(pairs: list[tuple[dict, dict]]) -> str:
    """What the arm's records say about output quality, without the host's analysis."""
    found = [r.get("quality") for _, r in pairs if r.get("quality") is not None]
    if not found:
        return NO_QUALITY
    states = sorted({str(q.get("status", "recorded")) if isinstance(q, dict) else str(q) for q in found})
    return f"{', '.join(states)} ({len(found)} of {len(pairs)} records)"


def quality_cell(quality: dict | None, name: str, pairs: list[tuple[dict, dict]]):
    """The quality column of one arm: its verdict on the host (sglang_stats.host_quality, over every
    workload), red when the campaign's rule flags it."""
    entry = ((quality or {}).get("arms") or {}).get(name)
    if not entry:
        return quality_text(pairs)
    return (entry["verdict"], "worse") if entry["regressed"] else entry["verdict"]


def verdict_section(
    where: str,
    part: dict,
    order: list[str],
    records: Records,
    synthetic: bool,
    method: dict,
    quality: dict | None = None,
) -> str:
    arms = part["arms"]
    names = text.arm_order(list(arms), arms, order)
    metrics = [m for m, _ in stats.VERDICT_METRICS]
    confidence = f"{method['confidence'] * 100:g}%"
    base = arms.get(part["baseline_arm"])
    base_pairs = records.used(base, part) if base else []
    rows = []
    for name in names:
        arm = arms[name]
        if arm["role"] == stats.ROLE_BASELINE:
            continue
        role = "A/A: noise floor" if arm["role"] == stats.ROLE_AA else "tier"
        pairs = records.used(arm, part)
        if not arm["comparison"]:
            rows.append(
                [
                    f"`{name}`",
                    role,
                    "—",
                    "—",
                    *["— (no ok point)"] * len(metrics),
                    quality_cell(quality, name, pairs),
                    (records_details(pairs), "raw"),
                ]
            )
        for c, point in (arm["comparison"] or {}).items():
            first = point[metrics[0]]
            behind = [p for p in pairs + base_pairs if stats.cell_value(p[1], c, metrics[0]) is not None]
            rows.append(
                [f"`{name}`", role, (stats.load_tick(c), "num"),
                 (f"{first['n_candidate']} / {first['n_baseline']}", "num")]
                + [
                    (
                        f"{text.fmt_difference(point[m])} {text.fmt_verdict(point[m])}",
                        VERDICT_CLASS[point[m]["verdict"]],
                    )
                    for m in metrics
                ]
                + [quality_cell(quality, name, pairs), (records_details(behind), "raw")]
            )
    families = [
        f"<li><code>{esc(n)}</code>: {md_inline(text.fmt_family(arms[n]['family']))}</li>"
        for n in names
        if arms[n]["family"]
    ]
    wide = text.wide([r for a in arms.values() for p in (a["comparison"] or {}).values() for r in p.values()])
    out = [
        f"<h3>Verdicts against <code>{esc(part['baseline_arm'])}</code> and the noise floor: {md_inline(where)}</h3>"
    ]
    if not rows:
        return "\n".join(out + ["<p>No tier or A/A arm ran here.</p>"])
    out.append(
        table(
            [
                "Arm",
                "Role",
                load_column(part),
                "Repeats (arm / baseline)",
                *(f"Δ {text.METRIC_LABELS[m]} [simultaneous {confidence} CI], verdict" for m in metrics),
                "Quality",
                "Records behind the row",
            ],
            rows,
            synthetic,
        )
    )
    out.append(f"<ul class='note'>{''.join(families)}</ul>")
    out.append(
        "<p class='note'>Quality: the arm's output-quality verdict on this host, over every workload (Output "
        f"quality, above). '{NO_QUALITY}': its records carry none, so a faster tier there is faster, not shown "
        "to answer as well.</p>"
    )
    if wide:
        out.append(f"<p class='note'>{md_inline(text.WIDE_NOTE)}</p>")
    return "\n".join(out)


def latency_table(part: dict, order: list[str], records: Records, synthetic: bool) -> str:
    arms = part["arms"]
    rows = []
    for name in text.arm_order(list(arms), arms, order):
        arm = arms[name]
        used = records.used(arm, part)
        for c in arm["concurrencies"]:
            point = arm["points"][c]
            served = [requests_at(r, c) for _, r in used if requests_at(r, c)]
            rows.append(
                [
                    f"`{name}`",
                    (stats.load_tick(c), "num"),
                    (str(max(point[m]["n"] for m in stats.LATENCY_METRICS)), "num"),
                    (", ".join(str(n) for n in served) or "—", "num"),
                ]
                + [(text.fmt_summary(point[m]), "num") for m in stats.LATENCY_METRICS]
            )
    return table(
        [
            "Arm",
            load_column(part),
            "Repeats (n)",
            "Requests per cell",
            *(text.METRIC_LABELS[m] for m in stats.LATENCY_METRICS),
        ],
        rows,
        synthetic,
        caption="Each cell's percentile is bench_serving's over that cell's requests; the value is the median "
        "over the repeats with its bootstrap interval and n (not a percentile of all requests pooled).",
    )


def goodput_html(where: str, part: dict, order: list[str], synthetic: bool) -> str:
    """The campaign report's goodput table (tools/campaign_report.py goodput_section) as HTML: per arm and
    concurrency the share of requests and of output tokens that met every limit of the workload's
    goodput_slo; empty for a workload without one."""
    arms = part["arms"]
    names = text.arm_order(list(arms), arms, order)
    if not text.has_goodput(arms, names):
        return ""
    rows = [
        [f"`{name}`", (stats.load_tick(c), "num"), *((text.fmt_summary(arms[name]["points"][c][m], 3), "num")
                                          for m in stats.GOODPUT_METRICS)]
        for name in names
        for c in arms[name]["concurrencies"]
    ]
    return f"<h3>Goodput: {md_inline(where)}</h3>" + table(
        ["Arm", load_column(part), *(text.METRIC_LABELS[m] for m in stats.GOODPUT_METRICS)],
        rows,
        synthetic,
        caption="The share of a cell's requests, and of its output tokens, whose own TTFT, TPOT and end-to-end "
        "latency met every limit of the workload's goodput_slo (a failed request meets none): the median over "
        "the repeats with its interval; n/a (n=..) where a cell had fewer requests than its attainment needs. "
        "Descriptive: no verdict.",
    )


def failure_section(where: str, part: dict, records: Records, synthetic: bool, catalog: list | None) -> str:
    rows = []
    for arm in part["arms"].values():
        for c in arm["cells"]:
            if c["status"] == "success":
                continue
            remedy, explanation = remedy_for(c["failure_class"], records.prov(c["record_id"]), catalog)
            rows.append(
                [
                    c["cell"],
                    (str(c["attempt"] or "—"), "num"),
                    f"`{c['failure_class']}`",
                    c["failure_step"] or "—",
                    report.short(c["failure_message"], 240),
                    (f"{c['ok_points']}/{c['points']}", "num"),
                    remedy + (f" ({explanation})" if explanation else ""),
                ]
            )
    rows += [[e["cell"], "—", "excluded", "—", e["reason"], "—", "—"] for e in part["excluded"]]
    if not rows:
        return ""
    return f"<h3>Failed and excluded cells: {md_inline(where)}</h3>\n" + table(
        ["Cell", "Attempt", "Class", "Step", "Message", "Ok points", "Remedy"], rows, synthetic
    )


def provenance_section(where: str, part: dict, records: Records, synthetic: bool, order: list[str]) -> str:
    excluded = {e["record_id"] for e in part["excluded"]}
    rows = []
    arms = part["arms"]
    for name in text.arm_order(list(arms), arms, order):
        for c in arms[name]["cells"]:
            prov = records.prov(c["record_id"])
            rows.append(
                [
                    c["cell"],
                    c["status"],
                    (short_hash(prov["record_id"], 36), "raw"),
                    prov["run_id"] or "—",
                    prov["recorded_at"] or "—",
                    (short_hash(prov["script_sha256"]), "raw"),
                    prov["sglang"] or "—",
                    prov["torch"] or "—",
                    prov["cuda"] or "—",
                    prov["flashinfer"] or "—",
                    prov["git_revision"] or "—",
                    (str(prov["gpus"] or "—"), "num"),
                    "excluded" if c["record_id"] in excluded else "used",
                ]
            )
    return (
        f"<h3>Cells and their provenance: {md_inline(where)}</h3>\n<details open><summary>{len(rows)} cell(s)"
        "</summary>\n"
        + table(
            [
                "Cell",
                "Status",
                "Record id",
                "Run id",
                "Recorded",
                "Launch script sha256",
                "SGLang",
                "torch",
                "CUDA",
                "FlashInfer",
                "Project revision",
                "GPUs",
                "In the statistics",
            ],
            rows,
            synthetic,
        )
        + "\n</details>"
    )


def top_tables(analysis: dict, order: list[str]) -> str:
    synthetic = analysis["synthetic"]
    header, rows = text.status_rows(analysis, order)
    hosts = analysis["hosts"]
    styled = []
    for row in rows:
        cells = [row[0]]
        for host, value in zip(hosts, row[1:], strict=True):
            state = hosts[host]["status"].get(row[0].strip("`"))
            cells.append((value, STATUS_CLASS.get(state["status"], "") if state else "none"))
        styled.append(cells)
    out = ["<h2 id='status'>Tier status</h2>", f"<p class='note'>{md_inline(text.STATUS_RULE)}</p>"]
    out.append(table(header, styled, synthetic))
    header, rows = text.quality_rows(analysis, order)
    out += ["<h2 id='quality'>Output quality</h2>", f"<p class='note'>{md_inline(text.QUALITY_RULE)}</p>"]
    out.append("<ul class='note'>" + "".join(
        f"<li>{md_inline(text.quality_rule_line(h, d['quality']))}</li>" for h, d in hosts.items()) + "</ul>")
    out.append(table(header, rows, synthetic))
    header, rows = text.noise_floor_rows(analysis)
    out += [
        "<h2 id='noise-floor'>Each host's noise floor</h2>",
        f"<p class='note'>{md_inline(text.NOISE_FLOOR_RULE)}</p>",
    ]
    out.append(table(header, rows, synthetic))
    return "\n".join(out)


# ---------------------------------------------------------------- the page


def build_html(
    analysis: dict,
    order: list[str],
    problems: list[str],
    records: list[dict],
    md_name: str | None = None,
    catalog: list | None = None,
) -> bytes:
    """The page as UTF-8 bytes; the same analysis always gives the same bytes."""
    import plotly
    from plotly.offline import get_plotlyjs

    synthetic = analysis["synthetic"]
    name = analysis["campaign"] or "(none)"
    joined = Records(records)
    title = f"Campaign {name}" + (" — SYNTHETIC (simulator)" if synthetic else "")
    body = [f"<h1>{esc(title)}</h1>"]
    if synthetic:
        banner = report.SYNTHETIC_TEXT
        body.insert(0, f"<div class='synthetic-banner' id='synthetic-banner'>{esc(banner)}</div>")
    counts = analysis["counts"]
    hosts = analysis["hosts"]
    body.append(
        f"<p class='note'>{counts['cells']} cell(s) on {len(hosts)} host(s), the latest final record of each; "
        "the statistics are docs/campaign-statistics.md's (sglang_stats.campaign_analysis), the same as in "
        + (f"<code>{esc(md_name)}</code>" if md_name else "the markdown report")
        + f". Charts: plotly {esc(plotly.__version__)}, inlined; hover a point for its repeats and records.</p>"
    )
    if not hosts:
        body.append(f"<p>No cell of campaign <code>{esc(name)}</code> found in the ledgers given.</p>")
    else:
        body.append(top_tables(analysis, order))
    charts = 0
    for host, data in hosts.items():
        host_synthetic = synthetic or data["synthetic"]
        body.append(
            f"<h2 id='host-{esc(host)}'>Host {esc(host)}"
            + (" — SYNTHETIC (simulator)" if host_synthetic else "")
            + "</h2>"
        )
        for workload, part in data["workloads"].items():
            where = f"`{host}`, workload `{workload}`"
            plain = f"{host} / {workload}"
            regressed = frozenset(a for a, q in data["quality"]["arms"].items() if q["regressed"])
            fig, pareto = pareto_figure(plain, part, order, joined, host_synthetic, regressed)
            body.append(f"<h3>Throughput per GPU against interactivity: {md_inline(where)}</h3>")
            body.append(
                f"<p class='note'>One series per arm: the median over the repeats at each "
                f"{esc(stats.load_axis(part_loads(part)))}, error bars the "
                "95% bootstrap interval of that median on both axes. The frontier joins the points that no other "
                "point of the baseline or a tier beats on both axes (the A/A arm repeats the baseline; a crashed "
                f"tier and one the campaign's quality rule flags are left out of it). {esc(text.PER_USER_RULE)}.</p>"
            )
            body.append(figure_html(fig, f"pareto-{charts}"))
            charts += 1
            body.append(
                verdict_section(where, part, order, joined, host_synthetic, analysis["method"], data.get("quality"))
            )
            body.append(f"<h3>TTFT and TPOT percentiles: {md_inline(where)}</h3>")
            body.append(figure_html(latency_figure(plain, part, order, joined, host_synthetic), f"latency-{charts}"))
            charts += 1
            body.append(latency_table(part, order, joined, host_synthetic))
            goodput = goodput_html(where, part, order, host_synthetic)
            if goodput:
                body.append(goodput)
            body.append(failure_section(where, part, joined, host_synthetic, catalog))
            body.append(provenance_section(where, part, joined, host_synthetic, order))
    if analysis["pending"]:
        rows = [[p["host"], p["cell"], str(p["attempt"]), f"`{p['failure_class']}`"] for p in analysis["pending"]]
        body.append(
            "<h2>Pending cells</h2><p class='note'>Only transient failures so far: the next run tries them "
            "again; they count nowhere above.</p>"
        )
        body.append(table(["Host", "Cell", "Attempt", "Class"], rows, synthetic))
    everything = problems + analysis["problems"]
    if everything:
        body.append("<h2>Problems</h2><ul>" + "".join(f"<li>{md_inline(p)}</li>" for p in everything) + "</ul>")
    body.append(
        "<p class='note'>Node calibration, warm-up seconds and SLO searches are in the markdown report "
        + (f"<code>{esc(md_name)}</code>" if md_name else "")
        + ".</p>"
    )
    page = "\n".join(
        [
            "<!DOCTYPE html>",
            "<html lang='en'>",
            "<head>",
            "<meta charset='utf-8'>",
            f"<title>{esc(title)}</title>",
            f"<style>{STYLE}</style>",
            f"<script type='text/javascript'>{get_plotlyjs()}</script>",
            "</head>",
            f"<body class='{'synthetic' if synthetic else 'measured'}' data-charts='{charts}'>",
            *body,
            # The rendered height, for a whole-page screenshot (tools/headless_chromium.py reads it).
            "<script>document.body.setAttribute('data-rendered-height', "
            "Math.ceil(document.body.getBoundingClientRect().bottom + window.scrollY) + 16);</script>",
            "</body>",
            "</html>",
            "",
        ]
    )
    return page.encode("utf-8")
