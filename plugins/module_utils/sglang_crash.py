# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Crash-signature matching for SGLang server logs: pure functions, standard library only.
#
# The catalog itself is data (data/crash_signatures.yml, read by the role and passed to the
# sglang_server module (state=ready) as a list); this file compiles it and classifies log lines.
# Rules (documented in the catalog's header, which is the reference):
#   1. for one line, the first catalog entry whose regex matches and whose `after` / `near`
#      conditions hold is the line's entry;
#   2. a crash burst runs from the first fatal line to `burst_after` lines after it, plus
#      `burst_before` lines before it (for hint entries);
#   3. in a burst, a specific fatal entry (not `generic`) wins over a `hint` entry, which wins
#      over a `generic` one; within a rank the entry that comes first in the catalog wins,
#      ties go to the earliest line;
#   4. no fatal line, but a line matched an `outcome: stopped` entry: the log's outcome is
#      `stopped_by_sigterm` (not fatal), see classify_outcome;
#   5. bursts: in a multi-rank log (TP/DP/EP/PP ranks, "[rankN]:" torch lines, the detokenizer,
#      the tokenizer manager) every line belongs to the rank last named at or above it; a line
#      with SGLang's time stamp and no rank belongs to the main process, which is not a rank (it
#      reports deaths: "Received sigquit", "Subprocess ... crashed"). The rank of the burst's first
#      fatal line that belongs to a rank is the first failing rank, and a specific entry matched
#      in ITS lines wins over the other ranks' (their errors are mostly consequences); the report
#      names that rank (crash_rank) and its root-cause line (root_cause_line);
#   6. a dead process whose log matches no fatal entry (and shows no stop) is the stated fallback
#      class `unclassified_crash`, carrying the root-cause line (the first exception line of the
#      first failing rank, else its first error line: a kernel's "Assertion ... failed", a C++
#      terminate, an ERROR line; else the same over the whole log, else the last line that says a
#      process died, else the last line) and the remedy "report this log" (fallback_report). A
#      live process is never given a class without a fatal line: a healthy or still-loading log
#      stays clean.
#   7. before falling back (rule 6), the `exited` entries of the catalog are searched in the
#      root cause's own traceback (from its "Traceback (most recent call last)" header, else the
#      EXITED_WINDOW lines above it, to the root-cause line): a frame of the scheduler process
#      (managers/scheduler.py, the model worker, "sglang::scheduler_TP0") says WHICH process died,
#      and the class is that process's crash (`scheduler_exception`) with the same root cause;
#      for a "Fatal Python error" root cause, faulthandler's thread dump BELOW it is searched too.
#      `exited` entries never match a live process's log (match_line skips them), so they cannot
#      flag a healthy server whose request errors print the same frames. An exited entry's
#      `unless` regex (a frame of the main process's launch path) anywhere in that traceback or
#      dump keeps the entry from naming it; its `near` must hold there as in rule 1.

from __future__ import annotations

import re

