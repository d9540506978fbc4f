"""Replay the recordings of the GPU check (tests/fixtures/gpu-check/, README there).

Each case folder holds what playbooks/gpu_check.yml recorded on a real GPU node: raw nvidia-smi
output at four moments (idle, serving, just before the stop, after the stop), the gpu_facts fact,
the verified stop's result, the telemetry CSV with its summary, the benchmark's ledger and raw
JSONL, /server_info and the simulator log. These tests feed the raw bytes through today's code -
nvidia_smi.py and gpu_telemetry.py, the verified stop's sglang_process.stop_processes and
wait_gpu_released, the benchmark's point rules and the ledger validation - independently of what
the modules reported on the node, and check that the recorded results are what today's code makes
of them: the schedulers held memory on their GPUs before the stop, no stopped PID held any after,
the stop result's GPU block and its signals, the telemetry summary, the benchmark's point.
"""

from __future__ import annotations

import csv
import json
import re

import pytest
import sglang_bench_points as points
import sglang_ledger
import sglang_process
import sglang_provenance
from ansible.module_utils import gpu_telemetry, nvidia_smi
from helpers.paths import FIXTURES
from helpers.recordings import replay_stop

RECORDINGS = FIXTURES / "gpu-check"
CASES = sorted(path.parent for path in RECORDINGS.glob("*/case.json"))
PHASES = ("idle", "serving", "before-stop", "after-stop")
PLACEHOLDER_UUID = re.compile(r"^GPU-00000000-1111-2222-3333-4444444444\d\d$")
ANY_UUID = re.compile(r"\b(?:GPU|MIG)-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b")

if not CASES:  # the recordings are part of the checkout: none is an error, not a reason to skip
    pytest.fail(f"no GPU check recording (*/case.json) under {RECORDINGS}; tools/gpu_check.sh on a GPU node writes one",
                pytrace=False)


def case_id(path):
    return path.name


@pytest.fixture(params=CASES, ids=case_id)
def case(request):
    return request.param


def load_json(path):
    return json.loads(path.read_text())


def snapshot(case_dir, phase):
    """The gpu_snapshot that the two recorded raw queries of ``phase`` give."""
    folder = case_dir / phase
    gpus = (folder / "query-gpu.csv").read_text()
    apps = (folder / "query-compute-apps.csv").read_text()
    return nvidia_smi.build_snapshot((0, gpus, ""), (0, apps, ""))


def memory_used(case_dir, phase):
    """{GPU index: MiB} of the plain `--query-gpu=index,memory.used` read, split by hand."""
    rows = (case_dir / phase / "memory-used.csv").read_text().splitlines()
    return {int(index): int(used) for index, used in (row.split(",") for row in rows if row.strip())}


def scheduler_records(case_dir):
    """The stop result's records of the simulator's schedulers (titles from /server_info)."""
    titles = load_json(case_dir / "server-info.json")["simulator"]["schedulers"]
    stop = load_json(case_dir / "stop-result.json")
    by_title = {}
    for record in stop["stopped"]:
        title = record["cmdline"].strip()
        if title in titles:
            by_title[title] = record
    return titles, by_title


def test_recorded_queries_are_the_ones_the_modules_run(case):
    queries = load_json(case / "case.json")["queries"]
    assert queries["query-gpu"][1:] == nvidia_smi.query_gpu_argv("nvidia-smi")[1:]
    assert queries["query-compute-apps"][1:] == nvidia_smi.query_apps_argv("nvidia-smi")[1:]
    assert queries["memory-used"][1:] == ["--query-gpu=index,memory.used", nvidia_smi.CSV_FORMAT]


@pytest.mark.parametrize("phase", PHASES)
def test_raw_reads_parse_cleanly_and_agree(case, phase):
    snap = snapshot(case, phase)
    assert snap["available"] and snap["error"] is None and snap["processes_known"], snap["error"]
    tp_size = load_json(case / "case.json")["tp_size"]
    assert len(snap["gpus"]) >= tp_size
    assert all(gpu["healthy"] for gpu in snap["gpus"])
    # Every compute process sits on a GPU of the same read (UUIDs consistent after scrubbing).
    assert all(app["gpu_index"] is not None for app in snap["processes"])
    assert memory_used(case, phase) == nvidia_smi.memory_by_gpu(snap)


@pytest.mark.parametrize("phase", ["idle", "serving", "after-stop"])
def test_facts_json_matches_the_raw_read_of_the_same_moment(case, phase):
    facts = load_json(case / f"facts-{phase}.json")
    snap = snapshot(case, phase)
    assert facts["available"] and facts["error"] is None
    assert facts["count"] == len(snap["gpus"])
    static = ("index", "name", "uuid", "bus_id", "driver", "memory_total_mib", "compute_cap")
    assert [{key: gpu[key] for key in static} for gpu in facts["gpus"]] == [
        {key: gpu[key] for key in static} for gpu in snap["gpus"]
    ]
    assert sorted((p["pid"], p["process_name"], p["gpu_index"]) for p in facts["processes"]) == sorted(
        (p["pid"], p["process_name"], p["gpu_index"]) for p in snap["processes"]
    )


