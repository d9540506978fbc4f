"""The effective benchmark settings (module_utils/sglang_bench_settings.py): data/benchmark.yml + overrides.

Run against the real data/benchmark.yml; every bad value is refused with the variable that set it.
"""

from __future__ import annotations

import json

import pytest
import sglang_bench_settings as settings
import yaml
from helpers.paths import REPO

DATA = yaml.safe_load((REPO / "data" / "benchmark.yml").read_text())


def test_the_file_alone():
    cfg = settings.resolve_settings(DATA, {}, "/x/benchmark.yml")
    assert cfg["concurrency"] == DATA["concurrency"] == [1, 10, 256, 1024]
    assert cfg["num_prompts"] == DATA["num_prompts"] and cfg["repeats"] == DATA["repeats"]
    assert cfg["request_rate"] == "inf" and cfg["confidence"] == float(DATA["confidence"])
    assert {k: v for k, v in cfg["warmup"].items() if k != "levels"} == DATA["warmup"]
    assert cfg["settings_file"] == "/x/benchmark.yml"


def test_a_measured_warm_up_has_one_level_per_measured_concurrency():
    cfg = settings.resolve_settings({**DATA, "warmup": {**DATA["warmup"], "concurrency": "measured"}})
    assert cfg["warmup"]["concurrency"] == "measured" and cfg["warmup"]["levels"] == [1, 10, 256, 1024]
    cfg = settings.resolve_settings(DATA, {"sglang_bench_concurrency": "2,4", "sglang_bench_warmup_concurrency": "3"})
    assert cfg["warmup"]["concurrency"] == 3 and cfg["warmup"]["levels"] == [3]


def test_a_workload_wins_over_the_inventory_and_names_itself_when_bad():
    cfg = settings.resolve_settings(
        DATA, {"sglang_bench_input_len": 32, "sglang_bench_concurrency": [1]}, workload={"concurrency": [2, 4]}
    )
    assert cfg["concurrency"] == [2, 4] and cfg["input_len"] == 32
    with pytest.raises(settings.SettingsError) as err:
        settings.resolve_settings(DATA, {}, workload={"input_len": 0, "concurency": [1]})
    assert any(p.startswith("workload setting input_len = 0") for p in err.value.problems)
    assert any("'concurency' is not a benchmark setting" in p for p in err.value.problems)


def test_overrides_win_and_null_means_the_file():
    cfg = settings.resolve_settings(
        DATA, {"sglang_bench_input_len": 32, "sglang_bench_output_len": None, "sglang_bench_warmup_requests": 4}
    )
    assert cfg["input_len"] == 32 and cfg["output_len"] == DATA["output_len"]
    assert cfg["warmup"]["requests"] == 4 and cfg["warmup"]["concurrency"] == DATA["warmup"]["concurrency"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [("1,10", [1, 10]), ("1, 10 256", [1, 10, 256]), (" 4 ", [4]), (["2", 8], [2, 8]), ([1], [1])],
)
def test_concurrency_coercion(value, expected):
    assert settings.resolve_settings(DATA, {"sglang_bench_concurrency": value})["concurrency"] == expected


@pytest.mark.parametrize(
    ("var", "value", "words"),
    [
        ("sglang_bench_concurrency", [1, 0, 10], "non-empty list of integers >= 1"),
        ("sglang_bench_concurrency", [], "non-empty list"),
        ("sglang_bench_concurrency", "1;10", "non-empty list"),
        ("sglang_bench_concurrency", [1.5], "non-empty list"),
        ("sglang_bench_input_len", 0, "integer >= 1"),
        ("sglang_bench_output_len", "many", "integer >= 1"),
        ("sglang_bench_random_range_ratio", 1.5, "within [0, 1]"),
        ("sglang_bench_num_prompts_floor", 0, "integer >= 1"),
        ("sglang_bench_request_rate", "-2", "inf or a positive number"),
        ("sglang_bench_repeats", 0, "integer >= 1"),
        ("sglang_bench_warmup_concurrency", True, "integer >= 1 or 'measured'"),
        ("sglang_bench_confidence", 1, "between 0 and 1"),
        ("sglang_bench_confidence", "high", "between 0 and 1"),
        ("sglang_bench_dataset_name", "mooncake", "random, random-ids, sharegpt, generated-shared-prefix"),
        ("sglang_bench_seed", "x", "integer"),
    ],
)
def test_bad_values_name_the_variable(var, value, words):
    with pytest.raises(settings.SettingsError) as err:
        settings.resolve_settings(DATA, {var: value}, "data/benchmark.yml")
    (problem,) = err.value.problems
    assert problem.startswith(f"{var} = {value!r}: ") and words in problem and "data/benchmark.yml" in problem


