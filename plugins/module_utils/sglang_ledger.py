# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The experiment ledger: one JSON object per line, appended, never rewritten.

Pure functions used by module sglang_ledger_append, module sglang_bench,
tools/report.py and the tests. Standard library only (runs on target hosts).
The record format is documented in docs/ledger.md (schema_version 1).

Append protocol (append_record):

1. open the ledger with O_RDWR | O_APPEND | O_CREAT (mode 0640 when new);
2. take an exclusive ``flock`` on that descriptor, so appenders on the host
   queue up and a line is never interleaved with another;
3. if the file does not end in a newline (an appender died in the middle of
   its write), write one newline first: the torn line stays as it is (it is
   never rewritten) and readers report it as corrupt;
4. write the whole line (one ``os.write``; the rare short write is continued,
   still under the lock and still at the end of the file because of O_APPEND);
5. ``fsync`` the file (and the directory when the file was created), unlock.

Bytes already in the file are never touched: no seek-and-write, no truncate,
no temp file and rename.
"""

import datetime
import errno
import fcntl
import json
import math
import os
import uuid

try:  # Inside AnsiballZ.
    from ansible.module_utils.sglang_failure import decide_failure
except ImportError:  # pytest and tools/report.py put module_utils on sys.path.
    from sglang_failure import decide_failure

SCHEMA_VERSION = 1

# Record outcome.
STATUS_SUCCESS = "success"
STATUS_FAILED = "failed"
# A run that a person or a supervisor stopped (SIGINT / SIGTERM to ansible-playbook): its failure
# class is ``interrupted`` and it says nothing about the tier (plugins/callback/sglang_interrupt.py).
STATUS_INTERRUPTED = "interrupted"
RECORD_STATUSES = (STATUS_SUCCESS, STATUS_FAILED, STATUS_INTERRUPTED)
INTERRUPTED_CLASS = "interrupted"

# Point outcome.
POINT_OK = "ok"
POINT_FAILED = "failed"
# Completed, but shorter than its measurement window (requests or seconds): kept with its numbers,
# in no verdict (module_utils sglang_point_window).
POINT_TOO_SHORT = "too_short"
POINT_STATUSES = (POINT_OK, POINT_FAILED, POINT_TOO_SHORT)

# Failure classes raised by the benchmark itself. Server-side classes come from
# data/crash_signatures.yml (dynamo_fp4_jit, hang, unclassified_crash, ...) and are
# passed in by the experiment's rescue; any class string is accepted.
BENCH_FAILURE_CLASSES = {
    "warmup_failed": "a warm-up request to /generate failed (status and body kept)",
    "incomplete_point": "bench_serving completed fewer requests than num_prompts",
    "bench_client_failed": "bench_serving exited non-zero or wrote no result",
    "bench_timeout": "bench_serving ran past the point's time limit and was killed",
    "server_unreachable": "the server did not answer before or during the benchmark",
}

REQUIRED_KEYS = {
    "schema_version": int,
    "record_id": str,
    "run_id": str,
    "recorded_at": str,
    "host": str,
    "tier": str,
    "status": str,
    "points": list,
    "workload": dict,
}
REQUIRED_POINT_KEYS = {
    "concurrency": int,
    "repeat": int,
    "num_prompts": int,
    "status": str,
}



# Provenance fields every record carries (null when unknown), in schema order.
PROVENANCE_KEYS = (
    "target_is_simulator",
    "model",
    "launch",
    "versions",
    "server_info",
    "gpu",
    "hostname",
    "git_revision",
    "client",
)

def utc_now():
    """Return the current UTC time as an ISO-8601 string with a Z suffix."""
    now = datetime.datetime.now(datetime.UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_record_id():
    """Return a fresh record id (uuid4 hex)."""
    return uuid.uuid4().hex


def to_json_safe(value):
    """Return ``value`` with non-finite floats replaced, recursively.

    JSON has no Infinity or NaN; bench_serving writes ``"request_rate":
    Infinity`` because Python's json module allows it. The ledger stores
    +inf as the string "inf", -inf as "-inf" (the spelling bench_serving's
    own ``--request-rate`` accepts) and NaN as null. Tuples become lists.
    """
    if isinstance(value, float):
        if math.isnan(value):
            return None
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return value
    if isinstance(value, dict):
        return dict((str(k), to_json_safe(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return [to_json_safe(v) for v in value]
    return value


def validate_record(record):
    """Return a list of problems with ``record`` (empty when it is valid)."""
    problems = []
    if not isinstance(record, dict):
        return [f"record must be a mapping, got {type(record).__name__}"]
    for key, kind in REQUIRED_KEYS.items():
        if key not in record:
            problems.append(f"missing key {key!r}")
        elif not isinstance(record[key], kind) or isinstance(record[key], bool):
            problems.append(f"key {key!r} must be {kind.__name__}, got {type(record[key]).__name__}")
    if record.get("schema_version") not in (None, SCHEMA_VERSION) and isinstance(record.get("schema_version"), int):
        problems.append(f"schema_version {record['schema_version']!r} is not {SCHEMA_VERSION}")
    status = record.get("status")
    if isinstance(status, str) and status not in RECORD_STATUSES:
        problems.append(f"status {status!r} is not one of {list(RECORD_STATUSES)}")
    failure = record.get("failure")
    if status == STATUS_FAILED:
        if not isinstance(failure, dict) or not failure.get("class"):
            problems.append("a failed record needs failure.class")
    elif status == STATUS_INTERRUPTED:
        if not isinstance(failure, dict) or failure.get("class") != INTERRUPTED_CLASS:
            problems.append(f"an interrupted record needs failure.class {INTERRUPTED_CLASS!r}")
    elif status == STATUS_SUCCESS and failure:
        problems.append("a successful record must have failure null")
    points = record.get("points")
    if isinstance(points, list):
        for index, point in enumerate(points):
            if not isinstance(point, dict):
                problems.append(f"points[{index}] must be a mapping")
                continue
            for key, kind in REQUIRED_POINT_KEYS.items():
                if not isinstance(point.get(key), kind) or isinstance(point.get(key), bool):
                    problems.append(f"points[{index}].{key} must be {kind.__name__}")
            if point.get("status") not in POINT_STATUSES:
                problems.append(f"points[{index}].status {point.get('status')!r} is not one of {list(POINT_STATUSES)}")
            if point.get("status") == POINT_FAILED and not (
                isinstance(point.get("failure"), dict) and point["failure"].get("class")
            ):
                problems.append(f"points[{index}] failed without failure.class")
    return problems


def encode_record(record):
    """Return the record as one UTF-8 JSON line (strict JSON, newline-ended)."""
    text = json.dumps(to_json_safe(record), allow_nan=False, sort_keys=True, separators=(",", ":"))
    if "\n" in text:  # json.dumps escapes newlines; this guards the invariant.
        raise ValueError("encoded record contains a raw newline")
    return (text + "\n").encode("utf-8")


def _fsync_dir(path):
    try:
        fd = os.open(path or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def ledger_file_mode(mode):
    """The ledger's file mode (sglang_bench_ledger_mode) as an int: read as octal text ("0640"; an int is
    read by its digits, as module sglang_ledger_append always has), at most 0o7777. ValueError otherwise.
    Shared by that module and the experiment's preflight, which checks it before the lock."""
    value = int(str(mode), 8)
    if not 0 <= value <= 0o7777:
        raise ValueError(f"{mode!r} is outside 0-7777")
    return value


