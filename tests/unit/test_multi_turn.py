"""Multi-turn conversations (issue 27 item 1): the catalogue's multi-turn-shared-prefix through
bench_serving's generated-shared-prefix dataset with --gsp-num-turns, sent through its chat backend
(SGLang 0.5.17's multi-turn code asserts one), and counted as bench_serving counts them: every turn
is a request. Run against the real catalogue, the real planning and point code, the real client's
sizing, and a real bench_serving 0.5.17 result line read as a multi-turn point.
"""

from __future__ import annotations

import json
import math

import pytest
import sglang_bench_client as client
import sglang_bench_points as bp
import sglang_bench_settings as settings
import sglang_preflight as pf
import sglang_workload_catalogue as catalogue
import yaml
from helpers.paths import REPO
from helpers.recordings import real_result
from sglang_workload_options import BACKEND, MULTI_TURN_BACKEND, workload_problems

DATA = yaml.safe_load((REPO / "data" / "benchmark.yml").read_text())
WORKLOADS = catalogue.check_catalogue(
    yaml.safe_load((REPO / "data" / "workloads.yml").read_text()),
    json.loads((REPO / "data" / "workloads.schema.json").read_text()),
    DATA,
)
NAME = "multi-turn-shared-prefix"


def resolve(name=NAME, overrides=None):
    return settings.resolve_settings(DATA, overrides or {}, "/x/benchmark.yml", None, named=WORKLOADS[name])


def argv_for(cfg, num_prompts):
    return bp.build_client_argv([], host="h", port=1, concurrency=4, num_prompts=num_prompts, output_file="o",
                                tokenizer="t", **bp.client_settings(cfg))


def flag(argv, name):
    return argv[argv.index(name) + 1]


def test_the_catalogue_entry_sends_conversations_through_the_chat_backend():
    cfg = resolve()
    turns = cfg["gsp_num_turns"]
    assert turns > 1 and cfg["dataset_name"] == "generated-shared-prefix"
    assert cfg["backend"] == MULTI_TURN_BACKEND  # the record says which backend sent it
    argv = argv_for(cfg, cfg["gsp_num_groups"] * 3)
    assert flag(argv, "--backend") == MULTI_TURN_BACKEND and flag(argv, "--gsp-num-turns") == str(turns)
    assert flag(argv, "--gsp-prompts-per-group") == "3"
    # Single-turn workloads keep bench_serving's native backend and send no --gsp-num-turns.
    single = resolve("generated-shared-prefix")
    argv = argv_for(single, single["gsp_num_groups"])
    assert single["backend"] == BACKEND and flag(argv, "--backend") == BACKEND and "--gsp-num-turns" not in argv


def test_multi_turn_without_the_chat_backend_is_refused():
    cfg = dict(resolve(), backend=BACKEND)
    with pytest.raises(ValueError, match="needs bench_serving's chat backend sglang-oai-chat"):
        argv_for(cfg, cfg["gsp_num_groups"])


@pytest.mark.parametrize(("workload", "words"), [
    ({"dataset_name": "random", "gsp_num_turns": 3}, "is only read by dataset_name generated-shared-prefix"),
    ({"dataset_name": "generated-shared-prefix", "gsp_num_turns": 0}, "must be an integer >= 1"),
])
def test_bad_turns_are_refused(workload, words):
    problems = workload_problems(workload)
    assert any(name == "gsp_num_turns" and words in rule for name, rule in problems), problems


def test_turns_are_part_of_the_workloads_identity():
    import sglang_compare as compare

    one, four = resolve("generated-shared-prefix"), resolve()
    assert compare.workload_key({"workload": one}) != compare.workload_key({"workload": four})


def test_the_last_turn_must_fit_the_context_before_the_stop():
    cfg = resolve()
    prompt, output = pf.longest_request(cfg)
    turns, question = cfg["gsp_num_turns"], cfg["input_len"]
    # Turn T carries the system prompt, all T questions and the T - 1 answers before it.
    assert prompt == cfg["gsp_system_prompt_len"] + turns * question + (turns - 1) * output
    launch = {"flags": {"--context-length": prompt + output}, "flag_sources": {"--context-length": "baseline"}}
    found = pf.context_problems(cfg, launch)
    assert len(found) == 1 and f"{prompt} prompt + {output} output" in found[0]["message"]
    assert pf.context_problems(cfg, {"flags": {"--context-length": prompt + output + 1}}) == []



def test_a_point_completes_when_every_turn_of_every_conversation_did(tmp_path):
    result = real_result()  # bench_serving counted 32 requests
    completed = result["completed"]
    output = tmp_path / "c16_r0.jsonl"
    output.write_text(json.dumps(result) + "\n")
    cfg = resolve()
    turns = cfg["gsp_num_turns"]
    conversations = completed // turns
    spec = {"output_file": str(output), "concurrency": 16, "repeat": 0, "num_prompts": conversations,
            "argv": ["--gsp-num-turns", str(turns)]}
    point = bp.evaluate_point(spec, 0, 0, False, "")
    assert point["status"] == "ok" and point["turns"] == turns and point["requests"] == completed
    assert point["num_prompts"] == conversations and point["failed"] == 0
    # The same line for as many conversations as requests: most of the turns never came.
    point = bp.evaluate_point(dict(spec, num_prompts=completed), 0, 0, False, "")
    assert point["status"] == "failed" and point["failure"]["class"] == "incomplete_point"
    assert f"completed {completed} of {completed * turns} requests" in point["failure"]["message"]


def test_the_client_sizes_a_short_conversation_point_in_conversations():
    cfg = resolve()
    turns, groups = cfg["gsp_num_turns"], cfg["gsp_num_groups"]
    argv = argv_for(cfg, groups * 3)
    point = {"num_prompts": groups * 3, "argv": argv,
             "window": {"min_requests": 20, "min_duration_s": 5, "max_prompts": 100000}}
    requests = groups * 3 * turns
    wanted = client.resize(point, {"completed": requests, "duration": 0.5})
    # 1.2 x 5 s at the measured rate in requests, as conversations of `turns`, in whole groups.
    need = -(-math.ceil(1.2 * 5 * requests / 0.5) // turns)
    assert wanted == -(-need // groups) * groups
    # Only every turn of every conversation is complete: the conversations alone are not.
    assert client.resize(point, {"completed": groups * 3, "duration": 0.5}) is None
