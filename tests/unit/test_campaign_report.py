"""tools/campaign_report.py on ledgers written by the test (cells built with the real
sglang_ledger.build_record plus the campaign key), and its status blocks on tier pages generated
by tools/render_tier_docs.py into a temp folder."""

from __future__ import annotations

import json
import re
from pathlib import Path

import campaign_report
import pytest
import render_tier_docs
from helpers import records
from helpers.paths import REPO
from helpers.records import AA, BASE, CRASH, NOISE, calibration_cell, campaign, cell, write_ledger
from helpers.reports import png_text_chunks

BETTER = ("t02-mscclpp", "tier", tuple(1.12 * f for f in reversed(NOISE)))
SAME = ("t05-allreduce-fusion", "tier", NOISE)


def run(tmp_path, ledgers, *extra, name="demo"):
    out = tmp_path / "out"
    args = [a for path in ledgers for a in ("--ledger", str(path))]
    code = campaign_report.main(
        [*args, "--campaign", name, "--out-dir", str(out), "--tiers", str(REPO / "data" / "tiers.yml"), *extra]
    )
    md, png = out / f"campaign-{name}.md", out / f"campaign-{name}.png"
    return code, (md.read_text() if md.exists() else None), (png.read_bytes() if png.exists() else None)


def tables(markdown: str) -> list[list[str]]:
    """Every markdown table, as its lines."""
    found, current = [], []
    for line in markdown.splitlines():
        if line.startswith("|"):
            current.append(line)
        elif current:
            found.append(current)
            current = []
    return found + ([current] if current else [])


def rows(markdown: str, heading: str) -> list[list[str]]:
    """The cells of the rows of the first table under the heading that starts with ``heading``."""
    section = markdown.split(heading, 1)[1].split("\n#", 1)[0]
    (first, *_) = tables(section)
    return [[c.strip() for c in line.strip().strip("|").split("|")] for line in first[2:]]


@pytest.fixture
def node_a(tmp_path):
    cells = campaign([BASE, BETTER, SAME, AA], warmup={"seconds": 3.2, "per_concurrency": []})
    cells += [cell("t01-piecewise-cuda-graph", r, [], failure=CRASH) for r in (1, 2, 3)]
    return write_ledger(tmp_path / "results" / "node-a" / "ledger.jsonl", cells)


def test_report_tables(tmp_path, node_a):
    code, markdown, png = run(tmp_path, [node_a])
    assert code == 0
    assert markdown.startswith("# Campaign `demo`\n") and "SYNTHETIC" not in markdown
    status = {r[0]: r[1] for r in rows(markdown, "## Tier status")}
    assert status["t02-mscclpp"].startswith("better (4 better of 4)")
    assert status["t05-allreduce-fusion"].startswith("indistinguishable")
    assert status["t01-piecewise-cuda-graph"] == "crashed (`dynamo_fp4_crash` in 3 of 3 cells)"
    assert status["baseline"] == "baseline (reference)"
    assert status["baseline~aa"].startswith("indistinguishable")
    assert status["t06-l2-cache-pinning"] == "not runnable"
    assert status["t04-ep8"] == "not in campaign"
    # Order: baseline, A/A, the campaign's tiers in catalog order, then the catalog's other tiers.
    assert list(status)[:6] == [
        "baseline",
        "baseline~aa",
        "t01-piecewise-cuda-graph",
        "t02-mscclpp",
        "t05-allreduce-fusion",
        "t03-single-batch-overlap",
    ]

    verdicts = {(r[0], r[1]): r for r in rows(markdown, "### Verdicts against `baseline`: `node-a`")}
    better = verdicts[("t02-mscclpp", "1024")]
    assert better[2] == "5 / 5"
    assert re.fullmatch(r"\+12\.0% \[\+\d+\.\d%, \+\d+\.\d%\] better", better[3])
    assert re.fullmatch(r"-10\.7% \[-\d+\.\d%, -\d+\.\d%\] better", better[4])  # TPOT down is better
    assert verdicts[("t05-allreduce-fusion", "1")][3].endswith("indistinguishable")
    assert verdicts[("t01-piecewise-cuda-graph", "—")][3] == "— (no ok point)"

    floor = markdown.split("### A/A noise floor: `node-a`", 1)[1].split("\n###", 1)[0]
    assert "`baseline~aa` (tier `baseline`) against `baseline`: holds" in floor
    assert "Simultaneous 95% intervals over the 4 comparisons of this arm (each at 98.75%)." in floor
    assert "- `t02-mscclpp`: simultaneous 95% intervals over the 4 comparisons of this arm (each at 98.75%)." in (
        markdown
    )
    assert "Δ output tok/s [simultaneous 95% CI], verdict" in markdown
    assert "†" not in markdown and campaign_report.WIDE_NOTE not in markdown  # 5 repeats: no n = 2 note
    assert all(r[1].endswith("indistinguishable") for r in rows(markdown, "### A/A noise floor"))

    medians = {(r[0], r[1]): r for r in rows(markdown, "### Medians of the repeats")}
    assert medians[("baseline", "1024")][2].startswith("1,520.55 [") and medians[("baseline", "1024")][2].endswith(
        "n=5"
    )
    percentiles = {(r[0], r[1]): r for r in rows(markdown, "### TTFT and TPOT percentiles")}
    assert percentiles[("baseline", "1")][2].startswith("280.00 [")  # median TTFT ms, p50
    warmup = {r[0]: r for r in rows(markdown, "### Warm-up")}
    assert warmup["baseline"][2] == "3.20 [3.20–3.20] n=5"
    failed = rows(markdown, "### Failed and excluded cells")
    assert ["t01-piecewise-cuda-graph/default/r1", "1", "`dynamo_fp4_crash`", "start"] == failed[0][:4]

    chunks = png_text_chunks(png)
    width, height = chunks["_size"]
    assert width >= 1200 and height >= 600 and len(png) > 50_000
    assert "SYNTHETIC" not in chunks["Title"] and "Description" not in chunks


