"""module_utils/sglang_warmup_rounds.py: the warm-up's rounds from the resolved settings, its summary and its
failure (no server); the two modules that warm up, in check mode."""

from __future__ import annotations

import threading

import pytest
import sglang_bench_settings as bench_settings
import sglang_warmup_rounds as wr
import yaml
from helpers.modules import run_module
from helpers.paths import REPO


def test_rounds_one_per_level_with_at_least_the_requests():
    assert wr.warmup_rounds(4, 2, [1, 10, 256]) == [(1, 4), (10, 10), (256, 256)]
    assert wr.warmup_rounds(8, 2) == [(2, 8)]  # no levels: one round at the concurrency
    assert wr.requests_in(wr.warmup_rounds(4, 2, [1, 10, 256])) == 4 + 10 + 256


@pytest.mark.parametrize(
    ("settings", "found"),
    [
        ({"requests": 0}, "requests must be >= 1, got 0"),
        ({"timeout": 0}, "timeout must be >= 1"),
        ({"levels": [1, 0]}, "every level must be >= 1"),
    ],
)
def test_settings_problems_name_the_setting(settings, found):
    base = {"requests": 4, "concurrency": 2, "levels": None, "input_len": 8, "max_new_tokens": 4, "timeout": 5}
    assert found in wr.check_settings({**base, **settings})
    assert wr.check_settings(base) is None


def test_the_rounds_run_in_order_at_their_concurrency():
    seen, lock = [], threading.Lock()

    def sender(url, payload, timeout):
        with lock:
            seen.append(payload["text"].split(".")[0])
        return {"ok": True, "status": 200, "body": None, "seconds": 0.01, "tokens": 3}

    summary, failure = wr.run_warmup("http://h:1/generate", [(1, 2), (3, 3)], 16, 3, 5, sender=sender)
    assert failure is None
    assert [r["concurrency"] for r in summary["per_level"]] == [1, 3]
    assert [r["requests"] for r in summary["per_level"]] == [2, 3]
    assert summary["requests"] == summary["succeeded"] == 5 and summary["completion_tokens"] == 15
    assert sorted(seen) == sorted(f"Warm-up request {i}" for i in range(5))  # numbered across rounds
    assert summary["seconds"] >= 0 and summary["latency_s"]["median"] == 0.01


def test_a_failed_round_stops_the_warmup_with_the_servers_answer():
    calls = []

    def sender(url, payload, timeout):
        calls.append(payload)
        if len(calls) == 2:
            return {"ok": False, "status": 400, "body": "context length exceeded", "seconds": 0.01}
        return {"ok": True, "status": 200, "body": None, "seconds": 0.01, "tokens": 3}

    summary, failure = wr.run_warmup("http://h:1/generate", [(1, 2), (4, 4)], 16, 3, 5, sender=sender)
    assert len(calls) == 2 and len(summary["per_level"]) == 1  # the second round never ran
    assert failure["failure_class"] == "warmup_failed" and failure["failure_step"] == "warmup"
    assert failure["status"] == 400 and failure["body"] == "context length exceeded"
    assert "1 of 2 warm-up requests" in failure["msg"] and "request 1" in failure["msg"]
    assert summary["requests"] == 2 and summary["succeeded"] == 1


# --------------------------------------------------------------------------- the resolved settings


DATA = yaml.safe_load((REPO / "data" / "benchmark.yml").read_text())
BAD_CONCURRENCY = (
    "warmup.concurrency must be an integer >= 1 or 'measured', got {!r}; "
    "fix warmup.concurrency in data/benchmark.yml or sglang_bench_warmup_concurrency."
)


def resolved_warmup(**overrides):
    """cfg["warmup"] as role sglang_bench resolves it from data/benchmark.yml with these overrides."""
    return bench_settings.resolve_settings(DATA, {f"sglang_bench_{k}": v for k, v in overrides.items()})["warmup"]


@pytest.mark.parametrize(
    ("overrides", "concurrency", "levels", "rounds"),
    [
        # data/benchmark.yml itself: measured, one round per measured concurrency.
        ({}, 1, [1, 10, 256, 1024], [(1, 4), (10, 10), (256, 256), (1024, 1024)]),
        ({"concurrency": "2,8", "warmup_requests": 5}, 2, [2, 8], [(2, 5), (8, 8)]),
        # An integer: every request at that concurrency, one round; the levels are ignored.
        ({"warmup_concurrency": "3"}, 3, None, [(3, 4)]),
        ({"concurrency": "2,8", "warmup_concurrency": 16, "warmup_requests": 6}, 16, None, [(16, 6)]),
    ],
)
def test_the_resolved_warmup_becomes_the_rounds(overrides, concurrency, levels, rounds):
    spec = resolved_warmup(**overrides)
    settings = wr.settings_from_spec(spec)
    assert settings == {
        "requests": spec["requests"],
        "concurrency": concurrency,
        "levels": levels,
        "input_len": DATA["warmup"]["input_len"],
        "max_new_tokens": DATA["warmup"]["max_new_tokens"],
        "timeout": DATA["warmup"]["timeout_s"],
    }
    assert wr.check_settings(settings) is None
    assert wr.warmup_rounds(settings["requests"], settings["concurrency"], settings["levels"]) == rounds


