"""The workload catalogue (data/workloads.yml, data/workloads.schema.json,
module_utils/sglang_workload_catalogue.py) and the named workload in the resolver
(module_utils/sglang_bench_settings.py): run against the real files.

Precedence, highest first: a campaign workload, the sglang_bench_<setting> variables, the override
dict, the named workload, data/benchmark.yml.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

import pytest
import sglang_bench_points as bp
import sglang_bench_settings as settings
import sglang_workload_catalogue as catalogue
import yaml
from helpers.paths import REPO

DATA = yaml.safe_load((REPO / "data" / "benchmark.yml").read_text())
RAW = yaml.safe_load((REPO / "data" / "workloads.yml").read_text())
SCHEMA = json.loads((REPO / "data" / "workloads.schema.json").read_text())
WORKLOADS = catalogue.check_catalogue(RAW, SCHEMA, DATA)


def resolve(name, overrides=None, workload=None, data=DATA):
    return settings.resolve_settings(data, overrides or {}, "/x/benchmark.yml", workload, named=WORKLOADS[name])


def test_the_catalogue_holds_the_first_workloads_each_with_its_source():
    assert {"seeds-random", "long-context", "generated-shared-prefix", "chat-corpus"} <= set(WORKLOADS)
    for name, workload in WORKLOADS.items():
        assert workload["name"] == name and workload["description"].strip() and workload["source"].strip()
        assert set(workload["settings"]) <= set(settings.SETTING_NAMES)


def test_seeds_random_is_data_benchmark_yml_as_it_is():
    """Naming seeds-random changes nothing: the same object, with the name."""
    cfg = resolve("seeds-random")
    assert cfg.pop("name") == "seeds-random"
    assert cfg == settings.resolve_settings(DATA, {}, "/x/benchmark.yml")
    assert cfg["concurrency"] == [1, 10, 256, 1024] and cfg["dataset_name"] == "random"


def test_each_workload_resolves_to_its_own_dataset():
    long = resolve("long-context")
    assert (long["dataset_name"], long["input_len"], long["output_len"]) == ("random", 7680, 512)
    gsp = resolve("generated-shared-prefix")
    assert gsp["dataset_name"] == "generated-shared-prefix"
    assert (gsp["gsp_num_groups"], gsp["gsp_system_prompt_len"], gsp["input_len"]) == (8, 2048, 128)
    chat = resolve("chat-corpus", {"sglang_bench_dataset_path": "/data/sharegpt.json"})
    assert (chat["dataset_name"], chat["dataset_path"], chat["output_len"]) == ("sharegpt", "/data/sharegpt.json", 256)


def test_precedence_variable_over_dict_over_named_over_file():
    dict_only = {settings.WORKLOAD_OVERRIDE_VAR: {"input_len": 4000, "output_len": 100}}
    assert resolve("long-context")["input_len"] == 7680  # named over the file's 1024
    cfg = resolve("long-context", dict_only)
    assert (cfg["input_len"], cfg["output_len"]) == (4000, 100)  # the dict over named
    cfg = resolve("long-context", {**dict_only, "sglang_bench_input_len": "2000"})
    assert (cfg["input_len"], cfg["output_len"]) == (2000, 100)  # the variable over the dict
    cfg = resolve("long-context", {"sglang_bench_input_len": 2000}, workload={"input_len": 64})
    assert cfg["input_len"] == 64  # a campaign workload over everything
    # A generic setting: the dict over the named workload.
    assert resolve("generated-shared-prefix", {settings.WORKLOAD_OVERRIDE_VAR: {"gsp_num_groups": 4}})[
        "gsp_num_groups"] == 4


def test_a_variable_naming_another_dataset_is_refused_not_obeyed():
    with pytest.raises(settings.SettingsError) as err:
        resolve("generated-shared-prefix", {"sglang_bench_dataset_name": "random"})
    assert any("sends bench_serving's generated-shared-prefix dataset, but sglang_bench_dataset_name = 'random'"
               in problem for problem in err.value.problems)
    # The same dataset named again is no conflict.
    assert resolve("long-context", {"sglang_bench_dataset_name": "random"})["dataset_name"] == "random"


def test_a_workload_that_needs_a_corpus_is_refused_without_one():
    with pytest.raises(settings.SettingsError) as err:
        resolve("chat-corpus")
    assert err.value.problems == [
        "workload 'chat-corpus' needs dataset_path: give it with sglang_bench_dataset_path "
        "(-e sglang_bench_dataset_path=...)"
    ]


def test_an_unknown_name_is_refused_with_the_names():
    with pytest.raises(catalogue.CatalogueError) as err:
        catalogue.entry(WORKLOADS, "sharegpt")
    assert "workload 'sharegpt' is not in data/workloads.yml; the workloads there: chat-corpus, " in str(err.value)
    assert catalogue.entry(WORKLOADS, " long-context ")["name"] == "long-context"


@pytest.mark.parametrize(("change", "words"), [
    (lambda d: d["workloads"]["long-context"].pop("source"), "'source' is a required property"),
    (lambda d: d["workloads"]["long-context"].update(colour="red"), "Additional properties are not allowed"),
    (lambda d: d["workloads"].update({"Bad Name": d["workloads"]["long-context"]}), "does not match"),
    (lambda d: d["workloads"]["long-context"].update(settings={}), "should be non-empty"),
    (lambda d: d.update(workloads={}), "should be non-empty"),
])
def test_the_schema_refuses_bad_fields(change, words):
    data = copy.deepcopy(RAW)
    change(data)
    with pytest.raises(catalogue.CatalogueError) as err:
        catalogue.check_catalogue(data, SCHEMA, DATA)
    assert words in str(err.value), err.value.problems


@pytest.mark.parametrize(("settings_", "words"), [
    ({"input_length": 10}, "workload 'w' setting 'input_length' is not a benchmark setting"),
    ({"input_len": 0}, "workload 'w' setting input_len = 0: must be an integer >= 1"),
    ({"dataset_name": "mooncake"}, "workload 'w' setting dataset_name = 'mooncake': must be one of"),
    ({"dataset_name": "generated-shared-prefix", "gsp_num_groups": 8},
     "gsp_system_prompt_len = None: must be set for dataset_name generated-shared-prefix"),
    ({"gsp_num_groups": 8}, "gsp_num_groups = 8: is only read by dataset_name generated-shared-prefix, not 'random'"),
    ({"extra_request_body": {"sampling_params": {"temperature": 1}}}, "without max_new_tokens"),
    ({"goodput_slo": {"ttft_ms": -5}}, "ttft_ms = -5: must be a number of milliseconds > 0"),
    ({"goodput_slo": {"attainment": 0.9}}, "states no limit"),
])
def test_a_bad_entry_is_refused_by_the_workloads_own_check(settings_, words):
    """Every entry is resolved over data/benchmark.yml when the catalogue is read: the workload's
    own resolver and workload_problems, naming the workload."""
    data = {"workloads": {"w": {"description": "d", "source": "s", "settings": settings_}}}
    with pytest.raises(catalogue.CatalogueError) as err:
        catalogue.check_catalogue(data, SCHEMA, DATA)
    assert any(problem.startswith("data/workloads.yml: workload 'w'") and words in problem
               for problem in err.value.problems), err.value.problems


def test_the_filter_reads_the_file_and_refuses_a_bad_name_with_the_list():
    sys.path.insert(0, str(REPO / "plugins" / "filter"))
    import sglang_lab
    from ansible.errors import AnsibleFilterError

    path = str(REPO / "data" / "workloads.yml")
    cfg = sglang_lab.sglang_bench_settings(DATA, {"sglang_bench_workload_name": "long-context"}, "f", {}, path)
    assert (cfg["name"], cfg["input_len"]) == ("long-context", 7680)
    assert "name" not in sglang_lab.sglang_bench_settings(DATA, {"sglang_bench_workload_name": None}, "f", {}, path)
    with pytest.raises(AnsibleFilterError, match="the workloads there: chat-corpus, generated-shared-prefix"):
        sglang_lab.sglang_bench_settings(DATA, {"sglang_bench_workload_name": "nope"}, "f", {}, path)


# ------------------------------------------------------------------ bench_serving's arguments


def argv_of(cfg, num_prompts):
    point = dict(host="h", port=1, concurrency=4, num_prompts=num_prompts, output_file="o", tokenizer="t")
    argv = bp.build_client_argv([], **point, **bp.client_settings(cfg))
    return dict(zip(argv, argv[1:], strict=False)), argv


def test_generated_shared_prefix_reaches_bench_serving_in_whole_groups():
    cfg = resolve("generated-shared-prefix")
    specs = bp.plan_points(cfg["concurrency"], 1, "/o", multiplier=2, floor=10, min_requests=20,
                           groups=cfg["gsp_num_groups"])
    assert [s["num_prompts"] for s in specs] == [24, 24, 512, 2048]  # max(2c, 10, 20) rounded up to 8s
    pairs, _argv = argv_of(cfg, 24)
    assert pairs["--dataset-name"] == "generated-shared-prefix"
    assert (pairs["--gsp-num-groups"], pairs["--gsp-prompts-per-group"], pairs["--gsp-system-prompt-len"],
            pairs["--gsp-question-len"], pairs["--gsp-output-len"], pairs["--gsp-range-ratio"]) \
        == ("8", "3", "2048", "128", "256", "1.0")
    with pytest.raises(ValueError, match="not a multiple of gsp_num_groups 8"):
        argv_of(cfg, 20)
    assert bp.shared_prefix_prompts(20, None) == 20 and bp.shared_prefix_prompts(17, 8) == 24


def test_chat_corpus_sends_the_corpus_with_a_fixed_output_length():
    pairs, argv = argv_of(resolve("chat-corpus", {"sglang_bench_dataset_path": "/c.json"}), 16)
    assert (pairs["--dataset-name"], pairs["--dataset-path"], pairs["--sharegpt-output-len"]) \
        == ("sharegpt", "/c.json", "256")
    assert not any(a.startswith("--gsp-") for a in argv)
    _pairs, argv = argv_of(resolve("seeds-random"), 16)
    assert not any(a.startswith(("--gsp-", "--sharegpt-")) for a in argv)


def test_chat_corpus_counts_goodput_against_its_stated_limits():
    cfg = resolve("chat-corpus", {"sglang_bench_dataset_path": "/c.json"})
    stated = RAW["workloads"]["chat-corpus"]["settings"]["goodput_slo"]
    assert cfg["goodput_slo"] == stated
    assert bp.point_extras(cfg, "h", 1)["goodput_slo"] == stated
    # The workloads that state none leave their points without goodput, as before.
    assert "goodput_slo" not in resolve("seeds-random") and "goodput_slo" not in bp.point_extras(DATA, "h", 1)


def test_a_resized_shared_prefix_point_keeps_whole_groups():
    """The client's re-run of a point short of its window (tools/sglang_bench_client.py) rounds to
    whole groups and sets --gsp-prompts-per-group with --num-prompts."""
    sys.path.insert(0, str(REPO / "tools"))
    import sglang_bench_client as client

    _pairs, argv = argv_of(resolve("generated-shared-prefix"), 24)
    point = {"num_prompts": 24, "argv": argv, "window": {"min_requests": 20, "min_duration_s": 5, "max_prompts": 1000}}
    wanted = client.resize(point, {"completed": 24, "duration": 0.5})  # 48 req/s: 288 for 1.2 x 5 s
    assert wanted == 288 and wanted % 8 == 0
    pairs = dict(zip(new := client.with_prompts(argv, 296), new[1:], strict=False))
    assert (pairs["--num-prompts"], pairs["--gsp-prompts-per-group"]) == ("296", "37")


def _parser_flags(source):
    import ast

    return {
        arg.value
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "add_argument"
        for arg in node.args
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("--")
    }


def test_every_workloads_arguments_exist_in_the_installed_bench_serving():
    """The flags each catalogue workload sends are bench_serving's own (the pinned release in the venv)."""
    import importlib.util

    root = Path(list(importlib.util.find_spec("sglang").submodule_search_locations)[0])
    known = _parser_flags((root / "bench_serving.py").read_text())
    for name in WORKLOADS:
        cfg = resolve(name, {"sglang_bench_dataset_path": "/c.json"})
        _pairs, argv = argv_of(cfg, 24 if cfg.get("gsp_num_groups") else 16)
        assert {a for a in argv if a.startswith("--")} <= known, (name, {a for a in argv if a.startswith("--")} - known)
