"""The output-quality check (module_utils/sglang_quality.py, issue 25): the shipped prompt set, the
answer format SGLang returns, the comparison's numbers, the verdict words, the collection's two
passes and its failures, and the comparison against a ledger's baselines; then the simulator's
greedy outputs and its SGLANG_SIM_NUMERICS knob (SYNTHETIC); then a campaign's A/A floor, its rule
(quality_regressed) and the campaign file's switches.
"""

from __future__ import annotations

import asyncio
import copy

import pytest
import sglang_compare
import sglang_quality as q
import yaml
from helpers.modules import run_module
from helpers.paths import REPO
from sglang_sim import config as sim_config
from sglang_sim import numerics, throughput, tokenizer
from sglang_sim.engine import Engine, GenRequest

QUALITY_FILE = REPO / "data" / "quality.yml"


def shipped():
    return yaml.safe_load(QUALITY_FILE.read_text())


def small_set(**changes):
    data = {
        "name": "t", "version": 1, "enabled": True,
        "sampling": {"temperature": 0, "max_new_tokens": 4, "ignore_eos": True},
        "batch_size": 2, "timeout_s": 5,
        "prompts": [{"id": f"p{i}", "text": f"prompt {i}"} for i in range(3)],
    }
    data.update(changes)
    return data


# --- the prompt set -----------------------------------------------------------------------


def test_the_shipped_prompt_set_is_valid_greedy_and_on():
    data = shipped()
    assert q.check_prompt_set(data) == []
    assert data["enabled"] is True
    assert data["sampling"]["temperature"] == 0
    assert 10 <= len(data["prompts"]) <= 16
    identity = q.prompt_set_identity(data)
    assert identity["prompts"] == len(data["prompts"]) and len(identity["sha256"]) == 64
    # The licence is stated in the file.
    assert "under the project's licence" in QUALITY_FILE.read_text()


@pytest.mark.parametrize(("change", "problem"), [
    ({"sampling": {"temperature": 0.7, "max_new_tokens": 4, "ignore_eos": True}}, "sampling.temperature must be 0"),
    ({"sampling": {"temperature": 0, "max_new_tokens": 0, "ignore_eos": True}}, "sampling.max_new_tokens"),
    ({"batch_size": 0}, "batch_size must be an integer >= 1"),
    ({"prompts": []}, "prompts must be a non-empty list"),
    ({"prompts": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}, "'a' is used twice"),
    ({"prompts": [{"id": "a", "text": " "}]}, "prompts[0].text must be a non-empty string"),
    ({"enabled": "yes"}, "enabled must be true or false"),
    ({"colour": 1}, "unknown key(s) colour"),
])
def test_check_prompt_set_names_each_problem(change, problem):
    problems = q.check_prompt_set(small_set(**change))
    assert any(problem in p for p in problems), problems


def test_resolve_settings_overrides_enabled_and_refuses_a_bad_file():
    assert q.resolve_settings(small_set(), False)["enabled"] is False
    assert q.resolve_settings(small_set(), None)["enabled"] is True
    with pytest.raises(ValueError, match="data/quality.yml: batch_size"):
        q.resolve_settings(small_set(batch_size=-1))


def test_the_identity_changes_with_the_prompts_and_sampling_only():
    base = q.prompt_set_identity(small_set())
    assert q.prompt_set_identity(small_set(batch_size=1))["sha256"] == base["sha256"]
    other = small_set(sampling={"temperature": 0, "max_new_tokens": 5, "ignore_eos": True})
    assert q.prompt_set_identity(other)["sha256"] != base["sha256"]


# --- SGLang's answer ----------------------------------------------------------------------


def test_parse_answer_reads_output_token_logprobs_as_sglang_returns_them():
    # TokenizerManager.detokenize_logprob_tokens: [logprob, token_id, None] without return_text_in_logprobs.
    answer = {"text": " a b", "meta_info": {"finish_reason": {"type": "length", "length": 2},
                                           "output_token_logprobs": [[-0.5, 11, None], [-1.25, 12, None]]}}
    assert q.parse_answer(answer) == {"token_ids": [11, 12], "logprobs": [-0.5, -1.25], "text": " a b",
                                      "finish_reason": "length"}


