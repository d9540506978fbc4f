"""GPU helpers shared by the nvidia-smi, GPU-telemetry and preflight tests (tests/unit and
tests/integration): the recorded nvidia-smi output of tests/fixtures/nvidia-smi/, a stand-in
nvidia-smi in a temporary folder (stand-in/nvidia-smi plus output files), and the telemetry
summary expected from the rows fed to the stand-in, computed independently of the module's code.
"""

from __future__ import annotations

import shutil
import statistics
from pathlib import Path

import pytest

from helpers.paths import FIXTURES

HERE = FIXTURES / "nvidia-smi"
REAL = HERE / "h200-1gpu"
REAL_LOOP = HERE / "h200-1gpu-loop"
SYNTH = HERE / "synthesized"
STAND_IN = HERE / "stand-in" / "nvidia-smi"


def make_stand_in(folder, files):
    """Copy the stand-in nvidia-smi into ``folder`` with ``files`` ({name: text}) beside it.

    Names: query-gpu.out/.err/.rc, query-compute-apps.out/.err/.rc, lms.rows, lms.out/.err/.rc
    (see the script). Returns the path of the stand-in.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / "nvidia-smi"
    shutil.copy2(STAND_IN, target)
    target.chmod(0o755)
    for name, text in files.items():
        (folder / name).write_text(text)
    return target


def stand_in_calls(stand_in):
    """The argument lines the stand-in was called with."""
    log = Path(stand_in).parent / "calls.log"
    return log.read_text().splitlines() if log.exists() else []


# Columns of one sample row as the sampler writes them, written out independently of the module.
COLUMNS = ["timestamp", "index", "uuid", "power_w", "sm_clock_mhz", "mem_clock_mhz", "utilization_pct",
           "memory_used_mib", "temperature_c"]


def expected_summary(rows):
    """Summary computed from the rows fed to the sampler (lists of strings, COLUMNS order)."""
    by_gpu = {}
    for row in rows:
        by_gpu.setdefault(row[1], []).append(dict(zip(COLUMNS, row, strict=True)))
    out = {}
    for index, samples in by_gpu.items():
        def values(column, samples=samples):
            return [float(s[column]) for s in samples if not s[column].startswith("[")]

        power, sm, util, mem = (values(c) for c in ("power_w", "sm_clock_mhz", "utilization_pct", "memory_used_mib"))
        out[index] = {
            "power_w_mean": statistics.fmean(power) if power else None,
            "power_w_max": max(power) if power else None,
            "sm_clock_mhz_mean": statistics.fmean(sm),
            "sm_clock_mhz_max": max(sm),
            "utilization_pct_mean": statistics.fmean(util),
            "utilization_pct_max": max(util),
            "memory_used_mib_peak": max(mem),
            "samples": len(samples),
        }
    return out


def assert_summary(actual, expected):
    assert sorted(actual) == sorted(expected)
    for index, entry in expected.items():
        assert sorted(actual[index]) == sorted(entry), index
        for key, value in entry.items():
            if value is None:
                assert actual[index][key] is None, (index, key)
            else:
                assert actual[index][key] == pytest.approx(value, abs=1e-3), (index, key)


def fed_rows(name="telemetry-2gpu.csv"):
    """The stand-in's rows (without its timestamp column) as lists of strings."""
    lines = (SYNTH / name).read_text().splitlines()
    return [["-"] + line.split(", ") for line in lines if line.strip()]
