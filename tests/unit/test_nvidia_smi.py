"""plugins/module_utils/nvidia_smi.py against real H200 output and labelled synthesized cases."""

from __future__ import annotations

import re
import threading

import helpers.gpu as support
import pytest
from ansible.module_utils import nvidia_smi
from ansible.module_utils.nvidia_smi import (
    build_snapshot,
    gpu_snapshot,
    memory_by_gpu,
    parse_field,
    pids_holding_gpu,
    subprocess_runner,
)

# The facts of one GPU row, in the order of the --query-gpu fields, written out here
# independently of the module's own table.
ROW_FACTS = [
    ("index", int),
    ("name", str),
    ("uuid", str),
    ("bus_id", str),
    ("driver", str),
    ("memory_total_mib", int),
    ("memory_used_mib", int),
    ("memory_free_mib", int),
    ("utilization_pct", int),
    ("temperature_c", int),
    ("power_w", float),
    ("sm_clock_mhz", int),
    ("mem_clock_mhz", int),
    ("compute_cap", str),
]


def read(folder, name):
    return (folder / name).read_text()


def naive_gpu_rows(text):
    """Expected facts by plain splitting on ", " (these fixtures have no comma in names)."""
    rows = []
    for line in text.splitlines():
        if not line.strip():
            continue
        values = line.split(", ")
        assert len(values) == len(ROW_FACTS), line
        row = {}
        for (key, kind), value in zip(ROW_FACTS, values, strict=True):
            row[key] = None if value.startswith("[") else kind(value)
        rows.append(row)
    return rows


def naive_apps(text):
    apps = []
    for line in text.splitlines():
        if line.strip():
            pid, name, used, uuid = line.split(", ")
            apps.append({"pid": int(pid), "process_name": name, "used_memory_mib": int(used), "gpu_uuid": uuid})
    return apps


def snapshot_of(gpu_text, apps_text="", gpu_rc=0, apps_rc=0, gpu_err="", apps_err=""):
    apps = None if gpu_rc else (apps_rc, apps_text, apps_err)
    return build_snapshot((gpu_rc, gpu_text, gpu_err), apps, "/usr/bin/nvidia-smi")


# --- the real H200 capture -----------------------------------------------------------------


def test_query_commands_are_the_recorded_ones():
    """The argv the module runs is the command the real capture was taken with (README)."""
    readme = read(support.REAL, "README.md")
    recorded = dict(re.findall(r"^\| (query-[a-z-]+?)(?:-busy)?\.csv \| `nvidia-smi ([^`]+)`", readme, re.M))
    assert nvidia_smi.query_gpu_argv("nvidia-smi")[1:] == recorded["query-gpu"].split()
    assert nvidia_smi.query_apps_argv("nvidia-smi")[1:] == recorded["query-compute-apps"].split()


def test_real_h200_row_busy():
    gpu_text = read(support.REAL, "query-gpu.csv")
    apps_text = read(support.REAL, "query-compute-apps-busy.csv")
    snap = snapshot_of(gpu_text, apps_text)

    assert snap["available"] is True
    assert snap["error"] is None and snap["error_class"] is None
    assert snap["processes_known"] is True
    (expected,) = naive_gpu_rows(gpu_text)
    (gpu,) = snap["gpus"]
    for key, _kind in ROW_FACTS:
        assert gpu[key] == expected[key], key
    assert gpu["name"] == "NVIDIA H200" and gpu["compute_cap"] == "9.0"
    assert gpu["healthy"] is True and gpu["problems"] == {}

    (app,) = naive_apps(apps_text)
    assert snap["processes"] == [dict(app, gpu_index=gpu["index"])]
    assert gpu["processes"] == [{k: app[k] for k in ("pid", "process_name", "used_memory_mib")}]
    assert pids_holding_gpu(snap, [app["pid"]]) == [dict(app, gpu_index=gpu["index"])]
    assert pids_holding_gpu(snap, [str(app["pid"]), app["pid"] + 1]) == [dict(app, gpu_index=gpu["index"])]
    assert pids_holding_gpu(snap, [app["pid"] + 1]) == []
    assert memory_by_gpu(snap) == {expected["index"]: expected["memory_used_mib"]}


