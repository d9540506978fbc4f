#!/usr/bin/env python3
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Check every tier's final argv against SGLang's own options, per version.

For each tier of data/tiers.yml (baseline + tier difference, no host
overrides) and each flag manifest in data/flag_manifests/, report OK, FAIL with
the reasons (unknown flag with a did-you-mean, bad choice, missing value,
duplicate, known-incompatible combination), deprecation warnings, or n/a for a
tier that is not runnable. Prints a tiers x versions matrix, then the details.

Exit status: 0 when every runnable tier passes on the pinned version
(data/baseline.yml sglang_version); 1 when one fails there; 2 when the catalog
itself is invalid. Other versions are informational unless --strict.

    tools/check_tiers.py                      # matrix, pinned must pass
    tools/check_tiers.py --strict             # every version must pass
    tools/check_tiers.py --manifest-dir DIR   # e.g. manifests of many releases
    tools/check_tiers.py --json               # machine-readable result
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "plugins" / "module_utils"))

import sglang_tiers as st  # noqa: E402


def version_key(version: str) -> tuple:
    try:
        from packaging.version import Version

        return (0, Version(version))
    except Exception:  # noqa: BLE001 - unparsable versions sort last, by text
        return (1, tuple(int(p) if p.isdigit() else p for p in re.split(r"[.]", version)))


def load_manifests(paths: list[Path]) -> list[dict[str, Any]]:
    manifests = [json.loads(p.read_text()) for p in paths]
    return sorted(manifests, key=lambda m: version_key(m["sglang_version"]))


def known_ids(path: Path, key: str) -> set[str] | None:
    """Ids from another data file (crash classes, patch ids), or None when absent."""
    if not path.is_file():
        return None
    doc = yaml.safe_load(path.read_text()) or {}
    items = doc.get(key, doc) if isinstance(doc, dict) else doc
    if isinstance(items, dict):
        return {str(k) for k in items}
    out = set()
    for item in items or []:
        if isinstance(item, dict):
            for field in ("class", "id", "name"):
                if field in item:
                    out.add(str(item[field]))
                    break
        else:
            out.add(str(item))
    return out


def cross_reference(catalog: dict[str, Any], data_dir: Path) -> tuple[list[str], list[str]]:
    """expected_failure_class vs data/crash_signatures.yml; patches vs data/patches.yml."""
    errors, notes = [], []
    classes = known_ids(data_dir / "crash_signatures.yml", "signatures")
    patches = known_ids(data_dir / "patches.yml", "patches")
    for tid, tier in catalog["tiers"].items():
        cls = tier.get("expected_failure_class")
        if cls and classes is not None and cls not in classes:
            errors.append(f"tier '{tid}': expected_failure_class '{cls}' is not a class in data/crash_signatures.yml")
        for pid in tier.get("patches") or []:
            if patches is not None and pid not in patches:
                errors.append(f"tier '{tid}': patch '{pid}' is not defined in data/patches.yml")
    if classes is None:
        notes.append("data/crash_signatures.yml not found: expected_failure_class not cross-checked")
    if patches is None:
        notes.append("data/patches.yml not found: patch ids not cross-checked")
    return errors, notes


