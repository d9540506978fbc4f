"""playbooks/campaign.yml on the simulator (SYNTHETIC numbers): a campaign that is killed in the
middle and resumed, the crashing tier recorded and not retried, a transient failure retried once.

Plain ansible-playbook, as a person runs it (the progress lines are its stdout). The campaign is
the baseline and the crashing t01 (SGLANG_SIM_FAULT=crash_on_load through
sglang_campaign_tier_env) x 2 repeats, interleaved, with the A/A arm: 6 cells. (A tier that
succeeds is the A/A arm's path; the fleet test runs one by name.)
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import yaml
from helpers.paths import LOCAL_INVENTORY, REPO, VENV_BIN
from helpers.playbooks import ExperimentLab, ansible_env, experiment_lab_fixture

CRASH = {"t01-piecewise-cuda-graph": {"SGLANG_SIM_FAULT": "crash_on_load"}}
WORKLOAD = {"concurrency": [2], "input_len": 32, "output_len": 32, "num_prompts.multiplier": 2,
            "num_prompts.floor": 4}


def campaign_file(path: Path, **fields) -> Path:
    data = {"name": "t", "baseline": "baseline", "tiers": ["t01-piecewise-cuda-graph"],
            "workloads": [{"name": "w", "settings": WORKLOAD}], "repeats": 2, "order": "interleaved",
            "aa_check": True}
    data.update(fields)
    path.write_text(yaml.safe_dump(data))
    return path


class CampaignLab(ExperimentLab):
    def command(self, campaign: Path, quality_from_file=False, **extra) -> list[str]:
        extravars = {**self.base_vars(), "campaign": str(campaign), "sglang_campaign_report_dir": str(self.root),
                     "sglang_campaign_tier_env": CRASH, **extra}
        if quality_from_file:  # the campaign file decides: the lab's -e (off, for CI time) would win over it
            extravars.pop("sglang_bench_quality_enabled")
        self.runs += 1
        varsfile = self.root / f"vars-{self.runs:02d}.json"
        varsfile.write_text(json.dumps(extravars))
        playbook = [str(VENV_BIN / "ansible-playbook"), "-i", str(LOCAL_INVENTORY), "playbooks/campaign.yml"]
        return [*playbook, "-e", f"@{varsfile}"]

    def start(self, campaign: Path, **extra) -> subprocess.Popen:
        return subprocess.Popen(self.command(campaign, **extra), cwd=REPO, env={**os.environ, **ansible_env()},
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)

    def campaign(self, campaign: Path, timeout=900, **extra) -> subprocess.CompletedProcess:
        return subprocess.run(self.command(campaign, **extra), cwd=REPO, env={**os.environ, **ansible_env()},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=timeout,
                              check=False)

    def cells(self, name="t") -> list[dict]:
        return [r for r in self.records() if (r.get("campaign") or {}).get("name") == name]


lab = experiment_lab_fixture("campaign", CampaignLab)


def test_a_killed_campaign_resumes_without_redoing_a_final_cell(lab):
    campaign = campaign_file(lab.root / "campaign.yml")
    proc = lab.start(campaign)
    progress = []
    for line in proc.stdout:  # the progress shows while it runs, one line per recorded cell
        if line.startswith("PROGRESS "):
            progress.append(line)
            if len(progress) == 2:
                break
    os.killpg(proc.pid, signal.SIGKILL)  # the controller and its workers, in the middle of cell 3
    proc.wait(timeout=30)
    assert "2 done (1 failed), 4 left, ETA" in progress[-1], progress
    assert "t01-piecewise-cuda-graph/w/r1 failed: dynamo_fp4_jit" in progress[-1]

    before = lab.cells()
    assert [r["campaign"]["cell"] for r in before] == ["baseline/w/r1", "t01-piecewise-cuda-graph/w/r1"]
    assert all(line.endswith(b"}") for line in lab.ledger_bytes().splitlines() if line)  # no torn line
    lock = json.loads((lab.run_dir / "sglang.lock").read_text())  # left behind, naming its dead holder
    assert lock["pid"] and not Path(f"/proc/{lock['pid']}").exists()

    done = lab.campaign(campaign)
    assert done.returncode == 0, done.stdout[-6000:]
    assert "took over a stale experiment lock" in done.stdout  # the killed controller's, told on stderr
    assert "6 cells: 2 already final in the ledger (1 of them failed), 4 to run" in done.stdout
    after = lab.cells()
    assert after[: len(before)] == before  # nothing before the kill was rewritten
    cells = [r["campaign"]["cell"] for r in after]
    assert sorted(set(cells)) == sorted(cells), cells  # no cell measured twice
    assert len(cells) == 6
    crashed = [r for r in after if r["tier"] == "t01-piecewise-cuda-graph"]
    assert [(r["failure"]["class"], r["campaign"]["attempt"]) for r in crashed] == [("dynamo_fp4_jit", 1)] * 2
    assert all(r["status"] == "success" for r in after if r["tier"] != "t01-piecewise-cuda-graph")
    # Every measured concurrency was warmed up first, and how long it took is in the record.
    assert all([lvl["concurrency"] for lvl in r["warmup"]["per_level"]] == [2] for r in after if r["points"])
    assert not (lab.run_dir / "sglang.lock").exists()

    report = (lab.root / "campaign-t.md").read_text()
    assert "SYNTHETIC" in report and "A/A" in report and "dynamo_fp4_jit" in report

    # Nothing left: the same command plans nothing and leaves the running server alone.
    server = lab.server()
    again = lab.campaign(campaign)
    assert again.returncode == 0, again.stdout[-4000:]
    assert "6 cells: 6 already final in the ledger (2 of them failed), 0 to run" in again.stdout
    assert lab.server()["pid"] == server["pid"] and len(lab.cells()) == 6


def test_a_transient_failure_is_retried_once_and_the_campaign_goes_on(lab):
    # The campaign file also turns the output-quality check off (no -e on the command line).
    campaign = campaign_file(lab.root / "transient.yml", name="tr", tiers=["t04-ep8"], repeats=1, aa_check=False,
                             quality={"enabled": False})
    result = lab.campaign(campaign, quality_from_file=True,
                          sglang_campaign_tier_env={"t04-ep8": {"SGLANG_SIM_FAULT": "port_in_use"}})
    assert result.returncode == 0, result.stdout[-6000:]
    cells = lab.cells("tr")
    assert [(r["campaign"]["cell"], r["status"], r["campaign"]["attempt"]) for r in cells] == [
        ("baseline/w/r1", "success", 1), ("t04-ep8/w/r1", "failed", 1), ("t04-ep8/w/r1", "failed", 2)]
    assert {r["failure"]["class"] for r in cells[1:]} == {"port_in_use"}
    assert "(transient: tried again)" in result.stdout
    assert cells[0]["quality"]["status"] == "off"


def test_a_spent_budget_starts_no_cell_and_says_how_to_go_on(lab):
    campaign = campaign_file(lab.root / "budget.yml", name="bu", tiers=["t03-single-batch-overlap"], repeats=1,
                             aa_check=False, budget_minutes=0.001)
    result = lab.campaign(campaign)
    assert result.returncode == 0, result.stdout[-6000:]
    assert lab.cells("bu") == []
    assert "budget of 0.001 minutes is spent" in result.stdout and "run of the same command" in result.stdout
    # Run alone (no earlier test's ledger in the lab), no host has a ledger: no report, and no failure.
    if not list((lab.root / "controller-results").glob("*/ledger.jsonl")):
        assert "No report yet: no campaign host has a ledger" in result.stdout


def test_a_precision_target_adds_interleaved_rounds_up_to_max_repeats(lab):
    # One planned round, then the target adds rounds: one value an arm says nothing of its spread, so every
    # arm gets a second, interleaved (round 2 starts one arm later), and with a target no run meets
    # (0.001 %) the repeats end at max_repeats; the same command again adds nothing.
    # The same cells run the output-quality check, the campaign's default (no -e: the file decides, and
    # sets a rule). t03's outputs change (SGLANG_SIM_NUMERICS=perturbed, SYNTHETIC), but without an A/A
    # arm there is no floor: the report says so and flags nothing (the rule firing: tests/unit/test_quality.py
    # and make campaign-demo).
    rule = {"aa_floor_margin": 0.05}
    campaign = campaign_file(lab.root / "precision.yml", name="pr", tiers=["t03-single-batch-overlap"], repeats=1,
                             aa_check=False, precision={"target_pct": 0.001, "max_repeats": 2}, quality={"rule": rule})
    perturbed = {"t03-single-batch-overlap": {"SGLANG_SIM_NUMERICS": "perturbed"}}
    result = lab.campaign(campaign, quality_from_file=True, sglang_campaign_tier_env=perturbed)
    assert result.returncode == 0, result.stdout[-6000:]
    records = lab.cells("pr")
    cells = [r["campaign"]["cell"] for r in records]
    assert cells == ["baseline/w/r1", "t03-single-batch-overlap/w/r1",
                     "t03-single-batch-overlap/w/r2", "baseline/w/r2"]
    assert all(r["campaign"]["precision"]["max_repeats"] == 2 for r in records)
    for record in records:  # every cell carries its quality block, with the outputs and the campaign's rule
        assert record["quality"]["status"] == "ok", record["quality"]
        assert record["quality"]["outputs"]["single"] and record["campaign"]["quality_rule"] == rule
    assert records[1]["quality"]["comparison"]["verdict"].startswith("outputs changed (agreement ")
    report = (lab.root / "campaign-pr.md").read_text()
    assert "sim-local: no A/A floor (no A/A arm with outputs)" in report
    assert "vs no A/A floor); rule not applied: no A/A floor |" in report
    assert "| t03-single-batch-overlap | **quality_regressed" not in report  # its status stays its speed's
    again = lab.campaign(campaign, quality_from_file=True, sglang_campaign_tier_env=perturbed)
    assert again.returncode == 0 and len(lab.cells("pr")) == 4, again.stdout[-4000:]
    report = (lab.root / "campaign-pr.md").read_text()
    assert report.count("max_repeats reached") == 2
