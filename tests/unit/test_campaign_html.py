"""tools/campaign_html.py: the campaign's HTML page, built by tools/campaign_report.py from ledgers
the test writes (the real sglang_ledger.build_record plus the campaign key). What the page must
show is derived here from the same analysis (sglang_stats.campaign_analysis), never typed in.
Whether a browser draws it is tests/integration/test_campaign_html_browser.py."""

from __future__ import annotations

import re

import campaign_html
import campaign_report
import pytest
import sglang_stats as stats
from helpers.paths import REPO
from helpers.records import AA, BASE, CRASH, NOISE, campaign, cell, write_ledger
from helpers.reports import parse_dom, plotly_figures

BETTER = ("t02-mscclpp", "tier", tuple(1.12 * f for f in reversed(NOISE)))
SAME = ("t05-allreduce-fusion", "tier", NOISE)
TIERS = REPO / "data" / "tiers.yml"


def build(tmp_path, cells, name="demo"):
    """(page text, analysis, records): the analysis and the page as campaign_report.report_outputs
    makes them (without the markdown and the PNG, which test_campaign_report.py covers)."""
    ledger = write_ledger(tmp_path / "results" / "node-a" / "ledger.jsonl", cells)
    records, problems = campaign_report.load_records([ledger])
    catalog, order = campaign_report.tier_catalog(TIERS)
    analysis = stats.campaign_analysis(records, name, catalog=catalog)
    page = campaign_html.build_html(
        analysis, order, problems, records, md_name=f"campaign-{name}.md", catalog=campaign_html.load_catalog()
    )
    return page.decode("utf-8"), analysis, records


def demo_cells(simulator=False):
    host = "sim-local" if simulator else "node-a"
    cells = campaign([BASE, BETTER, SAME, AA], host=host, simulator=simulator)
    return cells + [
        cell("t01-piecewise-cuda-graph", r, [], failure=CRASH, host=host, simulator=simulator) for r in (1, 2)
    ]


def dominated(p, points):
    return any(q["x"] >= p["x"] and q["y"] >= p["y"] and (q["x"], q["y"]) != (p["x"], p["y"]) for q in points)


@pytest.mark.parametrize(
    ("points", "frontier"),
    [
        ([], []),
        ([(1, 1)], [(1, 1)]),
        ([(1, 5), (2, 4), (3, 1)], [(1, 5), (2, 4), (3, 1)]),  # a trade-off: all on it
        ([(1, 5), (2, 4), (1.5, 3), (3, 1)], [(1, 5), (2, 4), (3, 1)]),  # (1.5, 3) is beaten by (2, 4)
        ([(2, 2), (1, 1), (2, 1), (1, 2)], [(2, 2)]),  # one point beats all
        ([(1, 3), (1, 3), (2, 1)], [(1, 3), (2, 1)]),  # a tie is kept once
        ([(3, 1), (1, 3), (2, 3)], [(2, 3), (3, 1)]),  # same y: the larger x wins
    ],
)
def test_pareto_frontier(points, frontier):
    found = campaign_html.pareto_frontier([{"x": x, "y": y} for x, y in points])
    assert [(p["x"], p["y"]) for p in found] == frontier


def test_page_is_self_contained_and_deterministic(tmp_path):
    page, _, _ = build(tmp_path, demo_cells())
    # The same ledger gives the same bytes through the report's own path (write_if_changed and
    # --check rely on it).
    ledger = tmp_path / "results" / "node-a" / "ledger.jsonl"
    for _ in range(2):
        outputs, _ = campaign_report.report_outputs("demo", [ledger], tmp_path / "out", TIERS)
        assert outputs[tmp_path / "out" / "campaign-demo.html"].decode("utf-8") == page
    dom = parse_dom(page)
    # Nothing is fetched: no external script, style sheet, image or frame; plotly.js is inline.
    for node in dom.iter():
        for attr in ("src", "href"):
            assert not node.attrs.get(attr), (node.tag, node.attrs)
    scripts = dom.find_all("script")
    import plotly.offline

    assert any(s.text == plotly.offline.get_plotlyjs() for s in scripts)
    assert "<link" not in page and "cdn.plot.ly/plotly" not in page.split("</head>", 1)[1]
    assert "SYNTHETIC" not in page and not dom.find_all(cls="synthetic-banner")


