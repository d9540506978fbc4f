"""A campaign on REAL SGLang 0.5.17 on the lent H200, replayed (`PHASE=e make real-gpu-check`).

tests/fixtures/real-sglang/0.5.17-h200-tp1/phase-e/ is what three device calls recorded on one
machine: the campaign data/campaigns/h200-tiny.yml (baseline, tiny-chunk, the crashing tiny-nomem,
2 repeats, interleaved, with the A/A arm) under a 5-minute budget, run twice, then once more with
its tiers taken out and a 7-minute budget, so that the A/A arm could finish within the device's
10-minute call (README.md there). The playbook output of each call, the ledger, ps and nvidia-smi.

Nothing here talks to a server: the project's decisions are replayed on what real SGLang did.
"""

from __future__ import annotations

import json
import re
from collections import Counter

import sglang_campaign as campaign_logic
import sglang_ledger as ledger
import sglang_stats as stats
from helpers.paths import FIXTURES

REC = FIXTURES / "real-sglang" / "0.5.17-h200-tp1" / "phase-e"


def records():
    return [json.loads(line) for line in (REC / "work" / "results" / "ledger.jsonl").read_text().splitlines()]


def cells():
    return [r for r in records() if (r.get("campaign") or {}).get("name") == "h200-tiny"]


def test_every_real_cell_is_a_valid_record_of_real_sglang():
    for record in cells():
        assert ledger.validate_record(record) == [], record["campaign"]["cell"]
        assert record["target_is_simulator"] is False and record["versions"]["sglang"] == "0.5.17"
        assert record["host"] == "h200-device"


def test_no_cell_ran_twice_across_three_calls_and_each_call_resumed():
    ids = [r["campaign"]["cell"] for r in cells()]
    assert Counter(ids).most_common(1)[0][1] == 1, ids
    assert ids == ["baseline/short/r1", "tiny-chunk/short/r1", "tiny-nomem/short/r1", "baseline~aa/short/r1",
                   "baseline/short/r2", "baseline~aa/short/r2"]
    plans = [re.search(r"'(\d+) cells: (\d+) already final", (REC / f"campaign_{n}.out").read_text()).groups()
             for n in (1, 2, 3)]
    assert plans == [("8", "0"), ("8", "1"), ("4", "1")]  # the third call's file had no tiers left
    for n in (1, 2):  # the budget stopped the first two calls and said how to go on
        assert "minutes is spent" in (REC / f"campaign_{n}.out").read_text()


def test_the_start_up_crash_is_final_after_one_try():
    (crash,) = [r for r in cells() if r["tier"] == "tiny-nomem"]
    assert crash["failure"]["class"] == "kv_cache_no_memory" and crash["campaign"]["attempt"] == 1
    assert campaign_logic.is_final(crash) and not campaign_logic.is_transient(crash["failure"]["class"])


def test_every_measured_concurrency_was_warmed_up_first_and_timed():
    for record in cells():
        if record["status"] != "success":
            continue
        levels = [(w["concurrency"], w["requests"]) for w in record["warmup"]["per_level"]]
        floor = record["workload"]["warmup"]["requests"]
        assert levels == [(c, max(c, floor)) for c in record["workload"]["concurrency"]]
        assert all(w["seconds"] > 0 for w in record["warmup"]["per_level"])


def test_the_real_a_a_comparison_is_computed_and_labelled_real():
    analysis = stats.campaign_analysis(cells())
    text = json.dumps(analysis, default=str)
    assert "baseline~aa" in text and "h200-device" in text
    report = (REC / "report.md").read_text()
    assert "SYNTHETIC" not in report  # real numbers are never labelled as the simulator's
    assert "Each host's noise floor" in report and "kv_cache_no_memory" in report


def test_the_first_cell_on_a_fresh_machine_was_the_slow_one():
    # What the recording showed: the very first server start on the machine measured far below
    # every later start of the same launch script (cold caches), the A/A arm included. The
    # reason a fleet campaign runs a calibration cell first.
    def output(record, concurrency):
        return next(p["output_throughput"] for p in record["points"] if p["concurrency"] == concurrency)

    same_script = [r for r in cells() if r["tier"] == "baseline"]
    first, later = same_script[0], same_script[1:]
    assert first["campaign"]["cell"] == "baseline/short/r1"
    assert all(output(first, 32) < 0.8 * output(r, 32) for r in later)