def test_synthetic_title_every_table_and_png(tmp_path):
    path = write_ledger(
        tmp_path / "results" / "sim-local" / "ledger.jsonl",
        campaign([BASE, BETTER, AA], host="sim-local", simulator=True)
        + [cell("t01-piecewise-cuda-graph", 1, [], failure=CRASH, host="sim-local", simulator=True)],
    )
    code, markdown, png = run(tmp_path, [path])
    assert code == 0
    assert markdown.startswith("# Campaign `demo` — SYNTHETIC (simulator)")
    assert "## Host sim-local — SYNTHETIC" in markdown
    found = tables(markdown)
    # status, output quality, noise floors, A/A, verdicts, precision, medians, percentiles, warm-up, failed
    assert len(found) == 10
    assert all("SYNTHETIC" in t[0].split("|")[1] for t in found), [t[0] for t in found]
    chunks = png_text_chunks(png)
    assert chunks["Title"].startswith("SYNTHETIC") and "SYNTHETIC" in chunks["Description"]


def test_two_hosts_get_their_own_verdicts(tmp_path):
    tier = ("t03-single-batch-overlap", "tier", tuple(1.10 * f for f in NOISE))
    fast_base = ("baseline", "baseline", tuple(1.20 * f for f in NOISE))
    a = write_ledger(tmp_path / "results" / "node-a" / "ledger.jsonl", campaign([BASE, tier], host="node-a"))
    b = write_ledger(tmp_path / "results" / "node-b" / "ledger.jsonl", campaign([fast_base, tier], host="node-b"))
    code, markdown, _ = run(tmp_path, [a, b])
    assert code == 0
    status = {r[0]: r[1:] for r in rows(markdown, "## Tier status")}
    assert status["t03-single-batch-overlap"][0].startswith("better")
    assert status["t03-single-batch-overlap"][1].startswith("**worse**")
    on_b = {(r[0], r[1]): r for r in rows(markdown, "### Verdicts against `baseline`: `node-b`")}
    assert on_b[("t03-single-batch-overlap", "1024")][3].startswith("-8.3% [")
    assert "No A/A arm ran here" in markdown


def test_one_repeat_says_no_verdict(tmp_path):
    path = write_ledger(tmp_path / "l" / "node-a" / "ledger.jsonl", campaign([BASE, BETTER], repeats=1))
    _, markdown, _ = run(tmp_path, [path])
    status = {r[0]: r[1] for r in rows(markdown, "## Tier status")}
    assert status["t02-mscclpp"] == "tested, no verdict (one repeat: no verdict possible)"
    verdicts = {(r[0], r[1]): r for r in rows(markdown, "### Verdicts against")}
    # r1 of t02 is 1.12 x 0.99 of the baseline's r1.
    assert verdicts[("t02-mscclpp", "1024")][3] == "+10.9% (one repeat: no verdict possible) no verdict"


