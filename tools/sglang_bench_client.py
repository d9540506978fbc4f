#!/usr/bin/env python3
# Copyright: contributors to this project
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run SGLang's real benchmark client (bench_serving), one point or a whole cell.

Usage::

    # One point: the same arguments as python -m sglang.bench_serving.
    python tools/sglang_bench_client.py --backend sglang --host 127.0.0.1 \\
        --port 30000 --dataset-name random-ids --num-prompts 10 ...

    # A cell: every point of a plan (JSON, below) in this one process.
    python tools/sglang_bench_client.py --plan /path/plan.json

    # Either, with the full SGLang install (torch) instead of the light shells.
    python tools/sglang_bench_client.py --full-sglang --plan /path/plan.json

    # A cell that starts only when told: import bench_serving, say "ready",
    # then wait for one line on stdin, "go" (run the plan) or anything else
    # (run nothing, exit 3). Module sglang_bench warms the server up meanwhile.
    python tools/sglang_bench_client.py --plan /path/plan.json --wait-go

    # Standby: started beside the server (module sglang_bench, mode standby),
    # import bench_serving while the server loads, then wait for DIR/go.json
    # (the plan to run, written by the measure step) or DIR/abort; exit 3
    # without running anything when the server pid dies or --max-wait passes.
    python tools/sglang_bench_client.py --standby DIR --server-pid PID \
        --leash PID --max-wait 1800

Which bench_serving
-------------------
``sglang.benchmark.serving`` where the installed SGLang has it (0.5.23 moved
the client there and left ``sglang.bench_serving`` as a deprecation wrapper),
else ``sglang.bench_serving`` (0.5.10.post1). Either module is imported once;
its own ``if __name__ == "__main__":`` block (the argument parser and the call
of ``run_benchmark``; ``cli_main()`` in 0.5.23) is compiled once from the
module's real source file and executed in the module's namespace for each
point, with ``sys.argv`` set to that point's arguments: exactly what
``python -m`` runs after the module's definitions, without importing it again.

Why the shells (the default; ``--full-sglang`` skips them)
----------------------------------------------------------
``bench_serving`` itself needs only light packages (aiohttp, numpy, requests,
tqdm, transformers, pyzmq, pybase64, datasets, psutil; 0.5.23 adds msgspec and
orjson). Importing it the normal way does not work on a host without torch,
because Python first runs the package initialisers on the import path:

* ``sglang/__init__.py`` imports the frontend language API and, through it,
  torch;
* ``sglang/srt/utils/__init__.py`` (reached through
  ``sglang.srt.utils.network``) imports torch and the CUDA helpers;
* 0.5.23's ``sglang.benchmark.serving`` reads one constant,
  ``FAKE_BOOTSTRAP_HOST``, from ``sglang.srt.disaggregation.utils``, whose
  module imports torch as well (0.5.10.post1's bench_serving does not read it).

This script registers empty package objects for ``sglang``, ``sglang.srt``,
``sglang.srt.utils`` and ``sglang.srt.disaggregation`` whose ``__path__``
points at the real installed directories, so their submodules
(``sglang.benchmark.*``, ``sglang.srt.utils.network``, ...) load from the real
files while the heavy ``__init__`` files are skipped. ``FAKE_BOOTSTRAP_HOST``
is read from the real ``disaggregation/utils.py`` with ``ast`` (not copied
here) when that file defines it. Argument parser, request generator, metrics
and JSONL output are SGLang's own, unchanged.

The plan (``--plan``)
---------------------
A JSON object::

    {"stop_on_failure": true,
     "points": [{"id": "c1_r0", "argv": ["--backend", "sglang", ...],
                 "output_file": ".../c1_r0.jsonl", "log": ".../c1_r0.jsonl.log",
                 "num_prompts": 10, "timeout": 7200}, ...]}

``argv`` is bench_serving's command line for the point (it must carry
``--output-file output_file``). Each point's output (stdout and stderr, file
descriptors 1 and 2, so C-level and child output too) goes to its ``log``,
truncated first. ``timeout`` is the point's deadline in seconds inside this
process (SIGALRM; the point is stopped and recorded as timed out, and the next
point runs). This script prints one status line per event to its original
stdout, ``SGLANG_BENCH_POINT <json>``, with ``event`` ``ready`` (once, after
the import), ``start`` and ``end`` (per point: ``index``, ``id``, ``pid``,
``t`` (epoch s); ``end`` adds ``rc``, ``timed_out``, ``error``, ``result``
(a new line appeared in the output file), ``completed``, ``ok``, ``wall_s``)
and ``done``. A point that raises, exits or times out does not stop the
others unless ``stop_on_failure`` is true; then the plan stops after the
first point that is not ok: no new result line, a non-zero exit, a timeout,
or ``completed`` != ``num_prompts`` (x ``--gsp-num-turns``: the same rule as the ledger's point
status; the failure class is decided by the caller from the log, in
plugins/module_utils/sglang_bench_points.py). Exit status: 0 when every point
ran and was ok, 1 otherwise, 2 for an unusable plan or SGLang install, 3 when
``--wait-go`` was answered with anything but "go" (no point ran; events ``go``
or ``aborted`` follow ``ready``).

