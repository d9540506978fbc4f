"""Campaign files and plans (module_utils/sglang_campaign.py): checks, cells, keys, resume, retries.

Run against the real data/campaigns/schema.json, the campaign files in data/campaigns/ and the
tier catalog in data/tiers.yml; ledgers are built with the real sglang_ledger.build_record.
"""

from __future__ import annotations

import json

import pytest
import sglang_campaign as campaign_logic
import sglang_ledger as ledger
import yaml
from helpers.paths import REPO

SCHEMA = json.loads((REPO / "data" / "campaigns" / "schema.json").read_text())
TIERS = yaml.safe_load((REPO / "data" / "tiers.yml").read_text())["tiers"]
KNOWN = list(TIERS)
RUNNABLE = [t for t, spec in TIERS.items() if spec.get("runnable")]


def check(data, **kw):
    return campaign_logic.check_campaign(data, SCHEMA, KNOWN, runnable_tiers=RUNNABLE, **kw)


def launches(*tiers, sha="aa", env=None):
    versions = {"sglang_version": "0.5.10"}
    return {t: {"script_sha256": f"{sha}-{t}", "env": env or {}, "versions": versions} for t in tiers}


WORKLOAD = {"concurrency": [2, 8], "input_len": 64, "seed": 1, "settings_file": "/x/benchmark.yml"}


def record(cell, status="success", failure=None, attempt=1, host="n1", name="c", fingerprint=None):
    rec = ledger.build_record(
        host=host,
        tier=cell["tier"],
        run_id=f"run-{cell['cell']}-{attempt}",
        workload=WORKLOAD,
        points=[{"concurrency": 2, "repeat": 0, "status": "ok"}] if status == "success" else [],
        failure=failure,
        started_at="2026-12-01T10:00:00Z",
        ended_at="2026-12-01T10:00:30Z",
        campaign=campaign_logic.cell_record({"name": name}, cell, attempt, fingerprint or {"hostname": "n1"}),
    )
    return rec


# The lent H200's campaign runs the tiers its inventory adds (sglang_launch_extra_tiers).
DEVICE_TIERS = yaml.safe_load((REPO / "inventory" / "h200-device.yml").read_text())["all"]["children"][
    "sglang_nodes"]["vars"]["sglang_launch_extra_tiers"]


@pytest.mark.parametrize("path", sorted((REPO / "data" / "campaigns").glob("*.yml")), ids=lambda p: p.name)
def test_the_shipped_campaign_files_are_valid(path):
    extra = DEVICE_TIERS if path.name.startswith("h200") else {}
    campaign = campaign_logic.check_campaign(
        yaml.safe_load(path.read_text()), SCHEMA, KNOWN + list(extra),
        runnable_tiers=RUNNABLE + [t for t, spec in extra.items() if spec.get("runnable")], source=str(path))
    assert campaign["tiers"] and campaign["baseline"] == "baseline"
    assert not set(campaign["tiers"]) & set(campaign["not_runnable"])


def test_the_seeds_campaign_lists_the_tiers_that_cannot_run_apart():
    campaign = check(yaml.safe_load((REPO / "data" / "campaigns" / "seeds.yml").read_text()))
    assert campaign["not_runnable"] == [t for t in TIERS if t != "baseline" and t not in RUNNABLE]
    assert campaign["tiers"] == [t for t in RUNNABLE if t != "baseline"]


def test_the_controller_checks_the_shape_and_each_host_its_tiers():
    shape = campaign_logic.check_campaign({"name": "x", "tiers": ["only-on-one-host"]}, SCHEMA, None)
    assert shape["tiers"] == ["only-on-one-host"]
    with pytest.raises(campaign_logic.CampaignError, match="'only-on-one-host' is not defined"):
        check({"name": "x", "tiers": ["only-on-one-host"]})


