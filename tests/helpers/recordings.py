"""Reading a recording of real SGLang (tests/fixtures/real-sglang/<version>-<device>/phase-<x>/) as
the replay tests need it: the ledger the phase wrote, each run's client status events, and what the
playbook output says of its tasks. A phase folder holds ``results/ledger.jsonl`` and, per run,
``results/raw/<run_id>/client.log`` (phases f and g).

And what a replay needs of today's code to compare with: the task names today's playbooks and roles
print (``playbook_tasks``, ``step_tasks``, ``printed_by``), the message a debug task showed
(``shown_msg``), and a recorded verified stop replayed through today's
sglang_process.stop_processes (``stopped_entries``, ``replay_stop``)."""

from __future__ import annotations

import contextlib
import gzip
import json
import re
import shutil
import signal
from pathlib import Path

import psutil
import sglang_bench_points as bp
import sglang_process
import yaml

from helpers.paths import REPO

_TASK = re.compile(r"^TASK \[(?P<name>.+?)\] \*+$")
_OUTCOME = re.compile(r"^(?P<outcome>ok|changed|skipping|failed|fatal|included): ")


def records(phase: Path) -> list[dict]:
    """The phase's ledger records, in the order they were appended."""
    text = (phase / "results" / "ledger.jsonl").read_text()
    return [json.loads(line) for line in text.splitlines() if line]


def packed_records(folder: Path) -> list[dict]:
    """The ledger records of a phase folder that keeps its ledger gzipped (``ledger.jsonl.gz``), in
    the order they were appended."""
    with gzip.open(folder / "ledger.jsonl.gz", "rt") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def unpack_run(raw: Path, run_id: str, tmp_path: Path) -> dict:
    """A recorded run's raw folder (``raw/<run_id>/*.gz``, as the phase folders keep it), gunzipped into
    ``tmp_path``, with its plan's point specs pointed there and its client's end events:
    ``{"specs": {point_id: spec}, "ends": {point_id: end event}}``."""
    here = tmp_path / run_id
    here.mkdir(parents=True)
    for packed in (raw / run_id).glob("*.gz"):
        with gzip.open(packed, "rb") as src, open(here / packed.name[: -len(".gz")], "wb") as dst:
            shutil.copyfileobj(src, dst)
    plan = json.loads((here / "plan.json").read_text())
    specs = {}
    for spec in plan["points"]:
        spec = dict(spec, output_file=str(here / (spec["id"] + ".jsonl")))
        spec.setdefault("concurrency", int(spec["id"].split("_")[0][1:]))
        spec.setdefault("repeat", int(spec["id"].split("_r")[1]))
        specs[spec["id"]] = spec
    ends = {e["id"]: e for e in bp.parse_status_lines((here / "client.log").read_text()) if e.get("event") == "end"}
    return {"specs": specs, "ends": ends}


def todays_point(run: dict, point_id: str) -> dict:
    """What run_plan does with a point's end event, today: a point the client sized anew ran with the
    prompts its end event says."""
    end = run["ends"][point_id]
    spec = dict(run["specs"][point_id], num_prompts=end["num_prompts"])
    return bp.evaluate_point(spec, 0, end["rc"], False, "", end=end)


def recorded_point(record: dict, point_id: str) -> dict:
    """The ledger point of ``record`` that ``point_id`` (``c<concurrency>_r<repeat>``) names."""
    concurrency, repeat = int(point_id.split("_")[0][1:]), int(point_id.split("_r")[1])
    (point,) = [p for p in record["points"] if p["concurrency"] == concurrency and p.get("repeat", 0) == repeat]
    return point


def client_events(phase: Path, record: dict) -> list[dict]:
    """The status events the client wrote for ``record``'s run (its client.log), in order."""
    log = phase / "results" / "raw" / record["run_id"] / "client.log"
    return bp.parse_status_lines(log.read_text())


def tasks(output: str) -> list[tuple[str, str | None, str]]:
    """The tasks of ansible-playbook's default output, in order: (name as in ``TASK [name]``, its
    outcome - the last ok/changed/skipping/failed/fatal/included line of the task, None if none - and
    the task's text up to the next task or the recap)."""
    found = []
    name, body = None, []

    def close():
        if name is not None:
            outcomes = [m["outcome"] for m in map(_OUTCOME.match, body) if m]
            found.append((name, outcomes[-1] if outcomes else None, "\n".join(body)))

    for line in output.splitlines():
        task = _TASK.match(line)
        if task or line.startswith("PLAY RECAP"):
            close()
            name, body = (task["name"], []) if task else (None, [])
        elif name is not None:
            body.append(line)
    close()
    return found


# --------------------------------------------------------------------------- today's task names
#
# A replay that says something of a playbook's steps by a task's name checks first that today's
# roles still have a task of that name where the playbook reaches it: a renamed or moved task turns
# the replay red instead of leaving it to pass on a name only the recording holds.

