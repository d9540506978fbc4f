"""The campaign's HTML page in a real browser: headless Chromium (Debian's package, installed by
tools/browser/setup-chromium.sh, which `make pytest` runs) loads the page from a file with no
network, and the test reads what it drew. Two pages: the H200 campaign's, from its recorded ledger
(tests/fixtures/real-sglang/0.5.17-h200-tp1/phase-e), and a SYNTHETIC one from simulator records.
Each load leaves a screenshot in results/browser/ for a person to look at.

No chromium is a failure that names the setup script, never a skip: CI must run this."""

from __future__ import annotations

import campaign_html
import campaign_report
import headless_chromium
import pytest
import sglang_stats as stats
from helpers.paths import FIXTURES, REPO
from helpers.records import AA, BASE, CRASH, NOISE, campaign, cell, write_ledger
from helpers.reports import parse_dom

H200_LEDGER = FIXTURES / "real-sglang" / "0.5.17-h200-tp1" / "phase-e" / "work" / "results" / "ledger.jsonl"
SCREENSHOTS = REPO / "results" / "browser"
TIERS = REPO / "data" / "tiers.yml"


def write_page(path, ledger, name):
    """The page as tools/campaign_report.py writes it (its analysis, campaign_html's renderer)."""
    records, problems = campaign_report.load_records([ledger])
    catalog, order = campaign_report.tier_catalog(TIERS)
    analysis = stats.campaign_analysis(records, name, catalog=catalog)
    page = campaign_html.build_html(analysis, order, problems, records, catalog=campaign_html.load_catalog())
    path.write_bytes(page)
    return analysis


def expected_series(part) -> dict[str, int]:
    """Arm name as the legend shows it -> how many points it has (a median on both axes)."""
    data = campaign_html.pareto_series(part, [], campaign_html.Records([]))
    arms = part["arms"]
    return {
        name + (" (crashed)" if arms[name]["status"]["status"] == stats.STATUS_CRASHED else ""): len(points)
        for name, points in data["series"].items()
    }


def expected_frontier(part) -> int:
    """The frontier's size, by its definition: baseline and not-crashed tiers' points that no other beats."""
    arms = part["arms"]
    points = [
        (arm["points"][c][stats.PER_USER]["median"], arm["points"][c]["output_throughput"]["median"])
        for arm in arms.values()
        if arm["role"] != stats.ROLE_AA and arm["status"]["status"] != stats.STATUS_CRASHED
        for c in arm["concurrencies"]
        if arm["points"][c][stats.PER_USER]["median"] is not None
    ]
    return len({p for p in points if not any(q[0] >= p[0] and q[1] >= p[1] and q != p for q in points)})


def open_in_chromium(page, shot):
    try:
        headless_chromium.find_chromium()
    except headless_chromium.ChromiumMissing as exc:
        pytest.fail(str(exc))
    rendered = headless_chromium.load(page, shot)
    assert rendered.console == [], "the page wrote to the browser console:\n" + "\n".join(rendered.console)
    dom = parse_dom(rendered.dom)
    assert external_references(dom) == []
    return rendered, dom


def external_references(dom) -> list[tuple[str, str]]:
    """(tag, address) of every element of the rendered DOM that loads something (src, href): the
    page must need nothing but itself, also after its scripts ran."""
    return [(n.tag, n.attrs[a]) for n in dom.iter() for a in ("src", "href") if n.attrs.get(a)]


def charts(dom) -> dict[str, object]:
    return {node.attrs["data-chart"]: node for node in dom.find_all("div", cls="chart")}


def drawn_traces(chart) -> list[tuple[str, int]]:
    """(legend name, markers drawn) of every trace plotly drew in the chart's SVG, in trace order."""
    names = [t.all_text() for t in chart.find_all("text", cls="legendtext")]
    counts = [
        len(t.find_all("path", cls="point")) for t in chart.find_all("g", cls="trace") if "scatter" in t.classes()
    ]
    return list(zip(names, counts, strict=True))