def test_every_problem_is_named_at_once():
    with pytest.raises(campaign_logic.CampaignError) as err:
        check({"name": "x", "tiers": ["t03-single-batch-overlap", "t99-nope", "baseline"], "repeats": 2,
               "workloads": [{"name": "w"}, {"name": "w"}]}, source="my.yml")
    problems = err.value.problems
    assert any("'t99-nope' is not defined" in p for p in problems)
    assert any("baseline 'baseline' is also listed in tiers" in p for p in problems)
    assert any("workload name 'w' is used twice" in p for p in problems)
    assert all(p.startswith("my.yml: ") for p in problems)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"tiers": []}, "'name' is a required property"),
        ({"name": "x", "tiers": [], "repeats": 0}, "repeats: 0 is less than the minimum of 1"),
        ({"name": "x", "tiers": [], "order": "random"}, "order: 'random' is not one of"),
        ({"name": "x", "tiers": [], "colour": "red"}, "'colour' was unexpected"),
        ({"name": "bad name", "tiers": []}, "name: 'bad name' does not match"),
    ],
)
def test_the_schema_refuses_bad_fields(data, words):
    with pytest.raises(campaign_logic.CampaignError) as err:
        check(data)
    assert any(words in p for p in err.value.problems), err.value.problems


def test_interleaved_order_runs_round_after_round_each_starting_one_arm_later():
    campaign = check({"name": "c", "tiers": ["t03-single-batch-overlap"], "repeats": 4})
    cells = [c["cell"] for c in campaign_logic.expand_cells(campaign)]
    assert cells == [
        "baseline/default/r1", "t03-single-batch-overlap/default/r1", "baseline~aa/default/r1",
        "t03-single-batch-overlap/default/r2", "baseline~aa/default/r2", "baseline/default/r2",
        "baseline~aa/default/r3", "baseline/default/r3", "t03-single-batch-overlap/default/r3",
        "baseline/default/r4", "t03-single-batch-overlap/default/r4", "baseline~aa/default/r4",
    ]
    # Every arm takes a round's first start as often as the others, and each round has every arm once.
    firsts = [cells[i].split("/")[0] for i in range(0, len(cells), 3)]
    assert sorted(firsts[:3]) == ["baseline", "baseline~aa", "t03-single-batch-overlap"]
    grouped = check({"name": "c", "tiers": ["t03-single-batch-overlap"], "repeats": 2, "order": "grouped",
                     "aa_check": False})
    assert [c["cell"] for c in campaign_logic.expand_cells(grouped)] == [
        "baseline/default/r1", "baseline/default/r2",
        "t03-single-batch-overlap/default/r1", "t03-single-batch-overlap/default/r2",
    ]


def plan_for(campaign, records=(), fingerprint=None, **kw):
    tiers = [campaign["baseline"], *campaign["tiers"]]
    workloads = {w["name"]: WORKLOAD for w in campaign["workloads"]}
    return campaign_logic.plan(campaign, kw.get("launches") or launches(*tiers), workloads, list(records), "n1",
                               fingerprint or {"hostname": "n1"})


def test_the_key_changes_with_what_the_cell_measures():
    campaign = check({"name": "c", "tiers": ["t03-single-batch-overlap"], "repeats": 2})
    keys = {c["cell"]: c["key"] for c in plan_for(campaign)["cells"]}
    assert len(set(keys.values())) == len(keys)  # the aa arm and the baseline differ by arm; repeats by repeat
    cell = campaign_logic.expand_cells(campaign)[0]
    base = campaign_logic.cell_key(cell, launches("baseline")["baseline"], WORKLOAD)
    assert base == campaign_logic.cell_key(cell, launches("baseline")["baseline"], dict(WORKLOAD))
    assert base != campaign_logic.cell_key(cell, launches("baseline", sha="bb")["baseline"], WORKLOAD)
    assert base != campaign_logic.cell_key(cell, launches("baseline", env={"X": "1"})["baseline"], WORKLOAD)
    assert base != campaign_logic.cell_key(cell, launches("baseline")["baseline"], {**WORKLOAD, "seed": 2})
    # Where the settings file lies is not what the cell measures.
    assert base == campaign_logic.cell_key(cell, launches("baseline")["baseline"],
                                           {**WORKLOAD, "settings_file": "/elsewhere.yml"})


