# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The effective benchmark settings: data/benchmark.yml with the inventory's overrides, checked.

One place resolves and validates them (role sglang_bench through the
sglang_bench_settings filter; the experiment's preflight before the lock).
Each problem names the variable that overrides the setting, the value, and
what would be valid. Standard library only.

Coercion, the one rule: a concurrency list given as a string of integers
separated by commas and/or spaces (``-e sglang_bench_concurrency=1,10`` on
the command line gives the string ``"1,10"``) becomes that list of integers.
Any other string is refused. Numbers given as strings of digits (extra vars
from the command line are strings) count as those numbers.

Precedence: a campaign workload's settings (``workload``, keyed by the setting
names below, e.g. ``concurrency`` or ``warmup.requests``) over the inventory's
sglang_bench_* overrides (one variable per setting of OVERRIDES) over the
inventory's ``sglang_bench_workload_override`` (one dict keyed by the same
setting names, for every setting) over a named workload of the catalogue
(``named``: data/workloads.yml, -e workload=NAME; sglang_workload_catalogue.py)
over data/benchmark.yml over the setting's default. A campaign file says
exactly what each of its cells measures, so nothing in the inventory may change
it. A named workload's dataset is what it is: a variable or the override dict
naming another dataset is refused, and a setting the workload ``needs`` (its
corpus file) must resolve to a value.

The settings are those of the workload's one spec (sglang_workload_options.py
WORKLOAD_OPTIONS). The ones in OVERRIDES are resolved here with their own
coercion and messages; every other one (GENERIC_SETTINGS) is taken by its
spec type and checked by the workload's own rule (workload_problems), so a new
setting needs no line here and no role variable. A generic setting at its
default is left out of the result, so adding one changes nothing for the
workloads that do not use it (campaign cell keys included).