REQUIRED_FIELDS = ("class", "regex", "explanation", "remedy", "fatal")
# Classes that are decided without a log line (the catalog holds their explanation/remedy).
NON_LOG_CLASSES = ("hang", "process_exited", "unclassified_crash")
# Rule 6: the fallback class of a dead process whose log matches no fatal entry.
FALLBACK_CLASS = "unclassified_crash"
DEFAULT_NEAR_LINES = 40
DEFAULT_EXCERPT_BEFORE = 30
DEFAULT_EXCERPT_AFTER = 10
# A crash burst (rule 2): every TP rank prints a traceback of some 60 lines, then SGLang prints
# its teardown lines; hints (an NCCL WARN) come a few dozen lines before the first fatal line.
DEFAULT_BURST_AFTER = 600
DEFAULT_BURST_BEFORE = 40
# Rule 7: how far above a root-cause line its traceback is searched when no header is in sight
# (a cut excerpt, C++ frames before "Fatal Python error"), and how far a header may be.
EXITED_WINDOW = 80
TRACEBACK_WINDOW = 300
TRACEBACK_HEADER_RE = re.compile(r"Traceback \(most recent call last\)")
# Rule 7: Python's faulthandler prints "Fatal Python error: <signal>" and THEN the dead process's
# frames ("Thread 0x... (most recent call first):", '  File "...", line N in f', "Extension
# modules: ..."): for such a root cause the dump below it is the process's own traceback.
FATAL_PYTHON_RE = re.compile(r"Fatal Python error")
FAULTHANDLER_LINE_RE = re.compile(
    r"^(?:$|(?:Thread|Current thread) 0x[0-9a-f]+|File \".*\", line [0-9]+ in |Extension modules:|<no Python frame>)"
)
STOPPED_OUTCOME = "stopped"
# classify_outcome's answers
OUTCOME_CRASHED = "crashed"
OUTCOME_STOPPED = "stopped_by_sigterm"
OUTCOME_CLEAN = "clean"
# Ranks of rule 3 (lower wins).
RANK_SPECIFIC, RANK_HINT, RANK_GENERIC = 0, 1, 2
# Rule 5: who printed a line. SGLang's prefix "[<time> TP3]", "[<time> DP0 TP0 EP0]",
# "[<time> PP1 ATTN_CP7 TP7]" (a cut excerpt may lose the opening bracket), torch's "[rank3]:",
# the pre-0.3 "[gpu_id=1]", and the two manager processes by their own crash line.
RANK_TAG_RE = re.compile(
    r"(?:^|[\[ ])((?:(?:ATTN_CP|ATTN_DP|MOE_DP|DP|PP|TP|EP|CP)[0-9]+ ?)+)\]"
    r"|^\s*\[(rank[0-9]+)\]:"
    r"|\[(gpu_id=[0-9]+)\]"
    r"|(?<![A-Za-z])(DetokenizerManager|TokenizerManager) hit an exception"
)
RANK_NAMES = {"DetokenizerManager": "detokenizer", "TokenizerManager": "tokenizer_manager"}
# A line SGLang's logger stamped with a time and NO rank ("[2025-04-21 04:13:43] Received sigquit
# ...") comes from the main process (HTTP server, tokenizer manager, the subprocess watchdog), or
# from the only scheduler of a TP1 server: it ends the rank above it (rule 5). The main process is
# not a rank of a burst: it reports the ranks' deaths (consequences), it does not fail first.
MAIN_PROCESS_RE = re.compile(r"\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}(?:[.,][0-9]+)?\]")
MAIN_RANK = "main"
# Rule 6: an exception line (Python's last traceback line: "RuntimeError: ...",
# "torch.AcceleratorError: ...", "KeyError: 'x'"), after any log prefix ("[time TP0] ",
# "[rank3]: ", "> ", a "[2025-...Z] " stamp); and lines that say a process died without one.
EXCEPTION_LINE_RE = re.compile(
    r"^((?:[A-Za-z_][A-Za-z0-9_]*\.)*(?:[A-Z][A-Za-z0-9_]*)?(?:Error|Exception|Exit|Interrupt))(?::.*)?$"
    # a module-qualified class that does not end in Error: "triton.runtime.errors.OutOfResources: ...",
    # "torch._dynamo.exc.Unsupported: ..."
    r"|^((?:[a-z_][a-z0-9_]*\.)+[A-Z][A-Za-z0-9_]*): "
)
# Rule 6, when a log has no exception line: a line that reports an error in its own words (a CUDA
# kernel's "Assertion `...` failed.", C++'s "terminate called after throwing", torch's c10 error
# log "[E421 04:13:43...]", NCCL's "NCCL WARN", an "ERROR" / "Error:" / "error:" line).
ERROR_LINE_RE = re.compile(
    r"Assertion [`'].*[`'] failed|terminate called after throwing|^\[E[0-9]{3,4} |NCCL WARN"
    r"|\bERROR\b|\b[Ee]rror: |\bCUDA error\b|\bFatal\b|\bFATAL\b"
)
# One log prefix at the start of a line: "[...]" / "[...]:" / "> " / a "2025-...Z" stamp /
# "(Worker pid=1)"; stripped one at a time (no nested repetition, so no backtracking blow-up).
LINE_PREFIX_RE = re.compile(r"^(?:\[[^\]]{0,200}\]:?|>|\([^)]{0,200}\)|[0-9][0-9T:.Z+-]{0,60})\s*")
DEATH_LINE_RE = re.compile(
    r"\bKilled\b|Segmentation fault|core dumped|Fatal Python error|terminate called after throwing"
    r"|\bAborted\b|exit code:? -?[1-9][0-9]*|exited with (?:code|status) [1-9]"
)


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
        for flag in ("generic", "hint", "exited"):
            if not isinstance(entry.get(flag, False), bool):
                raise CatalogError(f"{where}: {flag} must be true or false")
        if entry.get("generic") and not entry["fatal"]:
            raise CatalogError(f"{where}: a generic entry must be fatal")
        if entry.get("hint") and entry["fatal"]:
            raise CatalogError(f"{where}: a hint entry must not be fatal")
        if entry.get("exited") and (not entry["fatal"] or entry["regex"] is None):
            raise CatalogError(f"{where}: an exited entry must be fatal and have a regex")
        if entry.get("unless") and not entry.get("exited"):
            raise CatalogError(f"{where}: only an exited entry may have `unless`")
        if entry.get("outcome") not in (None, STOPPED_OUTCOME):
            raise CatalogError(f"{where}: outcome must be {STOPPED_OUTCOME!r}")
        if entry.get("outcome") and entry["fatal"]:
            raise CatalogError(f"{where}: an outcome entry must not be fatal")
        item = dict(entry)
        item["index"] = index
        item["generic"] = bool(entry.get("generic", False))
        item["hint"] = bool(entry.get("hint", False))
        item["exited"] = bool(entry.get("exited", False))
        item["outcome"] = entry.get("outcome")
        item["rank"] = RANK_GENERIC if item["generic"] else RANK_HINT if item["hint"] else RANK_SPECIFIC
        item["pattern"] = None if entry["regex"] is None else _compile(entry["regex"], where)
        item["after_pattern"] = _compile(entry["after"], where + " after") if entry.get("after") else None
        item["near_pattern"] = _compile(entry["near"], where + " near") if entry.get("near") else None
        item["unless_pattern"] = _compile(entry["unless"], where + " unless") if entry.get("unless") else None
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
        if pattern is None or entry.get("exited") or not pattern.search(line):
            continue
        if entry["after_pattern"] is not None and entry["index"] not in after_seen:
            continue
        if entry["near_pattern"] is not None and context is not None and not _near(entry, *context):
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


