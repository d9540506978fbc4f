"""Replays of the H200 recordings of issue 24 (real SGLang 0.5.17, tests/fixtures/real-sglang/0.5.17-h200-tp1):

* perf/: experiment.yml against the same cycle by hand (tools/perf_seeds_cycle.sh), alternating, three runs a
  side (PHASE=perf, tools/device/perf_real.py). The playbook output as it came (each line stamped with its
  arrival time), bench_serving's own output files of the by-hand runs and the ledger are fed through today's
  perf_real.py and perf_lifecycle.py functions, which must give the figures perf.json holds.
* phase-int/: SIGINT to the playbook's process group 3 s into the benchmark (tools/device/interrupt_real.sh):
  the playbook's failed result goes through today's sglang_failure, the ledger through today's validation.
"""

from __future__ import annotations

import json
import re
import sys
import types

import pytest
import sglang_bench_points as points
import sglang_failure
import sglang_ledger
import yaml
from helpers.paths import FIXTURES, TOOLS

sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(TOOLS / "device"))

import perf_lifecycle as pl  # noqa: E402
import perf_real  # noqa: E402

REAL = FIXTURES / "real-sglang" / "0.5.17-h200-tp1"
PERF = REAL / "perf"
INT = REAL / "phase-int"
STAMPED = re.compile(r"^\s*(\d+\.\d+) (.*)$")


def perf():
    return json.loads((PERF / "perf.json").read_text())


def stamped(name):
    lines = []
    for raw in (PERF / name).read_text().splitlines():
        match = STAMPED.match(raw)
        if match:
            lines.append((float(match.group(1)), match.group(2)))
    return lines


# The stamped log keeps milliseconds; perf.json was computed from the unrounded times.
MS = 0.0015


def test_ours_task_times_and_steps_from_the_stamped_output():
    for run in (r for r in perf()["runs"] if r["side"] == "ours"):
        lines = stamped(run["log"])
        tasks = perf_real.task_times(lines, run["wall_s"])
        assert [t["task"] for t in tasks] == [t["task"] for t in run["tasks"]]
        for got, kept in zip(tasks, run["tasks"], strict=True):
            assert got["start_s"] == pytest.approx(kept["start_s"], abs=MS)
            assert got["duration_s"] == pytest.approx(kept["duration_s"], abs=2 * MS)
        steps = perf_real.step_breakdown(tasks)
        assert steps.keys() == run["steps"].keys()
        for name, seconds in steps.items():
            assert seconds == pytest.approx(run["steps"][name], abs=2 * MS * len(tasks))


def test_the_parser_runs_once_then_its_verdict_is_kept():
    ours = [r for r in perf()["runs"] if r["side"] == "ours"]
    first, *later = (perf_real.step_breakdown(perf_real.task_times(stamped(r["log"]), r["wall_s"])) for r in ours)
    # The first cycle on the machine imports SGLang for the parser (15.7 s); the later ones find the verdict kept.
    assert later and all(first["parser"] > 10 > 1 > steps["parser"] for steps in later)
    # validate.yml again, the whole playbook, with the verdict kept: seconds, not the parser's 25.
    again = float(re.search(r"== validate_again rc=0 ([\d.]+) s", (PERF / "summary.txt").read_text()).group(1))
    assert again < first["parser"] / 2


def test_ours_load_and_traffic_from_the_ledger():
    records = {r["record_id"]: r for r in pl.ledger_records((PERF / "ledger.jsonl").read_text())}
    for run in (r for r in perf()["runs"] if r["side"] == "ours"):
        record = records[run["record_id"]]
        assert round(pl.traffic_seconds(record["points"]), 3) == run["bench_traffic_s"]
        assert round(pl.warmup_seconds(record), 3) == run["warmup_s"]
        figure = pl.cycle_figure(run["wall_s"], run["load_s"], run["bench_traffic_s"] + run["warmup_s"])
        assert figure["overhead_s"] == pytest.approx(run["overhead_s"], abs=2 * MS)


