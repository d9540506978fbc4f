"""Replays of the recordings of issue 24 (real SGLang 0.5.17, tests/fixtures/real-sglang/0.5.17-h200-tp1; the
folder keeps its first name, the machine is in each recording):

* perf/ (2026-12-07 00:30Z, the lent 1-GPU machine - asked for as nvidia-h200, an NVIDIA H100 that night -
  tree d9e9d3d): experiment.yml against the same cycle by hand (tools/perf_seeds_cycle.sh), alternating, three
  runs a side (PHASE=perf RUNS=3 PERF_VALIDATE_FIRST=1 PERF_TAIL=0, tools/device/perf_real.py) after an uncharged
  warm start on a fresh machine, the tier validated once first. perf-2/ is the next call on the same warm
  machine: two more runs a side (PERF_DIR=perf-2); its warm start found the first call's last server on the
  port and was refused, as start.yml refuses a taken port. The playbook output as it came (each line stamped
  with its arrival time, gzipped), bench_serving's own output files of the by-hand runs and the ledger records
  are fed through today's perf_real.py and perf_lifecycle.py functions, which must give the figures perf.json
  holds. The H200 recordings of the evening before which these replace (tree 54b83b8: ratios 0.756 and 0.774,
  above the target) are in git at cbcc4e3.
* vtime-h100/: PHASE=vtime right after perf-2/, the same machine; vtime-h200/ the same on the H200 of the evening
  before (tree 54b83b8).
* phase-int/: SIGINT to the playbook's process group 3 s into the benchmark (tools/device/interrupt_real.sh, the
  H200 call of 2026-12-06 01:39Z): the playbook's failed result goes through today's sglang_failure, the ledger
  through today's validation. SIGKILL of the controller in the ready-wait (the H100 call, 08:57Z): the standby
  client's end, and the next experiment's take-over of the stale lock through today's sglang_lock.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
import types

import psutil
import pytest
import sglang_failure
import sglang_ledger
import yaml
from ansible.module_utils import sglang_lock
from helpers.paths import FIXTURES, TOOLS

sys.path.insert(0, str(TOOLS))
sys.path.insert(0, str(TOOLS / "device"))

import perf_lifecycle as pl  # noqa: E402
import perf_real  # noqa: E402

REAL = FIXTURES / "real-sglang" / "0.5.17-h200-tp1"
PERF = REAL / "perf"
PERF_2 = REAL / "perf-2"
VTIME = REAL / "vtime-h200"
VTIME_H100 = REAL / "vtime-h100"
INT = REAL / "phase-int"
STAMPED = re.compile(r"^\s*(\d+\.\d+) (.*)$")


def read(path):
    """A fixture's text; ``name.gz`` when the recording was gzipped to keep the tree small."""
    gz = path.with_name(path.name + ".gz")
    if gz.is_file():
        with gzip.open(gz, "rt", encoding="utf-8") as handle:
            return handle.read()
    return path.read_text()


def perf(folder=PERF):
    return json.loads((folder / "perf.json").read_text())


def ours_runs(folder=PERF):
    return [r for r in perf(folder)["runs"] if r["side"] == "ours"]


def stamped(name, folder=PERF):
    lines = []
    for raw in read(folder / name).splitlines():
        match = STAMPED.match(raw)
        if match:
            lines.append((float(match.group(1)), match.group(2)))
    return lines


# The stamped log keeps milliseconds; perf.json was computed from the unrounded times.
MS = 0.0015


@pytest.mark.parametrize("folder", [PERF, PERF_2])
def test_the_recording_names_its_machine_and_conditions(folder):
    data = perf(folder)
    assert "NVIDIA H100 80GB HBM3" in data["gpu"]
    assert data["date"].startswith("2026-12-07T00:")
    if folder == PERF:  # a fresh machine: one start charged to neither side
        assert data["warm_start"]["start"]["rc"] == 0 and data["warm_start"]["stop"]["rc"] == 0
    else:  # the same machine, warm: the first call's last server (started by hand) still held the port
        assert data["warm_start"]["start"]["rc"] != 0
        assert "the server could not listen there" in data["warm_start"]["start"]["error"]
    runs = 3 if folder == PERF else 2
    assert [r["run"] for r in data["runs"]] == [n for n in range(1, runs + 1) for _ in (0, 1)]
    assert [r["side"] for r in data["runs"]] == ["ours", "by_hand"] * runs  # alternating
    assert all(r["rc"] == 0 for r in data["runs"])


