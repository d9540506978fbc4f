#!/usr/bin/env python3
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Score the crash-signature catalogue on the corpus of real SGLang logs.

    python tools/crash_corpus.py                # per-class fit and held-out recall, confusions
    python tools/crash_corpus.py --evidence     # also: where each regex is proven, per release
    python tools/crash_corpus.py --catalog OLD.yml   # score another catalogue (the held-out
                                                     # figure before a change: git show REV:...)
    python tools/crash_corpus.py --json out.json

The corpus is tests/fixtures/crashlogs/ (index.yml lists each log, its source, the SGLang
version and the expected class; docs/crash-corpus.md explains it). A log is scored by
sglang_crash.classify_outcome: a crash gives its class, a requested stop gives
stopped_by_sigterm, a clean log gives "none" (what `healthy` and `hang` logs must give). The
index splits the logs by source into `fit` (what the catalogue was built from) and `heldout`
(never used to change it); both are scored, per class, side by side. A crash log is read as
the ready-wait reads the log of a dead process (exited=True): no signature gives the stated
fallback `unclassified_crash`, counted apart; healthy and hang logs are read as the log of a
live process.

Exit status: 1 when a healthy/hang/stopped log is flagged as a crash, when the fit accuracy is
below the index's committed_accuracy, a held-out cohort's accuracy below its
committed_heldout_floors entry or its fallbacks above its committed_heldout_fallback_ceilings
entry, when one source has logs on both sides of the split (or a held-out log has no cohort), or
(--evidence) when a regex lacks evidence; else 0. The same functions back
tests/unit/test_crash_corpus.py, including the regex-evidence check against the pinned wheels
(.cache/sglang-wheels/<version>/*.whl, read as zip files).
"""

from __future__ import annotations

import argparse
import ast
import itertools
import json
import re
import sys
import warnings
import zipfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins" / "module_utils"))

import sglang_crash  # noqa: E402  (standard library only; the path is set just above)

CATALOG = ROOT / "data" / "crash_signatures.yml"
CORPUS = ROOT / "tests" / "fixtures" / "crashlogs"
INDEX = CORPUS / "index.yml"
WHEEL_CACHE = ROOT / ".cache" / "sglang-wheels"
# The wheels whose source proves a regex: the pin, the release the H200 recordings ran, 0.5.23.
PINNED_WHEELS = ("0.5.10.post1", "0.5.17", "0.5.23")
# Expected labels that are not crashes: the classifier must say "none" (or the stop) for them.
NO_CRASH = "none"
NOT_FLAGGED = {"healthy": NO_CRASH, "hang": NO_CRASH, "stopped_by_sigterm": "stopped_by_sigterm"}
# Expected labels of a process that is still running when its log is read (no fallback).
ALIVE = ("healthy", "hang")
SPLITS = ("fit", "heldout")
FALLBACK = sglang_crash.FALLBACK_CLASS


# --------------------------------------------------------------------------- corpus


def load_index(path=INDEX):
    import yaml

    with open(path, encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def read_log(relative, root=CORPUS):
    """A corpus log's lines (bytes decoded as SGLang's logs are: UTF-8, bad bytes replaced)."""
    return (root / relative).read_bytes().decode("utf-8", "replace").splitlines()


def wanted(expected):
    """The label the classifier must give a log of this expected class."""
    return NOT_FLAGGED.get(expected, expected)


def got_label(outcome):
    if outcome["outcome"] == sglang_crash.OUTCOME_CRASHED:
        return outcome["report"]["crash_class"]
    if outcome["outcome"] == sglang_crash.OUTCOME_STOPPED:
        return "stopped_by_sigterm"
    return NO_CRASH


def source_key(source):
    """The source a log came from, for the split: the issue / PR / page URL without its
    fragment, or a recording's folder (one recording session is one source)."""
    text = str(source).split(" (")[0].split("#")[0].strip()
    if text.startswith("http"):
        return text.rstrip("/")
    return text.rsplit("/", 1)[0] if "/recordings/" in text else text


def split_problems(index):
    """Sources with logs on both sides of the split, and logs without a valid split."""
    sides, problems = {}, []
    for item in index["logs"]:
        if item.get("split") not in SPLITS:
            problems.append(f"{item['file']}: split {item.get('split')!r} is not one of {SPLITS}")
            continue
        if (item["split"] == "heldout") != isinstance(item.get("cohort"), int):
            problems.append(f"{item['file']}: a held-out log has a cohort (an int), a fit log none")
        sides.setdefault(source_key(item["source"]), set()).add(item["split"])
    problems += [f"{key}: logs in both fit and heldout" for key, both in sides.items() if len(both) > 1]
    return problems


def evaluate(catalog, index, root=CORPUS):
    """One result dict per corpus log: file, split, expected, want, got, line (the deciding
    line), rank (the first failing rank), fallback, ranks (the ranks the log names)."""
    results = []
    for item in index["logs"]:
        lines = read_log(item["file"], root)
        exited = item["expected"] not in ALIVE
        outcome = sglang_crash.classify_outcome(catalog, lines, exited=exited)
        report = outcome["report"] or {}
        results.append(
            {
                "file": item["file"],
                "split": item.get("split"),
                "cohort": item.get("cohort"),
                "expected": item["expected"],
                "sglang_version": str(item["sglang_version"]),
                "want": wanted(item["expected"]),
                "got": got_label(outcome),
                "line": report.get("crash_line"),
                "line_number": report.get("crash_line_number"),
                "rank": report.get("crash_rank"),
                "root_cause": report.get("root_cause_line"),
                "fallback": bool(report.get("fallback")) and outcome["outcome"] == sglang_crash.OUTCOME_CRASHED,
                "ranks": sorted({r for r in sglang_crash.line_ranks(lines) if sglang_crash.is_rank(r)}),
            }
        )
    return results


def distinct_ranks(ranks):
    """The processes behind rank names: torch's "[rank3]:" and SGLang's "TP3" in one log are one
    process (a TP-only server: torch's global rank is the TP rank), so they count once."""
    names = set(ranks)
    return {f"TP{name[4:]}" if name.startswith("rank") and f"TP{name[4:]}" in names else name for name in names}


def is_burst(result):
    """A multi-rank burst: a crash log whose lines name two ranks or more (TP/DP/EP ranks, the
    detokenizer, the tokenizer manager; the main process's rank-less lines do not count, nor a
    torch "[rankN]:" beside SGLang's "TPN")."""
    return result["expected"] not in NOT_FLAGGED and len(distinct_ranks(result["ranks"])) >= 2


def score_splits(results):
    """score() of the whole corpus, of each split and of each held-out cohort: {"all": ...,
    "fit": ..., "heldout": ..., "cohorts": {1: ..., 2: ...}}."""
    scores = {"all": score(results)}
    for split in SPLITS:
        scores[split] = score([r for r in results if r["split"] == split])
    cohorts = sorted({r["cohort"] for r in results if r["split"] == "heldout" and r.get("cohort") is not None})
    scores["cohorts"] = {
        c: score([r for r in results if r["split"] == "heldout" and r.get("cohort") == c]) for c in cohorts
    }
    return scores


def floor_problems(index, scores):
    """The committed floors the scores break: the fit accuracy below committed_accuracy, a
    held-out cohort's accuracy below its committed_heldout_floors entry or its fallback count
    above its committed_heldout_fallback_ceilings entry (a cohort without a floor is a problem)."""
    problems = []
    committed = float(index["committed_accuracy"])
    if scores["fit"]["accuracy"] < committed:
        problems.append(f"fit accuracy {scores['fit']['accuracy']:.3f} < committed_accuracy {committed}")
    floors = index.get("committed_heldout_floors") or {}
    ceilings = index.get("committed_heldout_fallback_ceilings") or {}
    for cohort, part in scores["cohorts"].items():
        if cohort not in floors or cohort not in ceilings:
            problems.append(f"held-out cohort {cohort} has no committed floor or fallback ceiling")
            continue
        if part["accuracy"] < float(floors[cohort]):
            problems.append(f"held-out cohort {cohort}: accuracy {part['accuracy']:.3f} < floor {floors[cohort]}")
        if len(part["fallbacks"]) > int(ceilings[cohort]):
            count = len(part["fallbacks"])
            problems.append(f"held-out cohort {cohort}: {count} fallbacks > ceiling {ceilings[cohort]}")
    return problems


def score(results):
    """Per-label precision/recall, overall accuracy, confusions, flagged no-crash logs,
    fallbacks (crash logs given the fallback class) and the crash-log count."""
    labels = sorted({r["want"] for r in results} | {r["got"] for r in results})
    per_label = {}
    for label in labels:
        tp = sum(1 for r in results if r["want"] == label and r["got"] == label)
        predicted = sum(1 for r in results if r["got"] == label)
        actual = sum(1 for r in results if r["want"] == label)
        per_label[label] = {
            "support": actual,
            "predicted": predicted,
            "precision": tp / predicted if predicted else None,
            "recall": tp / actual if actual else None,
        }
    correct = sum(1 for r in results if r["want"] == r["got"])
    confusions = [r for r in results if r["want"] != r["got"]]
    flagged = [r for r in results if r["expected"] in NOT_FLAGGED and r["got"] not in NOT_FLAGGED.values()]
    crashes = [r for r in results if r["expected"] not in NOT_FLAGGED]
    return {
        "logs": len(results),
        "crashes": len(crashes),
        "fallbacks": [r for r in crashes if r["fallback"]],
        "bursts": [r for r in results if is_burst(r)],
        "correct": correct,
        "accuracy": correct / len(results) if results else 0.0,
        "per_label": per_label,
        "confusions": confusions,
        "flagged_no_crash": flagged,
    }


def _version_key(version):
    """Sort releases numerically (0.5.4 before 0.5.17); non-numeric tags last."""
    parts = re.findall(r"\d+|[a-z]+", version)
    return (not version[:1].isdigit(), [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in parts])


def corpus_summary(index):
    """Sizes the report quotes: logs, sources, classes, stated releases, no-crash logs, split."""
    logs = index["logs"]
    crash_classes = {item["expected"] for item in logs if item["expected"] not in NOT_FLAGGED}
    versions = Counter(
        str(item["sglang_version"]).split()[0] for item in logs if not str(item["sglang_version"]).startswith("unknown")
    )
    return {
        "logs": len(logs),
        "crash_classes": sorted(crash_classes),
        "stated_versions": dict(sorted(versions.items(), key=lambda kv: _version_key(kv[0]))),
        "no_crash_logs": sum(1 for item in logs if item["expected"] in NOT_FLAGGED),
        "sources": len({source_key(item["source"]) for item in logs}),
        "split": dict(Counter(str(item.get("split")) for item in logs)),
        "heldout_sources": len({source_key(i["source"]) for i in logs if i.get("split") == "heldout"}),
    }


# --------------------------------------------------------------------------- regex evidence

_FILLS = ("0", "-9", "True", "False", "x")
_PLACEHOLDER = "\x00"
_FORMAT_FIELD = re.compile(r"%[-#0-9.]*[sdrif]|\{[^{}]*\}")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


def regex_items(entries):
    """Every regex of the raw catalogue entries: (class, field, regex) for each item of
    `regex`, `after`, `near` and `unless` (a list counts item by item)."""
    items = []
    for entry in entries:
        for field in ("regex", "after", "near", "unless"):
            value = entry.get(field)
            if value is None:
                continue
            for regex in value if isinstance(value, list) else [value]:
                items.append((entry["class"], field, regex))
    return items


def _literal_words(regex):
    """The words of the regex's literal runs (to pick the source files worth parsing)."""
    try:
        import re._parser as sre_parse  # Python 3.11+
    except ImportError:  # pragma: no cover
        import sre_parse  # type: ignore[no-redef]
    runs, run = [], []
    for op, arg in sre_parse.parse(regex):
        if str(op) == "LITERAL":
            run.append(chr(arg))
        else:
            runs.append("".join(run))
            run = []
    runs.append("".join(run))
    return [word for text in runs for word in _WORD.findall(text)]


def _render(node):
    """A string node as (text with placeholders, number of placeholders), or None."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text = _FORMAT_FIELD.sub(_PLACEHOLDER, node.value)
        return text, text.count(_PLACEHOLDER)
    if isinstance(node, ast.JoinedStr):
        parts = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts.append(value.value.replace(_PLACEHOLDER, ""))
            else:
                parts.append(_PLACEHOLDER)
        text = "".join(parts)
        return text, text.count(_PLACEHOLDER)
    return None


def _fillings(text, count):
    """The placeholder text with the placeholders filled: every combination of _FILLS for up
    to three placeholders, else one fill for all."""
    pieces = text.split(_PLACEHOLDER)
    combos = itertools.product(_FILLS, repeat=count) if count <= 3 else ((fill,) * count for fill in _FILLS)
    for combo in combos:
        out = [pieces[0]]
        for fill, piece in zip(combo, pieces[1:], strict=True):
            out.append(fill)
            out.append(piece)
        yield "".join(out)


def wheel_strings(wheel, word_sets):
    """{source file: [(text, placeholders)]} for the string literals of the wheel's .py files
    in which every word of one of ``word_sets`` occurs (raw bytes checked first, so few files
    are parsed)."""
    found = {}
    encoded = [[word.encode() for word in words] for words in word_sets]
    keywords = {word for words in word_sets for word in words}
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if not name.endswith(".py"):
                continue
            data = archive.read(name)
            if not any(all(word in data for word in words) for words in encoded):
                continue
            try:
                with warnings.catch_warnings():  # a wheel file's own invalid escapes are not ours to report
                    warnings.simplefilter("ignore", SyntaxWarning)
                    tree = ast.parse(data)
            except (SyntaxError, ValueError):
                continue
            strings = []
            for node in ast.walk(tree):
                rendered = _render(node)
                if rendered and any(word in rendered[0] for word in keywords):
                    strings.append(rendered)
            if strings:
                found[name] = strings
    return found


def regex_evidence(entries, corpus_lines, wheels):
    """For each regex of the catalogue, where it is proven: ("corpus", "file:line") or
    ("wheel", "<version> <path>"), or None. ``corpus_lines`` is [(file, line_number, text)] (the
    fit logs' lines, see corpus_lines);
    ``wheels`` is {version: wheel path}. The corpus is tried first (it is cheap)."""
    items = regex_items(entries)
    evidence = {}
    pending = []
    for item in items:
        pattern = re.compile(item[2])
        hit = next((f"{f}:{n}" for f, n, text in corpus_lines if pattern.search(text)), None)
        evidence[item] = ("corpus", hit) if hit else None
        if hit is None:
            pending.append(item)
    if not pending:
        return evidence
    for version, wheel in wheels.items():
        if not pending:
            break
        word_sets = [words for words in (set(_literal_words(regex)) for _c, _f, regex in pending) if words]
        strings = wheel_strings(wheel, word_sets)
        for item in list(pending):
            pattern = re.compile(item[2])
            for name, texts in strings.items():
                if any(pattern.search(filled) for text, count in texts for filled in _fillings(text, count)):
                    evidence[item] = ("wheel", f"{version} {name}")
                    pending.remove(item)
                    break
    return evidence


def release_wording(entries, wheels):
    """Each regex of the catalogue against the source of EVERY supported release: {(class,
    field, regex): {version: source file that prints it, or None}}. A regex that no release
    prints can only be proven by a corpus log (a message of torch, NCCL, CUDA, argparse or
    Hugging Face, or the wording of a release we do not support); unprinted() lists them."""
    items = regex_items(entries)
    word_sets = [words for words in (set(_literal_words(regex)) for _c, _f, regex in items) if words]
    table = {item: {} for item in items}
    for version, wheel in wheels.items():
        # Every string of the release filled once, not once per regex (67 regexes: 45 s -> 1 s).
        filled = [
            (name, [text for literal, count in texts for text in _fillings(literal, count)])
            for name, texts in wheel_strings(wheel, word_sets).items()
        ]
        for item in items:
            search = re.compile(item[2]).search
            table[item][version] = next(
                (name for name, texts in filled if any(search(text) for text in texts)), None)
    return table


def unprinted(wording):
    """The regexes of release_wording() that no supported release prints."""
    return [item for item, where in wording.items() if where and not any(where.values())]


def pinned_wheels(cache=WHEEL_CACHE, versions=PINNED_WHEELS):
    """{version: wheel path} for the pinned versions present in the cache."""
    found = {}
    for version in versions:
        wheels = sorted((cache / version).glob("sglang-*.whl"))
        if wheels:
            found[version] = wheels[0]
    return found


def corpus_lines(index, root=CORPUS, splits=("fit",)):
    """The lines that may prove a regex: those of the fit logs only. A held-out log never teaches
    the catalogue, so it cannot be a regex's evidence either (docs/crash-corpus.md)."""
    return [
        (item["file"], n, text)
        for item in index["logs"]
        if item.get("split") in splits
        for n, text in enumerate(read_log(item["file"], root), 1)
    ]


# --------------------------------------------------------------------------- report


def _pct(value):
    return "   -  " if value is None else f"{100 * value:5.1f}%"


def _cell(row):
    """'correct/logs' of a label in one split, or '-'."""
    if not row or not row["support"]:
        return "-"
    return f"{round(row['recall'] * row['support'])}/{row['support']}"


def _accuracy(scores):
    return f"{scores['correct']}/{scores['logs']} = {100 * scores['accuracy']:.1f}%" if scores["logs"] else "-"


def render(summary, scores, evidence=None, wording=None):
    """The report: sizes, per-class recall in fit and held-out side by side, accuracy per split,
    fallbacks, bursts, confusions, flagged logs, and (with the wheels) evidence and wording."""
    out = []
    versions = ", ".join(f"{v} ({n})" for v, n in summary["stated_versions"].items())
    split = summary["split"]
    out.append(
        f"corpus: {summary['logs']} logs from {summary['sources']} sources, "
        f"{len(summary['crash_classes'])} crash classes, {summary['no_crash_logs']} healthy/hang/stopped logs; "
        f"split: {split.get('fit', 0)} fit, {split.get('heldout', 0)} held out "
        f"({summary['heldout_sources']} sources)"
    )
    out.append(f"stated releases: {versions}")
    out.append("")
    fit, held = scores["fit"]["per_label"], scores["heldout"]["per_label"]
    out.append(f"{'class (expected label)':30} {'fit':>7} {'heldout':>8} {'precision (all)':>16}")
    for label, row in scores["all"]["per_label"].items():
        if not row["support"] and label != FALLBACK:
            continue
        name = "none (healthy / hang)" if label == NO_CRASH else label
        out.append(f"{name:30} {_cell(fit.get(label)):>7} {_cell(held.get(label)):>8} {_pct(row['precision']):>16}")
    out.append("")
    out.append(f"fit accuracy:      {_accuracy(scores['fit'])}")
    out.append(f"held-out accuracy: {_accuracy(scores['heldout'])}")
    for cohort, part in scores.get("cohorts", {}).items():
        share = f", {len(part['fallbacks'])} fallbacks" if part["crashes"] else ""
        out.append(f"  held-out cohort {cohort}: {_accuracy(part)}{share}")
    out.append(f"all:               {_accuracy(scores['all'])}")
    for name in SPLITS:
        part = scores[name]
        share = f" = {100 * len(part['fallbacks']) / part['crashes']:.1f}% of its crashes" if part["crashes"] else ""
        out.append(f"fallbacks ({FALLBACK}) in {name}: {len(part['fallbacks'])}{share}")
        for r in part["fallbacks"]:
            out.append(f"  {r['file']}  root cause: {(r['root_cause'] or '')[:110]}")
    bursts = scores["all"]["bursts"]
    out.append(f"multi-rank bursts: {len(bursts)}")
    for r in bursts:
        out.append(f"  {r['file']}: ranks {', '.join(r['ranks'])}; first failing: {r['rank']} -> {r['got']}")
    if scores["all"]["confusions"]:
        out.append("confusions (split: expected -> got, file, deciding line):")
        for r in scores["all"]["confusions"]:
            line = (r["line"] or "")[:110]
            out.append(f"  {r['split']}: {r['want']} -> {r['got']}  {r['file']}  {line}")
    else:
        out.append("confusions: none")
    if scores["all"]["flagged_no_crash"]:
        out.append("FLAGGED healthy/hang/stopped logs:")
        for r in scores["all"]["flagged_no_crash"]:
            out.append(f"  {r['file']} -> {r['got']}: {r['line']}")
    if evidence is not None:
        out.append("")
        out.append("regex evidence (class field: regex -> where):")
        for (cls, field, regex), where in evidence.items():
            shown = "MISSING" if where is None else f"{where[0]} {where[1]}"
            out.append(f"  {cls} {field}: {regex}  ->  {shown}")
    if wording is not None:
        releases = sorted({v for where in wording.values() for v in where}, key=_version_key)
        out.append("")
        out.append(f"wording per supported release ({', '.join(releases)}: + prints it, . does not):")
        for (cls, field, regex), where in wording.items():
            marks = " ".join("+" if where.get(v) else "." for v in releases)
            out.append(f"  {marks}  {cls} {field}: {regex}")
        missing = unprinted(wording)
        out.append(f"printed by NO supported release ({len(missing)}; proven by corpus logs only):")
        for cls, field, regex in missing:
            out.append(f"  {cls} {field}: {regex}")
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evidence", action="store_true", help="also show where each regex is proven, per release")
    parser.add_argument("--catalog", metavar="PATH", default=str(CATALOG), help="the catalogue to score")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    args = parser.parse_args(argv)

    import yaml

    entries = yaml.safe_load(Path(args.catalog).read_text(encoding="utf-8"))
    catalog = sglang_crash.compile_catalog(entries)
    index = load_index()
    results = evaluate(catalog, index)
    scores = score_splits(results)
    summary = corpus_summary(index)
    evidence = wording = None
    if args.evidence:
        wheels = pinned_wheels()
        evidence = regex_evidence(entries, corpus_lines(index), wheels)
        wording = release_wording(entries, wheels)
    print(render(summary, scores, evidence, wording))
    floors = ", ".join(
        f"cohort {c} {100 * float(f):.1f}% / <= {index.get('committed_heldout_fallback_ceilings', {}).get(c)} fallbacks"
        for c, f in (index.get("committed_heldout_floors") or {}).items()
    )
    print(f"committed floors: {100 * float(index['committed_accuracy']):.1f}% (fit); held out: {floors}")
    problems = split_problems(index)
    for problem in problems:
        print(f"SPLIT: {problem}")
    below = floor_problems(index, scores)
    for problem in below:
        print(f"FLOOR: {problem}")
    if args.json:
        payload = {"summary": summary, "scores": scores, "results": results}
        Path(args.json).write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    failed = bool(scores["all"]["flagged_no_crash"]) or bool(below) or bool(problems)
    if evidence is not None and any(where is None for where in evidence.values()):
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
