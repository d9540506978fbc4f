"""Integration: the output-quality check in playbooks/experiment.yml, against the simulator (SYNTHETIC).

issue 25: after the benchmark, on the same server, the cycle sends data/quality.yml's prompts
greedily; the record keeps the outputs as its ``quality`` block and the comparison shows the
quality verdict beside the speed verdict. The simulator's SGLANG_SIM_NUMERICS=perturbed stands in
for a tier that changes the arithmetic. One lab: baseline; a tier with perturbed numerics
(``outputs changed``); the baseline again (``outputs unchanged``, the A/A). Three short cycles on
inventory/local.yml, one benchmark point each.
"""

from __future__ import annotations

import pytest
import yaml
from helpers.paths import REPO
from helpers.playbooks import ExperimentLab, experiment_lab_fixture, tail, task_results

PROMPTS = yaml.safe_load((REPO / "data" / "quality.yml").read_text())
TIER = "t03-single-batch-overlap"



class QualityLab(ExperimentLab):
    quality_enabled = True  # the check's default; the other labs turn it off for CI time


lab = experiment_lab_fixture("quality", QualityLab)


def facts(runner, tier):
    (result,) = task_results(runner, f"Append the record to the ledger for tier {tier}")
    return result["ansible_facts"]["sglang_bench_compare"]


def table(runner, tier):
    return task_results(runner, f"Show the comparison with the baseline - {tier}")[0]["msg"]


# The quality check does not depend on the benchmark's points: one point, a 1 s start-up and simulated
# GPU time 50x faster keep the three cycles short (CI time). The check turned off
# (-e sglang_bench_quality_enabled=false) is tests/unit/test_quality.py's, and every other lab's.
SHORT = {"sglang_bench_concurrency": [1],
         "sglang_launch_env_override": {"SGLANG_SIM_LOAD_SECONDS": "1", "SGLANG_SIM_SPEED": "50"}}


@pytest.fixture(scope="module")
def runs(lab):
    first = lab.succeed(tier="baseline", **SHORT)
    perturbed = lab.run(tier=TIER, sglang_experiment_server_env={"SGLANG_SIM_NUMERICS": "perturbed"}, **SHORT)
    assert perturbed.status == "successful", tail(perturbed)
    again = lab.succeed(tier="baseline", **SHORT)
    return first, perturbed, again


def test_the_record_keeps_the_greedy_outputs_of_both_passes(lab, runs):
    record = lab.records()[0]
    quality = record["quality"]
    assert quality["status"] == "ok" and quality["error"] is None
    assert quality["prompt_set"]["name"] == PROMPTS["name"]
    assert quality["prompt_set"]["prompts"] == len(PROMPTS["prompts"])
    for name in ("single", "batch"):
        outputs = quality["outputs"][name]
        assert [o["id"] for o in outputs] == [p["id"] for p in PROMPTS["prompts"]]
        for output in outputs:
            assert len(output["token_ids"]) == PROMPTS["sampling"]["max_new_tokens"]
            assert len(output["logprobs"]) == len(output["token_ids"])
            assert all(lp < 0 for lp in output["logprobs"])
    # Measured, not assumed: the simulator batches greedily alike, so the batch pass agrees.
    assert quality["batch_vs_single"]["identical"] == len(PROMPTS["prompts"])
    assert quality["seconds"]["single"] > 0 and quality["seconds"]["batch"] > 0
    # Each pass began from a flushed prefix cache (the simulator's /flush_cache, as SGLang's, says 200).
    assert quality["cache_flush"]["single"]["ok"] and quality["cache_flush"]["batch"]["ok"]
    assert quality["comparison"]["verdict"] == "no baseline outputs"
    assert facts(runs[0], "baseline")["quality"]["verdict"] == "no baseline outputs"


def test_a_tier_that_changes_the_arithmetic_is_flagged_beside_its_speed(lab, runs):
    _, perturbed, _ = runs
    baseline, record = lab.records()[:2]
    assert record["tier"] == TIER and record["launch"]["env"]["SGLANG_SIM_NUMERICS"] == "perturbed"
    comparison = facts(perturbed, TIER)
    quality = comparison["quality"]
    assert quality["verdict"].startswith("outputs changed (agreement ")
    assert quality["verdict"].endswith(" vs no A/A yet: run the baseline twice)")
    assert quality["baseline_record_id"] == baseline["record_id"]
    single = quality["single"]
    assert 0 < single["identical"] < single["prompts"] == len(PROMPTS["prompts"])
    assert 0 < single["token_agreement"] < 1 and single["mean_first_divergence"] >= 1
    assert 0 < single["mean_abs_logprob_diff"] <= 0.004
    # The numerics knob does not split the speed comparison: the tier is compared with the baseline.
    assert all(p["baseline_record_id"] == baseline["record_id"] for p in comparison["points"])
    # The record keeps the same comparison, made before its append.
    assert record["quality"]["comparison"]["verdict"] == quality["verdict"]
    lines = table(perturbed, TIER).splitlines()
    assert any(line.startswith("quality (") and quality["verdict"] in line for line in lines), lines


def test_the_baseline_again_is_unchanged_and_gives_the_floor(lab, runs):
    _, _, again = runs
    first, _, second = lab.records()[:3]
    quality = facts(again, "baseline")["quality"]
    assert quality["verdict"] == "outputs unchanged"
    assert quality["baseline_record_id"] == first["record_id"]
    assert quality["aa"] == {"record_ids": [first["record_id"], second["record_id"]],
                             "token_agreement": 1.0, "identical_share": 1.0}
    assert quality["single"]["mean_abs_logprob_diff"] == 0.0
    assert "outputs unchanged" in table(again, "baseline")

