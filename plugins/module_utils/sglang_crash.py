# Crash-signature matching for SGLang server logs: pure functions, standard library only.
#
# The catalog itself is data (data/crash_signatures.yml, read by the role and passed to the
# sglang_server_wait_ready module as a list); this file compiles it and classifies log lines.
# Rules (documented in the catalog's header):
#   * for one line, the first catalog entry whose regex matches and whose `after` / `near`
#     conditions hold is the line's entry;
#   * for a burst of lines (a crash prints a traceback per TP rank), the entry that comes first
#     in the catalog wins, ties go to the earliest line.

from __future__ import annotations

import re

REQUIRED_FIELDS = ("class", "regex", "explanation", "remedy", "fatal")
# Classes that are decided without a log line (the catalog holds their explanation/remedy).
NON_LOG_CLASSES = ("hang", "process_exited")
DEFAULT_NEAR_LINES = 40
DEFAULT_EXCERPT_BEFORE = 30
DEFAULT_EXCERPT_AFTER = 10


class CatalogError(ValueError):
    """The crash-signature catalog is malformed; the message names the entry and the field."""


def _join_regex(value):
    if isinstance(value, (list, tuple)):
        return "|".join(f"(?:{part})" for part in value)
    return value


def _compile(value, where):
    try:
        return re.compile(_join_regex(value))
    except (re.error, TypeError) as exc:
        raise CatalogError(f"{where}: regex {value!r} does not compile: {exc}") from exc


def compile_catalog(entries):
    """Validate and compile catalog entries (a list of dicts as read from the YAML).

    Returns a list of dicts: the entry's fields plus ``index`` (position in the catalog),
    ``pattern`` / ``after_pattern`` / ``near_pattern`` (compiled or None). Raises CatalogError
    naming the entry for a missing field or a regex that does not compile.
    """
    if not isinstance(entries, list) or not entries:
        raise CatalogError("the crash-signature catalog must be a non-empty list of entries")
    compiled = []
    for index, entry in enumerate(entries):
        where = f"crash signature #{index}"
        if not isinstance(entry, dict):
            raise CatalogError(f"{where} is not a mapping")
        missing = [field for field in REQUIRED_FIELDS if field not in entry]
        if missing:
            raise CatalogError("{} ({}) lacks {}".format(where, entry.get("class", "?"), ", ".join(missing)))
        where = "{} (class {})".format(where, entry["class"])
        if not isinstance(entry["fatal"], bool):
            raise CatalogError(f"{where}: fatal must be true or false")
        item = dict(entry)
        item["index"] = index
        item["pattern"] = None if entry["regex"] is None else _compile(entry["regex"], where)
        item["after_pattern"] = _compile(entry["after"], where + " after") if entry.get("after") else None
        item["near_pattern"] = _compile(entry["near"], where + " near") if entry.get("near") else None
        item["near_lines"] = int(entry.get("near_lines", DEFAULT_NEAR_LINES))
        compiled.append(item)
    return compiled


def load_catalog(path):
    """Read and compile a catalog file (YAML). For tools and tests; modules get the list."""
    import yaml  # PyYAML ships with ansible-core; imported here so modules need not have it

    with open(path, encoding="utf-8") as handle:
        return compile_catalog(yaml.safe_load(handle))


def signature_for_class(catalog, crash_class):
    """The first catalog entry of ``crash_class`` (for explanation/remedy), or None."""
    for entry in catalog:
        if entry["class"] == crash_class:
            return entry
    return None


def update_after_seen(catalog, line, after_seen):
    """Record in ``after_seen`` (a set of entry indexes) the entries whose `after` regex this
    line matches. Returns the set."""
    for entry in catalog:
        if entry["after_pattern"] is not None and entry["index"] not in after_seen:
            if entry["after_pattern"].search(line):
                after_seen.add(entry["index"])
    return after_seen


def match_line(catalog, line, after_seen=frozenset(), context=None):
    """The catalog entry for one log line, or None.

    ``after_seen``: indexes of the entries whose `after` condition was met by an EARLIER line.
    ``context``: (lines, position) to evaluate `near` conditions; without it an entry with a
    `near` condition counts as matching (a cheap first pass, refined by classify_lines).
    """
    for entry in catalog:
        pattern = entry["pattern"]
        if pattern is None or not pattern.search(line):
            continue
        if entry["after_pattern"] is not None and entry["index"] not in after_seen:
            continue
        if entry["near_pattern"] is not None and context is not None:
            lines, position = context
            low = max(0, position - entry["near_lines"])
            high = min(len(lines), position + entry["near_lines"] + 1)
            if not any(entry["near_pattern"].search(lines[i]) for i in range(low, high)):
                continue
        return entry
    return None


def scan_lines(catalog, lines, after_seen=None):
    """Match every line (first pass, `near` not evaluated). Returns (fatal, warnings, after_seen):
    ``fatal`` the position of the first line matching a fatal entry or None, ``warnings`` a list
    of (position, entry) for non-fatal matches."""
    after_seen = set() if after_seen is None else after_seen
    fatal, warnings = None, []
    for position, line in enumerate(lines):
        entry = match_line(catalog, line, after_seen)
        if entry is not None:
            if entry["fatal"]:
                if fatal is None:
                    fatal = position
            else:
                warnings.append((position, entry))
        update_after_seen(catalog, line, after_seen)
    return fatal, warnings, after_seen


def classify_lines(catalog, lines, start=0, after_seen=None):
    """Classify a crash from ``lines`` (a log region), looking at the lines from ``start`` on.

    ``after_seen`` is the set of entry indexes whose `after` condition held before ``lines[0]``.
    Returns (position, entry) of the winning fatal match (earliest catalog entry, then earliest
    line), or (None, None) when no fatal entry applies.
    """
    seen = set(after_seen or ())
    best = None
    for position, line in enumerate(lines):
        if position >= start:
            entry = match_line(catalog, line, seen, context=(lines, position))
            if entry is not None and entry["fatal"]:
                if best is None or entry["index"] < best[1]["index"]:
                    best = (position, entry)
        update_after_seen(catalog, line, seen)
    return best if best is not None else (None, None)


def excerpt(lines, position, before=DEFAULT_EXCERPT_BEFORE, after=DEFAULT_EXCERPT_AFTER):
    """The lines around ``position``: ``before`` lines before it, the line, ``after`` after."""
    low = max(0, position - before)
    return lines[low : position + after + 1]


def crash_report(
    entry, line, lines, position, line_number=None, before=DEFAULT_EXCERPT_BEFORE, after=DEFAULT_EXCERPT_AFTER
):
    """The fields a failed wait returns (and a rescue records)."""
    return {
        "crash_class": entry["class"],
        "crash_line": line,
        "crash_line_number": line_number,
        "excerpt": "\n".join(excerpt(lines, position, before, after)) if lines else "",
        "explanation": " ".join(str(entry.get("explanation", "")).split()),
        "remedy": " ".join(str(entry.get("remedy", "")).split()),
    }


def classify_text(catalog, text):
    """Classify a whole log given as text: the crash report dict, or None when no fatal
    signature applies. For tools and tests."""
    lines = text.splitlines()
    position, entry = classify_lines(catalog, lines)
    if entry is None:
        return None
    return crash_report(entry, lines[position], lines, position, position + 1)
