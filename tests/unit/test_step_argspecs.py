"""The experiment's check of every later step's settings before the lock (module_utils/sglang_argspecs.py,
filter sglang_step_argument_spec, roles/sglang_experiment/tasks/check_steps.yml)."""

from __future__ import annotations

import pytest
import sglang_argspecs as sa
import yaml
from ansible.errors import AnsibleFilterError
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator
from helpers.paths import REPO

CHECK_STEPS = REPO / "roles" / "sglang_experiment" / "tasks" / "check_steps.yml"


def _filter():
    from importlib import util

    spec = util.spec_from_file_location("sglang_lab_filter_for_tests", REPO / "plugins" / "filter" / "sglang_lab.py")
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.sglang_step_argument_spec


def check_steps_task():
    (task,) = yaml.safe_load(CHECK_STEPS.read_text())
    return task


SPECS = {
    "a": {"stop": {"options": {"x": {"type": "int", "description": "one"}, "y": {"type": "str"}}}},
    "b": {"start": {"options": {"x": {"type": "int", "description": "the same rule, other words"},
                                "z": {"type": "bool", "default": False}}}},
}


def test_union_of_entry_points_without_the_excluded_inputs():
    options = sa.step_options(SPECS, ["a:stop", "b:start"], exclude=("y",))
    assert sorted(options) == ["x", "z"]
    assert options["x"]["description"] == "one"  # the first entry point's copy


def test_an_option_two_steps_define_differently_is_an_error():
    specs = {**SPECS, "c": {"run": {"options": {"x": {"type": "str"}}}}}
    with pytest.raises(ValueError, match="option x differs between a:stop and c:run"):
        sa.step_options(specs, ["a:stop", "c:run"])


def test_an_unknown_entry_point_is_an_error():
    with pytest.raises(ValueError, match="no argument spec for entry point 'a:start'"):
        sa.step_options(SPECS, ["a:start"])


def test_the_experiments_later_steps_join_and_catch_what_their_own_check_would():
    """The real roles: the steps check_steps.yml names join without conflict, the cycle's own inputs are
    left out, and a value their own entry point would refuse after the lock is refused here."""
    task = check_steps_task()
    steps = task["vars"]["__sglang_experiment_steps"]
    inputs = task["vars"]["__sglang_experiment_step_inputs"]
    options = _filter()(str(REPO / "roles"), steps, inputs)
    for name in ("sglang_server_ready_timeout_seconds", "sglang_server_stop_grace_seconds",
                 "sglang_server_lock_max_age_seconds", "sglang_bench_async", "flashinfer_venv_path",
                 "sglang_experiment_apply_patches"):
        assert name in options, name
    assert not set(inputs) & set(options)
    bad = ArgumentSpecValidator(options).validate({"sglang_server_excerpt_lines_before": "many"})
    assert any("sglang_server_excerpt_lines_before" in message for message in bad.error_messages)
    for role_step in steps:
        role, _, entry = role_step.partition(":")
        own = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        assert set(own[entry].get("options") or {}) - set(inputs) <= set(options), role_step


def test_the_filter_names_a_missing_role():
    with pytest.raises(AnsibleFilterError, match="no_such_role"):
        _filter()(str(REPO / "roles"), ["no_such_role:stop"], [])


def _imports_without_their_own_check():
    """(file, role:entry) of every import_role/include_role in the roles and playbooks that turns its entry
    point's own argument-spec check off."""
    found = []
    for path in sorted([*(REPO / "roles").glob("*/tasks/*.yml"), *(REPO / "playbooks").glob("*.yml")]):
        stack = [yaml.safe_load(path.read_text())]
        while stack:
            node = stack.pop()
            if isinstance(node, list):
                stack.extend(node)
            elif isinstance(node, dict):
                for key in ("ansible.builtin.import_role", "ansible.builtin.include_role"):
                    call = node.get(key)
                    if isinstance(call, dict) and call.get("rolespec_validate") is False:
                        found.append((path.relative_to(REPO).as_posix(),
                                      f"{call['name']}:{call.get('tasks_from', 'main')}"))
                stack.extend(value for value in node.values() if isinstance(value, (list, dict)))
    return found


def test_a_step_skips_its_own_check_only_when_check_steps_checked_it_before_the_lock():
    """rolespec_validate: false is only for the entry points check_steps.yml checks before the lock, and only in
    the files every caller reaches through validate.yml (the cycle, a campaign, the SLO search); the switch_tier
    steps, which playbooks/start.yml reaches without it, keep their own check."""
    steps = set(check_steps_task()["vars"]["__sglang_experiment_steps"])
    found = _imports_without_their_own_check()
    assert found, "the cycle skips no step's own check: the test has nothing to guard"
    for where, step in found:
        assert step in steps, f"{where}: {step} skips its own check but check_steps.yml does not check it"
        assert where in {"roles/sglang_experiment/tasks/main.yml", "roles/sglang_experiment/tasks/measure.yml",
                         "roles/sglang_experiment/tasks/record.yml", "roles/sglang_experiment/tasks/finish.yml"}, where