def run(args: argparse.Namespace) -> tuple[int, dict[str, Any]]:
    data_dir = args.data_dir
    baseline = yaml.safe_load((data_dir / "baseline.yml").read_text())
    catalog = yaml.safe_load((data_dir / "tiers.yml").read_text())
    schema = json.loads((data_dir / "tier_schema.json").read_text())
    pinned = args.pinned or baseline.get("sglang_version")
    paths = list(args.manifest) or sorted(args.manifest_dir.glob("sglang-*.json"))
    manifests = load_manifests(paths)
    history_path = next(
        (p for p in (args.manifest_dir / "history.json", data_dir / "flag_manifests" / "history.json") if p.is_file()),
        None,
    )
    history = json.loads(history_path.read_text()) if history_path else None
    result: dict[str, Any] = {"pinned": pinned, "versions": [m["sglang_version"] for m in manifests], "cells": {}}
    errors = st.catalog_errors(catalog, baseline, schema)
    xref_errors, notes = cross_reference(catalog, data_dir) if not errors else ([], [])
    result["catalog_errors"] = errors + xref_errors
    result["notes"] = notes
    if result["catalog_errors"]:
        return 2, result
    if pinned not in result["versions"]:
        result["catalog_errors"].append(
            f"no manifest for the pinned version {pinned} in {args.manifest_dir}: "
            f"run tools/build_flag_manifest.py --version {pinned}"
        )
        return 2, result
    tiers = catalog["tiers"]
    selected = args.tier or list(tiers)
    failed_pinned = failed_any = False
    for tid in selected:
        if tid not in tiers:
            result["catalog_errors"].append(f"unknown tier '{tid}'; known tiers: {', '.join(tiers)}")
            return 2, result
        tier = tiers[tid]
        row: dict[str, Any] = {}
        for manifest in manifests:
            version = manifest["sglang_version"]
            if not tier.get("runnable"):
                row[version] = {"status": "n/a", "reason": f"level {tier.get('level')}, not runnable"}
                continue
            composed = st.compose(baseline, tier if tid != "baseline" else {})
            checked = st.check_argv(composed["argv"], manifest, catalog.get("constraints") or [], history)
            status = "FAIL" if checked["errors"] else "OK"
            row[version] = {"status": status, **checked}
            if status == "FAIL":
                failed_any = True
                failed_pinned |= version == pinned
        result["cells"][tid] = row
    code = 1 if failed_pinned or (args.strict and failed_any) else 0
    return code, result


def cell_text(cell: dict[str, Any]) -> str:
    if cell["status"] == "n/a":
        return f"n/a ({cell['reason']})"
    parts = []
    if cell.get("errors"):
        parts.append(f"{len(cell['errors'])} error{'s' if len(cell['errors']) != 1 else ''}")
    if cell.get("warnings"):
        parts.append(f"{len(cell['warnings'])} warning{'s' if len(cell['warnings']) != 1 else ''}")
    first = ""
    if cell.get("errors"):
        first = ": " + cell["errors"][0].split(":")[0]
    return cell["status"] + (f" ({', '.join(parts)})" if parts else "") + first


def render_text(code: int, result: dict[str, Any], details: bool = True) -> str:
    out = []
    if result["catalog_errors"]:
        out.append("The tier catalog is invalid:")
        out += [f"  - {e}" for e in result["catalog_errors"]]
        return "\n".join(out)
    versions = result["versions"]
    heads = [f"{v} (pinned)" if v == result["pinned"] else v for v in versions]
    rows = [[tid] + [cell_text(row[v]) for v in versions] for tid, row in result["cells"].items()]
    widths = [max(len(r[i]) for r in rows + [["tier"] + heads]) for i in range(len(heads) + 1)]
    line = lambda cols: "  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip()  # noqa: E731
    out.append(line(["tier"] + heads))
    out.append(line(["-" * w for w in widths]))
    out += [line(r) for r in rows]
    if details:
        for v in versions:
            for tid, row in result["cells"].items():
                cell = row[v]
                if cell["status"] == "n/a" or not (cell.get("errors") or cell.get("warnings")):
                    continue
                out.append("")
                out.append(f"[{v}{' pinned' if v == result['pinned'] else ''}] {tid}: {cell['status']}")
                out += [f"  error:   {e}" for e in cell.get("errors", [])]
                out += [f"  warning: {w}" for w in cell.get("warnings", [])]
    for note in result.get("notes", []):
        out.append(f"note: {note}")
    verdict = (
        f"pinned SGLang {result['pinned']}: every runnable tier passes"
        if code == 0
        else f"FAILED: see the errors above (pinned {result['pinned']}{', --strict' if code == 1 else ''})"
    )
    out.append("")
    out.append(verdict)
    return "\n".join(out)


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, default=REPO / "data")
    ap.add_argument("--manifest-dir", type=Path, default=REPO / "data" / "flag_manifests")
    ap.add_argument("--manifest", type=Path, action="append", default=[], help="a manifest file (repeatable)")
    ap.add_argument("--pinned", help="version that must pass (default: data/baseline.yml sglang_version)")
    ap.add_argument("--strict", action="store_true", help="fail when any version fails, not only the pinned one")
    ap.add_argument("--tier", action="append", help="check only this tier (repeatable)")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    ap.add_argument("--no-details", action="store_true", help="matrix only")
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    code, result = run(args)
    if args.json:
        print(json.dumps({"exit": code, **result}, indent=1))
    else:
        print(render_text(code, result, details=not args.no_details))
    return code


if __name__ == "__main__":
    sys.exit(main())
