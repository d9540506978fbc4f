#!/usr/bin/env python3
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Two revisions' simulator cycle overhead, interleaved: does a change make the cycle cheaper?

`make perf` measures one tree against the by-hand anchor; on a shared 2-core machine its absolute
figure moves by 2-3 s with the machine's state (the anchor, whose code never changes, read 14.8 s one
morning and 18.1 s that evening). A change is therefore measured against the revision before it in
the same minutes: each revision gets a git worktree (sharing this checkout's .venv and .ansible), and
the rounds alternate - in each, for each revision, a baseline run (unmeasured, so the measured cycle
stops a running server) and the measured tier run, whose overhead is computed exactly as `make perf`
computes it (tools/perf_lifecycle.py: wall - load - traffic). A first round per revision is not
counted (--warm-rounds): it fills the host's kept prompt counts and the file caches, which the first
measured cycle otherwise pays (3.6-4 s more in two such first rounds). The order within a round
alternates, so neither revision always runs first. Prints every round, each revision's median and the
paired differences. SYNTHETIC: the simulator, not a GPU.

    .venv/bin/python tools/perf_ab.py 6dd3f47 HEAD --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import perf_lifecycle as perf  # noqa: E402


def paired_summary(before, after):
    """Per-round differences (before - after: positive means the second revision is cheaper) and the
    medians: ``{"before_median_s", "after_median_s", "differences_s", "difference_median_s"}``."""
    if not before or len(before) != len(after):
        raise ValueError("need the same number of rounds, at least one, for each revision")
    differences = [round(b - a, 3) for b, a in zip(before, after, strict=True)]
    return {"before_median_s": round(statistics.median(before), 3),
            "after_median_s": round(statistics.median(after), 3),
            "differences_s": differences, "difference_median_s": round(statistics.median(differences), 3)}


def worktree(revision, where):
    """A detached worktree of ``revision`` at ``where``, with this checkout's .venv and .ansible linked in."""
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(where), revision], check=True)
    for name in (".venv", ".ansible"):
        if (ROOT / name).exists():
            os.symlink(ROOT / name, where / name)


def measure(tree_perf, private, tier, baseline_tier, timeout, sids):
    """One round for one revision: the baseline run, then the measured tier run, both the revision's own
    playbooks (its run_playbook); the overhead (s) as this tree's `make perf` computes it."""
    rc, _, log = tree_perf.run_playbook(private, baseline_tier, timeout)
    if rc != 0:
        raise RuntimeError(f"{baseline_tier} failed in {private}: {tree_perf._playbook_failure(log)}")
    ours, _ = perf._measure_ours(private, private / "work", tier, timeout, sids, run=tree_perf.run_playbook)
    return ours["overhead_s"]


def _load_perf(tree):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"perf_{tree.name}", tree / "tools" / "perf_lifecycle.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", help="the revision before the change (any git revision)")
    parser.add_argument("after", help="the revision with the change")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--warm-rounds", type=int, default=1, help="uncounted rounds first (default 1)")
    parser.add_argument("--tier", default="t03-single-batch-overlap")
    parser.add_argument("--baseline-tier", default="baseline")
    parser.add_argument("--timeout", type=int, default=600)
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="perf_ab_"))
    sides, overheads = {}, {"before": [], "after": []}
    try:
        for side in ("before", "after"):
            tree = scratch / side
            worktree(getattr(args, side), tree)
            private = scratch / f"{side}-private"
            private.mkdir()
            (private / "vars.json").write_text(json.dumps({
                "sglang_lab_work_dir": str(private / "work"), "sglang_lab_port": perf.free_port(),
                "sglang_bench_controller_results_dir": str(private / "controller-results")}))
            sides[side] = (_load_perf(tree), private, [])
        for number in range(1 - args.warm_rounds, args.rounds + 1):
            for side in ("before", "after") if number % 2 else ("after", "before"):
                tree_perf, private, sids = sides[side]
                overhead = measure(tree_perf, private, args.tier, args.baseline_tier, args.timeout, sids)
                if number < 1:
                    print(f"warm round {side} ({getattr(args, side)}): overhead {overhead:.2f} s, not counted",
                          flush=True)
                    continue
                overheads[side].append(overhead)
                print(f"round {number} {side} ({getattr(args, side)}): overhead {overhead:.2f} s", flush=True)
        summary = paired_summary(overheads["before"], overheads["after"])
        print(f"median overhead: {args.before} {summary['before_median_s']} s, {args.after} "
              f"{summary['after_median_s']} s; per round {args.before} - {args.after}: {summary['differences_s']}, "
              f"median {summary['difference_median_s']} s (SYNTHETIC, simulator)")
    finally:
        for tree_perf, private, sids in sides.values():
            tree_perf.stop_private_servers(private, sids)
        for side in sides:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(scratch / side)], check=False)
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
