"""The experiment's comparison of ledger records with the baseline (sglang_compare over sglang_interval)."""

from __future__ import annotations

import numpy as np
import pytest
import sglang_compare as cmp
from scipy.stats import t as student_t

WORKLOAD = {"dataset_name": "random", "input_len": 1024, "output_len": 1024, "random_range_ratio": 1.0}
_counter = iter(range(1, 10_000))


def record(tier, points, host="node-a", status="success", simulator=False, workload=None, model="org/model",
           script=None):
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
        "launch": {"script_sha256": script or f"sha-{tier}"},
        "points": rows,
    }


def metric(result, concurrency, name):
    entry = next(p for p in result["points"] if p["concurrency"] == concurrency)
    return entry, entry["metrics"][name]


# ------------------------------------------------------------ pure pieces


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


# ------------------------------------------------------------ compare_record


def starts(tier, values, script=None):
    """One record per server start, each with one point at c=10: (output, total, tpot) per start."""
    return [record(tier, {10: [v]}, script=script) for v in values]


def welch_log_pct(candidate, baseline, confidence):
    """The interval by scipy, written out: Welch's t on the logs, back to percent."""
    x, y = np.log(candidate), np.log(baseline)
    vx, vy = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    df = (vx + vy) ** 2 / (vx**2 / (len(x) - 1) + vy**2 / (len(y) - 1))
    half = student_t.ppf(0.5 + confidence / 2, df) * np.sqrt(vx + vy)
    d = x.mean() - y.mean()
    return np.expm1(d - half) * 100, np.expm1(d + half) * 100


def test_one_start_a_side_gives_no_verdict_however_large_the_change():
    """The H200 A/A that read "+40.0% better": one baseline record, the same script again."""
    base = record("baseline", {16: [(1756.75, 3500.0, 9.1)]})
    again = record("baseline", {16: [(2460.08, 4900.0, 5.3)]})
    result = cmp.compare_record(again, [base, again])
    for name, _ in cmp.METRICS:
        _, m = metric(result, 16, name)
        assert m["verdict"] == "no_verdict" and m["reason"] == "one repeat: no verdict possible", name
        assert m["ci_low_pct"] is None
    assert metric(result, 16, "output_throughput")[1]["delta_pct"] == pytest.approx((2460.08 / 1756.75 - 1) * 100)
    table = cmp.format_table(result)
    assert not any(line.endswith(("better", "worse")) for line in table.splitlines()[1:])
    assert "no_verdict (one repeat)" in table and "run the tier (and the baseline) again" in table


@pytest.mark.parametrize("confidence", [0.95, 0.9])
def test_starts_pool_into_arms_with_a_simultaneous_welch_interval(confidence):
    baselines = starts("baseline", [(1000.0, 2000.0, 500.0), (1030.0, 2060.0, 490.0), (985.0, 1970.0, 505.0)])
    tiers = starts("t03", [(1200.0, 2400.0, 520.0), (1180.0, 2360.0, 480.0), (1230.0, 2460.0, 515.0)])
    ledger = baselines + tiers
    result = cmp.compare_record(tiers[-1], ledger, confidence)
    # the family: one concurrency x the two tested metrics; total tok/s is shown, not tested
    assert result["family"] == {"size": 2, "confidence": confidence, "comparison_confidence": 1 - (1 - confidence) / 2}
    entry, out = metric(result, 10, "output_throughput")
    assert entry["scope"] == "server_starts"
    assert entry["candidate_record_ids"] == [r["record_id"] for r in tiers]
    assert entry["baseline_record_ids"] == [r["record_id"] for r in baselines]
    low, high = welch_log_pct([1200.0, 1180.0, 1230.0], [1000.0, 1030.0, 985.0], 1 - (1 - confidence) / 2)
    assert (out["ci_low_pct"], out["ci_high_pct"]) == (pytest.approx(low, rel=1e-9), pytest.approx(high, rel=1e-9))
    assert out["verdict"] == "better" and out["in_family"] is True
    _, tpot = metric(result, 10, "mean_tpot_ms")
    assert tpot["verdict"] == "indistinguishable" and tpot["ci_low_pct"] < 0 < tpot["ci_high_pct"]
    _, total = metric(result, 10, "total_throughput")
    assert total["in_family"] is False and total["verdict"] == "better"
    table = cmp.format_table(result)
    assert "3/3 starts" in table and "(better; follows output tok/s)" in table
    assert f"{confidence:.0%} simultaneous intervals over 2 tested comparisons" in table.splitlines()[0]


def test_an_arm_is_one_launch_script():
    """Records of a tier whose flags changed (another script) are another arm; the baseline arm is
    the latest baseline script's records."""
    old_base = starts("baseline", [(500.0, 1000.0, 900.0)] * 2, script="old")
    base = starts("baseline", [(1000.0, 2000.0, 500.0), (1010.0, 2020.0, 495.0)])
    old_tier = starts("t03", [(9000.0, 18000.0, 50.0)], script="t03-before-edit")
    tier = starts("t03", [(1100.0, 2200.0, 460.0), (1105.0, 2210.0, 458.0)])
    ledger = old_base + base + old_tier + tier
    entry, _ = metric(cmp.compare_record(tier[-1], ledger), 10, "output_throughput")
    assert entry["candidate_record_ids"] == [r["record_id"] for r in tier]
    assert entry["baseline_record_ids"] == [r["record_id"] for r in base]
    # the old script's baselines only count while they are the latest
    entry, _ = metric(cmp.compare_record(old_tier[0], ledger), 10, "output_throughput")
    assert entry["baseline_record_ids"] == [r["record_id"] for r in base]


