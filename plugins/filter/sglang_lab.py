# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The project's filters: thin wrappers over the pure functions in plugins/module_utils/.

- tiers (module_utils/sglang_tiers.py, shared with tools/check_tiers.py): C(sglang_launch_plan)
  validates data/tiers.yml (plus inventory tiers) against data/tier_schema.json, selects a tier,
  composes baseline + tier + overrides and checks the argv against an SGLang flag manifest;
  C(sglang_launch_plans) does it for every runnable tier; C(sglang_tier_catalog) lists tier ids,
  runnable ids and titles; C(sglang_argv_check) checks an argv against a flag manifest.
- experiment (module_utils/sglang_failure.py, shared with module sglang_ledger_append):
  C(sglang_failed_step) names the step of a failed task from its sglang_experiment_<step> tag;
  C(sglang_interrupted_result) gives an interrupted task's result the class interrupted;
  C(sglang_experiment_failure) builds the closing message of a failed experiment;
  C(sglang_bench_launch) hands a launch to role sglang_bench as one object.
- campaigns (module_utils/sglang_campaign.py, shared with module sglang_campaign_plan):
  C(sglang_campaign_load) reads and checks a campaign file against data/campaigns/schema.json;
  C(sglang_campaign_cell) builds a cell's ledger value; C(sglang_campaign_outcome) weighs its
  record (ended? retry?); C(sglang_campaign_calibrate) weighs a fleet's calibration cells;
  C(sglang_campaign_over_budget) whether a cell may start; C(sglang_campaign_summary)
  tells the plan in lines.
- FlashInfer patches: C(sglang_patch_states) turns patch ids into role flashinfer's patch list.
- argument specs (module_utils/sglang_argspecs.py): C(sglang_step_argument_spec) joins the
  argument specs of the steps after the lock, which the validate step checks before it.
