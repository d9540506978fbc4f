# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One argument spec for several role entry points: what an experiment checks before its lock.

Ansible checks a role entry point's ``meta/argument_specs.yml`` when the entry point starts. For the
steps after the lock (the stop, the start, the ready-wait, the benchmark, ...) that is too late: a
bad ``sglang_server_ready_timeout_seconds`` would show only after the running server was stopped.
Role sglang_experiment's validate step therefore checks the union of those entry points' options up
front (plugins/filter/sglang_lab.py ``sglang_step_argument_spec``), and the steps are then imported
without their own check (``rolespec_validate: false``). Pure functions; no Ansible imports.
"""

from __future__ import annotations

# What may differ between two entry points' copies of one option: the words, not the rules.
_WORDS = ("description", "version_added")


def _rules(option):
    return {key: value for key, value in (option or {}).items() if key not in _WORDS}


def step_options(specs, entry_points, exclude=()):
    """The union of the ``options`` of ``entry_points`` (``"role:entry"``) in ``specs`` ({role:
    argument_specs}), without the names in ``exclude`` (the ones the caller sets itself when it runs
    the step). Raises ValueError for an unknown role or entry point, and for an option that two entry
    points define with different rules (type, default, choices, ...)."""
    union, seen = {}, {}
    for entry in entry_points:
        role, _, name = str(entry).partition(":")
        if role not in specs or name not in (specs[role] or {}):
            raise ValueError(f"no argument spec for entry point {entry!r} (role {role}, meta/argument_specs.yml)")
        for option, rules in ((specs[role][name] or {}).get("options") or {}).items():
            if option in exclude:
                continue
            if option in union and _rules(union[option]) != _rules(rules):
                raise ValueError(f"option {option} differs between {seen[option]} and {entry}: "
                                 f"{_rules(union[option])} vs {_rules(rules)}")
            union.setdefault(option, rules)
            seen.setdefault(option, entry)
    return union