def test_real_h200_idle_has_no_process():
    snap = snapshot_of(read(support.REAL, "query-gpu.csv"), read(support.REAL, "query-compute-apps-idle.csv"))
    assert read(support.REAL, "query-compute-apps-idle.csv") == ""
    assert snap["available"] is True and snap["error"] is None
    assert snap["processes"] == [] and snap["processes_known"] is True
    assert snap["gpus"][0]["processes"] == []
    assert pids_holding_gpu(snap, [422]) == []


def test_real_loop_capture_row_parses_as_gpu_row():
    """The second real capture (another day's values) goes through the same parser."""
    text = read(support.REAL_LOOP, "query-gpu.csv")
    snap = snapshot_of(text)
    assert [dict((k, g[k]) for k, _ in ROW_FACTS) for g in snap["gpus"]] == naive_gpu_rows(text)


@pytest.mark.parametrize(
    ("name", "rc", "needle"),
    [
        ("bad-field.txt", 2, 'Field "bogus_field" is not a valid field to query.'),
        ("bad-id.txt", 6, "No devices were found"),
    ],
)
def test_real_error_outputs_are_failed(name, rc, needle):
    snap = snapshot_of(read(support.REAL_LOOP, name), gpu_rc=rc)
    assert snap["available"] is False
    assert snap["error_class"] == "failed"
    assert needle in snap["error"] and f"status {rc}" in snap["error"]
    assert snap["gpus"] == [] and snap["processes_known"] is False


# --- synthesized cases (tests/fixtures/nvidia-smi/synthesized/README.md) --------------------


def test_not_available_fields_are_none_and_not_problems():
    text = read(support.SYNTH, "query-gpu-na.csv")
    snap = snapshot_of(text)
    (gpu,) = snap["gpus"]
    raw = dict(zip([k for k, _ in ROW_FACTS], text.strip().split(", "), strict=True))
    na_keys = {k for k, v in raw.items() if v in ("[N/A]", "[Not Supported]")}
    assert na_keys == {"utilization_pct", "power_w", "sm_clock_mhz", "mem_clock_mhz"}
    for key in na_keys:
        assert gpu[key] is None, key
    assert gpu["memory_total_mib"] == int(raw["memory_total_mib"])
    assert gpu["healthy"] is True and gpu["problems"] == {}
    assert snap["error"] is None


@pytest.mark.parametrize(
    ("gpu_file", "apps_file"),
    [
        ("query-gpu-2gpu.csv", "query-compute-apps-2gpu.csv"),
        ("query-gpu-8gpu.csv", "query-compute-apps-8gpu.csv"),
    ],
)
def test_multi_gpu_rows_and_process_mapping(gpu_file, apps_file):
    gpu_text, apps_text = read(support.SYNTH, gpu_file), read(support.SYNTH, apps_file)
    snap = snapshot_of(gpu_text, apps_text)
    expected = naive_gpu_rows(gpu_text)
    assert [dict((k, g[k]) for k, _ in ROW_FACTS) for g in snap["gpus"]] == expected
    assert memory_by_gpu(snap) == {row["index"]: row["memory_used_mib"] for row in expected}

    index_of = {row["uuid"]: row["index"] for row in expected}
    apps = naive_apps(apps_text)
    assert snap["processes"] == [dict(app, gpu_index=index_of[app["gpu_uuid"]]) for app in apps]
    for gpu in snap["gpus"]:
        on_gpu = [a["pid"] for a in apps if index_of[a["gpu_uuid"]] == gpu["index"]]
        assert [p["pid"] for p in gpu["processes"]] == on_gpu
    pids = [a["pid"] for a in apps]
    assert [p["pid"] for p in pids_holding_gpu(snap, pids)] == sorted(pids)