def test_repeats_within_one_start_show_an_interval_but_give_no_verdict():
    base = record("baseline", {256: [(350.0, 690.0, 700.0), (360.0, 700.0, 690.0), (340.0, 680.0, 710.0)]})
    runs = [(480.0, 960.0, 550.0), (490.0, 970.0, 540.0), (495.0, 980.0, 545.0)]
    tier = record("t06", {256: runs})
    result = cmp.compare_record(tier, [base, tier])
    entry, m = metric(result, 256, "output_throughput")
    assert entry["scope"] == "within_server"
    assert m["candidate"]["n"] == 3 and m["candidate"]["median"] == 490.0 and m["baseline"]["median"] == 350.0
    low, high = welch_log_pct([r[0] for r in runs], [350.0, 360.0, 340.0], 0.95)
    assert m["ci_low_pct"] == pytest.approx(low, rel=1e-9) and m["ci_low_pct"] > 0  # clearly higher...
    assert m["verdict"] == "no_verdict" and m["reason"] == cmp.WITHIN_ONLY  # ...but one start a side
    assert result["family"]["size"] == 0
    table = cmp.format_table(result)
    assert "3/3 in-server" in table and "no_verdict (in-server)" in table
    assert not any(line.endswith(("better", "worse")) for line in table.splitlines()[1:])


def test_missing_baseline():
    tier = record("t02-mscclpp", {1: [(9.0, 12.0, 100.0)]})
    result = cmp.compare_record(tier, [tier])
    entry, m = metric(result, 1, "output_throughput")
    assert entry["baseline_record_id"] is None
    assert m["verdict"] == "no_baseline" and m["delta_pct"] is None and m["baseline"] is None
    assert m["candidate"]["median"] == 9.0


def test_table_rows_follow_metrics_and_say_what_is_missing():
    base = record("baseline", {10: [(100.0, 300.0, 9.0)]})
    tier = record("t03", {10: [(110.0, 330.0, 8.0)], 256: [(50.0, 150.0, 20.0)]})
    result = cmp.compare_record(tier, [base, tier])
    rows = cmp.comparison_rows(result)
    assert [(r["concurrency"], r["metric"]) for r in rows] == [(c, m) for c in (10, 256) for m, _ in cmp.METRICS]
    table = cmp.format_table(result, synthetic=True).splitlines()
    assert table[0].startswith("t03 vs baseline on node-a: geometric means, 95% simultaneous intervals")
    assert table[0].endswith(" - SYNTHETIC numbers from the simulator")
    assert table[2].split()[:6] == ["10", "output", "tok/s", "100.00", "110.00", "+10.0%"]
    assert table[5].split()[:5] == ["256", "output", "tok/s", "-", "50.00"] and table[5].endswith("no_baseline")
    assert table[-1] == f"baseline record(s): {base['record_id']}"
    assert "SYNTHETIC" not in cmp.format_table(result)


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
    result = cmp.compare_record(tier, [good, mismatched, tier])
    entry, m = metric(result, 10, "output_throughput")
    assert entry["baseline_record_id"] == good["record_id"]
    assert m["delta_pct"] == pytest.approx(10.0)


def test_latest_baseline_wins_and_baseline_compares_with_the_one_before():
    old = record("baseline", {1: [(8.0, 11.0, 120.0)]})
    new = record("baseline", {1: [(10.0, 13.0, 100.0)]})
    tier = record("t04-ep8", {1: [(11.0, 14.0, 95.0)]})
    ledger = [old, new, tier]
    entry, m = metric(cmp.compare_record(tier, ledger), 1, "output_throughput")
    assert entry["baseline_record_id"] == new["record_id"]
    entry, m = metric(cmp.compare_record(new, ledger), 1, "output_throughput")
    assert entry["baseline_record_id"] == old["record_id"]
    assert m["delta_pct"] == pytest.approx(25.0)
    entry, _ = metric(cmp.compare_record(old, ledger), 1, "output_throughput")
    assert entry["baseline_record_id"] is None


def test_extra_request_body_is_part_of_the_workload_identity_only_when_given():
    """A record made before extra_request_body existed (no key) and one with the default ({}) share
    their key with each other, as every old record did; a body of its own is another workload."""
    old = record("baseline", {10: [(40.0, 80.0, 250.0)]})
    assert "extra_request_body" not in old["workload"]
    default = record("baseline", {10: [(40.0, 80.0, 250.0)]}, workload=dict(WORKLOAD, extra_request_body={}))
    other = record("baseline", {10: [(40.0, 80.0, 250.0)]},
                   workload=dict(WORKLOAD, extra_request_body={"return_logprob": True}))
    assert cmp.workload_key(old) == cmp.workload_key(default) == cmp.workload_key({"workload": WORKLOAD})
    assert len(cmp.workload_key(old)) == 4  # the key older code made
    assert cmp.workload_key(other) != cmp.workload_key(old)
    assert cmp.workload_key(other)[4] == ("extra_request_body", '{"return_logprob": true}')


