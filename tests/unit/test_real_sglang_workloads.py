"""Replays of the campaign over three workloads on real SGLang 0.5.17 (issue 27, item 6:
`PHASE=e CAMPAIGN=data/campaigns/h200-workloads.yml`, recorded in tests/fixtures/real-sglang/
0.5.17-h200-tp1/phase-e-workloads/ on an H100 that day, README there) through today's code.

Nothing here talks to a server. Each cell's recorded bytes (bench_serving's raw output, the client's
sidecars and status lines) go through today's point evaluation and must give the recorded point; the
campaign file, the inventory's overrides and data/benchmark.yml go through today's campaign check and
settings resolver and must give the workloads the records name; the kept prompt counts go through
today's pinning and must give what the tier's points started with; and a shared-prefix point whose
server-side hit rate is moved out of its band must fail as workload_mismatch."""

from __future__ import annotations

import json
import re

import pytest
import sglang_bench_points as bp
import sglang_bench_settings as settings
import sglang_campaign as campaign_logic
import sglang_compare
import sglang_ledger as ledger_logic
import sglang_point_sizes as sizes
import sglang_point_window as window
import sglang_workload_options as options
import yaml
from helpers import recordings
from helpers.paths import FIXTURES, REPO

REC = FIXTURES / "real-sglang" / "0.5.17-h200-tp1" / "phase-e-workloads"
CAMPAIGN = REPO / "data" / "campaigns" / "h200-workloads.yml"
INVENTORY = REPO / "inventory" / "h200-device.yml"
SHARED_PREFIX = "generated-shared-prefix"
# What run_plan adds to an evaluated point after evaluate_point (times, paths, the command, the
# client's pause and the kept size it started from): not part of the evaluation replayed here.
RUN_PLAN_KEYS = (
    "started_at",
    "ended_at",
    "wall_s",
    "settle_pause_skipped",
    "output_file",
    "client_log",
    "command",
    "pinned",
)


def ledger() -> list[dict]:
    return recordings.packed_records(REC)


def cell(name: str) -> dict:
    (record,) = [r for r in ledger() if r["campaign"]["cell"] == name]
    return record


CELLS = [r["campaign"]["cell"] for r in ledger()]


def unpacked(record, tmp_path) -> dict:
    """The cell's raw folder, gunzipped into tmp_path (recordings.unpack_run), each plan spec given what
    today's sglang_bench gives every point of the record's workload beyond the client's plan
    (point_extras: the workload's cache_hit_target among them); ``planned`` keeps, per point, the
    recorded plan's and today's values of those keys."""
    run = recordings.unpack_run(REC / "raw", record["run_id"], tmp_path)
    planned = {}
    for point_id, spec in run["specs"].items():
        argv = spec["argv"]
        extras = bp.point_extras(record["workload"], argv[argv.index("--host") + 1], argv[argv.index("--port") + 1])
        planned[point_id] = {k: spec.get(k) for k in bp.PLAN_EXTRAS}, {k: extras.get(k) for k in bp.PLAN_EXTRAS}
        run["specs"][point_id] = dict(spec, **{k: v for k, v in extras.items() if k != "output_file"})
    return dict(run, planned=planned)


todays_point, recorded_point = recordings.todays_point, recordings.recorded_point


def todays_campaign():
    schema = json.loads((REPO / "data" / "campaigns" / "schema.json").read_text())
    return campaign_logic.check_campaign(yaml.safe_load(CAMPAIGN.read_text()), schema, None)


def test_every_cell_is_a_valid_success_of_real_sglang():
    found = ledger()
    assert len(found) == len(campaign_logic.expand_cells(todays_campaign()))
    for record in found:
        assert ledger_logic.validate_record(record) == [], record["campaign"]["cell"]
        assert record["status"] == "success" and record["campaign"]["name"] == "h200-workloads"
        assert record["target_is_simulator"] is False and record["versions"]["sglang"] == "0.5.17"
        assert record["points"] and all(p.get("server_metrics", {}).get("available") for p in record["points"])


