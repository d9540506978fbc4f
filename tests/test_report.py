"""tools/report.py on ledgers written by the test (the real-pipeline report is in test_bench_ansible.py)."""

from __future__ import annotations

import importlib.util
import re
import struct
import sys
import zlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "plugins" / "module_utils"))

import sglang_ledger as ledger  # noqa: E402

_spec = importlib.util.spec_from_file_location("sglang_report", REPO / "tools" / "report.py")
report = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(report)

WORKLOAD = {
    "dataset_name": "random",
    "input_len": 1024,
    "output_len": 1024,
    "random_range_ratio": 1.0,
    "request_rate": "inf",
    "seed": 1,
}
# The seeds' baseline: output tok/s, total tok/s, and TPOT where the seeds give it.
SEEDS = {
    1: (9.17, 12.40, 108.0),
    10: (38.03, 82.73, 262.0),
    256: (352.79, 692.64, 700.0),
    1024: (1520.55, 3028.87, 523.0),
}


def points(values, status="ok"):
    rows = []
    for concurrency, (output, total, tpot) in values.items():
        rows.append(
            {
                "concurrency": concurrency,
                "repeat": 0,
                "num_prompts": max(2 * concurrency, 10),
                "status": status,
                "completed": max(2 * concurrency, 10),
                "failed": 0,
                "output_throughput": output,
                "total_throughput": total,
                "mean_tpot_ms": tpot,
            }
        )
    return rows


def write_ledger(results: Path, host: str, records: list[dict]) -> Path:
    path = results / host / "ledger.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    for record in records:
        ledger.append_record(str(path), record)
    return path


def make(tier, pts, simulator=False, failure=None, run="r", host="node-a"):
    return ledger.build_record(
        host=host,
        tier=tier,
        run_id=f"{run}-{tier}",
        workload=WORKLOAD,
        points=pts,
        failure=failure,
        provenance={"target_is_simulator": simulator, "model": {"model_path": "lukealonso/GLM-5-NVFP4"}},
    )


def table_rows(markdown: str, heading: str) -> dict[int, list[str]]:
    """Rows of the table under ``heading``, keyed by concurrency."""
    section = markdown.split(heading, 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0].isdigit():
            rows[int(cells[0])] = cells
    return rows


def png_text_chunks(data: bytes) -> dict[str, str]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    chunks, offset = {}, 8
    while offset < len(data):
        length, kind = struct.unpack(">I4s", data[offset : offset + 8])
        body = data[offset + 8 : offset + 8 + length]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[offset + 8 + length : offset + 12 + length])[0]
        if kind == b"tEXt":
            key, _, value = body.partition(b"\0")
            chunks[key.decode()] = value.decode("latin-1")
        if kind == b"iTXt":  # keyword, flag, method, language, translated keyword, UTF-8 text
            key, _, rest = body.partition(b"\0")
            compressed, rest = rest[0], rest[2:]
            _, _, rest = rest.partition(b"\0")
            _, _, text = rest.partition(b"\0")
            chunks[key.decode()] = (zlib.decompress(text) if compressed else text).decode("utf-8")
        if kind == b"IHDR":
            chunks["_size"] = struct.unpack(">II", body[:8])
        offset += 12 + length
    return chunks


@pytest.fixture
def results(tmp_path):
    folder = tmp_path / "results"
    faster = {c: (o * 1.12, t * 1.11, p * 0.9) for c, (o, t, p) in SEEDS.items()}
    noisy = {c: (o * 1.01, t * 0.99, p) for c, (o, t, p) in SEEDS.items()}
    write_ledger(
        folder,
        "node-a",
        [
            make("baseline", points(SEEDS)),
            make("t02-mscclpp", points(faster)),
            make("t05-allreduce-fusion", points(noisy)),
            make(
                "t01-piecewise-cuda-graph",
                [],
                failure={
                    "class": "dynamo_fp4_jit",
                    "step": "start",
                    "message": "torch._dynamo.exc.Unsupported: allocate_lock",
                },
            ),
        ],
    )
    return folder


def run_report(tmp_path, results, *extra):
    md, png = tmp_path / "out" / "report.md", tmp_path / "out" / "throughput.png"
    code = report.main(
        [
            "--results-dir",
            str(results),
            "--out-md",
            str(md),
            "--out-png",
            str(png),
            "--tiers",
            str(REPO / "data" / "tiers.yml"),
            "--settings",
            str(REPO / "data" / "benchmark.yml"),
            "--threshold",
            "5",
            *extra,
        ]
    )
    assert code == 0
    return md.read_text(), png.read_bytes()


