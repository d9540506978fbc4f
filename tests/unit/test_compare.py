"""Comparison of ledger records with the latest successful baseline."""

from __future__ import annotations

import numpy as np
import pytest
import sglang_compare as cmp

WORKLOAD = {"dataset_name": "random", "input_len": 1024, "output_len": 1024, "random_range_ratio": 1.0}
_counter = iter(range(1, 10_000))


def record(tier, points, host="node-a", status="success", simulator=False, workload=None, model="org/model"):
    """A ledger record; ``points`` is {concurrency: [(output, total, tpot), ...repeats]}."""
    rows = []
    for concurrency, repeats in points.items():
        for index, (output, total, tpot) in enumerate(repeats):
            rows.append(
                {
                    "concurrency": concurrency,
                    "repeat": index,
                    "num_prompts": 10,
                    "status": "ok",
                    "output_throughput": output,
                    "total_throughput": total,
                    "mean_tpot_ms": tpot,
                }
            )
    n = next(_counter)
    return {
        "schema_version": 1,
        "record_id": f"rec-{n}",
        "recorded_at": f"2026-01-01T00:00:{n:02d}Z",
        "host": host,
        "tier": tier,
        "status": status,
        "failure": None if status == "success" else {"class": "hang"},
        "target_is_simulator": simulator,
        "model": {"model_path": model},
        "workload": dict(workload or WORKLOAD),
        "points": rows,
    }


def metric(result, concurrency, name):
    entry = next(p for p in result["points"] if p["concurrency"] == concurrency)
    return entry, entry["metrics"][name]


# ------------------------------------------------------------ pure pieces


@pytest.mark.parametrize(
    ("change", "threshold", "higher_is_better", "expected"),
    [
        (10.0, 5.0, True, "better"),
        (-10.0, 5.0, True, "worse"),
        (3.0, 5.0, True, "within_noise"),
        (-5.0, 5.0, True, "within_noise"),  # exactly the threshold is noise
        (5.01, 5.0, True, "better"),
        (-10.0, 5.0, False, "better"),  # TPOT went down
        (10.0, 5.0, False, "worse"),  # TPOT went up
        (0.0, 0.0, True, "within_noise"),
        (None, 5.0, True, "no_data"),
    ],
)
def test_verdict(change, threshold, higher_is_better, expected):
    assert cmp.verdict(change, threshold, higher_is_better) == expected


@pytest.mark.parametrize(
    ("candidate", "baseline", "expected"),
    [(110.0, 100.0, 10.0), (90.0, 100.0, -10.0), (100.0, 100.0, 0.0), (5.0, 0.0, None), (None, 1.0, None)],
)
def test_delta_pct(candidate, baseline, expected):
    result = cmp.delta_pct(candidate, baseline)
    assert result == pytest.approx(expected) if expected is not None else result is None


@pytest.mark.parametrize(
    "values",
    [[3.0], [1.0, 2.0], [5.0, 1.0, 3.0], [4.0, 1.0, 3.0, 2.0], [10.0, 12.5, 9.0, 11.0, 30.0, 10.5]],
)
def test_summarize_matches_numpy(values):
    summary = cmp.summarize(values)
    assert summary["n"] == len(values)
    assert summary["median"] == pytest.approx(float(np.median(values)))
    assert summary["min"] == min(values) and summary["max"] == max(values)
    assert summary["spread_pct"] == pytest.approx((max(values) - min(values)) / np.median(values) * 100)
    if len(values) >= 4:
        q1, q3 = np.percentile(values, [25, 75])
        assert summary["q1"] == pytest.approx(q1) and summary["q3"] == pytest.approx(q3)
        assert summary["iqr"] == pytest.approx(q3 - q1)
    else:
        assert "iqr" not in summary


def test_summarize_ignores_missing_values():
    assert cmp.summarize([]) is None
    assert cmp.summarize([None, True]) is None
    assert cmp.summarize([None, 2.0])["n"] == 1


# ------------------------------------------------------------ compare_record