def test_two_repeats_have_wide_intervals_and_no_dagger(tmp_path):
    # The campaign default, 2 repeats: +12 % with ±1-2 % noise whose spreads overlap is not shown
    # (honestly), +30 % is; the note says why the intervals are wide. No † mark any more.
    big = ("t03-single-batch-overlap", "tier", tuple(1.30 * f for f in NOISE))
    path = write_ledger(tmp_path / "l" / "node-a" / "ledger.jsonl", campaign([BASE, BETTER, big], repeats=2))
    _, markdown, _ = run(tmp_path, [path])
    verdicts = {(r[0], r[1]): r for r in rows(markdown, "### Verdicts against")}
    assert re.fullmatch(r"\+10\.9% \[-\d+\.\d%, \+\d+\.\d%\] indistinguishable", verdicts[("t02-mscclpp", "1024")][3])
    assert re.fullmatch(
        r"\+30\.0% \[\+\d+\.\d%, \+\d+\.\d%\] better", verdicts[("t03-single-batch-overlap", "1024")][3]
    )
    assert campaign_report.WIDE_NOTE in markdown and "†" not in markdown


def test_tier_pages_get_the_campaign_verdict(tmp_path, node_a, tier_pages, capsys):
    generated = {page.name: page.read_text() for page in tier_pages.glob("*.md")}
    capsys.readouterr()
    code, _, _ = run(tmp_path, [node_a], "--tier-docs", str(tier_pages))
    assert code == 0
    changed = sorted(
        Path(line.split(": ", 1)[1]).name
        for line in capsys.readouterr().out.splitlines()
        if line.startswith("changed: ") and str(tier_pages) in line
    )
    # Only the tiers the campaign ran; the others keep what they had.
    assert changed == ["baseline.md", "t01-piecewise-cuda-graph.md", "t02-mscclpp.md", "t05-allreduce-fusion.md"]

    def block(name):
        text = (tier_pages / name).read_text()
        head, tail = generated[name].split(render_tier_docs.STATUS_PLACEHOLDER)
        assert text.startswith(head) and text.endswith(tail), name  # only the block changed
        return render_tier_docs.status_blocks(text)[name.removesuffix(".md")]

    t02 = block("t02-mscclpp.md")
    assert t02.startswith("- **better** in campaign `demo` on node-a, arm `t02-mscclpp`: workload `default`: ")
    assert re.search(
        r"output tok/s at concurrency 1024 \+12\.0% \[\+\d+\.\d%, \+\d+\.\d%\] \(better, 5 vs 5 repeats\)", t02
    )
    assert "`dynamo_fp4_crash` ×3 of 3 cells" in block("t01-piecewise-cuda-graph.md")
    assert "**indistinguishable**" in block("t05-allreduce-fusion.md")
    baseline = block("baseline.md")
    assert "**baseline** in campaign `demo` on node-a, arm `baseline`" in baseline
    assert re.search(r"A/A noise floor holds, widest interval \[-\d\.\d%, \+\d\.\d%\] \(.+ at c=\d+\)", baseline)
    assert "arm `baseline~aa`" in baseline
    assert (tier_pages / "t03-single-batch-overlap.md").read_text() == generated["t03-single-batch-overlap.md"]
    # The generator keeps what the report wrote; a second report changes nothing, --check agrees.
    assert render_tier_docs.main(["--out-dir", str(tier_pages), "--check"]) == 0
    capsys.readouterr()
    run(tmp_path, [node_a], "--tier-docs", str(tier_pages))
    assert "changed:" not in capsys.readouterr().out
    assert run(tmp_path, [node_a], "--tier-docs", str(tier_pages), "--check")[0] == 0


def test_synthetic_tier_block(tmp_path, tier_pages):
    path = write_ledger(
        tmp_path / "l" / "sim-local" / "ledger.jsonl", campaign([BASE, BETTER], host="sim-local", simulator=True)
    )
    run(tmp_path, [path], "--tier-docs", str(tier_pages))
    text = render_tier_docs.status_blocks((tier_pages / "t02-mscclpp.md").read_text())["t02-mscclpp"]
    assert "on sim-local (SYNTHETIC simulator)" in text


