# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
# Waiting for an SGLang server to become ready, failing fast on a crash.
#
# Three things are watched at once, every `interval` seconds (0.25 s by default):
#   * the log, read incrementally from a saved offset and matched line by line against the
#     crash-signature catalog (sglang_crash);
#   * the health endpoint (/health_generate, falling back to /health on 404), probed by a
#     background thread so a slow answer never delays the log scan;
#   * the server's process (pid / session from server.json).
# A fatal signature ends the wait after a short linger (so the rest of the traceback that the
# same crash prints lands in the excerpt); the process exiting ends it at once; the deadline
# ends it as `hang`.
#
# The wait can run in windows: each call watches at most `window_seconds` and then returns
# "pending" with its progress, keeping its place (offset, warnings, health path) in a state
# file, so a role can call it in an `until:` loop and show progress between calls. The total
# timeout counts from the server's start (server.json started_at), not from the call.

from __future__ import annotations

import datetime
import json
import os
import re
import threading
import time
import urllib.error
import urllib.request

from ansible.module_utils.sglang_crash import (
    DEFAULT_EXCERPT_AFTER,
    DEFAULT_EXCERPT_BEFORE,
    burst_report,
    classify_burst,
    crash_report,
    fallback_report,
    match_line,
    signature_for_class,
    update_after_seen,
)

DEFAULT_HEALTH_PATHS = ("/health_generate", "/health")
# Lines that are not progress: the access log of our own probes (and anyone's GETs of the
# read-only endpoints). A cold start can stay quiet for minutes between real lines (FlashInfer
# JIT, autotune, torch.compile's capture - a tqdm bar redrawn with \r, no newline), so the
# wait gives up on a stalled log, not a quiet one: any new byte of a real line counts,
# including a redrawn bar.
PROBE_LINE_RE = re.compile(
    r'"GET /(health_generate|health|model_info|get_model_info|v1/models|server_info|get_server_info)\b'
)
# Start-up phases, from the first line that marks each (SGLang 0.5.10.post1 .. 0.5.23 wording;
# recorded on 0.5.17: tests/fixtures/real-sglang/). Times come from the line's own timestamp.
PHASE_MARKS = (
    ("weights_begin", re.compile(r"Load weight begin")),
    ("weights_end", re.compile(r"Load weight end")),
    ("kv_cache_end", re.compile(r"Memory pool end|KV Cache is allocated")),
    ("capture_begin", re.compile(r"Capture .*cuda graph begin", re.IGNORECASE)),
    ("capture_end", re.compile(r"Capture .*cuda graph end", re.IGNORECASE)),
    ("http_up", re.compile(r"Uvicorn running on")),
    ("fired_up", re.compile(r"The server is fired up and ready to roll")),
)
# Marks kept at their last line, not their first (prefill, then decode capture).
LAST_MARKS = ("capture_end",)
LOG_TIME_RE = re.compile(r"^\[(\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})")


def line_time(line):
    """Epoch seconds of an SGLang log line's ``[YYYY-MM-DD HH:MM:SS]`` prefix (local time), or None."""
    match = LOG_TIME_RE.match(line)
    if not match:
        return None
    try:
        return datetime.datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()
    except ValueError:
        return None


def startup_phases(marks, started_at=None, ready_at=None):
    """Seconds per start-up phase from the follower's marks (name -> epoch of the first line).

    ``init`` (start to weights), ``weights``, ``kv_cache``, ``graph_capture``, ``warmup`` (the
    HTTP server up to ready) and ``total``; a phase whose marks are missing is left out. SGLang's
    timestamps have whole seconds, so each figure is good to about one second.
    """
    marks = dict(marks or {})
    if started_at is not None:
        marks.setdefault("started", started_at)
    if ready_at is not None:
        marks["ready"] = ready_at
    spans = (
        ("init", "started", "weights_begin"),
        ("weights", "weights_begin", "weights_end"),
        ("kv_cache", "weights_end", "kv_cache_end"),
        ("graph_capture", "capture_begin", "capture_end"),
        ("warmup", "http_up", "ready"),
        ("total", "started", "ready"),
    )
    phases = {}
    for name, first, last in spans:
        if marks.get(first) is not None and marks.get(last) is not None:
            phases[name] = round(max(0.0, marks[last] - marks[first]), 1)
    return phases


CLASSIFY_TAIL_BYTES = 8 << 20
TAIL_LINES = 40


