"""Integration: nothing is stopped until the whole experiment is known to be runnable, and the
restore cannot inherit the failure. playbooks/experiment.yml against the SGLang-protocol simulator
(inventory/local.yml, a temp work dir and port), through ansible-runner.

One baseline experiment for the whole module (fixture ``baseline``) gives a running server and a
successful record. Each refused run must end before the lock: no sglang_server_lock /
sglang_server (stopped, started) / sglang_bench / sglang_ledger_append action ran, the
server that was running still answers with the same pid, and the ledger is byte for byte as it
was. The restore tests break the launch at host level in a way no check can see (the simulator's
crash-at-load fault rendered into every launch script by sglang_launch_env_override) and require
the last good tier to serve again from the launch script its record names.
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
from pathlib import Path

import pytest
import yaml
from helpers.paths import LOCAL_INVENTORY
from helpers.playbooks import (
    SERVER_ACTIONS,
    actions_run,
    assert_untouched,
    experiment_lab_fixture,
    failures,
    final_failure,
    tail,
    task_results,
)
from helpers.processes import alive

LOCAL_VARS = yaml.safe_load(LOCAL_INVENTORY.read_text())["all"]["children"]["sglang_nodes"]["vars"]
PREFLIGHT = "Check that the whole experiment can run"


def sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


lab = experiment_lab_fixture("guard")


@pytest.fixture(scope="module")
def baseline(lab):
    lab.succeed(tier="baseline")
    return lab.records()[-1]


def sim_model(lab):
    return str(lab.work / "sim-model")


def refused(lab, **extravars):
    """Run an experiment that must be refused before the lock; returns (runner, message)."""
    server = lab.ensure_server()
    before = lab.ledger_bytes()
    runner = lab.run(**extravars)
    assert runner.status == "failed", tail(runner)
    ran = actions_run(runner)
    assert not ran & SERVER_ACTIONS, ran
    assert_untouched(lab, server, before, runner)
    return runner, final_failure(runner)


def test_the_record_names_who_set_each_flag(lab, baseline):
    sources = baseline["launch"]["flag_sources"]
    assert sources["--model"] == sources["--port"] == sources["--host"] == "host_override"
    assert sources["--tp-size"] == sources["--mem-fraction-static"] == "baseline"
    assert set(sources) == {tok for tok in baseline["launch"]["argv"] if tok.startswith("--")}
    kept = lab.work / "launch" / "archive" / f"baseline-{baseline['launch']['script_sha256'][:16]}"
    assert sha256(kept.with_suffix(".sh")) == baseline["launch"]["script_sha256"]
    assert json.loads(kept.with_suffix(".json").read_text())["flag_sources"] == sources


def test_a_concurrency_with_a_zero_is_refused(lab, baseline):
    _, message = refused(lab, tier="baseline", sglang_bench_concurrency=[1, 0])
    assert "sglang_bench_concurrency = [1, 0]" in message and "integers >= 1" in message


def test_a_concurrency_string_is_read_as_its_list(lab, baseline):
    server = lab.ensure_server()
    before = lab.ledger_bytes()
    runner = lab.run("validate.yml", tier="baseline", sglang_bench_concurrency="1,10")
    assert runner.status == "successful", tail(runner)
    facts = task_results(runner, "Resolve and check the effective benchmark settings")[0]["ansible_facts"]
    assert facts["sglang_bench_cfg"]["concurrency"] == [1, 10]
    assert task_results(runner, f"{PREFLIGHT} - baseline")[0]["problems"] == []
    assert_untouched(lab, server, before, runner)


def test_a_bad_setting_of_a_step_after_the_lock_is_refused_before_it(lab, baseline):
    """The ready-wait's own argument spec would refuse this only after the stop and the start; the
    validate step checks every later step's settings first (check_steps.yml)."""
    runner, message = refused(lab, tier="baseline", sglang_server_excerpt_lines_before="many")
    assert "sglang_server_excerpt_lines_before" in message and "int" in message
    failed = [task for task, _ in failures(runner)]
    assert failed == ["Check the settings of every step after the lock"], failed


def test_port_70000_through_the_flags_override_is_refused(lab, baseline):
    _, message = refused(lab, tier="baseline",
                         sglang_launch_flags_override={"--model": sim_model(lab), "--port": 70000})
    assert "[port] --port is 70000" in message and "1-65535" in message and "sglang_lab_port" in message


def test_a_port_held_by_a_foreign_listener_is_refused(lab, baseline):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        _, message = refused(lab, tier="baseline", sglang_lab_port=port)
    assert f"port {port} is held by pid {os.getpid()}" in message
    assert "not the server this host recorded (tier baseline" in message


def test_a_model_path_that_does_not_exist_is_refused(lab, baseline):
    missing = str(lab.root / "no-such-model")
    _, message = refused(lab, tier="baseline", sglang_launch_flags_override={"--model": missing})
    assert f"[model] --model is '{missing}'" in message and "writes only its own folder" in message
    assert not Path(missing).exists()  # the simulator setup no longer creates what --model names


def test_a_tier_flag_the_host_override_also_sets_is_refused(lab, baseline):
    _, message = refused(lab, tier="t04-ep8",
                         sglang_launch_flags_override={"--model": sim_model(lab), "--ep-size": 1})
    assert "[flag_ownership] --ep-size: tier 't04-ep8' sets 8" in message
    assert "sglang_launch_flags_override sets 1" in message


def test_the_patches_step_without_flashinfer_is_refused_before_the_stop(lab, baseline):
    # The H200 run's failure (recordings/0.5.17-h200-tp1-project-run): FlashInfer a stand-in, found after the stop.
    _, message = refused(lab, tier="baseline", sglang_experiment_apply_patches=True)
    assert "[flashinfer]" in message and "needs flashinfer-python installed in the ml-env" in message


