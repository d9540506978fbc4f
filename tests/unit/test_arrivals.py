"""Arrival processes (issue 27 item 2): a closed loop at fixed concurrency, an open loop at a Poisson
request rate, a request-rate sweep, and gamma arrivals refused (bench_serving of SGLang 0.5.17 has
no --burstiness). Run against the real catalogue (data/workloads.yml) and the real planning,
comparison and statistics code.
"""

from __future__ import annotations

import json
import statistics

import pytest
import sglang_bench_points as bp
import sglang_bench_settings as settings
import sglang_campaign as campaign_logic
import sglang_compare as compare
import sglang_stats as stats
import sglang_workload_catalogue as catalogue
import yaml
from helpers.paths import REPO
from sglang_workload_options import workload_problems

DATA = yaml.safe_load((REPO / "data" / "benchmark.yml").read_text())
RAW = yaml.safe_load((REPO / "data" / "workloads.yml").read_text())
SCHEMA = json.loads((REPO / "data" / "workloads.schema.json").read_text())
WORKLOADS = catalogue.check_catalogue(RAW, SCHEMA, DATA)


def resolve(name, overrides=None):
    return settings.resolve_settings(DATA, overrides or {}, "/x/benchmark.yml", None, named=WORKLOADS[name])


def plan(cfg, min_duration_s=None):
    measurement = cfg["measurement"]
    rule = cfg["num_prompts"]
    specs = bp.plan_points(
        cfg["concurrency"], cfg["repeats"], "/o", multiplier=rule["multiplier"], floor=rule["floor"],
        min_requests=measurement["min_requests"], groups=cfg.get("gsp_num_groups"),
        rates=cfg.get("request_rates"),
        min_duration_s=measurement["min_duration_s"] if min_duration_s is None else min_duration_s,
    )
    for spec in specs:
        spec["argv"] = bp.build_client_argv(
            [], host="h", port=1, concurrency=spec["concurrency"], num_prompts=spec["num_prompts"],
            output_file=spec["output_file"], tokenizer="t",
            request_rate=spec.get("request_rate", cfg["request_rate"]), **bp.client_settings(cfg),
        )
    return specs


def flag(argv, name):
    return argv[argv.index(name) + 1]


# --- Gamma is refused, naming the release -----------------------------------------------------------

@pytest.mark.parametrize("burstiness", [0.5, 2.0, "3"])
def test_gamma_arrivals_are_refused_with_the_release_that_cannot_send_them(burstiness):
    problems = workload_problems({"burstiness": burstiness})
    assert problems and problems[0][0] == "burstiness"
    assert "SGLang 0.5.17" in problems[0][1] and "no --burstiness" in problems[0][1]
    # Before anything is touched: the resolver refuses it, with the value and where it came from.
    with pytest.raises(settings.SettingsError) as err:
        settings.resolve_settings(DATA, {settings.WORKLOAD_OVERRIDE_VAR: {"burstiness": burstiness}}, "f")
    assert f"sglang_bench_workload_override['burstiness'] = {burstiness!r}" in str(err.value)


def test_poisson_is_burstiness_one_and_changes_nothing():
    assert workload_problems({"burstiness": 1.0}) == []
    cfg = settings.resolve_settings(DATA, {settings.WORKLOAD_OVERRIDE_VAR: {"burstiness": 1}}, "f")
    assert "burstiness" not in cfg  # at its default: left out, no cell key or record changes


# --- The closed loop (today) is unchanged ------------------------------------------------------------

def test_the_closed_loop_sends_every_request_at_once_under_its_concurrency():
    specs = plan(resolve("seeds-random"))
    assert [s["id"] for s in specs] == ["c1_r0", "c10_r0", "c256_r0", "c1024_r0"]
    assert all(flag(s["argv"], "--request-rate") == "inf" and "request_rate" not in s for s in specs)
    assert [flag(s["argv"], "--max-concurrency") for s in specs] == ["1", "10", "256", "1024"]


# --- The open loop and the sweep ---------------------------------------------------------------------