def test_parse_answer_falls_back_to_output_ids_without_logprobs():
    answer = {"text": "x", "output_ids": [3, 4], "meta_info": {"finish_reason": None}}
    assert q.parse_answer(answer)["token_ids"] == [3, 4]
    assert q.parse_answer(answer)["logprobs"] is None


@pytest.mark.parametrize("answer", [
    [], {"text": "x"}, {"meta_info": {}}, {"meta_info": {"output_token_logprobs": [[-1.0]]}},
])
def test_parse_answer_refuses_what_is_not_an_answer(answer):
    with pytest.raises(ValueError):
        q.parse_answer(answer)


# --- compare --------------------------------------------------------------------------------


def out(pid, ids, logprobs=None):
    return {"id": pid, "token_ids": ids, "logprobs": logprobs}


@pytest.mark.parametrize(("ours", "theirs", "expected"), [
    # identical
    ([out("a", [1, 2, 3], [-1.0, -2.0, -3.0])], [out("a", [1, 2, 3], [-1.0, -2.0, -3.0])],
     {"identical": 1, "token_agreement": 1.0, "mean_first_divergence": None, "mean_abs_logprob_diff": 0.0}),
    # diverges at 1; the logprob difference only over the agreeing prefix (position 0)
    ([out("a", [1, 9, 3], [-1.5, -9.0, -3.0])], [out("a", [1, 2, 3], [-1.0, -2.0, -3.0])],
     {"identical": 0, "token_agreement": 2 / 3, "mean_first_divergence": 1.0, "mean_abs_logprob_diff": 0.5}),
    # one prompt identical, one diverges at 0; agreement over both
    ([out("a", [1, 2]), out("b", [7, 8])], [out("a", [1, 2]), out("b", [5, 6])],
     {"identical": 1, "identical_share": 0.5, "token_agreement": 0.5, "mean_first_divergence": 0.0,
      "mean_abs_logprob_diff": None}),
    # a shorter output diverges where it ends; positions of the longer count
    ([out("a", [1, 2])], [out("a", [1, 2, 3, 4])],
     {"identical": 0, "token_agreement": 0.5, "mean_first_divergence": 2.0}),
])
def test_compare(ours, theirs, expected):
    result = q.compare(ours, theirs)
    for key, value in expected.items():
        assert result[key] == pytest.approx(value) if isinstance(value, float) else result[key] == value, key


def test_compare_matches_prompts_by_id_and_names_the_unmatched():
    result = q.compare([out("b", [1]), out("a", [2])], [out("a", [2]), out("c", [3])])
    assert (result["prompts"], result["identical"], result["unmatched"]) == (1, 1, ["b", "c"])
    assert not q.unchanged(result)


@pytest.mark.parametrize(("agreement", "floor", "words"), [
    (0.62, 1.0, "outputs changed (agreement 62 % vs A/A 100 %)"),
    (0.996, 1.0, "outputs changed (agreement 99.6 % vs A/A 100 %)"),
    (0.5, None, "outputs changed (agreement 50 % vs no A/A yet: run the baseline twice)"),
])
def test_verdict_words(agreement, floor, words):
    comparison = {"prompts": 2, "identical": 1, "unmatched": [], "token_agreement": agreement}
    assert q.verdict(comparison, floor) == words


def test_verdict_unchanged_and_no_baseline():
    same = {"prompts": 2, "identical": 2, "unmatched": [], "token_agreement": 1.0}
    assert q.verdict(same, None) == "outputs unchanged"
    assert q.verdict(None, 1.0) == "no baseline outputs"


# --- collect ---------------------------------------------------------------------------------


