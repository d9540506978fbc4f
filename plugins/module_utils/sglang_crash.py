# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Crash-signature matching for SGLang server logs: pure functions, standard library only.
#
# The catalog itself is data (data/crash_signatures.yml, read by the role and passed to the
# sglang_server_wait_ready module as a list); this file compiles it and classifies log lines.
# Rules (documented in the catalog's header, which is the reference):
#   1. for one line, the first catalog entry whose regex matches and whose `after` / `near`
#      conditions hold is the line's entry;
#   2. a crash burst runs from the first fatal line to `burst_after` lines after it, plus
#      `burst_before` lines before it (for hint entries);
#   3. in a burst, a specific fatal entry (not `generic`) wins over a `hint` entry, which wins
#      over a `generic` one; within a rank the entry that comes first in the catalog wins,
#      ties go to the earliest line;
#   4. no fatal line, but a line matched an `outcome: stopped` entry: the log's outcome is
#      `stopped_by_sigterm` (not fatal), see classify_outcome.

from __future__ import annotations

import re

REQUIRED_FIELDS = ("class", "regex", "explanation", "remedy", "fatal")
# Classes that are decided without a log line (the catalog holds their explanation/remedy).
NON_LOG_CLASSES = ("hang", "process_exited")
DEFAULT_NEAR_LINES = 40
DEFAULT_EXCERPT_BEFORE = 30
DEFAULT_EXCERPT_AFTER = 10
# A crash burst (rule 2): every TP rank prints a traceback of some 60 lines, then SGLang prints
# its teardown lines; hints (an NCCL WARN) come a few dozen lines before the first fatal line.
DEFAULT_BURST_AFTER = 600
DEFAULT_BURST_BEFORE = 40
STOPPED_OUTCOME = "stopped"
# classify_outcome's answers
OUTCOME_CRASHED = "crashed"
OUTCOME_STOPPED = "stopped_by_sigterm"
OUTCOME_CLEAN = "clean"
# Ranks of rule 3 (lower wins).
RANK_SPECIFIC, RANK_HINT, RANK_GENERIC = 0, 1, 2


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
        for flag in ("generic", "hint"):
            if not isinstance(entry.get(flag, False), bool):
                raise CatalogError(f"{where}: {flag} must be true or false")
        if entry.get("generic") and not entry["fatal"]:
            raise CatalogError(f"{where}: a generic entry must be fatal")
        if entry.get("hint") and entry["fatal"]:
            raise CatalogError(f"{where}: a hint entry must not be fatal")
        if entry.get("outcome") not in (None, STOPPED_OUTCOME):
            raise CatalogError(f"{where}: outcome must be {STOPPED_OUTCOME!r}")
        if entry.get("outcome") and entry["fatal"]:
            raise CatalogError(f"{where}: an outcome entry must not be fatal")
        item = dict(entry)
        item["index"] = index
        item["generic"] = bool(entry.get("generic", False))
        item["hint"] = bool(entry.get("hint", False))
        item["outcome"] = entry.get("outcome")
        item["rank"] = RANK_GENERIC if item["generic"] else RANK_HINT if item["hint"] else RANK_SPECIFIC
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
    """The first catalog entry of ``crash_class`` that is not a hint (else the first one), for
    its explanation/remedy; None for an unknown class."""
    entries = [entry for entry in catalog if entry["class"] == crash_class]
    for entry in entries:
        if not entry.get("hint"):
            return entry
    return entries[0] if entries else None


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


def _entry_at(catalog, lines, position, seen):
    return match_line(catalog, lines[position], seen, context=(lines, position))


def classify_lines(
    catalog, lines, start=0, after_seen=None, burst_after=DEFAULT_BURST_AFTER, burst_before=DEFAULT_BURST_BEFORE
):
    """Classify a crash from ``lines`` (a log region), looking at the lines from ``start`` on.

    ``after_seen`` is the set of entry indexes whose `after` condition held before ``lines[0]``.
    The burst (rule 2) starts at the first fatal line at or after ``start`` and spans
    ``burst_after`` lines after it and ``burst_before`` lines before it (those only for hints).
    Returns (position, entry) of the winner of rule 3, or (None, None) when no fatal entry
    applies.
    """
    seen = set(after_seen or ())
    matches = []  # (position, entry) of fatal and hint matches
    first_fatal = None
    for position, line in enumerate(lines):
        if first_fatal is not None and position > first_fatal + burst_after:
            break
        if position < start - burst_before:  # before any possible burst: only track `after`
            update_after_seen(catalog, line, seen)
            continue
        entry = _entry_at(catalog, lines, position, seen)
        if entry is not None and (entry["fatal"] or entry["hint"]):
            if entry["fatal"] and position >= start and first_fatal is None:
                first_fatal = position
            matches.append((position, entry))
        update_after_seen(catalog, line, seen)
    if first_fatal is None:
        return None, None
    low, high = first_fatal - burst_before, first_fatal + burst_after
    best = None
    for position, entry in matches:
        if entry["hint"]:
            if not low <= position <= high:
                continue
        elif position < first_fatal:
            continue
        key = (entry["rank"], entry["index"], position)
        if best is None or key < best[0]:
            best = (key, position, entry)
    return best[1], best[2]


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


def classify_outcome(catalog, lines):
    """What a log says happened (rule 4), as a dict:

    ``outcome``: "crashed" (a fatal signature applies), "stopped_by_sigterm" (no fatal line,
    but the log shows a requested stop: "SIGTERM received ... Draining requests" and what SGLang
    prints after it) or "clean" (neither; a healthy or still-starting log);
    ``fatal``: true only for "crashed";
    ``report``: the crash_report of the crash, or of the stop's first line, or None.
    The ready-wait itself only acts on fatal lines; this is for reading a log after the fact
    (tools/crash_corpus.py, a rescue, the tests).
    """
    position, entry = classify_lines(catalog, lines)
    if entry is not None:
        report = crash_report(entry, lines[position], lines, position, position + 1)
        return {"outcome": OUTCOME_CRASHED, "fatal": True, "report": report}
    seen = set()
    for position, line in enumerate(lines):
        entry = match_line(catalog, line, seen)
        if entry is not None and entry["outcome"] == STOPPED_OUTCOME:
            report = crash_report(entry, line, lines, position, position + 1)
            return {"outcome": OUTCOME_STOPPED, "fatal": False, "report": report}
        update_after_seen(catalog, line, seen)
    return {"outcome": OUTCOME_CLEAN, "fatal": False, "report": None}