The settle pause (plans only)
-----------------------------
``benchmark()`` sends bench_serving's own warm-up request(s), flushes the
cache when asked, then always sleeps 1 s before the measured run (0.5.10.post1
and 0.5.17 alike). With ``--warmup-requests 0`` and no cache flush
(``--flush-cache`` or ``SGLANG_IS_IN_CI``) that pause follows nothing: there
is no warm-up request or flush to settle. In a plan (``settle_pause``
``"auto"``, the default) the client then skips that one pause and reports it
in the point's ``end`` event (``settle_pause_skipped``: 1); with
``settle_pause`` ``"always"``, and in one-point mode (``python -m``'s twin),
bench_serving pauses as it always does. Module sglang_bench sends
``--warmup-requests 0`` only when its own warm-up rounds ran just before the
points (docs/benchmark.md, "The settle pause"). Only that call is skipped: a
``time.sleep(1.0)`` made directly by ``benchmark`` while those conditions
hold; every other sleep (the ready wait, the request pacing) is bench_serving's
own, unchanged.

The leash (every mode with a caller)
------------------------------------
A client must not outlive the step that wanted it: an interrupted playbook
(SIGINT or SIGTERM to ansible-playbook, which Ansible passes to the module's
process group) ends the module, but the client runs in a session of its own
(so that a timeout can kill its whole group) and would run on, sending
traffic to a server nobody measures. A thread in the client therefore checks
every ``LEASH_POLL_S`` seconds that the process holding its leash is alive:
in plan mode its parent (the module that started it), in standby mode the
pid given with ``--leash`` (the controller, when it runs on this host) until
``go.json`` hands the leash to the measure step's module. When the holder is
gone, the client says so (event ``leash``) and kills its own process group.
Module sglang_bench also kills the group itself when it is interrupted; the
leash covers a module that was killed outright (SIGKILL).

Only the standard library is used here; the script is copied to the target
host and run by the ml-env interpreter that has SGLang installed. Role
sglang_bench runs it; docs/benchmark.md has more.
"""

from __future__ import annotations

import ast
import functools
import importlib
import importlib.machinery
import importlib.util
import inspect
import json
import math
import os
import signal
import sys
import threading
import time
import traceback
import types
import urllib.error
import urllib.request
from pathlib import Path

# Packages whose __init__ pulls in torch; their submodules are still loaded
# from the real directories.
_SHELL_PACKAGES = (
    ("sglang", ""),
    ("sglang.srt", "srt"),
    ("sglang.srt.utils", "srt/utils"),
    ("sglang.srt.disaggregation", "srt/disaggregation"),
)
_CONSTANT_MODULE = "sglang.srt.disaggregation.utils"
_CONSTANT_FILE = "srt/disaggregation/utils.py"
_CONSTANT_NAME = "FAKE_BOOTSTRAP_HOST"
# The benchmark client module, newest location first.
BENCH_MODULES = ("sglang.benchmark.serving", "sglang.bench_serving")
STATUS_PREFIX = "SGLANG_BENCH_POINT "
# Exit status of a plan run that was told not to go (--wait-go).
EXIT_ABORTED = 3
# After a point's deadline the alarm repeats at this interval until the point
# has unwound, in case code inside bench_serving swallowed the first one.
_DEADLINE_REPEAT_S = 2.0
# benchmark()'s unconditional pause after its warm-up and cache flush (see "The settle pause").
_SETTLE_FUNCTION = "benchmark"
_SETTLE_SECONDS = 1.0
SETTLE_MODES = ("auto", "always")
# How often the leash thread checks its holder, and the standby loop its files and server.
LEASH_POLL_S = 0.2
STANDBY_POLL_S = 0.05
# The files of a standby directory (module sglang_bench writes go.json and abort; the client
# never writes into it except through its stdout, which the starter points at client.log).
STANDBY_GO = "go.json"
STANDBY_ABORT = "abort"


def fail(message: str, code: int = 2) -> None:
    sys.stderr.write(f"sglang_bench_client: {message}\n")
    sys.stderr.flush()
    sys.exit(code)


def find_sglang_root() -> Path:
    """Return the installed sglang package directory, or exit with advice."""
    spec = importlib.util.find_spec("sglang")
    if spec is None or not spec.submodule_search_locations:
        fail(
            "the sglang package is not installed for "
            f"{sys.executable}; install sglang (pip install --no-deps "
            "sglang==<version>) into this environment, or run the client with "
            "the interpreter that has it."
        )
    return Path(list(spec.submodule_search_locations)[0])


def read_constant(path: Path, name: str) -> tuple[bool, object]:
    """Read a module-level ``NAME = <literal>`` from a Python file, unexecuted.

    Returns ``(found, value)``; a missing file or name is not an error here
    (0.5.10.post1's bench_serving never reads the constant).
    """
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except OSError:
        return False, None
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == name:
                    return True, ast.literal_eval(node.value)
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and node.target.id == name
            and node.value is not None
        ):
            return True, ast.literal_eval(node.value)
    return False, None


def install_shells(root: Path) -> None:
    """Register light package objects so heavy __init__ files are skipped."""
    for name, rel in _SHELL_PACKAGES:
        module = types.ModuleType(name)
        module.__path__ = [str(root / rel) if rel else str(root)]
        module.__file__ = None
        module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
        module.__spec__.submodule_search_locations = module.__path__
        sys.modules[name] = module
    found, value = read_constant(root / _CONSTANT_FILE, _CONSTANT_NAME)
    if found:
        constants = types.ModuleType(_CONSTANT_MODULE)
        setattr(constants, _CONSTANT_NAME, value)
        sys.modules[_CONSTANT_MODULE] = constants


def bench_module_name(root: Path) -> str:
    """The first of BENCH_MODULES that the installed SGLang has."""
    for name in BENCH_MODULES:
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except (ImportError, ValueError):  # a parent package missing or unusable
            continue
    fail(f"none of {', '.join(BENCH_MODULES)} is in the installed sglang ({root}).")
    return ""  # not reached


def main_block(module: types.ModuleType):
    """Compile the module's own ``if __name__ == "__main__":`` body, from its real file."""
    path = getattr(module, "__file__", None)
    if not path:
        fail(f"{module.__name__} has no source file to read its command line entry from.")
    tree = ast.parse(Path(path).read_text(encoding="utf-8"), filename=path)
    for node in tree.body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Compare)
            and isinstance(node.test.left, ast.Name)
            and node.test.left.id == "__name__"
            and len(node.test.comparators) == 1
            and isinstance(node.test.comparators[0], ast.Constant)
            and node.test.comparators[0].value == "__main__"
        ):
            return compile(ast.Module(body=node.body, type_ignores=[]), path, "exec")
    fail(f"{path} has no 'if __name__ == \"__main__\":' block; this SGLang lays out its client differently.")
    return None  # not reached