class FakeServer:
    """A /generate stand-in: token ids from the text, batch answers optionally different."""

    def __init__(self, batch_shift=0, fail_at=None):
        self.calls, self.batch_shift, self.fail_at = [], batch_shift, fail_at

    def answer(self, text, shift):
        ids = [len(text) + shift, 7, 8]
        return {"text": "x", "meta_info": {"finish_reason": {"type": "length"},
                                           "output_token_logprobs": [[-0.25, i, None] for i in ids]}}

    def __call__(self, url, payload, timeout):
        self.calls.append(payload)
        if self.fail_at is not None and len(self.calls) > self.fail_at:
            raise q.QualityRequestError("HTTP 500 from x: boom")
        assert payload["sampling_params"]["temperature"] == 0 and payload["return_logprob"] is True
        if isinstance(payload["text"], list):
            return [self.answer(t, self.batch_shift) for t in payload["text"]]
        return self.answer(payload["text"], 0)


def test_collect_sends_one_at_a_time_then_in_batches_and_measures_the_difference():
    server = FakeServer(batch_shift=1)
    block = q.collect("http://h/generate", small_set(), sender=server)
    assert block["status"] == "ok" and block["error"] is None
    texts = [c["text"] for c in server.calls]
    assert texts == ["prompt 0", "prompt 1", "prompt 2", ["prompt 0", "prompt 1"], ["prompt 2"]]
    assert [o["id"] for o in block["outputs"]["batch"]] == ["p0", "p1", "p2"]
    # The batch answered differently at position 0: measured, not assumed away.
    assert block["batch_vs_single"]["identical"] == 0
    assert block["batch_vs_single"]["mean_first_divergence"] == 0.0


def test_collect_flushes_the_prefix_cache_before_each_pass():
    """Each pass starts from an empty radix cache, whatever the benchmark before it left there."""
    order = []
    server = FakeServer()

    def sender(url, payload, timeout):
        order.append("batch" if isinstance(payload["text"], list) else "single")
        return server(url, payload, timeout)

    def flush():
        order.append("flush")
        return {"ok": True, "status": 200, "attempts": 1, "seconds": 0.0}

    block = q.collect("http://h/generate", small_set(), sender=sender, flush=flush)
    assert order == ["flush", "single", "single", "single", "flush", "batch", "batch"]
    assert block["cache_flush"]["single"]["ok"] and block["cache_flush"]["batch"]["ok"]
    assert "cache_flush" not in q.collect("http://h/generate", small_set(), sender=FakeServer())


def test_flush_cache_waits_for_an_idle_server_and_says_what_it_got():
    """SGLang answers 400 to /flush_cache while requests run; the flush asks again until 200, and a
    server that never says 200 is reported (ok false, its status), never raised."""
    import http.server
    import threading

    answers = [400, 400, 200]

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server's name)
            self.send_response(answers.pop(0) if answers else 404)
            self.end_headers()

        def log_message(self, *args):
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{httpd.server_port}/flush_cache"
        done = q.flush_cache(url, timeout_s=5, sleep=lambda _s: None)
        assert done["ok"] is True and done["status"] == 200 and done["attempts"] == 3
        refused = q.flush_cache(url, timeout_s=0, sleep=lambda _s: None)
        assert refused == dict(refused, ok=False, status=404, attempts=1)
    finally:
        httpd.shutdown()


def test_collect_keeps_what_it_had_when_a_request_fails():
    block = q.collect("http://h/generate", small_set(), sender=FakeServer(fail_at=3))
    assert block["status"] == "failed" and "HTTP 500" in block["error"]
    assert len(block["outputs"]["single"]) == 3 and block["outputs"]["batch"] == []


def test_collect_refuses_a_batch_answer_of_the_wrong_size():
    def sender(url, payload, timeout):
        answer = FakeServer().answer("x", 0)
        return [answer] if isinstance(payload["text"], list) else answer

    block = q.collect("http://h/generate", small_set(), sender=sender)
    assert block["status"] == "failed" and "a batch of 2 texts was answered with 1 answers" in block["error"]


# --- against the ledger ------------------------------------------------------------------------


