"""Replay of phase h (tests/fixtures/real-sglang/0.5.17-h200-tp1/phase-h): on real SGLang 0.5.17,
experiment baseline, then tiny-nomem, whose --mem-fraction-static leaves the KV cache no memory, so
the server dies at start-up; the rescue restored the last good tier from the plan module
sglang_ledger_info makes on the host (restore: true, module_utils/sglang_ledger.py restore_plan),
and stop.yml stopped it. Phase a's exp_nomem.out (the top folder: the same crash, restored by the
Jinja tasks restore.yml had before the plan moved into Python) is the reference it is compared with.

The crash log goes through today's crash catalog and failure decision, the closing message through
today's failure_report, the ledger through today's restore_plan, each verified stop's processes
through today's stop_processes; the task names read from the output are checked against the tasks
today's experiment playbook runs."""

from __future__ import annotations

import posixpath
import re

import sglang_crash
import sglang_failure
import sglang_ledger
import yaml
from helpers.paths import FIXTURES, REPO
from helpers.recordings import (
    client_events,
    playbook_tasks,
    printed_by,
    records,
    replay_stop,
    shown_msg,
    stopped_entries,
    tasks,
)

REAL = FIXTURES / "real-sglang" / "0.5.17-h200-tp1"
REC = REAL / "phase-h"
BEFORE = REAL  # phase a: exp_nomem.out
RESTORE_YML = REPO / "roles" / "sglang_experiment" / "tasks" / "restore.yml"
ASK = "Ask the ledger for the record and what to restore"
# The tasks the restore ran in Jinja before restore_plan (29e6e10); phase a's rescue ran them.
OLD_RESTORE_TASKS = (
    "Read the launch of the last good record",
    "Find the recorded launch script, unchanged",
    "Read what the kept launch script was rendered with",
)
GPU = re.compile(r"gpu: released=(True|False), used MiB before \[(\d+)\] after \[(\d+)\]")
STOPPED = re.compile(r"'(?:stopped (\d+) process\(es\) of tier (\S+)|no SGLang server was running) \(kill_by_pattern")
RESTORED = re.compile(r"^restore: tier (\S+) runs again, pid (\d+)$", re.M)
FREE_MIB = 64  # what an idle H200 reports with nothing on it (the stops read 0 or 1)


def text(name, phase=REC):
    return (phase / name).read_text()


def by_tier():
    return {r["tier"]: r for r in records(REC)}


def named(output, name):
    """(outcome, body) of each task called ``name`` (the role prefix left off) in ``output``; the name
    must be one today's experiment playbook still prints."""
    found = [(task, outcome, body) for task, outcome, body in tasks(output) if task.split(" : ", 1)[-1] == name]
    today = playbook_tasks("experiment.yml")
    assert all(printed_by(today, task) for task, _, _ in found), f"{name!r}: no task of today's experiment.yml"
    return [(outcome, body) for _, outcome, body in found]


def shown(body):
    """The message a debug task showed as one folded YAML scalar (``msg: ...`` and its indented
    continuation lines), joined as YAML folds it."""
    lines = body.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith("msg: "))
    folded = [lines[start].split("msg: ", 1)[1].strip().strip("'")]
    for line in lines[start + 1:]:
        if not line.startswith("        "):
            break
        folded.append(line.strip().strip("'"))
    return " ".join(folded)


def ps_rows(name):
    """The rows of a ps snapshot (the first line is its epoch, the second the header)."""
    rows = []
    for line in text(name).splitlines()[2:]:
        pid, ppid, sid, _elapsed, command = line.split(maxsplit=4)
        rows.append({"pid": int(pid), "ppid": int(ppid), "sid": int(sid), "command": command.lstrip("\\_ ")})
    return rows


def expected_failure_class(tier):
    """The tier's expected_failure_class: data/tiers.yml, with the inventory's sglang_launch_extra_tiers
    over it (restore.yml and sglang_launch combine them so)."""
    catalog = dict(yaml.safe_load((REPO / "data" / "tiers.yml").read_text())["tiers"])
    inventory = yaml.safe_load((REPO / "inventory" / "h200-device.yml").read_text())
    catalog.update(inventory["all"]["children"]["sglang_nodes"]["vars"].get("sglang_launch_extra_tiers", {}))
    return catalog[tier].get("expected_failure_class")


def summary_steps():
    """Step -> (rc, wall s, server pid before, after) from the script's summary."""
    found = re.findall(r"^== (\S+) rc=(\d+) ([0-9.]+) s, server pid (\S+) -> (\S+)$", text("summary.txt"), re.M)
    return {step: (int(rc), float(wall), before, after) for step, rc, wall, before, after in found}


def restored_pid():
    """The tier and pid the experiment's closing message says the restore runs."""
    ((tier, pid),) = set(RESTORED.findall(text("exp_nomem_h.out")))
    return tier, int(pid)


# --------------------------------------------------------------------------- 1. the two runs


