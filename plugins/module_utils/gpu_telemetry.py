# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# GPU telemetry during a benchmark: a background sampler and the summary of what it wrote.
#
# The sampler is nvidia-smi itself in loop mode (-lms), started in its own session with its
# stdout appended to a CSV file whose header line is written first. On a real H200 (driver
# 580.159.04) nvidia-smi flushes every sample to a file and exits with status 0 on SIGTERM, so
# the CSV is complete up to the stop (tests/fixtures/nvidia-smi/h200-1gpu-loop/). A Python/NVML
# sampler would need its code on disk after the module exits; nvidia-smi is already there
# wherever the driver is.
#
# Standard library and Linux /proc only: this code runs on the GPU node inside an Ansible module.

from __future__ import annotations

import csv
import errno
import os
import signal
import subprocess
import time

from ansible.module_utils.nvidia_smi import CSV_FORMAT, parse_field

# --query-gpu fields the sampler records, with the CSV column name and type of each.
SAMPLE_FIELDS = (
    ("timestamp", "timestamp", str),
    ("index", "index", int),
    ("uuid", "uuid", str),
    ("power.draw", "power_w", float),
    ("clocks.sm", "sm_clock_mhz", int),
    ("clocks.mem", "mem_clock_mhz", int),
    ("utilization.gpu", "utilization_pct", int),
    ("memory.used", "memory_used_mib", int),
    ("temperature.gpu", "temperature_c", int),
)

CSV_HEADER = ",".join(column for _query, column, _kind in SAMPLE_FIELDS)
QUERY_ARG = "--query-gpu=" + ",".join(query for query, _column, _kind in SAMPLE_FIELDS)

# Summary keys: (column, statistics). "peak" is a max named for what it means for memory.
SUMMARY_STATS = (
    ("power_w", ("mean", "max")),
    ("sm_clock_mhz", ("mean", "max")),
    ("utilization_pct", ("mean", "max")),
    ("memory_used_mib", ("peak",)),
)

# Polling step of the bounded waits below (seconds).
POLL_S = 0.05


def sampler_argv(nvidia_smi, interval_ms=1000):
    """The sampler's command line: nvidia-smi printing one row per GPU every interval_ms."""
    return [nvidia_smi, QUERY_ARG, CSV_FORMAT, "-lms", str(int(interval_ms))]


def default_paths(csv_path, pidfile=None):
    """(pidfile, stderr log) beside the CSV unless a pidfile is given."""
    return (pidfile or csv_path + ".pid"), csv_path + ".stderr"


# --- process inspection (Linux /proc) ------------------------------------------------------


def _proc_state(pid):
    """One-letter process state from /proc/<pid>/stat, or None when there is no such process."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
    except OSError:
        return None
    # The command name (2nd field) is in parentheses and may hold spaces: split after it.
    return stat.rsplit(")", 1)[1].split()[0]


def process_alive(pid):
    """True while the process exists and is not a zombie."""
    state = _proc_state(pid)
    return state is not None and state not in ("Z", "X")


def _proc_cmdline(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            raw = handle.read()
    except OSError:
        return []
    return [part.decode("utf-8", "replace") for part in raw.split(b"\0") if part]


def _proc_stdout(pid):
    try:
        return os.readlink(f"/proc/{pid}/fd/1")
    except OSError:
        return None


def sampler_pid(pidfile, csv_path):
    """The pid recorded in ``pidfile`` when that process is a telemetry sampler writing to
    ``csv_path``: alive, its stdout is that file and its command line holds the sampler's
    --query-gpu argument. None otherwise (no pidfile, the sampler ended, the pid was reused)."""
    pid = read_pidfile(pidfile)
    if pid is None or not process_alive(pid):
        return None
    real = os.path.realpath(csv_path)
    if _proc_stdout(pid) not in (real, real + " (deleted)"):
        return None
    if QUERY_ARG not in _proc_cmdline(pid):
        return None
    return pid


def runs_argv(pid, argv):
    """True when the process runs ``argv``'s arguments (argv[1:] at the end of its command line:
    a script stand-in has its interpreter in front of the script path)."""
    args = argv[1:]
    return _proc_cmdline(pid)[-len(args):] == args


def read_pidfile(pidfile):
    """The pid in ``pidfile``, or None when it is missing or does not hold a number."""
    try:
        with open(pidfile) as handle:
            text = handle.read().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


# --- start and stop --------------------------------------------------------------------------


def start_sampler(argv, csv_path, pidfile, stderr_path):
    """Write the CSV header, start ``argv`` in a new session appending to the CSV, write the
    pidfile. Returns the pid (also the session and process-group id)."""
    with open(csv_path, "w") as handle:
        handle.write(CSV_HEADER + "\n")
    with open(csv_path, "a") as out, open(stderr_path, "w") as err:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            close_fds=True,
            start_new_session=True,
        )
    tmp = pidfile + ".tmp"
    with open(tmp, "w") as handle:
        handle.write(f"{proc.pid}\n")
    os.replace(tmp, pidfile)
    return proc.pid


def _reap(pid):
    """Collect the exit status when the sampler is our own child (when called in-process, as in
    the tests); a no-op for a sampler started by an earlier module run."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def wait_for_first_sample(csv_path, pid, timeout_s):
    """Wait (bounded) until the CSV holds a row after the header or the sampler exits.
    Returns True when a row arrived."""
    deadline = time.monotonic() + timeout_s
    while True:
        if count_rows(csv_path) > 0:
            return True
        _reap(pid)
        if not process_alive(pid) or time.monotonic() >= deadline:
            return count_rows(csv_path) > 0
        time.sleep(POLL_S)


