"""Ledger records as the report and statistics tests build them: the real
sglang_ledger.build_record on made-up bench_serving points, and campaign cells (the same, plus the
campaign key), with the calibration and SLO-search files a campaign writes beside its ledgers."""

from __future__ import annotations

import itertools
from pathlib import Path

import sglang_ledger as ledger

WORKLOAD = {
    "dataset_name": "random",
    "input_len": 1024,
    "output_len": 1024,
    "random_range_ratio": 1.0,
    "request_rate": "inf",
    "seed": 1,
}
MODEL_PATH = "lukealonso/GLM-5-NVFP4"


def throughput_point(concurrency, output, total, tpot, *, status="ok", **metrics):
    """One bench_serving point with the ledger's metric names: output and total tok/s and mean TPOT
    (ms), plus ``metrics`` (more of bench_serving's keys)."""
    return {
        "concurrency": concurrency,
        "repeat": 0,
        "num_prompts": max(2 * concurrency, 10),
        "status": status,
        "completed": max(2 * concurrency, 10),
        "failed": 0,
        "output_throughput": output,
        "total_throughput": total,
        "mean_tpot_ms": tpot,
        **metrics,
    }


def record(tier, points, *, run_id, host="node-a", workload=WORKLOAD, failure=None, simulator=False, **provenance):
    """A ledger record of ``points`` by the real build_record; ``provenance``: more of its keys (gpu, ...)."""
    return ledger.build_record(
        host=host,
        tier=tier,
        run_id=run_id,
        workload=workload,
        points=points,
        failure=failure,
        provenance={"target_is_simulator": simulator, "model": {"model_path": MODEL_PATH}, **provenance},
    )


def write_ledger(path: Path, records: list[dict]) -> Path:
    """Append ``records`` to the ledger at ``path`` (sglang_ledger.append_record), folders created."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for entry in records:
        ledger.append_record(str(path), entry)
    return path


# --------------------------------------------------------------------------- campaign cells

CAMPAIGN_WORKLOAD = {**WORKLOAD, "concurrency": [1, 1024], "repeats": 1}
# The seeds' baseline at two points: output tok/s, total tok/s, mean TPOT ms.
CAMPAIGN_SEEDS = {1: (9.17, 12.40, 108.0), 1024: (1520.55, 3028.87, 523.0)}
# Run-to-run noise of five repeats (±2 %), and a second draw of the same size.
NOISE = (1.0, 1.02, 0.98, 1.01, 0.99)
H200 = {"available": True, "gpus": [{"index": 0, "name": "NVIDIA H200"}, {"index": 1, "name": "NVIDIA H200"}]}
_ids = itertools.count(1)


def point(concurrency, output, total, tpot, factor=1.0, status="ok"):
    """A throughput point with TPOT and TTFT percentiles too; ``factor`` scales throughput up and
    latency down (a faster server)."""
    return throughput_point(
        concurrency,
        output * factor,
        total * factor,
        tpot / factor,
        status=status,
        median_tpot_ms=tpot / factor * 0.98,
        p99_tpot_ms=tpot / factor * 1.4,
        mean_ttft_ms=300.0 / factor,
        median_ttft_ms=280.0 / factor,
        p99_ttft_ms=900.0 / factor,
    )


def sweep(factor=1.0, seeds=CAMPAIGN_SEEDS):
    return [point(c, *values, factor=factor) for c, values in seeds.items()]


def cell(
    arm,
    repeat,
    pts,
    *,
    role="tier",
    tier=None,
    host="node-a",
    workload="default",
    attempt=1,
    failure=None,
    simulator=False,
    gpu=H200,
    campaign="demo",
    warmup=None,
):
    """A campaign cell's record: the real build_record, plus the campaign key (and a warm-up)."""
    tier = tier or (arm.split("~")[0] if role == "aa" else arm)
    entry = record(tier, pts, run_id=f"run{next(_ids)}-{tier}", host=host, workload=CAMPAIGN_WORKLOAD,
                   failure=failure, simulator=simulator, gpu=gpu)
    entry["campaign"] = {
        "name": campaign,
        "file_sha256": "0" * 64,
        "cell": f"{arm}/{workload}/r{repeat}",
        "key": f"{next(_ids):064x}",
        "arm": arm,
        "role": role,
        "tier": tier,
        "workload": workload,
        "repeat": repeat,
        "attempt": attempt,
        "fingerprint": {"kernel": "6.8"},
    }
    if warmup is not None:
        entry["warmup"] = warmup
    return entry