def test_the_baseline_succeeded_and_tiny_nomem_failed_at_start_up_as_its_tier_expects():
    found = records(REC)
    assert [r["tier"] for r in found] == ["baseline", "tiny-nomem"]
    assert len({r["git_revision"] for r in found}) == 1 and not found[0]["git_revision"].endswith("-dirty")
    for record in found:
        assert record["target_is_simulator"] is False and record["versions"]["sglang"] == "0.5.17"
    baseline, nomem = found
    assert baseline["status"] == "success" and baseline["failure"] is None
    assert [p["concurrency"] for p in baseline["points"]] == baseline["workload"]["concurrency"]
    # Every request completed; since the measurement window (issue 23) a point that ran under the
    # inventory's 5 s is kept as too_short (recorded, in no verdict) with its shortfall said.
    assert all(p["status"] in ("ok", "too_short") and p["completed"] == p["num_prompts"] for p in baseline["points"])
    assert all(p["window"]["shortfall"] for p in baseline["points"] if p["status"] == "too_short")
    done = client_events(REC, baseline)[-1]
    assert done["event"] == "done" and done["ran"] == len(baseline["points"]) and done["stopped"] is False

    failure = nomem["failure"]
    assert nomem["status"] == "failed" and nomem["points"] == []
    assert (failure["step"], failure["class"]) == ("wait_ready", "kv_cache_no_memory")
    assert failure["class"] == expected_failure_class(nomem["tier"])
    steps = summary_steps()
    assert [steps[s][0] for s in ("exp_baseline_h", "exp_nomem_h", "stop_h")] == [0, 2, 0]

    # The crash is the server's own line: the kept log through today's catalog and failure decision
    # gives the failure the ledger holds, and the line it names in the log is the ledger's message.
    log = text("logs/tiny-nomem.log").splitlines()
    catalog = sglang_crash.compile_catalog(yaml.safe_load((REPO / "data" / "crash_signatures.yml").read_text()))
    got = sglang_crash.classify_outcome(catalog, log)
    assert got["outcome"] == "crashed"
    decided = sglang_failure.decide_failure(
        task={"name": failure["task"], "tags": ["sglang_experiment_wait_ready"]}, crash=got["report"])
    for key in ("class", "step", "message", "crash_line_number"):
        assert decided[key] == failure[key], key
    assert log[failure["crash_line_number"] - 1] == failure["message"]
    # The closing message through today's failure_report: the one the run printed (the restored pid
    # and the ledger path taken from it), "as expected" since the tier expects this class.
    out = text("exp_nomem_h.out")
    tier, pid = restored_pid()
    said = yaml.safe_load("\n".join(line[4:] for line in out[out.rindex("FAILED! =>"):].splitlines()[1:]
                                    if line.startswith("    ")))["msg"].splitlines()
    ledger_path = re.match(r"ledger: (\S+), record ", said[-2]).group(1)
    report = sglang_failure.failure_report(
        nomem["tier"], decided["step"], decided["class"], expected_failure_class(nomem["tier"]), decided["message"],
        sglang_failure.ledger_line(ledger_path, nomem),
        sglang_failure.restore_line(True, {"ok": True, "tier": tier, "pid": pid}),
    ).splitlines()
    assert report[1:] == said[1:]
    # The wording of "as expected" changed since the recording; the decision did not.
    head = f"Tier {nomem['tier']} failed at step '{failure['step']}': {failure['class']} (as expected"
    assert report[0].startswith(head) and said[0].startswith(head)
    assert "failed=1" in out.split("PLAY RECAP", 1)[1] and "rescued=1" in out.split("PLAY RECAP", 1)[1]
    argv = nomem["launch"]["argv"]
    fraction = argv[argv.index("--mem-fraction-static") + 1]
    assert f"--mem-fraction-static={fraction}." in failure["message"]
    assert nomem["launch"]["flag_sources"]["--mem-fraction-static"] == "tier"


# --------------------------------------------------------------------------- 2. the plan from the ledger