def memoize_loaders(module: types.ModuleType) -> None:
    """Load each tokenizer once per process instead of once per point.

    ``run_benchmark`` calls the module globals ``get_tokenizer(id)`` (the
    tokenizer for the dataset and the metrics) and ``check_chat_template(model)``
    (which loads the same tokenizer again, only to warn); both are pure
    functions of their string argument, so the first result is reused for the
    next points. The tokenizer object is not changed by bench_serving; reusing
    it also lets ``datasets.common.get_available_tokens`` (an lru_cache keyed
    by the tokenizer) hit instead of rebuilding the vocabulary list.
    """
    for name in ("get_tokenizer", "check_chat_template"):
        original = getattr(module, name, None)
        if callable(original) and not hasattr(original, "cache_info"):
            setattr(module, name, functools.lru_cache(maxsize=None)(original))


class SettlePause:
    """Stand-in for the ``time`` module inside bench_serving that skips the settle pause.

    Everything but ``sleep`` is the real module's. ``sleep(1.0)`` called directly by
    ``benchmark`` is skipped (and counted) when the running point sends no warm-up request of
    its own and flushes no cache, read from bench_serving's module global ``args`` at the time
    of the call; any other sleep sleeps.
    """

    def __init__(self, real, module: types.ModuleType):
        self._real = real
        self._module = module
        self.skipped = 0

    def __getattr__(self, name):
        return getattr(self._real, name)

    def _idle(self) -> bool:
        args = getattr(self._module, "args", None)
        in_ci = os.environ.get("SGLANG_IS_IN_CI", "").strip().lower() in ("1", "true", "yes", "on")
        return (
            args is not None
            and getattr(args, "warmup_requests", 1) == 0
            and not getattr(args, "flush_cache", False)
            and not in_ci
        )

    def sleep(self, seconds):
        caller = sys._getframe(1).f_code.co_name  # noqa: SLF001 - which bench_serving function pauses
        if caller == _SETTLE_FUNCTION and seconds == _SETTLE_SECONDS and self._idle():
            self.skipped += 1
            return None
        return self._real.sleep(seconds)