def campaign(arms, repeats=5, host="node-a", **kwargs):
    """Interleaved cells, as a campaign runs them: every arm once per repeat, in order.

    ``arms``: (arm, role, factors per repeat) triples."""
    records = []
    for repeat in range(1, repeats + 1):
        for arm, role, factors in arms:
            records.append(cell(arm, repeat, sweep(factors[repeat - 1]), role=role, host=host, **kwargs))
    return records


BASE = ("baseline", "baseline", NOISE)
AA = ("baseline~aa", "aa", (1.005, 0.985, 1.015, 0.995, 1.02))  # another draw of the same noise
CRASH = {"class": "dynamo_fp4_crash", "step": "start", "message": "torch._dynamo.exc.Unsupported: allocate_lock"}


def calibration_cell(host, values, role="calibration", status_failure=None):
    """A node-calibration record: the baseline once on the host, before the campaign."""
    record = cell("baseline", 1, sweep(values), role=role, host=host, failure=status_failure, workload="default")
    record["campaign"]["cell"] = "calibration/default/r1"
    return record


# The node calibration a campaign writes (calibration.json).
CALIBRATION_FILE = {
    "campaign": "demo",
    "metric": "output_throughput",
    "max_deviation_pct": 10.0,
    "hosts": {
        "node-b": {
            "values": {"16": 610.0, "1": 90.0},
            "deviation_pct": -12.5,
            "throttling": ["HW Slowdown"],
            "telemetry": "ok",
            "flagged": True,
            "reasons": ["12.5% below the fleet median (max 10%)", "HW Slowdown"],
            "excluded": True,
        },
        "node-a": {
            "values": {"1": 95.0, "16": 700.0},
            "deviation_pct": 0.0,
            "throttling": [],
            "telemetry": "nvidia-smi not found",
            "flagged": False,
            "reasons": [],
            "excluded": False,
        },
        "node-c": {"values": {"16": 720.0, "x": 1.0}, "deviation_pct": None},
        "node-d": "broken",
    },
}

# One SLO search, as module sglang_slo_search records it under slo_search.
SEARCH = {
    "tier": "baseline",
    "dimension": "concurrency",
    "fixed": {"request_rate": "inf"},
    "slo": [{"metric": "p99_ttft_ms", "bound": "max", "limit": 420.0}],
    "low": 1,
    "high": 32,
    "tolerance": 1,
    "answer": 11,
    "bounded": True,
    "outcome": "bracketed",
    "bracket": [11, 12],
    "reason": "11 meets the SLO (p99_ttft_ms <= 420) and 12 does not (tolerance 1)",
    "warnings": [],
    "consistent": True,
    "synthetic": True,
    "probes": [
        {
            "index": 0,
            "value": 1,
            "concurrency": 1,
            "request_rate": "inf",
            "num_prompts": 8,
            "met": True,
            "status": "ok",
            "error": None,
            "checks": [{"metric": "p99_ttft_ms", "bound": "max", "limit": 420.0, "value": 25.4, "met": True}],
        },
        {
            "index": 1,
            "value": 32,
            "concurrency": 32,
            "met": False,
            "status": "failed",
            "error": {"class": "bench_timeout", "message": "past 60 s"},
            "checks": [{"metric": "p99_ttft_ms", "value": None, "met": False, "missing": True}],
        },
    ],
}
