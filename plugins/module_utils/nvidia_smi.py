# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Reading GPUs through nvidia-smi: pure parsing functions plus a thin runner API.
#
# Used by the gpu_facts and gpu_telemetry modules and by the verified stop of the SGLang server
# (``from ansible.module_utils.nvidia_smi import gpu_snapshot``). Standard library only: this
# code runs on the GPU node inside an Ansible module.
#
# The output formats were checked against real nvidia-smi 580.159.04 on an H200; the captures
# are in tests/fixtures/nvidia-smi/h200-1gpu*/.

from __future__ import annotations

import csv
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor

# --query-gpu fields in the order they are requested, with the fact name and type of each.
GPU_FIELDS = (
    ("index", "index", int),
    ("name", "name", str),
    ("uuid", "uuid", str),
    ("pci.bus_id", "bus_id", str),
    ("driver_version", "driver", str),
    ("memory.total", "memory_total_mib", int),
    ("memory.used", "memory_used_mib", int),
    ("memory.free", "memory_free_mib", int),
    ("utilization.gpu", "utilization_pct", int),
    ("temperature.gpu", "temperature_c", int),
    ("power.draw", "power_w", float),
    ("clocks.sm", "sm_clock_mhz", int),
    ("clocks.mem", "mem_clock_mhz", int),
    ("compute_cap", "compute_cap", str),
)

# --query-compute-apps fields, same layout.
APP_FIELDS = (
    ("pid", "pid", int),
    ("process_name", "process_name", str),
    ("used_memory", "used_memory_mib", int),
    ("gpu_uuid", "gpu_uuid", str),
)

CSV_FORMAT = "--format=csv,noheader,nounits"

# Values nvidia-smi prints where a field has no value on this GPU. They are not errors.
NOT_AVAILABLE = frozenset(("[N/A]", "N/A", "[Not Supported]", "Not Supported", ""))

# Text of the NVML driver/library mismatch, as nvidia-smi prints it after a driver upgrade
# without a reboot (the kernel module still loaded is older than the installed library).
NVML_MISMATCH_TEXT = "Driver/library version mismatch"
NVML_LIBRARY_VERSION_RE = re.compile(r"NVML library version:\s*([0-9][0-9.]*)")

# How long one nvidia-smi query may take before it counts as hung (a GPU in a bad state can
# make nvidia-smi block for a long time).
DEFAULT_TIMEOUT_S = 60

ERROR_CLASSES = ("missing", "nvml_mismatch", "failed")


def query_gpu_argv(nvidia_smi):
    """The argv of the per-GPU query."""
    return [nvidia_smi, "--query-gpu=" + ",".join(f[0] for f in GPU_FIELDS), CSV_FORMAT]


def query_apps_argv(nvidia_smi):
    """The argv of the compute-apps query (processes holding GPU memory)."""
    return [nvidia_smi, "--query-compute-apps=" + ",".join(f[0] for f in APP_FIELDS), CSV_FORMAT]


def resolve_nvidia_smi(nvidia_smi="nvidia-smi"):
    """Absolute path of an executable nvidia-smi, or None.

    ``nvidia_smi`` is a command name looked up on PATH or a path (anything with a slash).
    """
    if not nvidia_smi:
        return None
    found = shutil.which(nvidia_smi)
    return os.path.abspath(found) if found else None


def subprocess_runner(timeout=DEFAULT_TIMEOUT_S):
    """A run_command(argv) -> (rc, stdout, stderr) callable built on subprocess.

    A missing executable gives rc 127, a query that runs past ``timeout`` seconds gives rc 124;
    neither raises.
    """

    def run_command(argv):
        try:
            proc = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout,
                check=False,
            )
        except FileNotFoundError as exc:
            return 127, "", str(exc)
        except subprocess.TimeoutExpired:
            return 124, "", f"{argv[0]} did not answer within {timeout} s"
        return proc.returncode, proc.stdout, proc.stderr

    return run_command


def parse_field(raw, kind):
    """Convert one CSV value. Returns (value, problem).

    ``problem`` is None for a good value and for the "not available" markers ([N/A],
    [Not Supported]), which give value None. Anything else that does not convert (for example
    "[GPU requires reset]" or "[Unknown Error]") gives value None and the raw text as problem.
    """
    text = raw.strip()
    if text in NOT_AVAILABLE:
        return None, None
    if text.startswith("[") and text.endswith("]"):
        return None, text
    if kind is str:
        return text, None
    try:
        return kind(text), None
    except ValueError:
        return None, text