def _signal_group(pid, sig):
    try:
        os.killpg(pid, sig)
    except OSError as exc:
        if exc.errno != errno.ESRCH:
            raise


def group_members(pgid):
    """The live (not zombie) pids of process group ``pgid``: the sampler leads its own session and
    group, and its children (the stand-in's or nvidia-smi's own) are in it too."""
    members = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if os.getpgid(int(entry)) == pgid and process_alive(int(entry)):
                members.append(int(entry))
        except OSError:
            continue
    return members


def _wait_gone(pid, timeout_s):
    """Wait until the sampler and every process of its group are gone: the group was signalled, and
    its leader can die before a child has (a loaded machine showed a child still there)."""
    deadline = time.monotonic() + timeout_s
    while True:
        _reap(pid)
        if not process_alive(pid) and not group_members(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(POLL_S)


def stop_sampler(pid, timeout_s=10):
    """SIGTERM the sampler's session; SIGKILL it after ``timeout_s`` seconds. Returns once the
    sampler and every process of its group are gone: "sigterm" or "sigkill" (how it ended)."""
    _signal_group(pid, signal.SIGTERM)
    if _wait_gone(pid, timeout_s):
        return "sigterm"
    _signal_group(pid, signal.SIGKILL)
    _wait_gone(pid, timeout_s)
    return "sigkill"


def read_text(path, limit=4000):
    """The last ``limit`` characters of a text file, "" when it does not exist."""
    try:
        with open(path, errors="replace") as handle:
            return handle.read()[-limit:]
    except OSError:
        return ""


def sampler_messages(csv_path, stderr_path):
    """What the sampler printed that is not a sample: its stderr, and the lines of the CSV that
    are neither the header nor a sample row (nvidia-smi prints its errors, such as the NVML
    mismatch, on stdout)."""
    lines = read_text(stderr_path).splitlines()
    try:
        with open(csv_path, errors="replace") as handle:
            csv_lines = handle.read().splitlines()[1:]
    except OSError:
        csv_lines = []
    for line in csv_lines:
        fields = next(csv.reader([line], skipinitialspace=True), [])
        if len(fields) != len(SAMPLE_FIELDS) or parse_field(fields[1], int)[0] is None:
            lines.append(line)
    return "\n".join(line.strip() for line in lines if line.strip())[-4000:]


# --- the CSV and its summary ---------------------------------------------------------------


def read_samples(csv_path):
    """Rows of the telemetry CSV as dicts of typed values ("[N/A]" etc. -> None). A row with the
    wrong number of columns (for example cut by a SIGKILL) or without a GPU index is skipped.
    A missing file gives []."""
    try:
        with open(csv_path, newline="") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return []
    samples = []
    for fields in csv.reader(lines[1:], skipinitialspace=True):
        if len(fields) != len(SAMPLE_FIELDS):
            continue
        sample = {}
        for position, (_query, column, kind) in enumerate(SAMPLE_FIELDS):
            sample[column] = parse_field(fields[position], kind)[0]
        if sample["index"] is not None:
            samples.append(sample)
    return samples


def count_rows(csv_path):
    """Number of sample rows in the CSV (lines after the header)."""
    return len(read_samples(csv_path))


def _stat(values, name):
    if not values:
        return None
    if name == "mean":
        return round(sum(values) / len(values), 3)
    return max(values)


def summarize(csv_path):
    """Per GPU (key: the index as a string, so it survives JSON) the mean and max of power, SM
    clock and utilization, the peak memory used, and the number of samples. A statistic is None
    when no sample of that GPU had a value for it. An empty or missing CSV gives {}."""
    by_gpu = {}
    for sample in read_samples(csv_path):
        by_gpu.setdefault(sample["index"], []).append(sample)
    summary = {}
    for index in sorted(by_gpu):
        samples = by_gpu[index]
        entry = {}
        for column, stats in SUMMARY_STATS:
            values = [s[column] for s in samples if s[column] is not None]
            for name in stats:
                entry[f"{column}_{name}"] = _stat(values, name)
        entry["samples"] = len(samples)
        summary[str(index)] = entry
    return summary