Warm-up levels: ``warmup.concurrency`` is an integer (every warm-up request at
that concurrency) or ``measured``: one round at each concurrency the sweep
measures, with max(level, warmup.requests) requests, because SGLang compiles
and captures per batch shape and a shape first seen during a measured point
costs that point its compile time. ``cfg["warmup"]["levels"]`` is the list the
warm-up runs.
"""

import json
import re

try:  # Inside AnsiballZ.
    from ansible.module_utils.sglang_workload_options import (
        CACHE_STATES,
        DATASETS,
        WORKLOAD_OPTIONS,
        as_number,
        backend_for,
        setting_default,
        workload_problems,
    )
except ImportError:  # pytest, the filter plugin and tools put module_utils on sys.path.
    import sglang_workload_options as _w

    CACHE_STATES, DATASETS, WORKLOAD_OPTIONS = _w.CACHE_STATES, _w.DATASETS, _w.WORKLOAD_OPTIONS
    as_number, setting_default, workload_problems = _w.as_number, _w.setting_default, _w.workload_problems
    backend_for = _w.backend_for

# setting -> (override variable, path in data/benchmark.yml)
OVERRIDES = (
    ("dataset_name", "sglang_bench_dataset_name", ("dataset_name",)),
    ("dataset_path", "sglang_bench_dataset_path", ("dataset_path",)),
    ("input_len", "sglang_bench_input_len", ("input_len",)),
    ("output_len", "sglang_bench_output_len", ("output_len",)),
    ("random_range_ratio", "sglang_bench_random_range_ratio", ("random_range_ratio",)),
    ("concurrency", "sglang_bench_concurrency", ("concurrency",)),
    ("num_prompts.multiplier", "sglang_bench_num_prompts_multiplier", ("num_prompts", "multiplier")),
    ("num_prompts.floor", "sglang_bench_num_prompts_floor", ("num_prompts", "floor")),
    ("request_rate", "sglang_bench_request_rate", ("request_rate",)),
    ("seed", "sglang_bench_seed", ("seed",)),
    ("repeats", "sglang_bench_repeats", ("repeats",)),
    ("warmup.requests", "sglang_bench_warmup_requests", ("warmup", "requests")),
    ("warmup.concurrency", "sglang_bench_warmup_concurrency", ("warmup", "concurrency")),
    ("confidence", "sglang_bench_confidence", ("confidence",)),
    ("measurement.min_requests", "sglang_bench_min_requests", ("measurement", "min_requests")),
    ("measurement.min_duration_s", "sglang_bench_min_duration_s", ("measurement", "min_duration_s")),
    ("measurement.max_prompts", "sglang_bench_max_prompts", ("measurement", "max_prompts")),
    ("measurement.cache", "sglang_bench_cache", ("measurement", "cache")),
    ("measurement.server_metrics", "sglang_bench_server_metrics", ("measurement", "server_metrics")),
)
# The inventory's one override dict, keyed by setting name (below the per-setting variables).
WORKLOAD_OVERRIDE_VAR = "sglang_bench_workload_override"
_INT_LIST = re.compile(r"^\s*\d+(\s*[,\s]\s*\d+)*\s*$")


class SettingsError(ValueError):
    """The settings are not runnable; ``problems`` lists each, with its variable."""

    def __init__(self, problems):
        self.problems = list(problems)
        super().__init__("; ".join(self.problems))


def _get(data, path):
    for key in path:
        data = (data or {}).get(key) if isinstance(data, dict) else None
    return data


def _as_int(value):
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value.strip())
    return None


def _as_bool(value):
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("true", "yes", "on", "1"):
        return True
    if text in ("false", "no", "off", "0"):
        return False
    return None


def coerce_concurrency(value):
    """A list of integers from a list, or from a string such as "1,10" / "1 10"; else None."""
    if isinstance(value, str):
        if not _INT_LIST.match(value):
            return None
        return [int(part) for part in re.split(r"[,\s]+", value.strip()) if part]
    if isinstance(value, (list, tuple)):
        out = [_as_int(item) for item in value]
        return None if any(item is None for item in out) else out
    return None


# Workload settings resolved here by their own rules, and those that are not workload settings.
_BESPOKE = {name.split(".")[0] for name, _var, _path in OVERRIDES} | {"settings_file", "name", "client", "backend"}
GENERIC_SETTINGS = tuple(name for name in WORKLOAD_OPTIONS if name not in _BESPOKE)
SETTING_NAMES = tuple(name for name, _var, _path in OVERRIDES) + GENERIC_SETTINGS


def _by_type(name, value):
    """A generic setting's value as its spec type, or None when it is not one."""
    spec = WORKLOAD_OPTIONS[name]
    kind = spec.get("type", "str")
    if kind in ("dict", "list"):
        if isinstance(value, str):  # -e on the command line: JSON text
            try:
                value = json.loads(value)
            except ValueError:
                return None
        wanted = dict if kind == "dict" else list
        return value if isinstance(value, wanted) else None
    if kind == "int":
        return _as_int(value)
    if kind == "float":
        return as_number(value)
    if kind == "bool":
        return _as_bool(value)
    return None if isinstance(value, (dict, list)) else str(value)


WARMUP_MEASURED = "measured"


