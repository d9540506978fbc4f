"""Filters for the sglang_launch role: tier catalog validation and launch planning.

The logic lives in plugins/module_utils/sglang_tiers.py (pure functions shared
with tools/check_tiers.py and pytest); these are thin wrappers.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

DOCUMENTATION = r"""
name: sglang_tiers
short_description: Validate SGLang tiers and compose launch argv/env
description:
  - C(sglang_launch_plan) validates data/tiers.yml (plus inventory tiers) against
    data/tier_schema.json, selects a tier, composes baseline + tier + overrides and
    checks the argv against an SGLang flag manifest; returns {ok, stage, errors, warnings, launch}.
  - C(sglang_launch_plans) does the same for every runnable tier at once.
  - C(sglang_tier_catalog) lists tier ids, runnable ids and titles.
  - C(sglang_argv_check) checks an argv list against a flag manifest.
"""

_MODULE_NAME = "sglang_lab_module_utils_sglang_tiers"
# Keys of the `options` mapping the role passes (vars/main.yml __sglang_launch_plan_options).
_OPTIONS = ("manifest", "extra_tiers", "flags_override", "env_override", "module", "host")


def _logic():
    """Import plugins/module_utils/sglang_tiers.py (controller side; not a collection)."""
    if _MODULE_NAME in sys.modules:
        return sys.modules[_MODULE_NAME]
    path = Path(__file__).resolve().parent.parent / "module_utils" / "sglang_tiers.py"
    spec = importlib.util.spec_from_file_location(_MODULE_NAME, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[_MODULE_NAME] = module
    spec.loader.exec_module(module)
    return module


def _options(options):
    options = dict(options or {})
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"sglang_launch_plan: unknown option(s) {unknown}; known: {list(_OPTIONS)}")
    options["module"] = options.get("module") or None
    return options


def sglang_launch_plan(tier_id, baseline, catalog, schema, options=None):
    """{ok, stage, errors, warnings, launch} for one tier; bad input gives errors, not exceptions."""
    return _logic().plan_launch(
        baseline=baseline, catalog=catalog, schema=schema, tier_id=str(tier_id), **_options(options)
    )


def sglang_launch_plans(catalog, baseline, schema, options=None):
    """{ok, errors, warnings, plans: {tier: launch}} for every runnable tier."""
    opts = _options(options)
    manifest = opts.pop("manifest", None)
    return _logic().plan_all(baseline=baseline, catalog=catalog, schema=schema, manifest=manifest, **opts)


def sglang_tier_catalog(catalog, extra_tiers=None):
    return _logic().catalog_summary(catalog, extra_tiers or {})


def sglang_argv_check(argv, manifest, constraints=None):
    return _logic().check_argv(list(argv), manifest, constraints or [])


class FilterModule:
    def filters(self):
        return {
            "sglang_launch_plan": sglang_launch_plan,
            "sglang_launch_plans": sglang_launch_plans,
            "sglang_tier_catalog": sglang_tier_catalog,
            "sglang_argv_check": sglang_argv_check,
        }