def test_process_name_with_commas_and_unknown_gpu():
    snap = snapshot_of(read(support.REAL, "query-gpu.csv"), read(support.SYNTH, "query-compute-apps-odd-names.csv"))
    first, mig = snap["processes"]
    assert first["process_name"] == "/usr/bin/python3 -c import torch, time"
    assert first["used_memory_mib"] == 8802 and first["gpu_index"] == 0
    assert mig["gpu_index"] is None and mig["used_memory_mib"] is None
    assert mig["gpu_uuid"].startswith("MIG-")
    assert snap["error"] is None and snap["processes_known"] is True


def test_gpu_name_with_comma_is_kept():
    row = read(support.REAL, "query-gpu.csv").replace("NVIDIA H200", "NVIDIA H200, special, edition")
    (gpu,) = snapshot_of(row)["gpus"]
    assert gpu["name"] == "NVIDIA H200, special, edition"
    assert gpu["compute_cap"] == "9.0" and gpu["memory_total_mib"] == 143771


def test_gpu_in_bad_state():
    text = read(support.SYNTH, "query-gpu-bad-state.csv")
    snap = snapshot_of(text)
    good, bad = snap["gpus"]
    assert good["healthy"] is True
    assert bad["healthy"] is False
    raw = dict(zip([k for k, _ in ROW_FACTS], text.splitlines()[1].split(", "), strict=True))
    expected_problems = {k: v for k, v in raw.items() if v.startswith("[") or v == "Unknown Error"}
    assert bad["problems"] == expected_problems
    assert all(bad[k] is None for k in expected_problems)
    assert memory_by_gpu(snap) == {0: good["memory_used_mib"], 1: None}
    # The snapshot is usable but says what is wrong.
    assert snap["available"] is True
    assert snap["error_class"] == "failed"
    assert "GPU 1" in snap["error"] and "[GPU requires reset]" in snap["error"]


def test_unreachable_gpu_beside_a_good_one():
    text = read(support.SYNTH, "query-gpu-unreachable.txt")
    snap = snapshot_of(text, gpu_rc=15)
    assert [g["index"] for g in snap["gpus"]] == [0]
    assert snap["available"] is True
    assert snap["error_class"] == "failed"
    assert "Unable to determine the device handle" in snap["error"]
    assert snap["messages"] == [text.splitlines()[1]]
    # The process query was not trusted after a failed GPU query.
    assert snap["processes_known"] is False


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_nvml_mismatch(stream):
    text = read(support.SYNTH, "nvml-mismatch.txt")
    kwargs = {"gpu_text": text} if stream == "stdout" else {"gpu_text": "", "gpu_err": text}
    snap = snapshot_of(gpu_rc=18, **kwargs)
    assert snap["available"] is False
    assert snap["error_class"] == "nvml_mismatch"
    assert "Driver/library version mismatch" in snap["error"]
    assert "installed NVML library 580.95" in snap["error"]
    assert "reboot" in snap["error"]


def test_driver_not_loaded_is_failed():
    snap = snapshot_of(read(support.SYNTH, "driver-not-loaded.txt"), gpu_rc=9)
    assert snap["available"] is False and snap["error_class"] == "failed"
    assert "couldn't communicate with the NVIDIA driver" in snap["error"]


def test_empty_gpu_list_with_status_zero_is_failed():
    snap = snapshot_of("")
    assert snap["available"] is False and snap["error_class"] == "failed"
    assert "no GPU" in snap["error"]


def test_failed_process_query_makes_processes_unknown():
    snap = snapshot_of(read(support.REAL, "query-gpu.csv"), "", apps_rc=255, apps_err="Unknown Error")
    assert snap["available"] is True
    assert snap["processes"] == [] and snap["processes_known"] is False
    assert snap["error_class"] == "failed" and "compute-apps" in snap["error"]


@pytest.mark.parametrize(
    ("raw", "kind", "expected"),
    [
        ("143771", int, (143771, None)),
        (" 124.30", float, (124.3, None)),
        ("[N/A]", float, (None, None)),
        ("N/A", int, (None, None)),
        ("[Not Supported]", int, (None, None)),
        ("", int, (None, None)),
        ("[GPU requires reset]", int, (None, "[GPU requires reset]")),
        ("[Unknown Error]", float, (None, "[Unknown Error]")),
        ("Unknown Error", int, (None, "Unknown Error")),
        ("NVIDIA H200", str, ("NVIDIA H200", None)),
    ],
)
def test_parse_field(raw, kind, expected):
    assert parse_field(raw, kind) == expected


