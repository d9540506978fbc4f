"""Goodput (issue 27 item 5): the share of a point's requests, and of its output tokens, that met
every latency limit of the workload's ``goodput_slo``, from bench_serving's per-request data.

Fed with real bench_serving result lines of SGLang 0.5.17 (32 requests at c=16,
tests/fixtures/real-sglang/0.5.17-h200-tp1/work/results/raw) and with hand-made lines whose
latencies are chosen so each limit splits them.
"""

from __future__ import annotations

import json
import math

import pytest
import sglang_bench_points as points
import sglang_point_window as window
from helpers.recordings import real_result
from sglang_workload_options import workload_problems


def made(ttfts, latencies, lens, errors=None):
    """A result line and its requests sidecar: TTFT and latency in s, the gaps spread evenly."""
    itls = [
        [(lat - ttft) / (n - 1)] * (n - 1) if n > 1 else []
        for ttft, lat, n in zip(ttfts, latencies, lens, strict=True)
    ]
    errors = errors or [""] * len(ttfts)
    result = {"ttfts": ttfts, "itls": itls, "output_lens": lens, "errors": errors, "duration": 2.0,
              "completed": sum(1 for e in errors if not e)}
    rows = [[0.0, lat, not err] for lat, err in zip(latencies, errors, strict=True)]
    return result, {"requests": rows}


# --- Per request, as bench_serving measures it --------------------------------------------------

def test_each_request_is_judged_by_its_own_ttft_tpot_and_latency():
    # Four requests of 11 tokens: TTFT 0.1 / 0.3 / 0.1 / 0.1 s, latency 1.1 / 1.3 / 2.1 / 1.1 s.
    result, requests = made([0.1, 0.3, 0.1, 0.1], [1.1, 1.3, 2.1, 1.1], [11, 11, 11, 11])
    rows = window.request_latencies(result, requests)
    assert [round(r["ttft_ms"]) for r in rows] == [100, 300, 100, 100]
    # bench_serving's TPOT: (latency - TTFT) / (tokens - 1).
    assert [round(r["tpot_ms"]) for r in rows] == [100, 100, 200, 100]
    block = window.goodput(result, requests, {"ttft_ms": 200, "tpot_ms": 150})
    assert block["met"] == 2 and block["requests"] == 4 and block["request_share"] == 0.5
    assert block["missed"] == {"ttft_ms": 1, "tpot_ms": 1}
    assert block["met_output_tokens"] == 22 and block["token_share"] == 0.5
    assert block["request_throughput"] == pytest.approx(2 / 2.0)
    # An end-to-end limit alone: the 2.1 s request misses it.
    assert window.goodput(result, requests, {"e2e_ms": 2000})["met"] == 3


def test_a_failed_request_meets_nothing_and_a_one_token_request_has_no_tpot():
    result, requests = made([0.1, 0.1, 0.1], [1.1, 0.1, 1.1], [11, 1, 11], errors=["", "", "boom"])
    block = window.goodput(result, requests, {"tpot_ms": 50})
    # Request 0 misses TPOT (100 ms), request 1 has one token (no TPOT: met), request 2 failed.
    assert block["met"] == 1 and block["failed"] == 1 and block["missed"] == {"tpot_ms": 2}
    # Output tokens are those of the requests that completed (11 + 1); the one that met has 1.
    assert block["output_tokens"] == 12 and block["token_share"] == pytest.approx(1 / 12, abs=1e-6)


def test_without_the_details_or_a_limit_there_is_no_goodput():
    result, requests = made([0.1], [1.1], [11])
    assert window.goodput({"completed": 1}, requests, {"ttft_ms": 200}) is None
    assert window.goodput(result, requests, {"attainment": 0.9}) is None
    # Without the sidecar the latency is TTFT plus the gaps.
    rows = window.request_latencies(result, None)
    assert rows[0]["e2e_ms"] == pytest.approx(1100.0)