def test_pareto_chart_series_frontier_and_error_bars(tmp_path):
    page, analysis, records = build(tmp_path, demo_cells())
    part = analysis["hosts"]["node-a"]["workloads"]["default"]
    figures = plotly_figures(page)
    pareto = figures["pareto-0"]
    traces = {t["name"]: t for t in pareto["data"]}
    # One series per arm that has a median per-user and output value somewhere; the crashed t01 has none.
    expected = {
        name
        for name, arm in part["arms"].items()
        if any(
            arm["points"][c][stats.PER_USER]["median"] is not None
            and arm["points"][c]["output_throughput"]["median"] is not None
            for c in arm["concurrencies"]
        )
    }
    assert set(traces) == expected | {campaign_html.FRONTIER}
    assert "t01-piecewise-cuda-graph" not in expected
    # The helper's records name no GPU count: the axis is all GPUs' output tok/s, and says so.
    assert "all GPUs" in pareto["layout"]["yaxis"]["title"]["text"]
    candidates = []
    for name in expected:
        arm = part["arms"][name]
        trace = traces[name]
        for x, y, c, plus, minus in zip(
            trace["x"],
            trace["y"],
            arm["concurrencies"],
            trace["error_y"]["array"],
            trace["error_y"]["arrayminus"],
            strict=True,
        ):
            summary = arm["points"][c]["output_throughput"]
            assert (x, y) == (arm["points"][c][stats.PER_USER]["median"], summary["median"])
            assert (y + plus, y - minus) == pytest.approx((summary["ci_high"], summary["ci_low"]))
            if arm["role"] != stats.ROLE_AA:
                candidates.append({"x": x, "y": y})
    frontier = traces[campaign_html.FRONTIER]
    want = sorted((p["x"], p["y"]) for p in candidates if not dominated(p, candidates))
    assert sorted(zip(frontier["x"], frontier["y"], strict=True)) == want and len(want) >= 2
    # Hover: each repeat's value with its record id.
    hover = traces["t02-mscclpp"]["hovertext"][0]
    used = [c["record_id"][:8] for c in part["arms"]["t02-mscclpp"]["cells"]]
    assert all(f"record {rid}" in hover for rid in used)


def test_per_gpu_when_the_records_name_their_gpus(tmp_path):
    cells = campaign([BASE, BETTER], repeats=3)
    for entry in cells:
        entry["server_info"] = {"tp_size": 8 if entry["tier"] == "baseline" else 4, "dp_size": 1}
    page, analysis, _ = build(tmp_path, cells)
    pareto = plotly_figures(page)["pareto-0"]
    traces = {t["name"]: t for t in pareto["data"]}
    arms = analysis["hosts"]["node-a"]["workloads"]["default"]["arms"]
    for name, gpus in (("baseline", 8), ("t02-mscclpp", 4)):
        medians = [arms[name]["points"][c]["output_throughput"]["median"] / gpus for c in arms[name]["concurrencies"]]
        assert traces[name]["y"] == pytest.approx(medians)
    assert pareto["layout"]["yaxis"]["title"]["text"].startswith("output tok/s per GPU")
    assert campaign_html.gpus_of({"server_info": {"tp_size": 4, "dp_size": 2}}) == 8
    assert campaign_html.gpus_of({"server_info": {"tp_size": 4, "dp_size": 2, "enable_dp_attention": True}}) == 4
    assert campaign_html.gpus_of({"model": {"tp_size": 2}}) == 2 and campaign_html.gpus_of({}) is None


def rows_of(dom, heading: str) -> list[list[str]]:
    """The text of the cells of the first table after the heading whose text starts with ``heading``."""
    nodes = list(dom.iter())
    start = next(i for i, n in enumerate(nodes) if n.tag in ("h2", "h3") and n.all_text().startswith(heading))
    found = next(n for n in nodes[start:] if n.tag == "table")
    return [[td.all_text().strip() for td in tr.find_all("td")] for tr in found.find_all("tr")[1:]]