# --- the runner and missing binaries ----------------------------------------------------------


def never_called(argv):
    raise AssertionError(f"nvidia-smi must not be run, got {argv!r}")


def test_missing_path_is_reported_without_running(tmp_path):
    snap = gpu_snapshot(never_called, str(tmp_path / "no-such" / "nvidia-smi"))
    assert snap["available"] is False and snap["error_class"] == "missing"
    assert "no-such/nvidia-smi" in snap["error"]


def test_missing_on_path_is_reported(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    snap = gpu_snapshot(never_called)
    assert snap["error_class"] == "missing" and str(tmp_path) in snap["error"]


def test_not_executable_is_missing(tmp_path):
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\n")
    script.chmod(0o644)
    assert gpu_snapshot(never_called, str(script))["error_class"] == "missing"


def test_stand_in_through_subprocess_runner(tmp_path, monkeypatch):
    gpu_text = read(support.SYNTH, "query-gpu-2gpu.csv")
    apps_text = read(support.SYNTH, "query-compute-apps-2gpu.csv")
    stand_in = support.make_stand_in(tmp_path, {"query-gpu.out": gpu_text, "query-compute-apps.out": apps_text})
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")

    snap = gpu_snapshot(subprocess_runner(30))

    assert snap == build_snapshot((0, gpu_text, ""), (0, apps_text, ""), str(stand_in))
    # One call of each query; they run at once, so the log's order is either.
    assert sorted(support.stand_in_calls(stand_in)) == sorted([
        " ".join(nvidia_smi.query_gpu_argv("x")[1:]),
        " ".join(nvidia_smi.query_apps_argv("x")[1:]),
    ])


def test_stand_in_mismatch_through_subprocess_runner(tmp_path):
    text = read(support.SYNTH, "nvml-mismatch.txt")
    apps_text = read(support.SYNTH, "query-compute-apps-2gpu.csv")
    stand_in = support.make_stand_in(tmp_path, {"query-gpu.out": text, "query-gpu.rc": "18",
                                                "query-compute-apps.out": apps_text})
    snap = gpu_snapshot(subprocess_runner(30), str(stand_in))
    assert snap["error_class"] == "nvml_mismatch" and "status 18" not in snap["error"]
    # The process query ran beside the GPU query, but its answer proves nothing once the GPU query failed.
    assert snap["processes"] == [] and snap["processes_known"] is False
    assert snap == build_snapshot((18, text, ""), None, str(stand_in))


def test_both_queries_are_in_flight_at_once():
    """A snapshot costs one nvidia-smi start, not two: each query waits at a barrier that only both
    together pass (queries made one after the other break it instead)."""
    barrier = threading.Barrier(2, timeout=10)
    gpu_text = read(support.SYNTH, "query-gpu-2gpu.csv")
    apps_text = read(support.SYNTH, "query-compute-apps-2gpu.csv")

    def run_command(argv):
        barrier.wait()
        return 0, (gpu_text if any(a.startswith("--query-gpu") for a in argv) else apps_text), ""

    snap = gpu_snapshot(run_command, "/bin/true")
    assert snap == build_snapshot((0, gpu_text, ""), (0, apps_text, ""), "/bin/true")


def test_subprocess_runner_reports_missing_and_hang(tmp_path):
    assert subprocess_runner(5)([str(tmp_path / "absent")])[0] == 127
    hang = tmp_path / "hang"
    hang.write_text("#!/bin/sh\nexec sleep 30\n")
    hang.chmod(0o755)
    rc, _out, err = subprocess_runner(1)([str(hang)])
    assert rc == 124 and "did not answer" in err
    snap = gpu_snapshot(subprocess_runner(1), str(hang))
    assert snap["available"] is False and snap["error_class"] == "failed"
    assert "did not answer within 1 s" in snap["error"]