def test_check_writes_nothing_and_fails_when_out_of_date(tmp_path, node_a, capsys):
    code, markdown, png = run(tmp_path, [node_a], "--check")
    assert (code, markdown, png) == (1, None, None)
    assert f"out of date: {tmp_path / 'out' / 'campaign-demo.md'}" in capsys.readouterr().out
    assert run(tmp_path, [node_a])[0] == 0
    assert run(tmp_path, [node_a], "--check")[0] == 0
    write_ledger(node_a, [cell("t02-mscclpp", 6, [], failure=CRASH)])
    assert run(tmp_path, [node_a], "--check")[0] == 1


def test_other_campaigns_and_bad_arguments(tmp_path, node_a, capsys):
    code, markdown, _ = run(tmp_path, [node_a], name="nope")
    assert code == 0 and "No cell of campaign `nope` found" in markdown
    with pytest.raises(SystemExit):
        campaign_report.main(["--ledger", str(tmp_path / "missing.jsonl"), "--campaign", "demo", "--out-dir", "x"])
    assert "no such ledger" in capsys.readouterr().err
    # One host's ledger missing: the others are reported, the missing one is named.
    code, markdown, _ = run(tmp_path, [node_a, tmp_path / "node-b" / "ledger.jsonl"])
    assert code == 0 and "## Host node-a" in markdown
    assert f"no such ledger: {tmp_path / 'node-b' / 'ledger.jsonl'} (its host is missing" in markdown
    assert "warning: no such ledger" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        campaign_report.main(["--ledger", str(node_a), "--campaign", "../x", "--out-dir", "x"])


def test_noise_floor_of_each_host_in_one_table(tmp_path):
    shifted = ("baseline~aa", "aa", tuple(1.15 * f for f in NOISE))
    a = write_ledger(tmp_path / "results" / "node-a" / "ledger.jsonl", campaign([BASE, AA], host="node-a"))
    b = write_ledger(tmp_path / "results" / "node-b" / "ledger.jsonl", campaign([BASE, shifted], host="node-b"))
    c = write_ledger(tmp_path / "results" / "node-c" / "ledger.jsonl", campaign([BASE], host="node-c", repeats=2))
    _, markdown, _ = run(tmp_path, [a, b, c])
    # Near the top: right after the tier status, before any host's own section.
    assert markdown.index("## Each host's noise floor") < markdown.index("## Host node-a")
    floors = {r[0]: r for r in rows(markdown, "## Each host's noise floor")}
    assert sorted(floors) == ["node-a", "node-b", "node-c"]
    assert floors["node-a"][1:5] == [
        "default",
        "`baseline~aa`",
        "5 / 5",
        "holds: all 4 decided comparisons indistinguishable",
    ]
    assert re.fullmatch(r"\[-\d\.\d%, \+\d\.\d%\] \((output tok/s|TPOT) at c=(1|1024)\)", floors["node-a"][5])
    assert floors["node-a"][6] == "95% over 4 (each 98.75%)"
    assert floors["node-b"][4].startswith("**FAILS**: a verdict where there must be none (output tok/s at c=1 better")
    assert floors["node-c"][2:5] == ["—", "—", "no A/A arm: no measured noise floor"]


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data) if not isinstance(data, str) else data)
    return path