@pytest.mark.parametrize("folder", [PERF, PERF_2])
def test_ours_task_times_and_steps_from_the_stamped_output(folder):
    for run in ours_runs(folder):
        lines = stamped(run["log"], folder)
        tasks = perf_real.task_times(lines, run["wall_s"])
        assert [t["task"] for t in tasks] == [t["task"] for t in run["tasks"]]
        for got, kept in zip(tasks, run["tasks"], strict=True):
            assert got["start_s"] == pytest.approx(kept["start_s"], abs=MS)
            assert got["duration_s"] == pytest.approx(kept["duration_s"], abs=2 * MS)
        steps = perf_real.step_breakdown(tasks)
        assert steps.keys() == run["steps"].keys()
        for name, seconds in steps.items():
            assert seconds == pytest.approx(run["steps"][name], abs=2 * MS * len(tasks))
        # The server's load dominates; what the project adds around it is a few seconds a step.
        assert steps["ready"] > 30 and steps["ready"] == max(steps.values())


def test_the_tier_was_validated_first_and_the_parsers_verdict_kept():
    """PERF_VALIDATE_FIRST=1 on a fresh machine: validate.yml once before the runs (17.6 s: SGLang's parser ran,
    as the preflight's last check, in its module call); then every experiment's preflight finds the verdict
    kept - the whole task well under 2 s, not the 15-26 s of an import of SGLang - and there is no parser
    task of its own any more."""
    fig = pl.real_figure(perf(), (PERF / "summary.txt").read_text())
    assert fig["validate_first_s"] == 17.6
    validate_first = (PERF / "validate_first.out").read_text()
    assert re.search(r"SGLang\s+0\.5\.17 accepted it \(parser run in \d+\.\d\d s\)", validate_first)
    assert "prepare_server_args" not in validate_first  # no task of its own
    for folder in (PERF, PERF_2):
        for run in ours_runs(folder):
            tasks = perf_real.task_times(stamped(run["log"], folder), run["wall_s"])
            assert perf_real.step_breakdown(tasks)["parser"] == 0.0
            (preflight,) = [t for t in tasks if "Check that the whole experiment can run" in t["task"]]
            assert preflight["duration_s"] < 2.0


@pytest.mark.parametrize("folder", [PERF, PERF_2])
def test_ours_load_and_traffic_from_the_ledger(folder):
    records = {r["record_id"]: r for r in pl.ledger_records(read(folder / "ledger.jsonl"))}
    assert set(records) == {run["record_id"] for run in ours_runs(folder)}
    for run in ours_runs(folder):
        record = records[run["record_id"]]
        assert sglang_ledger.validate_record(record) == []
        assert round(pl.traffic_seconds(record["points"]), 3) == run["bench_traffic_s"]
        assert round(pl.warmup_seconds(record), 3) == run["warmup_s"]
        figure = pl.cycle_figure(run["wall_s"], run["load_s"], run["bench_traffic_s"] + run["warmup_s"])
        assert figure["overhead_s"] == pytest.approx(run["overhead_s"], abs=2 * MS)


@pytest.mark.parametrize("folder", [PERF, PERF_2])
def test_the_client_was_imported_beside_the_loading_server(folder):
    """The standby client started before the ready-wait (the record says so), so the measure step - warm-up,
    both points in one client process and, in the same task, the output-quality check - took under 5 s
    besides the quality check's own passes: bench_serving's import alone is 13-23 s on these machines
    (phase f), which this step no longer pays."""
    records = {r["record_id"]: r for r in pl.ledger_records(read(folder / "ledger.jsonl"))}
    for run in ours_runs(folder):
        record = records[run["record_id"]]
        assert run["standby_client"] is True and record["client"]["standby"] is True
        names = [t["task"] for t in run["tasks"]]
        standby = names.index("sglang_bench : Start the benchmark client beside the loading server, or end it")
        ready = names.index("sglang_server : Wait for the SGLang server to be ready")
        assert standby < ready
        # The quality check ran in the benchmark's task: no task of its own, its block in the record.
        assert not any("Send the prompt set" in name for name in names)
        assert record["quality"]["status"] == "ok"
        assert perf_real.step_breakdown(run["tasks"])["measure"] - pl.quality_seconds(record) < 5.0