_JINJA = re.compile(r"\\\{\\\{.*?\\\}\\\}")  # a Jinja expression, as re.escape writes it


def _action(task: dict, name: str):
    for key in (name, f"ansible.builtin.{name}", f"ansible.legacy.{name}"):
        if key in task:
            return task[key]
    return None


def _yaml_tasks(path: Path) -> list:
    return yaml.safe_load(path.read_text()) or []


def _role_file(role: str, tasks_from: str | None) -> Path:
    folder = REPO / "roles" / role / "tasks"
    name = tasks_from or "main"
    for path in (folder / name, folder / f"{name}.yml", folder / f"{name}.yaml"):
        if path.is_file():
            return path
    raise FileNotFoundError(f"role {role} has no tasks file {name}")


def _enter_role(role: str, tasks_from: str | None, found: list, seen: set) -> None:
    if "{{" in role or "{{" in (tasks_from or ""):
        return
    if role not in seen:  # a role's dependencies run once, before its first tasks
        seen.add(role)
        meta = REPO / "roles" / role / "meta" / "main.yml"
        for dep in (yaml.safe_load(meta.read_text()) or {}).get("dependencies") or [] if meta.is_file() else []:
            _enter_role(dep["role"] if isinstance(dep, dict) else dep, None, found, seen)
    path = _role_file(role, tasks_from)
    if (role, path) in seen:
        return
    seen.add((role, path))
    _walk(_yaml_tasks(path), role, path.parent, found, seen)


def _import_or_include(task, kind):
    """``(spec, included)`` of a task's import_<kind> (static) or include_<kind> (dynamic) action, else
    ``(None, False)``."""
    spec = _action(task, f"import_{kind}")
    if spec is not None:
        return spec, False
    spec = _action(task, f"include_{kind}")
    return spec, spec is not None


def _walk(items: list, role: str | None, folder: Path, found: list, seen: set) -> None:
    """Append (role or None, name) for each task ansible-playbook would print, following the
    imports and includes (role tasks print as ``role : name``; include_role as its plain name)."""
    for task in items or []:
        if not isinstance(task, dict):
            continue
        if any(section in task for section in ("block", "rescue", "always")):
            for section in ("block", "rescue", "always"):
                _walk(task.get(section), role, folder, found, seen)
            continue
        spec, included = _import_or_include(task, "role")
        if spec is not None:
            if included and task.get("name"):
                found.append((None, task["name"]))
            _enter_role(spec["name"], spec.get("tasks_from"), found, seen)
            continue
        spec, included = _import_or_include(task, "tasks")
        if spec is not None:
            if included and task.get("name"):
                found.append((role, task["name"]))
            file = spec if isinstance(spec, str) else spec.get("file", "")
            if "{{" not in file and (folder / file, role) not in seen:
                seen.add((folder / file, role))
                _walk(_yaml_tasks(folder / file), role, (folder / file).parent, found, seen)
            continue
        if task.get("name"):
            found.append((role, task["name"]))


def step_tasks(role: str, tasks_from: str | None = None) -> list[str]:
    """The names ``role``'s entry point ``tasks_from`` prints today, as templates (``role : name``,
    Jinja left in), in file order, its imports and includes followed."""
    found: list = []
    _enter_role(role, tasks_from, found, set())
    return [f"{r} : {name}" if r else name for r, name in found]


def playbook_tasks(playbook: str) -> list[str]:
    """The names today's ``playbooks/<playbook>`` prints, as templates, every branch included."""
    found: list = []
    seen: set = set()
    path = REPO / "playbooks" / playbook
    for play in _yaml_tasks(path):
        for section in ("pre_tasks", "tasks", "post_tasks", "handlers"):
            _walk(play.get(section), None, path.parent, found, seen)
    return [f"{r} : {name}" if r else name for r, name in found]


def _pattern(template: str) -> re.Pattern:
    return re.compile(_JINJA.sub(".+?", re.escape(template)))


def printed_by(templates: list[str], printed: str) -> str | None:
    """The template among ``templates`` that prints as ``printed`` (a ``TASK [...]`` name of a
    recorded output), or None."""
    return next((t for t in templates if _pattern(t).fullmatch(printed)), None)


# --------------------------------------------------------------------------- what a debug task showed


def shown_msg(body: str):
    """The ``msg`` a debug task showed (its ``ok: [host] => `` block, YAML), as YAML reads it."""
    lines = body.splitlines()
    start = next(i for i, line in enumerate(lines) if line.rstrip().endswith("=> ")
                 or line.rstrip().endswith("=>")) + 1
    block = []
    for line in lines[start:]:
        if line and not line.startswith("    "):
            break
        block.append(line[4:])
    return yaml.safe_load("\n".join(block))["msg"]


