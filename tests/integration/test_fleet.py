"""A fleet: one campaign on two simulator nodes at once (SYNTHETIC numbers), on Ansible's own
multi-host engine - strategy free, per-host failure isolation - with the node calibration, the
SLO search on a live server per host, and verdicts that compare within one host only.

Two hosts on this machine (local connection), each with its own port and work dir, both members
of sglang_nodes so that they inherit inventory/local.yml's simulator settings.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

import psutil
import pytest
import yaml
from helpers.paths import LOCAL_INVENTORY, REPO, VENV_BIN
from helpers.playbooks import ansible_env, run_playbook
from helpers.processes import free_port, kill_recorded_sessions

WORKLOAD = {"concurrency": [2], "input_len": 32, "output_len": 32, "num_prompts.multiplier": 2,
            "num_prompts.floor": 4}


class Fleet:
    def __init__(self, root: Path, hosts=("sim-a", "sim-b")):
        self.root = root
        self.hosts = {h: {"port": free_port(), "work": root / h} for h in hosts}
        self.inventory = root / "fleet.json"
        hostvars = {h: {"ansible_connection": "local", "ansible_python_interpreter": str(VENV_BIN / "python"),
                        "sglang_lab_work_dir": str(v["work"]), "sglang_lab_port": v["port"],
                        "sglang_lab_ml_env": str(REPO / ".venv")}
                    for h, v in self.hosts.items()}
        self.inventory.write_text(json.dumps(
            {"all": {"children": {"sglang_nodes": {"children": {"test_fleet": {"hosts": hostvars}}}}}}))
        self.results = root / "controller-results"
        self.runs = 0

    def campaign(self, data: dict, timeout=1200) -> subprocess.CompletedProcess:
        self.runs += 1
        path = self.root / f"campaign-{self.runs}.yml"
        path.write_text(yaml.safe_dump({"hosts": "test_fleet", "baseline": "baseline", **data}))
        extravars = {"campaign": str(path), "sglang_bench_controller_results_dir": str(self.results),
                     "sglang_campaign_report_dir": str(self.root)}
        varsfile = self.root / f"vars-{self.runs}.json"
        varsfile.write_text(json.dumps(extravars))
        argv = [str(VENV_BIN / "ansible-playbook"), "-i", str(LOCAL_INVENTORY), "-i", str(self.inventory),
                "playbooks/campaign.yml", "-e", f"@{varsfile}"]
        return subprocess.run(argv, cwd=REPO, env={**os.environ, **ansible_env()}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, timeout=timeout, check=False)

    def records(self, host: str, name: str) -> list[dict]:
        ledger = self.hosts[host]["work"] / "results" / "ledger.jsonl"
        if not ledger.exists():
            return []
        out = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
        return [r for r in out if (r.get("campaign") or {}).get("name") == name]

    def stop_all(self):
        for host, v in self.hosts.items():
            run_playbook(self.root / f"stop-{host}-{time.monotonic_ns()}", "stop.yml", LOCAL_INVENTORY,
                         extravars={"sglang_lab_work_dir": str(v["work"]), "sglang_lab_port": v["port"],
                                    "sglang_server_lock_force": True})
            kill_recorded_sessions(v["work"] / "run")


@pytest.fixture
def fleet(tmp_path):
    fleet = Fleet(tmp_path)
    yield fleet
    fleet.stop_all()


def span(record):
    return (datetime.fromisoformat(record["started_at"].replace("Z", "+00:00")),
            datetime.fromisoformat(record["ended_at"].replace("Z", "+00:00")))


def test_two_hosts_run_one_campaign_in_parallel_and_are_judged_apart(fleet):
    result = fleet.campaign({
        "name": "fl", "tiers": ["t03-single-batch-overlap"], "workloads": [{"name": "w", "settings": WORKLOAD}],
        "repeats": 1, "aa_check": False, "calibration": {"enabled": True, "max_deviation_pct": 50},
        # A median: what is under test is one search per host, not its percentile (a p99 probe
        # sends 100 requests, which made this test 52 s longer).
        "slo": [{"metric": "median_ttft_ms", "max": 100}],
        "slo_search": {"tier": "t03-single-batch-overlap", "low": 1, "high": 32, "tolerance": 16},
    })
    assert result.returncode == 0, result.stdout[-6000:]
    for host in fleet.hosts:
        cells = [r["campaign"]["cell"] for r in fleet.records(host, "fl")]
        assert cells == ["baseline~cal/w/r1", "baseline/w/r1", "t03-single-batch-overlap/w/r1"], (host, cells)
        assert {r["host"] for r in fleet.records(host, "fl")} == {host}
    # In parallel: while sim-a ran its cells, sim-b ran some of its own.
    a = [span(r) for r in fleet.records("sim-a", "fl")]
    b = [span(r) for r in fleet.records("sim-b", "fl")]
    assert any(sa < eb and sb < ea for sa, ea in a for sb, eb in b)
    calibration = json.loads((fleet.root / "calibration-fl.json").read_text())
    assert set(calibration["hosts"]) == {"sim-a", "sim-b"}
    assert all(h["deviation_pct"] is not None and not h["excluded"] for h in calibration["hosts"].values())
    # Every verdict compares within one host: one section per host, each against its own baseline.
    # Each host searched its own live server for the SLO, after its cells, once.
    for host in fleet.hosts:
        (line,) = [json.loads(x) for x in (fleet.results / host / "slo_search.jsonl").read_text().splitlines()]
        assert line["host"] == host and line["campaign"]["name"] == "fl" and line["tier"] == "t03-single-batch-overlap"
        search = line["slo_search"]
        assert search["probes"] and search["outcome"] in ("bracketed", "low_fails", "high_passes")
    report = (fleet.root / "campaign-fl.md").read_text()
    assert "SYNTHETIC" in report and "Node calibration" in report and "SLO search" in report
    for host in fleet.hosts:
        assert f"## Host {host}" in report


def test_a_host_that_fails_part_way_does_not_stop_the_other(fleet):
    # sim-b's experiment lock is held by a live process: sim-b fails when its calibration takes
    # the lock, after its plan; sim-a goes on alone.
    holder = subprocess.Popen(["sleep", "600"])
    try:
        run_dir = fleet.hosts["sim-b"]["work"] / "run"
        run_dir.mkdir(parents=True)
        lock = {"token": "someone-else", "pid": holder.pid, "pid_create_time": psutil.Process(holder.pid).create_time(),
                "pid_checkable": True, "user": "test", "host": "here", "play": "a person's experiment",
                # Taken now: a lock older than sglang_server_lock_max_age_seconds (a day) is stale and
                # taken over even from a live holder, which is not what this test is about.
                "since": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        (run_dir / "sglang.lock").write_text(json.dumps(lock))
        result = fleet.campaign({
            "name": "iso", "tiers": [], "workloads": [{"name": "w", "settings": WORKLOAD}],
            "repeats": 1, "aa_check": False, "calibration": {"enabled": True},
        })
        assert result.returncode != 0
        assert "sim-b" in result.stdout and "a person's experiment" in result.stdout
        assert [r["campaign"]["cell"] for r in fleet.records("sim-a", "iso")] == ["baseline~cal/w/r1", "baseline/w/r1"]
        assert fleet.records("sim-b", "iso") == []
        assert json.loads((run_dir / "sglang.lock").read_text())["token"] == "someone-else"  # left as it was
        calibration = json.loads((fleet.root / "calibration-iso.json").read_text())
        assert calibration["hosts"]["sim-b"]["excluded"] and not calibration["hosts"]["sim-a"]["excluded"]
        assert (fleet.root / "campaign-iso.md").exists()
    finally:
        holder.kill()
        holder.wait()