def test_by_hand_traffic_from_bench_servings_own_files(tmp_path):
    for run in (r for r in perf()["runs"] if r["side"] == "by_hand"):
        results = []
        for path in sorted((PERF / f"hand_{run['run']}" / "anchor" / "bench").glob("c*.jsonl.gz")):
            plain = tmp_path / path.name.removesuffix(".gz")
            plain.write_text(read(path.with_suffix("")))
            results.append(pl._read_json_lines(plain)[-1])
        assert len(results) == 2
        assert round(pl.traffic_seconds(results), 3) == run["bench_traffic_s"]
        events = json.loads((PERF / f"hand_{run['run']}.out").read_text())["events"]
        assert round(pl.anchor_load_seconds(events), 3) == run["load_s"]


def test_medians_and_ratio_from_todays_perf_real(tmp_path, monkeypatch):
    """The recorded runs through today's perf_real.write (what it would write as perf.json after the
    last run): the walls, medians and ratio the recording holds; the ratio meets the 0.75 target."""
    data = perf()
    monkeypatch.setattr(perf_real, "subprocess", types.SimpleNamespace(
        run=lambda *a, **k: types.SimpleNamespace(stdout=data["gpu"], returncode=0)))
    args = types.SimpleNamespace(out=tmp_path, tier=data["tier"], copy_to=None, warm=data["warm_start"])
    today = perf_real.write(args, data["runs"], {"workload": data["workload"]})
    keys = ("ours_wall_s", "by_hand_wall_s", "median_ours_s", "median_by_hand_s", "median_ratio")
    assert {k: today[k] for k in keys} == {k: data[k] for k in keys}
    assert today["ours_wall_s"] == [46.294, 47.647, 50.04] and today["by_hand_wall_s"] == [66.822, 64.343, 74.668]
    assert today["median_ratio"] == 0.713 <= 0.75  # the target is met in this call
    assert json.loads((tmp_path / "perf.json").read_text())["median_ratio"] == data["median_ratio"]


def test_make_perf_prints_the_real_figure_with_its_date_and_gpu(capsys):
    """What `make perf` prints beside the simulator's figure: computed by perf_lifecycle from the runs."""
    fig = pl.real_figure(perf(), (PERF / "summary.txt").read_text())
    assert fig["gpu"] == "NVIDIA H100 80GB HBM3"
    assert (fig["median_ours_s"], fig["median_by_hand_s"], fig["median_ratio"]) == (47.647, 66.822, 0.713)
    assert fig["target_met"] is True
    assert pl.REAL_PERF == PERF / "perf.json"
    pl.print_real(pl.REAL_PERF)
    out = capsys.readouterr().out
    assert "Real SGLang 0.5.17 on NVIDIA H100 80GB HBM3 (2026-12-07T00:35:57Z, tier baseline;" in out
    assert "3 runs a side, alternating; uncharged warm start; the tier validated first (17.6 s)" in out
    assert "median wall: ours 47.647 s, by hand 66.822 s, ratio 0.713 (target <= 0.75: met)" in out
    assert out.count("wall ") == 6


def test_both_calls_together_meet_the_target_too():
    """The two calls on the one machine, five runs a side: the median walls through the same median as
    perf_real's, 47.647 s against 70.976 s, ratio 0.671; the second call alone read 0.683."""
    import statistics

    assert perf(PERF_2)["median_ratio"] == 0.683
    ours = [w for folder in (PERF, PERF_2) for w in perf(folder)["ours_wall_s"]]
    by_hand = [w for folder in (PERF, PERF_2) for w in perf(folder)["by_hand_wall_s"]]
    assert len(ours) == len(by_hand) == 5
    ratio = round(statistics.median(ours) / statistics.median(by_hand), 3)
    assert (round(statistics.median(ours), 3), round(statistics.median(by_hand), 3), ratio) == (47.647, 70.976, 0.671)
    assert ratio <= 0.75