def test_tables_match_the_markdown_numbers(tmp_path):
    page, analysis, records = build(tmp_path, demo_cells())
    dom = parse_dom(page)
    part = analysis["hosts"]["node-a"]["workloads"]["default"]
    verdicts = {(r[0], r[2]): r for r in rows_of(dom, "Verdicts against baseline")}
    metrics = [m for m, _ in stats.VERDICT_METRICS]
    for name, arm in part["arms"].items():
        for c, point in (arm["comparison"] or {}).items():
            row = verdicts[(name, str(c))]
            assert row[1] == ("A/A: noise floor" if arm["role"] == stats.ROLE_AA else "tier")
            assert row[4 : 4 + len(metrics)] == [
                f"{campaign_report.fmt_difference(point[m])} {campaign_report.fmt_verdict(point[m])}".replace("**", "")
                for m in metrics
            ]
            assert row[4 + len(metrics)] == campaign_html.NO_QUALITY
            assert re.fullmatch(r"\d+ record\(s\).*", row[5 + len(metrics)], re.S)
    assert verdicts[("t01-piecewise-cuda-graph", "—")][4] == "— (no ok point)"
    status = {r[0]: r[1] for r in rows_of(dom, "Tier status")}
    header, md_rows = campaign_report.status_rows(analysis, [])
    assert status["t02-mscclpp"] == dict((r[0], r[1]) for r in md_rows)["t02-mscclpp"]
    floors = rows_of(dom, "Each host's noise floor")
    assert floors[0][4].startswith("holds: all")
    # Latency percentiles with their n and the requests behind each cell.
    latency = {(r[0], r[1]): r for r in rows_of(dom, "TTFT and TPOT percentiles")}
    base = part["arms"]["baseline"]
    for c in base["concurrencies"]:
        row = latency[("baseline", str(c))]
        assert row[2] == str(base["points"][c]["p99_ttft_ms"]["n"])
        assert row[3] == ", ".join(str(max(2 * c, 10)) for _ in base["cells"])  # the helper's completed count
        assert row[5] == campaign_report.fmt_summary(base["points"][c]["p99_ttft_ms"])
    # Failures: class and a remedy (the record has none here: the crash catalog's is looked up).
    failed = rows_of(dom, "Failed and excluded cells")
    assert failed[0][:3] == ["t01-piecewise-cuda-graph/default/r1", "1", CRASH["class"]]
    assert failed[0][6]
    # Provenance: every record of the ledger, with its launch script hash column.
    provenance = rows_of(dom, "Cells and their provenance")
    assert sorted(r[2] for r in provenance) == sorted(r["record_id"] for r in records)


def test_failure_remedy_comes_from_the_record_first(tmp_path):
    failure = {**CRASH, "class": "kv_cache_no_memory", "remedy": "lower --mem-fraction-static", "explanation": "x"}
    page, _, _ = build(tmp_path, campaign([BASE], repeats=2) + [cell("t02-mscclpp", 1, [], failure=failure)])
    (row,) = rows_of(parse_dom(page), "Failed and excluded cells")
    assert row[2] == "kv_cache_no_memory" and row[6] == "lower --mem-fraction-static (x)"
    catalog = campaign_html.load_catalog()
    remedy, _ = campaign_html.remedy_for("kv_cache_no_memory", {"remedy": None, "explanation": None}, catalog)
    assert remedy and remedy != "no remedy recorded for this class"
    assert campaign_html.remedy_for("nope", {"remedy": None, "explanation": None}, catalog)[0] == (
        "no remedy recorded for this class"
    )


def test_synthetic_everywhere(tmp_path):
    page, analysis, _ = build(tmp_path, demo_cells(simulator=True))
    assert analysis["synthetic"]
    dom = parse_dom(page)
    (banner,) = dom.find_all(cls="synthetic-banner")
    assert banner.all_text().startswith("SYNTHETIC")
    figures = plotly_figures(page)
    assert len(figures) == 2
    for figure in figures.values():
        assert figure["layout"]["title"]["text"].startswith("SYNTHETIC")
        assert any(a["text"] == "SYNTHETIC" for a in figure["layout"]["annotations"])
    tables = dom.find_all("table")
    assert len(tables) >= 6 and all("(SYNTHETIC)" in t.find_all("th")[0].all_text() for t in tables)


def test_results_dir_writes_every_campaign(tmp_path, capsys):
    results = tmp_path / "results"
    write_ledger(results / "node-a" / "ledger.jsonl", campaign([BASE, AA], repeats=2))
    write_ledger(results / "node-b" / "ledger.jsonl", campaign([BASE], repeats=2, host="node-b", campaign="other"))
    write_ledger(results / "node-c" / "ledger.jsonl", [])
    assert campaign_report.main(["--results-dir", str(results), "--tiers", str(TIERS)]) == 0
    for name in ("demo", "other"):
        for suffix in ("md", "png", "html"):
            assert (results / f"campaign-{name}.{suffix}").is_file()
    # Each campaign from its own hosts' ledgers only.
    assert "## Host node-b" not in (results / "campaign-demo.md").read_text()
    assert campaign_report.main(["--results-dir", str(results), "--tiers", str(TIERS), "--check"]) == 0
    empty = tmp_path / "empty"
    empty.mkdir()
    capsys.readouterr()
    assert campaign_report.main(["--results-dir", str(empty)]) == 0
    assert "no campaign record" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        campaign_report.main(["--results-dir", str(results), "--ledger", str(results / "node-a" / "ledger.jsonl")])