@pytest.mark.parametrize(
    ("candidate", "expected_verdicts"),
    [
        ((1100.0, 2200.0, 450.0), ("better", "better", "better")),
        ((900.0, 1800.0, 560.0), ("worse", "worse", "worse")),
        ((1020.0, 1990.0, 505.0), ("within_noise", "within_noise", "within_noise")),
        ((1100.0, 2000.0, 560.0), ("better", "within_noise", "worse")),
    ],
)
def test_compare_verdicts_per_metric(candidate, expected_verdicts):
    base = record("baseline", {1024: [(1000.0, 2000.0, 500.0)]})
    tier = record("t02-mscclpp", {1024: [candidate]})
    result = cmp.compare_record(tier, [base, tier], threshold_pct=5.0)
    assert result["threshold_pct"] == 5.0 and "5.0%" in result["rule"]
    for (name, _), expected, cand, ref in zip(
        cmp.METRICS, expected_verdicts, candidate, (1000.0, 2000.0, 500.0), strict=True
    ):
        entry, m = metric(result, 1024, name)
        assert entry["baseline_record_id"] == base["record_id"]
        assert m["delta_pct"] == pytest.approx((cand - ref) / ref * 100)
        assert m["verdict"] == expected, name


def test_missing_baseline():
    tier = record("t02-mscclpp", {1: [(9.0, 12.0, 100.0)]})
    result = cmp.compare_record(tier, [tier], 5.0)
    entry, m = metric(result, 1, "output_throughput")
    assert entry["baseline_record_id"] is None
    assert m["verdict"] == "no_baseline" and m["delta_pct"] is None and m["baseline"] is None
    assert m["candidate"]["median"] == 9.0


@pytest.mark.parametrize(
    "other",
    [
        {"host": "node-b"},
        {"status": "failed"},
        {"workload": dict(WORKLOAD, input_len=512)},
        {"workload": dict(WORKLOAD, random_range_ratio=0.0)},
        {"model": "other/model"},
        {"simulator": True},
    ],
)
def test_baseline_must_match(other):
    good = record("baseline", {10: [(40.0, 80.0, 250.0)]})
    mismatched = record("baseline", {10: [(20.0, 40.0, 500.0)]}, **other)  # newer, but not comparable
    tier = record("t03", {10: [(44.0, 88.0, 240.0)]})
    result = cmp.compare_record(tier, [good, mismatched, tier], 5.0)
    entry, m = metric(result, 10, "output_throughput")
    assert entry["baseline_record_id"] == good["record_id"]
    assert m["delta_pct"] == pytest.approx(10.0)


def test_latest_baseline_wins_and_baseline_compares_with_the_one_before():
    old = record("baseline", {1: [(8.0, 11.0, 120.0)]})
    new = record("baseline", {1: [(10.0, 13.0, 100.0)]})
    tier = record("t04-ep8", {1: [(11.0, 14.0, 95.0)]})
    ledger = [old, new, tier]
    entry, m = metric(cmp.compare_record(tier, ledger, 5.0), 1, "output_throughput")
    assert entry["baseline_record_id"] == new["record_id"]
    entry, m = metric(cmp.compare_record(new, ledger, 5.0), 1, "output_throughput")
    assert entry["baseline_record_id"] == old["record_id"]
    assert m["delta_pct"] == pytest.approx(25.0)
    entry, _ = metric(cmp.compare_record(old, ledger, 5.0), 1, "output_throughput")
    assert entry["baseline_record_id"] is None


def test_baseline_chosen_per_concurrency():
    full = record("baseline", {1: [(9.0, 12.0, 110.0)], 1024: [(1500.0, 3000.0, 520.0)]})
    partial = record("baseline", {1: [(10.0, 13.0, 100.0)]})  # newer, lacks c=1024
    tier = record("t05", {1: [(10.0, 13.0, 100.0)], 1024: [(1600.0, 3100.0, 500.0)]})
    result = cmp.compare_record(tier, [full, partial, tier], 5.0)
    assert metric(result, 1, "output_throughput")[0]["baseline_record_id"] == partial["record_id"]
    assert metric(result, 1024, "output_throughput")[0]["baseline_record_id"] == full["record_id"]