def check_screenshot(shot, rendered):
    from PIL import Image

    with Image.open(shot) as image:
        assert image.width == headless_chromium.DEFAULT_WIDTH and image.height == rendered.height
        colors = image.convert("RGB").getcolors(maxcolors=1 << 16)
        assert colors is None or len(colors) > 50  # not a blank page


def test_h200_campaign_page_renders(tmp_path):
    page = tmp_path / "campaign-h200-tiny.html"
    analysis = write_page(page, H200_LEDGER, "h200-tiny")
    assert not analysis["synthetic"]
    shot = SCREENSHOTS / "campaign-h200-tiny.png"
    rendered, dom = open_in_chromium(page, shot)
    check_screenshot(shot, rendered)
    part = analysis["hosts"]["h200-device"]["workloads"]["short"]
    found = charts(dom)
    assert sorted(found) == ["latency-1", "pareto-0"]
    for chart in found.values():
        assert chart.find_all("svg", cls="main-svg"), "plotly drew no SVG"
    traces = dict(drawn_traces(found["pareto-0"]))
    series = expected_series(part)
    assert {k: v for k, v in traces.items() if k != campaign_html.FRONTIER} == series
    assert traces[campaign_html.FRONTIER] == expected_frontier(part) >= 2
    assert "tiny-nomem" not in " ".join(traces)  # crashed at start-up: no point to draw
    # Real SGLang: no SYNTHETIC anywhere, and the per-GPU axis (server_info names tp_size 1).
    assert "SYNTHETIC" not in rendered.dom
    assert "output tok/s per GPU" in found["pareto-0"].all_text()
    # Latency: one p50 and one p99 line per arm in each of the two panels; the legend shows them once.
    legend = [t.all_text() for t in found["latency-1"].find_all("text", cls="legendtext")]
    assert sorted(legend) == sorted(
        f"{a} {p}" for a in part["arms"] if part["arms"][a]["concurrencies"] for p in ("p50", "p99")
    )


def test_synthetic_page_says_so_on_every_chart(tmp_path):
    cells = campaign(
        [BASE, ("t02-mscclpp", "tier", tuple(1.12 * f for f in NOISE)), AA], host="sim-local", simulator=True
    )
    cells.append(cell("t01-piecewise-cuda-graph", 1, [], failure=CRASH, host="sim-local", simulator=True))
    ledger = write_ledger(tmp_path / "results" / "sim-local" / "ledger.jsonl", cells)
    page = tmp_path / "campaign-demo.html"
    analysis = write_page(page, ledger, "demo")
    assert analysis["synthetic"]
    shot = SCREENSHOTS / "campaign-demo-synthetic.png"
    rendered, dom = open_in_chromium(page, shot)
    check_screenshot(shot, rendered)
    (banner,) = dom.find_all("div", cls="synthetic-banner")
    assert banner.all_text().startswith("SYNTHETIC")
    found = charts(dom)
    assert len(found) == 2
    for chart in found.values():
        marks = [t.all_text() for t in chart.find_all("text", cls="annotation-text")]
        assert "SYNTHETIC" in marks, marks
        (title,) = chart.find_all("text", cls="gtitle")
        assert title.all_text().startswith("SYNTHETIC")
    part = analysis["hosts"]["sim-local"]["workloads"]["default"]
    traces = dict(drawn_traces(found["pareto-0"]))
    assert {k: v for k, v in traces.items() if k != campaign_html.FRONTIER} == expected_series(part)
    assert traces[campaign_html.FRONTIER] == expected_frontier(part)


def test_console_errors_and_network_fail_the_check(tmp_path):
    """The checks can fail: a page that logs, throws or adds a resource from the network is caught."""
    page = tmp_path / "broken.html"
    page.write_text(
        "<!DOCTYPE html><html><body><script>console.error('from the page');"
        "var i = document.createElement('img'); i.src = 'https://cdn.example.invalid/x.png'; document.body.append(i);"
        "undefinedFunction();</script></body></html>"
    )
    rendered = headless_chromium.load(page)
    text = "\n".join(rendered.console)
    assert "from the page" in text and "Uncaught ReferenceError: undefinedFunction" in text, text
    assert external_references(parse_dom(rendered.dom)) == [("img", "https://cdn.example.invalid/x.png")]