def quality_block(second_prompt_ids):
    outputs = [{"id": "a", "token_ids": [1, 2, 3, 4], "logprobs": None},
               {"id": "b", "token_ids": second_prompt_ids, "logprobs": None}]
    return {"status": "ok", "prompt_set": {"name": "t", "sha256": "s1", "prompts": 2},
            "outputs": {"single": outputs, "batch": outputs}, "error": None}


def test_a_tier_the_quality_rule_flags_is_red_and_off_the_frontier(tmp_path):
    # t02 is the fastest arm (on the frontier by speed alone), but its outputs changed: the campaign's
    # rule makes it quality_regressed (docs/quality.md), so the frontier leaves it out.
    cells = campaign([BASE, BETTER, SAME, AA], repeats=3)
    for entry in cells:
        entry["quality"] = quality_block([5, 9, 9, 9] if entry["tier"] == "t02-mscclpp" else [5, 6, 7, 8])
        entry["campaign"]["quality_rule"] = {"aa_floor_margin": 0.05}
    page, analysis, _ = build(tmp_path, cells)
    assert analysis["hosts"]["node-a"]["status"]["t02-mscclpp"]["status"] == stats.STATUS_QUALITY_REGRESSED
    traces = {t["name"]: t for t in plotly_figures(page)["pareto-0"]["data"]}
    frontier = set(zip(traces[campaign_html.FRONTIER]["x"], traces[campaign_html.FRONTIER]["y"], strict=True))
    assert frontier and not frontier & set(zip(traces["t02-mscclpp"]["x"], traces["t02-mscclpp"]["y"], strict=True))
    dom = parse_dom(page)
    flagged = [r for r in rows_of(dom, "Verdicts against baseline") if r[0] == "t02-mscclpp"]
    assert flagged and all(r[-2].startswith("quality_regressed (agreement 62 % < A/A floor 100 %") for r in flagged)
    quality = {r[1]: r for r in rows_of(dom, "Output quality")}
    assert quality["t05-allreduce-fusion"][-1] == "outputs unchanged"
    assert "class='worse'>quality_regressed (agreement" in page


# The helper's two concurrency points as a request-rate sweep's two rates at one concurrency cap.
SWEEP_RATES = {1: 0.5, 1024: 1.5}


def rate_sweep(cells):
    cap = max(SWEEP_RATES)
    for entry in cells:
        for p in entry["points"]:
            p["request_rate"], p["concurrency"] = SWEEP_RATES[p["concurrency"]], cap
        entry["workload"] = {**entry["workload"], "concurrency": [cap], "request_rates": sorted(SWEEP_RATES.values())}
    return cells


def headers_of(dom, heading: str) -> list[str]:
    nodes = list(dom.iter())
    start = next(i for i, n in enumerate(nodes) if n.tag in ("h2", "h3") and n.all_text().startswith(heading))
    found = next(n for n in nodes[start:] if n.tag == "table")
    return [th.all_text().strip() for th in found.find_all("th")]


def test_a_rate_sweep_is_labelled_and_placed_by_its_rates(tmp_path):
    page, analysis, _ = build(tmp_path, rate_sweep(campaign([BASE, BETTER, AA], repeats=3, simulator=True)))
    part = analysis["hosts"]["node-a"]["workloads"]["default"]
    rates = sorted(SWEEP_RATES.values())
    base = part["arms"]["baseline"]
    assert base["concurrencies"] == rates and all(isinstance(c, stats.RequestRate) for c in base["concurrencies"])
    figures = plotly_figures(page)
    latency = figures["latency-1"]
    assert latency["layout"]["xaxis"]["title"]["text"] == "request rate (req/s) (log scale)"
    assert "per request rate (req/s)" in latency["layout"]["title"]["text"]
    assert "concurrency" not in repr(latency).lower()
    p50 = {t["name"]: t for t in latency["data"] if t["name"].endswith(" p50") and t["xaxis"] == "x"}
    for name, arm in part["arms"].items():
        assert p50[f"{name} p50"]["x"] == [float(c) for c in arm["concurrencies"]]  # placed by rate
    pareto = {t["name"]: t for t in figures["pareto-0"]["data"]}
    assert pareto["baseline"]["text"] == [stats.load_label(c) for c in base["concurrencies"]]
    assert all(" req/s" in label for label in pareto["baseline"]["text"])
    assert "concurrency" not in repr(figures["pareto-0"]["data"]).lower()
    dom = parse_dom(page)
    for heading in ("Verdicts against baseline", "TTFT and TPOT percentiles"):
        assert headers_of(dom, heading)[2 if heading.startswith("Verdicts") else 1] == "Request rate (req/s)"
    latency_rows = {(r[0], r[1]) for r in rows_of(dom, "TTFT and TPOT percentiles")}
    assert latency_rows == {(name, f"{rate:g}") for name in part["arms"] for rate in rates}
    verdicts = {(r[0], r[2]) for r in rows_of(dom, "Verdicts against baseline")}
    assert verdicts == {(name, f"{rate:g}") for name in ("t02-mscclpp", "baseline~aa") for rate in rates}
    assert "at each request rate (req/s), error bars" in page


