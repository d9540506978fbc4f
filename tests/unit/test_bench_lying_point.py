"""A benchmark point that cannot lie, checked on real SGLang 0.5.17's recorded answers.

tests/fixtures/real-sglang/probe-0.5.17-h200-tp1-lying-point/ (copied from shared/real-sglang/,
recorded on a lent H200): one server, bench_serving run twice with 8 prompts at concurrency 4. With
128-token prompts every request was served (152 output tok/s). With 5000-token prompts, longer than
the 4096-token context, every request failed inside an HTTP 200 stream, and bench_serving still
reported 8 successful requests at 1862 output tok/s.
"""

from __future__ import annotations

import datetime
import json

import pytest
import sglang_bench_points as points
from helpers.paths import FIXTURES

REC = FIXTURES / "real-sglang" / "probe-0.5.17-h200-tp1-lying-point"


def result(name):
    return json.loads((REC / name).read_text().splitlines()[-1])


def test_the_good_point_is_believed():
    point = points.point_from_result(result("bench_in128.jsonl"), 4, 0, 8)
    assert point["status"] == "ok" and point["failure"] is None
    assert point["completed"] == 8 and round(point["output_throughput"]) == 152


def test_the_lying_point_fails_from_its_own_numbers():
    raw = result("bench_in5000.jsonl")
    assert raw["completed"] == 8 and raw["output_throughput"] > 1800  # what bench_serving claimed
    point = points.point_from_result(raw, 4, 0, 8)
    assert point["status"] == "failed" and point["failure"]["class"] == "streamed_error"
    signals = point["failure"]["signals"]
    assert any("mean TTFT is 0.0 ms" in s for s in signals)
    assert any("retokenized 0 output tokens of the 128 reported" in s for s in signals)


def test_the_server_log_alone_fails_a_point():
    log = (REC / "server.log").read_text()
    lines = [line for line in log.splitlines() if "[http_server] Error" in line]
    assert len(lines) == 9  # the 8 requests and bench_serving's own warm-up request
    first = datetime.datetime.strptime(lines[0][1:20], "%Y-%m-%d %H:%M:%S").timestamp()
    last = datetime.datetime.strptime(lines[-1][1:20], "%Y-%m-%d %H:%M:%S").timestamp()
    found = points.server_errors_by_window(log, {"in5000": (first, last), "before": (first - 600, first - 300)})
    assert len(found["in5000"]) == 9 and found["before"] == []
    assert found["in5000"][0].startswith("The input (8205 tokens) is longer than the model's context length")
    # Numbers that look fine, but the server said otherwise while the point ran.
    point = points.point_from_result(result("bench_in128.jsonl"), 4, 0, 8, found["in5000"])
    assert point["status"] == "failed" and point["failure"]["class"] == "streamed_error"
    assert "9 '[http_server] Error' line(s)" in point["failure"]["message"]


@pytest.mark.parametrize(
    ("change", "signal"),
    [
        ({"mean_ttft_ms": 0}, "mean TTFT"),
        ({"total_output_tokens_retokenized": 10, "total_output_tokens": 128}, "retokenized 10"),
        ({"errors": ["", "boom", "boom"]}, "2 request error(s) for 0 failed"),
    ],
)
def test_each_signal_on_its_own(change, signal):
    raw = {**result("bench_in128.jsonl"), **change}
    point = points.point_from_result(raw, 4, 0, 8)
    assert point["failure"]["class"] == "streamed_error" and any(signal in s for s in point["failure"]["signals"])


def test_an_incomplete_point_stays_incomplete():
    raw = {**result("bench_in5000.jsonl"), "completed": 5}
    assert points.point_from_result(raw, 4, 0, 8)["failure"]["class"] == "incomplete_point"