def test_baseline_chosen_per_concurrency():
    full = record("baseline", {1: [(9.0, 12.0, 110.0)], 1024: [(1500.0, 3000.0, 520.0)]})
    partial = record("baseline", {1: [(10.0, 13.0, 100.0)]})  # newer, lacks c=1024
    tier = record("t05", {1: [(10.0, 13.0, 100.0)], 1024: [(1600.0, 3100.0, 500.0)]})
    result = cmp.compare_record(tier, [full, partial, tier])
    assert metric(result, 1, "output_throughput")[0]["baseline_record_id"] == partial["record_id"]
    assert metric(result, 1024, "output_throughput")[0]["baseline_record_id"] == full["record_id"]


def test_failed_points_are_not_averaged_in():
    base = record("baseline", {10: [(40.0, 80.0, 250.0)]})
    tier = record("t07", {10: [(44.0, 88.0, 240.0), (1.0, 2.0, 9999.0)]})
    tier["points"][1]["status"] = "failed"
    _, m = metric(cmp.compare_record(tier, [base, tier]), 10, "output_throughput")
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
                       compare={"confidence": 0.95, "baseline_tier": "baseline"}, **common)
    assert first["appended"] is True
    assert first["ansible_facts"]["sglang_bench_compare"]["record_id"] == first["record_id"]
    second = run_module("sglang_ledger_append", tmp_path, run_id="r2", tier="t03",
                        points=[throughput_point(1, 120.0, 360.0, 8.0)],
                        compare={"confidence": 0.95, "baseline_tier": "baseline"}, **common)
    made = second["ansible_facts"]["sglang_bench_compare"]
    alone = run_module("sglang_bench_compare", tmp_path, ledger=str(ledger_path), record_id=second["record_id"],
                       confidence=0.95, baseline_tier="baseline")["ansible_facts"]["sglang_bench_compare"]
    assert made == alone
    assert made["points"][0]["metrics"]["output_throughput"]["verdict"] == "no_verdict"  # one start a side
    assert "SYNTHETIC" in made["table"]
    without = run_module("sglang_ledger_append", tmp_path, run_id="r3", tier="t03",
                         points=[throughput_point(1, 90.0, 270.0, 11.0)], **common)
    assert "ansible_facts" not in without
    bad = run_module("sglang_ledger_append", tmp_path, run_id="r4", tier="t03", points=[],
                     compare={"confidence": 1.5}, **common)
    assert bad.get("failed") is True and "confidence must be between 0 and 1" in bad["msg"]
    assert len(ledger_path.read_text().splitlines()) == 3  # the bad confidence appended nothing


def test_the_host_aa_floor_is_shown_beside():
    def cell(role, value, name="c1"):
        r = record("baseline", {10: [(value, 2 * value, 100000.0 / value)]})
        r["campaign"] = {"name": name, "role": role}
        return r

    ledger = [cell("baseline", 1000.0), cell("aa", 1010.0), cell("baseline", 990.0), cell("aa", 1003.0)]
    ledger += [cell("baseline", 10.0, "old"), cell("aa", 10.0, "old")]  # an older-named campaign, one cell a side
    tier = record("t03", {10: [(1100.0, 2200.0, 90.0)]})
    result = cmp.compare_record(tier, ledger + [tier])
    floor = metric(result, 10, "output_throughput")[0]["aa_floor"]
    direct = cmp.compare([1010.0, 1003.0], [1000.0, 990.0], True)
    assert floor["campaign"] == "c1" and (floor["n_aa"], floor["n_baseline"]) == (2, 2)
    assert floor["ci_low_pct"] == pytest.approx(direct["ci_low_pct"])
    assert "A/A floor on this host (campaign c1, output tok/s): c=10 [" in cmp.format_table(result)
    other = record("t03", {10: [(1100.0, 2200.0, 90.0)]}, host="node-b")
    assert metric(cmp.compare_record(other, ledger + [other]), 10, "output_throughput")[0]["aa_floor"] is None


def test_the_experiment_path_holds_its_false_verdict_rate():
    """Same-distribution data through compare_record, as a user runs it (3 baseline starts, then 3
    of the tier): at most 5 % of records get any verdict; a true +30 % change is mostly found at 5 starts."""
    aa = cmp.simulate_experiment(starts=3, noise_pct=5.0, trials=400)
    assert aa["family_wise"] <= 0.05
    one = cmp.simulate_experiment(starts=1, repeats=3, noise_pct=5.0, trials=200)
    assert one["family_wise"] == 0.0  # one start a side never decides, whatever its repeats
    effect = cmp.simulate_experiment(starts=5, noise_pct=5.0, effect_pct=30.0, trials=200)
    assert effect["better"] > 0.8 and effect["per_comparison"] == effect["better"]  # never "worse"
