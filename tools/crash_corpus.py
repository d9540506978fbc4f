#!/usr/bin/env python3
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Score the crash-signature catalogue on the corpus of real SGLang logs.

    python tools/crash_corpus.py                # per-class precision/recall, accuracy, confusions
    python tools/crash_corpus.py --evidence     # also: where each catalogue regex is proven
    python tools/crash_corpus.py --json out.json

The corpus is tests/fixtures/crashlogs/ (index.yml lists each log, its source, the SGLang
version and the expected class; docs/crash-corpus.md explains it). A log is scored by
sglang_crash.classify_outcome: a crash gives its class, a requested stop gives
stopped_by_sigterm, a clean log gives "none" (what `healthy` and `hang` logs must give).

Exit status: 1 when a healthy/hang/stopped log is flagged as a crash, or when the accuracy is
below the index's committed_accuracy; else 0. The same functions back
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


def evaluate(catalog, index, root=CORPUS):
    """One result dict per corpus log: file, expected, want, got, line (the deciding line)."""
    results = []
    for item in index["logs"]:
        outcome = sglang_crash.classify_outcome(catalog, read_log(item["file"], root))
        report = outcome["report"] or {}
        results.append(
            {
                "file": item["file"],
                "expected": item["expected"],
                "sglang_version": str(item["sglang_version"]),
                "want": wanted(item["expected"]),
                "got": got_label(outcome),
                "line": report.get("crash_line"),
                "line_number": report.get("crash_line_number"),
            }
        )
    return results


def score(results):
    """Per-label precision/recall, overall accuracy, confusions, flagged no-crash logs."""
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
    return {
        "logs": len(results),
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
    """Sizes the report quotes: logs, classes, stated releases, no-crash logs."""
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
    }


# --------------------------------------------------------------------------- regex evidence

_FILLS = ("0", "-9", "True", "False", "x")
_PLACEHOLDER = "\x00"
_FORMAT_FIELD = re.compile(r"%[-#0-9.]*[sdrif]|\{[^{}]*\}")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{3,}")


def regex_items(entries):
    """Every regex of the raw catalogue entries: (class, field, regex) for each item of
    `regex`, `after` and `near` (a list counts item by item)."""
    items = []
    for entry in entries:
        for field in ("regex", "after", "near"):
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
    ("wheel", "<version> <path>"), or None. ``corpus_lines`` is [(file, line_number, text)];
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


def pinned_wheels(cache=WHEEL_CACHE, versions=PINNED_WHEELS):
    """{version: wheel path} for the pinned versions present in the cache."""
    found = {}
    for version in versions:
        wheels = sorted((cache / version).glob("sglang-*.whl"))
        if wheels:
            found[version] = wheels[0]
    return found


def corpus_lines(index, root=CORPUS):
    return [(item["file"], n, text) for item in index["logs"] for n, text in enumerate(read_log(item["file"], root), 1)]


# --------------------------------------------------------------------------- report


def _pct(value):
    return "   -  " if value is None else f"{100 * value:5.1f}%"


def render(summary, scores, evidence=None):
    out = []
    versions = ", ".join(f"{v} ({n})" for v, n in summary["stated_versions"].items())
    out.append(
        f"corpus: {summary['logs']} logs, {len(summary['crash_classes'])} crash classes, "
        f"{summary['no_crash_logs']} healthy/hang/stopped logs; stated releases: {versions}"
    )
    out.append("")
    out.append(f"{'class (expected label)':32} {'logs':>4} {'got':>4} {'precision':>9} {'recall':>7}")
    for label, row in scores["per_label"].items():
        name = "none (healthy / hang)" if label == NO_CRASH else label
        out.append(
            f"{name:32} {row['support']:4d} {row['predicted']:4d}   {_pct(row['precision'])}  {_pct(row['recall'])}"
        )
    out.append("")
    out.append(f"accuracy: {scores['correct']}/{scores['logs']} = {100 * scores['accuracy']:.1f}%")
    if scores["confusions"]:
        out.append("confusions (expected -> got, file, deciding line):")
        for r in scores["confusions"]:
            line = (r["line"] or "")[:120]
            out.append(f"  {r['want']} -> {r['got']}  {r['file']}  {line}")
    else:
        out.append("confusions: none")
    if scores["flagged_no_crash"]:
        out.append("FLAGGED healthy/hang/stopped logs:")
        for r in scores["flagged_no_crash"]:
            out.append(f"  {r['file']} -> {r['got']}: {r['line']}")
    if evidence is not None:
        out.append("")
        out.append("regex evidence (class field: regex -> where):")
        for (cls, field, regex), where in evidence.items():
            shown = "MISSING" if where is None else f"{where[0]} {where[1]}"
            out.append(f"  {cls} {field}: {regex}  ->  {shown}")
    return "\n".join(out)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--evidence", action="store_true", help="also show where each regex is proven")
    parser.add_argument("--json", metavar="PATH", help="write the results as JSON")
    args = parser.parse_args(argv)

    import yaml

    entries = yaml.safe_load(CATALOG.read_text(encoding="utf-8"))
    catalog = sglang_crash.compile_catalog(entries)
    index = load_index()
    results = evaluate(catalog, index)
    scores = score(results)
    summary = corpus_summary(index)
    evidence = regex_evidence(entries, corpus_lines(index), pinned_wheels()) if args.evidence else None
    print(render(summary, scores, evidence))
    committed = float(index["committed_accuracy"])
    print(f"committed accuracy: {100 * committed:.1f}%")
    if args.json:
        payload = {"summary": summary, "scores": scores, "results": results}
        Path(args.json).write_text(json.dumps(payload, indent=2, default=str) + "\n", encoding="utf-8")
    failed = bool(scores["flagged_no_crash"]) or scores["accuracy"] < committed
    if evidence is not None and any(where is None for where in evidence.values()):
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