def repeated_validations(folder):
    """A PHASE=vtime recording through today's perf_real: the four validate.yml walls of its summary, each
    answered by SGLang's parser memo inside the preflight's module call (no parser task of its own, the
    render's module call skipped: the preflight checked the script's text and wrote it), and the two
    stamped runs' ends (the preflight well under 1.5 s: its checks, the memo and the script's write)."""
    summary = (folder / "summary.txt").read_text()
    walls = [float(x) for x in re.findall(r"== validate_\d rc=0 ([\d.]+) s", summary)]
    for n in range(1, 5):
        text = (folder / f"validate_{n}.out").read_text()
        assert re.search(r"SGLang\s+0\.5\.17 accepted it \(cached verdict in 0\.\d\d s\)", text), n
        assert "prepare_server_args" not in text
        assert re.search(r"TASK \[sglang_launch : Render the launch script\] \**\nskipping:", text)
        assert re.search(r"launch_script,\s+real_parser\)", text)
    ends = []
    for n in (1, 2):
        lines = stamped(f"validate_stamped_{n}.out", folder)
        tasks = perf_real.task_times(lines, lines[-1][0])
        (preflight,) = [t for t in tasks if "Check that the whole experiment can run" in t["task"]]
        assert preflight["duration_s"] < 1.5
        assert perf_real.step_breakdown(tasks)["parser"] == 0.0
        ends.append(lines[-1][0])
    return walls, ends


def test_a_repeated_validation_on_the_h100_after_the_lock_fold():
    """PHASE=vtime right after perf-2/ (tree d9e9d3d, the same H100): validate.yml four times on tier baseline
    beside the running server, then twice with every line stamped. Issue 24 asks for at most 3 s: none of the
    four walls is (3.4-3.8 s, from ansible-playbook's start to its exit), while the stamped runs reach their
    play recap 3.38 and 2.59 s after their start."""
    walls, ends = repeated_validations(VTIME_H100)
    assert walls == [3.8, 3.4, 3.5, 3.4] and min(walls) > 3.0
    assert ends == [3.381, 2.587]


def test_a_repeated_validation_on_the_h200():
    """PHASE=vtime between the two perf calls of the evening before (tree 54b83b8, the H200): one of the four
    is within 3 s (median 3.35 s; 4.5-5.1 s that morning on the H100, with the render and the parser as module
    calls of their own)."""
    walls, ends = repeated_validations(VTIME)
    assert walls == [3.4, 2.9, 3.9, 3.3]
    assert all(3.0 < end < 4.0 for end in ends)


def failed_result(text, task):
    """The YAML result block after ``fatal: [...]: FAILED! =>`` of ``task`` in a playbook's output."""
    at = text.index(f"TASK [{task}")
    block = text[text.index("FAILED! =>", at) + len("FAILED! =>"):]
    lines = []
    for line in block.splitlines()[1:]:
        if line and not line.startswith("    "):
            break
        lines.append(line[4:])
    return yaml.safe_load("\n".join(lines))


def test_sigint_during_the_benchmark_is_recorded_as_interrupted():
    out = (INT / "int_sigint.out").read_text()
    result = failed_result(out, "sglang_bench : Benchmark every point")
    failure = sglang_failure.decide_failure(
        points=result["points"], task={"name": "Benchmark every point", "tags": ["sglang_experiment_benchmark"]},
        result=sglang_failure.interrupted_result(result, "SIGINT"))
    assert failure["class"] == "interrupted" and failure["step"] == "benchmark"
    records = [json.loads(line) for line in (INT / "ledger.jsonl").read_text().splitlines()]
    interrupted = [r for r in records if r["status"] == "interrupted"]
    assert len(interrupted) == 1
    assert sglang_ledger.validate_record(interrupted[0]) == []
    assert interrupted[0]["failure"]["class"] == failure["class"]
    assert interrupted[0]["failure"]["step"] == failure["step"]
    assert "restore: skipped: the run was interrupted (SIGINT)" in out
    # The client was gone at the first look after the signal (pgrep every 0.1 s).
    summary = (INT / "summary.txt").read_text()
    gone = float(re.search(r"sigint: benchmark client gone after ([\d.]+) s", summary).group(1))
    assert gone <= 2.0
    assert (INT / "int_ps_after_sigint.txt").read_text().strip() == ""