# --------------------------------------------------------------------------- a named workload (data/workloads.yml)


def test_a_workload_name_not_in_the_catalogue_is_refused_with_the_names(lab, baseline):
    _, message = refused(lab, tier="baseline", workload="sharegpt")
    assert "workload 'sharegpt' is not in" in message and "data/workloads.yml" in message
    assert ("the workloads there: chat-corpus, generated-shared-prefix, long-context, multi-turn-shared-prefix, "
            "poisson-random, rate-sweep-random, seeds-random") in message


def test_a_workload_longer_than_the_launchs_context_length_is_refused_with_the_numbers(lab, baseline):
    """The simulator inventory's lengths (32 + 16) win over long-context's; the launch's
    --context-length of 40 cannot hold them."""
    _, message = refused(lab, tier="baseline", workload="long-context",
                         sglang_launch_flags_override={"--model": sim_model(lab), "--context-length": 40})
    assert "[benchmark] workload 'long-context' sends requests of 32 prompt + 16 output = 48 tokens" in message
    assert "--context-length (set by the host override - sglang_launch_flags_override) is 40" in message


def test_a_corpus_that_does_not_parse_is_refused_before_the_stop(lab, baseline):
    corpus = lab.root / "broken_sharegpt.json"
    corpus.write_text('[{"conversations": [{"from": "human", "value": "hi"}]')
    _, message = refused(lab, tier="baseline", workload="chat-corpus", sglang_bench_dataset_path=str(corpus))
    assert f"[benchmark] the corpus '{corpus}' does not parse as JSON" in message


# --------------------------------------------------------------------------- the restore


CRASHING_ENV = {**LOCAL_VARS["sglang_launch_env_override"], "SGLANG_SIM_FAULT": "crash_on_load"}


def test_a_bad_host_override_is_not_inherited_by_the_restore(lab, baseline):
    good = baseline["launch"]
    before = lab.ledger_bytes()
    runner = lab.run(tier="baseline", sglang_launch_env_override=CRASHING_ENV)
    assert runner.status == "failed", tail(runner)

    # The failure is recorded, with who set each flag of what failed.
    assert lab.ledger_bytes().startswith(before)
    record = lab.records()[-1]
    assert record["tier"] == "baseline" and record["status"] == "failed" and record["failure"]["step"] == "wait_ready"
    assert record["launch"]["env"]["SGLANG_SIM_FAULT"] == "crash_on_load" and record["launch"]["flag_sources"]
    # This run rendered baseline.sh with the fault; the restore started the bytes that worked.
    assert sha256(lab.work / "launch" / "baseline.sh") != good["script_sha256"]
    server = lab.server()
    assert server["tier"] == "baseline" and alive(server["pid"]) and lab.healthy()
    assert server["script_sha256"] == good["script_sha256"] == sha256(server["script"])
    assert server["script"] == str(lab.work / "launch" / "archive" / f"baseline-{good['script_sha256'][:16]}.sh")
    said = task_results(runner, "Say how the tier is restored - baseline")[0]["msg"]
    assert f"from the launch script of record {baseline['record_id']}" in said
    assert "tier baseline runs again" in final_failure(runner)


def test_the_restore_refuses_a_script_that_is_not_the_one_that_worked(lab, baseline):
    good = baseline["launch"]
    kept = lab.work / "launch" / "archive" / f"baseline-{good['script_sha256'][:16]}.sh"
    original = kept.read_bytes()
    kept.write_bytes(original + b"# changed by hand\n")
    try:
        runner = lab.run(tier="baseline", sglang_launch_env_override=CRASHING_ENV)
        assert runner.status == "failed", tail(runner)
        refusal = [res for task, res in failures(runner)
                   if task == "Refuse a launch script that is not the one that worked"]
        assert refusal and good["script_sha256"] in refusal[0]["msg"], tail(runner)
        assert "restore: tier baseline FAILED" in final_failure(runner)
        # the failed start, not the restore
        assert actions_run(runner) >= {"sglang_server:stopped", "sglang_server:started"}
        assert not lab.healthy()
    finally:
        kept.write_bytes(original)



def test_a_named_workload_runs_through_bench_serving_and_is_recorded(lab, baseline):
    """-e workload=generated-shared-prefix: bench_serving's own dataset, in whole groups (the
    override dict's 2 groups x 4 prompts), recorded with the workload's name. Last in the module:
    its record would be the restore's last known-good one."""
    before = len(lab.records())
    lab.succeed(tier="baseline", workload="generated-shared-prefix", sglang_bench_concurrency="4",
                sglang_bench_workload_override={"gsp_num_groups": 2})
    record = lab.records()[-1]
    assert len(lab.records()) == before + 1 and record["status"] == "success", record.get("failure")
    workload = record["workload"]
    assert (workload["name"], workload["dataset_name"], workload["gsp_num_groups"], workload["gsp_system_prompt_len"]) \
        == ("generated-shared-prefix", "generated-shared-prefix", 2, 2048)
    (point,) = record["points"]
    # The planned point is 2 groups x 4 prompts. A first run shorter than the inventory's window is
    # run once more, re-sized in whole groups (sized.first keeps the first run): how often that
    # happens depends on the machine's speed, so either way the planned 8 are the first run.
    first = (point.get("sized") or {}).get("first", {}).get("num_prompts", point["num_prompts"])
    assert first == 8 and point["num_prompts"] % 2 == 0, point
    assert (point["completed"], point["status"]) == (point["num_prompts"], "ok"), point
    command = point["command"]
    assert command[command.index("--gsp-prompts-per-group") + 1] == "4"
    assert command[command.index("--dataset-name") + 1] == "generated-shared-prefix"