# --------------------------------------------------------------------------- a recorded stop, replayed
#
# The verified stop's processes as the stop saw them, each doing what it did on the SIGTERM (gone,
# or still there until the SIGKILL), handed to today's sglang_process.stop_processes with the role's
# settings: its signals, its outcomes and how long it waited are today's decisions on the recorded
# behaviour of SGLang's process tree.

STOPPED_ENTRY = re.compile(r"^pid (\d+) \[([^\]]*)\] (\S+) -> (\S+): (.*)$", re.S)
PID_OFFSET = 1 << 30  # above any pid_max: a replayed pid is never a real process of this machine


def stopped_entries(msg: list[str]) -> list[dict]:
    """The processes of a stop's shown message (role sglang_server, task 'Show what the stop did'):
    ``pid N [found_by] TERM+KILL -> outcome: cmdline`` entries joined by `` | ``; [] when the stop
    found nothing."""
    found = []
    for item in msg:
        if not item.startswith("pid "):
            continue
        for entry in (e.strip() for e in item.split(" | ")):
            if not entry:
                continue
            match = STOPPED_ENTRY.match(entry)
            assert match, entry
            pid, found_by, signals, outcome, cmdline = match.groups()
            found.append({"pid": int(pid), "found_by": found_by.split(","), "signals": signals.split("+"),
                          "outcome": outcome, "cmdline": " ".join(cmdline.split())})
    return found


def stop_settings() -> dict:
    """The verified stop's settings as role sglang_server gives them to module sglang_server (state=stopped)."""
    defaults = yaml.safe_load((REPO / "roles" / "sglang_server" / "defaults" / "main.yml").read_text())
    names = ("grace_seconds", "kill_wait_seconds", "orphan_grace_seconds", "workers_gone_grace_seconds")
    return {name: float(defaults[f"sglang_server_stop_{name}"]) for name in names}


class _Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += max(seconds, 1e-3)


class RecordedProcess:
    """One process of a recorded stop: gone at the SIGTERM when the recording says it exited on it,
    else only at the SIGKILL (SGLang's main process in its 5 s diagnostic sleep, the wrapper that
    traps TERM, a scheduler that ignores it). Gone means a zombie, as the recordings saw them."""

    def __init__(self, entry, clock):
        self.pid = entry["pid"] + PID_OFFSET
        self.entry = entry
        self.clock = clock
        self.gone_at = None

    def send_signal(self, signum):
        if self.gone_at is None and (signum == signal.SIGKILL or self.entry["outcome"] == "exited-on-term"):
            self.gone_at = self.clock()

    def status(self):
        return psutil.STATUS_ZOMBIE if self.gone_at is not None else psutil.STATUS_SLEEPING

    def oneshot(self):
        return contextlib.nullcontext()

    def ppid(self):
        return 1

    def name(self):
        return self.entry["cmdline"].split()[0]

    def cmdline(self):
        return self.entry["cmdline"].split()

    def create_time(self):
        return 0.0

    def username(self):
        return "sglang"


def replay_stop(entries: list[dict], settings: dict | None = None):
    """Today's stop_processes on the recorded processes, as module sglang_server (state=stopped) calls it: the
    roots are the wrapper the pidfile names and its child, SGLang's main process; the workers are the
    processes WORKER_PATTERN matches. Returns ``({pid: record}, timings)`` on the recorded pids."""
    settings = settings or stop_settings()
    clock = _Clock()
    procs = [RecordedProcess(entry, clock) for entry in entries]
    wrapper = sglang_process.WRAPPER.split(";")[0]
    roots = {p.pid for p in procs if wrapper in p.entry["cmdline"] or "launch_server" in p.entry["cmdline"]}
    workers = {p.pid for p in procs if re.search(sglang_process.WORKER_PATTERN, p.entry["cmdline"])}
    records, timings = sglang_process.stop_processes(
        {p.pid: {"proc": p, "found_by": p.entry["found_by"]} for p in procs},
        settings["grace_seconds"],
        settings["kill_wait_seconds"],
        roots=roots,
        orphan_grace_seconds=settings["orphan_grace_seconds"],
        workers=workers,
        workers_gone_grace_seconds=settings["workers_gone_grace_seconds"],
        clock=clock,
        sleep=clock.sleep,
    )
    return {r["pid"] - PID_OFFSET: r for r in records}, timings


# bench_serving's own output files of the H200 machine's phases a and b (the top folder's work/).
REAL_RAW = REPO / "tests" / "fixtures" / "real-sglang" / "0.5.17-h200-tp1" / "work" / "results" / "raw"


def real_result(name: str = "c16_r0.jsonl") -> dict:
    """The first recorded bench_serving result ``name`` (its last line) with completed requests and
    per-request inter-token gaps, from the real-SGLang raw output under REAL_RAW."""
    for path in sorted(REAL_RAW.glob(f"*/{name}")):
        result = json.loads(path.read_text().splitlines()[-1])
        if result.get("completed") and any(result.get("itls") or []):
            return result
    raise AssertionError(f"no recorded {name} with completed requests")