def test_the_png_chart_beside_the_page_labels_a_rate_sweep_by_its_rates(tmp_path, monkeypatch):
    # The markdown's PNG (campaign_report.build_png) from the same analysis: its load axes and labels.
    _, analysis, _ = build(tmp_path, rate_sweep(campaign([BASE, BETTER, AA], repeats=3, simulator=True)))
    seen = {}
    real = campaign_report.report.labelled_png

    def capture(fig, *args, **kwargs):
        png = real(fig, *args, **kwargs)  # it adds the SYNTHETIC watermark, then closes the figure
        seen["axes"] = [(ax.get_xlabel(), [t.get_text() for t in ax.get_xticklabels()],
                         [t.get_text() for t in ax.texts]) for ax in fig.axes]
        return png

    monkeypatch.setattr(campaign_report.report, "labelled_png", capture)
    campaign_report.build_png(analysis, [])
    loads = analysis["hosts"]["node-a"]["workloads"]["default"]["arms"]["baseline"]["concurrencies"]
    labels = [xlabel for xlabel, _, _ in seen["axes"]]
    assert "concurrency" not in " ".join(labels) and "request rate (req/s) (log scale)" in labels
    (diff,) = [ticks for xlabel, ticks, _ in seen["axes"] if xlabel == "request rate (req/s)"]
    rates = sorted(SWEEP_RATES.values())
    assert diff == [stats.load_tick(c) for c in loads] == [f"{rate:g}" for rate in rates]
    notes = [t for _, _, texts in seen["axes"] for t in texts]
    assert {stats.load_label(c) for c in loads} <= set(notes) and not any(t.startswith("c=") for t in notes)
    assert "SYNTHETIC" in notes  # simulator records: the watermark on every axes


def test_the_markdown_beside_the_page_labels_a_rate_sweep_by_its_rates(tmp_path):
    # The markdown's tables and sentences (campaign_report) from the same analysis: no rate is a "c=".
    _, analysis, _ = build(tmp_path, rate_sweep(campaign([BASE, BETTER, AA], repeats=3, simulator=True)))
    part = analysis["hosts"]["node-a"]["workloads"]["default"]
    loads = part["arms"]["baseline"]["concurrencies"]
    markdown = "\n".join(campaign_report.workload_sections("node-a", "default", part, True, [], analysis["method"]))
    # (The warm-up runs at the cap's concurrency, not at a rate: its table stays per concurrency.)
    markdown = markdown.split("### Warm-up")[0]
    headers = [line.split("|")[1:3] for line in markdown.splitlines() if "(SYNTHETIC) |" in line]
    # The A/A floor, the verdicts, the medians and the percentiles have a load column (the precision none).
    assert sum("Request rate (req/s)" in " ".join(cells) for cells in headers) == 4
    assert "Concurrency" not in markdown and "c=" not in markdown
    medians = markdown.split("### Medians of the repeats")[1].split("###")[0]
    ticks = {line.split("|")[2].strip() for line in medians.splitlines() if line.startswith("| baseline |")}
    assert ticks == {stats.load_tick(c) for c in loads} == {f"{r:g}" for r in SWEEP_RATES.values()}
    floor = part["aa"][0]
    assert campaign_report.fmt_widest(floor).endswith(f" at {stats.load_label(floor['widest']['concurrency'])})")
    assert " req/s)" in campaign_report.fmt_widest(floor)
    block = campaign_report.tier_block(analysis, "t02-mscclpp", "campaign-demo.md")
    assert f"output tok/s at {stats.load_label(max(loads))} " in block and "concurrency" not in block