def test_resume_skips_final_cells_and_retries_transient_ones():
    campaign = check({"name": "c", "tiers": ["t03-single-batch-overlap", "t01-piecewise-cuda-graph"],
                      "repeats": 1, "aa_check": False})
    first = plan_for(campaign)
    by_id = {c["cell"]: c for c in first["cells"]}
    assert first["counts"] == {"total": 3, "done": 0, "failed": 0, "pending": 3, "retrying": 0, "starts": 3}
    records = [
        record(by_id["baseline/default/r1"]),
        record(by_id["t03-single-batch-overlap/default/r1"], "failed",
               {"class": "server_unreachable", "step": "benchmark", "message": "refused"}),
        record(by_id["t01-piecewise-cuda-graph/default/r1"], "failed",
               {"class": "dynamo_fp4_jit", "step": "wait_ready", "message": "Unsupported"}),
    ]
    again = plan_for(campaign, records)
    states = {c["cell"]: c["state"] for c in again["cells"]}
    assert states == {"baseline/default/r1": "done", "t03-single-batch-overlap/default/r1": "pending",
                      "t01-piecewise-cuda-graph/default/r1": "done"}
    (pending,) = [c for c in again["cells"] if c["state"] == "pending"]
    assert pending["attempt"] == 2 and pending["previous_failure"] == "server_unreachable"
    assert again["counts"]["failed"] == 1 and again["counts"]["retrying"] == 1
    assert again["mean_cell_seconds"] == 30.0
    # A record of another campaign, or of another host, is not this campaign's state.
    other = [record(by_id["baseline/default/r1"], name="other"), record(by_id["baseline/default/r1"], host="n2")]
    assert plan_for(campaign, other)["counts"]["done"] == 0


def test_a_changed_launch_script_means_the_cell_runs_again():
    campaign = check({"name": "c", "tiers": ["t03-single-batch-overlap"], "repeats": 1, "aa_check": False})
    cells = {c["cell"]: c for c in plan_for(campaign)["cells"]}
    records = [record(cells["baseline/default/r1"]), record(cells["t03-single-batch-overlap/default/r1"])]
    changed = launches("baseline", "t03-single-batch-overlap")
    changed["t03-single-batch-overlap"]["script_sha256"] = "new"
    replan = plan_for(campaign, records, launches=changed)
    assert {c["cell"]: c["state"] for c in replan["cells"]} == {
        "baseline/default/r1": "done", "t03-single-batch-overlap/default/r1": "pending"}


def test_a_matching_key_on_a_changed_node_warns_and_is_kept():
    campaign = check({"name": "c", "tiers": ["t03-single-batch-overlap"], "repeats": 1, "aa_check": False})
    cells = {c["cell"]: c for c in plan_for(campaign)["cells"]}
    records = [record(cells["baseline/default/r1"], fingerprint={"hostname": "n1", "kernel": "6.1"})]
    replan = plan_for(campaign, records, fingerprint={"hostname": "n1", "kernel": "6.8"})
    (warning,) = replan["warnings"]
    assert "baseline/default/r1" in warning and "kernel: 6.1 -> 6.8" in warning
    assert replan["counts"]["done"] == 1


def test_workloads_of_one_arm_and_round_share_a_start_and_repeats_never_do():
    campaign = check({"name": "c", "tiers": ["t03-single-batch-overlap"], "repeats": 2, "order": "grouped",
                      "aa_check": False, "workloads": [{"name": "a"}, {"name": "b"}]})
    groups = plan_for(campaign)["groups"]
    assert [[c["cell"] for c in g["cells"]] for g in groups] == [
        ["baseline/a/r1", "baseline/b/r1"], ["baseline/a/r2", "baseline/b/r2"],
        ["t03-single-batch-overlap/a/r1", "t03-single-batch-overlap/b/r1"],
        ["t03-single-batch-overlap/a/r2", "t03-single-batch-overlap/b/r2"],
    ]
    # A done cell in the middle splits nothing it should not: the rest of its start still runs.
    cells = {c["cell"]: c for c in plan_for(campaign)["cells"]}
    groups = plan_for(campaign, [record(cells["baseline/a/r1"])])["groups"]
    assert [c["cell"] for c in groups[0]["cells"]] == ["baseline/b/r1"]