- benchmark (module_utils/sglang_bench_settings.py, shared with the experiment's preflight):
  C(sglang_bench_settings) resolves data/benchmark.yml with the sglang_bench_* overrides, or
  fails naming each bad variable and value.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

from ansible.errors import AnsibleFilterError

DOCUMENTATION = r"""
name: sglang_lab
short_description: Tier planning, experiment failures and benchmark settings for sglang-lab
description:
  - C(sglang_launch_plan), C(sglang_launch_plans), C(sglang_tier_catalog), C(sglang_argv_check) (tiers).
  - C(sglang_failed_step), C(sglang_interrupted_result), C(sglang_experiment_failure) (experiment);
    C(sglang_bench_launch) (a launch handed to role sglang_bench whole).
  - C(sglang_bench_settings) (benchmark settings), C(sglang_patch_states) (FlashInfer patch list).
  - C(sglang_quality_settings) (the output-quality check's prompt set, data/quality.yml).
  - C(sglang_step_argument_spec) (the later steps' argument specs, checked before the lock).
  - C(sglang_campaign_load), C(sglang_campaign_cell), C(sglang_campaign_outcome),
    C(sglang_campaign_calibrate), C(sglang_campaign_over_budget), C(sglang_campaign_summary) (campaigns).
"""

_MODULE_UTILS = Path(__file__).resolve().parent.parent / "module_utils"
# Keys of the `options` mapping role sglang_launch passes (vars/main.yml __sglang_launch_plan_options).
_OPTIONS = ("manifest", "extra_tiers", "flags_override", "env_override", "module", "host")


def _load(name):
    """Import plugins/module_utils/<name>.py once (controller side; this project is not a collection).

    A module_utils file that imports a sibling does so as ``ansible.module_utils.<sibling>`` inside a
    module's payload, else as ``<sibling>`` (its ImportError fallback, as under pytest and tools/):
    the folder goes on sys.path, last, for that fallback."""
    if str(_MODULE_UTILS) not in sys.path:
        sys.path.append(str(_MODULE_UTILS))
    key = f"sglang_lab_module_utils_{name}"
    if key not in sys.modules:
        spec = importlib.util.spec_from_file_location(key, _MODULE_UTILS / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[key] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:  # never leave a half-loaded module for the next caller
            del sys.modules[key]
            raise
    return sys.modules[key]


# --------------------------------------------------------------------------- tiers


def _options(options):
    options = dict(options or {})
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"sglang_launch_plan: unknown option(s) {unknown}; known: {list(_OPTIONS)}")
    options["module"] = options.get("module") or None
    return options


def sglang_launch_plan(tier_id, baseline, catalog, schema, options=None):
    """{ok, stage, errors, warnings, launch} for one tier; bad input gives errors, not exceptions."""
    return _load("sglang_tiers").plan_launch(
        baseline=baseline, catalog=catalog, schema=schema, tier_id=str(tier_id), **_options(options)
    )


def sglang_launch_plans(catalog, baseline, schema, options=None):
    """{ok, errors, warnings, plans: {tier: launch}} for every runnable tier."""
    opts = _options(options)
    manifest = opts.pop("manifest", None)
    return _load("sglang_tiers").plan_all(baseline=baseline, catalog=catalog, schema=schema, manifest=manifest, **opts)


def sglang_tier_catalog(catalog, extra_tiers=None):
    return _load("sglang_tiers").catalog_summary(catalog, extra_tiers or {})


def sglang_argv_check(argv, manifest, constraints=None):
    return _load("sglang_tiers").check_argv(list(argv), manifest, constraints or [])


# --------------------------------------------------------------------------- experiment


def sglang_failed_step(task):
    return _load("sglang_failure").failed_step(task or {})


def sglang_interrupted_result(result, signal_name):
    return _load("sglang_failure").interrupted_result(result, signal_name)


def sglang_bench_launch(launch, server_env=None):
    """Role sglang_bench's ``sglang_bench_launch`` from a launch as role sglang_launch composes it
    (``sglang_launch_result``, or a campaign's kept copy of it): ``tier``, ``script``, ``argv`` (the
    final command), ``env`` and ``model``. ``env`` is ``server_env`` with the script's own exports
    over it, since the script exports them last and they win in the server process too.
    """
    if not isinstance(launch, dict) or not launch.get("tier"):
        raise AnsibleFilterError(f"sglang_bench_launch: a launch with a tier is needed, got {launch!r:.200}")
    env = dict(server_env or {})
    env.update(launch.get("env") or {})
    return {"tier": launch["tier"], "script": launch.get("script"), "argv": launch.get("command"),
            "env": env, "model": launch.get("model")}


def sglang_experiment_failure(outcome):
    """The closing message; ``outcome`` is the mapping role sglang_experiment's restore step builds.

    Keys: tier, expected_class, failed_task, failed_result, crash, recorded
    (the record just written, or None), record_error, ledger, restore
    (bool), restored ({ok, tier, pid, msg}).
    """
    logic = _load("sglang_failure")
    recorded = outcome.get("recorded") or {}
    failure = recorded.get("failure") or logic.decide_failure(
        task=outcome.get("failed_task"), result=outcome.get("failed_result"), crash=outcome.get("crash")
    )
    failure = failure or {"class": "unclassified"}
    result = outcome.get("failed_result") or {}
    return logic.failure_report(
        tier=outcome.get("tier"),
        step=failure.get("step") or logic.failed_step(outcome.get("failed_task") or {}),
        failure_class=failure.get("class"),
        expected_class=outcome.get("expected_class"),
        message=failure.get("message") or result.get("msg"),
        ledger_line=logic.ledger_line(outcome.get("ledger"), recorded, outcome.get("record_error")),
        restore_line=logic.restore_line(outcome.get("restore"), outcome.get("restored"), outcome.get("interrupted")),
    )


# --------------------------------------------------------------------------- benchmark settings


def sglang_bench_settings(data, overrides=None, settings_file=None, workload=None, workloads_file=None):
    """data/benchmark.yml resolved with the overrides and a campaign workload; when the overrides name
    a catalogue workload (sglang_bench_workload_name), ``workloads_file`` is read and checked against
    its schema (workloads.schema.json beside it) and the entry is the resolver's named layer."""
    logic = _load("sglang_bench_settings")
    named = None
    name = (overrides or {}).get("sglang_bench_workload_name")
    if name not in (None, ""):
        named = sglang_workload_entry(workloads_file, name, data)
    try:
        return logic.resolve_settings(data, overrides, settings_file, workload, named=named)
    except logic.SettingsError as exc:
        raise AnsibleFilterError(
            "The benchmark settings cannot run: "
            + "; ".join(exc.problems)
            + ". Fix the inventory override (or -e), the campaign workload or the settings file named."
        ) from None


def sglang_workload_entry(workloads_file, name, bench_data):
    """The catalogue workload ``name`` of ``workloads_file``, the whole file checked first (its schema,
    every workload resolved over ``bench_data``), or an error naming each problem and, for an unknown
    name, the workloads there are."""
    import yaml

    catalogue = _load("sglang_workload_catalogue")
    path = Path(str(workloads_file))
    try:
        data = yaml.safe_load(path.read_text())
        schema = json.loads((path.parent / "workloads.schema.json").read_text())
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise AnsibleFilterError(f"Cannot read the workload catalogue {path}: {exc}") from None
    try:
        return catalogue.entry(catalogue.check_catalogue(data, schema, bench_data, source=str(path)), name, str(path))
    except catalogue.CatalogueError as exc:
        raise AnsibleFilterError(
            "The named workload cannot run: " + "; ".join(exc.problems) + ". Nothing was stopped or started; "
            "the catalogue: docs/benchmark.md, \"Workload catalogue\"."
        ) from None


def sglang_quality_settings(data, enabled=None, source="data/quality.yml"):
    """data/quality.yml checked (module_utils/sglang_quality.py check_prompt_set), with the run's
    sglang_bench_quality_enabled (null: the file's ``enabled``)."""
    logic = _load("sglang_quality")
    if isinstance(enabled, str) and enabled.strip().lower() in ("true", "false", "yes", "no", "1", "0", "on", "off"):
        enabled = enabled.strip().lower() in ("true", "yes", "1", "on")
    try:
        return logic.resolve_settings(data, enabled, source)
    except ValueError as exc:
        raise AnsibleFilterError(
            f"The output-quality check cannot run: {exc}. Fix the prompt set file (docs/quality.md) or "
            "sglang_bench_quality_enabled."
        ) from None


# --------------------------------------------------------------------------- campaigns


def sglang_campaign_load(path, schema_path, catalog=None):
    """The campaign file at ``path`` (relative to where ansible-playbook was started), checked
    and normalized, with its absolute ``path`` and ``file_sha256``; or an error naming each problem.
    ``catalog`` is C(sglang_tier_catalog)'s answer (ids and runnable ids) for the host that runs
    it; without it only the file's shape is checked (the controller's first look)."""
    import hashlib
    import os

    import yaml

    logic = _load("sglang_campaign")
    path = os.path.abspath(os.path.expanduser(str(path)))
    try:
        raw = Path(path).read_bytes()
        data = yaml.safe_load(raw)
        schema = yaml.safe_load(Path(schema_path).read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise AnsibleFilterError(f"Cannot read the campaign file {path}: {exc}") from None
    try:
        campaign = logic.check_campaign(
            data,
            schema,
            catalog["ids"] if catalog else None,
            source=path,
            runnable_tiers=catalog["runnable"] if catalog else None,
        )
    except logic.CampaignError as exc:
        raise AnsibleFilterError(
            "The campaign cannot run: " + "; ".join(exc.problems) + ". Its fields: docs/campaign.md."
        ) from None
    campaign["path"] = path
    campaign["file_sha256"] = hashlib.sha256(raw).hexdigest()
    return campaign


def sglang_campaign_cell(cell, campaign, attempt, fingerprint):
    return _load("sglang_campaign").cell_record(campaign, cell, attempt, fingerprint)


def sglang_campaign_outcome(record_result, expected, attempt_number, retry_transient):
    return _load("sglang_campaign").outcome(record_result, expected, attempt_number, retry_transient)


def sglang_campaign_summary(planned):
    return _load("sglang_campaign").summary(planned)


def sglang_campaign_calibrate(hosts, campaign, hostvars):
    """The fleet's calibration document from each host's ``__sglang_campaign_calibration`` fact
    (role sglang_campaign calibrate.yml); a host without it (it failed before) counts as no record."""
    results = {}
    for host in hosts:
        try:
            results[host] = dict(hostvars[host].get("__sglang_campaign_calibration") or {})
        except KeyError:
            results[host] = {}
    return _load("sglang_campaign").calibrate(campaign, results)


def sglang_campaign_over_budget(started_epoch, budget_minutes):
    return _load("sglang_campaign").over_budget(started_epoch, budget_minutes)


# --------------------------------------------------------------------------- FlashInfer patches


def sglang_step_argument_spec(roles_dir, entry_points, exclude=None):
    """``roles_dir | sglang_step_argument_spec(['sglang_server:stop', ...], exclude)``: one argument
    spec, the union of those entry points' options (module_utils/sglang_argspecs.py) read from each
    role's meta/argument_specs.yml under ``roles_dir``, for ansible.builtin.validate_argument_spec
    before the lock."""
    import yaml

    specs = {}
    try:
        for role in sorted({str(entry).partition(":")[0] for entry in entry_points}):
            path = Path(str(roles_dir)) / role / "meta" / "argument_specs.yml"
            specs[role] = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("argument_specs") or {}
        return _load("sglang_argspecs").step_options(specs, entry_points, tuple(exclude or ()))
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise AnsibleFilterError(f"sglang_step_argument_spec: {exc}") from None


def sglang_patch_states(ids, state=None):
    """``['a', 'b'] | sglang_patch_states`` -> ``[{'id': 'a'}, {'id': 'b'}]`` (with ``state`` when given).

    Role flashinfer's patch list, built with ansible-core alone: the patches step must not need a
    collection the controller may lack (on the lent H200 its absence failed the step after the stop).
    """
    out = []
    for patch in ids or []:
        entry = {"id": str(patch)}
        if state is not None:
            entry["state"] = state
        out.append(entry)
    return out


class FilterModule:
    def filters(self):
        return {
            "sglang_launch_plan": sglang_launch_plan,
            "sglang_launch_plans": sglang_launch_plans,
            "sglang_tier_catalog": sglang_tier_catalog,
            "sglang_argv_check": sglang_argv_check,
            "sglang_failed_step": sglang_failed_step,
            "sglang_interrupted_result": sglang_interrupted_result,
            "sglang_experiment_failure": sglang_experiment_failure,
            "sglang_bench_launch": sglang_bench_launch,
            "sglang_bench_settings": sglang_bench_settings,
            "sglang_quality_settings": sglang_quality_settings,
            "sglang_patch_states": sglang_patch_states,
            "sglang_step_argument_spec": sglang_step_argument_spec,
            "sglang_campaign_load": sglang_campaign_load,
            "sglang_campaign_cell": sglang_campaign_cell,
            "sglang_campaign_outcome": sglang_campaign_outcome,
            "sglang_campaign_calibrate": sglang_campaign_calibrate,
            "sglang_campaign_summary": sglang_campaign_summary,
            "sglang_campaign_over_budget": sglang_campaign_over_budget,
        }