def test_repeats_use_median_and_report_spread():
    base = record("baseline", {256: [(350.0, 690.0, 700.0), (360.0, 700.0, 690.0), (340.0, 680.0, 710.0)]})
    runs = [(380.0, 760.0, 650.0), (390.0, 770.0, 640.0), (420.0, 800.0, 600.0), (370.0, 750.0, 660.0)]
    tier = record("t06", {256: runs})
    result = cmp.compare_record(tier, [base, tier], 5.0)
    _, m = metric(result, 256, "output_throughput")
    outputs = [r[0] for r in runs]
    assert m["candidate"]["n"] == 4
    assert m["candidate"]["median"] == pytest.approx(float(np.median(outputs)))
    assert (m["candidate"]["min"], m["candidate"]["max"]) == (min(outputs), max(outputs))
    assert m["candidate"]["iqr"] == pytest.approx(float(np.subtract(*np.percentile(outputs, [75, 25]))))
    assert m["baseline"]["median"] == 350.0
    assert m["delta_pct"] == pytest.approx((np.median(outputs) - 350.0) / 350.0 * 100)
    assert m["verdict"] == "better"
    _, tpot = metric(result, 256, "mean_tpot_ms")
    assert tpot["higher_is_better"] is False and tpot["verdict"] == "better"


def test_failed_points_are_not_averaged_in():
    base = record("baseline", {10: [(40.0, 80.0, 250.0)]})
    tier = record("t07", {10: [(44.0, 88.0, 240.0), (1.0, 2.0, 9999.0)]})
    tier["points"][1]["status"] = "failed"
    _, m = metric(cmp.compare_record(tier, [base, tier], 5.0), 10, "output_throughput")
    assert m["candidate"]["n"] == 1 and m["candidate"]["median"] == 44.0


def test_simulator_records_at_another_speed_are_not_compared():
    """SGLANG_SIM_SPEED scales every synthetic number: a baseline at speed 10 is no reference for
    a tier at speed 100 (seen: -86% "worse" from the speed change alone)."""
    base = record("baseline", {1: [(10.0, 20.0, 100.0)]}, simulator=True)
    base["launch"] = {"env": {"SGLANG_SIM_SPEED": "10"}}
    tier = record("t03", {1: [(11.0, 22.0, 90.0)]}, simulator=True)
    tier["launch"] = {"env": {"SGLANG_SIM_SPEED": "100", "SGLANG_SIM_FAULT": "hang"}}
    assert cmp.find_baseline([base, tier], tier, 1) is None
    tier["launch"]["env"]["SGLANG_SIM_SPEED"] = "10"
    assert cmp.find_baseline([base, tier], tier, 1) is base


def test_ledger_append_compares_in_the_same_call_as_the_compare_module(tmp_path):
    """sglang_ledger_append's compare option returns, for the record it just appended, what module
    sglang_bench_compare returns for that record afterwards: one module call where two ran."""
    from helpers.modules import run_module
    from helpers.records import MODEL_PATH, WORKLOAD, throughput_point

    ledger_path = tmp_path / "results" / "ledger.jsonl"
    common = dict(ledger=str(ledger_path), host="node-a", workload=WORKLOAD, collect_provenance=False,
                  provenance={"target_is_simulator": True, "model": {"model_path": MODEL_PATH}})
    first = run_module("sglang_ledger_append", tmp_path, run_id="r1", tier="baseline",
                       points=[throughput_point(1, 100.0, 300.0, 10.0)],
                       compare={"threshold_pct": 5, "baseline_tier": "baseline"}, **common)
    assert first["appended"] is True
    assert first["ansible_facts"]["sglang_bench_compare"]["record_id"] == first["record_id"]
    second = run_module("sglang_ledger_append", tmp_path, run_id="r2", tier="t03",
                        points=[throughput_point(1, 120.0, 360.0, 8.0)],
                        compare={"threshold_pct": 5, "baseline_tier": "baseline"}, **common)
    made = second["ansible_facts"]["sglang_bench_compare"]
    alone = run_module("sglang_bench_compare", tmp_path, ledger=str(ledger_path), record_id=second["record_id"],
                       threshold_pct=5, baseline_tier="baseline")["ansible_facts"]["sglang_bench_compare"]
    assert made == alone
    assert made["points"][0]["metrics"]["output_throughput"]["verdict"] == "better"
    assert "SYNTHETIC" in made["table"]
    without = run_module("sglang_ledger_append", tmp_path, run_id="r3", tier="t03",
                         points=[throughput_point(1, 90.0, 270.0, 11.0)], **common)
    assert "ansible_facts" not in without
    bad = run_module("sglang_ledger_append", tmp_path, run_id="r4", tier="t03", points=[],
                     compare={"threshold_pct": -1}, **common)
    assert bad.get("failed") is True and "threshold_pct must be >= 0" in bad["msg"]
    assert len(ledger_path.read_text().splitlines()) == 3  # the bad threshold appended nothing