def resolve_settings(data, overrides=None, settings_file=None, workload=None, named=None):
    """The effective settings (the shape the ledger's ``workload`` records), or SettingsError.

    ``data`` is data/benchmark.yml; ``overrides`` maps the sglang_bench_* variable names to
    their values (None = not overridden); ``workload`` maps setting names (SETTING_NAMES) to
    a campaign workload's values, which win over both. ``named`` is a catalogue workload
    (``{name, settings, needs}``, sglang_workload_catalogue.entry): its settings sit between
    data/benchmark.yml and the overrides, and the result carries its ``name``.
    """
    overrides = overrides or {}
    workload = dict(workload or {})
    named = named or {}
    label = f"workload {named.get('name')!r}" if named else ""
    named_settings = dict(named.get("settings") or {})
    where = f" (settings file {settings_file})" if settings_file else ""
    raw = {}
    source = {}
    override = overrides.get(WORKLOAD_OVERRIDE_VAR) or {}
    problems = [
        f"workload setting {name!r} is not a benchmark setting; known: {', '.join(SETTING_NAMES)}"
        for name in sorted(set(workload) - set(SETTING_NAMES))
    ]
    problems += [
        f"{label} setting {name!r} is not a benchmark setting; known: {', '.join(SETTING_NAMES)}"
        for name in sorted(set(named_settings) - set(SETTING_NAMES))
    ]
    if not isinstance(override, dict):
        problems.append(f"{WORKLOAD_OVERRIDE_VAR} = {override!r}: must be a dict keyed by setting name")
        override = {}
    problems += [
        f"{WORKLOAD_OVERRIDE_VAR}[{name!r}] is not a benchmark setting; known: {', '.join(SETTING_NAMES)}"
        for name in sorted(set(override) - set(SETTING_NAMES))
    ]
    for name, var, path in OVERRIDES:
        value = overrides.get(var)
        raw[name] = _get(data, path) if value is None else value
        source[name] = var if value is not None else f"{'.'.join(path)} in the settings file"
        if value is None and named_settings.get(name) is not None:
            raw[name] = named_settings[name]
            source[name] = f"{label} setting {name}"
        if value is None and override.get(name) is not None:
            raw[name] = override[name]
            source[name] = f"{WORKLOAD_OVERRIDE_VAR}[{name!r}]"
        if workload.get(name) is not None:
            raw[name] = workload[name]
            source[name] = f"workload setting {name}"

    def bad(name, rule):
        problems.append(f"{source[name]} = {raw[name]!r}: {rule}{where}")

    cfg = {"settings_file": settings_file, "client": "sglang.bench_serving", "backend": "sglang"}
    if raw["dataset_name"] not in DATASETS:
        bad("dataset_name", f"must be one of {', '.join(DATASETS)}")
    cfg["dataset_name"] = raw["dataset_name"]
    cfg["dataset_path"] = raw["dataset_path"]
    for name in ("input_len", "output_len"):
        number = _as_int(raw[name])
        if number is None or number < 1:
            bad(name, "must be an integer >= 1")
        cfg[name] = number
    ratio = as_number(raw["random_range_ratio"])
    if ratio is None or not 0 <= ratio <= 1:
        bad("random_range_ratio", "must be a number within [0, 1]")
    cfg["random_range_ratio"] = ratio
    concurrency = coerce_concurrency(raw["concurrency"])
    if not concurrency or any(c < 1 for c in concurrency):
        bad(
            "concurrency",
            "must be a non-empty list of integers >= 1, e.g. [1, 10, 256, 1024] (a string of integers "
            "separated by commas or spaces, '1,10', is read as that list)",
        )
    cfg["concurrency"] = concurrency
    prompts = {}
    for key in ("multiplier", "floor"):
        number = _as_int(raw[f"num_prompts.{key}"])
        if number is None or number < 1:
            bad(f"num_prompts.{key}", "must be an integer >= 1")
        prompts[key] = number
    cfg["num_prompts"] = prompts
    rate = str(raw["request_rate"]).strip().lower()
    rate_value = as_number(rate)
    if rate != "inf" and (rate_value is None or rate_value <= 0):
        bad("request_rate", "must be inf or a positive number of requests per second")
    cfg["request_rate"] = rate if rate == "inf" else str(raw["request_rate"])
    seed = _as_int(raw["seed"])
    if seed is None:
        bad("seed", "must be an integer")
    cfg["seed"] = seed
    repeats = _as_int(raw["repeats"])
    if repeats is None or repeats < 1:
        bad("repeats", "must be an integer >= 1")
    cfg["repeats"] = repeats
    warmup = dict(_get(data, ("warmup",)) or {})
    number = _as_int(raw["warmup.requests"])
    if number is None or number < 1:
        bad("warmup.requests", "must be an integer >= 1")
    warmup["requests"] = number
    level = raw["warmup.concurrency"]
    if isinstance(level, str) and level.strip().lower() == WARMUP_MEASURED:
        warmup["concurrency"] = WARMUP_MEASURED
        levels = list(concurrency or [])
    else:
        number = _as_int(level)
        if number is None or number < 1:
            bad("warmup.concurrency", f"must be an integer >= 1 or {WARMUP_MEASURED!r} (each measured concurrency)")
        warmup["concurrency"] = number
        levels = [number]
    for key in ("input_len", "max_new_tokens", "timeout_s"):
        number = as_number(warmup.get(key))
        if number is None or number <= 0:
            problems.append(f"warmup.{key} in the settings file = {warmup.get(key)!r}: must be a number > 0{where}")
    cfg["warmup"] = {
        "requests": warmup.get("requests"),
        "concurrency": warmup.get("concurrency"),
        "levels": levels,
        "input_len": warmup.get("input_len"),
        "max_new_tokens": warmup.get("max_new_tokens"),
        "timeout_s": warmup.get("timeout_s"),
    }
    measurement = {}
    for key in ("min_requests", "max_prompts"):
        number = _as_int(raw[f"measurement.{key}"])
        if number is None or number < (1 if key == "max_prompts" else 0):
            bad(f"measurement.{key}", f"must be an integer >= {1 if key == 'max_prompts' else 0}")
        measurement[key] = number
    seconds = as_number(raw["measurement.min_duration_s"])
    if seconds is None or seconds < 0:
        bad("measurement.min_duration_s", "must be a number of seconds >= 0")
    measurement["min_duration_s"] = seconds
    cache = str(raw["measurement.cache"]).strip().lower()
    if cache not in CACHE_STATES:
        bad("measurement.cache", "must be cold (the prefix cache flushed before every point) or warm (left as it is)")
    measurement["cache"] = cache
    metrics = _as_bool(raw["measurement.server_metrics"])
    if metrics is None:
        bad("measurement.server_metrics", "must be true or false")
    measurement["server_metrics"] = metrics
    cfg["measurement"] = measurement
    confidence = as_number(raw["confidence"])
    if confidence is None or not 0 < confidence < 1:
        bad("confidence", "must be a number between 0 and 1 (exclusive), such as 0.95")
    cfg["confidence"] = confidence
    for name in GENERIC_SETTINGS:
        raw[name], source[name] = setting_default(name), f"the default of {name}"
        for value, origin in (
            (_get(data, (name,)), f"{name} in the settings file"),
            (named_settings.get(name), f"{label} setting {name}"),
            (override.get(name), f"{WORKLOAD_OVERRIDE_VAR}[{name!r}]"),
            (workload.get(name), f"workload setting {name}"),
        ):
            if value is not None:
                raw[name], source[name] = value, origin
        value = None if raw[name] is None else _by_type(name, raw[name])
        if raw[name] is not None and value is None:
            bad(name, f"must be a {WORKLOAD_OPTIONS[name].get('type', 'str')}")
        # At its default a generic setting is left out (the modules' spec gives it its default):
        # a new setting changes no campaign cell's key (sglang_campaign.cell_key) and no record.
        if value is not None and value != setting_default(name):
            cfg[name] = value
    for name, rule in workload_problems(cfg, names=GENERIC_SETTINGS):
        bad(name, rule)
    # A multi-turn workload goes through bench_serving's chat backend (sglang_workload_options.backend_for);
    # the record says so.
    cfg["backend"] = backend_for(cfg)
    if named:
        problems += _named_problems(named, named_settings, raw, source, cfg, label)
        cfg["name"] = named.get("name")
    if problems:
        raise SettingsError(problems)
    return cfg


def _named_problems(named, named_settings, raw, source, cfg, label):
    """A named workload's own rules: its dataset is not replaced by a variable or the override dict
    (a campaign workload may), and every setting it ``needs`` resolved to a value."""
    problems = []
    wanted = named_settings.get("dataset_name")
    if wanted is not None and raw.get("dataset_name") != wanted and not source["dataset_name"].startswith("workload "):
        problems.append(
            f"{label} sends bench_serving's {wanted} dataset, but {source['dataset_name']} = "
            f"{raw['dataset_name']!r} names another: drop that variable, or name no workload"
        )
    for name in named.get("needs") or []:
        if cfg.get(name) in (None, "", [], {}):
            var = next((v for n, v, _p in OVERRIDES if n == name), f"{WORKLOAD_OVERRIDE_VAR}[{name!r}]")
            problems.append(f"{label} needs {name}: give it with {var} (-e {var}=...)")
    return problems