def record(record_id, tier, ids_by_prompt, status="success", sha="s1", quality_status="ok"):
    outputs = [out(pid, ids, [-0.5] * len(ids)) for pid, ids in ids_by_prompt.items()]
    return {"record_id": record_id, "tier": tier, "status": status, "host": "h", "target_is_simulator": True,
            "model": {"model_path": "m"},
            "quality": {"status": quality_status, "prompt_set": {"name": "t", "sha256": sha, "prompts": 2},
                        "outputs": {"single": outputs, "batch": copy.deepcopy(outputs)},
                        "error": None if quality_status == "ok" else "HTTP 500"}}


SAME = {"a": [1, 2, 3, 4], "b": [5, 6, 7, 8]}
CHANGED = {"a": [1, 2, 3, 4], "b": [5, 9, 9, 9]}


def test_quality_comparison_through_a_ledger():
    ledger = [record("b1", "baseline", SAME)]
    first = q.quality_comparison(ledger[0], ledger)
    assert first["verdict"] == "no baseline outputs" and first["aa"] is None
    ledger.append(record("b2", "baseline", SAME))
    aa = q.quality_comparison(ledger[1], ledger)
    assert aa["verdict"] == "outputs unchanged" and aa["aa"]["token_agreement"] == 1.0
    ledger.append(record("t1", "tier", CHANGED))
    tier = q.quality_comparison(ledger[2], ledger)
    assert tier["verdict"] == "outputs changed (agreement 62 % vs A/A 100 %)"
    assert tier["below_floor"] is True and tier["baseline_record_id"] == "b2"
    assert tier["single"]["mean_first_divergence"] == 1.0 and tier["batch"]["identical"] == 1
    ledger.append(record("b3", "baseline", SAME))
    again = q.quality_comparison(ledger[3], ledger)
    assert again["verdict"] == "outputs unchanged" and again["aa"]["record_ids"] == ["b2", "b3"]


@pytest.mark.parametrize(("baseline", "verdict"), [
    (record("b1", "baseline", SAME, sha="other"), "no baseline outputs"),   # another prompt set
    (record("b1", "baseline", SAME, status="failed"), "no baseline outputs"),
    (record("b1", "baseline", SAME, quality_status="failed"), "no baseline outputs"),
    (record("b1", "tier", SAME), "no baseline outputs"),
])
def test_only_a_successful_baseline_of_the_same_prompt_set_counts(baseline, verdict):
    mine = record("t1", "tier", SAME)
    assert q.quality_comparison(mine, [baseline, mine])["verdict"] == verdict


def test_off_and_failed_checks_say_so():
    off = {"record_id": "x", "tier": "t", "quality": {"status": "off"}}
    assert q.quality_comparison(off, [off])["verdict"] == "quality check off"
    assert q.quality_comparison({"record_id": "y"}, [])["verdict"] == "quality check off"
    failed = record("t1", "tier", SAME, quality_status="failed")
    assert q.quality_comparison(failed, [failed])["verdict"] == "quality check failed (HTTP 500)"


def test_the_table_shows_the_quality_verdict_beside_the_speed_verdict():
    ledger = [record("b1", "baseline", SAME), record("b2", "baseline", SAME), record("t1", "tier", CHANGED)]
    comparison = sglang_compare.ledger_comparison(ledger[2], ledger)
    assert comparison["quality"]["verdict"].startswith("outputs changed")
    lines = comparison["table"].splitlines()
    verdict = "outputs changed (agreement 62 % vs A/A 100 %) - below the A/A floor"
    assert f"quality (t, 2 prompts, greedy): {verdict}" in lines
    assert any(line.startswith("  vs baseline record b2: identical 1/2, token agreement 62 %") for line in lines)


def test_the_numerics_knob_does_not_split_the_speed_comparison():
    base = {"host": "h", "target_is_simulator": True, "launch": {"env": {"SGLANG_SIM_SPEED": "10"}}}
    tier = {"host": "h", "target_is_simulator": True,
            "launch": {"env": {"SGLANG_SIM_SPEED": "10", "SGLANG_SIM_NUMERICS": "perturbed"}}}
    assert sglang_compare.match_key(base) == sglang_compare.match_key(tier)