# --------------------------------------------------------------------------- health


def probe(url, timeout):
    """GET ``url``: ("ready", 200) / ("starting", code) / ("missing", 404) / ("down", None)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            code = response.status
    except urllib.error.HTTPError as exc:
        code = exc.code
    except (urllib.error.URLError, OSError, ValueError):
        return "down", None
    if code == 200:
        return "ready", code
    if code == 404:
        return "missing", code
    return "starting", code


class HealthPoller:
    """Background thread probing the health endpoint every ``interval`` seconds.

    Starts with ``paths[start_index]``; a 404 moves to the next path (SGLang builds without
    /health_generate). ``ready_at`` is the monotonic time of the first 200.
    """

    def __init__(
        self,
        host,
        port,
        paths=DEFAULT_HEALTH_PATHS,
        interval=0.25,
        timeout=10.0,
        start_index=0,
        prober=probe,
        clock=time.monotonic,
    ):
        self.base = http_base(host, port)
        self.paths = list(paths)
        self.index = min(start_index, len(self.paths) - 1)
        self.interval = interval
        self.timeout = timeout
        self.prober = prober
        self.clock = clock
        self.status = "unknown"
        self.code = None
        self.ready_at = None
        self.probes = 0
        self._stop = threading.Event()
        self.ready_event = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sglang-health", daemon=True)

    @property
    def path(self):
        return self.paths[self.index]

    def start(self):
        self._thread.start()
        return self

    def stop(self):
        self._stop.set()

    def _run(self):
        while not self._stop.is_set():
            status, code = self.prober(self.base + self.path, self.timeout)
            self.probes += 1
            if status == "missing" and self.index + 1 < len(self.paths):
                self.index += 1
                continue
            self.status, self.code = status, code
            if status == "ready":
                self.ready_at = self.clock()
                self.ready_event.set()
                return
            self._stop.wait(self.interval)


# --------------------------------------------------------------------------- log follower


class LogFollower:
    """Reads a log incrementally and matches complete lines against the catalog.

    State (offset, inode, partial line, line count, `after` flags, first fatal match,
    warnings, last line) is a plain dict so it can be saved between windowed calls.
    """

    def __init__(self, path, catalog, state=None):
        self.path = path
        self.catalog = catalog
        self.state = state or {}
        self.state.setdefault("offset", 0)
        self.state.setdefault("inode", None)
        self.state.setdefault("partial", "")
        self.state.setdefault("lines", 0)
        self.state.setdefault("after_seen", [])
        self.state.setdefault("first_fatal", None)
        self.state.setdefault("warnings", [])
        self.state.setdefault("last_line", "")
        self.state.setdefault("marks", {})
        self.state.setdefault("progress_at", None)
        self._after = set(self.state["after_seen"])

    def poll(self, clock=time.monotonic, wall=time.time):
        """Read what was appended since the last call. Returns the number of new lines."""
        try:
            stat = os.stat(self.path)
        except OSError:
            return 0
        state = self.state
        if state["inode"] != stat.st_ino or stat.st_size < state["offset"]:
            # New or truncated file: start over.
            state.update(offset=0, inode=stat.st_ino, partial="", lines=0)
        if stat.st_size == state["offset"]:
            return 0
        with open(self.path, "rb") as handle:
            handle.seek(state["offset"])
            data = handle.read(stat.st_size - state["offset"])
        line_start_offset = state["offset"] - len(state["partial"].encode("utf-8", "surrogateescape"))
        state["offset"] += len(data)
        text = state["partial"] + data.decode("utf-8", "surrogateescape")
        parts = text.split("\n")
        new_partial = parts.pop()
        if new_partial and new_partial != state["partial"]:
            state["progress_at"] = wall()  # a bar redrawn with \r: progress without a newline
        state["partial"] = new_partial
        count = 0
        offset = line_start_offset
        for raw in parts:
            line = raw.rstrip("\r")
            state["lines"] += 1
            count += 1
            entry = match_line(self.catalog, line, self._after)
            if entry is not None:
                if entry["fatal"]:
                    if state["first_fatal"] is None:
                        state["first_fatal"] = {
                            "line_number": state["lines"],
                            "offset": offset,
                            "seen_at": clock(),
                            "class": entry["class"],
                        }
                else:
                    self._add_warning(entry, line, state["lines"])
            update_after_seen(self.catalog, line, self._after)
            if line.strip():
                state["last_line"] = line.strip()
                if not PROBE_LINE_RE.search(line):
                    state["progress_at"] = wall()
                for name, pattern in PHASE_MARKS:
                    if (name not in state["marks"] or name in LAST_MARKS) and pattern.search(line):
                        state["marks"][name] = line_time(line) or wall()
            offset += len(raw.encode("utf-8", "surrogateescape")) + 1
        state["after_seen"] = sorted(self._after)
        return count

    def _add_warning(self, entry, line, line_number):
        for warning in self.state["warnings"]:
            if warning["class"] == entry["class"]:
                warning["count"] += 1
                return
        self.state["warnings"].append(
            {"class": entry["class"], "line": line.strip(), "line_number": line_number, "count": 1}
        )

    def read_region(self):
        """(lines, first_line_number, from_start) of the log's last CLASSIFY_TAIL_BYTES."""
        try:
            size = os.path.getsize(self.path)
            with open(self.path, "rb") as handle:
                start = max(0, size - CLASSIFY_TAIL_BYTES)
                handle.seek(start)
                data = handle.read()
        except OSError:
            return [], 1, True
        text = data.decode("utf-8", "replace")
        lines = text.splitlines()
        first_number = 1
        if start > 0:
            lines = lines[1:]  # the first line is cut
            first_number = None
        return lines, first_number, start == 0

    def classify(self, before=DEFAULT_EXCERPT_BEFORE, after=DEFAULT_EXCERPT_AFTER):
        """The crash report for the fatal match(es) seen so far, or None."""
        first = self.state["first_fatal"]
        if first is None:
            return None
        lines, first_number, from_start = self.read_region()
        if not lines:
            return None
        if first_number is None:
            first_number = max(1, self.state["lines"] - len(lines) + 1)
        start = max(0, first["line_number"] - first_number)
        after_seen = set() if from_start else set(self.state["after_seen"])
        burst = classify_burst(self.catalog, lines, start=start, after_seen=after_seen)
        if burst is None:
            # The first pass matched an entry whose `near` condition failed on full context
            # and nothing else applies: fall back to the first-pass class.
            entry = signature_for_class(self.catalog, first["class"])
            position = min(start, len(lines) - 1)
            return crash_report(entry, lines[position], lines, position, first_number + position, before, after)
        return burst_report(self.catalog, lines, burst, first_number, before, after)

    def tail(self, count=TAIL_LINES):
        lines, _number, _from_start = self.read_region()
        return lines[-count:]


