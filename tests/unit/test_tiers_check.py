"""tools/check_tiers.py (tiers x SGLang versions matrix) and tools/render_tier_docs.py."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import check_tiers
import pytest
import render_tier_docs
import yaml
from helpers.paths import REPO


def run_check(*args):
    return check_tiers.run(check_tiers.build_parser().parse_args(list(args)))


@pytest.fixture(scope="module")
def matrix():
    return run_check()


def test_matrix_pinned_passes(matrix):
    code, result = matrix
    assert code == 0
    assert result["pinned"] == "0.5.10.post1" and result["versions"] == ["0.5.10.post1", "0.5.17", "0.5.23"]
    catalog = yaml.safe_load((REPO / "data" / "tiers.yml").read_text())
    assert list(result["cells"]) == list(catalog["tiers"])
    for tid, row in result["cells"].items():
        expected = "OK" if catalog["tiers"][tid]["runnable"] else "n/a"
        assert row["0.5.10.post1"]["status"] == expected, (tid, row["0.5.10.post1"])


def test_matrix_comparison_version_fails_with_did_you_mean(matrix):
    _, result = matrix
    cell = result["cells"]["baseline"]["0.5.23"]
    assert cell["status"] == "FAIL"
    assert any("did you mean --dsa-decode-backend?" in e for e in cell["errors"])
    assert any(w.startswith("--disable-cuda-graph: deprecated in SGLang 0.5.23") for w in cell["warnings"])
    assert result["cells"]["t06-l2-cache-pinning"]["0.5.23"]["status"] == "n/a"


def test_strict_and_pinned_switch_the_exit_code():
    assert run_check("--strict")[0] == 1
    assert run_check("--pinned", "0.5.23")[0] == 1
    assert run_check("--tier", "t06-l2-cache-pinning", "--strict")[0] == 0  # n/a is not a failure


def test_cli_text_output_and_exit_status():
    proc = subprocess.run(
        [sys.executable, str(REPO / "tools" / "check_tiers.py")], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split()[:3] == ["tier", "0.5.10.post1", "(pinned)"]
    assert "pinned SGLang 0.5.10.post1: every runnable tier passes" in proc.stdout
    assert "[0.5.23] baseline: FAIL" in proc.stdout


def copy_data(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    shutil.copytree(REPO / "data", data, ignore=shutil.ignore_patterns("benchmark.yml"))
    return data


def test_invalid_catalog_exits_2_naming_the_field(tmp_path, capsys):
    data = copy_data(tmp_path)
    catalog = yaml.safe_load((data / "tiers.yml").read_text())
    catalog["tiers"]["t04-ep8"]["level"] = 5
    (data / "tiers.yml").write_text(yaml.safe_dump(catalog, sort_keys=False))
    assert check_tiers.main(["--data-dir", str(data), "--manifest-dir", str(data / "flag_manifests")]) == 2
    assert "tier 't04-ep8': field 'level' must be one of 1,2,3 (got 5)" in capsys.readouterr().out


def test_pinned_failure_exits_1(tmp_path, capsys):
    data = copy_data(tmp_path)
    catalog = yaml.safe_load((data / "tiers.yml").read_text())
    catalog["tiers"]["t04-ep8"]["flags_add"]["--ep-size"] = 4  # flashinfer_cutlass needs 1 or --tp-size
    (data / "tiers.yml").write_text(yaml.safe_dump(catalog, sort_keys=False))
    assert check_tiers.main(["--data-dir", str(data), "--manifest-dir", str(data / "flag_manifests")]) == 1
    out = capsys.readouterr().out
    assert "[0.5.10.post1 pinned] t04-ep8: FAIL" in out and "[flashinfer-cutlass-ep-size]" in out


def test_unknown_crash_class_is_reported(tmp_path, capsys):
    data = copy_data(tmp_path)
    catalog = yaml.safe_load((data / "tiers.yml").read_text())
    catalog["tiers"]["t04-ep8"]["expected_failure_class"] = "no_such_class"
    (data / "tiers.yml").write_text(yaml.safe_dump(catalog, sort_keys=False))
    assert check_tiers.main(["--data-dir", str(data), "--manifest-dir", str(data / "flag_manifests")]) == 2
    assert "'no_such_class' is not a class in data/crash_signatures.yml" in capsys.readouterr().out


# --------------------------------------------------------------------------- tier pages


def test_committed_tier_pages_are_up_to_date():
    assert render_tier_docs.main(["--check"]) == 0


def test_pages_keep_the_measured_status_block(tmp_path):
    out = tmp_path / "tiers"
    assert render_tier_docs.main(["--out-dir", str(out)]) == 0
    page = out / "t04-ep8.md"
    text = page.read_text()
    assert "<!-- status:begin tier=t04-ep8 -->\n" in text and text.rstrip().endswith("<!-- status:end -->")
    measured = "| concurrency | output tok/s |\n|---|---|\n| 1024 | 1234.5 |\n"
    page.write_text(text.replace(render_tier_docs.STATUS_PLACEHOLDER, measured))
    assert render_tier_docs.main(["--out-dir", str(out), "--check"]) == 0  # the block is not the generator's
    (out / "t02-mscclpp.md").write_text("stale\n")
    assert render_tier_docs.main(["--out-dir", str(out), "--check"]) == 1
    assert render_tier_docs.main(["--out-dir", str(out)]) == 0
    assert measured in page.read_text()  # survived a re-render
    assert render_tier_docs.STATUS_PLACEHOLDER in (out / "t02-mscclpp.md").read_text()


def test_index_lists_every_tier_and_constraint(tmp_path):
    out = tmp_path / "tiers"
    render_tier_docs.main(["--out-dir", str(out)])
    index = (out / "README.md").read_text()
    catalog = yaml.safe_load((REPO / "data" / "tiers.yml").read_text())
    for tid in catalog["tiers"]:
        assert f"]({tid}.md)" in index
    for con in catalog["constraints"]:
        assert f"`{con['id']}`" in index
    t06 = (out / "t06-l2-cache-pinning.md").read_text()
    assert "## Work needed before it can run" in t06 and "| Runnable | no |" in t06
    t01 = (out / "t01-piecewise-cuda-graph.md").read_text()
    assert "| 0.5.10.post1 (pinned) | OK |" in t01 and "| 0.5.23 | FAIL |" in t01
    assert json.dumps(catalog["tiers"]["t01-piecewise-cuda-graph"]["expected_failure_class"]).strip('"') in t01