def rank_of(line):
    """The rank a line names (rule 5): "TP3", "DP0 TP0 EP0", "rank3", "gpu_id=1", "detokenizer",
    "tokenizer_manager", "main" (SGLang's time stamp without a rank: the main process); None for
    a line that names none (a traceback line, a continuation)."""
    match = RANK_TAG_RE.search(line)
    if match is None:
        return MAIN_RANK if MAIN_PROCESS_RE.search(line) else None
    tag = next(group for group in match.groups() if group)
    return RANK_NAMES.get(tag, tag.strip())


def is_rank(rank):
    """Whether a rank_of() answer is a rank of a burst (not None, not the main process)."""
    return rank is not None and rank != MAIN_RANK


def line_ranks(lines, low=0, high=None):
    """The rank of each line of lines[low:high] (a list, index 0 = lines[low]): the rank last
    named at or above it (rule 5), None before the first one."""
    high = len(lines) if high is None else min(high, len(lines))
    ranks, current = [], None
    for position in range(low, high):
        named = rank_of(lines[position])
        if named is not None:
            current = named
        ranks.append(current)
    return ranks


def _best(matches):
    best = None
    for position, entry in matches:
        key = (entry["rank"], entry["index"], position)
        if best is None or key < best[0]:
            best = (key, position, entry)
    return best


def first_failing_rank(burst, ranks, base, first_fatal):
    """Rule 5: the rank of the burst's first fatal line that belongs to a rank; the main process's
    lines ("Received sigquit from a child process", "Subprocess ... crashed") and lines above the
    first rank tag of a cut excerpt report a failure, they do not name who failed. When no fatal
    line belongs to a rank, the rank (or None) of the first fatal line. ``ranks`` is line_ranks()
    from ``base`` on."""
    fatal = [position for position, entry in burst if entry["fatal"] and position >= first_fatal]
    for position in sorted(fatal):
        if is_rank(ranks[position - base]):
            return ranks[position - base]
    return ranks[first_fatal - base]