def test_the_outcome_of_a_record_decides_retry_and_end():
    cell = {"cell": "t/default/r1", "tier": "t", "arm": "t", "role": "tier", "workload": "default", "repeat": 1,
            "key": "k"}
    ok = {"record": record(cell)}
    refused = {"record": record(cell, "failed", {"class": "warmup_refused", "step": "warmup", "message": "x"})}
    crashed = {"record": record(cell, "failed", {"class": "dynamo_fp4_jit", "step": "wait_ready", "message": "x"})}
    expected = campaign_logic.cell_record({"name": "c"}, cell, 1, {"hostname": "n1"})

    def outcome(result, _cell, attempt_number, retry):
        return campaign_logic.outcome(result, expected, attempt_number, retry)

    assert outcome(ok, cell, 1, 1) == {"recorded": True, "ok": True, "final": True, "retry": False, "class": None}
    assert outcome(refused, cell, 1, 1)["retry"] and not outcome(refused, cell, 1, 1)["final"]
    assert not outcome(refused, cell, 2, 1)["retry"]  # retried once, not twice
    assert outcome(crashed, cell, 1, 1)["final"] and not outcome(crashed, cell, 1, 1)["retry"]
    other = {"record": record({**cell, "cell": "u/default/r1"})}
    assert outcome(other, cell, 1, 1)["recorded"] is False and outcome(None, cell, 1, 1)["recorded"] is False
    earlier = {"record": record(cell, attempt=2)}  # left from another try: not this one's record
    assert outcome(earlier, cell, 1, 1)["recorded"] is False


def test_the_budget_and_the_progress_line():
    assert not campaign_logic.over_budget(1000.0, None, now=10**9)
    assert not campaign_logic.over_budget(1000.0, 1, now=1059.0)
    assert campaign_logic.over_budget(1000.0, 1, now=1061.0)
    line = campaign_logic.progress_line("demo", "n1", 3, 1, 5, [20.0, 40.0], last="t/default/r1 ok")
    assert line == (
        "campaign demo on n1: 3 done (1 failed), 5 left, ETA 2m30s (30s/cell measured) - last: t/default/r1 ok"
    )
    assert "ETA ?" in campaign_logic.progress_line("demo", "n1", 0, 0, 5, [])


def cal_record(host, values, status="success"):
    points = [{"concurrency": c, "repeat": 0, "status": "ok", "output_throughput": v} for c, v in values.items()]
    return ledger.build_record(host=host, tier="baseline", run_id=f"cal-{host}", workload=WORKLOAD,
                               points=points if status == "success" else [],
                               failure=None if status == "success" else {"class": "dynamo_fp4_jit", "step": "start",
                                                                         "message": "x"})


def test_calibration_flags_the_host_far_from_the_fleet_and_the_throttling_one():
    campaign = check({"name": "c", "tiers": [], "calibration": {"enabled": True, "max_deviation_pct": 10}})
    results = {
        "a": {"record": cal_record("a", {2: 100.0, 8: 400.0})},
        "b": {"record": cal_record("b", {2: 102.0, 8: 404.0})},
        "c": {"record": cal_record("c", {2: 80.0, 8: 300.0})},  # 20-25% slow
        "d": {"record": cal_record("d", {2: 101.0, 8: 401.0}),
              "telemetry": {"0": {"sm_clock_mhz_mean": 1200.0, "sm_clock_mhz_max": 1980.0}}},
        "e": {"record": cal_record("e", {}, status="failed")},
        "f": {},
    }
    out = campaign_logic.calibrate(campaign, results)["hosts"]
    assert [h for h, v in sorted(out.items()) if v["excluded"]] == ["c", "d", "e", "f"]
    assert "-2" in out["c"]["reasons"][0] and "fleet's median" in out["c"]["reasons"][0]
    assert out["d"]["throttling"] and "61% of its peak" in out["d"]["throttling"][0]
    assert out["e"]["reasons"] == ["the calibration cell failed: dynamo_fp4_jit"]
    assert out["a"]["deviation_pct"] is not None and not out["a"]["flagged"] and out["a"]["telemetry"] != "ok"
    # One host alone has nothing to be compared with.
    alone = campaign_logic.calibrate(campaign, {"a": {"record": cal_record("a", {2: 50.0})}})
    assert not alone["hosts"]["a"]["flagged"] and alone["single_host"]