def test_sigkill_of_the_controller_in_the_ready_wait():
    """The controller (ansible-playbook, tier tiny-chunk) SIGKILLed in the ready-wait, with the standby client
    running beside the loading server: the play's output ends inside the ready-wait, and the standby client,
    leashed to the controller, was gone 0.24 s later (pgrep every 0.1 s; the issue allows 2 s)."""
    out = (INT / "int_sigkill.out").read_text()
    banners = re.findall(r"^TASK \[(.*?)\] \*+$", out, re.M)
    assert banners[-1] == "sglang_server : Wait for the SGLang server to be ready"
    assert "sglang_bench : Start the benchmark client beside the loading server, or end it" in banners
    assert "PLAY RECAP" not in out  # killed, not finished
    summary = (INT / "summary_sigkill.txt").read_text()
    assert "NVIDIA H100 80GB HBM3" in summary
    assert re.search(r"sigkill: clients before: \d+", summary)  # a standby client ran at the kill
    gone = float(re.search(r"sigkill: standby client gone after ([\d.]+) s", summary).group(1))
    assert gone == 0.24 and gone <= 2.0
    assert "after sigkill: next experiment rc 0" in summary


def test_the_next_experiment_took_over_the_stale_lock(tmp_path, monkeypatch):
    """The killed controller's lock, replayed through today's sglang_lock: a holder pid that no longer runs
    on its host is stale, taken over, and the warning says it in the recorded words. The next experiment then
    stopped the orphaned tiny-chunk server itself, ran and recorded a valid success."""
    after = read(INT / "int_after_sigkill.out")
    warning = re.search(r"^\[WARNING\]: (took over a stale experiment lock .*)$", after, re.M).group(1)
    holder = re.search(r"\(holder pid (\d+) no longer runs\): pid \d+ \(user (\S+) on (\S+)\), play '(.*)', "
                       r"since (\S+)$", warning)
    pid, user, host, play, since = holder.groups()
    (tmp_path / sglang_lock.LOCK_NAME).write_text(json.dumps(
        {"token": "killed", "pid": int(pid), "pid_create_time": 1.0, "pid_checkable": True, "user": user,
         "host": host, "play": play, "since": since}))

    def no_such_process(pid):
        raise psutil.NoSuchProcess(pid)

    monkeypatch.setattr(sglang_lock.socket, "gethostname", lambda: host)
    monkeypatch.setattr(sglang_lock.psutil, "Process", no_such_process)
    result = sglang_lock.acquire(str(tmp_path / sglang_lock.LOCK_NAME), "next", play, holder_pid=4242)
    assert result["acquired"] and result["took_over"]["reason"] == f"holder pid {pid} no longer runs"
    assert warning == (f"took over a stale experiment lock ({result['took_over']['reason']}): "
                       f"{sglang_lock.describe_holder(result['took_over'])}")
    stop = after[after.index("TASK [sglang_server : Show what the stop did]"):]
    assert "'stopped 5 process(es) of tier tiny-chunk (kill_by_pattern: True)'" in stop.split("TASK [", 2)[1]
    assert "'port 30000: free'" in stop
    assert re.search(r"h200-device\s+: ok=\d+\s+changed=\d+\s+unreachable=0\s+failed=0", after)
    (record,) = [json.loads(line) for line in read(INT / "ledger_after_sigkill.jsonl").splitlines()]
    assert sglang_ledger.validate_record(record) == []
    assert (record["tier"], record["status"]) == ("baseline", "success")
    killed_at = float((INT / "int_sigkill_at.txt").read_text())
    assert pl.parse_time(record["started_at"]) > killed_at