def classify_burst(
    catalog, lines, start=0, after_seen=None, burst_after=DEFAULT_BURST_AFTER, burst_before=DEFAULT_BURST_BEFORE
):
    """Rules 2, 3 and 5 on ``lines`` (a log region), from ``start`` on.

    Returns None when no fatal entry applies, else a dict: ``position`` / ``entry`` of the
    winner, ``first_fatal`` (position of the burst's first fatal line) and ``rank`` (the first
    failing rank, or None for a log that names no rank).
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
        return None
    low, high = first_fatal - burst_before, first_fatal + burst_after
    burst = [
        (position, entry)
        for position, entry in matches
        if (low <= position <= high if entry["hint"] else position >= first_fatal)
    ]
    base = max(0, low)
    ranks = line_ranks(lines, base, high + 1)
    first_rank = first_failing_rank(burst, ranks, base, first_fatal)
    best = None
    if first_rank is not None:
        own = [(position, entry) for position, entry in burst if ranks[position - base] == first_rank]
        best = _best(own)
        if best is not None and best[2]["rank"] != RANK_SPECIFIC:
            best = None  # the first rank shows only consequences: rule 3 over the whole burst
    best = best or _best(burst)
    return {"position": best[1], "entry": best[2], "first_fatal": first_fatal, "rank": first_rank}


def classify_lines(
    catalog, lines, start=0, after_seen=None, burst_after=DEFAULT_BURST_AFTER, burst_before=DEFAULT_BURST_BEFORE
):
    """Classify a crash from ``lines`` (a log region), looking at the lines from ``start`` on.

    ``after_seen`` is the set of entry indexes whose `after` condition held before ``lines[0]``.
    The burst (rule 2) starts at the first fatal line at or after ``start`` and spans
    ``burst_after`` lines after it and ``burst_before`` lines before it (those only for hints).
    Returns (position, entry) of the winner of rules 3 and 5, or (None, None) when no fatal
    entry applies (classify_burst gives the rank as well).
    """
    burst = classify_burst(catalog, lines, start, after_seen, burst_after, burst_before)
    if burst is None:
        return None, None
    return burst["position"], burst["entry"]


def _strip_prefixes(line):
    text = line.strip()
    for _ in range(6):
        stripped = LINE_PREFIX_RE.sub("", text, count=1)
        if stripped == text:
            break
        text = stripped
    return text


def is_exception_line(line):
    """Whether a line is a Python exception line once its log prefixes are stripped (rule 6)."""
    return EXCEPTION_LINE_RE.match(_strip_prefixes(line)) is not None


def is_error_line(line):
    """Whether a line reports an error in its own words without being a Python exception line
    (a kernel assertion, a C++ terminate, torch's "[E...]" log, an ERROR line; rule 6)."""
    return ERROR_LINE_RE.search(_strip_prefixes(line)) is not None or ERROR_LINE_RE.search(line.strip()) is not None


def root_cause_line(lines, low=0, high=None, rank=None, errors=True, default=None):
    """Rule 6's root-cause line of lines[low:high], or None for no line. Returns (position, text).

    The first failing rank is ``rank`` when it is a rank of the burst, else the rank of the first
    exception or error line that belongs to one (the main process's lines report deaths, they do
    not cause them). In order: the first exception line of that rank (Python prints the original
    exception first, "During handling of the above exception" the ones it caused after it), the
    first error line of that rank (a kernel's "Assertion ... failed", "terminate called after
    throwing", torch's "[E...]" log, an ERROR line), the first exception line of the region, its
    first error line, then ``default`` (a burst's deciding line) when given, else the last line
    that says a process died, else the last non-empty line. ``errors=False`` skips the error
    lines (a burst named by a specific signature: its deciding line says more than them)."""
    high = len(lines) if high is None else min(high, len(lines))
    low = max(0, low)
    ranks = line_ranks(lines, low, high)
    exceptions = [p for p in range(low, high) if is_exception_line(lines[p])]
    errors = [p for p in range(low, high) if errors and p not in exceptions and is_error_line(lines[p])]
    if not is_rank(rank):
        failing = [p for p in sorted(exceptions + errors) if is_rank(ranks[p - low])]
        rank = ranks[failing[0] - low] if failing else None
    for group in (exceptions, errors):
        own = [p for p in group if rank is not None and ranks[p - low] == rank]
        if own:
            return own[0], lines[own[0]].strip()
    for group in (exceptions, errors):
        if group:
            return group[0], lines[group[0]].strip()
    if default is not None:
        return default
    for position in range(high - 1, low - 1, -1):
        if DEATH_LINE_RE.search(lines[position]):
            return position, lines[position].strip()
    for position in range(high - 1, low - 1, -1):
        if lines[position].strip():
            return position, lines[position].strip()
    return None


def excerpt(lines, position, before=DEFAULT_EXCERPT_BEFORE, after=DEFAULT_EXCERPT_AFTER):
    """The lines around ``position``: ``before`` lines before it, the line, ``after`` after."""
    low = max(0, position - before)
    return lines[low : position + after + 1]


def crash_report(
    entry,
    line,
    lines,
    position,
    line_number=None,
    before=DEFAULT_EXCERPT_BEFORE,
    after=DEFAULT_EXCERPT_AFTER,
    rank=None,
    root_cause=None,
):
    """The fields a failed wait returns (and a rescue records). ``rank``: the first failing
    rank of a burst (rule 5); ``root_cause``: its root-cause line (rule 6; default: ``line``);
    ``fallback``: true only for the stated fallback class (rule 6)."""
    return {
        "crash_class": entry["class"],
        "crash_line": line,
        "crash_line_number": line_number,
        "crash_rank": rank,
        "root_cause_line": root_cause if root_cause is not None else line,
        "fallback": entry["class"] == FALLBACK_CLASS,
        "excerpt": "\n".join(excerpt(lines, position, before, after)) if lines else "",
        "explanation": " ".join(str(entry.get("explanation", "")).split()),
        "remedy": " ".join(str(entry.get("remedy", "")).split()),
    }


def burst_report(catalog, lines, burst, first_number=1, before=DEFAULT_EXCERPT_BEFORE, after=DEFAULT_EXCERPT_AFTER):
    """The crash report of a classify_burst result; ``first_number`` is the line number of
    lines[0]. The root cause is searched in the burst (from burst_before lines above its first
    fatal line to the winning line's burst end), in the first failing rank's lines first."""
    position, entry = burst["position"], burst["entry"]
    low = burst["first_fatal"] - DEFAULT_BURST_BEFORE
    found = root_cause_line(
        lines,
        low,
        burst["first_fatal"] + DEFAULT_BURST_AFTER + 1,
        burst["rank"],
        errors=entry["rank"] != RANK_SPECIFIC,
        default=(position, lines[position].strip()),
    )
    return crash_report(
        entry,
        lines[position],
        lines,
        position,
        first_number + position,
        before,
        after,
        rank=burst["rank"] if is_rank(burst["rank"]) else None,
        root_cause=found[1] if found else None,
    )


def exited_match(catalog, lines, position):
    """Rule 7: the first (position, entry) of an `exited` catalog entry in the traceback that
    leads to the root-cause line at ``position`` (from the nearest "Traceback (most recent call
    last)" header at most TRACEBACK_WINDOW lines above it, else from EXITED_WINDOW lines above
    it), and, for a "Fatal Python error" root cause, in the faulthandler dump that follows it
    (the dead process's thread stacks), or None."""
    low = max(0, position - EXITED_WINDOW)
    for above in range(position, max(-1, position - TRACEBACK_WINDOW), -1):
        if TRACEBACK_HEADER_RE.search(lines[above]):
            low = above
            break
    high = position + 1
    if FATAL_PYTHON_RE.search(lines[position]):
        while high < len(lines) and high - position <= TRACEBACK_WINDOW:
            if not FAULTHANDLER_LINE_RE.match(_strip_prefixes(lines[high])):
                break
            high += 1
    entries = [entry for entry in catalog if entry.get("exited")]
    # an entry's `unless` (a frame of another process: the main process's launch path) anywhere in
    # the same traceback or dump vetoes it there
    vetoed = {
        entry["index"]
        for entry in entries
        if entry.get("unless_pattern") is not None
        and any(entry["unless_pattern"].search(lines[i]) for i in range(low, high))
    }
    for line_position in range(low, high):
        for entry in entries:
            if entry["index"] not in vetoed and entry["pattern"].search(lines[line_position]):
                if entry["near_pattern"] is not None and not _near(entry, lines, line_position):
                    continue
                return line_position, entry
    return None


def _near(entry, lines, position):
    low = max(0, position - entry["near_lines"])
    high = min(len(lines), position + entry["near_lines"] + 1)
    return any(entry["near_pattern"].search(lines[i]) for i in range(low, high))


def fallback_report(
    catalog, lines, exit_status=None, first_number=1, before=DEFAULT_EXCERPT_BEFORE, after=DEFAULT_EXCERPT_AFTER
):
    """Rules 6 and 7: the report of a dead process whose log matches no fatal entry: the class of
    an `exited` entry found in the root cause's traceback (rule 7: the process that died, e.g.
    scheduler_exception), else unclassified_crash; its root-cause line and the class's remedy
    (for the fallback: "report this log").
    ``exit_status``: the process's, when known (then named when the log has no line);
    ``first_number``: the line number of lines[0], None when unknown (a log tail)."""
    entry = signature_for_class(catalog, FALLBACK_CLASS) or {
        "class": FALLBACK_CLASS,
        "explanation": "The server died and no crash signature matched its log.",
        "remedy": "Report this log: add its cause to data/crash_signatures.yml.",
    }
    found = root_cause_line(lines)
    if found is None:
        line = None if exit_status is None else f"launch script exited rc={exit_status}"
        report = crash_report(entry, line, lines, 0, None, before, after)
    else:
        position, line = found
        rank = (line_ranks(lines, 0, position + 1) or [None])[-1]
        rank = rank if is_rank(rank) else None
        number = None if first_number is None else first_number + position
        exited = exited_match(catalog, lines, position)
        if exited is not None:
            frame, entry = exited
            number = None if first_number is None else first_number + frame
            report = crash_report(
                entry, lines[frame], lines, position, number, before, after, rank=rank, root_cause=line
            )
        else:
            report = crash_report(entry, line, lines, position, number, before, after, rank=rank)
    report["exit_status"] = exit_status
    return report


def classify_text(catalog, text):
    """Classify a whole log given as text: the crash report dict, or None when no fatal
    signature applies. For tools and tests."""
    lines = text.splitlines()
    burst = classify_burst(catalog, lines)
    if burst is None:
        return None
    return burst_report(catalog, lines, burst)


def classify_outcome(catalog, lines, exited=False):
    """What a log says happened (rule 4), as a dict:

    ``outcome``: "crashed" (a fatal signature applies), "stopped_by_sigterm" (no fatal line,
    but the log shows a requested stop: "SIGTERM received ... Draining requests" and what SGLang
    prints after it) or "clean" (neither; a healthy or still-starting log);
    ``fatal``: true only for "crashed";
    ``report``: the crash_report of the crash, or of the stop's first line, or None.
    ``exited``: whether the process is known to have died (the ready-wait knows it from the
    pid). A dead process with no fatal line and no stop is "crashed" with the fallback class
    (rule 6); a live one (or one not known dead) stays "clean".
    The ready-wait itself only acts on fatal lines; this is for reading a log after the fact
    (tools/crash_corpus.py, a rescue, the tests).
    """
    burst = classify_burst(catalog, lines)
    if burst is not None:
        return {"outcome": OUTCOME_CRASHED, "fatal": True, "report": burst_report(catalog, lines, burst)}
    seen = set()
    for position, line in enumerate(lines):
        entry = match_line(catalog, line, seen)
        if entry is not None and entry["outcome"] == STOPPED_OUTCOME:
            report = crash_report(entry, line, lines, position, position + 1)
            return {"outcome": OUTCOME_STOPPED, "fatal": False, "report": report}
        update_after_seen(catalog, line, seen)
    if exited:
        return {"outcome": OUTCOME_CRASHED, "fatal": True, "report": fallback_report(catalog, lines)}
    return {"outcome": OUTCOME_CLEAN, "fatal": False, "report": None}