def test_the_calibration_cell_comes_first_and_is_planned_apart():
    campaign = check({"name": "c", "tiers": ["t03-single-batch-overlap"], "repeats": 1, "aa_check": False,
                      "calibration": {"enabled": True}})
    planned = plan_for(campaign)
    assert planned["calibration"]["cell"]["cell"] == "baseline~cal/default/r1"
    assert planned["calibration"]["group"]["cells"][0]["role"] == "calibration"
    assert all(c["role"] != "calibration" for g in planned["groups"] for c in g["cells"])
    done = plan_for(campaign, [record(planned["calibration"]["cell"])])
    assert done["calibration"]["group"] is None and done["calibration"]["record"]["status"] == "success"


def test_an_slo_search_is_done_once_per_key():
    campaign = check({"name": "c", "tiers": ["t03-single-batch-overlap"],
                      "slo": [{"metric": "p99_ttft_ms", "max": 100}],
                      "slo_search": {"tier": "t03-single-batch-overlap", "low": 1, "high": 64}})
    first = plan_for(campaign)["slo_search"]
    assert first["tier"] == "t03-single-batch-overlap" and not first["done"]
    line = {"host": "n1", "status": "success", "record_id": "r", "campaign": first["campaign"]}
    tiers = ["baseline", "t03-single-batch-overlap"]
    workloads = {"default": WORKLOAD}
    again = campaign_logic.plan(campaign, launches(*tiers), workloads, [], "n1", {}, [line])["slo_search"]
    assert again["done"] and again["record_id"] == "r"
    changed = launches(*tiers, sha="new")
    assert not campaign_logic.plan(campaign, changed, workloads, [], "n1", {}, [line])["slo_search"]["done"]
    with pytest.raises(campaign_logic.CampaignError, match="needs the targets in slo"):
        check({"name": "c", "tiers": [], "slo_search": {"tier": "baseline"}})


# --- Repeats to a precision -----------------------------------------------------------------------

def valued(cell, value):
    """A successful record of ``cell`` whose c=2 and c=8 points measured ``value`` output tok/s."""
    rec = record(cell)
    rec["points"] = [{"concurrency": c, "repeat": 0, "status": "ok", "output_throughput": value}
                     for c in (2, 8)]
    return rec


def run_until_planned(campaign, values_of):
    """Run every pending cell the plan gives (a record each, valued by ``values_of(arm, repeat)``), plan
    again, until nothing is pending: what the campaign's precision passes do. Returns the last plan."""
    records = []
    while True:
        planned = plan_for(campaign, records)
        pending = [c for c in planned["cells"] if c["state"] == "pending"]
        if not pending:
            return planned, records
        records += [valued(c, values_of(c["arm"], c["repeat"])) for c in pending]


def test_an_arm_gets_rounds_until_its_interval_is_within_the_target():
    campaign = check({"name": "c", "tiers": ["t03-single-batch-overlap"], "repeats": 2, "aa_check": False,
                      "precision": {"target_pct": 5, "max_repeats": 8}})
    # The baseline is steady (+-0.5 %), t03 noisy (+-3 % alternating). Two repeats are one degree of freedom
    # (t = 25 for a Bonferroni pair): even the steady arm needs a third; the noisy one more.
    steady = {r: 100.0 + (0.5 if r % 2 else -0.5) for r in range(1, 9)}
    noisy = {r: 100.0 * (1.03 if r % 2 else 0.97) for r in range(1, 9)}
    planned, records = run_until_planned(
        campaign, lambda arm, r: steady[r] if arm == "baseline" else noisy[r])
    status = planned["precision"]
    assert status["baseline"]["state"] == "target_met" and status["baseline"]["repeats"] == 3
    t03 = status["t03-single-batch-overlap"]
    assert t03["state"] == "target_met" and 3 < t03["repeats"] < 8 and t03["widest_pct"] <= 5
    # The interval one round earlier was wider than the target: no round too many.
    shorter = [r for r in records if not (r["tier"] == "t03-single-batch-overlap"
                                          and r["campaign"]["repeat"] == t03["repeats"])]
    earlier = [r for r in shorter if r["tier"] == "t03-single-batch-overlap"]
    assert campaign_logic.arm_precision(earlier) > 5
    # Every extra cell is a cell of its own: a new key, one start each, repeats counted on.
    cells = [c["cell"] for c in planned["cells"]]
    assert len(cells) == len(set(cells)) == 3 + t03["repeats"]