def append_record(path, record, mode=0o640):
    """Append ``record`` to the ledger at ``path``; return what was written.

    A record whose ``record_id`` is already in the ledger is not appended
    again (a retried task does not duplicate it); the check runs under the
    lock. Raises ValueError for an invalid record and OSError for I/O
    problems. Returns ``{"path", "appended", "offset", "bytes",
    "repaired_torn_line"}`` where ``offset`` is where the record's line starts
    (or the ledger size when nothing was appended).
    """
    problems = validate_record(record)
    if problems:
        raise ValueError("invalid ledger record: " + "; ".join(problems))
    line = encode_record(record)
    directory = os.path.dirname(os.path.abspath(path))
    created = not os.path.exists(path)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, mode)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(fd).st_size
            repaired = False
            if size > 0 and _contains_record_id(fd, size, record["record_id"]):
                return {
                    "path": path,
                    "appended": False,
                    "offset": size,
                    "bytes": 0,
                    "repaired_torn_line": False,
                }
            if size > 0 and os.pread(fd, 1, size - 1) != b"\n":
                _write_all(fd, b"\n")
                size += 1
                repaired = True
            _write_all(fd, line)
            os.fsync(fd)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    if created:
        _fsync_dir(directory)
    return {
        "path": path,
        "appended": True,
        "offset": size,
        "bytes": len(line),
        "repaired_torn_line": repaired,
    }


