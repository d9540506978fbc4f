# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Prompt counts kept per point across server starts (module sglang_bench, option sizes_file).

A point that ends short of its measurement window is run once more, sized from its own request
rate (tools/sglang_bench_client.py, ``resize``). The size then depends on how fast that one start
happened to be: on the H100 six starts of one launch sent 442 to 636 prompts at c=16, each start a
different prompt set, with a different share of prompts that hit the prefix cache within the point
(0.37-0.59). Two starts of one launch then differ by more than the server does.

So the host keeps, per point, the most prompts any run of it has sent (a JSON file: ``{key:
{"num_prompts": n, "updated": epoch}}``), and a later run of the same point starts with that many
in place of its planned count: every start of one workload after the first sends the same prompts,
and a tier run after the baseline sends the baseline's (bench_serving draws its prompts from the
seed, so the same count is the same prompt set). The count only grows: a run that is still short
at the kept count is re-sized as before and its new size kept.

The key is the point's bench_serving arguments without the ones that name the run (the prompt
count, the output file) and its window: the same workload at the same load against the same model
and tokenizer. The launch is not in it, on purpose: arms of one comparison should send the same
prompts. A window or workload change is a new key. Delete the file to forget every size.

Standard library and this project's module_utils only: this runs on the target host.
"""

import hashlib
import json
import os
import tempfile
import time

try:  # Inside AnsiballZ.
    from ansible.module_utils.sglang_bench_points import shared_prefix_prompts
except ImportError:  # pytest and tools put module_utils on sys.path.
    from sglang_bench_points import shared_prefix_prompts

# bench_serving arguments that say where or how many, not what is sent.
_RUN_FLAGS = ("--num-prompts", "--output-file", "--gsp-prompts-per-group")


def size_key(argv, window):
    """The key of one point: sha256 of its argv without _RUN_FLAGS' values, and its window."""
    kept, skip = [], False
    for arg in argv or []:
        if skip:
            skip = False
            continue
        if arg in _RUN_FLAGS:
            skip = True
            continue
        kept.append(str(arg))
    window = {k: (window or {}).get(k) for k in ("min_requests", "min_duration_s", "max_prompts")}
    text = json.dumps({"argv": kept, "window": window}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def load(path):
    """The kept sizes, ``{}`` when the file is missing or unreadable (it is a hint, never a reason
    to fail a benchmark: a corrupt file is replaced at the next save)."""
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def kept_size(sizes, key):
    entry = sizes.get(key)
    value = entry.get("num_prompts") if isinstance(entry, dict) else None
    return value if isinstance(value, int) and value > 0 else None


def pin(spec, sizes, groups=None):
    """The prompt count ``spec`` (a planned point with ``argv`` and its ``window``) should start with:
    the kept size when it is larger than the planned count (rounded up to whole ``groups`` of a
    generated-shared-prefix point, capped at the window's max_prompts), else None. Only a point with
    a window is pinned: without one nothing re-sizes it."""
    window = spec.get("window")
    if not window:
        return None
    kept = kept_size(sizes, size_key(spec["argv"], window))
    if kept is None:
        return None
    kept = shared_prefix_prompts(kept, groups)
    cap = int(window.get("max_prompts") or kept)
    kept = min(kept, cap)
    return kept if kept > int(spec["num_prompts"]) else None


def remember(path, specs, points, now=None):
    """Keep the prompts each measured point sent, where more than kept (side effect: ``path``
    rewritten atomically). ``points`` are the ledger points the plan of ``specs`` gave (matched by
    their output file); a failed point teaches nothing. Returns the keys that grew."""
    if not path:
        return []
    sizes = load(path)
    grown = []
    by_file = {spec["output_file"]: spec for spec in specs}
    for point in points:
        spec = by_file.get(point.get("output_file"))
        if not spec or not spec.get("window") or point.get("status") not in ("ok", "too_short"):
            continue
        sent = point.get("num_prompts")
        if not isinstance(sent, int) or sent <= 0:
            continue
        key = size_key(spec["argv"], spec["window"])
        if sent > (kept_size(sizes, key) or 0):
            sizes[key] = {"num_prompts": sent, "updated": round(now if now is not None else time.time(), 3)}
            grown.append(key)
    if grown:
        directory = os.path.dirname(path) or "."
        os.makedirs(directory, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=directory, prefix=".point-sizes-")
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            json.dump(sizes, out, indent=1, sort_keys=True)
            out.write("\n")
        os.replace(temporary, path)
    return grown