def _split_rows(text, width, name_column):
    """CSV rows of ``width`` columns; rows with more columns have their extra commas put back
    into column ``name_column`` (a name is the only free-text field). Returns (rows, unparsed),
    where unparsed are the non-empty lines that are not rows of the query (error messages)."""
    rows, unparsed = [], []
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = next(csv.reader([line], skipinitialspace=True))
        if len(fields) > width:
            extra = len(fields) - width
            joined = ", ".join(fields[name_column:name_column + extra + 1])
            fields = fields[:name_column] + [joined] + fields[name_column + extra + 1:]
        if len(fields) != width:
            unparsed.append(line.strip())
            continue
        rows.append(fields)
    return rows, unparsed


def _parse_record(fields, spec):
    record, problems = {}, {}
    # No zip(strict=...): this runs on the node's Python, which may be older than 3.10.
    for position, (_query, key, kind) in enumerate(spec):
        value, problem = parse_field(fields[position], kind)
        record[key] = value
        if problem is not None:
            problems[key] = problem
    return record, problems


def parse_gpu_rows(text):
    """Parse --query-gpu output. Returns (gpus, unparsed_lines).

    Each GPU is a dict of the GPU_FIELDS fact names plus ``healthy`` (False when a field held an
    error such as "[GPU requires reset]") and ``problems`` (fact name -> raw text).
    """
    rows, unparsed = _split_rows(text, len(GPU_FIELDS), 1)
    gpus = []
    for fields in rows:
        gpu, problems = _parse_record(fields, GPU_FIELDS)
        if gpu["index"] is None:
            # Not a row of this query: nvidia-smi put a message with the same number of commas.
            unparsed.append(", ".join(fields))
            continue
        gpu["healthy"] = not problems
        gpu["problems"] = problems
        gpu["processes"] = []
        gpus.append(gpu)
    return gpus, unparsed


def parse_app_rows(text):
    """Parse --query-compute-apps output (empty output = no process). Returns (apps, unparsed)."""
    rows, unparsed = _split_rows(text, len(APP_FIELDS), 1)
    apps = []
    for fields in rows:
        app, _problems = _parse_record(fields, APP_FIELDS)
        if app["pid"] is None:
            unparsed.append(", ".join(fields))
            continue
        apps.append(app)
    return apps, unparsed


def _one_line(text):
    return " / ".join(line.strip() for line in text.splitlines() if line.strip())


def classify_failure(rc, stdout, stderr):
    """(error_class, message) for a failed nvidia-smi call; error_class is one of ERROR_CLASSES."""
    text = "\n".join(part.strip() for part in (stdout, stderr) if part and part.strip())
    if rc == 127 and not stdout:
        return "missing", text or "nvidia-smi could not be executed"
    if NVML_MISMATCH_TEXT in text:
        match = NVML_LIBRARY_VERSION_RE.search(text)
        library = f" (installed NVML library {match.group(1)})" if match else ""
        return "nvml_mismatch", (
            f"The loaded NVIDIA kernel driver does not match the installed NVML library{library}: "
            f"reboot the node or reload the nvidia kernel modules. nvidia-smi said: {_one_line(text)}"
        )
    if not text:
        text = "no output"
    return "failed", f"nvidia-smi exited with status {rc}: {_one_line(text)}"


def _empty_snapshot(nvidia_smi, error=None, error_class=None):
    return {
        "available": False,
        "error": error,
        "error_class": error_class,
        "nvidia_smi": nvidia_smi,
        "gpus": [],
        "processes": [],
        "processes_known": False,
        "messages": [],
    }