def test_the_restore_started_the_archived_script_of_the_baseline_record_and_stop_stopped_it():
    good = by_tier()["baseline"]
    launch = good["launch"]
    sha, script = launch["script_sha256"], launch["script"]
    archive = posixpath.join(posixpath.dirname(script), "archive", f"{good['tier']}-{sha[:16]}.sh")
    out = text("exp_nomem_h.out")

    ((outcome, body),) = named(out, f"Say how the tier is restored - {good['tier']}")
    said = re.fullmatch(
        r"tier (\S+) from the launch script of record (\S+), (\S+) \(sha256 ([0-9a-f]+)\.\.\.\), "
        r"with its recorded environment",
        shown(body),
    )
    assert outcome == "ok" and said, shown(body)
    assert said.groups() == (good["tier"], good["record_id"], archive, sha[:16])
    # What restore_plan makes of this ledger when the kept copy (checked first) has the recorded
    # bytes is what the host's module said.
    plan = sglang_ledger.restore_plan(records(REC), good["host"], sha256_of={archive: sha}.get)
    assert (plan["from_record"], plan["problem"], plan["script"]) == (True, None, archive)
    assert plan["msg"] == shown(body)

    # The closing message names the restored pid; it is the server the switch started ...
    tier, pid = restored_pid()
    assert tier == good["tier"]
    started = [shown(b) for _, b in named(out, "Show the started server")]
    assert started[-1].startswith(f"started tier {tier}: pid {pid},")
    # ... the process tree that ran after the restore: the wrapper around the archive copy, whose
    # child is the baseline record's argv (not tiny-nomem's), all in the wrapper's session ...
    rows = ps_rows("ps_restored_h.txt")
    (wrapper,) = [r for r in rows if r["pid"] == pid]
    assert wrapper["ppid"] == 1 and wrapper["command"].split()[-2] == archive
    assert {r["sid"] for r in rows} == {pid}
    (server,) = [r for r in rows if r["ppid"] == pid]
    assert server["command"] == " ".join(launch["argv"])
    # ... and the one stop.yml stopped, the whole tree of it.
    stop = text("stop_h.out")
    assert STOPPED.findall(stop) == [(str(len(rows)), good["tier"])]
    assert f"pid {pid} [pidfile,session]" in stop
    steps = summary_steps()
    assert steps["exp_nomem_h"][3] == steps["stop_h"][2] == str(pid) and steps["stop_h"][3] == "none"
    # The baseline's first server (the record's pid) is what the experiment of tiny-nomem stopped.
    assert steps["exp_baseline_h"][3] == steps["exp_nomem_h"][2] == str(launch["server"]["pid"])
    assert f"pid {launch['server']['pid']} [pidfile,session]" in out


# --------------------------------------------------------------------------- 3. one module call


def test_the_rescue_asked_the_ledger_once_and_ran_none_of_the_old_restore_tasks():
    assert ASK in [t["name"] for t in yaml.safe_load(RESTORE_YML.read_text())]
    now = [task.split(" : ", 1)[-1] for task, _, _ in tasks(text("exp_nomem_h.out"))]
    before = [task.split(" : ", 1)[-1] for task, _, _ in tasks(text("exp_nomem.out", BEFORE))]
    assert [outcome for outcome, _ in named(text("exp_nomem_h.out"), ASK)] == ["ok"]
    for old in OLD_RESTORE_TASKS:
        assert not [t for t in now if t.startswith(old)], old
        assert [t for t in before if t.startswith(old)], old  # the names are the old restore's
    # The plan came from the record: nothing was rendered again after the failure.
    after_the_ask = tasks(text("exp_nomem_h.out"))[now.index(ASK):]
    assert not [name for name, _, _ in after_the_ask if name.startswith("sglang_launch : ")]
    refuse = named(text("exp_nomem_h.out"), "Refuse a launch script that is not the one that worked")
    assert [outcome for outcome, _ in refuse] == ["skipping"]


# --------------------------------------------------------------------------- 4. the verified stops


def test_the_verified_stops_replayed_stop_the_same_processes_within_a_second():
    """Each verified stop that found a server (the baseline's before tiny-nomem started, and stop.yml's
    of the restored baseline), its processes doing what they did on the SIGTERM, through today's
    stop_processes with the role's settings: the same signals and outcomes, SGLang's main process
    killed once the GPU workers were gone, in less time than the stop took. The rescue's stop found
    nothing (the crashed server had left nothing); after stop.yml no process is left."""
    stops = []
    for name in ("exp_nomem_h.out", "stop_h.out"):
        stops += [shown_msg(body) for _, body in named(text(name), "Show what the stop did")]
    assert [stopped_entries(msg) == [] for msg in stops] == [False, True, False]
    assert STOPPED.findall(text("exp_nomem_h.out")) == [("5", "baseline"), ("", "")]
    for msg in stops:
        entries = stopped_entries(msg)
        if not entries:
            continue
        took = float(re.search(r"took ([0-9.]+) s", " ".join(msg)).group(1))
        replayed, timings = replay_stop(entries)
        assert [(p, r["signals"], r["outcome"]) for p, r in replayed.items()] == [
            (e["pid"], e["signals"], e["outcome"]) for e in entries
        ]
        (main,) = [e["pid"] for e in entries if "sglang.launch_server" in e["cmdline"]]
        assert replayed[main]["outcome"] == "killed" and replayed[main].get("after_workers") is True
        assert timings["total_s"] <= took <= 1.0
    # Nothing alive is left. A process SGLang's own tree reparented to PID 1 may stay a zombie where
    # PID 1 reaps nothing (the device's container): it holds no memory, GPU context or port, and
    # stop.yml's own warning named it among the zombies it left.
    zombies = {int(pid) for pid in re.findall(r"\d+", re.search(r"remain as zombies[^:]*: pids ([\d, ]+)",
                                                                  text("stop_h.out")).group(1))}
    left = ps_rows("ps_after_stop_h.txt")
    assert all(row["command"].endswith("<defunct>") and row["pid"] in zombies for row in left), left