def test_the_real_point_splits_at_its_own_median_ttft():
    result = real_result()
    ttfts = sorted(t * 1000.0 for t in result["ttfts"])
    limit = ttfts[len(ttfts) // 2]
    block = window.goodput(result, None, {"ttft_ms": limit})
    expected = sum(1 for t in result["ttfts"] if t * 1000.0 <= limit)
    assert block["requests"] == result["completed"] and block["met"] == expected
    assert 0 < block["request_share"] < 1
    assert block["output_tokens"] == result["total_output_tokens"]


# --- In the point, with the sample rule ----------------------------------------------------------

@pytest.mark.parametrize(("attainment", "needed"), [(0.9, 10), (0.95, 20), (0.99, 100), (None, 10)])
def test_a_share_needs_the_sample_of_its_attainment_percentile(attainment, needed):
    slo = {"ttft_ms": 100} if attainment is None else {"ttft_ms": 100, "attainment": attainment}
    assert points.goodput_min_samples(slo) == needed == points.min_samples(attainment or 0.9)


def test_a_goodput_from_too_few_requests_is_withheld_as_na(tmp_path):
    result = real_result()  # 32 requests
    output = tmp_path / "c16_r0.jsonl"
    output.write_text(json.dumps(result) + "\n")
    spec = {"output_file": str(output), "concurrency": 16, "repeat": 0, "num_prompts": result["completed"],
            "argv": [], "goodput_slo": {"ttft_ms": 1e6, "attainment": 0.9}}
    point = points.evaluate_point(spec, 0, 0, False, "")
    assert point["status"] == "ok" and point["goodput_request_share"] == 1.0 and point["goodput_token_share"] == 1.0
    assert point["goodput"]["min_n"] == 10 and point["goodput"]["attainment"] == 0.9
    strict = dict(spec, goodput_slo={"ttft_ms": 1e6, "attainment": 0.99})
    point = points.evaluate_point(strict, 0, 0, False, "")
    assert point["goodput_request_share"] is None
    assert point["withheld_percentiles"]["goodput_request_share"] == {"value": 1.0, "n": 32, "min_n": 100}
    # The block itself keeps what was counted.
    assert point["goodput"]["met"] == 32
    # A workload without goodput_slo leaves the point as it was.
    plain = points.evaluate_point(dict(spec, goodput_slo=None), 0, 0, False, "")
    assert "goodput" not in plain and "goodput_request_share" not in plain


def test_point_extras_carry_the_slo_beside_the_measurement():
    workload = {"measurement": {"cache": "cold"}, "goodput_slo": {"ttft_ms": 500.0, "attainment": 0.9}}
    extras = points.point_extras(workload, "127.0.0.1", 30000)
    assert extras["goodput_slo"] == {"ttft_ms": 500.0, "attainment": 0.9}
    assert extras["flush_cache"]["url"] == "http://127.0.0.1:30000/flush_cache"
    assert "goodput_slo" not in points.point_extras({"measurement": {}}, "h", 1)
    # Only the client's keys go into its plan.
    assert "goodput_slo" not in points.PLAN_EXTRAS


@pytest.mark.parametrize(("slo", "wrong"), [
    ({"attainment": 0.9}, "states no limit"),
    ({"ttft_ms": 0}, "ttft_ms = 0"),
    ({"ttft_ms": "fast"}, "ttft_ms = 'fast'"),
    ({"ttft_ms": 100, "attainment": 1.0}, "attainment = 1.0"),
    ({"ttft_ms": 100, "p99": 3}, "unknown key(s) p99"),
    ("ttft<100", "must be a mapping"),
])
def test_a_bad_slo_is_refused_with_what_is_wrong(slo, wrong):
    problems = workload_problems({"goodput_slo": slo})
    assert problems and problems[0][0] == "goodput_slo" and wrong in problems[0][1]


def test_a_good_slo_passes():
    assert workload_problems({"goodput_slo": {"ttft_ms": 2000, "tpot_ms": 200, "attainment": 0.9}}) == []
    assert not math.isnan(points.goodput_min_samples({"ttft_ms": 1}))


# --- The comparison, the campaign statistics and the reports --------------------------------------

SLO = {"ttft_ms": 200.0, "tpot_ms": 150.0, "attainment": 0.9}


def goodput_record(record_id, tier, shares, withheld=False):
    """A success record of one c=16 point with the given goodput shares (request, token)."""
    point = {"concurrency": 16, "repeat": 0, "status": "ok", "output_throughput": 100.0,
             "total_throughput": 200.0, "mean_tpot_ms": 10.0}
    keys = ("goodput_request_share", "goodput_token_share")
    for key, value in zip(keys, shares, strict=True):
        point[key] = None if withheld else value
    if withheld:
        point["withheld_percentiles"] = {
            k: {"value": v, "n": 8, "min_n": 10} for k, v in zip(keys, shares, strict=True)
        }
    return {"record_id": record_id, "tier": tier, "status": "success", "host": "h",
            "launch": {"script_sha256": tier}, "workload": {"dataset_name": "random", "goodput_slo": SLO},
            "points": [point]}


def test_the_comparison_shows_each_sides_goodput_and_no_verdict():
    import sglang_compare as compare

    ledger = [goodput_record("b1", "baseline", (0.95, 0.97)), goodput_record("t1", "t", (0.5, 0.6))]
    result = compare.compare_record(ledger[-1], ledger)
    goodput = result["points"][0]["goodput"]
    assert goodput["goodput_request_share"]["candidate"]["median"] == 0.5
    assert goodput["goodput_request_share"]["baseline"]["median"] == 0.95
    assert result["goodput_slo_text"] == "TTFT <= 200 ms, TPOT <= 150 ms (attainment 0.9)"
    table = compare.format_table(result)
    assert "c=16: tier 50.0 % / 60.0 %; baseline 95.0 % / 97.0 % (no verdict)" in table
    # The verdict family is unchanged: goodput is shown, not tested.
    assert set(result["points"][0]["metrics"]) == {m for m, _ in compare.METRICS}
    # A withheld share reads n/a with its sample, as a percentile does.
    few = [goodput_record("b1", "baseline", (0.95, 0.97)), goodput_record("t2", "t", (1.0, 1.0), withheld=True)]
    table = compare.format_table(compare.compare_record(few[-1], few))
    assert "tier n/a (n=8) / n/a (n=8)" in table
    # A workload without goodput_slo: nothing is said.
    plain = dict(ledger[-1], workload={"dataset_name": "random"})
    assert compare.goodput_lines(compare.compare_record(plain, ledger[:1] + [plain])) == []


def test_the_reports_carry_goodput(tmp_path):
    import report
    import sglang_compare as compare
    import sglang_stats as stats
    from campaign_report import goodput_section, workload_sections

    ledger = [goodput_record("b1", "baseline", (0.95, 0.97)), goodput_record("t1", "t", (0.5, 0.6))]
    lines = report.goodput_table(compare.compare_record(ledger[-1], ledger))
    assert lines[0].startswith("Goodput: the share of requests / of output tokens that met every limit of TTFT <= 200")
    assert "| 16 | 50.0 % | 60.0 % | 95.0 % | 97.0 % |" in lines
    # The campaign's arms summarize goodput like the percentiles, n/a where withheld, in the report.
    cells = [
        {"cell": f"{tier}-{i}", "repeat": i, "attempt": 1, "arm": tier, "role": role, "tier": tier,
         "record": goodput_record(f"{tier}{i}", tier, shares, withheld=tier == "t" and i == 0)}
        for tier, role, shares in (("baseline", "baseline", (0.95, 0.97)), ("t", "tier", (0.5, 0.6)))
        for i in range(2)
    ]
    part = stats._workload_analysis(cells, {"confidence": 0.95, "resamples": 200, "seed": 0})
    assert part["arms"]["baseline"]["points"][16]["goodput_request_share"]["median"] == 0.95
    assert part["arms"]["t"]["points"][16]["goodput_token_share"]["n"] == 1  # the other cell withheld
    text = "\n".join(workload_sections("h", "w", part, False, ["baseline", "t"], {"confidence": 0.95}))
    assert "### Goodput: `h`, workload `w`" in text
    from campaign_html import goodput_html

    page = goodput_html("`h`", part, ["baseline", "t"], False)
    assert page.startswith("<h3>Goodput: ") and "0.950 [0.950–0.950] n=2" in page and page.count("<tr>") == 3
    assert "| baseline | 16 | 0.950 [0.950–0.950] n=2 | 0.970 [0.970–0.970] n=2 |" in text
    values = {"goodput_request_share": stats.summarize([]), "goodput_token_share": stats.summarize([])}
    values["goodput_token_share"]["withheld"] = {"n": 8, "min_n": 10}
    arms = {"t": {"points": {16: values}, "concurrencies": [16]}}
    assert "| t | 16 | — | n/a (n=8) |" in goodput_section(arms, ["t"], "`h`", "95%", False)
    empty = {"t": {"points": {16: {m: stats.summarize([]) for m in stats.GOODPUT_METRICS}}, "concurrencies": [16]}}
    assert goodput_section(empty, ["t"], "`h`", "95%", False) == []
    assert goodput_html("`h`", {"arms": empty}, ["t"], False) == ""
    assert set(stats.GOODPUT_METRICS) <= set(stats.SUMMARY_METRICS)


# --- The SLO search can target it ------------------------------------------------------------------

def test_the_slo_search_takes_goodput_as_a_lower_bound():
    import sglang_slo as slo

    parsed = slo.parse_slo([{"metric": "goodput_request_share", "min": 0.9}, {"metric": "p99_ttft_ms", "max": 500}])
    assert parsed[0]["bound"] == "min"
    with pytest.raises(slo.SloError, match="a share is at most 1"):
        slo.parse_slo({"metric": "goodput_token_share", "min": 90})
    with pytest.raises(slo.SloError, match="bounded with min"):
        slo.parse_slo({"metric": "goodput_request_share", "max": 0.9})
    # Without the workload's limits there is nothing to count against.
    assert "states none" in slo.goodput_target_problems(parsed, {"dataset_name": "random"})[0]
    assert slo.goodput_target_problems(parsed, {"goodput_slo": SLO}) == []
    # A probe is sized for the larger of the two sample rules: p99 needs 100, attainment 0.99 too.
    assert slo.probe_min_requests(parsed, {"goodput_slo": SLO}) == points.min_samples(0.99)
    only = slo.parse_slo({"metric": "goodput_request_share", "min": 0.9})
    strict = dict(SLO, attainment=0.95)
    assert slo.probe_min_requests(only, {"goodput_slo": strict}) == points.goodput_min_samples(strict)
    met, _checks = slo.evaluate(only, {"goodput_request_share": 0.95})
    assert met and not slo.evaluate(only, {"goodput_request_share": 0.85})[0]


# --- A corpus point records the lengths it really sent (issue 27 item 3) ----------------------------

def test_a_corpus_point_records_the_lengths_it_sent_and_received(tmp_path):
    result = dict(real_result())
    result["input_lens"] = [17, 3, 250, 40] * (len(result["output_lens"]) // 4)
    output = tmp_path / "c16_r0.jsonl"
    output.write_text(json.dumps(result) + "\n")
    spec = {"output_file": str(output), "concurrency": 16, "repeat": 0, "num_prompts": result["completed"],
            "argv": ["--dataset-name", "sharegpt", "--sharegpt-output-len", "32"]}
    lengths = points.evaluate_point(spec, 0, 0, False, "")["lengths"]
    inputs = sorted(result["input_lens"])
    assert lengths["input"]["n"] == len(inputs) == result["completed"]
    assert (lengths["input"]["min"], lengths["input"]["max"]) == (inputs[0], inputs[-1])
    assert lengths["input"]["median"] == inputs[math.ceil(0.5 * len(inputs)) - 1]
    assert lengths["input"]["p90"] == inputs[math.ceil(0.9 * len(inputs)) - 1]
    assert lengths["output"]["mean"] == pytest.approx(sum(result["output_lens"]) / len(result["output_lens"]))
    # Only a corpus point: a random point's lengths are its settings.
    random = dict(spec, argv=["--dataset-name", "random"])
    assert "lengths" not in points.evaluate_point(random, 0, 0, False, "")


def test_failed_requests_are_not_in_the_lengths():
    result = {"input_lens": [10, 20, 30], "output_lens": [5, 0, 7], "errors": ["", "boom", ""]}
    lengths = window.length_distribution(result)
    assert lengths["input"]["n"] == 2 and lengths["input"]["max"] == 30 and lengths["output"]["min"] == 5
    assert window.length_distribution({"input_lens": [1]}) is None