def test_every_problem_is_reported_and_the_file_is_named_when_it_is_wrong():
    data = {**DATA, "warmup": {**DATA["warmup"], "timeout_s": 0}, "repeats": 0}
    with pytest.raises(settings.SettingsError) as err:
        settings.resolve_settings(data, {"sglang_bench_input_len": -1})
    assert len(err.value.problems) == 3
    assert any(p.startswith("repeats in the settings file = 0") for p in err.value.problems)
    assert any(p.startswith("warmup.timeout_s in the settings file = 0") for p in err.value.problems)


def test_the_workload_override_dict_sits_below_the_per_setting_variables():
    """sglang_bench_workload_override: one dict keyed by setting name, for every setting; a
    per-setting variable wins over it, a campaign workload over both."""
    dict_only = {"sglang_bench_workload_override": {"input_len": 64, "warmup.requests": 7, "seed": "3"}}
    cfg = settings.resolve_settings(DATA, dict_only)
    assert (cfg["input_len"], cfg["warmup"]["requests"], cfg["seed"]) == (64, 7, 3)
    cfg = settings.resolve_settings(DATA, {**dict_only, "sglang_bench_input_len": 32}, workload={"seed": 9})
    assert (cfg["input_len"], cfg["seed"]) == (32, 9)
    with pytest.raises(settings.SettingsError) as err:
        settings.resolve_settings(DATA, {"sglang_bench_workload_override": {"input_len": 0, "inputlen": 1}})
    assert any(p.startswith("sglang_bench_workload_override['input_len'] = 0") for p in err.value.problems)
    assert any("sglang_bench_workload_override['inputlen'] is not a benchmark setting" in p
               for p in err.value.problems)
    with pytest.raises(settings.SettingsError, match="must be a dict keyed by setting name"):
        settings.resolve_settings(DATA, {"sglang_bench_workload_override": "input_len=1"})


def test_extra_request_body_is_a_setting_of_its_own_with_no_role_variable():
    """extra_request_body (bench_serving's --extra-request-body): from the file, the override dict
    (a JSON string from -e) or a campaign workload; a dict, refused when it is not an object or its
    sampling_params would drop bench_serving's max_new_tokens; at its default ({}) left out."""
    assert "extra_request_body" in settings.GENERIC_SETTINGS and DATA["extra_request_body"] == {}
    assert "extra_request_body" not in settings.resolve_settings(DATA, {})
    body = {"sampling_params": {"temperature": 0.7, "max_new_tokens": 1024}}
    from_e = {"sglang_bench_workload_override": {"extra_request_body": json.dumps(body)}}
    assert settings.resolve_settings(DATA, from_e)["extra_request_body"] == body
    assert settings.resolve_settings({**DATA, "extra_request_body": {"return_logprob": True}}, from_e,
                                     workload={"extra_request_body": {"x": 1}})["extra_request_body"] == {"x": 1}
    for bad, words in (
        ("temperature=0.7", "= 'temperature=0.7': must be a dict"),
        ([1], "must be a dict"),
        ({"sampling_params": {"temperature": 0.7}}, "sampling_params without max_new_tokens"),
    ):
        with pytest.raises(settings.SettingsError) as err:
            settings.resolve_settings(DATA, {"sglang_bench_workload_override": {"extra_request_body": bad}})
        (problem,) = err.value.problems
        assert problem.startswith("sglang_bench_workload_override['extra_request_body']") and words in problem


def test_every_workload_setting_is_resolved_and_every_resolved_key_is_a_setting():
    """The resolver's settings are the workload spec's (sglang_workload_options.WORKLOAD_OPTIONS):
    what it returns is exactly the object the modules take whole."""
    from sglang_workload_options import WORKLOAD_OPTIONS, workload_problems

    cfg = settings.resolve_settings(DATA, {}, "/x/benchmark.yml")
    # A generic setting at its default is left out (it changes no campaign cell key).
    # name: only a workload resolved from the catalogue carries it (tests/unit/test_workload_catalogue.py).
    assert set(cfg) <= set(WORKLOAD_OPTIONS)
    assert set(WORKLOAD_OPTIONS) - set(cfg) <= set(settings.GENERIC_SETTINGS) | {"name"}
    assert {name.split(".")[0] for name in settings.SETTING_NAMES} | {"settings_file", "name", "client", "backend"} \
        == set(WORKLOAD_OPTIONS)
    assert workload_problems(cfg) == []