# --- the simulator (SYNTHETIC) ----------------------------------------------------------------------


def test_sim_numerics_knob():
    assert sim_config.parse_env({}).numerics == "exact"
    assert sim_config.parse_env({"SGLANG_SIM_NUMERICS": "Perturbed"}).numerics == "perturbed"
    with pytest.raises(sim_config.ConfigError, match="SGLANG_SIM_NUMERICS='fp4' is not one of exact, perturbed"):
        sim_config.parse_env({"SGLANG_SIM_NUMERICS": "fp4"})


def test_sim_greedy_seed_is_the_prompts_and_perturbed_numerics_diverge_for_some():
    seeds = [numerics.greedy_seed(f"prompt {i}", None) for i in range(60)]
    assert seeds == [numerics.greedy_seed(f"prompt {i}", None) for i in range(60)]
    assert all(numerics.divergence_position(s, "exact") is None for s in seeds)
    diverging = [numerics.divergence_position(s, "perturbed") for s in seeds]
    share = sum(d is not None for d in diverging) / len(seeds)
    assert 0.15 < share < 0.5
    assert all(1 <= d <= 16 for d in diverging if d is not None)
    lp = [numerics.token_logprob(s, 3, "exact") for s in seeds]
    assert all(-4.01 <= v < 0 for v in lp)
    moved = [abs(numerics.token_logprob(s, 3, "perturbed") - v) for s, v in zip(seeds, lp, strict=True)]
    assert max(moved) <= 0.0041 and any(m > 0 for m in moved)


def test_sim_engine_gives_a_greedy_request_the_same_tokens_and_logprobs_until_it_diverges():
    async def run(diverge_at, numerics_name):
        engine = Engine(throughput.build_model({}), tokenizer.TextCodec(None), speed=1e6,
                        max_total_num_tokens=10**6, cuda_graph=False)
        task = asyncio.create_task(engine.run())
        req = GenRequest(rid="r", prompt_tokens=5, max_new_tokens=12, seed=1234, diverge_at=diverge_at,
                         numerics=numerics_name, logprobs=[])
        engine.submit(req)
        while not req.finished:
            await req.changed.wait()
            req.changed.clear()
        task.cancel()
        return req

    exact = asyncio.run(run(None, "exact"))
    again = asyncio.run(run(None, "exact"))
    perturbed = asyncio.run(run(5, "perturbed"))
    assert (exact.output_ids, exact.logprobs) == (again.output_ids, again.logprobs)
    assert len(exact.logprobs) == 12
    assert perturbed.output_ids[:5] == exact.output_ids[:5]
    assert perturbed.output_ids[5:] != exact.output_ids[5:]


# --- the switch and the module ------------------------------------------------------------------


def quality_filter():
    """plugins/filter/sglang_lab.py's sglang_quality_settings, the filter role sglang_bench's settings use."""
    from importlib import util

    spec = util.spec_from_file_location("sglang_lab_filter_for_quality", REPO / "plugins" / "filter" / "sglang_lab.py")
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.sglang_quality_settings


@pytest.mark.parametrize(("switch", "enabled"), [(None, True), (False, False), ("false", False), ("true", True)])
def test_the_per_run_switch_turns_the_check_off(switch, enabled):
    # -e sglang_bench_quality_enabled=false reaches the filter as the string "false".
    assert quality_filter()(shipped(), switch)["enabled"] is enabled


def test_the_filter_refuses_a_bad_prompt_set_before_anything_runs():
    from ansible.errors import AnsibleFilterError

    with pytest.raises(AnsibleFilterError, match="The output-quality check cannot run: x.yml: batch_size"):
        quality_filter()(small_set(batch_size=0), None, "x.yml")