def test_max_repeats_ends_an_arm_that_never_settles():
    campaign = check({"name": "c", "tiers": ["t03-single-batch-overlap"], "repeats": 2, "aa_check": False,
                      "precision": {"target_pct": 1, "max_repeats": 4}})
    planned, _ = run_until_planned(campaign, lambda arm, r: 100.0 * (1.2 if r % 2 else 0.8))
    for arm in ("baseline", "t03-single-batch-overlap"):
        assert planned["precision"][arm]["state"] == "max_repeats" and planned["precision"][arm]["repeats"] == 4
        assert planned["precision"][arm]["widest_pct"] > 1


def test_a_failed_arm_gets_no_extra_round_and_the_rounds_interleave():
    campaign = check({"name": "c", "tiers": ["t03-single-batch-overlap"], "repeats": 2,
                      "precision": {"target_pct": 0.1, "max_repeats": 3}})
    records = [valued(c, 100.0 + c["repeat"]) for c in plan_for(campaign)["cells"] if c["arm"] != "baseline~aa"]
    aa = [c for c in plan_for(campaign)["cells"] if c["arm"] == "baseline~aa"]
    records += [record(aa[0], status="failed", failure={"class": "kv_cache_no_memory", "step": "wait_ready",
                                                       "message": "x"})]
    records += [valued(aa[1], 100.0)]
    planned = plan_for(campaign, records)
    assert planned["precision"]["baseline~aa"]["state"] == "arm_failed"
    pending = [c["cell"] for c in planned["cells"] if c["state"] == "pending"]
    # Round 3 starts two arms later than round 1 (baseline, t03, aa): aa, baseline, t03; aa gets none.
    assert pending == ["baseline/default/r3", "t03-single-batch-overlap/default/r3"]


def test_precision_is_checked_with_the_campaign():
    with pytest.raises(campaign_logic.CampaignError, match="below repeats"):
        check({"name": "c", "tiers": ["t03-single-batch-overlap"], "repeats": 4, "precision": {"max_repeats": 3}})
    with pytest.raises(campaign_logic.CampaignError, match="needs order interleaved"):
        check({"name": "c", "tiers": ["t03-single-batch-overlap"], "order": "grouped", "precision": {}})
    assert check({"name": "c", "tiers": ["t03-single-batch-overlap"], "precision": {}})["precision"] == \
        campaign_logic.PRECISION_DEFAULTS
    assert check({"name": "c", "tiers": ["t03-single-batch-overlap"]})["precision"] is None


def test_the_arms_interval_is_simultaneous_over_its_concurrencies():
    cell = {"tier": "baseline", "cell": "baseline/default/r1", "arm": "baseline", "role": "baseline",
            "workload": "default", "repeat": 1, "key": "k"}
    records = [valued(cell, v) for v in (100.5, 99.5, 100.5)]
    import math
    import statistics
    logs = [math.log(v) for v in (100.5, 99.5, 100.5)]
    # Two concurrencies: each interval at 1 - 0.05 / 2, so t(0.9875, df 2) = 6.205 (tables), not t(0.975) = 4.303.
    expected = math.expm1(6.205 * statistics.stdev(logs) / math.sqrt(3)) * 100
    assert campaign_logic.arm_precision(records) == pytest.approx(expected, rel=1e-3)
    assert campaign_logic.arm_precision(records[:1]) is None  # one value says nothing of the spread