def test_an_integer_concurrency_ignores_levels_and_the_measured_fallback():
    spec = {**resolved_warmup(warmup_concurrency=2), "levels": [1, 10]}
    settings = wr.settings_from_spec(spec, measured_levels=[4, 8])
    assert (settings["concurrency"], settings["levels"]) == (2, None)


@pytest.mark.parametrize("levels", [None, []])
def test_measured_without_levels_takes_the_measured_concurrencies(levels):
    spec = {**resolved_warmup(), "levels": levels}
    settings = wr.settings_from_spec(spec, measured_levels=[2, 4])
    assert (settings["concurrency"], settings["levels"]) == (2, [2, 4])
    with pytest.raises(ValueError, match="'measured' but there is no level to warm up at"):
        wr.settings_from_spec(spec)


@pytest.mark.parametrize("concurrency", ["often", None, [2], "Measured"])
def test_a_bad_concurrency_is_refused_with_where_to_fix_it(concurrency):
    spec = {**resolved_warmup(), "concurrency": concurrency}
    with pytest.raises(ValueError) as caught:
        wr.settings_from_spec(spec, measured_levels=[1])
    assert str(caught.value) == BAD_CONCURRENCY.format(concurrency)


# --------------------------------------------------------------------------- through the modules


def test_both_modules_send_the_same_rounds_for_the_resolved_warmup(tmp_path):
    """sglang_warmup's warmup (the warmup entry point) and sglang_bench's warmup (the measure
    entry point), in check mode: the same warm-up from the same resolved block."""
    spec = resolved_warmup(concurrency="2,8", warmup_requests=5)
    alone = run_module("sglang_warmup", tmp_path, port=1, warmup=spec, _ansible_check_mode=True)
    assert not alone.get("failed"), alone
    assert alone["warmup"]["would_send"] == 5 + 8 and alone["warmup"]["requests"] == 0
    bench = run_module(
        "sglang_bench", tmp_path, port=1, warmup=spec, client_command=["client"],
        workload={"concurrency": [2, 8], "input_len": 16, "output_len": 8},
        output_dir=str(tmp_path / "never"), num_prompts=4, tokenizer="tok",
        _ansible_check_mode=True,
    )
    assert not bench.get("failed"), bench
    assert bench["warmup"] == {"url": "http://127.0.0.1:1/generate", "would_send": 5 + 8}
    assert alone["warmup"]["url"] == bench["warmup"]["url"]
    # Measured without levels: sglang_bench warms up at its own concurrency points.
    bench = run_module(
        "sglang_bench", tmp_path, port=1, warmup={**spec, "levels": None},
        workload={"concurrency": [4, 16], "input_len": 16, "output_len": 8}, client_command=["client"],
        output_dir=str(tmp_path / "never"), num_prompts=4,
        tokenizer="tok", _ansible_check_mode=True,
    )
    assert bench["warmup"]["would_send"] == 5 + 16, bench


def test_the_warmup_module_refuses_what_the_settings_cannot_run(tmp_path):
    spec = {**resolved_warmup(), "concurrency": "often"}
    bad = run_module("sglang_warmup", tmp_path, warmup=spec, _ansible_check_mode=True)
    assert bad["failed"] is True and bad["msg"] == "sglang_warmup: " + BAD_CONCURRENCY.format("often")
    bench = run_module(
        "sglang_bench", tmp_path, warmup=spec, client_command=["client"],
        workload={"concurrency": [1], "input_len": 16, "output_len": 8},
        output_dir=str(tmp_path / "never"), num_prompts=4, tokenizer="tok",
        _ansible_check_mode=True,
    )
    assert bench["failed"] is True and bench["msg"] == "sglang_bench: " + BAD_CONCURRENCY.format("often")
    zero = run_module("sglang_warmup", tmp_path, warmup={**resolved_warmup(), "requests": 0},
                      _ansible_check_mode=True)
    assert zero["failed"] is True and "requests must be >= 1, got 0" in zero["msg"]
    both = run_module("sglang_warmup", tmp_path, warmup=resolved_warmup(), requests=8, _ansible_check_mode=True)
    assert both["failed"] is True and "mutually exclusive: warmup|requests" in both["msg"]


def test_the_warmup_modules_own_options_still_work(tmp_path):
    alone = run_module("sglang_warmup", tmp_path, requests=3, levels=[1, 4], _ansible_check_mode=True)
    assert alone["warmup"]["would_send"] == 3 + 4
    alone = run_module("sglang_warmup", tmp_path, _ansible_check_mode=True)
    assert alone["warmup"]["would_send"] == 8  # the defaults: 8 requests at 2