@pytest.mark.parametrize(("data", "check_mode", "reason"), [
    (small_set(enabled=False), False, "off for this run (enabled: false)"),
    (small_set(), True, "check mode: nothing sent"),
])
def test_the_check_sends_nothing_when_off_or_in_check_mode(data, check_mode, reason):
    def sender(*_args):
        raise AssertionError("nothing may be sent")

    # Port 9 (discard): a request would fail; none is sent.
    block = q.quality_block("127.0.0.1", 9, data, check_mode=check_mode, sender=sender)
    assert block["status"] == "off" and block["reason"] == reason, block
    assert block["url"] == "http://127.0.0.1:9/generate" and block["prompt_set"]["prompts"] == 3


def test_the_check_keeps_a_failed_request_in_the_block():
    block = q.quality_block("127.0.0.1", 9, small_set(timeout_s=2))
    assert block["status"] == "failed", block
    assert "no answer from http://127.0.0.1:9/generate" in block["error"]
    # Each pass starts from a flushed cache; the flush that failed is in the block, not an exception.
    assert block["cache_flush"]["single"]["ok"] is False


def bench_args(tmp_path, **changes):
    args = {
        "client_command": ["false"], "output_dir": str(tmp_path / "raw"), "port": 9, "tokenizer": "tok",
        "workload": {"concurrency": [1], "input_len": 8, "output_len": 8}, "num_prompts": 2,
        "collect_provenance": False, "quality": small_set(),
    }
    args.update(changes)
    return args


def test_the_benchmark_refuses_a_bad_prompt_set_before_anything_runs(tmp_path):
    # The check runs in the benchmark's own task (module sglang_bench, option quality); a prompt set
    # that is not valid fails it before the client starts or a request is sent.
    result = run_module("sglang_bench", tmp_path, **bench_args(tmp_path, quality=small_set(prompts=[])))
    assert result["failed"] and "prompts must be a non-empty list" in result["msg"], result
    assert "Fix data/quality.yml" in result["msg"]
    assert not (tmp_path / "raw").exists()


def test_the_benchmark_says_in_check_mode_that_the_check_would_send_nothing(tmp_path):
    result = run_module("sglang_bench", tmp_path, _ansible_check_mode=True, **bench_args(tmp_path))
    assert not result.get("failed"), result
    assert result["quality"]["status"] == "off" and result["quality"]["reason"] == "check mode: nothing sent"


def test_the_report_shows_the_quality_verdict_of_a_record_that_has_one():
    import report

    ledger = [record("b1", "baseline", SAME), record("b2", "baseline", SAME), record("t1", "tier", CHANGED)]
    for r in ledger:
        r.update(run_id=r["record_id"], recorded_at="2026-12-06T00:00:00Z", points=[], _ledger="h/ledger.jsonl")
    text = report.build_markdown(ledger, [], 0.95, "baseline", [])
    assert "Output quality: outputs changed (agreement 62 % vs A/A 100 %) - below the A/A floor." in text
    del ledger[2]["quality"]
    assert "Output quality" not in report.build_markdown(ledger[2:], [], 0.95, "baseline", [])


# --- in a campaign: the A/A floor of the campaign's own A/A arm, and the rule ----------------------

RULE = {"aa_floor_margin": 0.05}
NOISY = {"a": [1, 2, 3, 4], "b": [5, 6, 7, 9]}  # 7 of 8 tokens agree with SAME


def arms(**by_arm):
    """``{arm: [records]}`` from ``arm=[(record id, ids_by_prompt), ...]``."""
    return {arm.replace("_aa", "~aa"): [record(rid, arm.split("_aa")[0], ids) for rid, ids in items]
            for arm, items in by_arm.items()}


def test_the_rule_flags_a_tier_below_the_aa_floor_minus_the_margin():
    result = q.campaign_quality(
        arms(baseline=[("b1", SAME), ("b2", SAME)], baseline_aa=[("a1", SAME), ("a2", SAME)],
             fast=[("t1", CHANGED), ("t2", CHANGED)], same=[("s1", SAME), ("s2", SAME)]),
        "baseline", ["baseline~aa"], RULE)
    assert result["floor"] == {"token_agreement": 1.0, "pairs": 4, "arms": ["baseline~aa"]}
    fast = result["arms"]["fast"]
    assert fast["regressed"] is True and fast["pairs"] == 4 and fast["token_agreement"] == 0.625
    assert fast["verdict"] == "quality_regressed (agreement 62 % < A/A floor 100 % - margin 5 %)"
    assert result["arms"]["same"]["regressed"] is False and result["arms"]["same"]["verdict"] == "outputs unchanged"
    assert result["arms"]["baseline~aa"]["verdict"] == "outputs unchanged: A/A floor 100 %"
    assert result["arms"]["baseline"]["regressed"] is None
    assert result["arms"]["baseline"]["verdict"] == "reference (2 record(s) with outputs)"