def test_the_client_was_imported_beside_the_loading_server():
    """Each ours run's client log: the standby client imported bench_serving (13-17 s) and got its
    plan only when the server was ready (go long after ready)."""
    for index in (r["run"] for r in perf()["runs"] if r["side"] == "ours"):
        events = points.parse_status_lines((PERF / f"ours_{index}_client.log").read_text())
        ready = next(e for e in events if e["event"] == "ready")
        go = next(e for e in events if e["event"] == "go")
        assert ready["standby"] is True and ready["import_s"] > 10
        assert go["t"] - ready["t"] > 10  # the import was over long before the server was ready


def test_by_hand_traffic_from_bench_servings_own_files():
    for run in (r for r in perf()["runs"] if r["side"] == "by_hand"):
        results = [pl._read_json_lines(path)[-1] for path in sorted((PERF / f"hand_{run['run']}" / "anchor" / "bench")
                                                                      .glob("c*.jsonl"))]
        assert round(pl.traffic_seconds(results), 3) == run["bench_traffic_s"]


def test_medians_and_ratio_from_todays_perf_real(tmp_path, monkeypatch):
    """The recorded runs through today's perf_real.write (what it would write as perf.json after the
    last run): the walls, medians and ratio the recording holds."""
    data = perf()
    monkeypatch.setattr(perf_real, "subprocess", types.SimpleNamespace(
        run=lambda *a, **k: types.SimpleNamespace(stdout=data["gpu"], returncode=0)))
    args = types.SimpleNamespace(out=tmp_path, tier=data["tier"], copy_to=None, warm=data["warm_start"])
    today = perf_real.write(args, data["runs"], {"workload": data["workload"]})
    keys = ("ours_wall_s", "by_hand_wall_s", "median_ours_s", "median_by_hand_s", "median_ratio")
    assert {k: today[k] for k in keys} == {k: data[k] for k in keys}
    assert len(today["ours_wall_s"]) >= 2 and len(today["by_hand_wall_s"]) >= 2
    assert json.loads((tmp_path / "perf.json").read_text())["median_ratio"] == data["median_ratio"]


def failed_result(text, task):
    """The YAML result block after ``fatal: [...]: FAILED! =>`` of ``task`` in a playbook's output."""
    at = text.index(f"TASK [{task}")
    block = text[text.index("FAILED! =>", at) + len("FAILED! =>"):]
    lines = []
    for line in block.splitlines()[1:]:
        if line and not line.startswith("    "):
            break
        lines.append(line[4:])
    return yaml.safe_load("\n".join(lines))


def test_sigint_during_the_benchmark_is_recorded_as_interrupted():
    out = (INT / "int_sigint.out").read_text()
    result = failed_result(out, "sglang_bench : Benchmark every point")
    failure = sglang_failure.decide_failure(
        points=result["points"], task={"name": "Benchmark every point", "tags": ["sglang_experiment_benchmark"]},
        result=sglang_failure.interrupted_result(result, "SIGINT"))
    assert failure["class"] == "interrupted" and failure["step"] == "benchmark"
    records = [json.loads(line) for line in (INT / "ledger.jsonl").read_text().splitlines()]
    interrupted = [r for r in records if r["status"] == "interrupted"]
    assert len(interrupted) == 1
    assert sglang_ledger.validate_record(interrupted[0]) == []
    assert interrupted[0]["failure"]["class"] == failure["class"]
    assert interrupted[0]["failure"]["step"] == failure["step"]
    assert "restore: skipped: the run was interrupted (SIGINT)" in out
    # The client was gone at the first look after the signal (pgrep every 0.1 s).
    summary = (INT / "summary.txt").read_text()
    gone = float(re.search(r"sigint: benchmark client gone after ([\d.]+) s", summary).group(1))
    assert gone <= 2.0
    assert (INT / "int_ps_after_sigint.txt").read_text().strip() == ""
