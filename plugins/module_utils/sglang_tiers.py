# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Tier catalog logic: compose a launch from the baseline plus a tier, check it.

Pure functions, no Ansible imports, so the same code serves the role's filter
plugins (controller side), tools/check_tiers.py and pytest.

Vocabulary:
  baseline   data/baseline.yml: module, flags (ordered mapping), env (mapping)
  tier       an entry of data/tiers.yml ``tiers:``: a *difference* from the baseline
  argv       the final ``sglang.launch_server`` argument list
  manifest   data/flag_manifests/sglang-<version>.json, SGLang's own options

Flag value semantics (baseline, flags_add and overrides alike):
  string / number -> ``--flag value``;  true -> bare ``--flag``;
  false / null    -> flag omitted;      list -> ``--flag v1 v2`` (nargs);
  mapping         -> ``--flag '<JSON>'`` (e.g. --json-model-override-args).
"""

from __future__ import annotations

import difflib
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

FLAG_RE = re.compile(r"^--[a-z0-9][a-z0-9-]*$")
ENV_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
TIER_ID_RE = re.compile(r"^[a-z0-9][a-z0-9-]*$")
_NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
LEVEL_WORDS = {1: "flag flip", 2: "code change", 3: "kernel work"}


class TierError(ValueError):
    """A tier cannot be launched; the message says why and what to do."""


def plain(value: Any) -> Any:
    """Built-in types only (Ansible hands filters tagged str/dict subclasses)."""
    if isinstance(value, Mapping):
        return {plain(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


# --------------------------------------------------------------------------
# Composition
# --------------------------------------------------------------------------


def flag_tokens(flag: str, value: Any) -> list[str]:
    """argv tokens for one flag under the value semantics above."""
    if value is None or value is False:
        return []
    if value is True:
        return [flag]
    if isinstance(value, Mapping):
        return [flag, json.dumps(value)]
    if isinstance(value, (list, tuple)):
        tokens = [flag]
        for item in value:
            if isinstance(item, (list, tuple, Mapping)) or item is None or isinstance(item, bool):
                raise TierError(f"{flag}: list values must be strings or numbers, got {item!r}")
            tokens.append(_scalar(item))
        return tokens
    return [flag, _scalar(value)]


def _scalar(value: Any) -> str:
    return str(value)


def env_value(name: str, value: Any) -> str:
    if isinstance(value, bool) or isinstance(value, (list, tuple, Mapping)):
        raise TierError(f"environment variable {name}: value must be a string or number, got {value!r}")
    return str(value)


# Who set a flag of the final launch (compose's flag_sources), in the order they apply.
SOURCE_BASELINE = "baseline"
SOURCE_TIER = "tier"
SOURCE_HOST_OVERRIDE = "host_override"


def _apply_flags(
    flags: dict[str, Any], changes: Mapping[str, Any] | None, sources: dict[str, str], source: str
) -> None:
    for flag, value in (changes or {}).items():
        flags[flag] = value  # keeps the baseline position when the flag exists
        sources[flag] = source


def _tokens_or_error(flag: str, value: Any) -> list[str] | None:
    try:
        return flag_tokens(flag, value)
    except TierError:
        return None


def flag_conflicts(tier: Mapping[str, Any] | None, flags_override: Mapping[str, Any] | None) -> list[dict[str, Any]]:
    """Flags that the tier changes and the host override sets to something else.

    The override is applied last, so it would win: the tier's difference (its hypothesis)
    would silently not be what runs. Each conflict is {flag, tier_value, override_value,
    tier_field} (tier_field: flags_add, or flags_remove with tier_value None). A flag both
    set to the same argv tokens (or both dropped) is no conflict.
    """
    tier = tier or {}
    override = flags_override or {}
    wanted = {flag: ("flags_remove", None) for flag in tier.get("flags_remove") or []}
    wanted.update({flag: ("flags_add", value) for flag, value in (tier.get("flags_add") or {}).items()})
    conflicts = []
    for flag, (field, value) in wanted.items():
        if flag not in override:
            continue
        if _tokens_or_error(flag, value) == _tokens_or_error(flag, override[flag]):
            continue
        conflicts.append({"flag": flag, "tier_field": field, "tier_value": value, "override_value": override[flag]})
    return conflicts


def compose(
    baseline: Mapping[str, Any],
    tier: Mapping[str, Any] | None = None,
    flags_override: Mapping[str, Any] | None = None,
    env_override: Mapping[str, Any] | None = None,
    module: str | None = None,
) -> dict[str, Any]:
    """Final launch = baseline, minus/plus the tier's difference, plus host overrides.

    Returns {module, argv, argv_lines, env, flags, flag_sources, flag_conflicts}.
    ``argv_lines`` groups each flag with its values (one line each in the launch
    script). ``flag_sources`` names, for every flag of the final argv, who set it:
    baseline, tier or host_override (sglang_launch_flags_override, with the target's
    --host and the port). ``flag_conflicts`` lists the flags the tier changes and the
    host override overrules (flag_conflicts(); the experiment's preflight refuses them).
    """
    tier = tier or {}
    flags: dict[str, Any] = dict(baseline.get("flags") or {})
    sources: dict[str, str] = {flag: SOURCE_BASELINE for flag in flags}
    for flag in tier.get("flags_remove") or []:
        flags.pop(flag, None)
    _apply_flags(flags, tier.get("flags_add"), sources, SOURCE_TIER)
    _apply_flags(flags, flags_override, sources, SOURCE_HOST_OVERRIDE)
    for flag in flags:
        if not isinstance(flag, str) or not FLAG_RE.match(flag):
            raise TierError(f"flag name {flag!r} is not of the form --some-flag")

    env: dict[str, str] = {}
    for name, value in (baseline.get("env") or {}).items():
        env[name] = env_value(name, value)
    for name in tier.get("env_remove") or []:
        env.pop(name, None)
    for name, value in (tier.get("env_add") or {}).items():
        env[name] = env_value(name, value)
    for name, value in (env_override or {}).items():
        if not isinstance(name, str) or not ENV_RE.match(name):
            raise TierError(f"environment variable name {name!r} is not a valid shell name")
        if value is None:
            env.pop(name, None)
        else:
            env[name] = env_value(name, value)

    lines = [tokens for flag, value in flags.items() if (tokens := flag_tokens(flag, value))]
    argv = [tok for line in lines for tok in line]
    final = {f: v for f, v in flags.items() if v is not None and v is not False}
    return {
        "module": module or baseline.get("module"),
        "argv": argv,
        "argv_lines": lines,
        "env": env,
        "flags": final,
        "flag_sources": {flag: sources[flag] for flag in final},
        "flag_conflicts": flag_conflicts(tier, flags_override),
    }


def launch_hash(module: str, argv: list[str], env: Mapping[str, str]) -> str:
    """sha256 of the canonical (module, argv, env): the tier hash in every script header."""
    canonical = json.dumps(
        {"module": module, "argv": list(argv), "env": dict(env)},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
    )
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# --------------------------------------------------------------------------
# Catalog validation
# --------------------------------------------------------------------------


def _field_path(parts: Iterable[Any]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif isinstance(p, str) and p.startswith("--"):
            out += f"['{p}']"
        else:
            out += ("." if out else "") + str(p)
    return out


def _type_words(t: Any) -> str:
    words = {
        "string": "a string",
        "integer": "an integer",
        "number": "a number",
        "boolean": "a boolean (true/false)",
        "object": "a mapping",
        "array": "a list",
        "null": "null",
    }
    if isinstance(t, list):
        return " or ".join(words.get(x, x) for x in t)
    return words.get(t, str(t))


def _where(path: list[Any], label: str) -> tuple[str, list[Any]]:
    """Split a JSON path into 'tier 'x'' / 'constraint ...' and the field path."""
    if len(path) >= 2 and path[0] == "tiers":
        return f"tier '{path[1]}'", path[2:]
    if len(path) >= 2 and path[0] == "constraints":
        return f"constraint #{path[1]}", path[2:]
    return label, path


def format_schema_error(error: Any, label: str) -> str:
    """One line naming the tier/constraint and the field, from a jsonschema error."""
    path = list(error.absolute_path)
    who, rest = _where(path, label)
    fld = _field_path(rest)
    v, vv, inst = error.validator, error.validator_value, error.instance
    desc = (error.schema or {}).get("description") if isinstance(error.schema, dict) else None
    if v == "required":
        missing = [r for r in vv if isinstance(inst, dict) and r not in inst]
        name = _field_path(rest + [missing[0]]) if missing else fld
        return f"{who}: field '{name}' is required"
    if v == "additionalProperties" and isinstance(inst, dict):
        allowed = sorted((error.schema.get("properties") or {}).keys())
        extra = sorted(k for k in inst if k not in allowed)
        name = _field_path(rest + [extra[0]]) if extra else fld
        hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
        return f"{who}: unknown field '{name}'{hint}"
    if v == "enum":
        return f"{who}: field '{fld}' must be one of {','.join(str(x) for x in vv)} (got {inst!r})"
    if v == "const":
        return f"{who}: field '{fld}' must be {vv!r} (got {inst!r})"
    if v == "type":
        return f"{who}: field '{fld}' must be {_type_words(vv)} (got {inst!r})"
    if "propertyNames" in list(error.schema_path):
        return f"{who}: field '{fld}' has a bad key {inst!r}" + (f": {desc}" if desc else "")
    if v == "propertyNames":
        return f"{who}: field '{fld}' has a bad key {inst!r}" + (f": {desc}" if desc else "")
    if v == "pattern":
        what = desc or f"must match {vv}"
        return f"{who}: field '{fld}' = {inst!r}: {what}"
    if v == "minLength":
        return f"{who}: field '{fld}' must not be empty"
    if v in {"minimum", "maximum"}:
        return f"{who}: field '{fld}' must be {'>=' if v == 'minimum' else '<='} {vv} (got {inst!r})"
    if v == "uniqueItems":
        return f"{who}: field '{fld}' lists an item twice: {inst!r}"
    if v == "minItems":
        return f"{who}: field '{fld}' needs at least {vv} item(s)"
    return f"{who}: field '{fld}': {error.message}"


def schema_errors(document: Any, schema: Mapping[str, Any], label: str, ref: str | None = None) -> list[str]:
    """Validate ``document`` against ``schema`` (or its ``$defs`` entry ``ref``)."""
    import jsonschema  # controller-side only; kept out of module import time

    target = schema if ref is None else {"$ref": f"#/$defs/{ref}", "$defs": schema.get("$defs", {})}
    validator_cls = jsonschema.validators.validator_for(schema)
    validator = validator_cls(target)
    errors = sorted(validator.iter_errors(document), key=lambda e: (list(map(str, e.absolute_path)), e.validator))
    out = []
    for err in errors:
        msg = format_schema_error(err, label)
        if msg not in out:
            out.append(msg)
    return out


def catalog_errors(
    catalog: Mapping[str, Any],
    baseline: Mapping[str, Any],
    schema: Mapping[str, Any],
) -> list[str]:
    """Schema errors for baseline.yml and tiers.yml, then cross-field checks."""
    errors = schema_errors(baseline, schema, "data/baseline.yml", ref="baseline_launch")
    errors += schema_errors(catalog, schema, "data/tiers.yml")
    if errors:
        return errors
    base_flags = set((baseline.get("flags") or {}).keys())
    base_env = set((baseline.get("env") or {}).keys())
    numbers: dict[int, str] = {}
    for tid, tier in (catalog.get("tiers") or {}).items():
        who = f"tier '{tid}'"
        if tid == "baseline":
            continue
        if "number" in tier:
            if tier["number"] in numbers:
                other = numbers[tier["number"]]
                errors.append(f"{who}: field 'number' {tier['number']} is already used by tier '{other}'")
            numbers[tier["number"]] = tid
        adds = tier.get("flags_add") or {}
        removes = tier.get("flags_remove") or []
        for flag in removes:
            if flag not in base_flags:
                errors.append(
                    f"{who}: field 'flags_remove' names {flag}, which the baseline does not set "
                    f"(baseline flags: {', '.join(sorted(base_flags))})"
                )
            if flag in adds:
                errors.append(f"{who}: {flag} is both in flags_add and flags_remove; keep one")
        for name in tier.get("env_remove") or []:
            if name not in base_env:
                errors.append(f"{who}: field 'env_remove' names {name}, which the baseline does not set")
        changes = adds or removes or tier.get("env_add") or tier.get("env_remove")
        if tier.get("runnable") and not changes:
            errors.append(f"{who}: runnable but changes nothing relative to the baseline; add flags or env changes")
        if not tier.get("runnable") and (adds or removes or tier.get("env_add") or tier.get("env_remove")):
            errors.append(f"{who}: not runnable but carries flag/env changes; set runnable: true or drop them")
        if not tier.get("runnable") and not tier.get("work_needed"):
            errors.append(f"{who}: field 'work_needed' is required when runnable is false (say what must be built)")
    seen_ids = set()
    for i, con in enumerate(catalog.get("constraints") or []):
        if con["id"] in seen_ids:
            errors.append(f"constraint #{i}: id '{con['id']}' is used twice")
        seen_ids.add(con["id"])
    return errors


def merge_extra_tiers(catalog: Mapping[str, Any], extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """Catalog plus inventory-defined tiers; an id collision is an error."""
    merged = plain(catalog)
    tiers = dict(merged.get("tiers") or {})
    for tid, tier in (extra or {}).items():
        if tid in tiers:
            raise TierError(
                f"extra tier '{tid}' (sglang_launch_extra_tiers) has the id of a catalog tier; "
                f"choose another id, catalog ids: {', '.join(tiers)}"
            )
        tiers[tid] = tier
    merged["tiers"] = tiers
    return merged


def runnable_tiers(catalog: Mapping[str, Any]) -> list[str]:
    return [tid for tid, t in (catalog.get("tiers") or {}).items() if t.get("runnable")]


def select_tier(catalog: Mapping[str, Any], tier_id: str, docs_hint: str = "docs/tiers") -> dict[str, Any]:
    """The tier to launch, or TierError naming the known/runnable tiers."""
    tiers = catalog.get("tiers") or {}
    if tier_id not in tiers:
        close = difflib.get_close_matches(str(tier_id), list(tiers), n=1)
        hint = f" Did you mean '{close[0]}'?" if close else ""
        raise TierError(f"unknown tier '{tier_id}'.{hint} Known tiers: {', '.join(tiers)}")
    tier = dict(tiers[tier_id])
    if not tier.get("runnable"):
        level = tier.get("level")
        work = str(tier.get("work_needed", "see the tier page")).rstrip(".")
        raise TierError(
            f"tier '{tier_id}' ({tier.get('title', '')}) is not runnable: it is level {level} "
            f"({LEVEL_WORDS.get(level, '?')}) and has no SGLang flag to flip; it needs "
            f"{'code' if level == 2 else 'kernel'} work first: {work}. "
            f"See {docs_hint}/{tier_id}.md. Runnable tiers: {', '.join(runnable_tiers(catalog))}"
        )
    return tier


# --------------------------------------------------------------------------
# argv against a flag manifest
# --------------------------------------------------------------------------


def manifest_index(manifest: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {flag: opt for opt in manifest.get("options") or [] for flag in opt.get("flags") or []}


def _is_value_token(tok: str) -> bool:
    return not tok.startswith("-") or bool(_NEGATIVE_NUMBER.match(tok)) or tok == "-"


def parse_argv(argv: list[str], index: Mapping[str, Mapping[str, Any]]) -> tuple[list[dict[str, Any]], list[str]]:
    """Group argv into occurrences {flag, values, option} like argparse would.

    Unknown flags greedily take the value tokens that follow, so one typo
    gives one error. Returns (occurrences, stray_tokens).
    """
    occurrences: list[dict[str, Any]] = []
    stray: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if not tok.startswith("-") or _NEGATIVE_NUMBER.match(tok):
            stray.append(tok)
            i += 1
            continue
        flag, eq, inline = tok.partition("=")
        opt = index.get(flag)
        values: list[str] = []
        i += 1
        if eq:
            values = [inline]
        else:
            nargs = opt.get("nargs") if opt else "*"
            takes = opt.get("takes_value", True) if opt else True
            if takes and nargs != 0:
                if nargs is None:
                    limit = 1
                elif nargs == "?":
                    limit = 1
                elif isinstance(nargs, int):
                    limit = nargs
                else:
                    limit = None
                # argparse never takes an option-looking token as a value.
                while i < len(argv) and (limit is None or len(values) < limit) and _is_value_token(argv[i]):
                    values.append(argv[i])
                    i += 1
        occurrences.append({"flag": flag, "values": values, "option": opt, "inline": bool(eq)})
    return occurrences, stray


def suggest_flag(flag: str, manifest: Mapping[str, Any], index: Mapping[str, Any] | None = None) -> str | None:
    index = index or manifest_index(manifest)
    close = difflib.get_close_matches(flag, list(index), n=1, cutoff=0.75)
    return close[0] if close else None


def explain_missing_flag(
    flag: str,
    version: str,
    index: Mapping[str, Any],
    history: Mapping[str, Any] | None,
) -> tuple[str, str | None]:
    """Why ``flag`` is not in this release, from the flag history; and a replacement that is.

    Follows deprecation pointers (flag -> replacement -> ...) until one exists in
    ``index``. Returns ("", None) when the history does not know the flag.
    """
    flags = (history or {}).get("flags") or {}
    versions = list((history or {}).get("versions") or [])
    notes: list[str] = []
    current, seen = flag, set()
    while current in flags and current not in seen:
        seen.add(current)
        entry = flags[current]
        if (
            version in versions
            and entry["first"] in versions
            and versions.index(entry["first"]) > versions.index(version)
        ):
            notes.append(f"{current} first appears in {entry['first']}")
            break
        last_state = entry["changes"][-1]
        text = f"{current} was last accepted by {entry['last']}"
        repl = last_state.get("replacement") if last_state.get("deprecated") else None
        if repl:
            text += f", deprecated there: use {repl}"
        notes.append(text)
        if not repl:
            break
        name, _, value = repl.split(" ")[0].partition("=")
        if name in index:
            choices = index[name].get("choices")
            if value and choices and value not in {str(c) for c in choices}:
                notes.append(
                    f"{value!r} is not a choice of {name} in {version} (choose from {', '.join(map(str, choices))})"
                )
                return "; ".join(notes), name
            return "; ".join(notes), repl
        current = name
    return "; ".join(notes), None


def _value_matches_type(value: str, type_name: str | None) -> bool:
    try:
        if type_name == "int":
            int(value)
        elif type_name == "float":
            float(value)
    except ValueError:
        return False
    return True


def _count_ok(nargs: Any, n: int) -> bool:
    if nargs is None:
        return n == 1
    if nargs == "?":
        return n <= 1
    if nargs == "*":
        return True
    if nargs == "+":
        return n >= 1
    if isinstance(nargs, int):
        return n == nargs
    return True


def _count_words(nargs: Any) -> str:
    return {None: "exactly one value", "?": "at most one value", "+": "at least one value"}.get(
        nargs, f"{nargs} values"
    )


def check_argv(
    argv: list[str],
    manifest: Mapping[str, Any],
    constraints: list[Mapping[str, Any]] | None = None,
    history: Mapping[str, Any] | None = None,
) -> dict[str, list[str]]:
    """Check a final argv against one SGLang version's options.

    Returns {"errors": [...], "warnings": [...]}: errors are what SGLang's
    parser (or its startup checks named in ``constraints``) would reject.
    ``history`` (data/flag_manifests/history.json) explains removed flags.
    """
    version = manifest.get("sglang_version", "?")
    index = manifest_index(manifest)
    errors: list[str] = []
    warnings: list[str] = []
    occurrences, stray = parse_argv(argv, index)
    for tok in stray:
        errors.append(f"unexpected argument {tok!r}: it is not the value of any option (SGLang {version})")
    seen_dest: dict[str, str] = {}
    for occ in occurrences:
        flag, values, opt = occ["flag"], occ["values"], occ["option"]
        if opt is None:
            msg = f"{flag}: not an option of SGLang {version}"
            story, replacement = explain_missing_flag(flag, version, index, history)
            close = None if story else suggest_flag(flag, manifest, index)
            if story:
                msg += f" ({story})"
            if replacement:
                msg += f"; did you mean {replacement}?"
            if close:
                target = index[close]
                msg += f"; did you mean {close}?"
                if target.get("deprecated") and target.get("replacement"):
                    msg += f" ({close} is itself deprecated: use {target['replacement']})"
            errors.append(msg)
            continue
        dest = opt.get("dest")
        if dest in seen_dest and opt.get("action") not in {"append", "append_const", "count", "extend"}:
            errors.append(f"{flag}: sets '{dest}' which {seen_dest[dest]} already set; give it once")
        seen_dest.setdefault(dest, flag)
        if opt.get("deprecated"):
            repl = opt.get("replacement")
            text = f"{flag}: deprecated in SGLang {version}" + (f"; use {repl}" if repl else "")
            if opt.get("fatal"):
                errors.append(text + " (this version refuses it)")
            else:
                warnings.append(text)
        if not opt.get("takes_value"):
            if values:
                errors.append(f"{flag}: takes no value but got {values!r}")
            continue
        if not _count_ok(opt.get("nargs"), len(values)):
            errors.append(f"{flag}: expects {_count_words(opt.get('nargs'))}, got {len(values)}")
            continue
        choices = opt.get("choices")
        for val in values:
            if choices and str(val) not in {str(c) for c in choices}:
                close = difflib.get_close_matches(str(val), [str(c) for c in choices], n=1)
                hint = f"; did you mean {close[0]!r}?" if close else ""
                allowed = ", ".join(map(str, choices))
                errors.append(f"{flag}: invalid choice {val!r} in SGLang {version}{hint} (choose from {allowed})")
            elif not _value_matches_type(str(val), opt.get("type")):
                errors.append(f"{flag}: expects {opt.get('type')}, got {val!r}")
    for opt in manifest.get("options") or []:
        if opt.get("required") and opt.get("dest") not in seen_dest:
            errors.append(f"missing required option {opt['flags'][0]} (SGLang {version})")
    if constraints:
        c_err, c_warn = check_constraints(occurrences, manifest, constraints)
        errors += c_err
        warnings += c_warn
    return {"errors": errors, "warnings": warnings}


# ---- known-incompatible combinations --------------------------------------


def _effective_values(occurrences: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for occ in occurrences:
        opt = occ["option"]
        if opt is None:
            continue
        if opt.get("takes_value"):
            vals = occ["values"]
            out[opt["dest"]] = vals[0] if len(vals) == 1 else vals
        elif opt.get("action") == "BooleanOptionalAction":
            out[opt["dest"]] = not occ["flag"].startswith("--no-")
        else:
            out[opt["dest"]] = True
    return out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return _truthy(a) == _truthy(b)
    try:
        return float(a) == float(b)
    except (TypeError, ValueError):
        return str(a) == str(b)


def _truthy(v: Any) -> bool:
    if isinstance(v, str):
        return v.lower() in {"1", "true", "yes", "on"}
    return bool(v)


def _condition(cond: Mapping[str, Any], state: dict[str, Any], index: Mapping[str, Any]) -> bool | None:
    """True/False, or None when the flag does not exist in this SGLang version."""
    opt = index.get(cond["flag"])
    if opt is None:
        return None
    dest = opt["dest"]
    present = dest in state
    value = state[dest] if present else opt.get("default")
    if "set" in cond:
        return present == bool(cond["set"])
    if "equals" in cond:
        return _same(value, cond["equals"])
    if "not_equals" in cond:
        return not _same(value, cond["not_equals"])
    if "in" in cond:
        return any(_same(value, c) for c in cond["in"])
    if "equals_flag" in cond or "multiple_of_flag" in cond:
        other_flag = cond.get("equals_flag") or cond.get("multiple_of_flag")
        other = index.get(other_flag)
        if other is None:
            return None
        other_value = state.get(other["dest"], other.get("default"))
        if "equals_flag" in cond:
            return _same(value, other_value)
        try:
            return int(value) % int(other_value) == 0
        except (TypeError, ValueError, ZeroDivisionError):
            return False
    return None


def check_constraints(
    occurrences: list[dict[str, Any]],
    manifest: Mapping[str, Any],
    constraints: list[Mapping[str, Any]],
) -> tuple[list[str], list[str]]:
    index = manifest_index(manifest)
    state = _effective_values(occurrences)
    version = manifest.get("sglang_version")
    errors: list[str] = []
    warnings: list[str] = []
    for con in constraints:
        if con.get("versions") and version not in con["versions"]:
            continue
        results = [_condition(c, state, index) for c in con.get("when") or []]
        if any(r is None for r in results) or not all(results):
            continue
        violated = True
        if con.get("require_any"):
            got = [_condition(c, state, index) for c in con["require_any"]]
            violated = not any(g for g in got if g is not None)
        elif con.get("require_all"):
            got = [_condition(c, state, index) for c in con["require_all"]]
            violated = not all(g for g in got if g is not None)
        if violated:
            text = f"[{con['id']}] {con['message']}"
            (errors if con.get("severity", "error") == "error" else warnings).append(text)
    return errors, warnings


# --------------------------------------------------------------------------
# Everything the role needs, in one call
# --------------------------------------------------------------------------


def plan_launch(
    *,
    baseline: Mapping[str, Any],
    catalog: Mapping[str, Any],
    schema: Mapping[str, Any],
    tier_id: str,
    manifest: Mapping[str, Any] | None,
    extra_tiers: Mapping[str, Any] | None = None,
    flags_override: Mapping[str, Any] | None = None,
    env_override: Mapping[str, Any] | None = None,
    module: str | None = None,
    host: Mapping[str, Any] | None = None,
    validated: bool = False,
) -> dict[str, Any]:
    """Validate catalog + tier, compose the final launch, check it against the manifest.

    Returns {"ok", "stage", "errors", "warnings", "launch"}. ``stage`` names the
    first step that failed: catalog | schema | tier | compose | argv. ``host``
    adds where the script goes and how it runs: script_dir, ml_env, interpreter,
    target, pythonpath (``launch`` gets script, ml_env, interpreter, target,
    pythonpath). ``validated`` skips the catalog schema check (done once by plan_all).
    """

    def failed(stage: str, errors: list[str], warnings: list[str] | None = None) -> dict[str, Any]:
        return {"ok": False, "stage": stage, "errors": errors, "warnings": warnings or [], "launch": {}}

    baseline, catalog, schema, manifest = plain(baseline), plain(catalog), plain(schema), plain(manifest)
    extra_tiers, flags_override, env_override = plain(extra_tiers), plain(flags_override), plain(env_override)

    try:
        merged = merge_extra_tiers(catalog, extra_tiers)
    except TierError as exc:
        return failed("catalog", [str(exc)])
    errors = [] if validated else catalog_errors(merged, baseline, schema)
    if errors:
        return failed("schema", errors)
    try:
        tier = select_tier(merged, tier_id)
    except TierError as exc:
        return failed("tier", [str(exc)])
    try:
        composed = compose(baseline, tier if tier_id != "baseline" else {}, flags_override, env_override, module)
    except TierError as exc:
        return failed("compose", [str(exc)])
    version = (manifest or {}).get("sglang_version")
    checked = {"errors": [], "warnings": []}
    if manifest is not None:
        checked = check_argv(composed["argv"], manifest, merged.get("constraints") or [])
    flags = composed["flags"]
    launch = {
        "tier": tier_id,
        "title": tier.get("title", ""),
        "number": tier.get("number"),
        "level": tier.get("level"),
        "patches": list(tier.get("patches") or []),
        "expected_failure_class": tier.get("expected_failure_class"),
        "module": composed["module"],
        "argv": composed["argv"],
        "argv_lines": composed["argv_lines"],
        "env": composed["env"],
        "hash": launch_hash(composed["module"], composed["argv"], composed["env"]),
        "sglang_version": version,
        "host": flags.get("--host"),
        "port": int(flags["--port"]) if str(flags.get("--port", "")).isdigit() else None,
        # What the server will load (--model-path, or its alias --model).
        "model": str(flags.get("--model-path") or flags.get("--model") or "") or None,
        "warnings": checked["warnings"],
        # The final flags, who set each one, and the tier changes the host override overrules.
        "flags": flags,
        "flag_sources": composed["flag_sources"],
        "flag_conflicts": composed["flag_conflicts"],
    }
    host = plain(host) or {}
    if host:
        ml_env = str(host.get("ml_env") or "")
        launch.update(
            {
                "script": f"{str(host.get('script_dir', '.')).rstrip('/')}/{tier_id}.sh",
                "target": host.get("target", "sglang"),
                "ml_env": ml_env,
                "interpreter": host.get("interpreter") or f"{ml_env}/bin/python3",
                "pythonpath": [str(p) for p in host.get("pythonpath") or []],
            }
        )
        # The whole command line, as /proc shows it once the script has exec'd.
        launch["command"] = [launch["interpreter"], "-u", "-m", launch["module"], *launch["argv"]]
    if checked["errors"]:
        out = failed("argv", checked["errors"], checked["warnings"])
        out["launch"] = launch
        return out
    return {"ok": True, "stage": "done", "errors": [], "warnings": checked["warnings"], "launch": launch}


def plan_all(
    *,
    baseline: Mapping[str, Any],
    catalog: Mapping[str, Any],
    schema: Mapping[str, Any],
    manifest: Mapping[str, Any] | None,
    **options: Any,
) -> dict[str, Any]:
    """plan_launch for every runnable tier (catalog + extra tiers), schema checked once.

    Returns {"ok", "errors" (each prefixed with its tier), "warnings", "plans": {tier: launch}}.
    """
    baseline, catalog, schema, manifest = plain(baseline), plain(catalog), plain(schema), plain(manifest)
    first = plan_launch(
        baseline=baseline, catalog=catalog, schema=schema, tier_id="baseline", manifest=manifest, **options
    )
    if not first["ok"] and first["stage"] in {"catalog", "schema"}:
        return {"ok": False, "errors": first["errors"], "warnings": [], "plans": {}}
    merged = merge_extra_tiers(catalog, plain(options.get("extra_tiers")))
    out: dict[str, Any] = {"ok": True, "errors": [], "warnings": [], "plans": {}}
    for tid in runnable_tiers(merged):
        got = plan_launch(
            baseline=baseline, catalog=catalog, schema=schema, tier_id=tid, manifest=manifest, validated=True, **options
        )
        out["errors"] += [f"tier '{tid}': {e}" if not e.startswith(f"tier '{tid}'") else e for e in got["errors"]]
        out["warnings"] += [f"tier '{tid}': {w}" for w in got["warnings"]]
        if got["ok"]:
            out["plans"][tid] = got["launch"]
    out["ok"] = not out["errors"]
    return out


def catalog_summary(catalog: Mapping[str, Any], extra_tiers: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Ids, runnable ids and titles of catalog (+ extra) tiers, for loops in playbooks."""
    merged = merge_extra_tiers(catalog, extra_tiers)
    tiers = merged.get("tiers") or {}
    return {
        "ids": list(tiers),
        "runnable": runnable_tiers(merged),
        "titles": {tid: t.get("title", "") for tid, t in tiers.items()},
    }