def test_node_calibration_section(tmp_path):
    # Calibration records in the ledger (node-a ran slower then) and the playbook's calibration file.
    cells = [calibration_cell("node-a", 0.7), *campaign([BASE, BETTER, AA])]
    ledger_path = write_ledger(tmp_path / "results" / "node-a" / "ledger.jsonl", cells)
    calibration = write_json(tmp_path / "results" / "calibration-demo.json", records.CALIBRATION_FILE)
    code, markdown, _ = run(tmp_path, [ledger_path], "--calibration", str(calibration))
    assert code == 0
    section = markdown.split("## Node calibration", 1)[1].split("\n## ", 1)[0]
    hosts = {r[0]: r for r in rows(markdown, "## Node calibration")}
    assert list(hosts) == ["node-a", "node-b", "node-c", "fleet median (of the hosts above)"]
    assert hosts["node-b"] == [
        "node-b",
        "90.00",
        "610.00",
        "-12.5%",
        "HW Slowdown",
        "ok",
        "**flagged**",
        "**excluded**",
        "12.5% below the fleet median (max 10%); HW Slowdown",
    ]
    assert hosts["node-a"][4:8] == ["none", "nvidia-smi not found", "no", "no"]
    assert hosts["fleet median (of the hosts above)"][1:3] == ["92.50", "700.00"]
    assert "a host is flagged beyond ±10% deviation" in section
    assert "- calibration of host node-d: not an object; left out" in section
    # The ledger's calibration record is listed here, and only here: the baseline has its 5 repeats.
    (listed,) = rows(section, "Calibration records in the ledgers")
    assert listed[:3] == ["node-a", "calibration/default/r1", "success"]
    assert listed[3].startswith("c=1: 6.42; c=1024: 1,064.38")
    assert markdown.count("calibration/default/r1") == 1
    medians = {(r[0], r[1]): r for r in rows(markdown, "### Medians of the repeats")}
    assert medians[("baseline", "1024")][2].startswith("1,520.55 [") and medians[("baseline", "1024")][2].endswith(
        "n=5"
    )
    status = {r[0]: r[1] for r in rows(markdown, "## Tier status")}
    assert status["t02-mscclpp"].startswith("better (4 better of 4)")
    assert status["baseline~aa"].startswith("indistinguishable")


def test_the_first_start_on_a_host_is_flagged_or_said_taken_by_the_calibration(tmp_path):
    cells = campaign([BASE, BETTER, AA])
    ledger_path = write_ledger(tmp_path / "results" / "node-a" / "ledger.jsonl", cells)
    code, markdown, _ = run(tmp_path, [ledger_path])
    assert code == 0
    host = markdown.split("## Host node-a", 1)[1]
    assert f"**First start on this host (a cold node): cell `{cells[0]['campaign']['cell']}`**" in host
    ledger_path.unlink()
    ledger_path = write_ledger(ledger_path, [calibration_cell("node-a", 0.7), *cells])
    code, markdown, _ = run(tmp_path, [ledger_path])
    assert code == 0 and "taken by the calibration cell" in markdown.split("## Host node-a", 1)[1]
    assert "**First start on this host" not in markdown


def test_excluded_host_is_marked_and_calibration_shown_without_a_file(tmp_path):
    throttled = {**records.CALIBRATION_FILE["hosts"]["node-b"], "reasons": ["throttles"]}
    data = {**records.CALIBRATION_FILE, "hosts": {"node-a": throttled}}
    calibration = write_json(tmp_path / "calibration.json", data)
    path = write_ledger(tmp_path / "results" / "node-a" / "ledger.jsonl", campaign([BASE, AA], repeats=2))
    _, markdown, _ = run(tmp_path, [path], "--calibration", str(calibration))
    host = markdown.split("## Host node-a", 1)[1]
    assert host.startswith("\n\n**The node calibration excluded this host** (throttles).")
    # Without --calibration, the ledger's calibration records still get the section; without either, none.
    path = write_ledger(tmp_path / "other" / "node-a" / "ledger.jsonl", [calibration_cell("node-a", 1.0)])
    _, markdown, _ = run(tmp_path, [path])
    assert "No cell of campaign `demo` found" in markdown and "## Node calibration" in markdown
    assert "calibration/default/r1" in markdown
    _, markdown, _ = run(tmp_path, [write_ledger(tmp_path / "x" / "node-a" / "ledger.jsonl", campaign([BASE]))])
    assert "## Node calibration" not in markdown and "## SLO search" not in markdown


def slo_lines(path: Path, *lines: dict) -> Path:
    return write_json(path, "".join(json.dumps(line) + "\n" for line in lines))