# --------------------------------------------------------------------------- the wait


def _non_log_report(catalog, crash_class, tail_lines, line=None):
    entry = signature_for_class(catalog, crash_class) or {"explanation": "", "remedy": ""}
    return {
        "crash_class": crash_class,
        "crash_line": line,
        "crash_line_number": None,
        "excerpt": "\n".join(tail_lines),
        "explanation": " ".join(str(entry.get("explanation", "")).split()),
        "remedy": " ".join(str(entry.get("remedy", "")).split()),
    }


def wait_ready(
    *,
    log_path,
    catalog,
    is_alive,
    host,
    port,
    deadline_s,
    window_s=None,
    interval=0.25,
    linger_s=0.5,
    health_paths=DEFAULT_HEALTH_PATHS,
    health_timeout=10.0,
    state=None,
    progress_fn=None,
    progress_every_s=1.0,
    exit_status_fn=None,
    clock=time.monotonic,
    sleep=time.sleep,
    prober=probe,
    excerpt_before=DEFAULT_EXCERPT_BEFORE,
    excerpt_after=DEFAULT_EXCERPT_AFTER,
    stall_s=None,
    started_wall=None,
    wall=time.time,
):
    """Watch log, health and process until ready, crashed, hang, or the window ends.

    ``deadline_s``: seconds left until the overall timeout (from the caller's clock now);
    ``window_s``: return "pending" after this many seconds (None: no window).
    ``is_alive()``: whether the server still runs. ``state``: the saved follower/health state
    of an earlier window (or None). ``progress_fn(progress_dict)`` is called at most every
    ``progress_every_s`` seconds. ``stall_s``: give up as "hang" once the log has made no
    progress for this long (wall clock; the first progress counts from ``started_wall``, the
    server's start) - ``deadline_s`` stays the hard cap. None: only the hard cap.

    Returns {"outcome": "ready"|"crashed"|"hang"|"exited"|"stopped"|"pending", "report": crash report
    or None, "state": state to save, "progress": {...}, "health": {...}, "warnings": [...]}.
    """
    state = dict(state or {})
    follower = LogFollower(log_path, catalog, state.get("log"))
    health_index = state.get("health_index", 0)
    poller = HealthPoller(host, port, health_paths, interval, health_timeout, health_index, prober, clock).start()
    start = clock()
    deadline = start + max(0.0, deadline_s)
    window_end = None if window_s is None else start + window_s
    last_progress = None
    outcome, report = None, None
    # With the real clock, wake up as soon as the health thread sees the server ready.
    pause = poller.ready_event.wait if sleep is time.sleep else sleep
    try:
        while True:
            follower.poll(clock, wall)
            first = follower.state["first_fatal"]
            alive = is_alive()
            now = clock()
            if first is not None and (not alive or now - first["seen_at"] >= linger_s):
                follower.poll(clock)
                outcome, report = "crashed", follower.classify(excerpt_before, excerpt_after)
                break
            if poller.ready_at is not None and first is None:
                outcome = "ready"
                break
            if not alive and first is None:
                follower.poll(clock)
                if follower.state["first_fatal"] is not None:
                    outcome, report = "crashed", follower.classify(excerpt_before, excerpt_after)
                elif any(w["class"] == "stopped_by_sigterm" for w in follower.state["warnings"]):
                    # "SIGTERM received ... Draining requests": a requested stop, not a crash.
                    outcome = "stopped"
                    stop = next(w for w in follower.state["warnings"] if w["class"] == "stopped_by_sigterm")
                    report = _non_log_report(catalog, "stopped_by_sigterm", follower.tail(), stop["line"])
                    report["crash_line_number"] = stop["line_number"]
                    report["exit_status"] = exit_status_fn() if exit_status_fn else None
                else:
                    # No signature, no stop, the process is gone: the stated fallback class
                    # unclassified_crash with the log's root-cause line (sglang_crash rule 6).
                    outcome = "exited"
                    rc = exit_status_fn() if exit_status_fn else None
                    tail = follower.tail()
                    report = fallback_report(catalog, tail, rc, first_number=None)
                    report["excerpt"] = "\n".join(tail)
                break
            if now >= deadline and first is None:
                outcome = "hang"
                report = _non_log_report(catalog, "hang", follower.tail())
                break
            last_progress_at = follower.state["progress_at"] or started_wall
            if stall_s is not None and last_progress_at is not None and first is None:
                quiet = wall() - last_progress_at
                if quiet >= stall_s:
                    outcome = "hang"
                    report = _non_log_report(catalog, "hang", follower.tail())
                    report["stalled_s"] = round(quiet, 1)
                    report["crash_line"] = (
                        f"no progress in the log for {quiet:.0f} s (stall limit {stall_s:.0f} s); "
                        f"last line: {follower.state['last_line'][-200:]}"
                    )
                    break
            if window_end is not None and now >= window_end and first is None:
                outcome = "pending"
                break
            if progress_fn is not None and (last_progress is None or now - last_progress >= progress_every_s):
                last_progress = now
                progress_fn(_progress(follower, poller, now - start))
            pause(interval)
    finally:
        poller.stop()
    elapsed = clock() - start
    state["log"] = follower.state
    state["health_index"] = poller.index
    progress = _progress(follower, poller, elapsed)
    if progress_fn is not None:
        progress_fn(dict(progress, outcome=outcome))
    return {
        "outcome": outcome,
        "report": report,
        "state": state,
        "progress": progress,
        "health": {"path": poller.path, "status": poller.status, "code": poller.code, "probes": poller.probes},
        "warnings": list(follower.state["warnings"]),
        "elapsed_s": round(elapsed, 3),
        "ready_detected_at": poller.ready_at,
        "marks": dict(follower.state["marks"]),
    }


def _progress(follower, poller, elapsed):
    return {
        "window_elapsed_s": round(elapsed, 1),
        "log_lines": follower.state["lines"],
        "last_line": follower.state["last_line"][-300:],
        "health_path": poller.path,
        "health": poller.status,
        "health_code": poller.code,
        "marks": dict(follower.state["marks"]),
    }


def write_progress(path, data):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle, sort_keys=True)
    os.replace(tmp, path)


def http_base(host, port):
    """http://host:port, with brackets around an IPv6 address."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