@pytest.mark.parametrize(("margin", "regressed"), [(0.0, True), (0.37, True), (0.375, False), (0.5, False)])
def test_the_margin_is_subtracted_from_the_floor(margin, regressed):
    result = q.campaign_quality(arms(baseline=[("b1", SAME)], baseline_aa=[("a1", SAME)], fast=[("t1", CHANGED)]),
                                "baseline", ["baseline~aa"], {"aa_floor_margin": margin})
    assert result["arms"]["fast"]["regressed"] is regressed  # agreement 0.625 against 1.0 - margin
    assert result["arms"]["fast"]["verdict"].startswith("quality_regressed" if regressed else "outputs changed")


def test_the_floor_is_the_lowest_aa_pair_so_a_tier_as_noisy_as_the_baseline_is_not_flagged():
    # The baseline's own runs differ (A/A: 7/8 and 8/8); a tier that differs as much is not flagged at
    # margin 0, one that differs more is.
    result = q.campaign_quality(
        arms(baseline=[("b1", SAME)], baseline_aa=[("a1", NOISY), ("a2", SAME)],
             like=[("l1", NOISY), ("l2", SAME)], worse=[("w1", CHANGED), ("w2", NOISY)]),
        "baseline", ["baseline~aa"], {"aa_floor_margin": 0.0})
    assert result["floor"]["token_agreement"] == 0.875
    assert result["arms"]["like"]["regressed"] is False and result["arms"]["like"]["token_agreement"] == 0.9375
    assert result["arms"]["worse"]["regressed"] is True and result["arms"]["worse"]["min_token_agreement"] == 0.625


def test_without_an_aa_arm_there_is_no_floor_and_none_is_invented():
    # Two baseline records could be held against each other, but they are not the campaign's A/A arm.
    result = q.campaign_quality(arms(baseline=[("b1", SAME), ("b2", SAME)], fast=[("t1", CHANGED)]),
                                "baseline", [], RULE)
    assert result["floor"] is None
    assert result["arms"]["fast"]["regressed"] is None
    assert result["arms"]["fast"]["verdict"] == (
        "outputs changed (agreement 62 % vs no A/A floor); rule not applied: no A/A floor")


def test_without_a_rule_nothing_is_flagged():
    result = q.campaign_quality(arms(baseline=[("b1", SAME)], baseline_aa=[("a1", SAME)], fast=[("t1", CHANGED)]),
                                "baseline", ["baseline~aa"])
    assert result["rule"] is None and result["arms"]["fast"]["regressed"] is None
    assert result["arms"]["fast"]["verdict"] == "outputs changed (agreement 62 % vs A/A 100 %)"


def test_off_failed_missing_and_another_prompt_set_say_so():
    data = arms(baseline=[("b1", SAME)], baseline_aa=[("a1", SAME)])
    data["off"] = [record("o1", "off", SAME, quality_status="off")]
    data["failed"] = [record("f1", "failed", SAME, quality_status="failed")]
    data["old"] = [{"record_id": "x", "tier": "old", "status": "success"}]
    data["other"] = [record("p1", "other", CHANGED, sha="s2")]
    result = q.campaign_quality(data, "baseline", ["baseline~aa"], RULE)
    verdicts = {name: entry["verdict"] for name, entry in result["arms"].items()}
    assert verdicts["off"] == "quality check off"
    assert verdicts["failed"] == "quality check failed (HTTP 500)"
    assert verdicts["old"] == "no quality check"
    assert verdicts["other"] == "no baseline outputs"
    assert not any(entry["regressed"] for entry in result["arms"].values())