def build_snapshot(gpu_result, apps_result, nvidia_smi="nvidia-smi"):
    """Snapshot from the (rc, stdout, stderr) of the GPU query and of the compute-apps query.

    ``apps_result`` is None when the process query was not run; it is only used when the GPU
    query succeeded. Pure function: this is what the tests feed with recorded output.
    """
    rc, out, err = gpu_result
    gpus, unparsed = parse_gpu_rows(out or "")
    snap = _empty_snapshot(nvidia_smi)
    snap["available"] = bool(gpus)
    snap["gpus"] = gpus
    snap["messages"] = unparsed
    errors = []  # (error class, message), most fundamental first
    if rc != 0:
        errors.append(classify_failure(rc, "\n".join(unparsed), err))
    elif not gpus:
        errors.append(("failed", "nvidia-smi listed no GPU: " + (" / ".join(unparsed) or "empty output")))
    elif unparsed:
        errors.append(("failed", "nvidia-smi printed lines that are not GPU rows: " + " / ".join(unparsed)))
    for gpu in gpus:
        if gpu["problems"]:
            fields = ", ".join(f"{key}={raw}" for key, raw in sorted(gpu["problems"].items()))
            errors.append(("failed", f"GPU {gpu['index']} ({gpu['bus_id']}) is in a bad state: {fields}"))

    if apps_result is not None and rc == 0 and gpus:
        arc, aout, aerr = apps_result
        apps, app_unparsed = parse_app_rows(aout or "") if arc == 0 else ([], [])
        snap["processes"] = apps
        snap["messages"].extend(app_unparsed)
        snap["processes_known"] = arc == 0 and not app_unparsed
        if arc != 0:
            errors.append(("failed", "compute-apps query failed: " + classify_failure(arc, aout, aerr)[1]))
        elif app_unparsed:
            errors.append(
                ("failed", "compute-apps query printed lines that are not process rows: " + " / ".join(app_unparsed))
            )
    if errors:
        snap["error_class"] = errors[0][0]
        snap["error"] = "; ".join(message for _error_class, message in errors)
    _attach_processes(snap)
    return snap


def _attach_processes(snap):
    by_uuid = {gpu["uuid"]: gpu for gpu in snap["gpus"] if gpu.get("uuid")}
    for app in snap["processes"]:
        gpu = by_uuid.get(app.get("gpu_uuid"))
        app["gpu_index"] = gpu["index"] if gpu else None
        if gpu is not None:
            gpu["processes"].append(
                {
                    "pid": app["pid"],
                    "process_name": app["process_name"],
                    "used_memory_mib": app["used_memory_mib"],
                }
            )


def gpu_snapshot(run_command, nvidia_smi="nvidia-smi"):
    """Read every GPU and every process that holds GPU memory.

    ``run_command(argv) -> (rc, stdout, stderr)``: AnsibleModule.run_command or
    subprocess_runner(). Returns a dict with ``available`` (bool), ``error`` (str or None),
    ``error_class`` (None, "missing", "nvml_mismatch" or "failed"), ``gpus`` (list),
    ``processes`` (list), plus ``processes_known`` (False when the process query did not answer:
    an empty ``processes`` then proves nothing), ``messages`` (output lines that were not rows)
    and ``nvidia_smi`` (the path used). Never raises for nvidia-smi trouble.
    """
    path = resolve_nvidia_smi(nvidia_smi)
    if path is None:
        return _empty_snapshot(
            nvidia_smi,
            f"nvidia-smi not found: {nvidia_smi!r} is not an executable file nor a command on PATH "
            f"({os.environ.get('PATH', '')}). Install the NVIDIA driver utilities or pass the path of nvidia-smi.",
            "missing",
        )
    # Both queries at once: each nvidia-smi start opens NVML anew, and a snapshot is on the path of
    # every preflight and verified stop (twice there). The process query's answer is used only when
    # the GPU query answered; a hung nvidia-smi costs the same timeout either way.
    with ThreadPoolExecutor(max_workers=1) as pool:
        apps_future = pool.submit(run_command, query_apps_argv(path))
        gpu_result = run_command(query_gpu_argv(path))
        apps_result = apps_future.result()
    return build_snapshot(gpu_result, apps_result if gpu_result[0] == 0 else None, path)


def memory_by_gpu(snapshot):
    """{GPU index: memory.used in MiB (None when nvidia-smi could not read it)}."""
    return {gpu["index"]: gpu["memory_used_mib"] for gpu in snapshot.get("gpus", [])}


def pids_holding_gpu(snapshot, pids):
    """The compute processes of the snapshot whose pid is in ``pids`` (ints or digit strings),
    sorted by pid then GPU index. Only proof of "none" when snapshot["processes_known"] is True.
    """
    wanted = {int(pid) for pid in pids}
    held = [dict(app) for app in snapshot.get("processes", []) if app.get("pid") in wanted]
    return sorted(held, key=lambda app: (app["pid"], -1 if app.get("gpu_index") is None else app["gpu_index"]))