def test_slo_search_section(tmp_path):
    path = write_ledger(tmp_path / "results" / "node-a" / "ledger.jsonl", campaign([BASE, AA], repeats=2))
    # node-a: the module's record lines (host inside); node-b: bare searches, the host from the folder.
    record = {"kind": "slo_search", "host": "node-a", "status": "success", "failure": None,
              "slo_search": records.SEARCH}
    a = slo_lines(tmp_path / "results" / "node-a" / "slo.jsonl", record)
    bare = {k: v for k, v in records.SEARCH.items() if k not in ("outcome",)}
    b = slo_lines(
        tmp_path / "results" / "node-b" / "slo.jsonl",
        {**bare, "tier": "t02-mscclpp", "answer": None, "bounded": False, "reason": "1 fails"},
        {**bare, "tier": "t05-allreduce-fusion", "answer": 32, "bounded": False, "bracket": None},
    )
    code, markdown, _ = run(tmp_path, [path], "--slo", str(a), "--slo", str(b))
    assert code == 0
    section = markdown.split("## SLO search (goodput)", 1)[1]
    assert section.startswith(" — SYNTHETIC (simulator)")
    on_a = section.split("### SLO search: host `node-a`", 1)[1].split("\n###", 1)[0]
    assert "Tier `baseline`, SLO `p99_ttft_ms <= 420`, concurrency at request rate inf" in on_a
    assert "**answer 11 (11 meets it, 12 does not)**" in on_a
    probes = rows(on_a, "Tier `baseline`")
    assert probes[0] == ["0", "1", "8", "25.40", "yes", "ok"]
    assert probes[1] == ["1", "32", "—", "—", "**no**", "failed (bench_timeout: past 60 s)"]
    assert tables(on_a)[0][0].startswith("| Probe (SYNTHETIC) | Concurrency |")
    on_b = section.split("### SLO search: host `node-b`", 1)[1]
    assert "Tier `t02-mscclpp`" in on_b and "**answer none meets it (not even the low end, 1)**" in on_b
    assert "**answer 32, not bounded (the high end still meets it: raise high)**" in on_b


def test_missing_and_empty_side_files_are_warnings(tmp_path, capsys):
    path = write_ledger(tmp_path / "results" / "node-a" / "ledger.jsonl", campaign([BASE, AA], repeats=2))
    empty = write_json(tmp_path / "results" / "node-b" / "slo.jsonl", "")
    torn = write_json(tmp_path / "results" / "node-c" / "slo.jsonl", json.dumps(records.SEARCH) + "\n{torn\n")
    code, markdown, _ = run(
        tmp_path,
        [path],
        "--calibration",
        str(tmp_path / "nope.json"),
        "--slo",
        str(tmp_path / "missing" / "slo.jsonl"),
        "--slo",
        str(empty),
        "--slo",
        str(torn),
    )
    assert code == 0
    assert f"> warning: no calibration file at {tmp_path / 'nope.json'}: the node calibration is not shown" in markdown
    assert f"> warning: no SLO search file at {tmp_path / 'missing' / 'slo.jsonl'}" in markdown
    assert f"> warning: the SLO search file {empty} is empty" in markdown
    assert f"> warning: {torn}:2: not JSON" in markdown
    assert "### SLO search: host `node-c`" in markdown  # the good line of that file is still shown
    err = capsys.readouterr().err
    assert "warning: no calibration file at" in err and "warning: no SLO search file at" in err
    empty_calibration = write_json(tmp_path / "empty.json", " ")
    _, markdown, _ = run(tmp_path, [path], "--calibration", str(empty_calibration), "--slo", str(empty))
    assert f"> warning: the calibration file {empty_calibration} is empty" in markdown
    assert "No SLO search to show." in markdown


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "—"), (12.04, "+12.0%"), (-99.99999, "-100.0%"), (999.9, "+999.9%"), (2.687e16, "×2.69e+14")],
)
def test_fmt_pct(value, text):
    assert campaign_report.fmt_pct(value) == text


def test_each_arm_says_how_precisely_its_repeats_measured_it(tmp_path):
    cells = campaign([BASE, BETTER, AA])
    target = {"target_pct": 2.0, "max_repeats": 5, "metric": "output_throughput", "confidence": 0.95}
    for entry in cells:
        entry["campaign"]["precision"] = target
    code, markdown, _ = run(tmp_path, [write_ledger(tmp_path / "results" / "node-a" / "ledger.jsonl", cells)])
    assert code == 0
    table = {r[0]: r[1:] for r in rows(markdown, "### Precision of the repeats")}
    assert set(table) == {"baseline", "t02-mscclpp", "baseline~aa"}
    for role, repeats, interval, shown_target, ended, smallest in table.values():
        assert repeats == "5" and shown_target == "±2.0% (max 5)"
        width = float(interval.strip("±%"))
        # Five draws of a few percent of noise: wider than 2 %, so the repeats ended at max_repeats.
        assert (ended == "target met") is (width <= 2.0) and (ended == "max_repeats reached") is (width > 2.0)
        assert (smallest == "—") is (role == "baseline")
    assert table["baseline"][2] != "— (one repeat)"