def with_quality(records, ids_by_prompt, rule=None):
    for rec in records:
        rec["quality"] = record("x", "x", ids_by_prompt)["quality"]
        if rule:
            rec["campaign"]["quality_rule"] = dict(rule)
    return records


def test_the_campaign_report_says_quality_regressed_whatever_the_speed(tmp_path):
    import campaign_report
    import sglang_stats
    from helpers.records import AA, BASE, CRASH, NOISE, campaign, cell, write_ledger

    faster = ("t02-mscclpp", "tier", tuple(1.2 * f for f in NOISE))
    records = with_quality(campaign([BASE, AA], repeats=3), SAME, RULE)
    records += with_quality(campaign([faster], repeats=3), CHANGED, RULE)
    records += with_quality(campaign([("t03-single-batch-overlap", "tier", NOISE)], repeats=3), SAME, RULE)
    records += [cell("t01-piecewise-cuda-graph", 1, [], failure=CRASH)]
    analysis = sglang_stats.campaign_analysis(records, "demo")
    host = analysis["hosts"]["node-a"]
    assert host["quality"]["floor"]["token_agreement"] == 1.0
    status = host["status"]
    assert status["t02-mscclpp"]["status"] == "quality_regressed"  # faster, but its answers changed
    assert status["t02-mscclpp"]["speed_status"] == "better"
    assert status["t03-single-batch-overlap"]["status"] != "quality_regressed"
    assert status["t03-single-batch-overlap"]["quality"] == "outputs unchanged"
    assert status["t01-piecewise-cuda-graph"]["status"] == "crashed"

    write_ledger(tmp_path / "ledger.jsonl", records)
    out = tmp_path / "out"
    assert campaign_report.main(["--ledger", str(tmp_path / "ledger.jsonl"), "--campaign", "demo",
                                 "--out-dir", str(out)]) == 0
    markdown = (out / "campaign-demo.md").read_text()
    assert "| t02-mscclpp | **quality_regressed** (agreement 62 % < A/A floor 100 % - margin 5 %; speed: better (" \
        in markdown
    assert "| node-a | `t01-piecewise-cuda-graph` | 0 / 0 | 0 | — | — | no successful cell |" in markdown
    assert "## Output quality" in markdown
    assert "A/A floor 100 % (9 pair(s) of baseline~aa)" in markdown  # 3 A/A records x 3 baseline records
    assert "| node-a | `t02-mscclpp` | 3 / 3 | 9 | 62 % (lowest 62 %) | 50 % | **quality_regressed" in markdown


def test_the_campaign_file_turns_the_check_off_and_sets_the_rule():
    import json as _json

    import sglang_campaign
    schema = _json.loads((REPO / "data" / "campaigns" / "schema.json").read_text())
    base = {"name": "x", "tiers": ["t"]}
    assert sglang_campaign.check_campaign(base, schema, None)["quality"] == {"enabled": True, "rule": None}
    ruled = sglang_campaign.check_campaign({**base, "quality": {"rule": RULE}}, schema, None)
    assert ruled["quality"] == {"enabled": True, "rule": RULE}
    cell = {"cell": "t/w/r1", "key": "k", "arm": "t", "role": "tier", "tier": "t", "workload": "w", "repeat": 1}
    assert sglang_campaign.cell_record(ruled, cell, 1, {})["quality_rule"] == RULE
    assert "quality_rule" not in sglang_campaign.cell_record(
        sglang_campaign.check_campaign(base, schema, None), cell, 1, {})
    for bad, words in [({"rule": {"aa_floor_margin": 2}}, "greater than the maximum"),
                       ({"rule": {"margin": 0.1}}, "Additional properties"),
                       ({"enabled": "no"}, "is not of type 'boolean'"),
                       ({"enabled": False, "rule": RULE}, "quality.rule needs the quality check")]:
        with pytest.raises(sglang_campaign.CampaignError, match=words):
            sglang_campaign.check_campaign({**base, "quality": bad}, schema, None)