def test_the_records_workloads_are_todays_campaign_workloads():
    """Today's campaign check and expansion give the cells the records name, in the order they ran;
    each cell's workload, resolved by today's settings code from the campaign file (the catalogue's
    entry under the file's own settings) over the inventory's overrides of data/benchmark.yml, is
    the record's workload, with the defaults sglang_bench's argument spec fills in."""
    campaign = todays_campaign()
    assert [c["cell"] for c in campaign_logic.expand_cells(campaign)] == CELLS
    host_vars = yaml.safe_load(INVENTORY.read_text())["all"]["children"]["sglang_nodes"]["vars"]
    overrides = {var: host_vars[var] for _name, var, _path in settings.OVERRIDES if var in host_vars}
    data = yaml.safe_load((REPO / "data" / "benchmark.yml").read_text())
    workloads = {w["name"]: w for w in campaign["workloads"]}
    assert workloads[SHARED_PREFIX].get("catalogue") == SHARED_PREFIX
    for record in ledger():
        then = record["workload"]
        cfg = settings.resolve_settings(
            data, overrides, then["settings_file"], workloads[record["campaign"]["workload"]]["settings"]
        )
        assert set(cfg) <= set(then), sorted(set(cfg) - set(then))
        today = {name: cfg.get(name, options.setting_default(name)) for name in then}
        assert today == then, record["campaign"]["cell"]
    # The shared-prefix workload's target is the catalogue's (the campaign file does not state it).
    assert cell(f"baseline/{SHARED_PREFIX}/r1")["workload"]["cache_hit_target"]["rate"] == bp.EXPECTED_HIT_RATE


@pytest.mark.parametrize("name", CELLS)
def test_each_points_recorded_bytes_give_today_the_recorded_point(tmp_path, name):
    """bench_serving's raw output, the per-request sidecar, the /metrics readings and the client's end
    event give today the whole recorded point: ok, the prompts sized to the 5 s window, the cache
    flushed, the server's counters equal to what the client counted, the hit rate (and for the
    shared-prefix workload its band and check). The plan's measurement keys are today's too."""
    record = cell(name)
    run = unpacked(record, tmp_path)
    for point_id in run["specs"]:
        recorded_plan, todays_plan = run["planned"][point_id]
        assert todays_plan == recorded_plan, point_id
        today = todays_point(run, point_id)
        then = recorded_point(record, point_id)
        assert today["status"] == then["status"] == bp.POINT_OK
        for key in ("completed", "num_prompts", "output_throughput", "server_metrics", "cache"):
            assert today[key] == then[key], key
        assert today == {k: v for k, v in then.items() if k not in RUN_PLAN_KEYS}
        metrics = today["server_metrics"]
        # No warm-up request (--warmup-requests 0): the server counted exactly what the client sent.
        assert metrics["requests"] == today["completed"]
        assert metrics["generation_tokens"] == today["total_output_tokens"]
        assert today["cache"]["flushed"] is True and today["cache"]["hit_rate"] == metrics["cache_hit_rate"]
        target = record["workload"].get("cache_hit_target")
        assert ("target" in today["cache"]) == bool(target)
        if target:
            checked = today["cache"]["target"]
            assert checked["checked"] is True and checked["mismatch"] is None
            assert checked["band"] == then["cache"]["target"]["band"]


def with_hit_rate(run, point_id, hit_rate):
    """The point's /metrics sidecar with the 'after' reading's cached-token counter moved so that the
    server's hit rate over the point is ``hit_rate`` (the prompt tokens and every other counter as
    recorded). Rewrites the unpacked file; returns the prompt tokens of the point."""
    path = run["specs"][point_id]["output_file"] + ".metrics.json"
    sidecar = json.loads(open(path).read())
    prompt = window.server_metrics(sidecar)["prompt_tokens"]
    cached_before = window.server_totals(sidecar["before"])["cached_tokens"]
    rows = [line for line in sidecar["after"].splitlines() if line.startswith("sglang:cached_tokens_total{")]
    assert len(rows) == 1, rows
    moved = f"{rows[0].rsplit(' ', 1)[0]} {cached_before + round(prompt * hit_rate):.1f}"
    sidecar["after"] = sidecar["after"].replace(rows[0], moved)
    with open(path, "w") as handle:
        json.dump(sidecar, handle)
    return prompt