def test_the_open_loop_sends_poisson_arrivals_at_its_rate_under_a_cap():
    cfg = resolve("poisson-random")
    specs = plan(cfg)
    rate = cfg["request_rates"][0]
    assert len(specs) == 1 and specs[0]["request_rate"] == rate
    assert flag(specs[0]["argv"], "--request-rate") == bp.format_request_rate(rate)
    assert flag(specs[0]["argv"], "--max-concurrency") == str(cfg["concurrency"][0])
    # The window's arrivals at that rate, not a count made for the cap (2 x 1024 would take 2048 s at 1/s).
    window = cfg["measurement"]
    expected = max(cfg["num_prompts"]["floor"], window["min_requests"], -(-int(rate * window["min_duration_s"]) // 1))
    assert specs[0]["num_prompts"] == expected


def test_a_rate_sweep_is_one_point_per_rate_each_named_by_it():
    cfg = resolve("rate-sweep-random")
    specs = plan(cfg, min_duration_s=100)
    rates = cfg["request_rates"]
    assert [s["request_rate"] for s in specs] == rates
    assert [s["id"] for s in specs] == [f"c{cfg['concurrency'][0]}_q{r:g}_r0" for r in rates]
    assert len({s["output_file"] for s in specs}) == len(rates)
    assert [flag(s["argv"], "--request-rate") for s in specs] == [bp.format_request_rate(r) for r in rates]
    floor = max(cfg["num_prompts"]["floor"], cfg["measurement"]["min_requests"])
    assert [s["num_prompts"] for s in specs] == [max(floor, bp.rate_prompts(r, 1, 100)) for r in rates]
    # The ledger point takes its rate from its planned point, for its key in the comparison.
    assert bp.point_tags(specs[0]) == {"request_rate": rates[0]} and bp.point_tags({"id": "c1_r0"}) == {}


@pytest.mark.parametrize(("change", "words"), [
    ({"sglang_bench_concurrency": "1,16"}, "sweeps the rate at one concurrency cap, but concurrency lists 2 values"),
    ({"sglang_bench_request_rate": "4"}, "is a sweep of rates; request_rate '4' names another"),
    ({settings.WORKLOAD_OVERRIDE_VAR: {"request_rates": [1, 0]}}, "must be a non-empty list of request rates > 0"),
])
def test_a_sweep_that_cannot_run_is_refused_before_the_stop(change, words):
    with pytest.raises(settings.SettingsError) as err:
        resolve("rate-sweep-random", change)
    assert words in str(err.value)


def test_plan_points_refuses_a_sweep_without_one_cap():
    with pytest.raises(ValueError, match="one concurrency cap"):
        bp.plan_points([1, 2], 1, "/o", floor=10, rates=[1.0])


# --- Compared and summarized by rate -----------------------------------------------------------------

def sweep_record(record_id, tier, values, workload=None):
    points = [
        {"concurrency": 1024, "request_rate": rate, "repeat": 0, "status": "ok", "output_throughput": value,
         "total_throughput": 2 * value, "mean_tpot_ms": 1000.0 / value}
        for rate, value in values.items()
    ]
    return {"record_id": record_id, "tier": tier, "status": "success", "host": "h",
            "launch": {"script_sha256": tier},
            "workload": workload or {"dataset_name": "random", "request_rates": list(values)}, "points": points}


def test_the_comparison_keys_a_sweep_by_its_rates():
    ledger = [sweep_record("b", "baseline", {0.5: 100.0, 1.5: 250.0}), sweep_record("t", "t", {0.5: 110.0, 1.5: 200.0})]
    result = compare.compare_record(ledger[-1], ledger)
    loads = [p["concurrency"] for p in result["points"]]
    assert loads == [0.5, 1.5] and all(isinstance(load, compare.RequestRate) for load in loads)
    out = result["points"][1]["metrics"]["output_throughput"]
    assert out["candidate"]["median"] == 200.0 and out["baseline"]["median"] == 250.0
    table = compare.format_table(result).splitlines()
    assert table[1].split()[:2] == ["req/s", "metric"]
    assert [line.split()[:3] for line in table[2:8:3]] == [["0.5", "output", "tok/s"], ["1.5", "output", "tok/s"]]
    assert compare.load_label(loads[0]) == "0.5 req/s" and compare.load_label(16) == "c=16"


def test_a_sweep_never_meets_a_closed_loop_of_the_same_requests():
    closed = {"concurrency": 1024, "repeat": 0, "status": "ok", "output_throughput": 100.0,
              "total_throughput": 200.0, "mean_tpot_ms": 10.0}
    baseline = {"record_id": "b", "tier": "baseline", "status": "success", "host": "h",
                "launch": {"script_sha256": "b"}, "workload": {"dataset_name": "random"}, "points": [closed]}
    sweep = sweep_record("t", "t", {1.0: 100.0})
    assert compare.workload_key(sweep) != compare.workload_key(baseline)
    assert compare.arms([baseline, sweep], sweep)[1] == []
    # One open-loop rate is a workload of its own too (request_rate, the older single-rate setting).
    assert compare.workload_key(dict(baseline, workload={"dataset_name": "random", "request_rate": "8"})) \
        != compare.workload_key(baseline)
    assert compare.workload_key(dict(baseline, workload={"dataset_name": "random", "request_rate": "inf"})) \
        == compare.workload_key(baseline)


def test_the_campaign_statistics_summarize_a_sweep_per_rate():
    cells = [
        {"cell": f"{tier}-{i}", "repeat": i, "attempt": 1, "arm": tier, "role": role, "tier": tier,
         "record": sweep_record(f"{tier}{i}", tier, {0.25: 50.0 + i, 1.0: 150.0 + i})}
        for tier, role in (("baseline", "baseline"), ("t", "tier"))
        for i in range(2)
    ]
    part = stats._workload_analysis(cells, {"confidence": 0.95, "resamples": 200, "seed": 0})
    arm = part["arms"]["t"]
    assert arm["concurrencies"] == [0.25, 1.0]
    assert arm["points"][1.0]["output_throughput"]["median"] == pytest.approx(150.5)
    assert set(arm["comparison"]) == {0.25, 1.0}


def test_the_preflight_sizes_a_sweeps_largest_point_by_its_highest_rate():
    import sglang_preflight as pf

    cfg = resolve("rate-sweep-random")
    window = cfg["measurement"]
    largest = max(s["num_prompts"] for s in plan(cfg))
    assert pf.largest_point_prompts(cfg) == largest
    assert largest == max(cfg["num_prompts"]["floor"], window["min_requests"],
                          bp.rate_prompts(max(cfg["request_rates"]), 1, window["min_duration_s"]))


# --- Node calibration and the campaign report by rate ------------------------------------------------

def calibration_results(sweeps):
    """calibrate()'s input: each host's calibration cell ran the sweep {rate: output tok/s}."""
    return {host: {"record": dict(sweep_record(f"cal-{host}", "baseline", values), target_is_simulator=True)}
            for host, values in sweeps.items()}


# node-c is slow at the lowest rate only: per rate that is a 40% deviation at one of two rates, while
# the rates merged into their one concurrency cap (1024) would average it out with the higher rate.
SWEEPS = {"node-a": {0.5: 100.0, 1.5: 250.0}, "node-b": {0.5: 102.0, 1.5: 254.0}, "node-c": {0.5: 60.0, 1.5: 254.0}}


def calibrate():
    return campaign_logic.calibrate({"name": "c", "calibration": {"max_deviation_pct": 15}},
                                    calibration_results(SWEEPS))


def test_the_node_calibration_keys_a_sweep_by_its_rates():
    rates = sorted({rate for values in SWEEPS.values() for rate in values})
    out = calibrate()
    keys = [compare.load_key(compare.RequestRate(rate)) for rate in rates]
    assert list(out["fleet_median"]) == keys
    fleet = {rate: statistics.median(values[rate] for values in SWEEPS.values()) for rate in rates}
    assert [out["fleet_median"][k] for k in keys] == [fleet[rate] for rate in rates]
    for host, values in SWEEPS.items():
        assert out["hosts"][host]["values"] == {k: values[rate] for k, rate in zip(keys, rates, strict=True)}
        devs = [100.0 * (values[rate] / fleet[rate] - 1.0) for rate in rates]
        assert out["hosts"][host]["deviation_pct"] == round(statistics.median(devs), 2)
    assert [h for h, v in sorted(out["hosts"].items()) if v["flagged"]] == ["node-c"]


def test_a_load_key_reads_back_as_its_load():
    for load in (1, 1024, compare.RequestRate(0.25), compare.RequestRate(1.5)):
        back = compare.parse_load_key(compare.load_key(load))
        assert back == load and type(back) is type(load)
    assert compare.parse_load_key(16) == 16
    for bad in ("0", "x", "1.5", "0 req/s", "-1 req/s", "nan req/s", "2 tok/s", True, 0):
        assert compare.parse_load_key(bad) is None


def test_the_campaign_report_shows_a_sweeps_calibration_by_rate():
    import campaign_report

    out = calibrate()
    view = stats.calibration_view(json.loads(json.dumps(out)), "c")
    rates = sorted({rate for values in SWEEPS.values() for rate in values})
    assert view["problems"] == [] and view["concurrencies"] == rates
    # (stats's own import of sglang_compare: under pytest it is ansible.module_utils's copy.)
    assert all(isinstance(load, stats.RequestRate) for load in view["concurrencies"])
    assert view["hosts"][2]["values"] == SWEEPS["node-c"]
    entries = [stats.calibration_entry(r["record"]) for r in calibration_results(SWEEPS).values()]
    assert list(entries[0]["values"]) == rates
    section = "\n".join(campaign_report.calibration_section(
        {"calibration": entries, "synthetic": False}, {"path": "cal.json", "view": view, "warnings": []}))
    labels = [stats.load_label(load) for load in view["concurrencies"]]
    assert labels == [compare.load_label(compare.RequestRate(rate)) for rate in rates]
    assert "output tok/s per request rate (req/s), its deviation" in section
    # The calibration records are the simulator's: both tables say SYNTHETIC in their first column.
    header = next(line for line in section.splitlines() if line.startswith("| Host (SYNTHETIC) | output tok/s"))
    assert [cell.strip() for cell in header.split("|")[2:4]] == [f"output tok/s {label}" for label in labels]
    assert "c=" not in section and "concurrency" not in section
    assert "| output tok/s per request rate (req/s) |" in section
    assert f"{labels[0]}: " in section and section.count("| Host (SYNTHETIC) |") == 2



def test_the_throughput_report_labels_a_sweep_by_its_rates():
    import report
    from helpers.reports import png_text_chunks

    # sweep_record's records are the simulator's (target_is_simulator) only where asked: here both are.
    ledger = [dict(sweep_record("b", "baseline", {0.5: 100.0, 1.5: 250.0}), target_is_simulator=True,
                   recorded_at="2026-12-01T00:00:00Z", run_id="b"),
              dict(sweep_record("t", "t", {0.5: 110.0, 1.5: 200.0}), target_is_simulator=True,
                   recorded_at="2026-12-01T00:01:00Z", run_id="t")]
    rates = compare.concurrencies(ledger[-1])
    table = report.tier_table(ledger[-1], compare.compare_record(ledger[-1], ledger))
    assert table[0].startswith("| Request rate (req/s) | Output tok/s")
    assert [row.split("|")[1].strip() for row in table[2:]] == [f"{rate:g}" for rate in rates]
    block = report.status_block(ledger, "t", 0.95, "baseline")
    assert f"tok/s at {compare.load_label(max(rates))} (" in block and "concurrency" not in block
    chunks = png_text_chunks(report.build_png(ledger, [], "baseline"))
    assert chunks["Title"].endswith("SGLang throughput vs request rate (req/s)") and "SYNTHETIC" in chunks["Title"]
