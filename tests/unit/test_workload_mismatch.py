"""Checked against the server (issue 27 item 3): a shared-prefix point keeps the server's own
prefix-cache hit rate and fails as ``workload_mismatch`` when it lies outside the workload's
``cache_hit_target`` by more than its margin. The band of ``expected`` follows bench_serving's
generated-shared-prefix construction; the hit rate is the server's /metrics counters over the point.
"""

from __future__ import annotations

import json

import pytest
import sglang_bench_points as bp
import sglang_bench_settings as settings
import sglang_point_window as window
import sglang_workload_catalogue as catalogue
import yaml
from helpers.paths import REPO
from sglang_workload_options import workload_problems

DATA = yaml.safe_load((REPO / "data" / "benchmark.yml").read_text())
WORKLOADS = catalogue.check_catalogue(
    yaml.safe_load((REPO / "data" / "workloads.yml").read_text()),
    json.loads((REPO / "data" / "workloads.schema.json").read_text()),
    DATA,
)


def metrics_text(prompt, cached, requests, generated):
    return (
        f'sglang:num_requests_total{{model_name="m"}} {requests}\n'
        f'sglang:prompt_tokens_total{{model_name="m"}} {prompt}\n'
        f'sglang:generation_tokens_total{{model_name="m"}} {generated}\n'
        f'sglang:cached_tokens_total{{cache_source="device",model_name="m"}} {cached}\n'
    )


# --- The band bench_serving's construction allows ----------------------------------------------------

@pytest.mark.parametrize(("n", "g", "c"), [(24, 8, 1), (24, 8, 10), (512, 8, 256), (8, 2, 1), (8, 2, 8)])
def test_the_band_runs_from_the_first_wave_missing_to_only_each_groups_first_missing(n, g, c):
    system, question = 2048, 128
    low, high = window.cache_hit_band(n, g, system, question, c)
    share = system / (system + question)
    assert high == pytest.approx((n - g) / n * share, abs=1e-4)
    assert low == pytest.approx(max(0, n - c - g + 1) / n * share, abs=1e-4)
    assert 0 <= low <= high < share


def test_one_at_a_time_the_band_is_one_rate():
    # At concurrency 1 only each group's first request misses: the cold best, (p - 1) / p of S / (S + Q).
    low, high = window.cache_hit_band(24, 8, 2048, 128, 1)
    assert low == high == pytest.approx(2 / 3 * 2048 / 2176, abs=1e-4)


@pytest.mark.parametrize(("rate", "verdict"), [(0.30, None), (0.55, None), (0.19, "below"), (0.71, "above")])
def test_a_rate_outside_the_band_by_more_than_the_margin_is_a_mismatch(rate, verdict):
    found = window.cache_mismatch(rate, (0.3, 0.6), 0.1)
    assert (found is None) if verdict is None else (verdict in found and f"{rate:.1%}" in found)


# --- In the point --------------------------------------------------------------------------------------

def gsp_point(tmp_path, cached, prompt=4000, target=None, flushed=True, concurrency=1, prompts=24, groups=8):
    """A completed generated-shared-prefix point (a result line of its counts) with /metrics
    readings around it that say ``cached`` of ``prompt`` tokens were found in the cache."""
    result = {"completed": prompts, "duration": 60.0, "total_output_tokens": prompts * 4,
              "total_output_tokens_retokenized": prompts * 4, "mean_ttft_ms": 5.0}
    output = tmp_path / f"c{concurrency}_r0.jsonl"
    output.write_text(json.dumps(result) + "\n")
    sidecar = {"before": metrics_text(0, 0, 0, 0), "after": metrics_text(prompt, cached, prompts, prompts * 4),
               "during": []}
    (tmp_path / f"c{concurrency}_r0.jsonl.metrics.json").write_text(json.dumps(sidecar))
    cfg = settings.resolve_settings(DATA, {}, "f", None, named=WORKLOADS["generated-shared-prefix"])
    argv = bp.build_client_argv([], host="h", port=1, concurrency=concurrency, num_prompts=prompts,
                                output_file=str(output), tokenizer="t", warmup_requests=0, **bp.client_settings(cfg))
    spec = {"output_file": str(output), "concurrency": concurrency, "repeat": 0, "num_prompts": prompts,
            "argv": argv, "metrics": {"url": "http://h:1/metrics"},
            **bp.point_extras(dict(cfg, cache_hit_target=target or cfg["cache_hit_target"]), "h", 1)}
    end = {"cache_flush": {"ok": flushed, "attempts": 1}} if flushed is not None else {}
    return bp.evaluate_point(spec, 0, 0, False, "", end=end), cfg


def test_the_catalogue_states_the_target_and_a_point_inside_it_is_ok(tmp_path):
    low, high = window.cache_hit_band(24, 8, 2048, 128, 1)
    point, cfg = gsp_point(tmp_path, cached=round(4000 * high))
    assert cfg["cache_hit_target"]["rate"] == "expected"
    assert point["status"] == "ok" and point["cache"]["hit_rate"] == pytest.approx(high, abs=1e-3)
    target = point["cache"]["target"]
    assert target["checked"] is True and target["band"] == [low, high] and target["mismatch"] is None


def test_a_point_whose_server_found_too_little_cached_is_a_workload_mismatch(tmp_path):
    margin = WORKLOADS["generated-shared-prefix"]["settings"]["cache_hit_target"]["margin"]
    low, _high = window.cache_hit_band(24, 8, 2048, 128, 1)
    point, _cfg = gsp_point(tmp_path, cached=round(4000 * (low - margin - 0.05)))
    assert point["status"] == "failed" and point["failure"]["class"] == "workload_mismatch"
    assert "below the workload's" in point["failure"]["message"] and "concurrency 1" in point["failure"]["message"]
    # The numbers stay: the point is kept, only out of every verdict.
    assert point["completed"] == 24 and point["cache"]["target"]["checked"] is True


def test_a_numeric_target_and_no_check_without_a_cold_start(tmp_path):
    point, _cfg = gsp_point(tmp_path, cached=2000, target={"rate": "0.5", "margin": 0.05})
    assert point["status"] == "ok" and point["cache"]["target"]["band"] == [0.5, 0.5]
    point, _cfg = gsp_point(tmp_path, cached=0, flushed=False)
    assert point["status"] == "ok" and point["cache"]["target"]["checked"] is False
    assert "not flushed" in point["cache"]["target"]["reason"]


@pytest.mark.parametrize(("workload", "words"), [
    ({"dataset_name": "random", "cache_hit_target": {"rate": "expected", "margin": 0.1}}, "one turn only"),
    ({"dataset_name": "generated-shared-prefix", "gsp_num_turns": 4,
      "cache_hit_target": {"rate": "expected", "margin": 0.1}}, "one turn only"),
    ({"cache_hit_target": {"rate": "1.5", "margin": 0.1}}, "rate = '1.5'"),
    ({"cache_hit_target": {"rate": "0.5", "margin": 1}}, "margin = 1"),
    ({"cache_hit_target": {"rate": "0.5", "margin": 0.1},
      "measurement": {"server_metrics": False}}, "needs the server's own counters"),
    ({"dataset_name": "generated-shared-prefix", "cache_hit_target": {"rate": "expected", "margin": 0.1},
      "measurement": {"cache": "warm", "server_metrics": True}}, "set measurement.cache cold"),
])
def test_a_target_that_cannot_be_checked_is_refused_before_the_stop(workload, words):
    problems = workload_problems(workload)
    assert any(name == "cache_hit_target" and words in rule for name, rule in problems), problems