def _contains_record_id(fd, size, record_id):
    """Whether a parsable line of the ledger carries ``record_id``."""
    needle = json.dumps(record_id).encode("utf-8")
    data = b""
    offset = 0
    while offset < size:
        chunk = os.pread(fd, min(1 << 20, size - offset), offset)
        if not chunk:
            break
        data += chunk
        offset += len(chunk)
    if needle not in data:
        return False
    records, _ = parse_ledger_text(data.decode("utf-8", errors="replace"))
    return any(r.get("record_id") == record_id for r in records)


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except OSError as exc:
            if exc.errno == errno.EINTR:
                continue
            raise
        view = view[written:]


def parse_ledger_text(text):
    """Parse ledger text; return ``(records, problems)``.

    A line that is not a JSON object (a torn write, a hand edit) is skipped
    and reported as ``{"line": n, "error": ...}``; it is never repaired.
    """
    records = []
    problems = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except ValueError as exc:
            problems.append({"line": number, "error": f"not JSON: {exc}"})
            continue
        if not isinstance(value, dict):
            problems.append({"line": number, "error": "not a JSON object"})
            continue
        records.append(value)
    return records, problems


def read_ledger(path):
    """Read the ledger at ``path``; a missing file is an empty ledger."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        if exc.errno == errno.ENOENT:
            return [], []
        raise
    return parse_ledger_text(data.decode("utf-8", errors="replace"))


def launch_archive_paths(script, tier, sha256):
    """Where role sglang_experiment keeps a launch script by content (module sglang_launch_script
    writes, launch_flag_sources reads): (<dir>/archive/<tier>-<sha256[:16]>.sh, the same .json)."""
    base = os.path.join(os.path.dirname(script), "archive", f"{tier}-{sha256[:16]}")
    return base + ".sh", base + ".json"


def launch_flag_sources(tier, launch):
    """(flag_sources, None) for the launch script a record names, or (None, why).

    Role sglang_experiment's validate step keeps every launch script an experiment starts,
    by content, beside it: <launch dir>/archive/<tier>-<sha256[:16]>.sh and .json, the .json
    with ``flag_sources`` (flag -> baseline, tier or host_override; module_utils/sglang_tiers.py
    compose). Only a .json written for the same script sha256 counts.
    """
    script, sha = (launch or {}).get("script"), (launch or {}).get("script_sha256")
    if not script or not sha:
        return None, "no launch script (or its sha256) to look the flag sources up for"
    _kept_script, path = launch_archive_paths(script, tier, sha)
    try:
        with open(path, encoding="utf-8") as handle:
            kept = json.load(handle)
    except (OSError, ValueError) as exc:
        return None, f"no flag sources kept for this script: {exc}"
    if not isinstance(kept, dict) or kept.get("script_sha256") != sha:
        return None, f"{path} was kept for another script"
    return kept.get("flag_sources"), None


def latest_record(records, tier=None, host=None, status=None):
    """The last record in ledger order matching the given tier/host/status."""
    for record in reversed(records):
        if tier is not None and record.get("tier") != tier:
            continue
        if host is not None and record.get("host") != host:
            continue
        if status is not None and record.get("status") != status:
            continue
        return record
    return None


def ledger_info(records, host, record_id=None, baseline_tier="baseline"):
    """The experiment's ledger queries for one host (module sglang_ledger_info).

    ``record``: the host's last record, or the one with ``record_id``;
    ``last_good_tier``: the tier of the host's latest successful record, else
    ``baseline_tier``; ``baseline``: the host's latest successful
    ``baseline_tier`` record.
    """
    mine = [r for r in records if r.get("host") == host]
    if record_id:
        record = next((r for r in reversed(mine) if r.get("record_id") == record_id), None)
    else:
        record = mine[-1] if mine else None
    good = latest_record(mine, status=STATUS_SUCCESS)
    return {
        "count": len(mine),
        "record": record,
        "last_good_tier": good["tier"] if good else baseline_tier,
        "last_good_record_id": good["record_id"] if good else None,
        "baseline": latest_record(mine, tier=baseline_tier, status=STATUS_SUCCESS),
    }


REDACTED = "<redacted>"


def restore_plan(records, host, sha256_of, baseline_tier="baseline", tiers=None):
    """What role sglang_experiment's restore starts after a failure (module sglang_ledger_info, restore: true).

    The restore must not inherit the failure: it starts the host's last known-good tier from the
    launch script that worked - the copy the validate step kept in <launch dir>/archive/
    (launch_archive_paths), else the recorded script itself while it still has the recorded sha256
    - with that record's environment (values the ledger redacted are left out) and the FlashInfer
    patches the kept .json says it was rendered with (else the tier's in ``tiers``, the catalog).
    Any other bytes are refused (``problem``): the restore starts only what worked. A host without a
    successful record (or one whose record names no script) has nothing to restore from:
    ``from_record`` is false, and the caller renders ``tier`` (``baseline_tier``) fresh.

    ``sha256_of(path)`` is the file's sha256, or None when it cannot be read.
    """
    mine = [r for r in records if r.get("host") == host]
    good = latest_record(mine, status=STATUS_SUCCESS)
    launch = (good or {}).get("launch") or {}
    tier = good["tier"] if good else baseline_tier
    catalog_patches = ((tiers or {}).get(tier) or {}).get("patches") or []
    plan = {"tier": tier, "record_id": good["record_id"] if good else None, "from_record": False,
            "script": None, "script_sha256": None, "patches": list(catalog_patches), "patches_from": "catalog",
            "env": {}, "checked": [], "problem": None}
    sha, script = launch.get("script_sha256"), launch.get("script")
    if not good or not sha or not script:
        plan["msg"] = (f"tier {tier} rendered fresh with this run's overrides: the ledger of {host} has no "
                       "successful record" + ("" if not good else " that names its launch script"))
        return plan
    kept_script, kept_json = launch_archive_paths(script, tier, sha)
    plan.update(from_record=True, script_sha256=sha,
                env={k: v for k, v in (launch.get("env") or {}).items() if v != REDACTED})
    for path in (kept_script, script):
        found = sha256_of(path)
        plan["checked"].append({"path": path, "sha256": found or "missing"})
        if found == sha:
            plan["script"] = path
            break
    if plan["script"] is None:
        plan["problem"] = (
            f"The last good record of tier {tier} ({plan['record_id']}) ran {script} with sha256 {sha}, and "
            "neither its kept copy nor the script has those bytes any more (sha256: "
            + ", ".join(c["sha256"] for c in plan["checked"])
            + "). The restore starts only what worked; start a tier by hand with playbooks/start.yml -e tier=<id>.")
        plan["msg"] = plan["problem"]
        return plan
    try:
        with open(kept_json, encoding="utf-8") as handle:
            kept = json.load(handle)
    except (OSError, ValueError):
        kept = None
    if isinstance(kept, dict):
        plan.update(patches=list(kept.get("patches") or []), patches_from="kept")
    plan["msg"] = (f"tier {tier} from the launch script of record {plan['record_id']}, {plan['script']} "
                   f"(sha256 {sha[:16]}...), with its recorded environment")
    return plan


def build_record(
    host,
    tier,
    run_id,
    workload,
    points=None,
    failure=None,
    started_at=None,
    ended_at=None,
    provenance=None,
    record_id=None,
    recorded_at=None,
    failed_task=None,
    failed_result=None,
    crash=None,
    warmup=None,
    campaign=None,
    quality=None,
):
    """Assemble a schema_version 1 record (see docs/ledger.md).

    ``warmup`` is module sglang_warmup's summary (its rounds' seconds); ``campaign`` names the
    campaign cell the record is (module_utils/sglang_campaign.py cell_record). Both are kept
    only when given. So is ``quality``, the output-quality check's block (module sglang_bench's quality option,
    with its ``comparison`` added by sglang_ledger_append; docs/quality.md).

    ``status`` is "success" only when nothing failed, there is at least one
    point, and every point is ok; "interrupted" when the failure is the run's
    interruption (class ``interrupted``); otherwise "failed" with the failure that
    sglang_failure.decide_failure finds in ``failure``, ``crash``,
    ``failed_task``/``failed_result`` and the points, else "no_points".
    """
    points = list(points or [])
    provenance = dict(provenance or {})
    failure = decide_failure(points, failure, task=failed_task, result=failed_result, crash=crash)
    if failure is None and not points:
        failure = {
            "class": "no_points",
            "step": "benchmark",
            "message": "the run recorded no benchmark point",
        }
    status = STATUS_SUCCESS
    if failure:
        status = STATUS_INTERRUPTED if failure.get("class") == INTERRUPTED_CLASS else STATUS_FAILED
    record = {
        "schema_version": SCHEMA_VERSION,
        "record_id": record_id or new_record_id(),
        "run_id": run_id,
        "recorded_at": recorded_at or utc_now(),
        "host": host,
        "tier": tier,
        "status": status,
        "failure": failure,
        "started_at": started_at,
        "ended_at": ended_at or recorded_at or utc_now(),
        "workload": dict(workload or {}),
        "points": points,
    }
    for key in PROVENANCE_KEYS:
        record[key] = provenance.get(key)
    if warmup:
        record["warmup"] = dict(warmup)
    if campaign:
        record["campaign"] = dict(campaign)
    if quality:
        record["quality"] = dict(quality)
    return to_json_safe(record)
