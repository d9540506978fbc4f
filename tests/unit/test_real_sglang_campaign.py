"""A campaign on REAL SGLang 0.5.17 on the lent H200, replayed (`PHASE=e make real-gpu-check`).

tests/fixtures/real-sglang/0.5.17-h200-tp1/phase-e/ is what three device calls recorded on one
machine: the campaign data/campaigns/h200-tiny.yml (baseline, tiny-chunk, the crashing tiny-nomem,
2 repeats, interleaved, with the A/A arm) under a 5-minute budget, run twice, then once more with
its tiers taken out and a 7-minute budget, so that the A/A arm could finish within the device's
10-minute call (README.md there). The playbook output of each call, the ledger, ps and nvidia-smi.

Nothing here talks to a server: the project's decisions are replayed on what real SGLang did -
the ledger through today's validation, the campaign's plan before each call through today's
sglang_campaign.plan (resume), each cell's workload through today's warm-up rounds, the cells
through today's statistics and report.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import campaign_report
import sglang_campaign as campaign_logic
import sglang_ledger as ledger
import sglang_stats as stats
import sglang_warmup_rounds as warmup_rounds
import yaml
from helpers.paths import FIXTURES, REPO
from helpers.recordings import shown_msg, tasks

REC = FIXTURES / "real-sglang" / "0.5.17-h200-tp1" / "phase-e"
CAMPAIGN = REPO / "data" / "campaigns" / "h200-tiny.yml"
HOST = "h200-device"


def records():
    return [json.loads(line) for line in (REC / "work" / "results" / "ledger.jsonl").read_text().splitlines()]


def cells():
    return [r for r in records() if (r.get("campaign") or {}).get("name") == "h200-tiny"]


def test_every_real_cell_is_a_valid_record_of_real_sglang():
    for record in cells():
        assert ledger.validate_record(record) == [], record["campaign"]["cell"]
        assert record["target_is_simulator"] is False and record["versions"]["sglang"] == "0.5.17"
        assert record["host"] == "h200-device"


def campaign_of_call(number):
    """The campaign as today's check reads data/campaigns/h200-tiny.yml; the third call ran it with
    its tiers emptied (README.md there)."""
    schema = json.loads((REPO / "data" / "campaigns" / "schema.json").read_text())
    campaign = campaign_logic.check_campaign(yaml.safe_load(CAMPAIGN.read_text()), schema, None)
    return dict(campaign, tiers=[]) if number == 3 else campaign


def launches_and_workloads():
    """What the plan module is given of each tier and workload (roles/sglang_campaign validate_tier.yml:
    the launch script's sha256, its environment, the SGLang version and target), as the cells'
    records keep it."""
    launches, workloads = {}, {}
    for record in cells():
        launches.setdefault(record["tier"], {
            "script_sha256": record["launch"]["script_sha256"],
            "env": record["launch"]["env"],
            "versions": {"sglang_version": record["versions"]["sglang"], "target": "sglang"},
        })
        workloads.setdefault(record["campaign"]["workload"], record["workload"])
    return launches, workloads


def recorded_by_call(number):
    """The cells call ``number`` recorded: those whose record it weighed."""
    output = (REC / f"campaign_{number}.out").read_text()
    weighed = re.compile(r"^sglang_campaign : Weigh the record of cell (\S+)$")
    return [m[1] for name, outcome, _ in tasks(output) if outcome == "ok" and (m := weighed.match(name))]


def test_each_call_resumed_and_no_cell_ran_twice():
    """Before each call, today's plan of the campaign on the ledger as it then stood: the counts the
    call printed, and every cell the call went on to record still pending - so none ran twice."""
    launches, workloads = launches_and_workloads()
    by_id = {r["campaign"]["cell"]: r for r in cells()}
    ledger_then = []
    for number in (1, 2, 3):
        planned = campaign_logic.plan(campaign_of_call(number), launches, workloads, ledger_then, HOST)
        (body,) = [b for name, _, b in tasks((REC / f"campaign_{number}.out").read_text())
                   if name == "sglang_campaign : Show the plan - h200-tiny"]
        assert campaign_logic.summary(planned)[0] == shown_msg(body)[0], number
        state = {c["cell"]: c["state"] for c in planned["cells"]}
        ran = recorded_by_call(number)
        assert ran and all(state[cell] == "pending" for cell in ran), (number, ran)
        ledger_then += [by_id[cell] for cell in ran]
    assert [r["campaign"]["cell"] for r in ledger_then] == [r["campaign"]["cell"] for r in cells()]
    assert Counter(r["campaign"]["cell"] for r in cells()).most_common(1)[0][1] == 1
    for number in (1, 2):  # the budget stopped the first two calls and said how to go on
        assert "minutes is spent" in (REC / f"campaign_{number}.out").read_text()


def test_the_start_up_crash_is_final_after_one_try():
    (crash,) = [r for r in cells() if r["tier"] == "tiny-nomem"]
    assert crash["failure"]["class"] == "kv_cache_no_memory" and crash["campaign"]["attempt"] == 1
    assert campaign_logic.is_final(crash) and not campaign_logic.is_transient(crash["failure"]["class"])


def test_every_cell_warmed_up_at_each_measured_concurrency_as_todays_rounds_say():
    """Each successful cell's resolved warm-up block through today's warm-up rounds: one round per
    measured concurrency, at least that many requests - the rounds the record says it sent, each
    timed."""
    for record in cells():
        if record["status"] != "success":
            continue
        workload = record["workload"]
        settings = warmup_rounds.settings_from_spec(workload["warmup"], workload["concurrency"])
        rounds = warmup_rounds.warmup_rounds(settings["requests"], settings["concurrency"], settings["levels"])
        sent = [(w["concurrency"], w["requests"]) for w in record["warmup"]["per_level"]]
        assert sent == rounds, record["campaign"]["cell"]
        assert [c for c, _ in rounds] == workload["concurrency"]
        assert warmup_rounds.requests_in(rounds) == record["warmup"]["requests"] == record["warmup"]["succeeded"]
        assert all(w["seconds"] > 0 for w in record["warmup"]["per_level"])


def test_the_real_a_a_comparison_is_indistinguishable_and_labelled_real():
    """The cells through today's statistics: real (not SYNTHETIC), the A/A arm indistinguishable at
    every point and metric (2 repeats a side: huge intervals), tiny-chunk without a verdict (one
    repeat), tiny-nomem crashed; today's report says so and is not labelled as the simulator's."""
    analysis = stats.campaign_analysis(cells())
    assert analysis["synthetic"] is False
    host = analysis["hosts"][HOST]
    status = host["status"]
    assert status["baseline~aa"]["status"] == "indistinguishable" and host["aa_holds"] is True
    (aa,) = host["workloads"]["short"]["aa"]
    verdicts = [m["verdict"] for per_point in aa["points"].values() for m in per_point.values()]
    assert verdicts and set(verdicts) == {"indistinguishable"}
    assert status["tiny-chunk"]["status"] == "tested" and "one repeat" in status["tiny-chunk"]["reason"]
    assert status["tiny-nomem"]["status"] == "crashed"
    assert status["tiny-nomem"]["failure_classes"] == {"kv_cache_no_memory": 1}
    report = campaign_report.build_markdown(analysis, ["baseline", "tiny-chunk", "tiny-nomem"], [], "x.png")
    assert "SYNTHETIC" not in report  # real numbers are never labelled as the simulator's
    assert "kv_cache_no_memory" in report and "indistinguishable" in report
