"""SGLang's parser verdict kept by content (module_utils/sglang_parser_check.py) and the interrupted class.

The parser check runs real subprocesses: this interpreter answers the fingerprint through
importlib.metadata (the venv has the sglang wheel installed for the bench client), and a stand-in
parser script, put in place of PARSER_CODE, counts its runs in a file and refuses one flag, so that
a second check of the same argv is seen not to run it.
"""

from __future__ import annotations

import sys

import pytest
import sglang_campaign
import sglang_failure
import sglang_ledger
import sglang_parser_check as pc

STAND_IN = r"""
import sys
with open(sys.argv[1], "a") as handle:
    handle.write("ran\n")
if "--bad" in sys.argv:
    print("launch_server.py: error: unrecognized arguments: --bad", file=sys.stderr)
    sys.exit(2)
print("SGLang accepted the argv")
"""


@pytest.fixture()
def parser(monkeypatch, tmp_path):
    monkeypatch.setattr(pc, "PARSER_CODE", STAND_IN)
    return tmp_path / "runs.txt"


def runs(counter):
    return len(counter.read_text().splitlines()) if counter.exists() else 0


def test_an_acceptance_is_kept_and_reused(parser, tmp_path):
    argv = [str(parser), "--tp-size", "8"]
    first = pc.check(sys.executable, argv, {"A": "1"}, str(tmp_path / "cache"), 60)
    second = pc.check(sys.executable, argv, {"A": "1"}, str(tmp_path / "cache"), 60)
    assert first["accepted"] and not first["cached"]
    assert second["accepted"] and second["cached"] and second["key"] == first["key"]
    assert runs(parser) == 1
    assert first["sglang"]["version"] and first["sglang"]["server_args_sha256"]


def test_a_changed_argv_or_environment_runs_the_parser_again(parser, tmp_path):
    cache = str(tmp_path / "cache")
    pc.check(sys.executable, [str(parser), "--tp-size", "8"], {}, cache, 60)
    pc.check(sys.executable, [str(parser), "--tp-size", "4"], {}, cache, 60)
    pc.check(sys.executable, [str(parser), "--tp-size", "4"], {"SGLANG_X": "1"}, cache, 60)
    assert runs(parser) == 3


def test_a_changed_install_is_a_new_key():
    found = {"version": "0.5.17", "server_args_sha256": "a" * 64}
    other = dict(found, server_args_sha256="b" * 64)
    assert pc.cache_key("py", ["--x"], {}, found, None) != pc.cache_key("py", ["--x"], {}, other, None)
    assert pc.cache_key("py", ["--x"], {}, found, None) != pc.cache_key("py", ["--x"], {}, found, "c" * 64)


def test_a_refusal_is_never_kept(parser, tmp_path):
    cache = str(tmp_path / "cache")
    for _ in range(2):
        verdict = pc.check(sys.executable, [str(parser), "--bad"], {}, cache, 60)
        assert not verdict["accepted"] and not verdict["cached"]
        assert "unrecognized arguments: --bad" in "\n".join(verdict["output"])
    assert runs(parser) == 2


def test_the_model_config_is_read_when_local(tmp_path):
    (tmp_path / "config.json").write_text('{"architectures": ["LlamaForCausalLM"]}')
    assert pc.model_config_sha256(["--model", str(tmp_path)])
    assert pc.model_config_sha256(["--model-path", "org/model-on-the-hub"]) is None


def test_no_sglang_is_no_verdict(tmp_path):
    with pytest.raises(RuntimeError):
        pc.check(str(tmp_path / "no-such-python"), ["--x"], {}, str(tmp_path / "cache"), 60)


def test_an_interrupted_task_gets_its_class_before_a_crash():
    result = sglang_failure.interrupted_result({"msg": "MODULE FAILURE"}, "SIGTERM")
    assert result["failure_class"] == "interrupted" and "SIGTERM" in result["msg"]
    # Not interrupted: untouched.
    assert sglang_failure.interrupted_result({"msg": "x"}, "") == {"msg": "x"}
    failure = sglang_failure.decide_failure(
        task={"name": "Fail with the classified crash", "tags": ["sglang_experiment_wait_ready"]},
        result=result, crash={"crash_class": "wait_failed"})
    assert failure["class"] == "interrupted" and failure["step"] == "wait_ready"


def test_an_interrupted_record_has_its_own_status_and_is_not_final():
    record = sglang_ledger.build_record(
        record_id="r", run_id="run", host="h", tier="t", workload={}, points=[],
        failed_task={"name": "x", "tags": ["sglang_experiment_benchmark"]},
        failed_result={"failure_class": "interrupted", "failure_step": "benchmark", "msg": "interrupted"})
    assert record["status"] == "interrupted"
    assert sglang_ledger.validate_record(record) == []
    assert not sglang_campaign.is_final(record)
    assert sglang_ledger.validate_record(dict(record, failure={"class": "oom"}))
    assert "interrupted" in sglang_failure.restore_line(True, None, "SIGINT")


# --------------------------------------------------------------------------- the interrupt callback


def _interrupt_callback():
    import importlib.util

    from helpers.paths import REPO

    spec = importlib.util.spec_from_file_location("sglang_interrupt_for_tests",
                                                  REPO / "plugins" / "callback" / "sglang_interrupt.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fake_proc(root, pid, argv):
    folder = root / str(pid)
    folder.mkdir(parents=True)
    (folder / "cmdline").write_bytes("\0".join(argv).encode() + b"\0")


def test_the_first_interrupt_finds_the_standby_clients_leashed_to_this_controller(tmp_path):
    import sglang_bench_points

    callback = _interrupt_callback()
    assert callback.STANDBY_GO == sglang_bench_points.STANDBY_GO
    proc, waiting, taken = tmp_path / "proc", tmp_path / "waiting", tmp_path / "taken"
    waiting.mkdir()
    taken.mkdir()
    (taken / sglang_bench_points.STANDBY_GO).write_text("{}")
    client = ["python", "tools/sglang_bench_client.py", "--standby"]
    _fake_proc(proc, 11, [*client, str(waiting), "--server-pid", "7", "--leash", "500"])
    _fake_proc(proc, 12, [*client, str(waiting), "--leash", "501"])           # another controller's
    _fake_proc(proc, 13, [*client, str(taken), "--leash", "500"])             # the measure step owns it
    _fake_proc(proc, 14, ["python", "tools/sglang_bench_client.py", "--leash", "500"])  # not in standby
    _fake_proc(proc, 15, ["sleep", "500"])
    (proc / "self").mkdir()
    assert callback.leashed_standby(500, proc=str(proc)) == [11]
    assert callback.leashed_standby(502, proc=str(proc)) == []