def install_settle_pause(module: types.ModuleType):
    """Put a SettlePause in place of the module's ``time``; None when it has no ``time`` global."""
    real = getattr(module, "time", None)
    if real is not time:
        return None
    shim = SettlePause(real, module)
    module.time = shim
    return shim


def import_bench(full_sglang: bool):
    """Import bench_serving once; return ``(module, main block code)``."""
    root = find_sglang_root()
    if not full_sglang:
        install_shells(root)
    name = bench_module_name(root)
    module = importlib.import_module(name)
    return module, main_block(module)


class PointDeadline(KeyboardInterrupt):
    """Raised by SIGALRM when a point passes its deadline.

    A KeyboardInterrupt subclass so that bench_serving's ``except Exception``
    handlers do not swallow it and asyncio re-raises it out of the event loop
    (asyncio.run then cancels the point's remaining requests).
    """


def _on_alarm(signum, frame):  # noqa: ARG001 - signal handler signature
    raise PointDeadline()


def run_main(code, module: types.ModuleType, argv: list[str]) -> None:
    """Run bench_serving's command line entry once, in the imported module.

    Global state between runs, handled here or harmless: ``sys.argv`` is set
    for each run (the parser reads it; restored by the caller); the module
    global ``args`` is reassigned by every ``run_benchmark``; ``random`` and
    ``numpy.random`` are re-seeded from ``--seed`` by every run, so a point
    draws the same prompts as in a fresh process; ``set_ulimit`` is idempotent;
    the tokenizer loaders are memoized on purpose (memoize_loaders).
    """
    sys.argv = ["bench_serving", *argv]
    exec(code, module.__dict__)  # noqa: S102 - SGLang's own __main__ block, from its installed file


def emit(stream, event: str, **fields) -> None:
    fields = {"event": event, "pid": os.getpid(), "t": round(time.time(), 6), **fields}
    stream.write(STATUS_PREFIX + json.dumps(fields, sort_keys=True) + "\n")
    stream.flush()


def new_result(path: str, offset: int):
    """The last JSON object appended to ``path`` after ``offset``, else None."""
    try:
        with open(path, "rb") as handle:
            handle.seek(offset)
            data = handle.read().decode("utf-8", errors="replace")
    except OSError:
        return None
    last = None
    for line in data.splitlines():
        line = line.strip()
        if line:
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                last = value
    return last


class RequestTimes:
    """Keeps each request's start time, latency and success from bench_serving's ``calculate_metrics``
    call (its ``outputs``, in the order of its ``--output-details`` lists), for the steady state
    (plugins/module_utils/sglang_point_window.py). SGLang 0.5.23's own steady_state_serving captures
    them the same way. The wrapper is installed once; ``take()`` empties it per run."""

    def __init__(self, module: types.ModuleType):
        self.rows = None
        original = getattr(module, "calculate_metrics", None)
        if not callable(original):
            return
        index = None
        try:
            index = list(inspect.signature(original).parameters).index("outputs")
        except (ValueError, TypeError):
            pass

        def calculate_metrics(*args, **kwargs):
            outputs = kwargs.get("outputs", args[index] if index is not None and len(args) > index else None)
            try:
                self.rows = [[float(o.start_time), float(o.latency), bool(o.success)] for o in outputs or []]
            except (AttributeError, TypeError, ValueError):
                self.rows = None
            return original(*args, **kwargs)

        module.calculate_metrics = calculate_metrics

    def take(self):
        rows, self.rows = self.rows, None
        return rows


def write_request_times(output_file: str, rows) -> None:
    """``<output_file>.requests.json``: start times relative to the first, latencies, successes."""
    if rows is None:
        return
    origin = min((row[0] for row in rows), default=0.0)
    data = {"t0": origin, "requests": [[round(r[0] - origin, 6), round(r[1], 6), r[2]] for r in rows]}
    with open(output_file + ".requests.json", "w", encoding="utf-8") as handle:
        json.dump(data, handle, separators=(",", ":"))


