"""Replay of the SLO search on real SGLang 0.5.17 (tests/fixtures/real-sglang/0.5.17-h200-tp1/phase-trust-slo,
`PHASE=trust TRUST_CASES=slo`, the lent 1-GPU machine, an H100, 2026-12-06): p99 TTFT <= 200 ms over
concurrency 1..32, tolerance 8, each probe sized for its p99 (issue 23).

bench_serving's own output of each probe (its JSONL, the last line the measured run) goes through today's
parser, point rule (percentiles withheld where the sample cannot support them) and SLO judgement, and
today's bisection runs over those replayed probes: it must ask for the loads the device's search asked
for, in that order, and reach the answer the device recorded."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict

import sglang_bench_points as bp
import sglang_slo
from helpers.paths import FIXTURES

REC = FIXTURES / "real-sglang" / "0.5.17-h200-tp1" / "phase-trust-slo"


def recorded():
    (line,) = [json.loads(x) for x in gzip.open(REC / "slo_search.jsonl.gz", "rt").read().splitlines() if x]
    return line


def slo_of(search):
    """The SLO as the user gave it ({metric, max}), parsed by today's parse_slo: the recorded normalized form."""
    given = [{"metric": c["metric"], c["bound"]: c["limit"]} for c in search["slo"]]
    slo = sglang_slo.parse_slo(given)
    assert slo == search["slo"]
    return slo


def replayed_points():
    """{load: [point, ...]} in probe order: each probe's last bench_serving result through today's point rule."""
    found = defaultdict(list)
    for path in sorted((REC / "probes").glob("p*_c*.jsonl.gz")):
        load = int(path.name.split("_c")[1].split(".")[0])
        result = bp.parse_result_lines(gzip.open(path, "rt").read())[-1]
        point = bp.point_from_result(result, load, 0, result["completed"])
        found[load].append((point, result))
    return found


def test_every_probe_sent_enough_requests_for_its_p99_and_reported_it():
    line = recorded()
    slo = slo_of(line["slo_search"])
    need = sglang_slo.probe_min_requests(slo, line["slo_search"]["workload"])
    assert need == bp.min_samples(0.99) == 100
    for points in replayed_points().values():
        for point, _ in points:
            assert point["status"] == "ok" and point["completed"] >= need
            assert point["samples"]["ttft"] >= need and point["p99_ttft_ms"] is not None
            assert "p99_ttft_ms" not in point.get("withheld_percentiles", {})


def test_today_s_bisection_over_the_replayed_probes_asks_the_same_loads_and_answers_the_same():
    line = recorded()
    search = line["slo_search"]
    slo = slo_of(search)
    queue = replayed_points()

    def probe(load):
        point, result = queue[load].pop(0)
        return {"metrics": sglang_slo.probe_metrics(slo, point, result)}

    got = sglang_slo.search(probe, slo, search["low"], search["high"], search["tolerance"], confirm=True)
    assert [p["value"] for p in got["probes"]] == [p["value"] for p in search["probes"]] == [1, 32, 16, 8, 1]
    assert [p["met"] for p in got["probes"]] == [p["met"] for p in search["probes"]]
    for mine, theirs in zip(got["probes"], search["probes"], strict=True):
        assert mine["checks"][0]["value"] == theirs["checks"][0]["value"]
    for key in ("answer", "bounded", "outcome", "bracket", "reason", "consistent"):
        assert got[key] == search[key], key
    assert (got["answer"], got["bracket"]) == (1, [1, 8])
    assert not any(queue.values())  # every recorded probe was asked for


def test_the_search_judged_p99_not_the_median():
    """At c=8 the median TTFT (29 ms) met 200 ms many times over while the p99 (496 ms) did not: the search
    judges the tail the SLO names, with a sample that can hold it."""
    points = replayed_points()
    (c8, _), = points[8]
    assert c8["median_ttft_ms"] < 200 < c8["p99_ttft_ms"] and c8["samples"]["ttft"] >= 100