@pytest.mark.parametrize("arm", ["baseline", "tiny-chunk"])
def test_a_shared_prefix_point_moved_out_of_its_band_is_a_workload_mismatch(tmp_path, arm):
    """The same recorded point with the server's cached-token counter lowered: just inside the band's
    margin it stays ok; beyond it, today's cache check fails it as workload_mismatch (its numbers
    kept, in no verdict). The band and margin are today's, from the point's own argv."""
    record = cell(f"{arm}/{SHARED_PREFIX}/r1")
    run = unpacked(record, tmp_path)
    (point_id,) = run["specs"]
    target = todays_point(run, point_id)["cache"]["target"]
    low, margin = target["band"][0], target["margin"]
    assert margin == record["workload"]["cache_hit_target"]["margin"]

    with_hit_rate(run, point_id, low - margin + 0.01)
    inside = todays_point(run, point_id)
    assert inside["cache"]["hit_rate"] == pytest.approx(low - margin + 0.01, abs=1e-4)
    assert inside["status"] == bp.POINT_OK and inside["cache"]["target"]["mismatch"] is None

    with_hit_rate(run, point_id, low - margin - 0.05)
    outside = todays_point(run, point_id)
    assert outside["cache"]["hit_rate"] == pytest.approx(low - margin - 0.05, abs=1e-4)
    assert outside["status"] == bp.POINT_FAILED
    assert outside["failure"]["class"] == "workload_mismatch"
    assert outside["cache"]["target"]["checked"] is True
    assert outside["cache"]["target"]["mismatch"] == outside["failure"]["signals"][0]
    assert re.search(r"below the workload's [\d.]+%-[\d.]+% by more than its margin", outside["failure"]["message"])
    # The point's numbers are kept: the throughput is the recorded one.
    assert outside["output_throughput"] == recorded_point(record, point_id)["output_throughput"]


@pytest.mark.parametrize("workload", [SHARED_PREFIX, "multi-turn-shared-prefix", "short"])
def test_the_tier_started_from_the_prompts_the_baseline_sent(tmp_path, workload):
    """point-sizes.json is the host's kept prompt counts after the campaign: today's key of the
    baseline's planned point holds the prompts the baseline sent after its one resize, the tier's
    point has the same key (the launch is not in it), and today's pin of the baseline's plan over
    the kept counts is the count the tier's point started from."""
    kept = json.loads((REC / "point-sizes.json").read_text())
    base, tier = cell(f"baseline/{workload}/r1"), cell(f"tiny-chunk/{workload}/r1")
    (base_spec,) = unpacked(base, tmp_path / "b")["specs"].values()
    (tier_spec,) = unpacked(tier, tmp_path / "t")["specs"].values()
    key = sizes.size_key(base_spec["argv"], base_spec["window"])
    assert key == sizes.size_key(tier_spec["argv"], tier_spec["window"])
    (base_point,), (tier_point,) = base["points"], tier["points"]
    assert sizes.kept_size(kept, key) == base_point["num_prompts"] == base_point["sized"]["num_prompts"]
    pinned = sizes.pin(base_spec, kept, base["workload"].get("gsp_num_groups"))
    assert pinned == tier_point["pinned"]["num_prompts"] == tier_point["num_prompts"]
    assert tier_point["pinned"]["planned"] == base_spec["num_prompts"]
    assert "sized" not in tier_point  # it met the window at the kept count: no resize


@pytest.mark.parametrize("workload", [SHARED_PREFIX, "multi-turn-shared-prefix", "short"])
def test_one_repeat_a_side_is_no_verdict_against_the_same_workloads_baseline(workload):
    """The device run writes no report (tools/device/real_gpu_check.sh passes
    sglang_campaign_write_report=false: the device's Python has no scipy); today's comparison over the
    recorded ledger pairs each
    tiny-chunk cell with the baseline cell of its own workload and, one repeat a side, gives no
    verdict at any metric, whatever the difference of the medians."""
    found = ledger()
    tier = cell(f"tiny-chunk/{workload}/r1")
    compared = sglang_compare.compare_record(tier, found)
    assert [p["baseline_record_id"] for p in compared["points"]] == [cell(f"baseline/{workload}/r1")["record_id"]]
    rows = sglang_compare.comparison_rows(compared)
    assert rows and {r["verdict"] for r in rows} == {"no_verdict"}
    assert {r["reason"] for r in rows} == {sglang_compare.ONE_REPEAT}
