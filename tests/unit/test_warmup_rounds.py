"""module_utils/sglang_warmup_rounds.py: the warm-up's rounds, its summary and its failure (no server)."""

from __future__ import annotations

import threading

import pytest
import sglang_warmup_rounds as wr


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