def http(url: str, method: str = "GET", timeout: float = 10.0):
    """``(status, text)``; status None with the reason as text when nothing answered."""
    request = urllib.request.Request(url, method=method, data=b"" if method == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as reply:  # noqa: S310 - the server's own URL
            return reply.status, reply.read().decode("utf-8", errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8", errors="replace")
    except (OSError, ValueError) as exc:
        return None, f"{type(exc).__name__}: {exc}"


def flush_cache(spec: dict) -> dict:
    """POST the server's /flush_cache until it answers 200: SGLang refuses (400) while requests run, so
    this also waits for the server to be idle. ``spec``: ``{url, timeout_s}``."""
    began = time.monotonic()
    attempts, status, text = 0, None, ""
    while True:
        attempts += 1
        status, text = http(spec["url"], "POST")
        if status == 200 or time.monotonic() - began > float(spec.get("timeout_s", 60)):
            break
        time.sleep(0.2)
    return {"ok": status == 200, "status": status, "attempts": attempts,
            "seconds": round(time.monotonic() - began, 3), **({} if status == 200 else {"answer": text[:300]})}


def _gauge_sum(text: str, name: str):
    total, seen = 0.0, False
    for line in text.splitlines():
        if line.startswith(name) and line[len(name):len(name) + 1] in ("{", " "):
            try:
                total += float(line.rsplit(None, 1)[1])
                seen = True
            except (IndexError, ValueError):
                pass
    return total if seen else None


class MetricsReader(threading.Thread):
    """/metrics before and after a point, and the running and queued requests every ``interval_s``
    during it; written to ``<output_file>.metrics.json`` for module_utils sglang_point_window."""

    def __init__(self, spec: dict):
        super().__init__(name="sglang-bench-metrics", daemon=True)
        self.url = spec["url"]
        self.interval = float(spec.get("interval_s", 1.0))
        self.stop = threading.Event()
        self.during = []
        self.data = {}

    def read(self, key: str) -> bool:
        status, text = http(self.url)
        if status != 200:
            self.data["error"] = f"GET {self.url}: {status or ''} {text[:200]}".strip()
            return False
        self.data[key] = text
        return True

    def run(self) -> None:
        while not self.stop.wait(self.interval):
            status, text = http(self.url, timeout=max(1.0, self.interval))
            if status == 200:
                self.during.append({"t": round(time.time(), 3),
                                    "running": _gauge_sum(text, "sglang:num_running_reqs"),
                                    "queued": _gauge_sum(text, "sglang:num_queue_reqs")})

    def begin(self) -> None:
        if self.read("before"):
            self.start()

    def end(self, output_file: str) -> None:
        if self.is_alive():
            self.stop.set()
            self.join(timeout=self.interval + 10)
            self.read("after")
        self.data["during"] = self.during
        with open(output_file + ".metrics.json", "w", encoding="utf-8") as handle:
            json.dump(self.data, handle)


def resize(point: dict, result: dict):
    """The prompts a point that ended short of its window should have had, from its own rate, or None.

    ``point["window"]``: ``{min_requests, min_duration_s, max_prompts}``. Sized for 1.2 x the
    window at the measured request rate, at least min_requests, at most max_prompts; None when the
    point met its window, failed, or would not grow."""
    window = point.get("window") or {}
    if not window or not result:
        return None
    completed, duration = result.get("completed"), result.get("duration")
    if not isinstance(completed, (int, float)) or not isinstance(duration, (int, float)) or completed <= 0:
        return None
    turns = _gsp_turns(point.get("argv") or [])
    if int(completed) != int(point["num_prompts"]) * turns or duration <= 0:
        return None
    need_requests = int(window.get("min_requests") or 0)
    need_seconds = float(window.get("min_duration_s") or 0)
    if completed >= need_requests and duration >= need_seconds:
        return None
    wanted = max(need_requests, math.ceil(1.2 * need_seconds * completed / duration))
    wanted = min(wanted, int(window.get("max_prompts") or wanted))
    # A multi-turn point's requests are its conversations x turns: size the conversations.
    wanted = -(-wanted // turns)
    groups = _gsp_groups(point.get("argv") or [])
    if groups:  # generated-shared-prefix sends whole groups (sglang_bench_points.shared_prefix_prompts)
        wanted = -(-wanted // groups) * groups
    return wanted if wanted > int(point["num_prompts"]) else None


def _gsp_groups(argv: list):
    """--gsp-num-groups of a generated-shared-prefix point's argv, else None."""
    if "--gsp-num-groups" not in argv:
        return None
    return int(argv[argv.index("--gsp-num-groups") + 1])


def _gsp_turns(argv: list) -> int:
    """--gsp-num-turns of a multi-turn point's argv (bench_serving counts each turn as a request), else 1."""
    if "--gsp-num-turns" not in argv:
        return 1
    return max(1, int(argv[argv.index("--gsp-num-turns") + 1]))


def with_prompts(argv: list, prompts: int) -> list:
    """``argv`` with its ``--num-prompts`` set to ``prompts`` (and, for generated-shared-prefix,
    ``--gsp-prompts-per-group`` to prompts / groups: bench_serving sends groups x that)."""
    argv = list(argv)
    index = argv.index("--num-prompts")
    argv[index + 1] = str(int(prompts))
    groups = _gsp_groups(argv)
    if groups:
        index = argv.index("--gsp-prompts-per-group")
        argv[index + 1] = str(int(prompts) // groups)
    return argv


def run_point(code, module, point: dict, settle=None, times=None) -> dict:
    """One planned point: the cache flushed and /metrics read around it when the plan says so, then
    bench_serving (run_once); a point short of its window runs once more, sized from its own rate.

    ``settle``: the plan's SettlePause; ``times``: the plan's RequestTimes."""
    outcome = run_measured(code, module, point, settle, times)
    wanted = None if outcome["timed_out"] or outcome["rc"] else resize(point, outcome.pop("_result", None))
    outcome.pop("_result", None)
    if wanted:
        first = {k: outcome.get(k) for k in ("completed", "wall_s", "duration")}
        first["num_prompts"] = point["num_prompts"]
        point = dict(point, argv=with_prompts(point["argv"], wanted), num_prompts=wanted)
        outcome = run_measured(code, module, point, settle, times)
        outcome.pop("_result", None)
        outcome["sized"] = {"first": first, "num_prompts": wanted}
    outcome["num_prompts"] = int(point["num_prompts"])
    return outcome


def run_measured(code, module, point: dict, settle=None, times=None) -> dict:
    """run_once with the plan's cache flush before and /metrics readings around it."""
    flushed = flush_cache(point["flush_cache"]) if point.get("flush_cache") else None
    reader = MetricsReader(point["metrics"]) if point.get("metrics") else None
    if reader:
        reader.begin()
    if times:
        times.take()
    outcome = run_once(code, module, point, settle)
    if reader:
        reader.end(point["output_file"])
    if times:
        write_request_times(point["output_file"], times.take())
    if flushed is not None:
        outcome["cache_flush"] = flushed
    return outcome


def run_once(code, module, point: dict, settle=None) -> dict:
    """Run bench_serving once for a point with its output redirected and its deadline armed.

    ``settle``: the plan's SettlePause (its skips during this point are reported), else None."""
    skipped_before = settle.skipped if settle else 0
    output_file = point["output_file"]
    offset = os.path.getsize(output_file) if os.path.exists(output_file) else 0
    rc, timed_out, error = 0, False, None
    saved = (os.dup(1), os.dup(2))
    saved_argv = list(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    log_fd = os.open(point["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
    start = time.monotonic()
    try:
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        timeout = point.get("timeout")
        if timeout:
            signal.signal(signal.SIGALRM, _on_alarm)
            signal.setitimer(signal.ITIMER_REAL, float(timeout), _DEADLINE_REPEAT_S)
        try:
            run_main(code, module, list(point["argv"]))
        except PointDeadline:
            timed_out, rc = True, -int(signal.SIGALRM)
            error = f"ran past its deadline of {timeout} s"
            sys.stderr.write(f"sglang_bench_client: point {point.get('id')} {error}; stopped.\n")
        except SystemExit as exc:  # bench_serving's own sys.exit(...) on errors
            exit_code = exc.code
            rc = 0 if exit_code is None else (exit_code if isinstance(exit_code, int) else 1)
            if not isinstance(exit_code, (int, type(None))):
                sys.stderr.write(f"{exit_code}\n")
            error = None if rc == 0 else f"bench_serving exited with {rc}"
        except BaseException as exc:  # noqa: BLE001 - any error is this point's, not the plan's
            if type(exc) is KeyboardInterrupt:
                raise
            traceback.print_exc()
            rc, error = 1, f"{type(exc).__name__}: {exc}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except PointDeadline:  # the repeated alarm landed while unwinding
        signal.setitimer(signal.ITIMER_REAL, 0)
        timed_out, rc = True, -int(signal.SIGALRM)
        error = f"ran past its deadline of {point.get('timeout')} s"
    finally:
        sys.argv = saved_argv
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, log_fd):
            os.close(fd)
    result = None if timed_out else new_result(output_file, offset)
    completed = result.get("completed") if result else None
    ok = (
        rc == 0
        and not timed_out
        and result is not None
        and isinstance(completed, (int, float))
        and int(completed) == int(point["num_prompts"]) * _gsp_turns(point.get("argv") or [])
    )
    return {
        "rc": rc,
        "timed_out": timed_out,
        "error": error,
        "result": result is not None,
        "completed": completed,
        "duration": result.get("duration") if result else None,
        "ok": ok,
        "settle_pause_skipped": (settle.skipped - skipped_before) if settle else 0,
        "wall_s": round(time.monotonic() - start, 3),
        "_result": result,
    }


def process_start(pid: int):
    """The start time of a live process (field 22 of /proc/PID/stat), None when it is gone
    or a zombie; "" where /proc cannot tell (then only the pid's existence is checked)."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="ascii", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None
    except (OSError, IndexError, ValueError):
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            return None
        except OSError:
            pass
        return ""
    # fields[0] is the state (field 3); the start time is field 22.
    if fields[0] in ("Z", "X"):
        return None
    return fields[19]


class Leash(threading.Thread):
    """Ends this client when the process holding its leash is gone (see "The leash").

    ``holder``: a pid to watch (its start time is read now, so a reused pid is not taken for
    it); ``parent``: also watch that this process's parent stays the one it has now."""

    def __init__(self, status, holder=None, parent=False):
        super().__init__(name="sglang-bench-leash", daemon=True)
        self.status = status
        self.lock = threading.Lock()
        self.parent = os.getppid() if parent else None
        self.holder = None
        self.hold(holder)

    def hold(self, pid) -> None:
        """Hand the leash to ``pid`` (None: no holder beyond the parent, if watched)."""
        with self.lock:
            self.holder = None if pid in (None, 0) else (int(pid), process_start(int(pid)))

    def gone(self):
        if self.parent is not None and os.getppid() != self.parent:
            return f"the process that started the client (pid {self.parent}) ended"
        with self.lock:
            holder = self.holder
        if holder is not None:
            start = process_start(holder[0])
            if start is None or (holder[1] and start and start != holder[1]):
                return f"the leash holder (pid {holder[0]}) ended"
        return None

    def run(self) -> None:
        while True:
            reason = self.gone()
            if reason:
                end_group(self.status, reason)
            time.sleep(LEASH_POLL_S)


def end_group(status, reason: str) -> None:
    """Say why, then kill this client's process group (itself included): the caller is gone.
    A client that is not its group's leader (run by hand) ends itself only."""
    try:
        emit(status, "leash", reason=reason)
    except (OSError, ValueError):
        pass
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpgrp(), signal.SIGKILL)
    os._exit(137)


def wait_standby(directory: Path, status, leash: Leash, server_pid=None, max_wait=None):
    """Standby: wait for ``go.json`` (return its object) or a reason to run nothing (return
    the reason as a string): ``abort`` written, the server's pid gone, ``max_wait`` passed."""
    server_start = process_start(server_pid) if server_pid else None
    if server_pid and server_start is None:
        return f"the server (pid {server_pid}) is not running"
    deadline = None if not max_wait else time.monotonic() + max_wait
    go_path, abort_path = directory / STANDBY_GO, directory / STANDBY_ABORT
    while True:
        if go_path.exists():
            try:
                order = json.loads(go_path.read_text(encoding="utf-8"))
            except (OSError, ValueError) as exc:
                return f"unreadable {go_path}: {exc}"
            if not isinstance(order, dict) or not isinstance(order.get("plan"), str):
                return f"{go_path} names no plan"
            leash.hold(order.get("leash_pid"))
            return order
        if abort_path.exists():
            return "told to abort"
        if server_pid:
            now = process_start(server_pid)
            if now is None or (server_start and now and now != server_start):
                return f"the server (pid {server_pid}) ended before the benchmark began"
        if deadline is not None and time.monotonic() > deadline:
            return f"no go within --max-wait {max_wait:g} s"
        time.sleep(STANDBY_POLL_S)


def load_plan(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            plan = json.load(handle)
    except (OSError, ValueError) as exc:
        fail(f"cannot read the plan {path}: {exc}")
    points = plan.get("points") if isinstance(plan, dict) else None
    if not isinstance(points, list) or not points:
        fail(f"the plan {path} has no points")
    for index, point in enumerate(points):
        keys = ("argv", "output_file", "log", "num_prompts")
        missing = [k for k in keys if not isinstance(point, dict) or k not in point]
        if missing:
            fail(f"point {index} of the plan {path} lacks {', '.join(missing)}")
    if plan.get("settle_pause", "auto") not in SETTLE_MODES:
        fail(f"the plan {path} has settle_pause {plan.get('settle_pause')!r}; use one of {', '.join(SETTLE_MODES)}")
    return plan


def wait_for_go(status) -> bool:
    """Block until the caller writes one line on stdin: "go" runs the plan, anything else
    (or end of input: the caller died or gave up) runs nothing. stdin is then /dev/null,
    so nothing inside bench_serving can read the caller's pipe."""
    try:
        line = sys.stdin.readline()
    except (OSError, ValueError):
        line = ""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    go = line.strip() == "go"
    emit(status, "go" if go else "aborted", said=line.strip()[:200])
    return go


def run_plan(plan: dict, full_sglang: bool, wait_go: bool = False) -> int:
    # Status lines go to the original stdout; each point's own output goes to its log.
    status = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    Leash(status, parent=True).start()
    start = time.monotonic()
    module, code = import_bench(full_sglang)
    memoize_loaders(module)
    emit(status, "ready", module=module.__name__, file=module.__file__, import_s=round(time.monotonic() - start, 3))
    if wait_go and not wait_for_go(status):
        emit(status, "done", ran=0, stopped=True, wall_s=round(time.monotonic() - start, 3))
        status.close()
        return EXIT_ABORTED
    return run_points(plan, module, code, status, start)


def run_standby(directory: Path, full_sglang: bool, server_pid=None, leash_pid=None, max_wait=None) -> int:
    """Standby mode: import, wait for go.json, then run the plan it names (see the usage)."""
    status = os.fdopen(os.dup(1), "w", encoding="utf-8", buffering=1)
    leash = Leash(status, holder=leash_pid)
    leash.start()
    start = time.monotonic()
    module, code = import_bench(full_sglang)
    memoize_loaders(module)
    emit(status, "ready", module=module.__name__, file=module.__file__, import_s=round(time.monotonic() - start, 3),
         standby=True)
    order = wait_standby(directory, status, leash, server_pid, max_wait)
    if isinstance(order, str):
        emit(status, "aborted", said=order[:300])
        emit(status, "done", ran=0, stopped=True, wall_s=round(time.monotonic() - start, 3))
        status.close()
        return EXIT_ABORTED
    emit(status, "go", said="go.json", waited_s=round(time.monotonic() - start, 3))
    return run_points(load_plan(order["plan"]), module, code, status, start)


def run_points(plan: dict, module, code, status, start: float) -> int:
    """Every point of ``plan`` in this process, in order; the exit status (see the docstring)."""
    settle = install_settle_pause(module) if plan.get("settle_pause", "auto") == "auto" else None
    times = RequestTimes(module)
    stop_on_failure = bool(plan.get("stop_on_failure", False))
    ran, all_ok, stopped = 0, True, False
    for index, point in enumerate(plan["points"]):
        ident = point.get("id", str(index))
        emit(status, "start", index=index, id=ident)
        outcome = run_point(code, module, point, settle, times)
        ran += 1
        emit(status, "end", index=index, id=ident, **outcome)
        if not outcome["ok"]:
            all_ok = False
            if stop_on_failure:
                stopped = index + 1 < len(plan["points"])
                break
    code = 0 if all_ok and ran == len(plan["points"]) else 1
    emit(status, "done", ran=ran, stopped=stopped, rc=code, wall_s=round(time.monotonic() - start, 3))
    status.close()
    return code


def parse_standby_args(argv: list[str]) -> dict:
    """``--standby DIR [--server-pid PID] [--leash PID] [--max-wait S]`` as run_standby's keywords."""
    names = {"--server-pid": ("server_pid", int), "--leash": ("leash_pid", int), "--max-wait": ("max_wait", float)}
    usage = ("usage: sglang_bench_client.py [--full-sglang] --standby DIR [--server-pid PID] [--leash PID] "
             "[--max-wait S]")
    if len(argv) < 2 or len(argv) % 2:
        fail(usage)
    found = {"directory": Path(argv[1])}
    for flag, value in zip(argv[2::2], argv[3::2], strict=True):
        if flag not in names:
            fail(f"{usage} (got {flag})")
        key, kind = names[flag]
        try:
            found[key] = kind(value)
        except ValueError:
            fail(f"{flag} takes a number, got {value!r}")
    if not found["directory"].is_dir():
        fail(f"the standby directory {found['directory']} does not exist")
    return found


def main(argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    full_sglang = False
    if argv[:1] == ["--full-sglang"]:
        full_sglang, argv = True, argv[1:]
    if argv[:1] == ["--standby"]:
        code = run_standby(full_sglang=full_sglang, **parse_standby_args(argv))
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if argv[:1] == ["--plan"]:
        wait_go = argv[2:] == ["--wait-go"]
        if len(argv) != 2 and not wait_go:
            fail("usage: sglang_bench_client.py [--full-sglang] --plan PLAN.json [--wait-go]")
        code = run_plan(load_plan(argv[1]), full_sglang, wait_go)
        # Every point's files are closed and the status stream is flushed and closed by now. Skip the
        # interpreter's teardown of bench_serving's imports (transformers, numpy, aiohttp; torch with
        # --full-sglang): it took 0.6 s on the simulator host, and the caller waits for the exit.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    # One point, as python -m sglang.bench_serving: its output and exit status unchanged.
    module, code = import_bench(full_sglang)
    run_main(code, module, argv)


if __name__ == "__main__":
    main()