def test_tables_come_from_the_ledger(tmp_path, results):
    markdown, _ = run_report(tmp_path, results, "--no-tier-docs")
    base = table_rows(markdown, "### baseline")
    assert sorted(base) == [1, 10, 256, 1024]
    for concurrency, (output, total, tpot) in SEEDS.items():
        row = base[concurrency]
        assert row[1:4] == [f"{output:,.2f}", f"{total:,.2f}", f"{tpot:,.2f}"]
        assert row[4:7] == ["—", "—", "—"]  # the first baseline has nothing to compare with
    faster = table_rows(markdown, "### t02-mscclpp")
    for concurrency, (output, _total, tpot) in SEEDS.items():
        row = faster[concurrency]
        assert row[1] == f"{output * 1.12:,.2f}"
        assert row[4] == f"{(output * 1.12 - output) / output * 100:+.1f}%"
        assert row[6] == f"{(tpot * 0.9 - tpot) / tpot * 100:+.1f}%"
        assert row[7] == "better / better / better"
    noisy = table_rows(markdown, "### t05-allreduce-fusion")
    assert all(row[7] == "within noise / within noise / within noise" for row in noisy.values())
    assert "SYNTHETIC" not in markdown
    assert "| t01-piecewise-cuda-graph | r-t01-piecewise-cuda-graph |" in markdown
    assert "`dynamo_fp4_jit`" in markdown
    status = {
        m.group(1): m.group(2) for m in re.finditer(r"^\| (\S+) \| (.+) \|$", markdown.split("## Tier status")[1], re.M)
    }
    assert status["baseline"] == "tested" and status["t02-mscclpp"] == "tested"
    assert status["t01-piecewise-cuda-graph"] == "blocked (`dynamo_fp4_jit`)"
    assert status["t11-column-major-xshare"] == "untested"


def test_png_is_a_real_chart(tmp_path, results):
    _, png = run_report(tmp_path, results, "--no-tier-docs")
    chunks = png_text_chunks(png)
    width, height = chunks["_size"]
    assert width >= 800 and height >= 300 and len(png) > 20_000
    assert "SYNTHETIC" not in "".join(v for k, v in chunks.items() if k != "_size")


def test_synthetic_records_are_labelled(tmp_path):
    folder = tmp_path / "results"
    write_ledger(folder, "sim-local", [make("baseline", points(SEEDS), simulator=True, host="sim-local")])
    markdown, png = run_report(tmp_path, folder, "--no-tier-docs")
    assert markdown.startswith("# SGLang throughput report — SYNTHETIC")
    assert "SYNTHETIC — these numbers come from the SGLang-protocol simulator" in markdown
    assert "## Host sim-local — SYNTHETIC" in markdown
    chunks = png_text_chunks(png)
    assert chunks["Title"].startswith("SYNTHETIC") and "SYNTHETIC" in chunks["Description"]


def test_tier_status_blocks(tmp_path, results, capsys):
    docs = tmp_path / "docs"
    docs.mkdir()
    page = "# {tier}\n\nIntro.\n\n<!-- status:begin -->\nold status\n<!-- status:end -->\n\nMore text.\n"
    for tier in ("baseline", "t01-piecewise-cuda-graph", "t03-single-batch-overlap"):
        (docs / f"{tier}.md").write_text(page.format(tier=tier))
    (docs / "t02-mscclpp.md").write_text("# t02\n\nNo markers here.\n")
    run_report(tmp_path, results, "--tier-docs", str(docs))
    baseline = (docs / "baseline.md").read_text()
    assert "old status" not in baseline and baseline.endswith("More text.\n") and "Intro." in baseline
    block = baseline.split("<!-- status:begin -->")[1].split("<!-- status:end -->")[0]
    assert "**tested** on node-a" in block and "1,520.55 tok/s at concurrency 1024" in block
    blocked = (docs / "t01-piecewise-cuda-graph.md").read_text()
    assert "**blocked** on node-a: `dynamo_fp4_jit` at step start" in blocked
    assert "**untested** on node-a" in (docs / "t03-single-batch-overlap.md").read_text()
    assert (docs / "t02-mscclpp.md").read_text() == "# t02\n\nNo markers here.\n"
    assert "t02-mscclpp.md has no <!-- status:begin -->" in capsys.readouterr().err


def test_second_run_changes_nothing(tmp_path, results, capsys):
    run_report(tmp_path, results, "--no-tier-docs")
    capsys.readouterr()
    run_report(tmp_path, results, "--no-tier-docs")
    assert "changed:" not in capsys.readouterr().out


def test_no_records(tmp_path):
    markdown, png = run_report(tmp_path, tmp_path / "empty", "--no-tier-docs")
    assert "No ledger records found" in markdown
    assert png.startswith(b"\x89PNG")