def test_schedulers_held_memory_before_the_stop_and_none_after(case):
    info = load_json(case / "case.json")
    tp_size, mem_mb = info["tp_size"], info["mem_mb"]
    assert mem_mb > 0, "a recording of the GPU check must hold real GPU memory"
    titles, records = scheduler_records(case)
    assert len(titles) == tp_size and sorted(records) == sorted(titles)
    pids = [record["pid"] for record in records.values()]

    before = snapshot(case, "before-stop")
    held = nvidia_smi.pids_holding_gpu(before, pids)
    assert sorted(app["gpu_index"] for app in held) == list(range(tp_size))
    assert all(app["used_memory_mib"] >= mem_mb for app in held), held
    assert sorted(app["pid"] for app in held) == sorted(pids)

    after = snapshot(case, "after-stop")
    assert after["processes_known"]
    assert nvidia_smi.pids_holding_gpu(after, pids) == []
    used_before, used_after = nvidia_smi.memory_by_gpu(before), nvidia_smi.memory_by_gpu(after)
    for index in range(tp_size):
        assert used_before[index] - used_after[index] >= mem_mb, (index, used_before, used_after)
    # The idle read before the launch and the read after the stop agree per GPU.
    assert nvidia_smi.memory_by_gpu(snapshot(case, "idle")) == used_after


def test_the_stop_results_gpu_block_is_todays_release_check_of_the_raw_reads(case):
    """The raw reads before and after the stop through today's wait_gpu_released, as module
    sglang_server (state=stopped) calls it (every stopped pid; the read before the stop as ``before``): the
    GPU block the stop result recorded - before and after figures, released, nothing holding,
    memory settled."""
    stop = load_json(case / "stop-result.json")
    recorded = stop["gpu"]
    today = sglang_process.wait_gpu_released(
        lambda: snapshot(case, "after-stop"), [r["pid"] for r in stop["stopped"]], 0,
        before=snapshot(case, "before-stop"),
    )
    keys = ("available", "checked", "error", "released", "holding", "memory_settled", "pending_gpus", "before",
            "after", "other_processes")
    assert {k: today[k] for k in keys} == {k: recorded[k] for k in keys}
    assert recorded["released"] is True and recorded["holding"] == []
    # The figures are those of the plain memory.used reads, split by hand.
    assert {row["index"]: row["memory_used_mib"] for row in today["before"]} == memory_used(case, "before-stop")
    assert {row["index"]: row["memory_used_mib"] for row in today["after"]} == memory_used(case, "after-stop")


def test_the_scheduler_that_ignores_sigterm_is_killed_by_todays_stop(case):
    """The recorded stop's processes, each doing what it did on the SIGTERM (the fault makes the last
    scheduler ignore it), through today's stop_processes with the role's settings: the same signals
    and outcomes, the stubborn scheduler orphaned once the server's top processes are gone and killed
    after the orphan grace, not after the 30 s grace."""
    assert load_json(case / "case.json")["fault"] == "ignore_sigterm"
    stop = load_json(case / "stop-result.json")
    replayed, timings = replay_stop(stop["stopped"])
    for record in stop["stopped"]:
        today = replayed[record["pid"]]
        assert (today["signals"], today["outcome"]) == (record["signals"], record["outcome"]), record["cmdline"]
        assert today.get("orphaned") is record.get("orphaned")
    titles, records = scheduler_records(case)
    stubborn = replayed[records[titles[-1]]["pid"]]
    assert stubborn["signals"] == ["TERM", "KILL"] and stubborn["outcome"] == "killed"
    assert timings["term_phase_s"] <= stop["timings"]["term_phase_s"]
    assert stop["survivors"] == [] and stop["port"]["free"]


def test_telemetry_summary_is_the_summary_of_its_csv(case):
    info = load_json(case / "case.json")
    path = case / "telemetry.csv"
    with path.open(newline="") as handle:
        header = next(csv.reader(handle))
    assert ",".join(header) == gpu_telemetry.CSV_HEADER
    recorded = load_json(case / "telemetry-result.json")["summary"]
    assert recorded == gpu_telemetry.summarize(str(path))
    for index in range(info["tp_size"]):
        entry = recorded[str(index)]
        assert entry["samples"] >= 1
        assert entry["memory_used_mib_peak"] >= info["mem_mb"]


def test_the_benchmark_point_is_todays_point_of_its_raw_result(case):
    """The benchmark's raw JSONL through today's point rules: the point the ledger holds, ok (a p99
    of too small a sample withheld, with the recorded value); the record valid; /server_info through
    today's provenance: the SYNTHETIC simulator at the case's TP size, as the record says."""
    lines = (case / "bench" / "ledger.jsonl").read_text().splitlines()
    assert len(lines) == 1
    record = json.loads(lines[0])
    assert sglang_ledger.validate_record(record) == []
    assert record["points"]
    for point in record["points"]:
        raw = case / "bench" / "raw" / record["run_id"] / point["output_file"].rsplit("/", 1)[-1]
        result = points.parse_result_lines(raw.read_text())[-1]
        rebuilt = points.point_from_result(result, point["concurrency"], point["repeat"], point["num_prompts"])
        assert rebuilt["status"] == point["status"] == "ok"
        withheld = rebuilt.get("withheld_percentiles") or {}
        for key in points.METRIC_KEYS:
            # Recorded before a percentile needed a sample that supports it: today's rules withhold it.
            got = withheld[key]["value"] if key in withheld else rebuilt[key]
            assert got == point[key], key
    info = load_json(case / "server-info.json")
    assert sglang_provenance.target_is_simulator(info) is record["target_is_simulator"] is True
    assert sglang_provenance.model_from(info) == record["model"]
    assert record["model"]["tp_size"] == load_json(case / "case.json")["tp_size"]


def test_recording_is_scrubbed():
    found = set()
    for path in RECORDINGS.rglob("*"):
        if path.is_file():
            found.update(ANY_UUID.findall(path.read_text(errors="replace")))
    assert found, "the recording should carry (placeholder) GPU UUIDs"
    assert all(PLACEHOLDER_UUID.match(uuid) for uuid in found), sorted(found)
